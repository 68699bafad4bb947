package fidelity

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fit = flag.Bool("fit", false, "fit the per-GPU kernel parameters on the training split and print them")

func loadKernels(t *testing.T) []KernelRow {
	dir := KernelsDir()
	if dir == "" {
		t.Skip("kernel reference tables (../shared/reference/kernels) not found")
	}
	rows, err := LoadVidur(dir)
	require.NoError(t, err)
	return rows
}

// kernelFitTie is the relative difference in the fit's objective below
// which two optima count as equal: the 1 µs timer steps the loss, and
// Nelder–Mead from different starts ends along a ridge where a higher
// main-loop rate and a larger fixed cost per tile trade off (H100: six
// starts, 1,500 to 6,000 cycles, end within 1.9 % of each other, between
// 0.77 at 3,300 cycles and 0.85 at 5,700).
const kernelFitTie = 2e-2

// TestKernelFit fits the per-GPU parameters on the training models.
// Run: go test ./bench/fidelity -run KernelFit -fit -v
func TestKernelFit(t *testing.T) {
	if !*fit {
		t.Skip("run with -fit to fit the kernel parameters")
	}
	rows := loadKernels(t)
	skus, by := BySKU(rows)
	var b strings.Builder
	for _, sku := range skus {
		g, err := VidurGPU(sku)
		require.NoError(t, err)
		// The joint fit prices the norm's second pass at the DRAM latency
		// (L2LatencyS unset), as before that latency had its own
		// parameter: FitL2Latency fits it afterwards, alone, as FitRotary
		// fits the rotary bandwidth. Fitted jointly with L2LatencyS in
		// place, the A100's parameters move to another basin of the
		// stepped loss (objective 0.0484 against the presets' 0.0497, whose
		// held-out embedding median reads 5.9 % and norm 5.2 %).
		l2 := g.L2LatencyS
		g.L2LatencyS = 0
		var train []*KernelRow
		for _, r := range by[sku] {
			if !HeldOut(r.Model) {
				train = append(train, r)
			}
		}
		// The 1 µs timer makes the loss stepped, with several basins:
		// start from a few tile overheads and from the presets themselves
		// (so that a change to the model refines the previous optimum
		// rather than losing it for a rougher basin), and restart each
		// from its best point.
		type optimum struct {
			p KernelParams
			v float64
		}
		var opts []optimum
		best := math.Inf(1)
		starts := []KernelParams{KernelFitStart, KernelFitStart, KernelFitStart, ParamsOf(g)}
		names := []string{"clk 1500", "clk 3000", "clk 6000", "presets"}
		for i, clk := range []float64{1500, 3000, 6000} {
			starts[i][2] = clk
		}
		for i, q := range starts {
			var w float64
			for range 3 {
				q, w = FitKernelParams(g, train, q, 600)
			}
			fmt.Fprintf(&b, "%s start %s: objective %.5f, %.0f cycles per tile: %.4g\n", sku, names[i], w, q[2], ParamsOf(WithParams(g, q)))
			opts = append(opts, optimum{q, w})
			best = math.Min(best, w)
		}
		// Objectives within 2 % of the lowest are a tie the stepped loss
		// cannot separate. A tie goes to the presets' basin (the previous
		// optimum refined: a model change the loss cannot tell apart does
		// not move every parameter to another ridge point), else to the
		// smaller fixed cost per tile.
		p, v := KernelFitStart, math.Inf(1)
		for i, o := range opts {
			if o.v > best*(1+kernelFitTie) {
				continue
			}
			if names[i] == "presets" {
				p, v = o.p, o.v
				break
			}
			if math.IsInf(v, 1) || o.p[2] < p[2] {
				p, v = o.p, o.v
			}
		}
		p = ParamsOf(WithParams(g, p)) // fractions capped at 1
		fmt.Fprintf(&b, "%s (%s): train objective %.4f:", sku, g.Name, v)
		for i, n := range KernelParamNames {
			fmt.Fprintf(&b, " %s=%.4g", n, p[i])
		}
		fmt.Fprintf(&b, "\nFIT %s launchS: %.4g, tensorEff: %.4g, tileOverheadClk: %.4g, hbmEff: %.4g, rowFrac: %.4g, gatherFrac: %.4g, latencyS: %.4g, gemmFrac: %.4g\n",
			sku, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])
		g.L2LatencyS = l2
		es, err := PriceRows(WithParams(g, p), by[sku])
		require.NoError(t, err)
		for _, c := range KernelClasses {
			for _, held := range []bool{false, true} {
				s := Summarize(Filter(es, func(r *KernelRow) bool { return r.Class == c && HeldOut(r.Model) == held }))
				fmt.Fprintf(&b, "  %-12s held-out=%-5v median %5.1f%% p90 %5.1f%% signed %+5.1f%% |", c, held, 100*s.Median, 100*s.P90, 100*s.Bias)
				for _, rg := range KernelRanges {
					s := Summarize(Filter(es, func(r *KernelRow) bool {
						return r.Class == c && HeldOut(r.Model) == held && KernelRange(r.Tokens) == rg
					}))
					fmt.Fprintf(&b, " %s: %+5.1f%%/%4.1f%%", rg, 100*s.Bias, 100*s.Median)
				}
				b.WriteString("\n")
			}
		}
	}
	t.Log("\n" + b.String())
}

