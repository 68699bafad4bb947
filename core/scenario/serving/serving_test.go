package serving_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/eidolon-sim/eidolon/core/scenario/serving"
	sv "github.com/eidolon-sim/eidolon/core/serving"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const base = `"model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1}`

func runJS(t *testing.T, js string) scenario.Result {
	t.Helper()
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err, js)
	return res
}

func run(t *testing.T, extra string) scenario.Result {
	t.Helper()
	return runJS(t, fmt.Sprintf(`{"kind":"serving",%s%s}`, base, extra))
}

func table[T any](res scenario.Result, name string) []T {
	for _, tb := range res.Tables {
		if tb.Name == name {
			return tb.Rows.([]T)
		}
	}
	return nil
}

// At vanishing load every request is alone on its replica: its TTFT is the
// frontend's tokenizing and one prefill of its prompt, and its inter-token
// latency one batch-1 decode
// step, which the inference kind simulates through the full exec path
// (workload.BuildInference on the same cluster). Within 1 %: the serving
// pricer composes the same operator costs and collective times, with the
// cache lengths bucketed.
func TestVanishingLoadIsOnePrefill(t *testing.T) {
	// Each layout, and one with the engine's fused add-norms in both kinds.
	for _, c := range []struct{ layout, engine, option string }{
		{`"tp":1`, "", ""}, {`"tp":2`, "", ""}, {`"tp":2,"pp":2`, "", ""},
		{`"tp":2`, `,"engine":{"fused_add_norm":true}`, `,"fused_add_norm":true`},
	} {
		layout := c.layout + c.option
		res := run(t, `,`+c.layout+c.engine+`,"workload":{"rate_per_s":0.01,"requests":5,"prompt_tokens":{"tokens":700},"output_tokens":{"tokens":40}}`)
		inf := runJS(t, fmt.Sprintf(`{"kind":"inference",%s,%s,"batch":1,"prompt_tokens":700,"output_tokens":40}`, base, layout))
		want := table[inference.SummaryRow](inf, "summary")[0]
		for _, r := range table[serving.RequestRow](res, "requests") {
			// The serving kind tokenizes the prompt first (the frontend),
			// then schedules it at once.
			tok := 700 * spec.TokenizeSPerToken
			require.InDelta(t, tok, r.QueueS, 1e-12, layout)
			assert.InDelta(t, want.TTFTS+tok, r.TTFTS, 0.01*want.TTFTS, layout)
			assert.InDelta(t, want.TPOTS, r.ITLSMean, 0.01*want.TPOTS, layout)
			assert.InDelta(t, want.E2ES+tok, r.E2ES, 0.01*want.E2ES, layout)
		}
	}
}

// The API server's time per request (engine.frontend_s) and per prompt
// token (engine.frontend_s_per_token, tokenizing) delay when the scheduler
// sees a request, not when its client sent it: with one closed-loop client
// the engine is idle at every arrival, so each request is scheduled exactly
// frontend_s + frontend_s_per_token · prompt after it was sent, its TTFT
// and end to end grow by exactly that, its inter-token latency not at all,
// and the client sends its next request when the previous one finishes.
func TestFrontendDelaysEveryRequestByItsTime(t *testing.T) {
	const f, k = 0.037, 2.5e-5
	w := `"workload":{"arrival":"closed_loop","concurrency":1,"requests":6,"prompt_tokens":{"dist":"uniform","min_tokens":100,"max_tokens":3000},"output_tokens":{"tokens":12}}`
	base := table[serving.RequestRow](run(t, `,"engine":{"frontend_s_per_token":0},`+w), "requests")
	for _, c := range []struct {
		engine string
		perTok float64
	}{
		{fmt.Sprintf(`{"frontend_s":%g,"frontend_s_per_token":0}`, f), 0},
		{fmt.Sprintf(`{"frontend_s":%g,"frontend_s_per_token":%g}`, f, k), k},
		{fmt.Sprintf(`{"frontend_s":%g}`, f), spec.TokenizeSPerToken}, // the default: tokenizing
	} {
		rows := table[serving.RequestRow](run(t, `,"engine":`+c.engine+`,`+w), "requests")
		require.Len(t, rows, len(base))
		for i, r := range rows {
			require.Equal(t, base[i].PromptTokens, r.PromptTokens)
			d := f + c.perTok*float64(r.PromptTokens)
			assert.InDelta(t, d, r.ScheduledS-r.ArrivalS, 1e-12, "%s: request %d waits only for the frontend", c.engine, i)
			assert.InDelta(t, base[i].TTFTS+d, r.TTFTS, 1e-9, "%s: TTFT of request %d", c.engine, i)
			assert.InDelta(t, base[i].E2ES+d, r.E2ES, 1e-9, "%s: end to end of request %d", c.engine, i)
			assert.InDelta(t, base[i].ITLSMean, r.ITLSMean, 1e-12, "%s: ITL of request %d", c.engine, i)
			if i > 0 {
				assert.Equal(t, rows[i-1].FinishS, r.ArrivalS, "%s: request %d is sent when the previous one finishes", c.engine, i)
			}
		}
	}
}

// The engine loop's time per iteration (engine.step_overhead_s) and per
// scheduled sequence (step_overhead_s_per_seq) lengthen every iteration:
// with one closed-loop client each iteration holds its one sequence, so a
// request's TTFT grows by one overhead and its inter-token latency by one
// overhead per token.
func TestStepOverheadLengthensEveryIteration(t *testing.T) {
	const a, b = 0.004, 0.0015
	w := `"workload":{"arrival":"closed_loop","concurrency":1,"requests":4,"prompt_tokens":{"tokens":500},"output_tokens":{"tokens":9}}`
	base := table[serving.RequestRow](run(t, `,`+w), "requests")
	rows := table[serving.RequestRow](run(t, fmt.Sprintf(`,"engine":{"step_overhead_s":%g,"step_overhead_s_per_seq":%g},`, a, b)+w), "requests")
	require.Len(t, rows, len(base))
	for i, r := range rows {
		assert.InDelta(t, base[i].TTFTS+a+b, r.TTFTS, 1e-9, "TTFT of request %d", i)
		assert.InDelta(t, base[i].ITLSMean+a+b, r.ITLSMean, 1e-9, "ITL of request %d", i)
		assert.InDelta(t, base[i].E2ES+9*(a+b), r.E2ES, 1e-9, "end to end of request %d", i)
	}
}

// A replica's API server tokenizes one request at a time: a 10-token
// request sent 1 ms after a 4,000-token one waits for the long prompt's
// tokenizing (40 ms), reaches the scheduler after the long prompt's
// prefill has started and joins a later iteration. With two replicas
// it takes the other server and is scheduled first, at its own send +
// 0.1 ms.
func TestFrontendTokenizesOneRequestAtATime(t *testing.T) {
	const k = 1e-5
	for _, replicas := range []int{1, 2} {
		rows := table[serving.RequestRow](run(t, fmt.Sprintf(`,"replicas":%d,"engine":{"frontend_s_per_token":%g},"workload":{"arrival":"trace","trace":{"arrival_s":[0,0.001],"prompt_tokens":[4000,10],"output_tokens":[4,4]}}`, replicas, k)), "requests")
		require.Len(t, rows, 2)
		long, short := rows[0], rows[1]
		assert.InDelta(t, 4000*k, long.ScheduledS, 1e-12, "%d replicas: the long prompt, scheduled as it arrives", replicas)
		if replicas == 1 {
			assert.Greater(t, short.ScheduledS, 4000*k+10*k, "behind the long prompt's tokenizing and its first iteration")
		} else {
			assert.InDelta(t, 0.001+10*k, short.ScheduledS, 1e-12, "its own server")
		}
	}
}

