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
)

// DTypes lists every data type in a fixed order.
var DTypes = []DType{FP32, TF32, BF16, FP16, FP8, INT8}

// Bytes is the size of one element.
func (d DType) Bytes() float64 {
	switch d {
	case FP32, TF32:
		return 4
	case BF16, FP16:
		return 2
	case FP8, INT8:
		return 1
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

	// KernelLaunchS is the fixed cost of one kernel launch.
	KernelLaunchS float64 `json:"kernel_launch_s" arrow:"kernel_launch_s"`
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
	}
	return 0
}

// Link is a point-to-point link technology, one direction.
type Link struct {
	Name string `json:"name" arrow:"name"`
	// BandwidthBytesPerS is per direction.
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s" arrow:"bandwidth_bytes_per_s"`
	// LatencyS is the one-way latency of a hop over this link.
	LatencyS float64 `json:"latency_s" arrow:"latency_s"`
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