func kernelReport(t *testing.T) ([]KernelRow, string) {
	rows := loadKernels(t)
	cook, err := LoadCookbook(KernelsDir())
	require.NoError(t, err)
	dense, err := LoadVidurDense(KernelsDir())
	require.NoError(t, err)
	layer, err := LoadCookbookLayer(KernelsDir())
	require.NoError(t, err)
	rep, err := KernelReport(rows, dense, cook, layer)
	require.NoError(t, err)
	return rows, rep
}

// TestKernelReport fails when KERNELS.md differs from what the code
// produces; -update rewrites it.
// Run: go test ./bench/fidelity -run KernelReport [-update]
func TestKernelReport(t *testing.T) {
	_, rep := kernelReport(t)
	if *update {
		require.NoError(t, os.WriteFile("KERNELS.md", []byte(rep), 0o644))
		return
	}
	old, err := os.ReadFile("KERNELS.md")
	require.NoError(t, err)
	require.Equal(t, string(old), rep, "KERNELS.md is stale: go test ./bench/fidelity -run KernelReport -update")
}

// TestKernelHeldOutError is issue 14's check: on the held-out models the
// median |error| is at most 5 % per GPU and op class.
func TestKernelHeldOutError(t *testing.T) {
	rows := loadKernels(t)
	cells, err := KernelCells(rows)
	require.NoError(t, err)
	for _, c := range cells {
		if c.Range != "all" {
			continue
		}
		t.Run(c.SKU+"/"+c.Class, func(t *testing.T) {
			require.Greater(t, c.HeldOut.N, 20)
			if why, ok := KernelCheckPending[c.SKU+"/"+c.Class]; ok {
				require.Greater(t, c.HeldOut.Median, 0.05, "%s %s now meets the check: remove it from KernelCheckPending", c.SKU, c.Class)
				t.Skipf("held-out median |error| %.1f%% > 5%%: %s", 100*c.HeldOut.Median, why)
			}
			require.LessOrEqual(t, c.HeldOut.Median, 0.05, "held-out median |error| %s %s", c.SKU, c.Class)
		})
	}
}

// kernelCeiling is where each class's held-out median |error| stands today
// (KERNELS.md), rounded up: a change that makes a class worse fails here
// even while issue 14's 5 % is not met.
var kernelCeiling = map[string]float64{"gemm": 0.07, "norm": 0.09, "elementwise": 0.12, "rope": 0.05, "embedding": 0.08}

// TestKernelHeldOutNoRegression guards the held-out medians and the
// large-GEMM bias: the fitted model must not drift back to the optimism
// of a best-shape ceiling (A100 and H100 GEMMs above 512 tokens within 3 %
// of the measurements in the median).
func TestKernelHeldOutNoRegression(t *testing.T) {
	rows := loadKernels(t)
	cells, err := KernelCells(rows)
	require.NoError(t, err)
	for _, c := range cells {
		switch {
		case c.Range == "all":
			assert.LessOrEqual(t, c.HeldOut.Median, kernelCeiling[c.Class], "%s %s", c.SKU, c.Class)
		case c.Class == "gemm" && c.Range == "513-4096":
			assert.InDelta(t, 0, c.HeldOut.Bias, 0.03, "%s large GEMMs", c.SKU)
		}
	}
}

