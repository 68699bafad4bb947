package hw

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGPUPresetsSane(t *testing.T) {
	gpus := GPUPresets()
	require.Len(t, gpus, 14)
	for _, g := range gpus {
		t.Run(g.Name, func(t *testing.T) {
			assert.NotEmpty(t, g.Vendor)
			assert.NotEmpty(t, g.KernelParameters, "where its kernel parameters come from")
			for _, d := range []DType{FP32, TF32, BF16, FP16, INT8} {
				assert.Greater(t, g.Peak(d), 0.0, "peak %s", d)
			}
			assert.GreaterOrEqual(t, g.Peak(FP8), 0.0)
			assert.Greater(t, g.VectorFP32FlopsPerS, 0.0)
			// Tensor rates double as the type halves: tf32 < bf16 == fp16 <= fp8.
			assert.Less(t, g.Peak(FP32), g.Peak(TF32)+1)
			assert.Less(t, g.Peak(TF32), g.Peak(BF16))
			assert.Equal(t, g.Peak(BF16), g.Peak(FP16))
			if g.Peak(FP8) > 0 {
				assert.InDelta(t, 2*g.Peak(BF16), g.Peak(FP8), 0.02*g.Peak(FP8)) // L40S datasheet: 733 vs 2·362
			}
			assert.Greater(t, g.SMCount, 0)
			assert.InDelta(t, 2e9, g.ClockHz, 0.7e9)
			assert.Greater(t, g.SharedMemBytesPerSM, int64(32<<10))
			assert.GreaterOrEqual(t, g.RegisterBytesPerSM, int64(64<<10))
			assert.Greater(t, g.L2Bytes, int64(1<<20))
			// L2 is faster than HBM and smaller than it.
			assert.Greater(t, g.L2BandwidthBytesPerS, g.HBMBandwidthBytesPerS)
			assert.Less(t, g.L2Bytes, g.HBMBytes)
			assert.Greater(t, g.HBMBandwidthBytesPerS, 500e9)
			assert.Greater(t, g.HBMBytes, int64(16e9))
			assert.InDelta(t, 4e-6, g.KernelLaunchS, 3e-6)
			// Measured fractions of the datasheet rates: below 1, and no
			// measured part sustains less than half.
			assert.InDelta(t, 0.75, g.TensorEfficiency, 0.25)
			assert.InDelta(t, 0.75, g.HBMEfficiency, 0.25)
			assert.Less(t, g.TensorPeak(BF16), g.Peak(BF16))
			// Ridge points of current GPUs for bf16 lie between 100 and 600 FLOP/B.
			r := g.RidgeFlopsPerByte(BF16)
			assert.Greater(t, r, 100.0)
			assert.Less(t, r, 600.0)
		})
	}
}

