package serving

import (
	"context"
	"math"
	"testing"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pricer(t *testing.T, name string, tp int) *Pricer {
	t.Helper()
	c := spec.Cluster{Preset: "dgx-a100", Nodes: 1}
	c.Defaults()
	tpg, err := compile.Topology("", c)
	require.NoError(t, err)
	g, _ := hw.GPUByName("a100-80gb-sxm")
	cfg, ok := model.FromPreset(name, model.Config{})
	require.True(t, ok)
	p, err := NewPricer(tpg, g, net.FaultPlan{}, 1, cfg, tp, 1, hw.BF16, 0, exec.Host{Mode: exec.CUDAGraphs}, "")
	require.NoError(t, err)
	return p
}

// The grids: a bucket is never below its value and at most one step (a
// 128th of an octave for tokens, a 32nd for cache lengths) above it.
func TestBuckets(t *testing.T) {
	for n := 1; n < 1<<18; n += 1 + n/97 {
		b, k := BucketTokens(n), BucketKV(n)
		require.GreaterOrEqual(t, b, n)
		require.LessOrEqual(t, float64(b-n), float64(n)/128, n)
		require.GreaterOrEqual(t, k, n)
		require.LessOrEqual(t, float64(k-n), float64(n)/32, n)
	}
	assert.Equal(t, 1024, BucketTokens(1024))
	assert.Equal(t, 1032, BucketTokens(1025)) // steps of 8 in [1024, 2048)
}

// Bucketing changes a whole run's latencies by less than 1.5 % (TTFT
// 0.5 %, ITL and end to end 1.0 %, logged): the same
// workload (lognormal prompts up to 6,000 tokens, chunked at 2,048)
// through an exact pricer and a bucketed one.
func TestBucketingChangesLittle(t *testing.T) {
	cfg := Config{MaxBatchedTokens: 2048, MaxSeqs: 128, Chunked: true, ChunkTokens: 2048, BlockTokens: 16, Preemption: "recompute"}
	res := func(exact bool) (ttft, itl, e2e float64) {
		p := pricer(t, "llama3-8b", 2)
		p.exact = exact
		src := NewOpenLoop(OpenLoop{Arr: Arrivals{RatePerS: 8, Burstiness: 1},
			Prompt: Lengths{Dist: "lognormal", Tokens: 1500, Sigma: 0.7, Min: 1, Max: 6000},
			Output: Lengths{Dist: "uniform", Min: 16, Max: 400}, Count: 1500}, rng.Stream(1, "a"), rng.Stream(1, "l"))
		s := NewSim(cfg, []Replica{{Cost: p, Blocks: 40000}}, LeastOutstanding, src, nil)
		out, err := s.Run(context.Background())
		require.NoError(t, err)
		for _, q := range out.Requests {
			ttft += q.FirstTokenS - q.ArrivalS
			e2e += q.FinishS - q.ArrivalS
			itl += (q.FinishS - q.FirstTokenS) / float64(q.Output-1)
		}
		n := float64(len(out.Requests))
		return ttft / n, itl / n, e2e / n
	}
	a1, b1, c1 := res(true)
	a2, b2, c2 := res(false)
	assert.InDelta(t, a1, a2, 0.015*a1, "TTFT")
	assert.InDelta(t, b1, b2, 0.015*b1, "ITL")
	assert.InDelta(t, c1, c2, 0.015*c1, "e2e")
	t.Logf("exact vs bucketed: TTFT %.4g/%.4g ITL %.4g/%.4g e2e %.4g/%.4g", a1, a2, b1, b2, c1, c2)
}

// Attention grows with the cache: a decode step at 8k cached tokens costs
// more than at 1k by about the extra KV bytes over HBM bandwidth.
func TestDecodeAttentionGrowsWithCache(t *testing.T) {
	p := pricer(t, "llama3-8b", 1)
	a, err := p.Iteration(&Shape{Tokens: 32, Logits: 32, Decode: 32, DecodeKV: 1024})
	require.NoError(t, err)
	b, err := p.Iteration(&Shape{Tokens: 32, Logits: 32, Decode: 32, DecodeKV: 8192})
	require.NoError(t, err)
	// 32 layers · 2 · 8 kv heads · 128 · 2 B = 131,072 B per token; 32 sequences · 7,168 more tokens.
	extra := 131072.0 * 32 * 7168
	g, _ := hw.GPUByName("a100-80gb-sxm")
	bw := g.HBMBandwidthBytesPerS * g.HBMEfficiency
	assert.InDelta(t, extra/bw, b-a, 0.15*extra/bw)
}

// Gamma arrivals keep the rate; their squared coefficient of variation is 1/shape.
func TestGammaArrivals(t *testing.T) {
	for _, k := range []float64{0.25, 1, 4} {
		a := Arrivals{RatePerS: 10, Burstiness: k}
		r := rng.Stream(3, "g")
		n := 200000
		s, s2 := 0.0, 0.0
		for i := 0; i < n; i++ {
			x := a.Gap(r)
			s += x
			s2 += x * x
		}
		m := s / float64(n)
		v := s2/float64(n) - m*m
		assert.InDelta(t, 0.1, m, 0.003, "mean gap")
		assert.InDelta(t, 1/k, v/(m*m), 0.05/math.Min(k, 1), "cv²")
	}
}
