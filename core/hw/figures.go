package hw

import (
	"reflect"
	"strings"
)

// Figure is one number of a GPU that a spec may change from its preset, to
// ask what a part that differs in it would do: its JSON name (GPU's tag)
// and the range it must lie in. The ranges are wide (a tenth of the
// smallest preset's figure to a hundred times the largest's, about) and
// keep every price finite: a figure outside them is a units slip, not a
// part.
type Figure struct {
	Name string  `arrow:"figure"`
	Min  float64 `arrow:"min"`
	Max  float64 `arrow:"max"`
	// Integer: the figure counts something (SMs, bytes, threads).
	Integer bool `arrow:"integer"`
}

// Figures lists every number of GPU a spec may set beside a preset.
// TestFiguresCoverGPU holds it to GPU's numeric fields.
func Figures() []Figure {
	const (
		peak  = 1e18 // FLOP/s: 1 EFLOP/s, 200 times a B200's dense FP8
		bw    = 1e16 // B/s
		frac  = 0.01 // efficiencies and fractions: (0, 1], 0 not allowed
		bytes = 1 << 44
	)
	return []Figure{
		// Peaks: 0 means the part has no such unit.
		{Name: "peak_fp32_flops_per_s", Max: peak},
		{Name: "peak_tf32_flops_per_s", Max: peak},
		{Name: "peak_bf16_flops_per_s", Max: peak},
		{Name: "peak_fp16_flops_per_s", Max: peak},
		{Name: "peak_fp8_flops_per_s", Max: peak},
		{Name: "peak_int8_ops_per_s", Max: peak},
		{Name: "peak_fp4_flops_per_s", Max: peak},
		{Name: "vector_fp32_flops_per_s", Min: 1e9, Max: peak},
		{Name: "sm_count", Min: 1, Max: 1024, Integer: true},
		{Name: "clock_hz", Min: 1e8, Max: 1e10},
		// The GEMM tile search needs two pipeline stages of its smallest
		// tile in shared memory and its accumulators in half the registers.
		{Name: "shared_mem_bytes_per_sm", Min: 48 << 10, Max: 1 << 24, Integer: true},
		{Name: "register_bytes_per_sm", Min: 64 << 10, Max: 1 << 24, Integer: true},
		{Name: "l2_bytes", Min: 1 << 20, Max: 1 << 34, Integer: true},
		{Name: "l2_bandwidth_bytes_per_s", Min: 1e9, Max: bw},
		{Name: "hbm_bytes", Min: 1 << 28, Max: bytes, Integer: true},
		{Name: "hbm_bandwidth_bytes_per_s", Min: 1e9, Max: bw},
		{Name: "tensor_efficiency", Min: frac, Max: 1},
		{Name: "sync_mma_fraction", Min: frac, Max: 1},
		{Name: "unaligned_mma_fraction", Min: frac, Max: 1},
		{Name: "gemm_tile_overhead_cycles", Max: 1e6},
		{Name: "hbm_efficiency", Min: frac, Max: 1},
		{Name: "gemm_bandwidth_fraction", Min: frac, Max: 1},
		{Name: "row_kernel_bandwidth_fraction", Min: frac, Max: 1},
		{Name: "rotary_bandwidth_fraction", Min: frac, Max: 1},
		{Name: "gather_bandwidth_fraction", Min: frac, Max: 1},
		{Name: "memory_latency_s", Max: 1e-4},
		{Name: "l2_latency_s", Max: 1e-4},
		{Name: "max_threads_per_sm", Min: 256, Max: 8192, Integer: true},
		{Name: "exp_per_clock_per_sm", Max: 1024, Integer: true},
		{Name: "fp8_promotion_interval_k", Max: 1 << 16, Integer: true},
		{Name: "kernel_launch_s", Max: 1e-3},
	}
}

// FigureByName returns the settable figure with this JSON name.
func FigureByName(name string) (Figure, bool) {
	for _, f := range Figures() {
		if f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// FigureNames lists the settable figures' JSON names.
func FigureNames() []string {
	fs := Figures()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// SetFigure sets the field of g whose JSON name is name to v (rounded down
// for a count) and reports whether there is such a field. It does not check
// the figure's range; spec validation does.
func (g *GPU) SetFigure(name string, v float64) bool {
	f, ok := gpuField(name)
	if !ok {
		return false
	}
	fv := reflect.ValueOf(g).Elem().FieldByIndex(f.Index)
	switch fv.Kind() {
	case reflect.Float64:
		fv.SetFloat(v)
	case reflect.Int, reflect.Int64:
		fv.SetInt(int64(v))
	default:
		return false
	}
	return true
}

// Figure returns the value of g's field whose JSON name is name.
func (g GPU) Figure(name string) (float64, bool) {
	f, ok := gpuField(name)
	if !ok {
		return 0, false
	}
	fv := reflect.ValueOf(g).FieldByIndex(f.Index)
	switch fv.Kind() {
	case reflect.Float64:
		return fv.Float(), true
	case reflect.Int, reflect.Int64:
		return float64(fv.Int()), true
	}
	return 0, false
}

// gpuField finds GPU's struct field by its JSON name.
func gpuField(name string) (reflect.StructField, bool) {
	t := reflect.TypeFor[GPU]()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