// TestAttentionNoRegression guards FlashAttention against the
// FlashAttention-3 paper's H100 figures (KERNELS.md): the forward within
// 15 % of cuDNN's at every sequence, with and without the causal mask; the
// backward within 5 % of cuDNN's on the sizes its lane work was not fitted
// on from 2k tokens (512 tokens, whose blocks are few, within 15 %) and
// within 10 % of FlashAttention-3's from 1k, and slower per FLOP than the
// forward at long sequences, as both kernels are.
func TestAttentionNoRegression(t *testing.T) {
	g, ok := hw.GPUByName("h100-sxm")
	require.True(t, ok)
	fwd := map[int64]float64{}
	for _, f := range AttentionFigures {
		m, err := AttentionPrice(g, f)
		require.NoError(t, err)
		if f.Pass == "forward" {
			assert.InEpsilon(t, f.CuDNN, m, 0.15, "%s causal=%v seq %d", f.Pass, f.Causal, f.Seq)
			if !f.Causal {
				fwd[f.Seq] = m
			}
			continue
		}
		switch {
		case f.Seq < 1024:
			assert.InEpsilon(t, f.CuDNN, m, 0.15, "backward seq %d vs cuDNN", f.Seq)
		case !FlashBackwardFit(f):
			assert.InEpsilon(t, f.CuDNN, m, 0.05, "backward seq %d vs cuDNN (held out)", f.Seq)
		}
		if f.Seq >= 1024 {
			assert.InEpsilon(t, f.FA3, m, 0.10, "backward seq %d vs FA3", f.Seq)
		}
		if f.Seq >= 4096 {
			assert.Less(t, m, fwd[f.Seq], "backward seq %d: slower per FLOP than the forward", f.Seq)
		}
	}
}

// DeepSeek-V3's block-scaled FP8 GEMMs against DeepSeek's profile (nothing
// fitted to it): the forward and input-gradient GEMMs, the kernels an FP8
// prefill runs, within a median 7.5 % and each forward one within 10 %;
// without the per-128 promotion (fast accumulation) the forward GEMMs of
// many tiles come out more than 10 % fast. The weight gradients, which
// DeepGEMM accumulates into FP32, are known short (KERNELS.md).
func TestDeepSeekGEMMsAgainstProfile(t *testing.T) {
	_, med, err := DeepSeekGEMMReport()
	require.NoError(t, err)
	assert.LessOrEqual(t, med, 0.075)
	price, err := DeepSeekGEMMPrices()
	require.NoError(t, err)
	for _, r := range DeepSeekGEMMs[:9] {
		assert.InEpsilon(t, r.ProfileUS, price[r.Op], 0.10, r.Op)
	}
}

// Transformer Engine's GEMM benchmark on an H200 NVL (nothing fitted to
// it): every precision and group within 10 %; current scaling costs more
// than delayed scaling by its amax passes, and without them it would come
// out more than 5 % fast on the weight-gradient shapes.
func TestTEGEMMBenchmark(t *testing.T) {
	_, worst, err := TEGEMMReport()
	require.NoError(t, err)
	assert.LessOrEqual(t, worst, 0.10)
	price, err := TEGEMMPrices()
	require.NoError(t, err)
	for i := range TEGEMMGroups {
		assert.Greater(t, price["FP8Current"][i], price["FP8Delayed"][i])
		assert.Less(t, price["FP8Delayed"][i], price["BF16"][i]/1.5, "FP8 ~1.7x BF16 with its casts")
	}
	assert.Less(t, price["FP8Delayed"][2]/TEGEMMMeasured["FP8Current"][2]-1, -0.05)
}

// TestFlashBackwardFitIsOptimal: compute.FlashBackwardLaneOpsPerScore is
// the fit's optimum on its split (cuDNN's backward at 1k, 4k, 16k tokens).
// Run: go test ./bench/fidelity -run TestFlashBackwardFitIsOptimal -v
func TestFlashBackwardFitIsOptimal(t *testing.T) {
	requireH100FitOptimal(t, "backward lane work per score", FitFlashBackward, func(hw.GPU) float64 {
		return compute.FlashBackwardLaneOpsPerScore
	})
}

