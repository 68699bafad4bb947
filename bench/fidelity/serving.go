package fidelity

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/eidolon-sim/eidolon/core/scenario/serving"
)

// nimSrc is the serving rows' source: NVIDIA NIM for LLMs' benchmarking
// page (docs.nvidia.com/nim/benchmarking/llm/latest/performance.html, as
// the RAPID-LLM validation set collected it: gkarfakis19/Rapid-LLM,
// validation_scripts/nvidia_data/8xA100_bf16_Llama3_3-70B.csv):
// Llama-3.3-70B-Instruct in BF16 on 8× A100 80 GB SXM at TP 8, one replica,
// closed-loop clients (genai-perf) with fixed prompt and output lengths.
const nimSrc = "NVIDIA NIM for LLMs benchmarking page (Llama-3.3-70B, 8×A100, TP8)"

// NIMServingFile is where the page's concurrency-5 rows are, under
// ../shared.
const NIMServingFile = "reference/serving.md"

// NIMRow is one published row: prompt and output tokens, clients, mean
// TTFT and ITL in ms.
type NIMRow struct {
	In, Out, Conc int
	TTFTMS, ITLMS float64
}

// nimOtherRows are the page's concurrency-1 and -25 rows, which
// NIMServingFile does not hold (it has the concurrency-5 ones).
var nimOtherRows = []NIMRow{
	{200, 200, 1, 47.73, 18.11}, {200, 200, 25, 528.55, 23.47},
	{500, 2000, 1, 79.98, 18.57}, {500, 2000, 25, 947.31, 24.89},
	{1000, 1000, 1, 131.21, 18.44}, {1000, 1000, 25, 1345.99, 26.36},
	{5000, 500, 1, 554.81, 18.54}, {5000, 500, 25, 1362.44, 52},
	{20000, 2000, 1, 2521.02, 19.46}, {20000, 2000, 25, 10457.52, 64.46},
}

// nimH100Src is a second table of the same page, as NVIDIA's NIM
// benchmarking guide publishes it today (docs.nvidia.com/nim/benchmarking/
// llm/1.0.0/performance, "Llama-3.3-70b-instruct Results", NIM version
// 1.8.0): the model in FP8 on 2× H100 80 GB at TP 2, 5,000 input and 500
// output tokens, closed-loop clients (AIPerf) at eight concurrencies. No
// figure is fitted on it.
const nimH100Src = "NVIDIA NIM benchmarking page, Llama-3.3-70B NIM 1.8.0 on 2×H100 at FP8, TP2"

// nimH100Rows are that table's rows: prompt and output tokens, clients,
// mean TTFT and ITL in ms; nimH100Throughput its output tokens a second,
// row by row.
var (
	nimH100Rows = []NIMRow{
		{5000, 500, 1, 406.77, 18.58}, {5000, 500, 5, 546.7, 21.83}, {5000, 500, 25, 688.69, 38.75},
		{5000, 500, 50, 834.51, 59.73}, {5000, 500, 100, 7996.25, 92.91}, {5000, 500, 150, 34794.22, 92.86},
		{5000, 500, 200, 61680.22, 93.06}, {5000, 500, 250, 88605.32, 93.2},
	}
	nimH100Throughput = []float64{51.67, 218.48, 623.4, 814.37, 917.26, 920.9, 920.54, 920.12}
)

// label is the row's case name.
func (r NIMRow) label() string {
	c := fmt.Sprintf("%d+%d tokens, %d client", r.In, r.Out, r.Conc)
	if r.Conc > 1 {
		c += "s"
	}
	return c
}

// LineFit is y = InterceptS + SlopeS·x by least squares, WorstResidual the
// largest |fitted / y − 1| over the points.
type LineFit struct{ InterceptS, SlopeS, WorstResidual float64 }

