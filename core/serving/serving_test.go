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
	m, err := exec.NewMachine(tpg, g, net.FaultPlan{}, 1)
	require.NoError(t, err)
	p, err := NewPricer(m, net.FaultPlan{}, 1, cfg, 0, Engine{TP: tp, PP: 1, DType: hw.BF16, Host: exec.Host{Mode: exec.CUDAGraphs}})
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

// stagesCost prices every iteration at fixed stage times.
type stagesCost []float64

func (c stagesCost) Stages(_ *Shape, out []float64) ([]float64, error) {
	return append(out[:0], c...), nil
}

// listSource releases its requests at once.
type listSource struct{ reqs []Request }

func (l *listSource) Next() (Request, bool) {
	if len(l.reqs) == 0 {
		return Request{}, false
	}
	r := l.reqs[0]
	l.reqs = l.reqs[1:]
	return r, true
}

func (l *listSource) Done(int32, float64) {}

// With two pipeline stages of 1 s each a replica keeps two iterations in
// flight, as vLLM V1's batch queue does: request B's prefill (too large to
// join A's iteration) enters the first stage when A's leaves it, and each
// request's next iteration waits for its previous one's token. Closed form:
// A samples at 2, 4, 6 s, B at 3, 5, 7 s; without the second iteration in
// flight B could only start at 2 s.
func TestPipelineKeepsStagesBusy(t *testing.T) {
	cfg := Config{MaxBatchedTokens: 100, MaxSeqs: 8, ChunkTokens: 100, BlockTokens: 16, Preemption: "recompute"}
	src := &listSource{reqs: []Request{
		{Prompt: 100, Output: 3, Prefix: -1, Client: -1},
		{Prompt: 100, Output: 3, Prefix: -1, Client: -1},
	}}
	out, err := NewSim(cfg, []Replica{{Cost: stagesCost{1, 1}, Blocks: 100}}, LeastOutstanding, src, nil).Run(context.Background())
	require.NoError(t, err)
	a, b := out.Requests[0], out.Requests[1]
	assert.Equal(t, []float64{2, 6}, []float64{a.FirstTokenS, a.FinishS})
	assert.Equal(t, []float64{3, 7}, []float64{b.FirstTokenS, b.FinishS})
	var starts []float64
	for _, it := range out.Iterations {
		starts = append(starts, it.StartS)
		assert.Equal(t, 1, it.Sequences)
		assert.Equal(t, 2.0, it.DurationS)
	}
	assert.Equal(t, []float64{0, 1, 2, 3, 4, 5}, starts)

	// Unequal stages: the slower one sets the pace of iterations in flight.
	src = &listSource{reqs: []Request{
		{Prompt: 100, Output: 2, Prefix: -1, Client: -1},
		{Prompt: 100, Output: 2, Prefix: -1, Client: -1},
	}}
	out, err = NewSim(cfg, []Replica{{Cost: stagesCost{1, 3}, Blocks: 100}}, LeastOutstanding, src, nil).Run(context.Background())
	require.NoError(t, err)
	// A: [0,1] then [1,4]; B: [1,2] then waits for the second stage [4,7];
	// A's decode enters at 4: [4,5], [7,10]; B's at 7: [7,8], [10,13].
	assert.Equal(t, []float64{4, 7, 10, 13}, []float64{out.Requests[0].FirstTokenS, out.Requests[1].FirstTokenS,
		out.Requests[0].FinishS, out.Requests[1].FinishS})
}

// TestStepOverhead: the engine loop's time per iteration and per scheduled
// sequence delays each iteration's kernels: every iteration lasts its
// kernels plus StepS plus StepSPerSeq per sequence it holds.
func TestStepOverhead(t *testing.T) {
	run := func(stepS, perSeq float64) *Outcome {
		cfg := Config{MaxBatchedTokens: 200, MaxSeqs: 8, ChunkTokens: 200, BlockTokens: 16, Preemption: "recompute",
			StepS: stepS, StepSPerSeq: perSeq}
		src := &listSource{reqs: []Request{
			{Prompt: 100, Output: 3, Prefix: -1, Client: -1},
			{Prompt: 100, Output: 3, Prefix: -1, Client: -1},
		}}
		out, err := NewSim(cfg, []Replica{{Cost: stagesCost{1}, Blocks: 100}}, LeastOutstanding, src, nil).Run(context.Background())
		require.NoError(t, err)
		return out
	}
	// The two requests reach the scheduler together and share every
	// iteration: three of 2 sequences, 1 + 0.5 + 0.25·2 = 2 s each.
	base, slow := run(0, 0), run(0.5, 0.25)
	require.Len(t, slow.Iterations, 3)
	for i, it := range slow.Iterations {
		assert.Equal(t, 2, base.Iterations[i].Sequences)
		assert.Equal(t, 2, it.Sequences)
		assert.InDelta(t, 1+0.5+0.25*2, it.DurationS, 1e-12)
	}
	for _, q := range slow.Requests {
		assert.Equal(t, []float64{2, 6}, []float64{q.FirstTokenS, q.FinishS})
	}
}

// A replica of data-parallel attention ranks prices its busiest rank:
// decodes dealt evenly (10 over 4 ranks: 3, 3, 2, 2), prompt chunks
// largest first to the rank with the fewest tokens (the 500-token chunk
// and the 300 to the 2-decode ranks, the 200 to a 3-decode one), logits
// at most the rank's sequences; one rank is the replica itself.
func TestRankShapeDealsTheBatch(t *testing.T) {
	p := &Pricer{ep: 4}
	sh := &Shape{Tokens: 1010, Logits: 11, Decode: 10, DecodeKV: 700,
		Chunks: []Chunk{{Query: 200, Context: 0}, {Query: 500, Context: 100}, {Query: 300, Context: 0}}}
	got := p.rankShape(sh)
	require.Equal(t, 502, got.Tokens, "the busiest rank: 2 decodes and the 500-token chunk")
	require.Equal(t, 2, got.Decode)
	require.Equal(t, []Chunk{{Query: 500, Context: 100}}, got.Chunks)
	require.Equal(t, 700, got.DecodeKV)
	require.Equal(t, 3, got.Logits, "ceil(11/4)")
	require.Equal(t, 1010, sh.Tokens, "the replica's shape is left as it was")
	p.ep = 1
	require.Same(t, sh, p.rankShape(sh))
	// Only decodes: the largest share.
	p.ep = 4
	d := p.rankShape(&Shape{Tokens: 9, Logits: 9, Decode: 9, DecodeKV: 50})
	require.Equal(t, Shape{Tokens: 3, Logits: 3, Decode: 3, DecodeKV: 50}, *d)
}
