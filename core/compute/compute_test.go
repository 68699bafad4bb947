package compute

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gpu(t *testing.T, name string) hw.GPU {
	g, ok := hw.GPUByName(name)
	require.True(t, ok)
	return g
}

func TestLargeSquareGEMMNearPeakTimesTileEfficiency(t *testing.T) {
	for _, name := range []string{"a100-80gb-sxm", "h100-sxm", "mi300x"} {
		g := gpu(t, name)
		e := NewEvaluator(g)
		o := model.NewGEMM("sq", hw.BF16, 1, 8192, 8192, 8192)
		c, err := e.Op(o)
		require.NoError(t, err)
		assert.Equal(t, BoundCompute, c.Bound, name)
		// Compute-bound: time = waves · tile FLOPs / (sustained peak/SMs) +
		// launch, so achieved = peak · measured matmul efficiency · tile
		// efficiency · (1 − launch share).
		math := c.TimeS - g.KernelLaunchS
		assert.InEpsilon(t, g.PeakBF16FlopsPerS*g.TensorEfficiency*c.TileEfficiency, o.FLOPs/math, 1e-9, name)
		assert.Greater(t, c.TileEfficiency, 0.9, name)
		assert.LessOrEqual(t, c.AchievedFLOPsPerS, g.TensorPeak(hw.BF16))
		t.Logf("%s 8192³ bf16: tile %dx%dx%d split %d waves %d eff %.3f achieved %.0f TF/s",
			name, c.TileM, c.TileN, c.TileK, c.SplitK, c.Waves, c.TileEfficiency, c.AchievedFLOPsPerS/1e12)
	}
}

// A tiny kernel is its device-side launch plus its work; on a stream whose
// host issues it, it takes the host's dispatch interval.
func TestTinyGEMMLaunchBound(t *testing.T) {
	g := gpu(t, "h100-sxm")
	require.Greater(t, g.HostDispatchS, g.KernelLaunchS)
	c, err := NewEvaluator(g).Op(model.NewGEMM("tiny", hw.BF16, 1, 16, 16, 16))
	require.NoError(t, err)
	assert.Equal(t, BoundLaunch, c.Bound)
	assert.InDelta(t, g.KernelLaunchS, c.TimeS, 1e-8)
	assert.InDelta(t, g.HostDispatchS, c.Issued(g.HostDispatchS), 1e-12)
}

func TestElementwiseIsBytesOverHBM(t *testing.T) {
	g := gpu(t, "a100-80gb-sxm")
	// A residual add over 64M bf16 elements: read 2, write 1 = 6 bytes each.
	n := 64.0 * (1 << 20)
	o := model.NewStreaming("add", model.Elementwise, hw.BF16, n, 6*n)
	c, err := NewEvaluator(g).Op(o)
	require.NoError(t, err)
	assert.Equal(t, BoundHBM, c.Bound)
	assert.InEpsilon(t, 6*n/g.HBMBandwidth()+g.KernelLaunchS, c.TimeS, 1e-12)
	assert.Less(t, g.HBMBandwidth(), g.HBMBandwidthBytesPerS, "measured below the datasheet")
}

func TestUnsupportedAndComm(t *testing.T) {
	e := NewEvaluator(gpu(t, "a100-80gb-sxm"))
	_, err := e.Op(model.NewGEMM("g", hw.FP8, 1, 64, 64, 64))
	require.Error(t, err, "A100 has no fp8")
	_, err = e.Op(model.NewComm("ar", model.AllReduce, 1e6))
	require.Error(t, err)
}

// A faster HBM or a higher peak never makes an operator slower.
func TestMonotoneInHardware(t *testing.T) {
	base := gpu(t, "a100-80gb-sxm")
	ops := graphOps(t, "llama2-7b", model.Training)
	ops = append(ops, graphOps(t, "mamba-2.8b", model.Training)...)
	ops = append(ops, graphOps(t, "llama2-7b", model.Decode)...)
	faster := []func(hw.GPU) hw.GPU{
		func(g hw.GPU) hw.GPU { g.HBMBandwidthBytesPerS *= 1.7; return g },
		func(g hw.GPU) hw.GPU { g.PeakBF16FlopsPerS *= 1.7; return g },
		func(g hw.GPU) hw.GPU { g.VectorFP32FlopsPerS *= 1.7; return g },
		func(g hw.GPU) hw.GPU { g.L2BandwidthBytesPerS *= 1.7; return g },
		func(g hw.GPU) hw.GPU { g.L2Bytes *= 2; return g },
	}
	eb := NewEvaluator(base)
	for i, f := range faster {
		ef := NewEvaluator(f(base))
		for _, o := range ops {
			cb, err := eb.Op(o)
			require.NoError(t, err)
			cf, err := ef.Op(o)
			require.NoError(t, err)
			assert.LessOrEqual(t, cf.TimeS, cb.TimeS*(1+1e-12), "change %d op %s", i, o.Name)
		}
	}
}

