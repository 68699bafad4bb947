package calibrate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/calibrate"
	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	scal "github.com/eidolon-sim/eidolon/core/scenario/calibrate"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/require"
)

// measured is a kernels list timed on g: GEMMs of LLaMA-2-7B's widths over
// token counts and the elementwise kernels of the same rows.
func measured(t *testing.T, g hw.GPU) string {
	t.Helper()
	e := compute.NewEvaluator(g)
	var rows []string
	for _, m := range []int64{64, 128, 256, 512, 1024, 2048, 4096} {
		for _, nk := range [][2]int64{{12288, 4096}, {4096, 4096}, {22016, 4096}, {4096, 11008}} {
			k := calibrate.Kernel{Op: calibrate.GEMM, Batch: 1, M: m, N: nk[0], K: nk[1], DType: hw.BF16}
			s, err := k.Price(e)
			require.NoError(t, err)
			rows = append(rows, fmt.Sprintf(`{"op":"gemm","m":%d,"n":%d,"k":%d,"time_s":%g}`, m, nk[0], nk[1], s))
		}
		k := calibrate.Kernel{Op: calibrate.Elementwise, Bytes: float64(m) * 4096 * 6, DType: hw.BF16}
		s, err := k.Price(e)
		require.NoError(t, err)
		rows = append(rows, fmt.Sprintf(`{"op":"elementwise","bytes":%g,"time_s":%g}`, k.Bytes, s))
	}
	return "[" + strings.Join(rows, ",") + "]"
}

func run(t *testing.T, js string) (scenario.Result, error) {
	t.Helper()
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	return res, err
}

// Kernels timed on a part that differs from the A100 preset in its main
// loop, tile overhead and streaming bandwidth: calibrating the preset on
// every other one prices the held-out half as the part does, and the gpu
// spec the summary writes is that part for any other kind.
func TestCalibrateRecoversAPartAndWritesItsSpec(t *testing.T) {
	a100, _ := hw.GPUByName("a100-80gb-sxm")
	part := a100
	part.TensorEfficiency, part.GEMMTileOverheadCycles, part.HBMEfficiency = 0.7, 3500, 0.75
	res, err := run(t, `{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":`+measured(t, part)+`}`)
	require.NoError(t, err)
	sum := res.Tables[0].Rows.([]scal.SummaryRow)[0]
	require.Equal(t, 35, sum.Kernels)
	require.Equal(t, 18, sum.FitKernels) // every other kernel held out
	require.Greater(t, sum.StartHeldOutMedian, 0.05)
	require.Less(t, sum.FittedHeldOutMedian, 0.01)
	figs := res.Tables[1].Rows.([]scal.FigureRow)
	got := map[string]float64{}
	for _, f := range figs {
		got[f.Figure] = f.Fitted
	}
	require.InEpsilon(t, 0.7, got["tensor_efficiency"], 0.05)
	require.InEpsilon(t, 0.75, got["hbm_efficiency"], 0.05)

	// The written spec is a what-if GPU the spec language takes, and it
	// prices every kernel as the fit did.
	var g spec.GPU
	require.NoError(t, json.Unmarshal([]byte(sum.GPUSpec), &g))
	fitted, ok := g.Resolve()
	require.True(t, ok, sum.GPUSpec)
	e := compute.NewEvaluator(fitted)
	for _, k := range res.Tables[2].Rows.([]scal.KernelRow) {
		var ck calibrate.Kernel
		if k.Op == calibrate.GEMM {
			_, err := fmt.Sscanf(strings.ReplaceAll(k.Shape, "×", " "), "%d %d %d %d", &ck.Batch, &ck.M, &ck.N, &ck.K)
			require.NoError(t, err)
		} else {
			_, err := fmt.Sscanf(k.Shape, "%g B", &ck.Bytes)
			require.NoError(t, err)
		}
		ck.Op, ck.DType = k.Op, hw.DType(k.DType)
		s, err := ck.Price(e)
		require.NoError(t, err)
		require.InEpsilon(t, k.FittedS, s, 1e-9, k.Shape)
	}
}