// Requests that reach the engine at the same instant are all there when it
// forms the batch: 64 prompts of 500 tokens sent together with no frontend
// time fill the first iteration to the 2,048-token budget (four whole
// prompts and a 48-token chunk of the fifth), not the first one alone.
func TestBurstFillsTheFirstIteration(t *testing.T) {
	n := 64
	arr := strings.TrimSuffix(strings.Repeat("0,", n), ",")
	prompts := strings.TrimSuffix(strings.Repeat("500,", n), ",")
	outputs := strings.TrimSuffix(strings.Repeat("8,", n), ",")
	res := run(t, fmt.Sprintf(`,"engine":{"frontend_s_per_token":0,"max_num_batched_tokens":2048},"workload":{"arrival":"trace","trace":{"arrival_s":[%s],"prompt_tokens":[%s],"output_tokens":[%s]}}`, arr, prompts, outputs))
	its := table[serving.IterationRow](res, "iterations")
	require.NotEmpty(t, its)
	assert.Equal(t, 0.0, its[0].StartS)
	assert.Equal(t, 2048, its[0].PrefillTokens)
	assert.Equal(t, 5, its[0].Sequences)
}

// One replica with max_num_seqs 1 and fixed-size requests is an M/D/1
// queue: every request occupies the engine for the same S (its prefill and
// output−1 decode steps, the next admitted at the iteration after it ends),
// arrivals are Poisson at λ. Pollaczek–Khinchine: the mean wait is
// Wq = λ·E[S²] / (2(1 − ρ)) with ρ = λ·E[S]; for deterministic S, E[S²] = S²,
// so Wq = ρ·S / (2(1 − ρ)). At ρ = 0.6: Wq = 0.75·S. 30,000 requests keep
// the sample mean within a few percent (M/D/1's waits are correlated over
// busy periods of a few tens of requests at this load).
func TestMD1MeanWait(t *testing.T) {
	one := table[serving.RequestRow](run(t, `,"engine":{"max_num_seqs":1},"workload":{"rate_per_s":0.001,"requests":1,"prompt_tokens":{"tokens":256},"output_tokens":{"tokens":8}}`), "requests")[0]
	S := one.FinishS - one.ScheduledS // the engine's service, after the frontend
	rho := 0.6
	res := run(t, fmt.Sprintf(`,"seed":3,"engine":{"max_num_seqs":1},"workload":{"rate_per_s":%g,"requests":30000,"warmup_requests":100,"prompt_tokens":{"tokens":256},"output_tokens":{"tokens":8}}`, rho/S))
	rows := table[serving.RequestRow](res, "requests")
	wq := 0.0
	n := 0
	for _, r := range rows {
		assert.InDelta(t, S, r.FinishS-r.ScheduledS, 1e-9*S, "every service takes S")
		if !r.Warmup {
			wq += r.QueueS
			n++
		}
	}
	wq /= float64(n)
	want := rho * S / (2 * (1 - rho))
	assert.InDelta(t, want, wq, 0.06*want, "M/D/1 mean wait %g s, simulated %g s (S = %g s)", want, wq, S)
	assert.InDelta(t, want, table[serving.SummaryRow](res, "summary")[0].QueueSMean, 0.06*want)
}

// Little's law, L = λ·W, twice: over the whole system from the requests
// table (L is the time average of the requests present, found by sweeping
// arrivals and finishes; λ the arrival rate over the window; W the mean end
// to end), and over the batch, across tables: the iterations table's
// time-average batch size equals the throughput times each request's time
// from its scheduling to its finish (no preemption here, so a scheduled
// request is in every iteration until its last).
func TestLittlesLaw(t *testing.T) {
	res := run(t, `,"seed":5,"workload":{"rate_per_s":12,"requests":3000,"prompt_tokens":{"dist":"lognormal","tokens":300,"sigma":0.6,"max_tokens":2000},"output_tokens":{"dist":"uniform","min_tokens":8,"max_tokens":200}}`)
	rows := table[serving.RequestRow](res, "requests")
	its := table[serving.IterationRow](res, "iterations")
	type ev struct {
		t float64
		d int
	}
	var evs []ev
	first, last, w, inBatch := math.Inf(1), 0.0, 0.0, 0.0
	for _, r := range rows {
		require.Zero(t, r.Preemptions)
		evs = append(evs, ev{r.ArrivalS, 1}, ev{r.FinishS, -1})
		first, last = math.Min(first, r.ArrivalS), math.Max(last, r.FinishS)
		w += r.E2ES
		inBatch += r.FinishS - r.ScheduledS
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].t < evs[j].t || (evs[i].t == evs[j].t && evs[i].d < evs[j].d) })
	area, n, prev := 0.0, 0, first
	for _, e := range evs {
		area += float64(n) * (e.t - prev)
		n += e.d
		prev = e.t
	}
	T := last - first
	L := area / T
	lambda := float64(len(rows)) / T
	W := w / float64(len(rows))
	assert.InDelta(t, lambda*W, L, 1e-6*L, "L = λW over the system")
	batch := 0.0
	for _, it := range its {
		batch += float64(it.Sequences) * it.DurationS
	}
	assert.InDelta(t, inBatch/T, batch/T, 1e-6*batch/T, "L = λW over the batch")
	assert.Greater(t, L, 1.0)
}

// c closed-loop clients with no time between requests keep c requests in
// the system, so by Little's law they are served at c / mean end to end.
// The summary's rates hold to it at 3 to 8 rounds of requests a client
// (within 3 %): counting the requests that finish inside the window, the
// warm-up round's finishes came on top of it (+49 % at 3 rounds of 5).
func TestClosedLoopRateIsLittlesLaw(t *testing.T) {
	for _, c := range []struct{ clients, rounds int }{{5, 3}, {25, 4}, {64, 5}, {8, 8}} {
		s := table[serving.SummaryRow](run(t, fmt.Sprintf(`,"tp":2,"workload":{"arrival":"closed_loop","concurrency":%d,"requests":%d,"warmup_requests":%d,"prompt_tokens":{"tokens":1000},"output_tokens":{"tokens":200}}`,
			c.clients, c.rounds*c.clients, c.clients)), "summary")[0]
		want := float64(c.clients) / s.E2ESMean
		assert.InEpsilon(t, want, s.RequestsPerS, 0.03, "%d clients, %d rounds", c.clients, c.rounds)
		assert.InEpsilon(t, 200*s.RequestsPerS, s.OutputTokensPerS, 1e-9)
	}
}

// Above its capacity, a replica holding max_num_seqs B requests of P prompt
// and O output tokens runs in lock-step: B prompts prefilled in one
// iteration (B·P ≤ the token budget), then O−1 decode iterations of B
// sequences at cache lengths P … P+O−2, then the next B. Its throughput is
// B over that cycle, priced with the replica's own pricer.
func TestThroughputSaturatesAtTheBatchLimit(t *testing.T) {
	const B, P, O = 8, 16, 64
	js := `{"kind":"serving",` + base + fmt.Sprintf(`,"engine":{"max_num_seqs":%d},"workload":{"rate_per_s":1000,"requests":800,"warmup_requests":80,"prompt_tokens":{"tokens":%d},"output_tokens":{"tokens":%d}}}`, B, P, O)
	_, s, err := all.Decode([]byte(js))
	require.NoError(t, err)
	o, err := serving.Simulate(scenario.Env{}, s.(*spec.Serving))
	require.NoError(t, err)
	pr := o.Pricers[0]
	chunks := make([]sv.Chunk, B)
	for i := range chunks {
		chunks[i] = sv.Chunk{Query: P}
	}
	cycle, err := pr.Iteration(&sv.Shape{Tokens: B * P, Logits: B, Chunks: chunks})
	require.NoError(t, err)
	for k := 1; k < O; k++ {
		d, err := pr.Iteration(&sv.Shape{Tokens: B, Logits: B, Decode: B, DecodeKV: P + k - 1})
		require.NoError(t, err)
		cycle += d
	}
	want := B / cycle
	assert.InDelta(t, want, o.Summary.RequestsPerS, 0.02*want, "saturated throughput")
	assert.InDelta(t, float64(B), o.Summary.MeanBatchSeqs, 0.05*B)
}

