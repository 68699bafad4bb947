// Package compute prices one operator on one GPU: a roofline over the
// memory hierarchy (shared memory, L2, HBM) and the math units, with the
// traffic at each level derived from how the kernel tiles its work, plus the
// kernel launch cost. TimeS is the device's kernel time (what a profiler's
// kernel timer measures); the host's cost of issuing kernels is not here
// (package exec models the host: exec.Host).
// The rates are fitted per GPU on measured kernel times where a table
// exists (hw presets; bench/fidelity/KERNELS.md gives the held-out error):
// a GEMM searches its tile shape (memoized per shape in an Evaluator the
// caller owns) and runs in waves of tiles over the SMs, each tile its
// K-steps at the main loop's MMA rate plus a fixed prologue and epilogue,
// with the partial-wave loss and a rounded roofline knee against HBM;
// FlashAttention tiles queries and streams keys and values; streaming
// kernels (elementwise, norms, scans, optimizer) make one pass over their
// tensors at the bandwidth of their implementation (vectorized, row
// kernel, gather), row kernels with a latency chain. Every kernel pays a
// fixed device time (hw.GPU.KernelLaunchS).
//
// Tensor-parallel collectives (model ops with IsComm) are not priced here:
// package net simulates them.
package compute

import (
	"fmt"
	"math"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// Bound names what limits an operator.
type Bound string

const (
	BoundCompute Bound = "compute"
	BoundSMEM    Bound = "smem"
	BoundL2      Bound = "l2"
	BoundHBM     Bound = "hbm"
	BoundLaunch  Bound = "launch"
	// BoundLatency: a row kernel waiting on one memory latency per loop
	// iteration (few rows, wide rows), or a gather's dependent loads taking
	// longer than its bytes.
	BoundLatency Bound = "latency"
)

// Cost is an operator's price on a GPU.
type Cost struct {
	// FLOPs is the operator's arithmetic (model.Op.FLOPs); ExecutedFLOPs
	// what the kernel performs, padding included (a GEMM tile computes its
	// padded edges, FlashAttention whole blocks across the causal diagonal).
	FLOPs, ExecutedFLOPs float64
	// Bytes moved at each level: shared memory reads by the math units, L2
	// reads and writes by the SMs, HBM reads and writes.
	BytesSMEM, BytesL2, BytesHBM float64
	// Intensity is FLOPs per HBM byte (the roofline's x axis).
	Intensity float64
	Bound     Bound
	// TimeS is the device time of the kernels including their launch;
	// each level's time is its bytes over its bandwidth, the math's its
	// FLOPs over the sustained peak, and the kernel takes the slowest of
	// them. The host's issue cost is not included (exec.Host adds it).
	TimeS float64
	// AchievedFLOPsPerS is the op's own (unpadded) FLOPs over TimeS.
	AchievedFLOPsPerS float64
	// Kernels is the number of kernel launches.
	Kernels int
	// GEMM only: the chosen tile, split-K factor, waves over the SMs, and the
	// fraction of the launched tile work that is useful (padding and the
	// partial last wave are the losses).
	TileM, TileN, TileK, SplitK int
	Waves                       int
	TileEfficiency              float64
}

// smemBytesPerClkPerSM is the shared-memory bandwidth of one SM: 32 banks of
// 4 bytes per clock (NVIDIA CUDA C++ Programming Guide, "Shared Memory"); AMD
// CDNA 3's LDS also serves 128 bytes per clock per CU (CDNA 3 whitepaper).
const smemBytesPerClkPerSM = 128

// Evaluator prices operators on one GPU and memoizes GEMM tile searches.
// It is not safe for concurrent use; give each goroutine its own.
type Evaluator struct {
	gpu   hw.GPU
	gemms map[gemmKey]gemmPlan
	// flashBwdLaneOps is FlashBackwardLaneOpsPerScore unless a fit varies it.
	flashBwdLaneOps float64
}

// NewEvaluator returns an evaluator for a GPU.
func NewEvaluator(g hw.GPU) *Evaluator {
	return &Evaluator{gpu: g, gemms: map[gemmKey]gemmPlan{}, flashBwdLaneOps: FlashBackwardLaneOpsPerScore}
}

// NewEvaluatorFlashBackward is NewEvaluator pricing FlashAttention's
// backward with laneOps in place of FlashBackwardLaneOpsPerScore: what its
// fit varies.
func NewEvaluatorFlashBackward(g hw.GPU, laneOps float64) *Evaluator {
	e := NewEvaluator(g)
	e.flashBwdLaneOps = laneOps
	return e
}

// GPU returns the evaluator's GPU.
func (e *Evaluator) GPU() hw.GPU { return e.gpu }

func (e *Evaluator) smemBW() float64 {
	return smemBytesPerClkPerSM * float64(e.gpu.SMCount) * e.gpu.ClockHz
}

// mathPeak is the rate of an op's arithmetic: tensor cores for matmuls of
// their type at their measured sustained rate (hw.GPU.TensorPeak; fp32
// matmuls run on the CUDA cores), the fp32 vector units for everything else
// (elementwise math is done in fp32 whatever the storage).
func (e *Evaluator) mathPeak(o model.Op) float64 {
	if o.Tensor {
		return e.gpu.TensorPeak(o.DType)
	}
	return e.gpu.VectorFP32FlopsPerS
}

// Supports reports whether the GPU has math units for an op's data type.
func (e *Evaluator) Supports(d hw.DType) bool { return e.gpu.Peak(d) > 0 }

// Op prices one operator. Collectives and data types the GPU lacks are errors.
func (e *Evaluator) Op(o model.Op) (Cost, error) {
	if o.IsComm() {
		return Cost{}, fmt.Errorf("compute: %s is a collective (%s), priced by the network model", o.Name, o.Kind)
	}
	if o.Tensor && !e.Supports(o.DType) {
		return Cost{}, fmt.Errorf("compute: %s needs %s math, which %s does not have", o.Name, o.DType, e.gpu.Name)
	}
	switch o.Kind {
	case model.GEMM:
		return e.gemm(o), nil
	case model.GroupedGEMM:
		if o.Fused && !o.GroupK {
			return e.fusedGrouped(o), nil
		}
		return e.grouped(o)
	case model.FlashAttention, model.FlashAttentionBwd:
		return e.flash(o), nil
	case model.DecodeAttention:
		return e.decode(o), nil
	default:
		return e.streaming(o, implOf(o)), nil
	}
}

// OpAs prices a streaming operator as written by a given kernel
// implementation instead of the one its kind defaults to (for example a
// fused activation written as a row kernel, as vLLM and sarathi do).
// Other kinds ignore impl.
func (e *Evaluator) OpAs(o model.Op, impl Impl) (Cost, error) {
	switch o.Kind {
	case model.GEMM, model.FlashAttention, model.FlashAttentionBwd, model.DecodeAttention:
		return e.Op(o)
	}
	if o.IsComm() {
		return e.Op(o)
	}
	return e.streaming(o, impl), nil
}

// finish takes the slowest level, adds the launches and the kernel's fixed
// device time (fixedS: GEMM tiles' prologues and epilogues) and fills the
// derived fields; hbmShare is the fraction of the sustained HBM bandwidth
// the kernel can draw.
func (e *Evaluator) finish(c Cost, usefulFLOPs, mathTime, hbmShare, fixedS float64) Cost {
	return e.finishBW(c, usefulFLOPs, mathTime, e.gpu.HBMBandwidth()*hbmShare, fixedS, 0)
}

// finishBW is finish with the kernel's HBM bandwidth given. The kernel
// takes the slowest of its math and its memory levels; overlapP > 0 also
// rounds the knee between math and HBM to their p-norm
// (math^p + hbm^p)^(1/p): near the ridge neither the MMA pipe nor the
// DRAM stream is kept busy all the time (on-chip levels overlap fully).
func (e *Evaluator) finishBW(c Cost, usefulFLOPs, mathTime, hbmBW, fixedS, overlapP float64) Cost {
	g := e.gpu
	level := []struct {
		b Bound
		t float64
	}{
		{BoundCompute, mathTime},
		{BoundSMEM, c.BytesSMEM / e.smemBW()},
		{BoundL2, c.BytesL2 / g.L2BandwidthBytesPerS},
		{BoundHBM, c.BytesHBM / hbmBW},
	}
	best := level[0]
	for _, l := range level[1:] {
		if l.t > best.t {
			best = l
		}
	}
	if hbm := level[3].t; overlapP > 0 && mathTime > 0 && hbm > 0 && !math.IsInf(mathTime+hbm, 1) {
		knee := max(mathTime, hbm) * math.Pow(math.Pow(mathTime/max(mathTime, hbm), overlapP)+math.Pow(hbm/max(mathTime, hbm), overlapP), 1/overlapP)
		if knee > best.t {
			best.t = knee
			if hbm > mathTime {
				best.b = BoundHBM
			} else {
				best.b = BoundCompute
			}
		}
	}
	if c.Kernels == 0 {
		c.Kernels = 1
	}
	launch := float64(c.Kernels)*g.KernelLaunchS + fixedS
	c.Bound = best.b
	if launch > best.t {
		c.Bound = BoundLaunch
	}
	c.TimeS = best.t + launch
	c.FLOPs = usefulFLOPs
	if c.ExecutedFLOPs == 0 {
		c.ExecutedFLOPs = usefulFLOPs
	}
	if c.BytesHBM > 0 {
		c.Intensity = c.FLOPs / c.BytesHBM
	}
	c.AchievedFLOPsPerS = usefulFLOPs / c.TimeS
	return c
}

// kernelsPerOp is how many kernels an operator launches: the Mamba-2 SSD
// forward is five Triton kernels (chunk cumsum, C·Bᵀ, chunk state, state
// passing, chunk scan) and its backward seven (mamba_ssm ssd_combined.py);
// every other operator is one kernel.
func kernelsPerOp(o model.Op) int {
	if o.Kind == model.SSDScan {
		if o.Pass == model.Backward {
			return 7
		}
		return 5
	}
	return 1
}

func safeDiv(a, b float64) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return a / b
}

// Time sums the kernel times of ops run one after another, skipping the
// collectives (which the network prices).
func (e *Evaluator) Time(ops []model.Op) (float64, error) {
	t := 0.0
	for _, o := range ops {
		if o.IsComm() {
			continue
		}
		c, err := e.Op(o)
		if err != nil {
			return 0, err
		}
		t += c.TimeS
	}
	return t, nil
}
