// Package hw holds hardware specifications: GPUs and links, with presets
// taken from the vendors' published figures (each cites its source).
// All fields are SI: bytes, bytes per second, seconds, hertz, FLOP/s.
package hw

// DType is a numeric data type of operands.
type DType string

const (
	FP32 DType = "fp32"
	TF32 DType = "tf32"
	BF16 DType = "bf16"
	FP16 DType = "fp16"
	FP8  DType = "fp8"
	INT8 DType = "int8"
	// FP4 is NVFP4 (Blackwell's block-scaled 4-bit floats): E2M1 elements
	// with an E4M3 scale per 16 of them (NVIDIA, "Introducing NVFP4 for
	// efficient and accurate low-precision inference", 2025), 4.5 bits an
	// element; the tensor cores apply the scales in the MMA.
	FP4 DType = "fp4"
	// INT4 is a storage type only (weight-only quantization: GPTQ, AWQ and
	// the Marlin kernels that run them dequantize to 16 bits before the
	// MMA); no GPU has int4 math units here, so it is not in DTypes.
	INT4 DType = "int4"
	// MXFP4 is a storage type only: OCP microscaling FP4, E2M1 elements
	// with an E8M0 scale per 32 (4.25 bits an element), the format of
	// gpt-oss's released expert weights (OpenAI's model card, arXiv
	// 2508.10925, §2: "we quantize the MoE weights to MXFP4").
	MXFP4 DType = "mxfp4"
)

// MXBlock is how many elements share one E8M0 scale byte in the OCP
// microscaling formats (OCP Microscaling Formats v1.0: MXFP4, MXFP8).
const MXBlock = 32

// DTypes lists every data type in a fixed order.
var DTypes = []DType{FP32, TF32, BF16, FP16, FP8, INT8, FP4}

// Bytes is the size of one element.
func (d DType) Bytes() float64 {
	switch d {
	case FP32, TF32:
		return 4
	case BF16, FP16:
		return 2
	case FP8, INT8:
		return 1
	case INT4:
		return 0.5
	case MXFP4:
		return 0.5 + 1.0/MXBlock
	case FP4:
		return 0.5 + 1.0/16 // a 4-bit element and its share of a byte-wide scale per 16
	}
	return 0
}

