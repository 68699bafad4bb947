package spec

import (
	"fmt"
	"slices"

	"github.com/eidolon-sim/eidolon/core/calibrate"
	"github.com/eidolon-sim/eidolon/core/hw"
)

// Calibrate is the "calibrate" kind: a GPU's kernel figures fitted to
// measured kernel times through the compute model's mechanism (package
// calibrate), checked on kernels the fit did not see. The fitted figures
// make a what-if GPU for the other kinds: {"preset": ..., figure: value}.
type Calibrate struct {
	Header
	// GPU the fit starts from and keeps every figure the kernels do not
	// set of: a preset or a what-if part (see GPU).
	GPU GPU `json:"gpu"`
	// Kernels are the measured kernels, 1 to 10,000.
	Kernels []CalibrationKernel `json:"kernels"`
	// Fit names the figures to move (hw.GPU's JSON names); default every
	// figure the kernels' ops set (gemm: tensor_efficiency,
	// gemm_tile_overhead_cycles, gemm_bandwidth_fraction, kernel_launch_s,
	// and unaligned_mma_fraction where a GEMM's K or N rows are no
	// multiple of 16 bytes; elementwise: hbm_efficiency, kernel_launch_s).
	Fit []string `json:"fit,omitempty"`
	// HeldOutEvery holds every k-th kernel (in the order given) out of the
	// fit, to check the fitted figures on: default 2 (every other kernel),
	// 0 fits on all of them.
	HeldOutEvery *int `json:"held_out_every,omitempty"`
	// MaxIterations bounds the fit's Nelder–Mead steps: default 1,000, at
	// most 20,000, and kernels × max_iterations at most 2·10^7.
	MaxIterations int `json:"max_iterations,omitempty"`
}

// CalibrationKernel is one measured kernel.
type CalibrationKernel struct {
	// Op: "gemm" (batch products [m×k]·[k×n]) or "elementwise" (a
	// vectorized streaming kernel moving bytes, read and written).
	Op string `json:"op" spec:"required"`
	// M, N, K and Batch (default 1) of a GEMM.
	M     int64 `json:"m,omitempty"`
	N     int64 `json:"n,omitempty"`
	K     int64 `json:"k,omitempty"`
	Batch int64 `json:"batch,omitempty"`
	// Bytes an elementwise kernel reads and writes.
	Bytes float64 `json:"bytes,omitempty"`
	// DType of the operands; default "bf16".
	DType string `json:"dtype,omitempty"`
	// TimeS is the measured kernel time (a profiler's, not a host loop's),
	// in seconds.
	TimeS float64 `json:"time_s" spec:"required"`
}

const (
	maxCalibrationKernels = 10000
	maxCalibrationWork    = 2e7 // kernels × iterations
)

// Defaults fills optional fields.
func (s *Calibrate) Defaults() {
	if s.HeldOutEvery == nil {
		two := 2
		s.HeldOutEvery = &two
	}
	if s.MaxIterations == 0 {
		s.MaxIterations = 1000
	}
	for i := range s.Kernels {
		k := &s.Kernels[i]
		if k.DType == "" {
			k.DType = string(hw.BF16)
		}
		if k.Op == calibrate.GEMM && k.Batch == 0 {
			k.Batch = 1
		}
	}
}

// Validate reports every problem.
func (s *Calibrate) Validate(p *Problems) {
	gpu, okGPU := s.GPU.Validate(p, "gpu")
	if len(s.Kernels) == 0 || len(s.Kernels) > maxCalibrationKernels {
		p.AddAllowed("kernels", fmt.Sprintf("[1, %d] kernels", maxCalibrationKernels),
			"must list 1 to %d measured kernels, got %d", maxCalibrationKernels, len(s.Kernels))
	}
	dtypes := make([]string, len(hw.DTypes))
	for i, d := range hw.DTypes {
		dtypes[i] = string(d)
	}
	for i := range s.Kernels {
		s.Kernels[i].validate(p, Index("kernels", i), dtypes, gpu, okGPU)
	}
	fittable := s.fittable()
	for i, f := range s.Fit {
		p.OneOf(Index("fit", i), f, fittable)
	}
	every := *s.HeldOutEvery
	if every != 0 && (every < 2 || every > 1000) {
		p.AddAllowed("held_out_every", "0 or [2, 1000]", "must be 0 (no held-out kernels) or in [2, 1000], got %d", every)
	}
	p.IntInRange("max_iterations", s.MaxIterations, 1, 20000)
	if w := float64(len(s.Kernels)) * float64(s.MaxIterations); w > maxCalibrationWork {
		p.Addf("max_iterations", "kernels × max_iterations is %.3g, at most %g (each step prices every kernel the fit sees): fewer kernels or steps", w, maxCalibrationWork)
	}
}

