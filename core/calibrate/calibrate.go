// Package calibrate fits a GPU's kernel figures to measured kernel times
// through core/compute's mechanism: the figures that set a kernel's price
// (the GEMM main loop's rate, a tile's fixed cycles, the operand streams'
// and the streaming kernels' share of HBM, a kernel's fixed device time)
// move, by Nelder–Mead over their logarithms, until the priced times match
// the measured ones. It is how the presets' kernel parameters were fitted
// on Vidur's tables (bench/fidelity), offered for a part's own tables.
package calibrate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/stats"
)

// Kernel classes a measurement can be of.
const (
	// GEMM: Batch products [M×K]·[K×N] (cuBLAS as PyTorch calls it).
	GEMM = "gemm"
	// Elementwise: a vectorized streaming kernel (PyTorch's elementwise
	// kernels: an add, a copy, an activation) reading and writing Bytes.
	Elementwise = "elementwise"
)

// Ops lists the kernel classes.
func Ops() []string { return []string{GEMM, Elementwise} }

// Kernel is one measured kernel.
type Kernel struct {
	Op             string
	Batch, M, N, K int64
	Bytes          float64
	DType          hw.DType
	MeasuredS      float64
}

// op is the kernel as core/compute prices it.
func (k Kernel) op() (model.Op, compute.Impl) {
	if k.Op == GEMM {
		return model.NewGEMM("gemm", k.DType, max(k.Batch, 1), k.M, k.N, k.K), ""
	}
	return model.NewStreaming("elementwise", model.Elementwise, k.DType, 0, k.Bytes), compute.ImplVectorized
}

// Price is the kernel's time on the evaluator's GPU.
func (k Kernel) Price(e *compute.Evaluator) (float64, error) {
	o, impl := k.op()
	c, err := e.OpAs(o, impl)
	return c.TimeS, err
}

// FiguresFor are the figures kernels of class op set: what Fit may move
// for them (hw.Figures names).
func FiguresFor(op string) []string {
	switch op {
	case GEMM:
		return []string{"tensor_efficiency", "gemm_tile_overhead_cycles", "gemm_bandwidth_fraction", "kernel_launch_s"}
	case Elementwise:
		return []string{"hbm_efficiency", "kernel_launch_s"}
	}
	return nil
}