// GPU is one accelerator.
type GPU struct {
	Name   string `json:"name" arrow:"name"`
	Vendor string `json:"vendor" arrow:"vendor"`
	// Dense (no sparsity) peak rates, FLOP/s (int8: OP/s); 0 where the part
	// has no such unit.
	PeakFP32FlopsPerS float64 `json:"peak_fp32_flops_per_s" arrow:"peak_fp32_flops_per_s"`
	PeakTF32FlopsPerS float64 `json:"peak_tf32_flops_per_s" arrow:"peak_tf32_flops_per_s"`
	PeakBF16FlopsPerS float64 `json:"peak_bf16_flops_per_s" arrow:"peak_bf16_flops_per_s"`
	PeakFP16FlopsPerS float64 `json:"peak_fp16_flops_per_s" arrow:"peak_fp16_flops_per_s"`
	PeakFP8FlopsPerS  float64 `json:"peak_fp8_flops_per_s" arrow:"peak_fp8_flops_per_s"`
	PeakINT8OpsPerS   float64 `json:"peak_int8_ops_per_s" arrow:"peak_int8_ops_per_s"`
	PeakFP4FlopsPerS  float64 `json:"peak_fp4_flops_per_s" arrow:"peak_fp4_flops_per_s"`
	// Vector (non-tensor-core) fp32 rate, for elementwise and scan kernels.
	VectorFP32FlopsPerS float64 `json:"vector_fp32_flops_per_s" arrow:"vector_fp32_flops_per_s"`

	SMCount             int     `json:"sm_count" arrow:"sm_count"`
	ClockHz             float64 `json:"clock_hz" arrow:"clock_hz"`
	SharedMemBytesPerSM int64   `json:"shared_mem_bytes_per_sm" arrow:"shared_mem_bytes_per_sm"`
	RegisterBytesPerSM  int64   `json:"register_bytes_per_sm" arrow:"register_bytes_per_sm"`

	L2Bytes              int64   `json:"l2_bytes" arrow:"l2_bytes"`
	L2BandwidthBytesPerS float64 `json:"l2_bandwidth_bytes_per_s" arrow:"l2_bandwidth_bytes_per_s"`

	HBMBytes              int64   `json:"hbm_bytes" arrow:"hbm_bytes"`
	HBMBandwidthBytesPerS float64 `json:"hbm_bandwidth_bytes_per_s" arrow:"hbm_bandwidth_bytes_per_s"`

	// TensorEfficiency is the fraction of the dense tensor peak that a GEMM
	// tile's main loop sustains (the MMA pipe's issue efficiency at the
	// clocks the part holds under load); 0 means 1. The tile's prologue and
	// epilogue (GEMMTileOverheadCycles), padding and partial waves are
	// priced on top, so the best large matmuls land below it.
	TensorEfficiency float64 `json:"tensor_efficiency" arrow:"tensor_efficiency"`
	// SyncMMAFraction is the share of that main-loop rate (TensorPeak) a
	// kernel built on Ampere's synchronous warp-level MMA (mma.sync)
	// reaches on this part: FlashAttention-2's kernels, which Hopper runs
	// without its asynchronous warpgroup MMAs (wgmma) and TMA loads. 0
	// means 1: on Ampere and earlier it is the native MMA; the parts with
	// no FlashAttention-2 measurement (Blackwell, MI300X) leave it unset,
	// so a spec's flash_attention_2 costs them what the fused kernel does.
	SyncMMAFraction float64 `json:"sync_mma_fraction" arrow:"sync_mma_fraction"`
	// UnalignedMMAFraction is the share of the main-loop rate a GEMM keeps
	// when a row of one of its operands (K or N elements: a linear layer's
	// leading dimensions) is not a multiple of 16 bytes. The fast kernels
	// stage their tiles with 16-byte asynchronous copies (cp.async, TMA),
	// which need aligned rows, so cuBLAS runs kernels that load 2, 4 or 8
	// bytes at a time instead (NVIDIA's Matrix Multiplication Background
	// guide: dimensions in multiples of 8 fp16 elements for the most
	// efficient Tensor Core kernels; nanoGPT pads GPT-2's vocabulary of
	// 50,257 to 50,304 for it). 0 means 1.
	UnalignedMMAFraction float64 `json:"unaligned_mma_fraction" arrow:"unaligned_mma_fraction"`
	// GEMMTileOverheadCycles is a GEMM tile's fixed time in SM clocks: the
	// pipeline fill (first K-slices in flight from memory) and the epilogue
	// (accumulators converted and stored), not overlapped with the tile's
	// main loop in a non-persistent kernel.
	GEMMTileOverheadCycles float64 `json:"gemm_tile_overhead_cycles" arrow:"gemm_tile_overhead_cycles"`
	// HBMEfficiency is the fraction of the DRAM bandwidth that vectorized
	// streaming kernels (PyTorch's elementwise kernels) reach; 0 means 1.
	HBMEfficiency float64 `json:"hbm_efficiency" arrow:"hbm_efficiency"`
	// GEMMBandwidthFraction is the fraction of HBMBandwidth() that a GEMM's
	// operand loads reach (tiles fetch K-slices of their rows, 128-byte
	// pieces scattered over the weight matrix, not one sequential stream);
	// 0 means 1.
	GEMMBandwidthFraction float64 `json:"gemm_bandwidth_fraction" arrow:"gemm_bandwidth_fraction"`
	// RowKernelBandwidthFraction is the fraction of HBMBandwidth() that
	// one-block-per-row kernels with scalar loads (RMSNorm, RoPE, fused
	// activations as vLLM/sarathi write them) reach at large sizes; 0 means 1.
	RowKernelBandwidthFraction float64 `json:"row_kernel_bandwidth_fraction" arrow:"row_kernel_bandwidth_fraction"`
	// RotaryBandwidthFraction is the fraction of HBMBandwidth() that the
	// rotary-embedding kernel's bytes reach beside its loop's latency chain
	// (vLLM/sarathi rotary_embedding_kernel: each thread rotates one pair in
	// place with 2-byte loads half a head apart and a cos/sin lookup); 0
	// means RowKernelBandwidthFraction's.
	RotaryBandwidthFraction float64 `json:"rotary_bandwidth_fraction" arrow:"rotary_bandwidth_fraction"`
	// GatherBandwidthFraction is the fraction of HBMBandwidth() that an
	// embedding gather (a row lookup per token) reaches; 0 means 1.
	GatherBandwidthFraction float64 `json:"gather_bandwidth_fraction" arrow:"gather_bandwidth_fraction"`
	// MemoryLatencyS is one dependent global-memory access as a row
	// kernel's threads see it: each loop iteration over a row waits for its
	// load, so a row of w elements over b threads takes ⌈w/b⌉ of these.
	MemoryLatencyS float64 `json:"memory_latency_s" arrow:"memory_latency_s"`
	// L2LatencyS is one dependent access that hits L2, as a row kernel's
	// second pass sees it: rms_norm's scale-and-store loop reloads its row
	// (from L1: a block's row is a few KB) and the weight vector every
	// block shares (from L2), so each of its iterations waits on L2, not
	// on DRAM. 0 means MemoryLatencyS.
	L2LatencyS float64 `json:"l2_latency_s" arrow:"l2_latency_s"`
	// MaxThreadsPerSM is the resident-thread limit of one SM (CU); it sets
	// how many row blocks run at once. 0 means 2048.
	MaxThreadsPerSM int `json:"max_threads_per_sm" arrow:"max_threads_per_sm"`
	// ExpPerClockPerSM is the exponentials an SM's special-function units
	// issue a clock, what an attention's softmax waits on; 0 means 16, every
	// NVIDIA part from Ampere (CUDA C++ Programming Guide, "Arithmetic
	// Instructions") to Blackwell. Blackwell Ultra doubles it: 10.7
	// tera-exponentials a second against Blackwell's 5 (NVIDIA, "Inside
	// NVIDIA Blackwell Ultra", 2025: "2x attention-layer acceleration").
	ExpPerClockPerSM int `json:"exp_per_clock_per_sm" arrow:"exp_per_clock_per_sm"`

	// FP8PromotionIntervalK is how often, in reduction elements, an FP8
	// GEMM that needs FP32 accuracy adds its tensor cores' partial sums into
	// FP32 registers on the CUDA cores. Hopper's FP8 MMA keeps about 14 bits
	// of its accumulator (DeepSeek-AI 2024, arXiv 2412.19437, §3.3.2, which
	// promotes every 128 elements; CUTLASS's FP8 main loop promotes every 4
	// MMAs of K 32, mma_promotion_interval); cuBLAS does it unless fast
	// accumulation is on (CUBLASLT_MATMUL_DESC_FAST_ACCUM). 0: the MMA
	// accumulates in FP32 (Blackwell's tensor memory) or the part has no FP8.
	FP8PromotionIntervalK int `json:"fp8_promotion_interval_k" arrow:"fp8_promotion_interval_k"`

	// KernelLaunchS is the device-side cost of one kernel (the GPU
	// starting and draining a grid: what a profiler's kernel timer shows
	// for an empty kernel), added to its work.
	KernelLaunchS float64 `json:"kernel_launch_s" arrow:"kernel_launch_s"`

	// KernelParameters says where the kernel parameters above come from:
	// fitted on measured kernel times, taken from a part with the same SM
	// and L2, or derived from the datasheet (a part with no kernel table).
	KernelParameters string `json:"kernel_parameters" arrow:"kernel_parameters"`
}