// Same spec and seed, same tables; another seed, other arrivals.
func TestDeterministic(t *testing.T) {
	js := `,"replicas":2,"routing":"kv_aware","engine":{"kv_blocks":600},"workload":{"arrival":"gamma","burstiness":0.5,"rate_per_s":15,"requests":400,"prefix_groups":4,"prefix_tokens":128,"prompt_tokens":{"dist":"lognormal","tokens":400},"output_tokens":{"dist":"uniform","min_tokens":4,"max_tokens":300}}`
	a, b := run(t, js), run(t, js)
	assert.Equal(t, a, b)
	c := run(t, `,"seed":9`+js)
	assert.NotEqual(t, table[serving.RequestRow](a, "requests")[3].ArrivalS, table[serving.RequestRow](c, "requests")[3].ArrivalS)
}

func specErr(t *testing.T, extra string) *spec.Error {
	t.Helper()
	js := fmt.Sprintf(`{"kind":"serving",%s%s}`, base, extra)
	_, _, err := all.Run(scenario.Env{}, []byte(js))
	require.Error(t, err, js)
	var se *spec.Error
	require.True(t, errors.As(err, &se), "want a SpecError, got %T: %v", err, err)
	// Validate refuses it with the same problems, without running.
	verr := all.Validate([]byte(js), 0)
	require.Error(t, verr, js)
	require.Equal(t, err.Error(), verr.Error())
	return se
}

func TestSpecErrors(t *testing.T) {
	for _, c := range []struct{ extra, field string }{
		{`,"workload":{"rate_per_s":0}`, "workload.rate_per_s"},
		{`,"workload":{"rate_per_s":-3}`, "workload.rate_per_s"},
		{`,"workload":{"rate_per_s":1},"engine":{"max_num_batched_tokens":512,"chunk_tokens":1024}`, "engine.chunk_tokens"},
		{`,"workload":{"rate_per_s":1},"slo":{"ttft":0.2}`, "slo.ttft"},
		{`,"workload":{"rate_per_s":1},"slo":{"itl_ms":20}`, "slo.itl_ms"},
		{`,"workload":{"arrival":"closed_loop"}`, "workload.concurrency"},
		{`,"workload":{"rate_per_s":1},"engine":{"frontend_s":-0.01}`, "engine.frontend_s"},
		{`,"workload":{"rate_per_s":1},"engine":{"frontend_s_per_token":-1e-6}`, "engine.frontend_s_per_token"},
		{`,"workload":{"rate_per_s":1},"engine":{"step_overhead_s":-0.001}`, "engine.step_overhead_s"},
		{`,"workload":{"rate_per_s":1},"engine":{"kv_cache_dtype":"int4"}`, "engine.kv_cache_dtype"},
		{`,"workload":{"rate_per_s":1},"engine":{"decode_attention":"paged"}`, "engine.decode_attention"},
		{`,"workload":{"rate_per_s":1},"engine":{"weight_dtype":"bf16"}`, "engine.weight_dtype"},
		{`,"workload":{"rate_per_s":1},"engine":{"step_overhead_s_per_seq":1e9}`, "engine.step_overhead_s_per_seq"},
		{`,"workload":{"arrival":"trace","trace":{"arrival_s":[0,1],"prompt_tokens":[5],"output_tokens":[3,3]}}`, "workload.trace.prompt_tokens"},
		// A trace under another arrival is refused, not read unchecked
		// (found by the grown-spec test at seed 372: a panic).
		{`,"workload":{"arrival":"poisson","rate_per_s":1,"trace":{"arrival_s":[0,1],"prompt_tokens":[],"output_tokens":[3,3]}}`, `workload.trace: applies to arrival "trace", not "poisson"`},
		// So is a field the arrival given does not read.
		{`,"workload":{"rate_per_s":1,"concurrency":8}`, `workload.concurrency: applies to arrival "closed_loop", not "poisson"`},
		{`,"workload":{"arrival":"closed_loop","concurrency":8,"burstiness":0.5}`, `workload.burstiness: applies to arrival "gamma", not "closed_loop"`},
		{`,"workload":{"rate_per_s":1,"prefix_tokens":-1}`, "workload.prefix_tokens"},
		{`,"workload":{"rate_per_s":1,"prompt_tokens":{"tokens":100,"sigma":0.5}}`, `workload.prompt_tokens.sigma: applies to dist "lognormal", not "fixed"`},
		{`,"workload":{"rate_per_s":1,"output_tokens":{"dist":"lognormal","tokens":100,"values":[3]}}`, `workload.output_tokens.values: applies to dist "table"`},
		{`,"workload":{"rate_per_s":1,"output_tokens":{"tokens":100,"max_tokens":-1}}`, `workload.output_tokens.max_tokens: applies to dist "uniform" or "lognormal"`},
		{`,"replicas":2,"disaggregation":{"prefill_replicas":2},"workload":{"rate_per_s":1}`, "disaggregation.prefill_replicas"},
		{`,"workload":{"rate_per_s":1,"prompt_tokens":{"tokens":9000}},"engine":{"chunked_prefill":false}`, "workload.prompt_tokens"},
		{`,"workload":{"rate_per_s":1,"prompt_tokens":{"tokens":4000}},"engine":{"kv_blocks":10}`, "workload"},
		{`,"workload":{"rate_per_s":1,"prompt_tokens":16777216}`, "KV blocks of 16 tokens, but replica 0 has"},
		{`,"model":"llama3-70b","workload":{"rate_per_s":1}`, "tp: the model does not fit: 141 GB of weights"},
	} {
		se := specErr(t, c.extra)
		assert.Contains(t, se.Error(), c.field, c.extra)
	}
}

// A KV cache too small for the load preempts (recompute: the victim starts
// over; swap: its blocks go to the host and back): every request still
// finishes, the blocks in use never exceed the cache, and recomputation
// costs more prefill tokens than the prompts hold.
func TestPreemption(t *testing.T) {
	for _, mode := range []string{"recompute", "swap"} {
		res := run(t, `,"engine":{"kv_blocks":400,"preemption":"`+mode+`"},"workload":{"rate_per_s":50,"requests":300,"prompt_tokens":{"tokens":300},"output_tokens":{"tokens":200}}`)
		s := table[serving.SummaryRow](res, "summary")[0]
		require.Positive(t, s.Preemptions, mode)
		prompts, pre := 0, 0
		for _, r := range table[serving.RequestRow](res, "requests") {
			assert.Greater(t, r.FinishS, r.FirstTokenS, mode)
			prompts += r.PromptTokens
		}
		for _, it := range table[serving.IterationRow](res, "iterations") {
			require.LessOrEqual(t, it.KVBlocksUsed, it.KVBlocks)
			pre += it.PrefillTokens
		}
		if mode == "recompute" {
			assert.Greater(t, pre, prompts, "recomputed tokens")
		} else {
			assert.Equal(t, prompts, pre, "swap recomputes nothing")
		}
	}
}

