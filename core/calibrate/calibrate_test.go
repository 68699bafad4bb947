package calibrate

import (
	"context"
	"math"
	"testing"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/stats"
	"github.com/stretchr/testify/require"
)

// kernels are GEMMs of a few model widths over token counts, and
// elementwise kernels over sizes, timed on g (the "measurements").
func kernels(t *testing.T, g hw.GPU, tokens []int64) []Kernel {
	t.Helper()
	e := compute.NewEvaluator(g)
	var ks []Kernel
	for _, m := range tokens {
		for _, nk := range [][2]int64{{4096, 4096}, {12288, 4096}, {4096, 11008}, {22016, 4096}} {
			ks = append(ks, Kernel{Op: GEMM, M: m, N: nk[0], K: nk[1], DType: hw.BF16})
		}
		ks = append(ks, Kernel{Op: Elementwise, Bytes: float64(m) * 4096 * 2 * 3, DType: hw.BF16})
	}
	for i := range ks {
		s, err := ks[i].Price(e)
		require.NoError(t, err)
		ks[i].MeasuredS = s
	}
	return ks
}

// A part that differs from its preset in the figures the kernels set is
// found again from the preset: the fitted part prices the kernels it was
// fitted on and other shapes it never saw as the part does, and its
// figures are the part's.
func TestFitRecoversAPart(t *testing.T) {
	h100, _ := hw.GPUByName("h100-sxm")
	part := h100
	for name, v := range map[string]float64{"tensor_efficiency": 0.62, "gemm_tile_overhead_cycles": 2500,
		"hbm_efficiency": 0.7, "kernel_launch_s": 3e-6} {
		require.True(t, part.SetFigure(name, v))
	}
	train := kernels(t, part, []int64{64, 256, 1024, 4096})
	held := kernels(t, part, []int64{128, 512, 2048, 3072})

	before, err := LogErrors(h100, held)
	require.NoError(t, err)
	require.Greater(t, stats.Median(before), 0.1) // the preset is not the part

	fitted := Fittable([]string{GEMM, Elementwise})
	require.Equal(t, []string{"tensor_efficiency", "gemm_tile_overhead_cycles", "gemm_bandwidth_fraction", "kernel_launch_s", "hbm_efficiency"}, fitted)
	res, err := Fit(context.Background(), h100, fitted, train, 2000, nil)
	require.NoError(t, err)
	require.Less(t, res.Objective, 0.01)
	after, err := LogErrors(res.GPU, held)
	require.NoError(t, err)
	require.Less(t, stats.Median(after), 0.01)
	for _, name := range []string{"tensor_efficiency", "hbm_efficiency", "kernel_launch_s"} {
		want, _ := part.Figure(name)
		got, _ := res.GPU.Figure(name)
		require.InEpsilon(t, want, got, 0.05, name)
	}
	// What the kernels do not set stays the preset's.
	require.Equal(t, h100.HBMBandwidthBytesPerS, res.GPU.HBMBandwidthBytesPerS)
	require.Equal(t, h100.RowKernelBandwidthFraction, res.GPU.RowKernelBandwidthFraction)
}

// A fit keeps every figure within its range, and a canceled context stops
// it with the context's error.
func TestFitBoundsAndCancel(t *testing.T) {
	h100, _ := hw.GPUByName("h100-sxm")
	ks := kernels(t, h100, []int64{256, 1024})
	for i := range ks {
		ks[i].MeasuredS *= 0.01 // a hundred times faster than any efficiency allows
	}
	res, err := Fit(context.Background(), h100, []string{"tensor_efficiency", "hbm_efficiency"}, ks, 300, nil)
	require.NoError(t, err)
	for _, name := range []string{"tensor_efficiency", "hbm_efficiency"} {
		v, _ := res.GPU.Figure(name)
		require.LessOrEqual(t, v, 1.0, name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Fit(ctx, h100, []string{"tensor_efficiency"}, ks, 300, nil)
	require.ErrorIs(t, err, context.Canceled)
}

// Nelder–Mead finds a quadratic's minimum.
func TestMinimizeQuadratic(t *testing.T) {
	f := func(x []float64) float64 { return (x[0]-1)*(x[0]-1) + 3*(x[1]+2)*(x[1]+2) }
	x, v, n, err := Minimize(context.Background(), f, []float64{0, 0}, 0.3, 500, nil)
	require.NoError(t, err)
	require.InDelta(t, 1, x[0], 1e-3)
	require.InDelta(t, -2, x[1], 1e-3)
	require.Less(t, v, 1e-6)
	require.Less(t, n, 500)
	require.False(t, math.IsNaN(v))
}