// TensorPeak is the sustained tensor rate for a data type: the dense peak
// times TensorEfficiency (0 if unsupported).
func (g GPU) TensorPeak(d DType) float64 { return g.Peak(d) * orOne(g.TensorEfficiency) }

// SyncMMAPeak is the tensor rate of a kernel built on mma.sync
// (SyncMMAFraction of TensorPeak).
func (g GPU) SyncMMAPeak(d DType) float64 { return g.TensorPeak(d) * orOne(g.SyncMMAFraction) }

// UnalignedMMAPeak is the tensor rate of a GEMM on the narrow-load
// kernels unaligned rows run (UnalignedMMAFraction of TensorPeak).
func (g GPU) UnalignedMMAPeak(d DType) float64 {
	return g.TensorPeak(d) * orOne(g.UnalignedMMAFraction)
}

// HBMBandwidth is the sustained DRAM bandwidth: the datasheet figure times
// HBMEfficiency.
func (g GPU) HBMBandwidth() float64 { return g.HBMBandwidthBytesPerS * orOne(g.HBMEfficiency) }

// RowKernelBandwidth is the large-size bandwidth of one-block-per-row kernels.
func (g GPU) RowKernelBandwidth() float64 {
	return g.HBMBandwidth() * orOne(g.RowKernelBandwidthFraction)
}