// Requests sharing a prefix find its full blocks cached after the first
// one computed it, and their TTFT is shorter than without the cache.
func TestPrefixCaching(t *testing.T) {
	w := `"workload":{"rate_per_s":2,"requests":50,"prefix_groups":1,"prefix_tokens":1000,"prompt_tokens":{"tokens":1200},"output_tokens":{"tokens":4}}`
	on := table[serving.RequestRow](run(t, `,`+w), "requests")
	off := table[serving.RequestRow](run(t, `,"engine":{"prefix_caching":false},`+w), "requests")
	assert.Zero(t, on[0].CachedTokens)
	for i := 1; i < len(on); i++ {
		assert.Equal(t, 992, on[i].CachedTokens, "62 full blocks of 16")
		assert.Less(t, on[i].TTFTS, off[i].TTFTS)
	}
	hr := table[serving.RequestRow](run(t, `,"engine":{"prefix_hit_rate":0.5},"workload":{"rate_per_s":2,"requests":5,"prompt_tokens":{"tokens":1000}}`), "requests")
	assert.Equal(t, 496, hr[2].CachedTokens)
}

// Routing: round robin alternates, least outstanding balances, and the
// KV-aware router sends a prefix where it is cached (more hits than round robin).
func TestRouting(t *testing.T) {
	// 32 prefixes of 32 blocks, 300 blocks per replica: a replica keeps a
	// few prefixes, so where a request goes decides whether it hits.
	w := `"engine":{"kv_blocks":300},"workload":{"rate_per_s":20,"requests":400,"prefix_groups":32,"prefix_tokens":512,"prompt_tokens":{"tokens":700},"output_tokens":{"tokens":32}}`
	hits := map[string]int{}
	for _, r := range []string{"round_robin", "least_outstanding", "kv_aware"} {
		rows := table[serving.RequestRow](run(t, `,"tp":2,"replicas":4,"routing":"`+r+`",`+w), "requests")
		per := make([]int, 4)
		for i, q := range rows {
			per[q.Replica]++
			hits[r] += q.CachedTokens
			if r == "round_robin" {
				assert.Equal(t, i%4, q.Replica)
			}
		}
		for _, n := range per {
			assert.InDelta(t, 100, n, 60, r)
		}
	}
	assert.Greater(t, hits["kv_aware"], hits["round_robin"])
}

// Disaggregation: prefill on the first replicas, decode on the others; the
// first token reaches the user after the KV cache has moved, which takes
// the network model's time for its bytes (2 · layers · kv heads · head dim
// · 2 B per token, split over the TP ranks).
func TestDisaggregation(t *testing.T) {
	res := run(t, `,"tp":2,"replicas":4,"disaggregation":{"prefill_replicas":2},"workload":{"rate_per_s":4,"requests":200,"prompt_tokens":{"tokens":2000},"output_tokens":{"tokens":64}}`)
	rows := table[serving.RequestRow](res, "requests")
	for _, r := range rows {
		require.Less(t, r.Replica, 2)
		require.GreaterOrEqual(t, r.DecodeReplica, 2)
		require.Positive(t, r.KVTransferS)
	}
	_, s, err := all.Decode([]byte(`{"kind":"serving",` + base + `,"tp":2,"replicas":4,"disaggregation":{"prefill_replicas":2},"workload":{"rate_per_s":4}}`))
	require.NoError(t, err)
	st, err := serving.Build(context.Background(), s.(*spec.Serving))
	require.NoError(t, err)
	// The affine fit matches a direct simulation of the transfer.
	bytes := 2000 * st.Pricers[0].KVBytesPerToken(0)
	fresh, err := exec.NewMachine(st.Topo, st.GPU, net.FaultPlan{}, 0)
	require.NoError(t, err)
	direct, err := sv.Transfer(fresh, net.FaultPlan{}, 0, 2, 1, 0, 2, bytes)
	require.NoError(t, err)
	fit, err := st.Transfer(0, 2, 2000)
	require.NoError(t, err)
	assert.InDelta(t, direct, fit, 0.005*direct)
	assert.InDelta(t, 2000*32*2*16*128*2.0, bytes, 1)
	minT := math.Inf(1)
	for _, r := range rows {
		minT = math.Min(minT, r.KVTransferS)
	}
	assert.InDelta(t, direct, minT, 1e-9)
}

// A straggler GPU in one replica slows only that replica's requests.
func TestStraggler(t *testing.T) {
	res := run(t, `,"tp":2,"replicas":2,"routing":"round_robin","faults":{"stragglers":[{"device":"n0.gpu0","slowdown":2}]},"workload":{"rate_per_s":1,"requests":40,"output_tokens":{"tokens":16}}`)
	var e2e [2]float64
	for _, r := range table[serving.RequestRow](res, "requests") {
		e2e[r.Replica] += r.E2ES
	}
	assert.Greater(t, e2e[0], 1.6*e2e[1])
}

// The search ranks the configurations that meet the SLOs by GPUs: at a load
// one TP-2 replica cannot carry within the TTFT objective, more replicas
// (or GPUs per replica) are needed, and the answer has the fewest GPUs of
// the passing ones; impossible combinations are rows with a reason.
func TestSearch(t *testing.T) {
	res := run(t, `,"slo":{"ttft_s":0.5,"itl_s":0.05},"search":{"tp":[1,2,4],"replicas":[1,2,4,8],"max_num_batched_tokens":[2048,8192]},
		"workload":{"rate_per_s":30,"requests":600,"warmup_requests":50,"prompt_tokens":{"tokens":1000},"output_tokens":{"tokens":64}}`)
	rows := table[serving.ConfigRow](res, "configs")
	require.Len(t, rows, 3*4*2)
	require.Equal(t, 1, rows[0].Rank)
	require.True(t, rows[0].MeetsSLO)
	fewest := rows[0].GPUs
	for i, r := range rows {
		if r.MeetsSLO {
			assert.Equal(t, i+1, r.Rank)
			assert.GreaterOrEqual(t, r.GPUs, fewest)
			assert.GreaterOrEqual(t, r.SLOAttainment, 0.9)
		} else {
			assert.Zero(t, r.Rank)
			assert.Less(t, r.SLOAttainment, 0.9)
		}
		if r.TP*r.Replicas > 8 {
			assert.Equal(t, "invalid", r.Status, "%+v", r)
			assert.Contains(t, r.Reason, "GPUs")
		}
	}
	t.Logf("best: %+v", rows[0])
	assert.Greater(t, fewest, 1, "one GPU cannot carry 30 requests/s of 1,000 tokens within 0.5 s")
}

// A degraded NVLink on one GPU slows its replica's tensor-parallel
// all-reduces (simulated on the network with the fault), not the other's.
func TestDegradedLink(t *testing.T) {
	w := `"tp":4,"replicas":2,"routing":"round_robin","workload":{"rate_per_s":1,"requests":20,"prompt_tokens":{"tokens":2000},"output_tokens":{"tokens":16}}`
	healthy := table[serving.RequestRow](run(t, `,`+w), "requests")
	bad := table[serving.RequestRow](run(t, `,"faults":{"links":[{"src":"n0.gpu1","dst":"n0.nvswitch","health":0.1,"both_directions":true}]},`+w), "requests")
	for i := range bad {
		if bad[i].Replica == 0 {
			assert.Greater(t, bad[i].TTFTS, 1.05*healthy[i].TTFTS, i)
		} else {
			assert.InDelta(t, healthy[i].TTFTS, bad[i].TTFTS, 1e-12, i)
		}
	}
	se := specErr(t, `,"faults":{"links":[{"src":"n0.gpu1","dst":"n0.nvswitch","health":0.1,"at_s":2}]},"workload":{"rate_per_s":1}`)
	assert.Contains(t, se.Error(), "faults.links[0]")
}

