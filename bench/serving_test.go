package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/bench/fidelity"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/serving"
	sv "github.com/eidolon-sim/eidolon/core/serving"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/require"
)

func sharedFile(t testing.TB, rel string) string {
	p := fidelity.SharedPath(rel)
	if p == "" {
		t.Skipf("reference data %s not found under ../shared or /work/shared", rel)
	}
	return p
}

// TestNIMServing runs the five NVIDIA NIM rows of reference/serving.md and
// prints simulated TTFT and ITL against them. Nothing is fitted to these
// rows. It fails when a TTFT or ITL error exceeds 50 % (a broken mechanism,
// not a calibration target; the 10 % is reported, not asserted for
// them) or when a row's mean end to end misses by more than 15 % (it reads
// 9-11 % short: the decode step lacks the engine's own time per iteration,
// SERVING_FIDELITY.md).
//
// The end to end is the part of the reference the closed loop's phase does
// not decide. genai-perf takes a request's ITL as (end to end − TTFT) /
// (output tokens − 1) and averages TTFT and ITL over requests
// (genai_perf/profile_data_parser/llm_profile_data_parser.py), so the
// reference's mean end to end is TTFT + (output − 1)·ITL exactly. Five
// clients that never idle make the engine's work per client cycle (five
// prefills and a decode step per output token) that end to end whatever
// their phase; how it splits into TTFT and ITL is the phase: which
// prefills share an iteration, and which a request waits behind.
//
// The log also shows two things the TTFT split turns on:
//   - "first 2 rounds": the mean TTFT over the first max(10, 2·concurrency)
//     requests from the clients' lock-step start, what genai-perf measures
//     by default since its request-count mode (config_defaults.py
//     REQUEST_COUNT 10, perf_analyzer_config.py's 2·concurrency; no
//     warm-up, WARMUP_REQUEST_COUNT 0). The rows are compared over 40
//     rounds after the first instead.
//   - TTFT against the API server's time per request, and per prompt token
//     at the tokenizing rates core/serving's doc cites (1–3 µs a token;
//     the rows themselves run the default, 2.07 µs). The server takes one
//     request at a time, so requests sent together reach the engine one
//     tokenizing apart and the first starts a prefill alone: from the
//     lock-step start five clients settle into one request and a group of
//     four (with no tokenizing, all five share every prefill: the
//     1,000-token row reads +18 %). With fixed lengths a request sent on a
//     response reaches the engine 0, 1, 2 … decode steps after its
//     predecessor left, and from the 5,000-token row on each step moves
//     the pattern (which prefills queue behind which); the 20,000-token
//     row reads −46 % with no tokenizing, −16 % at 1 µs a token, −4 % at
//     2 µs and +8 % at 3.
//   - TTFT and ITL against the engine loop's own time per iteration and
//     per sequence (engine.step_overhead_s, _per_seq; 0 in the rows).
//   - TTFT and ITL with each residual add and the norm after it as two
//     kernels (vLLM's kernel set, which the kernel tables time; TensorRT
//     fuses them, as the rows run), and with CUDA graphs (off by default in
//     TensorRT-LLM's runtime, as the rows run).
//
// Run: go test ./bench -run NIMServing -v
func TestNIMServing(t *testing.T) {
	rows, err := fidelity.ReadNIMRows(sharedFile(t, fidelity.NIMServingFile))
	require.NoError(t, err)
	require.Len(t, rows, 5, "serving.md's table")
	runSpec := func(js string) *serving.Outcome {
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		require.NoError(t, err)
		return &serving.Outcome{Summary: res.Tables[0].Rows.([]serving.SummaryRow)[0], Requests: res.Tables[1].Rows.([]serving.RequestRow)}
	}
	// nimSpec is the row with these engine options on top of the rows'.
	nimSpec := func(r fidelity.NIMRow, engine string) string {
		if engine != "" {
			engine = "," + engine
		}
		return fidelity.NIMSpec(r, fidelity.NIMRounds(r)*r.Conc, fidelity.NIMExecution, fidelity.NIMEngine+engine)
	}
	run := func(r fidelity.NIMRow, engine string) *serving.Outcome { return runSpec(nimSpec(r, engine)) }
	t.Logf("%6s %6s %4s | %10s %10s %7s | %8s %8s %7s | %8s %8s %7s", "in", "out", "conc", "TTFT ref", "TTFT sim", "err",
		"ITL ref", "ITL sim", "err", "e2e ref", "e2e sim", "err")
	for _, r := range rows {
		o := run(r, "")
		s := o.Summary
		ttft, itl := s.TTFTSMean*1e3, s.ITLSMean*1e3
		et, ei := ttft/r.TTFTMS-1, itl/r.ITLMS-1
		// genai-perf's identity: mean end to end = TTFT + (output − 1)·ITL.
		e2eRef := (r.TTFTMS + float64(r.Out-1)*r.ITLMS) / 1e3
		ee := s.E2ESMean/e2eRef - 1
		t.Logf("%6d %6d %4d | %10.2f %10.2f %+6.1f%% | %8.2f %8.2f %+6.1f%% | %7.2fs %7.2fs %+6.1f%%", r.In, r.Out, r.Conc,
			r.TTFTMS, ttft, 100*et, r.ITLMS, itl, 100*ei, e2eRef, s.E2ESMean, 100*ee)
		first := 0.0
		n := max(10, 2*r.Conc)
		for _, q := range o.Requests[:n] {
			first += q.TTFTS / float64(n)
		}
		t.Logf("    first 2 rounds (genai-perf's %d requests from the lock-step start): TTFT %.2f ms (%+.1f%%)", n, first*1e3, 100*(first*1e3/r.TTFTMS-1))
		line := "    TTFT with the API server taking (no tokenizing)"
		for _, f := range []float64{0.01, 0.02, 0.03, 0.04, 0.06} {
			x := run(r, fmt.Sprintf(`"frontend_s":%g,"frontend_s_per_token":0`, f)).Summary.TTFTSMean * 1e3
			line += fmt.Sprintf(" %.0f ms: %.0f (%+.0f%%);", f*1e3, x, 100*(x/r.TTFTMS-1))
		}
		t.Log(line)
		line = "    TTFT tokenizing at"
		for _, k := range []float64{0, 1e-6, 2e-6, 3e-6} {
			x := run(r, fmt.Sprintf(`"frontend_s_per_token":%g`, k)).Summary.TTFTSMean * 1e3
			line += fmt.Sprintf(" %.0f µs a token: %.0f (%+.0f%%);", k*1e6, x, 100*(x/r.TTFTMS-1))
		}
		t.Log(line)
		line = fmt.Sprintf("    TTFT / ITL with the engine loop taking (engine.step_overhead_s + _per_seq per sequence; the rows' %.2f ms + 0)", 1e3*fidelity.NIMStepOverheadS)
		for _, o := range [][2]float64{{0, 0}, {0.5e-3, 0}, {1.5e-3, 0}, {fidelity.NIMStepOverheadS, 0.1e-3}} {
			x := run(r, fmt.Sprintf(`"step_overhead_s":%g,"step_overhead_s_per_seq":%g`, o[0], o[1])).Summary
			line += fmt.Sprintf(" %.1f ms + %.1f ms: %+.0f%% / %+.0f%%;", o[0]*1e3, o[1]*1e3, 100*(x.TTFTSMean*1e3/r.TTFTMS-1), 100*(x.ITLSMean*1e3/r.ITLMS-1))
		}
		t.Log(line)
		variant := func(label, execution, engine string) {
			f := runSpec(fidelity.NIMSpec(r, fidelity.NIMRounds(r)*r.Conc, execution, engine)).Summary
			t.Logf("    %s: TTFT %.0f (%+.1f%%), ITL %.2f (%+.1f%%)", label,
				f.TTFTSMean*1e3, 100*(f.TTFTSMean*1e3/r.TTFTMS-1), f.ITLSMean*1e3, 100*(f.ITLSMean*1e3/r.ITLMS-1))
		}
		variant("with each residual add and norm two kernels (engine.fused_add_norm false, vLLM's kernel set)", fidelity.NIMExecution,
			strings.Replace(fidelity.NIMEngine, `"fused_add_norm":true`, `"fused_add_norm":false`, 1))
		variant("with CUDA graphs (TensorRT-LLM's cuda_graph_mode)", "cuda_graphs", fidelity.NIMEngine)
		variant("with flash-decoding's split of the cache (engine.decode_attention flash_decoding, vLLM's and SGLang's)", fidelity.NIMExecution,
			strings.Replace(fidelity.NIMEngine, `"decode_attention":"xqa"`, `"decode_attention":"flash_decoding"`, 1))
		v := runSpec(fidelity.NIMSpec(r, fidelity.NIMRounds(r)*r.Conc, "cuda_graphs", "")).Summary
		t.Logf("    vLLM V1's budget on an A100 (the serving kind's default, 2048 tokens): TTFT %.0f (%+.0f%%), ITL %.2f (%+.0f%%)",
			v.TTFTSMean*1e3, 100*(v.TTFTSMean*1e3/r.TTFTMS-1), v.ITLSMean*1e3, 100*(v.ITLSMean*1e3/r.ITLMS-1))
		// What the time is made of: the iteration that prefills the
		// first prompt alone, and a decode step of the whole batch.
		_, sp, err := all.Decode([]byte(fidelity.NIMSpec(r, fidelity.NIMRounds(r)*r.Conc, fidelity.NIMExecution, fidelity.NIMEngine)))
		require.NoError(t, err)
		st, err := serving.Build(context.Background(), sp.(*spec.Serving))
		require.NoError(t, err)
		pr := st.Pricers[0]
		q := min(r.In, 8192)
		c, m, a, h, err := pr.Breakdown(&sv.Shape{Tokens: q, Logits: 1, Chunks: []sv.Chunk{{Query: q}}})
		require.NoError(t, err)
		t.Logf("    prefill of %d tokens: gemm+other %.1f ms, tp comm %.1f ms, attention %.1f ms, logits %.1f ms", q, c*1e3, m*1e3, a*1e3, h*1e3)
		c, m, a, h, err = pr.Breakdown(&sv.Shape{Tokens: r.Conc, Logits: r.Conc, Decode: r.Conc, DecodeKV: r.In + r.Out/2})
		require.NoError(t, err)
		t.Logf("    decode of %d at %d cached: gemm+other %.2f ms, tp comm %.2f ms, attention %.2f ms, logits %.2f ms", r.Conc, r.In+r.Out/2, c*1e3, m*1e3, a*1e3, h*1e3)
		require.False(t, math.IsNaN(ttft) || ttft <= 0 || itl <= 0)
		require.Less(t, math.Abs(et), 0.5, "TTFT row %+v", r)
		require.Less(t, math.Abs(ei), 0.5, "ITL row %+v", r)
		require.Less(t, math.Abs(ee), 0.15, "end to end row %+v", r)
	}
}