// Fittable are the figures kernels of these classes set (FiguresFor's,
// in Ops' order, each once).
func Fittable(ops []string) []string {
	var out []string
	for _, op := range Ops() {
		if !slices.Contains(ops, op) {
			continue
		}
		for _, f := range FiguresFor(op) {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// UnalignedFigure is the figure GEMMs with rows no multiple of 16 bytes
// set beside FiguresFor(GEMM)'s (compute.Unaligned).
const UnalignedFigure = "unaligned_mma_fraction"

// Unaligned reports whether the kernel is a GEMM of the narrow-load
// kernels (compute.Unaligned), which UnalignedFigure prices.
func (k Kernel) Unaligned() bool {
	o, _ := k.op()
	return k.Op == GEMM && compute.Unaligned(o)
}

// LogErrors are |ln(priced / measured)| of each kernel on g.
func LogErrors(g hw.GPU, ks []Kernel) ([]float64, error) {
	e := compute.NewEvaluator(g)
	out := make([]float64, len(ks))
	for i, k := range ks {
		t, err := k.Price(e)
		if err != nil {
			return nil, err
		}
		out[i] = math.Abs(math.Log(t / k.MeasuredS))
	}
	return out, nil
}

// Objective is the mean over the kernels' classes of each class's mean
// and median |ln(priced / measured)|, halved: every class weighs the
// same however many rows it has, and neither a few outliers (the mean) nor
// the bulk (the median) alone decides. bench/fidelity's kernel fit uses it.
func Objective(classes []string, logErrs []float64) float64 {
	by := map[string][]float64{}
	var order []string
	for i, c := range classes {
		if _, ok := by[c]; !ok {
			order = append(order, c)
		}
		by[c] = append(by[c], logErrs[i])
	}
	tot := 0.0
	for _, c := range order {
		xs := by[c]
		mean := 0.0
		for _, x := range xs {
			mean += x / float64(len(xs))
		}
		tot += (mean + stats.Median(xs)) / 2
	}
	return tot / float64(max(len(order), 1))
}

// Result is a fit: the GPU with its fitted figures, the objective it
// reached on the training kernels and the steps it took.
type Result struct {
	GPU        hw.GPU
	Objective  float64
	Iterations int
}

// Fit moves figures of g (hw.Figures names, at least one) to fit the
// kernels, from g's own values, for at most iters Nelder–Mead steps; each
// figure stays within its hw.Figures range. progress, if set, gets the
// fraction of iters done; ctx stops it (between objective evaluations).
func Fit(ctx context.Context, g hw.GPU, figures []string, ks []Kernel, iters int, progress func(float64)) (Result, error) {
	if len(figures) == 0 || len(ks) == 0 {
		return Result{}, fmt.Errorf("calibrate: nothing to fit (%d figures, %d kernels)", len(figures), len(ks))
	}
	ranges := make([]hw.Figure, len(figures))
	start := make([]float64, len(figures))
	for i, name := range figures {
		f, ok := hw.FigureByName(name)
		v, _ := g.Figure(name)
		if !ok {
			return Result{}, fmt.Errorf("calibrate: no figure %q", name)
		}
		ranges[i] = f
		// A figure at 0 ("the default") starts at its range's floor or,
		// where that is 0 too, at a small positive value the logarithm
		// can leave.
		start[i] = math.Log(math.Max(v, math.Max(f.Min, 1e-9*math.Max(f.Max, 1))))
	}
	at := func(x []float64) hw.GPU {
		out := g
		for i, name := range figures {
			v := math.Min(math.Max(math.Exp(x[i]), ranges[i].Min), ranges[i].Max)
			if ranges[i].Integer {
				v = math.Round(v)
			}
			out.SetFigure(name, v)
		}
		return out
	}
	classes := make([]string, len(ks))
	for i, k := range ks {
		classes[i] = k.Op
	}
	var failed error
	f := func(x []float64) float64 {
		errs, err := LogErrors(at(x), ks)
		if err != nil {
			failed = err
			return math.Inf(1)
		}
		return Objective(classes, errs)
	}
	x, v, n, err := Minimize(ctx, f, start, 0.3, iters, progress)
	if err != nil {
		return Result{}, err
	}
	if failed != nil && math.IsInf(v, 1) {
		return Result{}, failed
	}
	return Result{GPU: at(x), Objective: v, Iterations: n}, nil
}

// Minimize runs Nelder–Mead on f from start (each vertex of the first
// simplex moved by step along one axis) for at most iters steps, stopping
// early when the simplex's values agree within 1e-7. It returns the best
// point, its value and the steps taken; ctx stops it with its error.
func Minimize(ctx context.Context, f func([]float64) float64, start []float64, step float64, iters int, progress func(float64)) ([]float64, float64, int, error) {
	dim := len(start)
	type pt struct {
		x []float64
		v float64
	}
	eval := func(x []float64) (pt, error) {
		if err := ctx.Err(); err != nil {
			return pt{}, err
		}
		return pt{x, f(x)}, nil
	}
	simplex := make([]pt, dim+1)
	for i := range simplex {
		x := slices.Clone(start)
		if i > 0 {
			x[i-1] += step
		}
		p, err := eval(x)
		if err != nil {
			return nil, 0, 0, err
		}
		simplex[i] = p
	}
	byValue := func() { sort.Slice(simplex, func(a, b int) bool { return simplex[a].v < simplex[b].v }) }
	it := 0
	for ; it < iters; it++ {
		if progress != nil && it%16 == 0 {
			progress(float64(it) / float64(iters))
		}
		byValue()
		if simplex[dim].v-simplex[0].v < 1e-7 {
			break
		}
		c := make([]float64, dim)
		for _, s := range simplex[:dim] {
			for j := range c {
				c[j] += s.x[j] / float64(dim)
			}
		}
		along := func(t float64) (pt, error) {
			x := make([]float64, dim)
			for j := range x {
				x[j] = c[j] + t*(simplex[dim].x[j]-c[j])
			}
			return eval(x)
		}
		r, err := along(-1)
		if err != nil {
			return nil, 0, it, err
		}
		switch {
		case r.v < simplex[0].v:
			ex, err := along(-2)
			if err != nil {
				return nil, 0, it, err
			}
			if ex.v < r.v {
				r = ex
			}
			simplex[dim] = r
		case r.v < simplex[dim-1].v:
			simplex[dim] = r
		default:
			ct, err := along(0.5)
			if err != nil {
				return nil, 0, it, err
			}
			if ct.v < simplex[dim].v {
				simplex[dim] = ct
				continue
			}
			for i := 1; i <= dim; i++ {
				for j := range simplex[i].x {
					simplex[i].x[j] = simplex[0].x[j] + 0.5*(simplex[i].x[j]-simplex[0].x[j])
				}
				p, err := eval(simplex[i].x)
				if err != nil {
					return nil, 0, it, err
				}
				simplex[i] = p
			}
		}
	}
	byValue()
	return simplex[0].x, simplex[0].v, it, nil
}