// A run for a duration sends arrivals until then and lets them finish; a
// canceled run stops with the context's error.
func TestDurationAndCancel(t *testing.T) {
	rows := table[serving.RequestRow](run(t, `,"workload":{"rate_per_s":20,"duration_s":10,"output_tokens":{"tokens":8}}`), "requests")
	require.NotEmpty(t, rows)
	assert.InDelta(t, 200, len(rows), 50)
	assert.LessOrEqual(t, rows[len(rows)-1].ArrivalS, 10.0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	js := fmt.Sprintf(`{"kind":"serving",%s,"workload":{"rate_per_s":20,"requests":100000}}`, base)
	_, _, err := all.Run(scenario.Env{Ctx: ctx}, []byte(js))
	require.ErrorIs(t, err, context.Canceled)
}

// Seeded swarm: each seed draws an engine, a workload and a layout; every
// run must keep the invariants. Reproduce a failure with
// go test ./core/scenario/serving -run Swarm/seed=N.
func TestSwarmInvariants(t *testing.T) {
	for seed := 1; seed <= 24; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 7))
			pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
			replicas := 1 + r.IntN(4)
			disagg := ""
			if replicas >= 2 && r.IntN(2) == 0 {
				disagg = fmt.Sprintf(`,"disaggregation":{"prefill_replicas":%d}`, 1+r.IntN(replicas-1))
			}
			mbt := []int{256, 1024, 4096}[r.IntN(3)]
			chunked := r.IntN(4) != 0
			chunk := mbt
			if chunked && r.IntN(2) == 0 {
				chunk = mbt / 4
			}
			maxPrompt := 3000
			if !chunked {
				maxPrompt = mbt
			}
			js := fmt.Sprintf(`,"seed":%d,"tp":%d,"replicas":%d,"routing":"%s"%s,
				"engine":{"max_num_batched_tokens":%d,"chunked_prefill":%t,"chunk_tokens":%d,"max_num_seqs":%d,"kv_blocks":%d,"preemption":"%s","prefix_caching":%t},
				"workload":{"arrival":"%s","rate_per_s":%g,"burstiness":%g,"requests":%d,"prefix_groups":%d,"prefix_tokens":%d,
				"prompt_tokens":{"dist":"lognormal","tokens":%d,"max_tokens":%d},"output_tokens":{"dist":"uniform","min_tokens":1,"max_tokens":%d}}}`,
				seed, 1<<r.IntN(2), replicas, pick("round_robin", "least_outstanding", "kv_aware"), disagg,
				mbt, chunked, chunk, 1+r.IntN(64), 260+r.IntN(2000), pick("recompute", "swap"), r.IntN(2) == 0,
				"gamma", 2+18*r.Float64(), []float64{0.3, 1, 3}[r.IntN(3)], 50+r.IntN(250), r.IntN(5), 16*r.IntN(40),
				100+r.IntN(600), maxPrompt, 300)
			js = js[:len(js)-1] // run adds the closing brace
			res := run(t, js)
			rows := table[serving.RequestRow](res, "requests")
			its := table[serving.IterationRow](res, "iterations")
			prompts, outputs, cached, recomputed := 0, 0, 0, 0
			for _, q := range rows {
				require.LessOrEqual(t, q.ArrivalS, q.ScheduledS, "%+v", q)
				require.LessOrEqual(t, q.ScheduledS, q.FirstTokenS, "%+v", q)
				require.LessOrEqual(t, q.FirstTokenS, q.FinishS, "%+v", q)
				require.LessOrEqual(t, q.ITLSMax, q.FinishS-q.FirstTokenS+1e-12)
				require.GreaterOrEqual(t, q.ITLSMax*float64(q.OutputTokens-1)+1e-12, q.FinishS-q.FirstTokenS, "the longest gap is at least the mean")
				require.Less(t, q.CachedTokens, q.PromptTokens)
				prompts += q.PromptTokens
				outputs += q.OutputTokens
				cached += q.CachedTokens
				recomputed += q.Preemptions
			}
			last := map[int]float64{}
			pre, dec := 0, 0
			for _, it := range its {
				require.LessOrEqual(t, it.KVBlocksUsed, it.KVBlocks)
				require.Positive(t, it.DurationS)
				require.GreaterOrEqual(t, it.StartS, last[it.Replica]-1e-12, "one iteration at a time per replica")
				last[it.Replica] = it.StartS + it.DurationS
				require.LessOrEqual(t, it.PrefillTokens+it.DecodeTokens, 4096)
				pre += it.PrefillTokens
				dec += it.DecodeTokens
			}
			// Every token is computed once, bar cached prefixes and recomputation
			// after preemption. A one-token remainder of a prompt runs as a
			// decode-shaped step, so compare the sum.
			t.Logf("%d requests, %d preemptions, %d cached tokens, %d iterations", len(rows), recomputed, cached, len(its))
			if recomputed == 0 {
				assert.Equal(t, prompts-cached+outputs-len(rows), pre+dec)
			} else {
				assert.GreaterOrEqual(t, pre+dec, prompts-cached+outputs-len(rows))
			}
		})
	}
}

// A pipeline-parallel replica under load keeps its two stages busy with two
// iterations in flight (never more), so its iterations overlap: they take
// longer in all than the run lasts; and every request still has one
// iteration at a time (its tokens come at least a pipeline traversal apart).
func TestPipelineReplicaOverlapsIterations(t *testing.T) {
	res := run(t, `,"tp":1,"pp":2,"workload":{"rate_per_s":40,"requests":300,"prompt_tokens":{"tokens":300},"output_tokens":{"tokens":30}}`)
	its := table[serving.IterationRow](res, "iterations")
	type edge struct {
		t float64
		d int
	}
	var edges []edge
	busy := 0.0
	for _, it := range its {
		edges = append(edges, edge{it.StartS, 1}, edge{it.StartS + it.DurationS, -1})
		busy += it.DurationS
	}
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].t < edges[j].t || (edges[i].t == edges[j].t && edges[i].d < edges[j].d)
	})
	open, most := 0, 0
	for _, e := range edges {
		open += e.d
		most = max(most, open)
	}
	require.Equal(t, 2, most, "at most one iteration per stage in flight")
	last := edges[len(edges)-1].t
	require.Greater(t, busy, 1.2*(last-its[0].StartS), "the iterations overlap")
	shortest := its[0].DurationS
	for _, it := range its {
		shortest = min(shortest, it.DurationS)
	}
	for _, r := range table[serving.RequestRow](res, "requests") {
		require.GreaterOrEqual(t, r.ITLSMean, shortest*(1-1e-9), "request %d", r.Request)
	}
}