func TestCalibrateProblemsNameTheField(t *testing.T) {
	for js, want := range map[string][]string{
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":[]}`:                         {"kernels: must list 1 to 10000 measured kernels, got 0"},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":[{"op":"conv","time_s":1}]}`: {`kernels[0].op: must be one of ["gemm", "elementwise"]`},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":[{"op":"gemm","m":1,"n":2,"k":3,"bytes":5,"time_s":1e-5}]}`: {
			"kernels[0].bytes: applies to elementwise kernels only"},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":[{"op":"elementwise","m":4,"bytes":5,"time_s":1e-5}]}`: {
			"kernels[0].m: applies to gemm kernels only"},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":[{"op":"gemm","m":1,"n":2,"k":3,"time_s":0}]}`: {
			"kernels[0].time_s: must be a kernel time in seconds"},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":[{"op":"gemm","m":1,"n":2,"k":3}]}`: {"kernels[0].time_s: required"},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":[{"op":"gemm","m":1,"n":2,"k":3,"dtype":"fp8","time_s":1e-5}]}`: {
			"kernels[0].dtype: a100-80gb-sxm has no fp8 math units"},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","fit":["hbm_efficiency"],"kernels":[{"op":"gemm","m":1,"n":8,"k":8,"time_s":1e-5}]}`: {
			`fit[0]: must be one of ["tensor_efficiency", "gemm_tile_overhead_cycles", "gemm_bandwidth_fraction", "kernel_launch_s"]`},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","fit":["hbm_efficiency"],"kernels":[{"op":"gemm","m":1,"n":2,"k":3,"time_s":1e-5}]}`: {
			`"kernel_launch_s", "unaligned_mma_fraction"]`},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","held_out_every":1,"kernels":[{"op":"gemm","m":1,"n":2,"k":3,"time_s":1e-5}]}`: {
			"held_out_every: must be 0 (no held-out kernels) or in [2, 1000], got 1"},
		`{"kind":"calibrate","gpu":"a100-80gb-sxm","max_iterations":20000,"kernels":` + strings.Repeat(`[`, 1) +
			strings.TrimSuffix(strings.Repeat(`{"op":"gemm","m":1,"n":2,"k":3,"time_s":1e-5},`, 1001), ",") + `]}`: {
			"max_iterations: kernels × max_iterations is 2e+07"},
	} {
		_, err := run(t, js)
		require.Error(t, err, js)
		for _, w := range want {
			require.Contains(t, err.Error(), w, js)
		}
	}
}

// Ctrl-C: a canceled context stops a calibration with its error.
func TestCalibrateStopsWhenCanceled(t *testing.T) {
	a100, _ := hw.GPUByName("a100-80gb-sxm")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := all.Run(scenario.Env{Ctx: ctx}, []byte(`{"kind":"calibrate","gpu":"a100-80gb-sxm","kernels":`+measured(t, a100)+`}`))
	require.ErrorIs(t, err, context.Canceled)
}

// GEMMs whose rows are no multiple of 16 bytes (an output of 4,100
// columns) set unaligned_mma_fraction: the default fit moves it when the
// kernels hold such GEMMs, and recovers the part's from them; with every
// row aligned it is no figure the kernels set, so naming it is refused.
func TestCalibrateFitsUnalignedGEMMs(t *testing.T) {
	a100, _ := hw.GPUByName("a100-80gb-sxm")
	part := a100
	part.UnalignedMMAFraction = 0.55
	e := compute.NewEvaluator(part)
	var rows []string
	for _, m := range []int64{1024, 2048, 4096, 8192} {
		for _, n := range []int64{4096, 4100} {
			k := calibrate.Kernel{Op: calibrate.GEMM, Batch: 1, M: m, N: n, K: 4096, DType: hw.BF16}
			s, err := k.Price(e)
			require.NoError(t, err)
			rows = append(rows, fmt.Sprintf(`{"op":"gemm","m":%d,"n":%d,"k":4096,"time_s":%g}`, m, n, s))
		}
	}
	res, err := run(t, `{"kind":"calibrate","gpu":"a100-80gb-sxm","held_out_every":0,"kernels":[`+strings.Join(rows, ",")+`]}`)
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range res.Tables[1].Rows.([]scal.FigureRow) {
		got[f.Figure] = f.Fitted
	}
	require.Contains(t, got, calibrate.UnalignedFigure)
	require.InEpsilon(t, 0.55, got[calibrate.UnalignedFigure], 0.05)

	aligned := []string{}
	for i, r := range rows {
		if i%2 == 0 {
			aligned = append(aligned, r)
		}
	}
	_, err = run(t, `{"kind":"calibrate","gpu":"a100-80gb-sxm","fit":["unaligned_mma_fraction"],"kernels":[`+strings.Join(aligned, ",")+`]}`)
	require.ErrorContains(t, err, "fit[0]")
}
