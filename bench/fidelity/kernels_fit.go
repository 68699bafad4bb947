package fidelity

import (
	"context"
	"math"
	"slices"

	"github.com/eidolon-sim/eidolon/core/calibrate"
	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
)

// KernelParams are the per-GPU numbers fitted on the kernel tables, in the
// order of KernelParamNames.
type KernelParams [8]float64

// KernelParamNames names the fitted hw.GPU fields.
var KernelParamNames = [8]string{
	"KernelLaunchS", "TensorEfficiency", "GEMMTileOverheadCycles", "HBMEfficiency",
	"RowKernelBandwidthFraction", "GatherBandwidthFraction", "MemoryLatencyS", "GEMMBandwidthFraction",
}

// KernelFitStart is where every fit starts (the same for each GPU, so the
// command reproduces the presets' constants): a 2 µs kernel, 85 % main-loop
// MMA rate, 2,000 cycles per tile, 90 % of HBM for vectorized kernels, half
// of it for row kernels, 15 % for gathers, 0.4 µs per dependent access,
// 85 % for GEMM operand streams.
var KernelFitStart = KernelParams{2e-6, 0.85, 2000, 0.9, 0.5, 0.15, 0.4e-6, 0.85}

// ParamsOf reads a GPU's fitted fields.
func ParamsOf(g hw.GPU) KernelParams {
	return KernelParams{g.KernelLaunchS, g.TensorEfficiency, g.GEMMTileOverheadCycles, g.HBMEfficiency,
		g.RowKernelBandwidthFraction, g.GatherBandwidthFraction, g.MemoryLatencyS, g.GEMMBandwidthFraction}
}

// WithParams sets them; fractions are capped at 1.
func WithParams(g hw.GPU, p KernelParams) hw.GPU {
	g.KernelLaunchS = p[0]
	g.TensorEfficiency = math.Min(p[1], 1)
	g.GEMMTileOverheadCycles = p[2]
	g.HBMEfficiency = math.Min(p[3], 1)
	g.RowKernelBandwidthFraction = math.Min(p[4], 1)
	g.GatherBandwidthFraction = math.Min(p[5], 1)
	g.MemoryLatencyS = p[6]
	g.GEMMBandwidthFraction = math.Min(p[7], 1)
	return g
}

// ofHBM are the parameters that are fractions of the vectorized kernels'
// HBM bandwidth (HBMEfficiency, index 3): row kernels, gathers, GEMM
// operands.
var ofHBM = [...]int{4, 5, 7}

// fitVars maps parameters to the fit's variables: logarithms, with the
// bandwidth fractions taken of the datasheet bandwidth rather than of
// HBMEfficiency's, so that moving HBMEfficiency moves only the kernels it
// alone sets (a simplex over nested fractions stalls where a change of one
// must be undone in three others).
func fitVars(p KernelParams) (x KernelParams) {
	for _, i := range ofHBM {
		p[i] *= p[3]
	}
	for i := range p {
		x[i] = math.Log(p[i])
	}
	return x
}

// fitParams is fitVars' inverse.
func fitParams(x KernelParams) (p KernelParams) {
	for i := range x {
		p[i] = math.Exp(x[i])
	}
	for _, i := range ofHBM {
		p[i] /= p[3]
	}
	return p
}

// FitKernelParams minimises Objective over the rows by Nelder–Mead in
// fitVars' variables, from start, for at most iters steps
// (calibrate.Minimize, which the calibrate kind fits a part's own tables
// with).
func FitKernelParams(g hw.GPU, rows []*KernelRow, start KernelParams, iters int) (KernelParams, float64) {
	f := func(x []float64) float64 {
		es, err := PriceRows(WithParams(g, fitParams(KernelParams(x))), rows)
		if err != nil {
			return math.Inf(1)
		}
		return Objective(es)
	}
	x0 := fitVars(start)
	x, v, _, err := calibrate.Minimize(context.Background(), f, x0[:], 0.3, iters, nil)
	if err != nil {
		return start, math.Inf(1)
	}
	return fitParams(KernelParams(x)), v
}

