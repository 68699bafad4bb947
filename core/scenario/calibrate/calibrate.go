// Package calibrate is the "calibrate" scenario: a GPU's kernel figures
// fitted to measured kernel times (package core/calibrate) and checked on
// the kernels the fit did not see.
package calibrate

import (
	"fmt"
	"math"

	"github.com/eidolon-sim/eidolon/core/calibrate"
	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/stats"
)

// FigureRow is one figure the fit moved ("figures" table).
type FigureRow struct {
	Figure string  `arrow:"figure"`
	Start  float64 `arrow:"start"`
	Fitted float64 `arrow:"fitted"`
}

// KernelRow is one measured kernel priced before and after the fit
// ("kernels" table). Errors are priced / measured − 1.
type KernelRow struct {
	Index int    `arrow:"index"`
	Op    string `arrow:"op"`
	// Shape is "batch×m×n×k" for a GEMM, the bytes for an elementwise kernel.
	Shape string `arrow:"shape"`
	DType string `arrow:"dtype"`
	// HeldOut: the fit did not see this kernel.
	HeldOut     bool    `arrow:"held_out"`
	MeasuredS   float64 `arrow:"measured_s"`
	StartS      float64 `arrow:"start_s"`
	FittedS     float64 `arrow:"fitted_s"`
	StartError  float64 `arrow:"start_error"`
	FittedError float64 `arrow:"fitted_error"`
}

// SummaryRow is the fit ("summary" table): median |error| of the kernels
// it saw and of those held out, before (the starting GPU's figures) and
// after, and the fitted part as a spec's gpu (JSON) for the other kinds.
type SummaryRow struct {
	GPU                 string  `arrow:"gpu"`
	Kernels             int     `arrow:"kernels"`
	FitKernels          int     `arrow:"fit_kernels"`
	HeldOutKernels      int     `arrow:"held_out_kernels"`
	Figures             int     `arrow:"figures"`
	Iterations          int     `arrow:"iterations"`
	Objective           float64 `arrow:"objective"`
	StartMedianError    float64 `arrow:"start_median_abs_error"`
	FitMedianError      float64 `arrow:"fit_median_abs_error"`
	StartHeldOutMedian  float64 `arrow:"start_held_out_median_abs_error"`
	FittedHeldOutMedian float64 `arrow:"fitted_held_out_median_abs_error"`
	FittedHeldOutP90    float64 `arrow:"fitted_held_out_p90_abs_error"`
	GPUSpec             string  `arrow:"gpu_spec"`
}

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Define("calibrate",
		"a GPU's kernel figures fitted to measured kernel times, checked on held-out kernels: a what-if GPU for the other kinds",
		run)
}

func run(env scenario.Env, s *spec.Calibrate) (scenario.Result, error) {
	start, err := compile.GPU("", s.GPU)
	if err != nil {
		return scenario.Result{}, err
	}
	ks, heldOut := kernels(s)
	var train []calibrate.Kernel
	for i, k := range ks {
		if !heldOut[i] {
			train = append(train, k)
		}
	}
	figures := s.Figures()
	fit, err := calibrate.Fit(env.Context(), start, figures, train, s.MaxIterations, env.Report)
	if err != nil {
		return scenario.Result{}, err
	}
	var res scenario.Result
	var frows []FigureRow
	for _, name := range figures {
		a, _ := start.Figure(name)
		b, _ := fit.GPU.Figure(name)
		frows = append(frows, FigureRow{Figure: name, Start: a, Fitted: b})
	}
	before, after := compute.NewEvaluator(start), compute.NewEvaluator(fit.GPU)
	var krows []KernelRow
	var startFit, fittedFit, startHeld, fittedHeld []float64
	for i, k := range ks {
		a, err := k.Price(before)
		if err != nil {
			return scenario.Result{}, err
		}
		b, err := k.Price(after)
		if err != nil {
			return scenario.Result{}, err
		}
		shape := fmt.Sprintf("%d×%d×%d×%d", k.Batch, k.M, k.N, k.K)
		if k.Op == calibrate.Elementwise {
			shape = fmt.Sprintf("%.0f B", k.Bytes)
		}
		r := KernelRow{Index: i, Op: k.Op, Shape: shape, DType: string(k.DType), HeldOut: heldOut[i], MeasuredS: k.MeasuredS,
			StartS: a, FittedS: b, StartError: a/k.MeasuredS - 1, FittedError: b/k.MeasuredS - 1}
		krows = append(krows, r)
		if heldOut[i] {
			startHeld, fittedHeld = append(startHeld, math.Abs(r.StartError)), append(fittedHeld, math.Abs(r.FittedError))
		} else {
			startFit, fittedFit = append(startFit, math.Abs(r.StartError)), append(fittedFit, math.Abs(r.FittedError))
		}
	}
	// The fitted part as a spec's gpu: the starting part's figures with
	// the fitted ones over them.
	whatIf := spec.GPU{Preset: s.GPU.Preset, Name: s.GPU.Name, Figures: map[string]float64{}}
	for k, v := range s.GPU.Figures {
		whatIf.Figures[k] = v
	}
	for _, f := range frows {
		whatIf.Figures[f.Figure] = f.Fitted
	}
	js, err := whatIf.MarshalJSON()
	if err != nil {
		return scenario.Result{}, err
	}
	res.Add("summary", []SummaryRow{{
		GPU: start.Name, Kernels: len(ks), FitKernels: len(train), HeldOutKernels: len(ks) - len(train), Figures: len(figures),
		Iterations: fit.Iterations, Objective: fit.Objective,
		StartMedianError: stats.Median(startFit), FitMedianError: stats.Median(fittedFit),
		StartHeldOutMedian: stats.Median(startHeld), FittedHeldOutMedian: stats.Median(fittedHeld),
		FittedHeldOutP90: stats.Quantile(fittedHeld, 0.9), GPUSpec: string(js),
	}})
	res.Add("figures", frows)
	res.Add("kernels", krows)
	env.Report(1)
	return res, nil
}

// kernels are the spec's measurements as package calibrate takes them,
// with whether each is held out of the fit (every held_out_every-th).
func kernels(s *spec.Calibrate) (ks []calibrate.Kernel, heldOut []bool) {
	ks = make([]calibrate.Kernel, len(s.Kernels))
	heldOut = make([]bool, len(ks))
	every := *s.HeldOutEvery
	for i, k := range s.Kernels {
		ks[i] = k.Kernel()
		heldOut[i] = every > 0 && i%every == every-1
	}
	return ks, heldOut
}
