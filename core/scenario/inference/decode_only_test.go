package inference_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
)

// A disaggregated decode instance (decode_only) runs the same decode steps
// as the whole run after its prefill, from time 0: the same TPOT at one
// stage, TTFT 0, the same weights and cache, and only a decode step's
// activations, so a batch whose prefill would not fit does.
func TestInferenceDecodeOnly(t *testing.T) {
	run := func(pp int, extra string) (inference.SummaryRow, map[string]float64, error) {
		js := fmt.Sprintf(`{"kind":"inference","model":{"preset":"llama2-7b","layers":8},"gpu":"h100-sxm",
			"cluster":{"preset":"dgx-h100","nodes":1},"tp":2,"pp":%d,"batch":64,"prompt_tokens":2048,"output_tokens":12%s}`, pp, extra)
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		if err != nil {
			return inference.SummaryRow{}, nil, err
		}
		mem := map[string]float64{}
		for _, tb := range res.Tables {
			if tb.Name == "memory" {
				for _, r := range tb.Rows.([]job.MemoryRow) {
					if r.Stage == 0 {
						mem[r.Category] = r.Bytes
					}
				}
			}
		}
		return res.Tables[0].Rows.([]inference.SummaryRow)[0], mem, nil
	}
	full, fullMem, err := run(1, "")
	require.NoError(t, err)
	dec, decMem, err := run(1, `,"decode_only":true`)
	require.NoError(t, err)
	require.Zero(t, dec.TTFTS)
	require.Positive(t, full.TTFTS)
	require.InEpsilon(t, full.TPOTS, dec.TPOTS, 1e-9, "the decode steps are the same")
	require.InEpsilon(t, 11*dec.TPOTS, dec.E2ES, 1e-9, "output_tokens − 1 steps from time 0")
	require.Equal(t, fullMem["weights"], decMem["weights"])
	require.Equal(t, fullMem["kv_cache"], decMem["kv_cache"])
	// The prefill's largest operator holds 64·2,048 tokens' tensors, a
	// decode step's 64 tokens' (and the weights it reads).
	require.Less(t, decMem["activations"], fullMem["activations"]/10)
	require.Greater(t, dec.LongestPromptTokens, full.LongestPromptTokens)

	// Two stages: the first decode step waits for no tokens from the last
	// stage (none was prefilled there), and the run ends.
	piped, _, err := run(2, `,"decode_only":true`)
	require.NoError(t, err)
	require.Zero(t, piped.TTFTS)
	require.Positive(t, piped.TPOTS)

	_, _, err = run(1, `,"decode_only":true,"output_tokens":1`)
	require.ErrorContains(t, err, "output_tokens")
	require.ErrorContains(t, err, "decode_only")
}