// TestSyncMMAFitIsOptimal: the GH100 presets' SyncMMAFraction is the fit's
// optimum on its split (FlashAttention-2's head-dim-128 bars).
// Run: go test ./bench/fidelity -run TestSyncMMAFitIsOptimal -v
func TestSyncMMAFitIsOptimal(t *testing.T) {
	requireH100FitOptimal(t, "mma.sync share of the main-loop rate", FitSyncMMA, func(g hw.GPU) float64 { return g.SyncMMAFraction })
}

// requireH100FitOptimal checks that an attention fit on the h100-sxm
// preset returns the value the code uses.
func requireH100FitOptimal(t *testing.T, what string, fit func(hw.GPU) (float64, error), used func(hw.GPU) float64) {
	g, ok := hw.GPUByName("h100-sxm")
	require.True(t, ok)
	v, err := fit(g)
	require.NoError(t, err)
	t.Logf("%s: fitted %g, in use %g", what, v, used(g))
	require.InDelta(t, used(g), v, 1e-9)
}

// A row is compared as Vidur's timer records it: each kernel's time
// truncated to the microsecond, summed over the kernels in the timer
// (phi-2's two adds are two records).
func TestKernelTimedAsTruncated(t *testing.T) {
	g, err := VidurGPU("a100")
	require.NoError(t, err)
	e := compute.NewEvaluator(g)
	add := model.NewStreaming("add", model.Elementwise, hw.FP16, 1e6, 6e6)
	c, err := e.OpAs(add, compute.ImplVectorized)
	require.NoError(t, err)
	one := KernelRow{Ops: []model.Op{add}, Impl: compute.ImplVectorized}
	pred, timed, err := one.Price(e)
	require.NoError(t, err)
	require.InEpsilon(t, c.TimeS, pred, 1e-12)
	require.InDelta(t, math.Floor(c.TimeS*1e6)*1e-6, timed, 1e-15)
	require.Less(t, timed, pred)
	two := KernelRow{Ops: []model.Op{add, add}, Impl: compute.ImplVectorized}
	_, timed2, err := two.Price(e)
	require.NoError(t, err)
	require.InDelta(t, 2*timed, timed2, 1e-15)
	k := KernelErr{Row: &KernelRow{MeasuredS: timed}, PredS: pred, TimedS: timed}
	require.Zero(t, k.AbsErr(), "a prediction the timer reads as the measurement has no error")
}

// The fit's variables are the parameters' logarithms with the row, gather
// and GEMM bandwidths taken of the datasheet bandwidth: fitParams undoes
// fitVars, and moving HBMEfficiency's variable alone leaves the row and
// gather bandwidths where they were (and the GEMM operands', below the cap
// of its fraction at 1, where the A100's sits).
func TestFitVarsKeepBandwidthsApart(t *testing.T) {
	g, err := VidurGPU("a100")
	require.NoError(t, err)
	p := ParamsOf(g)
	back := fitParams(fitVars(p))
	for i := range p {
		require.InEpsilon(t, p[i], back[i], 1e-12, KernelParamNames[i])
	}
	x := fitVars(p)
	x[3] += math.Log(0.9)
	q := fitParams(x)
	a, b := WithParams(g, p), WithParams(g, q)
	require.InEpsilon(t, 0.9*a.HBMBandwidth(), b.HBMBandwidth(), 1e-12)
	require.InEpsilon(t, a.RowKernelBandwidth(), b.RowKernelBandwidth(), 1e-12)
	require.InEpsilon(t, a.GatherBandwidth(), b.GatherBandwidth(), 1e-12)
}

// TestL2LatencyFitIsOptimal: each preset's L2LatencyS is what
// FitL2Latency finds on the training split.
// Run: go test ./bench/fidelity -run TestL2LatencyFitIsOptimal -v
func TestL2LatencyFitIsOptimal(t *testing.T) {
	requireFitIsPreset(t, "L2LatencyS", FitL2Latency, func(g hw.GPU) float64 { return g.L2LatencyS })
}

// TestRotaryFitIsOptimal: each preset's RotaryBandwidthFraction is
// FitRotary's optimum on its training split.
// Run: go test ./bench/fidelity -run TestRotaryFitIsOptimal -v
func TestRotaryFitIsOptimal(t *testing.T) {
	requireFitIsPreset(t, "RotaryBandwidthFraction", FitRotary, func(g hw.GPU) float64 { return g.RotaryBandwidthFraction })
}