// More work of the same shape never takes less time.
func TestMonotoneInWork(t *testing.T) {
	e := NewEvaluator(gpu(t, "h100-sxm"))
	prev := 0.0
	for m := int64(64); m <= 16384; m += 64 {
		c, err := e.Op(model.NewGEMM("g", hw.BF16, 1, m, 4096, 4096))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, c.TimeS, prev*(1-1e-12), "m=%d", m)
		prev = c.TimeS
	}
	// Small attentions sit on the launch floor; above it, time grows
	// with the sequence.
	prev = 0
	first := 0.0
	for s := int64(128); s <= 16384; s *= 2 {
		c, err := e.Op(model.NewFlashAttention("fa", hw.BF16, 1, 32, 8, s, s, 128, true))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, c.TimeS, prev)
		if c.TimeS > 2*e.GPU().KernelLaunchS {
			assert.Greater(t, c.TimeS, prev, "s=%d above the dispatch floor", s)
		}
		if first == 0 {
			first = c.TimeS
		}
		prev = c.TimeS
	}
	assert.Greater(t, prev, 100*first)
	prev = 0
	for kv := int64(128); kv <= 131072; kv *= 2 {
		c, err := e.Op(model.NewDecodeAttention("d", hw.BF16, 8, 32, 8, kv, 128))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, c.TimeS, prev)
		prev = c.TimeS
	}
}

func graphOps(t *testing.T, name string, ph model.Phase) []model.Op {
	c, ok := model.ByName(name)
	require.True(t, ok)
	g, err := model.Build(c, model.Run{Phase: ph, Batch: 2, SeqLen: 2048, KVLen: 2048, TP: 1, DType: hw.BF16})
	require.NoError(t, err)
	var ops []model.Op
	for _, b := range g.Blocks {
		ops = append(ops, b.Forward...)
		ops = append(ops, b.Backward...)
		ops = append(ops, b.Optimizer...)
	}
	return ops
}

func TestDecodeGEMVIsMemoryBound(t *testing.T) {
	g := gpu(t, "a100-80gb-sxm")
	// Batch-1 decode of a 4096×11008 projection: read 90 MB of weights.
	o := model.NewGEMM("up", hw.BF16, 1, 1, 11008, 4096)
	c, err := NewEvaluator(g).Op(o)
	require.NoError(t, err)
	assert.Equal(t, BoundHBM, c.Bound)
	assert.InEpsilon(t, o.Bytes/g.HBMBandwidth(), c.TimeS-g.KernelLaunchS, 0.01)
}

func TestFlashAttentionEfficiency(t *testing.T) {
	for _, name := range []string{"a100-80gb-sxm", "h100-sxm"} {
		g := gpu(t, name)
		c, err := NewEvaluator(g).Op(model.NewFlashAttention("fa", hw.BF16, 8, 32, 32, 4096, 4096, 128, false))
		require.NoError(t, err)
		eff := c.AchievedFLOPsPerS / g.PeakBF16FlopsPerS
		t.Logf("%s FA fwd s=4096 d=128: %.0f TF/s (%.0f%% of peak), bound %s", name, c.AchievedFLOPsPerS/1e12, 100*eff, c.Bound)
		assert.Greater(t, eff, 0.4)
		assert.Less(t, eff, 0.95)
	}
}

func TestQuantizeIsBytesOverHBM(t *testing.T) {
	g := gpu(t, "h100-sxm")
	// 256M bf16 values to int8 with one fp32 scale per 128: read 2 B, write
	// 1 B per value, plus 4/128 B of scales.
	n := int64(256 << 20)
	o := model.QuantizeOp("q", n, hw.BF16, hw.INT8, 128)
	assert.Equal(t, float64(n)*(3+4.0/128), o.Bytes)
	c, err := NewEvaluator(g).Op(o)
	require.NoError(t, err)
	assert.Equal(t, BoundHBM, c.Bound)
	assert.InEpsilon(t, o.Bytes/g.HBMBandwidth()+g.KernelLaunchS, c.TimeS, 1e-12)
}

func TestMemoizedEqualsFresh(t *testing.T) {
	g := gpu(t, "a100-80gb-sxm")
	e := NewEvaluator(g)
	for _, o := range graphOps(t, "llama2-13b", model.Training) {
		a, err := e.Op(o)
		require.NoError(t, err)
		b, err := e.Op(o) // cached
		require.NoError(t, err)
		c, err := NewEvaluator(g).Op(o) // fresh
		require.NoError(t, err)
		require.Equal(t, a, b)
		require.Equal(t, a, c)
	}
}