// A deep pipeline under KV pressure: while iterations in flight hold the
// blocks a request needs, it waits for them instead of preempting itself
// and being readmitted with nothing computed (which never ended: each new
// iteration undid the last one's prefill). Every request finishes, in about
// as many iterations and preemptions as a one-stage replica needs.
func TestPipelineUnderKVPressureMakesProgress(t *testing.T) {
	w := `"workload":{"rate_per_s":30,"requests":300,"prompt_tokens":{"dist":"lognormal","tokens":1500,"sigma":0.6,"max_tokens":8000},"output_tokens":{"dist":"uniform","min_tokens":16,"max_tokens":300}}`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	summary := func(layout string) serving.SummaryRow {
		_, res, err := all.Run(scenario.Env{Ctx: ctx}, []byte(`{"kind":"serving","model":"llama3-8b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},`+layout+`,"engine":{"kv_blocks":560},`+w+`}`))
		require.NoError(t, err, layout)
		return table[serving.SummaryRow](res, "summary")[0]
	}
	one, deep := summary(`"tp":1`), summary(`"tp":1,"pp":8`)
	require.Positive(t, one.Preemptions, "the cache is tight")
	require.Less(t, deep.Iterations, 3*one.Iterations)
	require.Less(t, deep.Preemptions, 2*one.Preemptions)
}

// The engine's expert parallelism (engine.enable_expert_parallel) reaches
// the serving pricer: with Mixtral's eight experts whole on eight GPUs a
// lightly loaded replica's decode step reads a whole expert on the busiest
// GPU where each GPU read an eighth of two, so its inter-token latency
// grows; a dense model is refused naming the field.
func TestServingExpertsInsideTP(t *testing.T) {
	js := func(model string, whole bool) string {
		return fmt.Sprintf(`{"kind":"serving","model":%s,"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"tp":8,
			"engine":{"enable_expert_parallel":%t},"workload":{"rate_per_s":0.5,"requests":10,"prompt_tokens":{"tokens":200},"output_tokens":{"tokens":50}}}`, model, whole)
	}
	const mixtral = `{"preset":"mixtral-8x7b","layers":4}`
	sum := func(whole bool) serving.SummaryRow {
		return table[serving.SummaryRow](runJS(t, js(mixtral, whole)), "summary")[0]
	}
	split, whole := sum(false), sum(true)
	require.Greater(t, whole.ITLSP50, split.ITLSP50)
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js(`"llama3-8b"`, true)))
	require.ErrorContains(t, err, "engine.enable_expert_parallel")
}

// Mixture-of-experts models serve as the inference kind runs them: every
// MoE block is an attention layer with its KV cache, the dispatch and
// combine of a replica without expert parallelism move nothing, and MLA
// decodes against its latent cache. At vanishing load TTFT and ITL agree
// with the inference kind within 1 % (DeepSeek-V3's ITL within 3 %: the
// serving iteration runs MLA's projections in their prefill form, the key
// and value up-projection over the decode tokens, where the inference
// kind's decode absorbs them into the query and output).
func TestVanishingLoadMoE(t *testing.T) {
	for _, c := range []struct {
		model, gpu, cluster string
		tp                  int
		itl                 float64
	}{
		{`{"preset":"mixtral-8x7b","layers":4}`, "h100-sxm", "dgx-h100", 2, 0.01},
		{`{"preset":"qwen3-30b-a3b","layers":4}`, "h100-sxm", "dgx-h100", 2, 0.01},
		{`{"preset":"deepseek-v3","layers":4}`, "h800", "dgx-h800", 8, 0.03},
	} {
		target := fmt.Sprintf(`"model":%s,"gpu":%q,"cluster":{"preset":%q,"nodes":1},"tp":%d`, c.model, c.gpu, c.cluster, c.tp)
		res := runJS(t, `{"kind":"serving",`+target+`,"workload":{"rate_per_s":0.01,"requests":4,"prompt_tokens":{"tokens":700},"output_tokens":{"tokens":40}}}`)
		inf := runJS(t, `{"kind":"inference",`+target+`,"batch":1,"prompt_tokens":700,"output_tokens":40}`)
		want := table[inference.SummaryRow](inf, "summary")[0]
		tok := 700 * spec.TokenizeSPerToken
		for _, r := range table[serving.RequestRow](res, "requests") {
			assert.InEpsilon(t, want.TTFTS+tok, r.TTFTS, 0.01, c.model)
			assert.InEpsilon(t, want.TPOTS, r.ITLSMean, c.itl, c.model)
		}
	}
}

// The serving search combines engine.enable_expert_parallel with the other
// lists: each configuration's row says which it ran, a MoE model runs
// both, and a dense model's expert-parallel rows are invalid with the
// field's reason.
func TestServingSearchExpertParallel(t *testing.T) {
	search := func(model string) []serving.ConfigRow {
		res := runJS(t, fmt.Sprintf(`{"kind":"serving","model":%s,"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"tp":2,
			"slo":{"ttft_s":2},"search":{"tp":[2,4],"enable_expert_parallel":[false,true]},
			"workload":{"rate_per_s":2,"requests":20,"prompt_tokens":{"tokens":200},"output_tokens":{"tokens":20}}}`, model))
		return table[serving.ConfigRow](res, "configs")
	}
	moe := search(`{"preset":"mixtral-8x7b","layers":2}`)
	require.Len(t, moe, 4)
	seen := map[[2]int]bool{}
	for _, r := range moe {
		require.Equal(t, "simulated", r.Status, r.Reason)
		k := 0
		if r.ExpertParallel {
			k = 1
		}
		seen[[2]int{r.TP, k}] = true
	}
	require.Len(t, seen, 4)
	for _, r := range search(`{"preset":"llama3-8b","layers":2}`) {
		if r.ExpertParallel {
			require.Equal(t, "invalid", r.Status)
			require.Contains(t, r.Reason, "enable_expert_parallel")
		} else {
			require.Equal(t, "simulated", r.Status, r.Reason)
		}
	}
	// Data-parallel attention ranks: a replica of ep ranks of tp GPUs
	// counts ep·tp GPUs; an ep the experts do not divide is invalid.
	res := runJS(t, `{"kind":"serving","model":{"preset":"mixtral-8x7b","layers":2},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
		"slo":{"ttft_s":2},"search":{"tp":[1,2],"ep":[1,2,3]},
		"workload":{"rate_per_s":2,"requests":20,"prompt_tokens":{"tokens":200},"output_tokens":{"tokens":20}}}`)
	rows := table[serving.ConfigRow](res, "configs")
	require.Len(t, rows, 6)
	for _, r := range rows {
		require.Equal(t, r.TP*r.EP, r.GPUs)
		if r.EP == 3 {
			require.Equal(t, "invalid", r.Status)
			require.Contains(t, r.Reason, "ep")
		} else {
			require.Equal(t, "simulated", r.Status, r.Reason)
		}
	}
}

// A prefill replica holds each prompt's KV blocks until its transfer to a
// decode replica ends: when they fill its cache, the next request waits
// for a transfer instead of being reported as never fitting (it did, with
// a request of 80 blocks on a replica of 300).
func TestPrefillReplicaWaitsForTransfers(t *testing.T) {
	for _, pp := range []int{1, 4} {
		res := runJS(t, fmt.Sprintf(`{"kind":"serving","model":{"preset":"deepseek-v3","layers":4},"gpu":"h800","cluster":{"preset":"dgx-h800","nodes":4},
			"tp":2,"pp":%d,"replicas":2,"disaggregation":{"prefill_replicas":1},"engine":{"max_num_batched_tokens":2048,"kv_blocks":300},
			"workload":{"rate_per_s":10,"requests":100,"prompt_tokens":{"dist":"lognormal","tokens":1000,"sigma":0.8,"max_tokens":4000},
			"output_tokens":{"dist":"uniform","min_tokens":1,"max_tokens":200}}}`, pp))
		rows := table[serving.RequestRow](res, "requests")
		require.Len(t, rows, 100)
		for _, r := range rows {
			require.Positive(t, r.FinishS, "request %d", r.Request)
		}
	}
}