// requireFitIsPreset: a parameter fitted alone after the joint fit, by
// fit on each GPU's kernel rows, is the value its preset holds.
func requireFitIsPreset(t *testing.T, name string, fit func(hw.GPU, []*KernelRow) (float64, error), preset func(hw.GPU) float64) {
	rows := loadKernels(t)
	skus, by := BySKU(rows)
	for _, sku := range skus {
		g, err := VidurGPU(sku)
		require.NoError(t, err)
		x, err := fit(g, by[sku])
		require.NoError(t, err)
		t.Logf("%s (%s): %s fitted %.4g, preset %.4g", sku, g.Name, name, x, preset(g))
		require.InDelta(t, x, preset(g), 1e-12, sku)
	}
}

// TestFlashAttention2Figures: FlashAttention-2's bars on H100 within 15 %
// on the fitting split (head dim 128) but its shortest sequences, within
// 20 % held out (head dim 64), every one slower than the fused kernel of
// the same shape; on the A100, whose native MMA mma.sync is, the two cost
// the same.
func TestFlashAttention2Figures(t *testing.T) {
	h100, ok := hw.GPUByName("h100-sxm")
	require.True(t, ok)
	a100, ok := hw.GPUByName("a100-80gb-sxm")
	require.True(t, ok)
	for _, f := range FA2Figures {
		m, err := FA2Price(h100, f)
		require.NoError(t, err)
		tol := 0.20
		if FA2Fit(f) && f.Seq > 512 {
			tol = 0.15
		}
		assert.InEpsilon(t, f.TFLOPs, m, tol, "%s causal=%v d=%d seq %d", f.Pass, f.Causal, f.HeadDim, f.Seq)
		fused, err := AttentionPrice(h100, AttentionFigure{Pass: f.Pass, Causal: f.Causal, Seq: f.Seq})
		require.NoError(t, err)
		if f.HeadDim == 128 {
			assert.Less(t, m, fused, "%s causal=%v seq %d: FlashAttention-2 slower than the fused kernel", f.Pass, f.Causal, f.Seq)
		}
		onA100, err := FA2Price(a100, f)
		require.NoError(t, err)
		g := a100
		g.SyncMMAFraction = 1
		same, err := FA2Price(g, f)
		require.NoError(t, err)
		assert.InDelta(t, same, onA100, 1e-9*same)
	}
}

// TestUnalignedFitIsOptimal: the A100's UnalignedMMAFraction is
// FitUnaligned's optimum on the fitted half of the cookbook's unaligned
// GEMMs, and the held-out half comes within a median 10 % with it, where
// priced as the aligned kernels run they read 25 % fast.
// Run: go test ./bench/fidelity -run TestUnalignedFitIsOptimal -v
func TestUnalignedFitIsOptimal(t *testing.T) {
	dir := KernelsDir()
	if dir == "" {
		t.Skip("kernel reference tables (../shared/reference/kernels) not found")
	}
	cook, err := LoadCookbook(dir)
	require.NoError(t, err)
	g, err := VidurGPU("a100")
	require.NoError(t, err)
	x, err := FitUnaligned(g, cook)
	require.NoError(t, err)
	t.Logf("a100 (%s): UnalignedMMAFraction fitted %.4g, preset %.4g", g.Name, x, g.UnalignedMMAFraction)
	require.InDelta(t, x, g.UnalignedMMAFraction, 1e-12)
	for _, f := range []float64{g.UnalignedMMAFraction, 1} {
		g.UnalignedMMAFraction = f
		e := compute.NewEvaluator(g)
		var abs []float64
		for _, r := range cook {
			if aligned16(r) || UnalignedFit(r) {
				continue
			}
			k, err := cookbookKernelS(e, r)
			require.NoError(t, err)
			abs = append(abs, math.Abs((k+r.HostS)/r.MeasuredS-1))
		}
		require.Len(t, abs, 112)
		if f == 1 {
			require.Greater(t, Quantile(abs, 0.5), 0.2, "priced as aligned")
		} else {
			require.Less(t, Quantile(abs, 0.5), 0.10, "held-out unaligned GEMMs")
		}
	}
}