// OneClientTTFT fits one client's TTFT against the prompt's tokens over the
// rows with prompts of at most maxPrompt tokens (where attention's
// quadratic term is small), for the reference and the simulated TTFT: with
// one client every request is alone, so the intercept is what a request
// pays whatever its prompt (API server, first decode step) and the slope
// the prefill's cost per token.
func OneClientTTFT(rows []Row, maxPrompt int) (ref, sim LineFit, err error) {
	byCase := map[string]Row{}
	for _, r := range rows {
		if r.Quantity == "ttft_ms" {
			byCase[r.Case] = r
		}
	}
	var a [][]float64
	var refY, simY []float64
	for _, n := range nimOtherRows {
		if n.Conc != 1 || n.In > maxPrompt {
			continue
		}
		r, ok := byCase[n.label()]
		if !ok {
			return ref, sim, fmt.Errorf("no ttft_ms row %q", n.label())
		}
		a = append(a, []float64{1, float64(n.In)})
		refY, simY = append(refY, r.Reference/1e3), append(simY, r.Simulated/1e3)
	}
	if len(a) < 3 {
		return ref, sim, fmt.Errorf("%d one-client rows up to %d tokens: too few to fit a line and judge it", len(a), maxPrompt)
	}
	fit := func(y []float64) (LineFit, error) {
		x, worst, err := leastSquares(a, y)
		if err != nil {
			return LineFit{}, err
		}
		return LineFit{InterceptS: x[0], SlopeS: x[1], WorstResidual: worst}, nil
	}
	if ref, err = fit(refY); err != nil {
		return ref, sim, err
	}
	sim, err = fit(simY)
	return ref, sim, err
}

