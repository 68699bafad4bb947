package serving_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/scenario/serving"
)

// One closed-loop client on one replica: every decoding step is one
// sequence, so the counts follow in closed form.
func speculative(t *testing.T, engine string, output int) (serving.SummaryRow, []serving.IterationRow, []serving.RequestRow) {
	t.Helper()
	res := run(t, fmt.Sprintf(`,"engine":{%s},"workload":{"arrival":"closed_loop","concurrency":1,"requests":3,
		"prompt_tokens":{"tokens":300},"output_tokens":{"tokens":%d}}`, engine, output))
	return table[serving.SummaryRow](res, "summary")[0], table[serving.IterationRow](res, "iterations"), table[serving.RequestRow](res, "requests")
}

func specDecode(method string, k int, alpha float64, extra string) string {
	return fmt.Sprintf(`"speculative":{"method":%q,"num_speculative_tokens":%d,"per_token_acceptance":%g%s}`, method, k, alpha, extra)
}

// With every draft kept, a request of 41 tokens decodes its 40 after the
// first in 8 verifications of 4 drafts (5 tokens each), where it took 40
// steps; of 40 tokens, the last verification has only 3 drafts left to
// propose. Each verification computes 5 query tokens against the cache for
// about the time of one decode step (batch 1 streams the weights once), so
// the inter-token latency falls about fivefold. With none kept, every step
// yields one token and costs a little more than a plain one.
func TestSpeculativeDecodingClosedForm(t *testing.T) {
	plain, plainIts, _ := speculative(t, "", 41)
	sum, its, reqs := speculative(t, specDecode("ngram", 4, 1, ""), 41)
	verifies := 0
	for _, it := range its {
		if it.VerifyingSequences > 0 {
			verifies++
			require.Equal(t, 1, it.VerifyingSequences)
			require.Equal(t, 4, it.DraftTokens)
			require.Equal(t, 4, it.AcceptedTokens)
			require.Equal(t, 5, it.DecodeTokens)
		}
	}
	require.Equal(t, 3*8, verifies)
	require.Equal(t, 3*9, len(its), "a prefill and 8 verifications a request")
	require.Equal(t, 3*41, len(plainIts))
	assert.Equal(t, 1.0, sum.DraftAcceptanceRate)
	assert.Equal(t, 5.0, sum.MeanAcceptanceLength)
	for _, r := range reqs {
		require.Equal(t, 41, r.OutputTokens)
	}
	ratio := plain.ITLSMean / sum.ITLSMean
	assert.InDelta(t, 5, ratio, 0.5, "batch-1 verification of 5 tokens costs about one decode step")

	_, its, _ = speculative(t, specDecode("ngram", 4, 1, ""), 40)
	last := its[len(its)-1]
	require.Equal(t, 3, last.DraftTokens, "1 + 7×5 = 36 tokens, 4 left: 3 drafts")

	none, its, _ := speculative(t, specDecode("ngram", 4, 0, ""), 41)
	require.Equal(t, 3*41, len(its), "one token a step")
	assert.Equal(t, 0.0, none.DraftAcceptanceRate)
	assert.Equal(t, 1.0, none.MeanAcceptanceLength)
	assert.Greater(t, none.ITLSMean, plain.ITLSMean, "verifying drafts that are all rejected costs more than decoding")
}

// Over many verifications the mean acceptance length is (1 − α^(k+1)) /
// (1 − α) (Leviathan et al. 2023), the draft acceptance rate its share of
// the k drafts, and another seed draws other acceptances.
func TestSpeculativeAcceptanceLength(t *testing.T) {
	const alpha, k = 0.7, 4
	js := `,"replicas":2,"engine":{` + specDecode("ngram", k, alpha, "") + `},"workload":{"rate_per_s":8,"requests":300,
		"prompt_tokens":{"tokens":200},"output_tokens":{"tokens":2000}}`
	res := run(t, js)
	sum := table[serving.SummaryRow](res, "summary")[0]
	want := (1 - math.Pow(alpha, k+1)) / (1 - alpha)
	assert.InEpsilon(t, want, sum.MeanAcceptanceLength, 0.02)
	assert.InEpsilon(t, (want-1)/k, sum.DraftAcceptanceRate, 0.03)
	other := table[serving.SummaryRow](run(t, `,"seed":5`+js), "summary")[0]
	assert.NotEqual(t, sum.MeanAcceptanceLength, other.MeanAcceptanceLength)
	assert.Equal(t, res, run(t, js))
}

