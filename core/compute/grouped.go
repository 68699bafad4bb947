package compute

import (
	"math"

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
		one.Accumulate, one.SplitAccumulator, one.WeightDType, one.TokensK = o.Accumulate, o.SplitAccumulator, o.WeightDType, o.GroupK
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

// fusedGrouped prices a fused MoE kernel (vLLM's fused_moe Triton kernel,
// model.Op.Fused): one grid over every expert's tiles, each expert's
// tokens padded to the tile's rows (moe_align_block_size pads them to
// BLOCK_SIZE_M), so the experts share waves instead of each paying its
// own partial wave, and small token counts take small tiles (its configs
// go down to 16 rows, the tensor cores' MMA height). Each tile runs its
// K-steps at the main loop's MMA rate plus the fixed prologue and epilogue,
// as a GEMM's tiles (searchTiles); the traffic is compulsory: each routed
// token's row, each expert's weights that receive tokens once, each
// output row. No split-K (the kernel has none). A block-scaled FP8 one
// (DeepGEMM's grouped kernels, SGLang's w8a8_block_fp8 fused MoE) promotes
// as a GEMM's tiles do (promotionS).
func (e *Evaluator) fusedGrouped(o model.Op) Cost {
	g := e.gpu
	in, out, sms, peakSM, overheadS := e.tileRates(o.DType)
	inB := weightBytes(o.WeightDType, in)
	var rows, hit int64
	for _, m := range o.Groups {
		if m > 0 {
			rows += m
			hit++
		}
	}
	useful := 2 * float64(rows) * float64(o.N) * float64(o.K)
	best := Cost{TimeS: math.Inf(1)}
	tilesThatFit(g, in, []int64{128, 64, 32, 16}, []int64{128, 64}, func(bm, bn, bk int64) {
		var tiles int64
		for _, m := range o.Groups {
			if m > 0 {
				tiles += ceil(m, bm) * ceil(o.N, bn)
			}
		}
		waves := ceil(tiles, sms)
		kp := ceil(o.K, bk) * bk
		tileFLOPs := 2 * float64(bm*bn*kp)
		c := Cost{TileM: int(bm), TileN: int(bn), TileK: int(bk), SplitK: 1, Waves: int(waves), Kernels: 1}
		c.ExecutedFLOPs = float64(tiles) * tileFLOPs
		mathTime := float64(waves)*tileFLOPs/peakSM + e.promotionS(e.promotionK(o), waves, bm, bn, kp)
		wm, wn := min(bm, 64), min(bn, 64)
		c.BytesSMEM = float64(tiles) * (float64(bm*max(bn/wn, 1))*in + float64(bn*max(bm/wm, 1))*inB) * float64(kp)
		outBytes := float64(rows*o.N) * out
		c.BytesL2 = float64(tiles)*(float64(bm)*in+float64(bn)*inB)*float64(kp) + outBytes
		c.BytesHBM = float64(rows*o.K)*in + float64(hit*o.K*o.N)*inB + outBytes
		c = e.finishBW(c, useful, mathTime, g.GEMMBandwidth(), float64(waves)*overheadS, gemmOverlapP)
		if waves > 0 {
			c.TileEfficiency = useful / (float64(waves*sms) * tileFLOPs)
		}
		best = faster(best, c)
	})
	if hit == 0 {
		// No routed token: the kernel launches and returns.
		best = e.finishBW(Cost{Kernels: 1}, 0, 0, g.GEMMBandwidth(), 0, 0)
	}
	if best.BytesHBM > 0 {
		best.Intensity = best.FLOPs / best.BytesHBM
	}
	best.AchievedFLOPsPerS = best.FLOPs / best.TimeS
	return best
}
