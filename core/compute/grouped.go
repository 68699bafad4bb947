package compute

import (
	"github.com/eidolon-sim/eidolon/core/model"
)

// grouped prices a grouped GEMM (the experts of a mixture-of-experts
// block in one kernel, as Megatron-Core's legacy GroupedMLP runs them
// through CUTLASS grouped GEMM): each expert's product goes through the GEMM
// tile model with its own M (its token count; for a weight gradient, its
// own reduction length), so an expert with few tokens pays its padded tiles
// and its partial wave; the experts run back to back in one launch.
// Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP) instead
// issues one cuBLAS GEMM per expert over several streams; what each of
// those calls costs beyond its kernel is not modelled (MOE_FIDELITY.md).
// Experts that received no tokens cost nothing (a weight gradient of an
// idle expert is a zero fill, left out).
func (e *Evaluator) grouped(o model.Op) (Cost, error) {
	var sum Cost
	launch := e.gpu.KernelLaunchS
	var slowest float64
	for i, g := range o.Groups {
		if g <= 0 {
			continue
		}
		m, n, k := g, o.N, o.K
		if o.GroupK {
			m, k = o.K, g
		}
		one := model.NewGEMM(o.Name, o.DType, 1, m, n, k)
		one.Accumulate, one.SplitAccumulator = o.Accumulate, o.SplitAccumulator
		c, err := e.Op(one)
		if err != nil {
			return Cost{}, err
		}
		sum.ExecutedFLOPs += c.ExecutedFLOPs
		sum.BytesSMEM += c.BytesSMEM
		sum.BytesL2 += c.BytesL2
		sum.BytesHBM += c.BytesHBM
		sum.TimeS += c.TimeS - float64(max(c.Kernels, 1))*launch
		sum.Waves += c.Waves
		if c.TimeS > slowest || i == 0 {
			slowest = c.TimeS
			sum.Bound, sum.TileM, sum.TileN, sum.TileK, sum.SplitK = c.Bound, c.TileM, c.TileN, c.TileK, c.SplitK
		}
	}
	sum.Kernels = 1
	sum.TimeS += launch
	sum.FLOPs = o.FLOPs
	if sum.ExecutedFLOPs > 0 {
		sum.TileEfficiency = o.FLOPs / sum.ExecutedFLOPs
	}
	if sum.BytesHBM > 0 {
		sum.Intensity = sum.FLOPs / sum.BytesHBM
	}
	sum.AchievedFLOPsPerS = o.FLOPs / sum.TimeS
	return sum, nil
}