// engine.kv_cache_dtype "fp8" stores a token's keys and values in half the
// bytes, so the memory left after the weights holds twice the blocks
// (within one block of rounding); where the 16-bit cache holds only about
// five of these requests at a time and preempts them over and over, the
// 8-bit one preempts less and serves more requests a second.
func TestFP8KVCacheDoublesTheBlocks(t *testing.T) {
	const w = `,"workload":{"rate_per_s":1,"requests":200,"prompt_tokens":{"tokens":3000},"output_tokens":{"tokens":400}}`
	summary := func(engine string) serving.SummaryRow {
		return table[serving.SummaryRow](run(t, `,"engine":{`+engine+`"gpu_memory_utilization":0.3}`+w), "summary")[0]
	}
	auto, fp8 := summary(""), summary(`"kv_cache_dtype":"fp8",`)
	assert.InDelta(t, 2*auto.KVBlocksReplica, fp8.KVBlocksReplica, 1)
	assert.Less(t, fp8.Preemptions, auto.Preemptions)
	assert.Greater(t, fp8.RequestsPerS, auto.RequestsPerS)
}

// engine.kv_cache_free_memory_fraction f gives the cache f of what the
// weights and activations leave (TensorRT-LLM's rule), where
// gpu_memory_utilization u leaves u of all the memory less them (vLLM's): at
// f = u = 1 the two are the same memory, f = 0.5 is half of it, and at 0.9
// the free-memory rule holds more, by a tenth of the weights and activations.
func TestKVCacheFreeMemoryFraction(t *testing.T) {
	const w = `,"workload":{"rate_per_s":1,"requests":20}`
	blocks := func(engine string) int {
		return table[serving.SummaryRow](run(t, `,"engine":{`+engine+`}`+w), "summary")[0].KVBlocksReplica
	}
	whole := blocks(`"gpu_memory_utilization":1`)
	assert.Equal(t, whole, blocks(`"kv_cache_free_memory_fraction":1`))
	assert.InDelta(t, whole/2, blocks(`"kv_cache_free_memory_fraction":0.5`), 1)
	assert.Greater(t, blocks(`"kv_cache_free_memory_fraction":0.9`), blocks(`"gpu_memory_utilization":0.9`))
	err := all.Validate([]byte(`{"kind":"serving",`+base+`,"engine":{"kv_cache_free_memory_fraction":1.5},"workload":{"rate_per_s":1,"requests":2}}`), 0)
	require.Error(t, err)
	require.Contains(t, err.Error(), "engine.kv_cache_free_memory_fraction")
}

// engine.weight_dtype "int4" leaves the memory its weights no longer take
// to the KV cache: Llama-2-7B's 13.5 GB of 16-bit weights become about
// 3.7 GB, and at 30 % of an A100 the blocks roughly double.
func TestInt4WeightsLeaveMoreBlocks(t *testing.T) {
	const w = `,"workload":{"rate_per_s":1,"requests":20}`
	blocks := func(engine string) int {
		return table[serving.SummaryRow](run(t, `,"engine":{`+engine+`"gpu_memory_utilization":0.3}`+w), "summary")[0].KVBlocksReplica
	}
	auto, q := blocks(""), blocks(`"weight_dtype":"int4",`)
	assert.Greater(t, float64(q), 1.8*float64(auto))
}

// search.weight_dtype and search.kv_cache_dtype are dimensions of the
// search: Llama-3-70B's 16-bit weights do not fit one A100, its int4 ones
// do, so the search's single-GPU configurations are simulated only with
// int4 weights, and every row names its types.
func TestSearchOverQuantization(t *testing.T) {
	res := runJS(t, `{"kind":"serving","model":"llama3-70b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"slo":{"ttft_s":5,"itl_s":0.2},"workload":{"rate_per_s":0.5,"requests":30,"prompt_tokens":{"tokens":500},"output_tokens":{"tokens":50}},
		"search":{"tp":[1,2],"weight_dtype":["auto","int4"],"kv_cache_dtype":["auto","fp8"]}}`)
	rows := table[serving.ConfigRow](res, "configs")
	require.Len(t, rows, 8)
	for _, r := range rows {
		require.Contains(t, []string{"auto", "int4"}, r.WeightDType)
		require.Contains(t, []string{"auto", "fp8"}, r.KVCacheDType)
		if r.TP == 1 {
			assert.Equal(t, r.WeightDType == "int4", r.Status == "simulated", "%+v", r)
		}
	}
	assert.Equal(t, 1, rows[0].GPUs, "the cheapest configuration meeting the SLOs runs int4 weights on one GPU")
	assert.Equal(t, "int4", rows[0].WeightDType)
}