func TestGPUPresetFigures(t *testing.T) {
	// Figures quoted in shared/reference/README.md.
	h100, ok := GPUByName("h100-sxm")
	require.True(t, ok)
	assert.InDelta(t, 989e12, h100.PeakBF16FlopsPerS, 1e12)
	assert.Equal(t, 132, h100.SMCount)
	assert.InDelta(t, 3.35e12, h100.HBMBandwidthBytesPerS, 1e9)
	assert.Equal(t, int64(50<<20), h100.L2Bytes)
	// Ridge: 989.4e12 / 3.35e12 = 295.3 FLOP/B.
	assert.InDelta(t, 295.3, h100.RidgeFlopsPerByte(BF16), 0.1)

	a100, ok := GPUByName("a100-80gb-sxm")
	require.True(t, ok)
	assert.InDelta(t, 312e12, a100.PeakBF16FlopsPerS, 1)
	assert.Equal(t, 108, a100.SMCount)
	assert.Equal(t, int64(40<<20), a100.L2Bytes)
	assert.InDelta(t, 2.0e12, a100.HBMBandwidthBytesPerS, 0.1e12)
	// 312 TF = 108 SMs · 2,048 FLOP/clk · 1.41 GHz (within rounding).
	assert.InDelta(t, 108*2048*1.41e9, a100.PeakBF16FlopsPerS, 1e12)
	// Whitepaper: 5,120 B/clk L2 at 1.41 GHz = 7.22 TB/s.
	assert.InDelta(t, 5120*1.41e9, a100.L2BandwidthBytesPerS, 1e6)
	// Ridge: 312e12 / 2.039e12 = 153.0 FLOP/B.
	assert.InDelta(t, 153.0, a100.RidgeFlopsPerByte(BF16), 0.1)

	h200, ok := GPUByName("h200")
	require.True(t, ok)
	assert.Equal(t, h100.PeakBF16FlopsPerS, h200.PeakBF16FlopsPerS)
	assert.InDelta(t, 4.8e12, h200.HBMBandwidthBytesPerS, 1)
	assert.Equal(t, int64(141e9), h200.HBMBytes)
	// The NVL card: the same die and memory at a lower clock, its tensor
	// peaks 835.5 / 989.4 of the SXM part's.
	nvl, ok := GPUByName("h200-nvl")
	require.True(t, ok)
	assert.Equal(t, h200.HBMBandwidthBytesPerS, nvl.HBMBandwidthBytesPerS)
	assert.InDelta(t, 0.8444, nvl.PeakBF16FlopsPerS/h200.PeakBF16FlopsPerS, 1e-3)
	assert.InDelta(t, 60e12, float64(nvl.SMCount)*256*nvl.ClockHz, 0.1e12)

	a6000, ok := GPUByName("rtx-a6000")
	require.True(t, ok)
	assert.Zero(t, a6000.PeakFP8FlopsPerS, "Ampere has no FP8")
}

func TestLinkPresetsSane(t *testing.T) {
	links := LinkPresets()
	require.Len(t, links, 14) // 10 + pcie3-x16, pcie6-x16, efa-100g and nvlink4-h800
	for _, l := range links {
		assert.Greater(t, l.BandwidthBytesPerS, 1e9, l.Name)
		assert.Greater(t, l.LatencyS, 0.0, l.Name)
		assert.Less(t, l.LatencyS, 1e-4, l.Name)
		assert.GreaterOrEqual(t, l.CollectiveEfficiency, 0.0, l.Name)
		assert.LessOrEqual(t, l.CollectiveEfficiency, 1.0, l.Name)
	}
	nv3, _ := LinkByName("nvlink3")
	// 600 GB/s bidirectional = 300 GB/s per direction.
	assert.Equal(t, 300e9, nv3.BandwidthBytesPerS)
	pcie4, _ := LinkByName("pcie4-x16")
	// 16 GT/s · 16 lanes · 128/130 / 8 bits = 31.51 GB/s.
	assert.InDelta(t, 31.51e9, pcie4.BandwidthBytesPerS, 0.01e9)
	hdr, _ := LinkByName("ib-hdr")
	assert.Equal(t, 25e9, hdr.BandwidthBytesPerS) // 200 Gb/s
	_, ok := LinkByName("nvlink9")
	assert.False(t, ok)
}

func TestPresetNamesUnique(t *testing.T) {
	for _, names := range [][]string{GPUNames(), LinkNames()} {
		seen := map[string]bool{}
		for _, n := range names {
			require.False(t, seen[n], "duplicate %q", n)
			seen[n] = true
		}
	}
	for _, n := range GPUNames() {
		g, ok := GPUByName(n)
		require.True(t, ok)
		require.Equal(t, n, g.Name)
	}
	for _, n := range LinkNames() {
		l, ok := LinkByName(n)
		require.True(t, ok)
		require.Equal(t, n, l.Name)
	}
}

// The H800 is an H100 SXM with NVLink at 400 GB/s both ways; with NCCL's
// efficiency its NVLink carries ≈164 GB/s, DeepSeek-V3's stated 160 GB/s.
func TestH800(t *testing.T) {
	h800, ok := GPUByName("h800")
	require.True(t, ok)
	h100, _ := GPUByName("h100-sxm")
	assert.Equal(t, h100.PeakFP8FlopsPerS, h800.PeakFP8FlopsPerS)
	nv, _ := LinkByName("nvlink4-h800")
	assert.InDelta(t, 160e9, nv.BandwidthBytesPerS*nv.CollectiveEfficiency, 0.05*160e9)
}