// ReadNIMRows reads the rows of NIMServingFile's table: the lines of five
// numeric cells (input tokens, output tokens, concurrency, TTFT ms, ITL ms).
func ReadNIMRows(path string) ([]NIMRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []NIMRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(strings.Trim(strings.TrimSpace(sc.Text()), "|"), "|")
		if len(cells) != 5 {
			continue
		}
		var v [5]float64
		ok := true
		for i, c := range cells {
			x, err := strconv.ParseFloat(strings.TrimSpace(c), 64)
			ok = ok && err == nil
			v[i] = x
		}
		if ok {
			rows = append(rows, NIMRow{int(v[0]), int(v[1]), int(v[2]), v[3], v[4]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no table rows of five numbers", path)
	}
	return rows, nil
}

// NIMEngine is TensorRT-LLM's in-flight batcher, which NIM prefers on A100,
// as its defaults run it: it packs an iteration as the serving kind's
// scheduler does (generation requests first, then context chunks first come
// first served) up to max_num_tokens, 8192 by default; its all-reduce
// plugin picks the custom kernels or NCCL by its own limits, with or without
// CUDA graphs (net.TRTLLMCustom: NCCL above 8,000,000 bytes, where vLLM's
// custom all-reduce goes to 8 MiB); and TensorRT builds each residual add
// and the RMSNorm after it into one kernel (engine.fused_add_norm); its
// generation phase runs grouped-query attention on the XQA kernel in
// multi-block mode, on by default (ExtendedRuntimePerfKnobConfig's
// multiBlockMode; engine.decode_attention "xqa", compute's
// xqaBlocksPerSequence); its KV cache takes 90 % of the memory left once
// the engine is loaded (KvCacheConfig's free_gpu_memory_fraction, 0.9 by
// default: engine.kv_cache_free_memory_fraction).
// Between iterations its loop takes NIMStepOverheadS, during which the GPUs
// wait (engine.step_overhead_s). vLLM V1's server would budget 2048 tokens
// on an A100 (the serving kind's default there); the rows' engine is not
// stated, and bench's TestNIMServing logs both.
var NIMEngine = nimEngine(NIMStepOverheadS)

// nimEngine is NIMEngine's options with the loop's time between iterations.
func nimEngine(stepOverheadS float64) string { return trtllmEngine(stepOverheadS, true) }

// trtllmEngine is TensorRT-LLM's engine as NIMEngine describes it, with the
// loop's time between iterations, and its all-reduce plugin on the custom
// kernels by the plugin's own limits (customAllReduce) or on NCCL.
func trtllmEngine(stepOverheadS float64, customAllReduce bool) string {
	allReduce := `"custom_all_reduce_engine":"tensorrt_llm"`
	if !customAllReduce {
		allReduce = `"custom_all_reduce":false`
	}
	return fmt.Sprintf(`"max_num_batched_tokens":8192,%s,"fused_add_norm":true,"decode_attention":"xqa","kv_cache_free_memory_fraction":0.9,"step_overhead_s":%g`, allReduce, stepOverheadS)
}

// NIMStepOverheadS is the time NIM's engine spends between two iterations
// while its GPUs wait: the executor's synchronous loop reads the sampled
// tokens back, updates and schedules the requests, prepares the next
// iteration's inputs and runs the sampling step (TensorRT-LLM's batch
// manager: forwardSync, then the schedulers, then forwardAsync; its docs
// describe an overlap scheduler that hides this work for the PyTorch
// backend, with no figure for what it hides). No
// published figure gives it, so it is fitted, on the page's one-client
// rows only, where one sequence decodes alone: their ITL is one decode
// step plus this time, so the fit is the mean of the five measured ITLs
// less the simulated ones without it (FitNIMStepOverhead,
// TestNIMStepOverheadFit). The five- and 25-client rows, whose steps hold
// several sequences and prefill chunks, check it.
const NIMStepOverheadS = 1.05e-3

// FitNIMStepOverhead is NIMStepOverheadS's fit: the mean over the page's
// one-client rows of the measured ITL less the simulated one with the loop
// taking no time. One sequence decoding alone pays the loop's time once a
// token, so the simulated ITL grows by exactly that time and the mean
// difference is the least-squares fit.
func FitNIMStepOverhead(ctx context.Context) (float64, error) {
	sum, n := 0.0, 0
	for _, r := range nimOtherRows {
		if r.Conc != 1 {
			continue
		}
		res, err := run(ctx, NIMSpec(r, NIMRounds(r)*r.Conc, NIMExecution, nimEngine(0)))
		if err != nil {
			return 0, fmt.Errorf("nim %d+%d at 1: %w", r.In, r.Out, err)
		}
		s := res.Tables[0].Rows.([]serving.SummaryRow)[0]
		sum += r.ITLMS/1e3 - s.ITLSMean
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("no one-client rows")
	}
	return sum / float64(n), nil
}

// NIMExecution is how TensorRT-LLM's runtime issues an engine's kernels by
// default: without CUDA graphs (ExtendedRuntimePerfKnobConfig's
// cuda_graph_mode, False by default; tensorrt_llm.llmapi reference), every
// iteration enqueued kernel by kernel. The eager host is priced at
// PyTorch's cost per kernel (exec/host.go), more than TensorRT's enqueue
// takes, and still never binds here: against CUDA graphs the 5-client
// decode step grows by 0.36-0.37 ms, the stream's 0.9 µs gap after each of
// its kernels where a graph leaves 0.5 µs.
const NIMExecution = "eager"

// NIMRounds is how many requests each client sends: the closed loop takes
// two or three rounds to settle from its lock-step start into its steady
// pattern (then every round repeats it), and a benchmark tool reports
// steady windows (perf_analyzer measures until three consecutive windows
// agree), so 40 rounds keep the settling rounds under 5 % of the sample.
// At 25 clients 8 rounds (3 for the 20,000-token row, whose requests take
// a minute each) keep the report quick.
func NIMRounds(r NIMRow) int {
	switch {
	case r.Conc < 25:
		return 40
	case r.In < 20000:
		return 8
	}
	return 3
}

// NIMSpec is a row as a serving run: Llama-3.3-70B (the llama3-70b
// architecture) in bf16 on one DGX A100 (8× A100 80 GB SXM), TP 8, one
// replica, closed-loop clients at the row's concurrency, fixed input and
// output lengths, the first round left out as warm-up, with exactly the
// engine options given (JSON object members; NIMEngine for the rows') and
// execution mode (NIMExecution for the rows').
func NIMSpec(r NIMRow, requests int, execution, engine string) string {
	return fmt.Sprintf(`{"kind":"serving","model":"llama3-70b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"tp":8,"execution":%q,"engine":{%s},"workload":{"arrival":"closed_loop","concurrency":%d,"requests":%d,"warmup_requests":%d,
		"prompt_tokens":{"tokens":%d},"output_tokens":{"tokens":%d}}}`, execution, engine, r.Conc, requests, r.Conc, r.In, r.Out)
}

// NIMH100Spec is a row of nimH100Rows as a serving run: the A100 rows'
// engine (NIMEngine, NIMExecution) on one replica of two H100s of a DGX
// H100, its linear layers in FP8 and its KV cache in FP8 too. The page names
// the profile "fp8" and not its cache's type; its saturated rows imply the
// FP8 cache: from 100 clients on the throughput holds at 920 output tokens a
// second at a 93 ms ITL, about 85 sequences resident, where 16-bit blocks of
// 5,500-token sequences would hold about 40 in what two H100s leave beside
// 70 GB of FP8 weights, and 8-bit ones about 80.
func NIMH100Spec(r NIMRow, requests int) string {
	return fmt.Sprintf(`{"kind":"serving","model":"llama3-70b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
		"tp":2,"dtype":"fp8","execution":%q,"engine":{%s,"kv_cache_dtype":"fp8"},"workload":{"arrival":"closed_loop","concurrency":%d,
		"requests":%d,"warmup_requests":%d,"prompt_tokens":{"tokens":%d},"output_tokens":{"tokens":%d}}}`,
		NIMExecution, NIMEngine, r.Conc, requests, r.Conc, r.In, r.Out)
}

// NIMH100Rows runs every row of nimH100Rows (NIMRounds of requests a
// client, 4 from 100 clients on, the first round left out as warm-up, as
// NIMSpec's).
func NIMH100Rows(ctx context.Context) ([]Row, error) {
	var rows []Row
	for i, r := range nimH100Rows {
		rounds := NIMRounds(r)
		if r.Conc >= 100 {
			rounds = 4
		}
		res, err := run(ctx, NIMH100Spec(r, rounds*r.Conc))
		if err != nil {
			return nil, fmt.Errorf("nim h100 %d+%d at %d: %w", r.In, r.Out, r.Conc, err)
		}
		s := res.Tables[0].Rows.([]serving.SummaryRow)[0]
		note := fmt.Sprintf("KV cache use up to %.0f %%; mean %.1f sequences an iteration", 100*s.KVUtilizationMax, s.MeanBatchSeqs)
		rows = append(rows,
			row("2×H100 FP8, "+r.label(), "ttft_ms", r.TTFTMS, 1e3*s.TTFTSMean, nimH100Src, note),
			row("2×H100 FP8, "+r.label(), "itl_ms", r.ITLMS, 1e3*s.ITLSMean, nimH100Src, note),
			row("2×H100 FP8, "+r.label(), "output_tokens_per_s", nimH100Throughput[i], s.OutputTokensPerS, nimH100Src, note))
	}
	return rows, nil
}

// ServingRows runs every NIM row as a serving scenario with NIMEngine and
// NIMExecution (the
// serving kind's defaults otherwise) and NIMRounds: the concurrency-5 rows
// given (NIMServingFile's) and the page's others, in the page's order.
func ServingRows(ctx context.Context, conc5 []NIMRow) ([]Row, error) {
	all := append(append([]NIMRow(nil), nimOtherRows...), conc5...)
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].In != all[j].In {
			return all[i].In < all[j].In
		}
		return all[i].Conc < all[j].Conc
	})
	var rows []Row
	for _, r := range all {
		res, err := run(ctx, NIMSpec(r, NIMRounds(r)*r.Conc, NIMExecution, NIMEngine))
		if err != nil {
			return nil, fmt.Errorf("nim %d+%d at %d: %w", r.In, r.Out, r.Conc, err)
		}
		s := res.Tables[0].Rows.([]serving.SummaryRow)[0]
		c := r.label()
		// genai-perf's identity: mean end to end = TTFT + (output − 1)·ITL.
		e2e := (r.TTFTMS + float64(r.Out-1)*r.ITLMS) / 1e3
		note := fmt.Sprintf("mean end to end %.2f s against the reference's %.2f s (%+.1f%%)", s.E2ESMean, e2e, 100*(s.E2ESMean/e2e-1))
		rows = append(rows,
			row(c, "ttft_ms", r.TTFTMS, 1e3*s.TTFTSMean, nimSrc, note),
			row(c, "itl_ms", r.ITLMS, 1e3*s.ITLSMean, nimSrc, note))
	}
	return rows, nil
}