// FitL2Latency fits hw.GPU.L2LatencyS alone on the training split's norm
// rows, the other parameters held at the GPU's: the latency of the norm's
// second pass, which reads what L1 and L2 hold, beside the first pass's
// DRAM latency (MemoryLatencyS, fitted jointly with the rest), the only
// parameter its rows set once the shared ones are fitted. A grid of 5 ns
// from 50 to 600 ns (fitAlone).
func FitL2Latency(g hw.GPU, rows []*KernelRow) (float64, error) {
	return fitAlone(g, rows, "norm", 10, 120, 5e-9, func(g *hw.GPU, x float64) { g.L2LatencyS = x })
}

// FitRotary fits hw.GPU.RotaryBandwidthFraction alone on the training
// split's RoPE rows, the other parameters held at the GPU's: the rotary
// kernel's own bandwidth beside the row kernels' (compute's rotary), the
// only parameter its rows set once the shared ones are fitted. A grid of
// 0.005 from 0.3 to 1 (fitAlone).
func FitRotary(g hw.GPU, rows []*KernelRow) (float64, error) {
	return fitAlone(g, rows, "rope", 60, 200, 0.005, func(g *hw.GPU, x float64) { g.RotaryBandwidthFraction = x })
}

// FitUnaligned fits hw.GPU.UnalignedMMAFraction alone on the fitted half
// of the EleutherAI cookbook's unaligned GEMMs (UnalignedFit: n ≡ 4 mod 8),
// the other parameters held at g's: the only parameter those rows set
// beside the aligned kernels' (the sweep is the only unaligned
// measurement). A grid of 0.005 from 0.3 to 1, scored by Objective's
// measure of one class; the middle of the least run.
func FitUnaligned(g hw.GPU, cook []CookbookRow) (float64, error) {
	var xs, vs []float64
	for i := 60; i <= 200; i++ {
		x := float64(i) * 0.005
		g.UnalignedMMAFraction = x
		e := compute.NewEvaluator(g)
		var classes []string
		var errs []float64
		for _, r := range cook {
			if !UnalignedFit(r) {
				continue
			}
			k, err := cookbookKernelS(e, r)
			if err != nil {
				return 0, err
			}
			classes, errs = append(classes, "gemm"), append(errs, math.Abs(math.Log((k+r.HostS)/r.MeasuredS)))
		}
		xs, vs = append(xs, x), append(vs, calibrate.Objective(classes, errs))
	}
	return middleOfLeast(xs, vs), nil
}

// UnalignedFit reports whether a cookbook GEMM is one FitUnaligned fits
// on: an unaligned row (a dimension no multiple of 8) of n ≡ 4 mod 8 (rows
// 8 bytes apart). The rest, n ≡ 2 or 6 mod 8 (4 bytes apart), are held out.
func UnalignedFit(r CookbookRow) bool { return !aligned16(r) && r.N%8 == 4 }

// middleOfLeast is the middle x of the run of least v.
func middleOfLeast(xs, vs []float64) float64 {
	least := slices.Min(vs)
	var best []float64
	for i, v := range vs {
		if v <= least+1e-12 {
			best = append(best, xs[i])
		}
	}
	return best[len(best)/2]
}

// fitAlone fits one parameter (set) on the training split's rows of one
// op class over the grid i·step, i from lo to hi, the others held at g's.
// The microsecond timer makes the loss stepped, so the least Objective may
// hold on a run of grid points: the middle one of them.
func fitAlone(g hw.GPU, rows []*KernelRow, class string, lo, hi int, step float64, set func(*hw.GPU, float64)) (float64, error) {
	var fit []*KernelRow
	for _, r := range rows {
		if r.Class == class && !HeldOut(r.Model) {
			fit = append(fit, r)
		}
	}
	var xs, vs []float64
	for i := lo; i <= hi; i++ {
		x := float64(i) * step
		set(&g, x)
		es, err := PriceRows(g, fit)
		if err != nil {
			return 0, err
		}
		xs, vs = append(xs, x), append(vs, Objective(es))
	}
	return middleOfLeast(xs, vs), nil
}