// A replica of ep data-parallel attention ranks (wide expert
// parallelism): at vanishing load with one sequence a rank it runs as the
// inference kind's ep replicas, one sequence each (TTFT and ITL within
// 2 %: the same dispatch and combine over the ranks, the experts ep ways);
// the ranks step together, so a long prompt on one rank stalls another
// rank's decode, which a replica of its own does not see; ep·tp GPUs a
// replica count against the cluster, and the errors name their field.
func TestServingDataParallelAttention(t *testing.T) {
	const moe = `"model":{"preset":"qwen3-30b-a3b","layers":6},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1}`
	inf := table[inference.SummaryRow](runJS(t, `{"kind":"inference",`+moe+`,"tp":1,"replicas":4,"ep":4,"batch":1,"prompt_tokens":600,"output_tokens":20}`), "summary")[0]
	// Four requests sent together share the first iteration, one prompt a
	// rank, as the inference kind's replicas run them; then all four
	// decode, one a rank.
	rows := table[serving.RequestRow](runJS(t, `{"kind":"serving",`+moe+`,"tp":1,"ep":4,"engine":{"frontend_s_per_token":0},
		"workload":{"arrival":"trace","trace":{"arrival_s":[0,0,0,0],"prompt_tokens":[600,600,600,600],"output_tokens":[20,20,20,20]}}}`), "requests")
	require.Len(t, rows, 4)
	for _, r := range rows {
		assert.InDelta(t, inf.TTFTS, r.TTFTS, 0.02*inf.TTFTS, "one prefill iteration, a prompt a rank")
		assert.InDelta(t, inf.TPOTS, r.ITLSMean, 0.02*inf.TPOTS)
	}
	// A 16,000-token prompt arrives while a short request decodes: in one
	// replica of two ranks its prefill holds the other rank's next token;
	// on two replicas of one rank each (least outstanding routing) it
	// does not.
	trace := `"workload":{"arrival":"trace","trace":{"arrival_s":[0,0.05],"prompt_tokens":[100,16000],"output_tokens":[400,2]}}`
	lock := table[serving.RequestRow](runJS(t, `{"kind":"serving",`+moe+`,"tp":1,"ep":2,`+trace+`}`), "requests")[0]
	apart := table[serving.RequestRow](runJS(t, `{"kind":"serving",`+moe+`,"tp":1,"replicas":2,`+trace+`}`), "requests")[0]
	assert.Greater(t, lock.ITLSMax, 5*apart.ITLSMax, "the long prefill stalls the other rank: %g s against %g s", lock.ITLSMax, apart.ITLSMax)

	// Disaggregated: a prefill and a decode replica of two ranks each, the
	// cache moved between them.
	dis := table[serving.RequestRow](runJS(t, `{"kind":"serving",`+moe+`,"tp":1,"ep":2,"replicas":2,"disaggregation":{"prefill_replicas":1},
		"workload":{"rate_per_s":5,"requests":6,"prompt_tokens":{"tokens":500},"output_tokens":{"tokens":4}}}`), "requests")
	for _, r := range dis {
		require.Positive(t, r.KVTransferS)
		require.Equal(t, 1, r.DecodeReplica)
	}

	// Redundant expert slots (EPLB): 16 more over 4 ranks hold 4 more
	// experts' weights a GPU, leaving fewer KV blocks; 6 ranks need
	// redundant slots to divide Qwen3's 128 experts (132 = 6 · 22).
	blocks := func(extra string) int {
		res := runJS(t, `{"kind":"serving",`+moe+`,"tp":1,`+extra+`,"workload":{"rate_per_s":5,"requests":2,"prompt_tokens":{"tokens":100},"output_tokens":{"tokens":2}}}`)
		return table[serving.IterationRow](res, "iterations")[0].KVBlocks
	}
	require.Less(t, blocks(`"ep":4,"redundant_experts":16`), blocks(`"ep":4`))
	require.Positive(t, blocks(`"ep":6,"redundant_experts":4`))

	// The all-to-all backend: DeepEP's low-latency kernels add their fixed
	// time to each of a decode step's 6 dispatches and 6 combines; auto
	// runs them for decode-only iterations and the high-throughput
	// kernels for iterations with a prompt (one at vanishing load).
	one := func(backend string) serving.RequestRow {
		return table[serving.RequestRow](runJS(t, `{"kind":"serving",`+moe+`,"tp":1,"ep":4,"engine":{"all2all_backend":"`+backend+`"},
			"workload":{"rate_per_s":0.01,"requests":1,"prompt_tokens":{"tokens":300},"output_tokens":{"tokens":10}}}`), "requests")[0]
	}
	direct, ll, ht, auto := one("direct"), one("deepep_low_latency"), one("deepep_high_throughput"), one("deepep_auto")
	assert.InDelta(t, direct.ITLSMean+6*(net.DeepEPLowLatencyDispatchS+net.DeepEPLowLatencyCombineS), ll.ITLSMean, 1e-7)
	assert.InDelta(t, ll.ITLSMean, auto.ITLSMean, 1e-12)
	assert.InDelta(t, ht.TTFTS, auto.TTFTS, 1e-12)

	for _, c := range []struct{ extra, field string }{
		{moe + `,"engine":{"all2all_backend":"deepep_low_latency"}`, "engine.all2all_backend"},
		{moe + `,"ep":2,"engine":{"all2all_backend":"nccl"}`, "engine.all2all_backend"},
		{moe + `,"ep":6`, "redundant_experts can make up"},
		{moe + `,"ep":4,"redundant_experts":2`, "ep"},
		{moe + `,"redundant_experts":4`, "redundant_experts"},
		{`"model":"llama3-8b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"ep":2`, "ep"},
		{moe + `,"ep":3`, "ep"},
		{moe + `,"ep":2,"pp":2`, "ep"},
		{moe + `,"ep":2,"engine":{"enable_expert_parallel":true}`, "engine.enable_expert_parallel"},
		{moe + `,"ep":4,"tp":4`, "replicas"},
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"serving",`+c.extra+`,"workload":{"rate_per_s":1,"requests":2}}`))
		require.Error(t, err, c.extra)
		require.ErrorContains(t, err, c.field, c.extra)
	}
}

// engine.flash_attention_2 runs the prefill attention as the inference
// kind's flash_attention_2 does: on an H100, at vanishing load, a request's
// TTFT grows to that kind's prefill with the option (within 1 %, as above)
// and its inter-token latency, flash-decoding's, does not move.
func TestFlashAttention2Prefill(t *testing.T) {
	const h100 = `"model":"llama2-7b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"tp":1`
	w := `,"workload":{"rate_per_s":0.01,"requests":3,"prompt_tokens":{"tokens":4000},"output_tokens":{"tokens":8}}`
	req := func(engine string) serving.RequestRow {
		return table[serving.RequestRow](runJS(t, `{"kind":"serving",`+h100+engine+w+`}`), "requests")[0]
	}
	fused, fa2 := req(""), req(`,"engine":{"flash_attention_2":true}`)
	t.Logf("TTFT fused %.2f ms, flash-attn 2 %.2f ms", fused.TTFTS*1e3, fa2.TTFTS*1e3)
	assert.Greater(t, fa2.TTFTS, 1.02*fused.TTFTS)
	assert.InEpsilon(t, fused.ITLSMean, fa2.ITLSMean, 1e-9)
	inf := table[inference.SummaryRow](runJS(t, `{"kind":"inference",`+h100+`,"batch":1,"prompt_tokens":4000,"output_tokens":8,"flash_attention_2":true}`), "summary")[0]
	assert.InDelta(t, inf.TTFTS+4000*spec.TokenizeSPerToken, fa2.TTFTS, 0.01*inf.TTFTS)
}

// Sliding-window layers keep only their window's blocks (vLLM's hybrid KV
// cache manager): a 4,000-token request of gpt-oss-20b, half of whose
// layers band 128 tokens, holds ⌈(250 + 9) / 2⌉ = 130 blocks of 16 tokens
// of every layer where the same model attending fully holds 250, so 200
// blocks serve it only windowed; and the blocks a sequence holds, in closed
// form, stop growing in the windowed share past the window.
func TestSlidingWindowKeepsTheWindowsBlocks(t *testing.T) {
	const gptOSS = `{"kind":"serving","model":%s,"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
		"engine":{"kv_blocks":200},"workload":{"rate_per_s":1,"requests":3,"prompt_tokens":{"tokens":3990},"output_tokens":{"tokens":10}}}`
	res := runJS(t, fmt.Sprintf(gptOSS, `"gpt-oss-20b"`))
	used := 0
	for _, it := range table[serving.IterationRow](res, "iterations") {
		used = max(used, it.KVBlocksUsed)
	}
	assert.Equal(t, 130, used)
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(fmt.Sprintf(gptOSS, `{"preset":"gpt-oss-20b","window_pattern":"F"}`)))
	require.ErrorContains(t, err, "needs 250 KV blocks")

	blocks := sv.WindowBlocks(16, 128, 0.5)
	for n, want := range map[int]int{1: 1, 16: 1, 17: 2, 128: 8, 144: 9, 160: 10, 4000: 130, 4016: 130, 4032: 131} {
		assert.Equal(t, want, blocks(n), "n %d", n)
	}
	assert.Equal(t, 250, sv.WindowBlocks(16, 128, 0)(4000))
}

// Preempted by recompute, a request's full blocks stay in the prefix cache
// as vLLM's automatic prefix caching leaves them (freed with their hashes),
// so rescheduled before they are reused it recomputes less: under the same
// pressure the iterations prefill fewer tokens with the cache on than off,
// and never fewer than the prompts.
func TestPreemptedBlocksStayCached(t *testing.T) {
	prefilled := func(caching bool) (tokens, prompts, preemptions int) {
		res := run(t, fmt.Sprintf(`,"engine":{"kv_blocks":400,"prefix_caching":%v},"workload":{"rate_per_s":50,"requests":300,"prompt_tokens":{"tokens":300},"output_tokens":{"tokens":200}}`, caching))
		for _, it := range table[serving.IterationRow](res, "iterations") {
			tokens += it.PrefillTokens
		}
		for _, r := range table[serving.RequestRow](res, "requests") {
			prompts += r.PromptTokens
		}
		return tokens, prompts, table[serving.SummaryRow](res, "summary")[0].Preemptions
	}
	on, prompts, preemptedOn := prefilled(true)
	off, _, preemptedOff := prefilled(false)
	require.Positive(t, preemptedOn)
	require.Positive(t, preemptedOff)
	assert.Less(t, on, off)
	assert.GreaterOrEqual(t, on, prompts)
}