// BenchmarkServing: 100,000 requests through one 8-GPU replica of a 70B
// model (Poisson at 6.3 requests/s, about 85 % of the 7.5 requests/s it
// serves when saturated, lognormal prompts around 512 tokens, outputs
// uniform in [16, 512]), and 1,000,000 requests over 64 such replicas
// (512 GPUs, least-outstanding routing).
// Run: go test ./bench -run '^$' -bench Serving -benchtime 1x
func BenchmarkServing(b *testing.B) {
	for _, tc := range []struct {
		name               string
		replicas, requests int
		rate               float64
	}{
		{"replicas=1/requests=100000", 1, 100000, 6.3},
		{"replicas=64/requests=1000000", 64, 1000000, 6.3 * 64},
	} {
		b.Run(tc.name, func(b *testing.B) {
			js := fmt.Sprintf(`{"kind":"serving","model":"llama3-70b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":%d},
				"tp":8,"replicas":%d,"workload":{"rate_per_s":%g,"requests":%d,"warmup_requests":1000,
				"prompt_tokens":{"dist":"lognormal","tokens":512,"sigma":0.8,"max_tokens":8192},
				"output_tokens":{"dist":"uniform","min_tokens":16,"max_tokens":512}}}`, tc.replicas, tc.replicas, tc.rate, tc.requests)
			var s serving.SummaryRow
			for i := 0; i < b.N; i++ {
				_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
				if err != nil {
					b.Fatal(err)
				}
				s = res.Tables[0].Rows.([]serving.SummaryRow)[0]
			}
			b.ReportMetric(s.RequestsPerS, "sim_req_per_s")
			b.ReportMetric(s.TTFTSP99, "sim_ttft_p99_s")
			b.ReportMetric(s.ITLSP50, "sim_itl_p50_s")
			b.ReportMetric(float64(s.Iterations), "iterations")
		})
	}
}