func (k *CalibrationKernel) validate(p *Problems, path string, dtypes []string, gpu hw.GPU, okGPU bool) {
	f := func(name string) string { return Field(path, name) }
	if !p.OneOf(f("op"), k.Op, calibrate.Ops()) {
		return
	}
	if p.OneOf(f("dtype"), k.DType, dtypes) && k.Op == calibrate.GEMM && okGPU && gpu.Peak(hw.DType(k.DType)) == 0 {
		p.Addf(f("dtype"), "%s has no %s math units; choose one of its types", gpu.Name, k.DType)
	}
	if !(k.TimeS > 0) || k.TimeS > 1e3 {
		p.AddAllowed(f("time_s"), "(0, 1000]", "must be a kernel time in seconds, in (0, 1000], got %v", k.TimeS)
	}
	switch k.Op {
	case calibrate.GEMM:
		for _, d := range []struct {
			name string
			v    int64
			max  int64
		}{{"m", k.M, 1 << 20}, {"n", k.N, 1 << 20}, {"k", k.K, 1 << 20}, {"batch", k.Batch, 1 << 16}} {
			if d.v < 1 || d.v > d.max {
				p.AddAllowed(f(d.name), fmt.Sprintf("[1, %d]", d.max), "must be in [1, %d], got %d", d.max, d.v)
			}
		}
		if k.Bytes != 0 {
			p.Addf(f("bytes"), "applies to elementwise kernels only (a GEMM's traffic follows from m, n, k)")
		}
	case calibrate.Elementwise:
		if !(k.Bytes >= 1 && k.Bytes <= 1e13) {
			p.AddAllowed(f("bytes"), "[1, 1e13]", "must be in [1, 1e13] bytes, got %v", k.Bytes)
		}
		for _, d := range []struct {
			name string
			v    int64
		}{{"m", k.M}, {"n", k.N}, {"k", k.K}, {"batch", k.Batch}} {
			if d.v != 0 {
				p.Addf(f(d.name), "applies to gemm kernels only (an elementwise kernel is its bytes)")
			}
		}
	}
}

// Figures are the figures the fit moves: Fit, or every one the kernels'
// ops set (calibrate.FiguresFor), in the ops' order.
func (s *Calibrate) Figures() []string {
	if len(s.Fit) > 0 {
		return slices.Clone(s.Fit)
	}
	return s.fittable()
}

// fittable are the figures the kernels' ops set, and UnalignedFigure
// where a GEMM's rows are no multiple of 16 bytes.
func (s *Calibrate) fittable() []string {
	ops := make([]string, len(s.Kernels))
	unaligned := false
	for i, k := range s.Kernels {
		ops[i] = k.Op
		unaligned = unaligned || k.Kernel().Unaligned()
	}
	figs := calibrate.Fittable(ops)
	if unaligned {
		figs = append(figs, calibrate.UnalignedFigure)
	}
	return figs
}

// Kernel is the measured kernel as the fit prices it.
func (k CalibrationKernel) Kernel() calibrate.Kernel {
	return calibrate.Kernel{Op: k.Op, Batch: k.Batch, M: k.M, N: k.N, K: k.K, Bytes: k.Bytes, DType: hw.DType(k.DType), MeasuredS: k.TimeS}
}

// Budget of a calibration: the kernels and their table rows.
func (s *Calibrate) Budget() Budget {
	return Budget{MemoryBytes: 1<<20 + 1024*float64(len(s.Kernels)), Fields: []string{"kernels"},
		Detail: fmt.Sprintf("%d kernels", len(s.Kernels))}
}