// gpustackSrc is GPUStack's performance lab for gpt-oss-120b on H100s: vLLM
// v0.10.2 serving the released checkpoint (MXFP4 experts, BF16 the rest),
// `vllm bench serve` sending every request at once (request rate inf) from
// its random dataset (fixed prompt and output lengths; the outputs end at
// the model's end of text, no ignore_eos, so their mean is what the page's
// totals give), and ShareGPT at four concurrent requests.
const gpustackSrc = "GPUStack performance lab, gpt-oss-120b on H100 (docs/performance-lab/gpt-oss-120b/h100.md: vLLM v0.10.2, MXFP4 experts)"

// gpustackRow is one benchmark result of the page: its TP degree, the
// requests, the totals of input and generated tokens, the concurrency (0:
// all at once) and its total token throughput, mean TTFT and mean TPOT.
type gpustackRow struct {
	label                    string
	tp, requests, conc       int
	input, generated         int
	totalTPS, ttftMS, tpotMS float64
}

// gpustackRows: the page's baseline (TP 1, `vllm serve openai/gpt-oss-120b
// --max-model-len 32768`) and optimized (TP 2, --async-scheduling) runs of
// each dataset.
var gpustackRows = []gpustackRow{
	{"random 32K+100", 1, 100, 0, 3200000, 9877, 16136.57, 99444.04, 23.99},
	{"random 4K+200", 1, 500, 0, 1999249, 67205, 14247.47, 72954.68, 31.70},
	{"random 2K+100", 1, 500, 0, 999120, 49197, 14385.69, 36234.76, 41.35},
	{"random 128+4", 1, 1000, 0, 127755, 4000, 17059.15, 4850.46, 304.80},
	{"ShareGPT, 4 at a time", 1, 100, 4, 22946, 21691, 932.29, 49.00, 8.31},
	{"random 32K+100", 2, 100, 0, 3200000, 9955, 32471.01, 48826.05, 220.32},
	{"random 4K+200", 2, 500, 0, 1999249, 68046, 34491.13, 29487.34, 164.73},
	{"random 2K+100", 2, 500, 0, 999120, 49059, 34083.02, 15291.77, 139.32},
	{"random 128+4", 2, 1000, 0, 127755, 4000, 31517.47, 2800.15, 183.05},
	{"ShareGPT, 4 at a time", 2, 100, 4, 22946, 21691, 1328.44, 37.51, 5.75},
}