// RotaryBandwidth is the rotary-embedding kernel's bandwidth.
func (g GPU) RotaryBandwidth() float64 {
	if g.RotaryBandwidthFraction > 0 {
		return g.HBMBandwidth() * g.RotaryBandwidthFraction
	}
	return g.RowKernelBandwidth()
}

// L2Latency is one dependent access that hits L2 (L2LatencyS, else
// MemoryLatencyS).
func (g GPU) L2Latency() float64 {
	if g.L2LatencyS > 0 {
		return g.L2LatencyS
	}
	return g.MemoryLatencyS
}

// GEMMBandwidth is the HBM bandwidth of a GEMM's operand loads.
func (g GPU) GEMMBandwidth() float64 { return g.HBMBandwidth() * orOne(g.GEMMBandwidthFraction) }

// GatherBandwidth is the bandwidth of an embedding gather.
func (g GPU) GatherBandwidth() float64 { return g.HBMBandwidth() * orOne(g.GatherBandwidthFraction) }

// ExpPerClock is ExpPerClockPerSM, 16 when unset.
func (g GPU) ExpPerClock() float64 {
	if g.ExpPerClockPerSM <= 0 {
		return 16
	}
	return float64(g.ExpPerClockPerSM)
}

// ThreadsPerSM is MaxThreadsPerSM, 2048 when unset.
func (g GPU) ThreadsPerSM() int {
	if g.MaxThreadsPerSM <= 0 {
		return 2048
	}
	return g.MaxThreadsPerSM
}

func orOne(x float64) float64 {
	if x <= 0 {
		return 1
	}
	return x
}

// Peak returns the dense peak rate for a data type (0 if unsupported).
func (g GPU) Peak(d DType) float64 {
	switch d {
	case FP32:
		return g.PeakFP32FlopsPerS
	case TF32:
		return g.PeakTF32FlopsPerS
	case BF16:
		return g.PeakBF16FlopsPerS
	case FP16:
		return g.PeakFP16FlopsPerS
	case FP8:
		return g.PeakFP8FlopsPerS
	case INT8:
		return g.PeakINT8OpsPerS
	case FP4:
		return g.PeakFP4FlopsPerS
	}
	return 0
}

// BlockScaledMMA reports whether the tensor cores apply per-block scales
// inside the MMA (Blackwell's NVFP4 and OCP MX formats, tcgen05's
// block-scaled kinds): the parts with FP4 math.
func (g GPU) BlockScaledMMA() bool { return g.PeakFP4FlopsPerS > 0 }

// Link is a point-to-point link technology, one direction.
type Link struct {
	Name string `json:"name" arrow:"name"`
	// BandwidthBytesPerS is per direction.
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s" arrow:"bandwidth_bytes_per_s"`
	// LatencyS is the one-way latency of a hop over this link.
	LatencyS float64 `json:"latency_s" arrow:"latency_s"`
	// CollectiveEfficiency is the fraction of the link's bandwidth that a
	// collective library's protocol (flags, headers, synchronization)
	// leaves for payload; 0 means 1.
	CollectiveEfficiency float64 `json:"collective_efficiency" arrow:"collective_efficiency"`
}

// RidgeFlopsPerByte is the arithmetic intensity (FLOP per HBM byte) above
// which an operator of this data type is compute-bound on this GPU: the
// dense peak over the HBM bandwidth (0 if the type is unsupported).
func (g GPU) RidgeFlopsPerByte(d DType) float64 {
	if g.HBMBandwidthBytesPerS <= 0 {
		return 0
	}
	return g.Peak(d) / g.HBMBandwidthBytesPerS
}