// BenchmarkServingSearch: 256 configurations (TP 1–8 × 1–8 replicas × 4
// token budgets × 2 chunk sizes) of Llama-3-8B on two DGX A100 nodes,
// 500 requests each at 40 requests/s, ranked against TTFT ≤ 0.5 s and
// ITL ≤ 50 ms.
// Run: go test ./bench -run '^$' -bench ServingSearch -benchtime 1x
func BenchmarkServingSearch(b *testing.B) {
	js := `{"kind":"serving","model":"llama3-8b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":2},
		"slo":{"ttft_s":0.5,"itl_s":0.05},
		"search":{"tp":[1,2,4,8],"replicas":[1,2,3,4,5,6,7,8],"max_num_batched_tokens":[1024,2048,4096,8192],"chunk_tokens":[512,1024]},
		"workload":{"rate_per_s":40,"requests":500,"warmup_requests":50,
			"prompt_tokens":{"dist":"lognormal","tokens":1000,"sigma":0.5,"max_tokens":8000},"output_tokens":{"dist":"uniform","min_tokens":16,"max_tokens":256}}}`
	var rows []serving.ConfigRow
	for i := 0; i < b.N; i++ {
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		if err != nil {
			b.Fatal(err)
		}
		rows = res.Tables[0].Rows.([]serving.ConfigRow)
	}
	pass := 0
	for _, r := range rows {
		if r.MeetsSLO {
			pass++
		}
	}
	b.ReportMetric(float64(len(rows)), "configs")
	b.ReportMetric(float64(pass), "meeting_slo")
	b.ReportMetric(float64(rows[0].GPUs), "best_gpus")
}