// GPUStackRows runs each of the page's results as a serving scenario with
// the serving kind's vLLM defaults and the checkpoint's MXFP4 experts
// (engine.weight_dtype "mxfp4"): every request of a burst arriving at once
// (a closed loop of as many clients as requests), ShareGPT's at four at a
// time with its mean lengths. Nothing is fitted on them.
func GPUStackRows(ctx context.Context) ([]Row, error) {
	var rows []Row
	for _, r := range gpustackRows {
		conc := r.conc
		if conc == 0 {
			conc = r.requests
		}
		prompt := (r.input + r.requests/2) / r.requests
		output := max((r.generated+r.requests/2)/r.requests, 2)
		js := fmt.Sprintf(`{"kind":"serving","model":"gpt-oss-120b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"tp":%d,
			"engine":{"weight_dtype":"mxfp4"},"workload":{"arrival":"closed_loop","concurrency":%d,"requests":%d,
			"prompt_tokens":{"tokens":%d},"output_tokens":{"tokens":%d}}}`, r.tp, conc, r.requests, prompt, output)
		res, err := run(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("gpustack %s at tp %d: %w", r.label, r.tp, err)
		}
		s := res.Tables[0].Rows.([]serving.SummaryRow)[0]
		label := fmt.Sprintf("gpt-oss-120b, %d×H100, %s", r.tp, r.label)
		note := fmt.Sprintf("%d requests of %d + %d tokens; mean %.1f sequences an iteration, KV cache use up to %.0f %%, %d preemptions",
			r.requests, prompt, output, s.MeanBatchSeqs, 100*s.KVUtilizationMax, s.Preemptions)
		rows = append(rows,
			row(label, "total_tokens_per_s", r.totalTPS, s.TotalTokensPerS, gpustackSrc, note),
			row(label, "ttft_ms", r.ttftMS, 1e3*s.TTFTSMean, gpustackSrc, note),
			row(label, "tpot_ms", r.tpotMS, 1e3*s.ITLSMean, gpustackSrc, note))
	}
	return rows, nil
}