// The fitted kernel parameters are set where they were fitted and shared
// by the parts built on the same die.
func TestKernelFitPresets(t *testing.T) {
	for _, name := range []string{"a100-40gb", "a100-80gb-sxm", "h100-sxm", "h100-pcie", "h200", "h200-nvl"} {
		g, ok := GPUByName(name)
		require.True(t, ok)
		assert.Greater(t, g.GEMMTileOverheadCycles, 0.0, name)
		assert.Greater(t, g.MemoryLatencyS, 0.0, name)
		for _, f := range []float64{g.TensorEfficiency, g.HBMEfficiency, g.GEMMBandwidthFraction, g.RowKernelBandwidthFraction, g.GatherBandwidthFraction} {
			assert.Greater(t, f, 0.0, name)
			assert.LessOrEqual(t, f, 1.0, name)
		}
		// Device time per kernel: 1-3 µs (Vidur's one-token residual add
		// takes 2 µs of kernel time on both parts).
		assert.InDelta(t, 2e-6, g.KernelLaunchS, 1e-6, name)
		// Row kernels and gathers reach less than vectorized streaming.
		assert.Less(t, g.RowKernelBandwidth(), g.HBMBandwidth(), name)
		assert.Less(t, g.GatherBandwidth(), g.RowKernelBandwidth(), name)
	}
	h100, _ := GPUByName("h100-sxm")
	h200, _ := GPUByName("h200")
	assert.Equal(t, h100.GEMMTileOverheadCycles, h200.GEMMTileOverheadCycles)
	assert.Equal(t, h100.TensorEfficiency, h200.TensorEfficiency)
	// Parts without a table leave the fitted-only fields at their defaults.
	b200, _ := GPUByName("b200")
	assert.Zero(t, b200.GEMMTileOverheadCycles)
	assert.Equal(t, 2048, b200.ThreadsPerSM())
}

// NVFP4: a 4-bit element and an E4M3 scale per 16 (4.5 bits); Blackwell's
// FP4 tensor peaks are twice its FP8 ones (HGX B200: 144 against 72 PF
// sparse for 8 GPUs; GB200 NVL72: 1,440 against 720 for 72), and no earlier
// part has FP4 math.
func TestFP4(t *testing.T) {
	assert.Equal(t, 0.5625, FP4.Bytes())
	for _, name := range []string{"b200", "gb200"} {
		g, ok := GPUByName(name)
		require.True(t, ok)
		assert.Equal(t, 2*g.PeakFP8FlopsPerS, g.Peak(FP4), name)
	}
	for _, name := range []string{"a100-80gb-sxm", "h100-sxm", "h200", "h800", "mi300x"} {
		g, ok := GPUByName(name)
		require.True(t, ok)
		assert.Zero(t, g.Peak(FP4), name)
	}
}

// Blackwell Ultra: the datasheets' peaks (NVFP4 three times FP8, no longer
// twice), twice the special-function units' exponentials of every other
// part, and the Blackwell SM's derived kernel parameters.
func TestBlackwellUltra(t *testing.T) {
	for _, name := range []string{"b300", "gb300"} {
		g, ok := GPUByName(name)
		require.True(t, ok)
		assert.InDelta(t, 3*g.PeakFP8FlopsPerS, g.Peak(FP4), 1e12, name)
		assert.Equal(t, 32.0, g.ExpPerClock(), name)
		assert.True(t, g.BlockScaledMMA(), name)
		assert.Zero(t, g.FP8PromotionIntervalK, name)
		// The clock is the FP32 peak over 160 SMs of 128 lanes.
		assert.InDelta(t, g.PeakFP32FlopsPerS, 160*256*g.ClockHz, 1, name)
	}
	for _, name := range []string{"a100-80gb-sxm", "h100-sxm", "b200", "gb200"} {
		g, _ := GPUByName(name)
		assert.Equal(t, 16.0, g.ExpPerClock(), name)
	}
}
