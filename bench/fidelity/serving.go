package fidelity

import (
	"context"
	"fmt"

	"github.com/eidolon-sim/eidolon/core/scenario/serving"
)

// nimSrc is the serving rows' source: NVIDIA NIM for LLMs' benchmarking
// page (docs.nvidia.com/nim/benchmarking/llm/latest/performance.html, as
// the RAPID-LLM validation set collected it: gkarfakis19/Rapid-LLM,
// validation_scripts/nvidia_data/8xA100_bf16_Llama3_3-70B.csv):
// Llama-3.3-70B-Instruct in BF16 on 8× A100 80 GB SXM at TP 8, one replica,
// closed-loop clients (genai-perf) with fixed prompt and output lengths.
// ../shared/reference/serving.md holds its concurrency-5 rows.
const nimSrc = "NVIDIA NIM for LLMs benchmarking page (Llama-3.3-70B, 8×A100, TP8)"

// nimServingRow is one published row: prompt and output tokens, clients,
// mean TTFT and ITL in ms.
type nimServingRow struct {
	in, out, conc int
	ttftMS, itlMS float64
}

// nimServingRows are the page's 15 A100 rows: concurrency 1, 5 and 25.
var nimServingRows = []nimServingRow{
	{200, 200, 1, 47.73, 18.11}, {200, 200, 5, 135.15, 19.63}, {200, 200, 25, 528.55, 23.47},
	{500, 2000, 1, 79.98, 18.57}, {500, 2000, 5, 259.87, 19.88}, {500, 2000, 25, 947.31, 24.89},
	{1000, 1000, 1, 131.21, 18.44}, {1000, 1000, 5, 460.71, 19.83}, {1000, 1000, 25, 1345.99, 26.36},
	{5000, 500, 1, 554.81, 18.54}, {5000, 500, 5, 1005.5, 23.9}, {5000, 500, 25, 1362.44, 52},
	{20000, 2000, 1, 2521.02, 19.46}, {20000, 2000, 5, 5331.09, 26.89}, {20000, 2000, 25, 10457.52, 64.46},
}

// ServingRows runs every NIM row as a serving scenario: the engine as
// bench's TestNIMServing runs the concurrency-5 rows (TensorRT-LLM's
// in-flight batcher at its 8,192-token budget, the serving kind's
// defaults otherwise), 40 rounds of requests per client after a first
// round left out as warm-up (8 rounds at concurrency 25, 3 for its
// 20,000-token row, whose requests take a minute each).
func ServingRows(ctx context.Context) ([]Row, error) {
	var rows []Row
	for _, r := range nimServingRows {
		rounds := 40
		if r.conc >= 25 {
			rounds = 8
			if r.in >= 20000 {
				rounds = 3
			}
		}
		js := fmt.Sprintf(`{"kind":"serving","model":"llama3-70b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
			"tp":8,"engine":{"max_num_batched_tokens":8192},"workload":{"arrival":"closed_loop","concurrency":%d,"requests":%d,
			"warmup_requests":%d,"prompt_tokens":{"tokens":%d},"output_tokens":{"tokens":%d}}}`, r.conc, rounds*r.conc, r.conc, r.in, r.out)
		res, err := run(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("nim %d+%d at %d: %w", r.in, r.out, r.conc, err)
		}
		s := res.Tables[0].Rows.([]serving.SummaryRow)[0]
		c := fmt.Sprintf("%d+%d tokens, %d client", r.in, r.out, r.conc)
		if r.conc > 1 {
			c += "s"
		}
		// genai-perf's identity: mean end to end = TTFT + (output − 1)·ITL.
		e2e := (r.ttftMS + float64(r.out-1)*r.itlMS) / 1e3
		note := fmt.Sprintf("mean end to end %.2f s against the reference's %.2f s (%+.1f%%)", s.E2ESMean, e2e, 100*(s.E2ESMean/e2e-1))
		rows = append(rows,
			row(c, "ttft_ms", r.ttftMS, 1e3*s.TTFTSMean, nimSrc, note),
			row(c, "itl_ms", r.itlMS, 1e3*s.ITLSMean, nimSrc, note))
	}
	return rows, nil
}
