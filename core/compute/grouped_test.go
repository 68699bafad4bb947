package compute

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// A grouped GEMM costs the sum of its experts' GEMMs less all launches but
// one; an expert without tokens costs nothing; skew costs more than
// balance for the same total tokens (small experts waste tiles and the
// large one grows).
func TestGroupedGEMMIsSumOfExperts(t *testing.T) {
	g := gpu(t, "h100-sxm")
	e := NewEvaluator(g)
	groups := []int64{4096, 1024, 0, 3000}
	o := model.NewGroupedGEMM("x", hw.BF16, groups, 4096, 7168, false)
	c, err := e.Op(o)
	require.NoError(t, err)
	var want float64
	for _, m := range groups {
		if m == 0 {
			continue
		}
		ci, err := e.Op(model.NewGEMM("x", hw.BF16, 1, m, 4096, 7168))
		require.NoError(t, err)
		want += ci.TimeS - g.KernelLaunchS
	}
	want += g.KernelLaunchS
	assert.InDelta(t, want, c.TimeS, 1e-12)
	assert.Equal(t, 1, c.Kernels)
	assert.InDelta(t, 2*8120*4096*7168.0, c.FLOPs, 1)

	bal, _ := e.Op(model.NewGroupedGEMM("b", hw.BF16, []int64{2048, 2048, 2048, 2048}, 4096, 7168, false))
	skew, _ := e.Op(model.NewGroupedGEMM("s", hw.BF16, []int64{8000, 64, 64, 64}, 4096, 7168, false))
	assert.Greater(t, skew.TimeS, bal.TimeS)

	w, err := e.Op(model.NewGroupedGEMM("w", hw.BF16, groups, 4096, 7168, true))
	require.NoError(t, err)
	assert.Greater(t, w.TimeS, 0.0)
	// FP8 runs on the H100's fp8 tensor cores, faster than bf16.
	f8, err := e.Op(model.NewGroupedGEMM("f", hw.FP8, groups, 4096, 7168, false))
	require.NoError(t, err)
	assert.Less(t, f8.TimeS, c.TimeS)
}

// A fused MoE kernel (inference) runs every expert's tiles in one grid: a
// decode step's 128 experts of one to four tokens each stream their
// weights once, in about their bytes over the GEMM operand bandwidth, where
// expert after expert each pays its own partial wave and tile overhead;
// one expert of many tokens costs about its GEMM; more tokens never cost
// less; an expert without tokens costs nothing.
func TestFusedMoEKernel(t *testing.T) {
	g := gpu(t, "h100-sxm")
	e := NewEvaluator(g)
	const n, k = 1536, 2048 // Qwen3-30B-A3B's gate/up projection of one expert
	small := make([]int64, 128)
	for i := range small {
		small[i] = int64(1 + i%4)
	}
	fused := func(groups []int64) Cost {
		o := model.NewGroupedGEMM("x", hw.BF16, groups, n, k, false)
		o.Fused = true
		c, err := e.Op(o)
		require.NoError(t, err)
		return c
	}
	f := fused(small)
	weights := 128.0 * n * k * 2
	stream := weights / g.GEMMBandwidth()
	assert.InEpsilon(t, stream, f.TimeS-g.KernelLaunchS, 0.25, "weights once: %.3g s, fused %.3g s", stream, f.TimeS)
	serial, err := e.Op(model.NewGroupedGEMM("x", hw.BF16, small, n, k, false))
	require.NoError(t, err)
	assert.Greater(t, serial.TimeS, 1.5*f.TimeS)

	one := fused([]int64{4096})
	plain, err := e.Op(model.NewGEMM("x", hw.BF16, 1, 4096, n, k))
	require.NoError(t, err)
	assert.InEpsilon(t, plain.TimeS, one.TimeS, 0.15)

	prev := 0.0
	for _, m := range []int64{1, 16, 17, 64, 200, 1024, 4096} {
		c := fused([]int64{m, m, 0, m})
		assert.GreaterOrEqual(t, c.TimeS, prev*(1-1e-12), "%d tokens", m)
		prev = c.TimeS
	}
	assert.Equal(t, fused([]int64{5, 0}).TimeS, fused([]int64{5}).TimeS)
}

// A block-scaled FP8 fused MoE kernel (DeepGEMM's grouped GEMM, SGLang's
// w8a8_block_fp8 one) promotes as a GEMM's tiles do: with DeepSeek-V3's
// gate/up projection at prefill's 4,096 tokens an expert it is
// compute-bound and pays exactly its tiles' FP32 adds every 128 reduction
// elements (about 15 % more, as TestSplitAccumulatorPromotion's GEMM); at
// decode's few tokens an expert it streams weights and hides them.
func TestFusedMoEKernelPromotesBlockScaledFP8(t *testing.T) {
	g := gpu(t, "h800")
	e := NewEvaluator(g)
	const n, k = 4096, 7168
	price := func(tokens int64, split bool) Cost {
		o := model.NewGroupedGEMM("x", hw.FP8, []int64{tokens, tokens, tokens, tokens, tokens, tokens, tokens, tokens}, n, k, false)
		o.Fused, o.SplitAccumulator = true, split
		c, err := e.Op(o)
		require.NoError(t, err)
		return c
	}
	fast, slow := price(4096, false), price(4096, true)
	require.Equal(t, BoundCompute, slow.Bound)
	kp := float64(ceil(k, int64(slow.TileK)) * int64(slow.TileK))
	adds := float64(slow.Waves) * math.Ceil(kp/float64(g.FP8PromotionIntervalK)) * float64(slow.TileM*slow.TileN)
	assert.InEpsilon(t, adds/(g.VectorFP32FlopsPerS/2/float64(g.SMCount)), slow.TimeS-fast.TimeS, 0.05)
	assert.InDelta(t, 1.15, slow.TimeS/fast.TimeS, 0.05)
	assert.InEpsilon(t, price(2, false).TimeS, price(2, true).TimeS, 0.03)
}