// A draft model costs the drafter's passes, and its weights and cache take
// KV blocks from the target: at the same acceptance an EAGLE-sized drafter
// (one decoder layer of the target) is slower than free n-gram drafts and
// faster than none; a drafter as large as the target is slower than none.
func TestSpeculativeDraftModelCosts(t *testing.T) {
	plain, _, _ := speculative(t, "", 201)
	ngram, _, _ := speculative(t, specDecode("ngram", 4, 0.8, ""), 201)
	eagle, _, _ := speculative(t, specDecode("draft_model", 4, 0.8, `,"draft_model":{"preset":"llama2-7b","layers":1}`), 201)
	twin, _, _ := speculative(t, specDecode("draft_model", 4, 0.8, `,"draft_model":"llama2-7b"`), 201)
	assert.Less(t, ngram.ITLSMean, eagle.ITLSMean)
	assert.Less(t, eagle.ITLSMean, plain.ITLSMean)
	assert.Greater(t, twin.ITLSMean, plain.ITLSMean)
	assert.Greater(t, eagle.TTFTSMean, ngram.TTFTSMean, "the drafter's pass over the prompt")
	assert.Equal(t, plain.KVBlocksReplica, ngram.KVBlocksReplica)
	assert.Less(t, eagle.KVBlocksReplica, plain.KVBlocksReplica)
	assert.Less(t, twin.KVBlocksReplica, eagle.KVBlocksReplica)
}

func TestSpeculativeSpecErrors(t *testing.T) {
	w := `,"workload":{"rate_per_s":1}`
	for _, c := range []struct{ engine, want string }{
		{specDecode("medusa", 4, 0.7, ""), "engine.speculative.method"},
		{specDecode("draft_model", 4, 0.7, ""), "engine.speculative.draft_model: required"},
		{specDecode("ngram", 4, 0.7, `,"draft_model":"llama2-7b"`), "engine.speculative.draft_model: applies to method"},
		{specDecode("ngram", 0, 0.7, ""), "engine.speculative.num_speculative_tokens"},
		{specDecode("ngram", 4, 1.5, ""), "engine.speculative.per_token_acceptance"},
		{specDecode("draft_model", 4, 0.7, `,"draft_model":"mamba-130m"`), "engine.speculative.draft_model: serving models attention blocks only"},
	} {
		se := specErr(t, `,"engine":{`+c.engine+`}`+w)
		assert.Contains(t, se.Error(), c.want, c.engine)
	}
	se := specErr(t, `,"pp":2,"engine":{`+specDecode("ngram", 4, 0.7, "")+`}`+w)
	assert.Contains(t, se.Error(), "engine.speculative: verifies drafts on one pipeline stage")
}

// A search over the drafts: at light load the ITL falls as k grows to
// what the acceptance sustains, and 0 drafts is a configuration without
// speculative decoding.
func TestSpeculativeSearch(t *testing.T) {
	res := run(t, `,"slo":{"itl_s":1},"engine":{`+specDecode("ngram", 2, 0.8, "")+`},
		"search":{"num_speculative_tokens":[0,1,4]},"workload":{"rate_per_s":1,"requests":20,"prompt_tokens":{"tokens":200},"output_tokens":{"tokens":100}}}`)
	rows := table[serving.ConfigRow](res, "configs")
	require.Len(t, rows, 3)
	itl := map[int]float64{}
	for _, r := range rows {
		require.Equal(t, "simulated", r.Status)
		itl[r.NumSpeculativeTokens] = r.ITLSP90
	}
	require.Len(t, itl, 3)
	assert.Less(t, itl[1], itl[0])
	assert.Less(t, itl[4], itl[1])
	se := specErr(t, `,"slo":{"itl_s":1},"search":{"num_speculative_tokens":[0,2]},"workload":{"rate_per_s":1}`)
	assert.Contains(t, se.Error(), "search.num_speculative_tokens: varies engine.speculative's drafts")
}
