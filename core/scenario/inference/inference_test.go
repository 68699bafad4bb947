package inference_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func run(t *testing.T, extra string) scenario.Result {
	js := fmt.Sprintf(`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1}%s}`, extra)
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err, js)
	return res
}

func table[T any](res scenario.Result, name string) []T {
	for _, tb := range res.Tables {
		if tb.Name == name {
			return tb.Rows.([]T)
		}
	}
	return nil
}

// One request group is the same run as the uniform batch fields.
func TestOneGroupIsTheUniformBatch(t *testing.T) {
	for _, layout := range []string{`"tp":2`, `"tp":2,"pp":2`} {
		a := table[inference.SummaryRow](run(t, `,`+layout+`,"batch":3,"prompt_tokens":100,"output_tokens":12`), "summary")[0]
		b := table[inference.SummaryRow](run(t, `,`+layout+`,"requests":[{"count":3,"prompt_tokens":100,"output_tokens":12}]`), "summary")[0]
		assert.Equal(t, a, b, layout)
	}
}

// Two groups: the short outputs finish first; the KV cache holds every
// request's prompt and output: 2 · 32 layers · 32 heads · 128 · 2 B per token.
func TestRequestGroups(t *testing.T) {
	for _, layout := range []string{`"tp":1`, `"tp":2,"pp":2,"replicas":2`} {
		res := run(t, `,`+layout+`,"requests":[{"count":2,"prompt_tokens":300,"output_tokens":8},{"count":1,"prompt_tokens":50,"output_tokens":20}]`)
		s := table[inference.SummaryRow](res, "summary")[0]
		rq := table[inference.RequestRow](res, "requests")
		require.Len(t, rq, 2)
		assert.Less(t, rq[0].E2ES, rq[1].E2ES, "8 tokens end before 20")
		assert.Less(t, rq[0].TTFTS, rq[1].TTFTS, "group 0 is prefilled first")
		assert.Equal(t, s.E2ES, rq[1].E2ES)
		assert.InEpsilon(t, (2*rq[0].TTFTS+rq[1].TTFTS)/3, s.TTFTS, 1e-12)
		for _, m := range table[job.MemoryRow](res, "memory") {
			if m.Category == "kv_cache" && m.Stage == 0 {
				perToken := 2.0 * 32 * 32 * 128 * 2
				if layout != `"tp":1` {
					perToken /= 4 // half the layers, half the heads
				}
				assert.InEpsilon(t, perToken*(2*308+70), m.Bytes, 1e-12, layout)
			}
		}
	}
}

func TestRequestErrorsNameFields(t *testing.T) {
	js := `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"requests":[{"count":0,"prompt_tokens":5,"output_tokens":1}]}`
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "requests[0].count")
}
