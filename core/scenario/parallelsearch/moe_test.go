package parallelsearch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/parallelsearch"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// mixtral is a search of a 2-layer Mixtral-8x7B on one DGX H100 node (tp
// 1 and 2, full recomputation, ZeRO-1, every layout simulated); extra is
// more of the spec.
func mixtral(extra string) string {
	return `{"kind":"parallel_search","model":{"preset":"mixtral-8x7b","layers":2},"gpu":"h100-sxm",
		"cluster":{"preset":"dgx-h100","nodes":1},"global_batch":8,"seq_len":1024,"tp":[1,2],"pp":[1],
		"micro_batch":[1],"zero":[1],"recompute":["full"],"keep":0` + extra + `}`
}

// A mixture-of-experts search enumerates EP (1, 2, 4, 8 for Mixtral's 8
// experts) and, at tp 2, expert TP 2 and 1 (at tp 1 only 1); it rejects EP
// that does not divide dp, and simulates EP layouts; every simulated step
// is at least its bound.
func TestSearchEnumeratesEP(t *testing.T) {
	rows := search(t, mixtral(""))
	require.Len(t, rows, 4+2*4)
	seen := map[int]bool{}
	for _, r := range rows {
		if r.StepTimeS != nil {
			t.Logf("tp %d ep %d expert_tp %d dp %d step %.4g bound %.4g", r.TP, r.EP, r.ExpertTP, r.DP, *r.StepTimeS, *r.BoundS)
		}
		if r.Status == parallelsearch.Simulated {
			seen[r.EP] = true
			require.GreaterOrEqual(t, *r.StepTimeS, *r.BoundS)
		}
		if r.TP == 2 && r.EP == 8 && r.ExpertTP == 2 {
			assert.Equal(t, parallelsearch.Invalid, r.Status, "dp 4 is not divisible by ep 8")
			assert.Contains(t, r.Reason, "ep")
		}
	}
	assert.True(t, seen[1] && seen[8], "%v", seen)
}

// Expert TP is enumerated as tp, then 1, each judged by the training
// check: at tp 2, expert TP 1 needs ep a multiple of 2 (each TP rank holds
// its own experts), so ep 1 is invalid with the training kind's reason and
// ep 8 is valid (ep·expert_tp/tp = 4 replicas divide dp 4), where expert
// TP 2 is not. Both expert TPs are simulated with distinct step times,
// each the training kind's step for the same layout.
func TestSearchEnumeratesExpertTP(t *testing.T) {
	rows := search(t, mixtral(""))
	at := map[[3]int]parallelsearch.ConfigRow{}
	for _, r := range rows {
		key := [3]int{r.TP, r.EP, r.ExpertTP}
		_, dup := at[key]
		require.False(t, dup, "tp %d ep %d expert_tp %d twice", r.TP, r.EP, r.ExpertTP)
		at[key] = r
		if r.TP == 1 {
			require.Equal(t, 1, r.ExpertTP)
		} else {
			require.Contains(t, []int{1, 2}, r.ExpertTP)
		}
	}
	bad := at[[3]int{2, 1, 1}]
	assert.Equal(t, parallelsearch.Invalid, bad.Status)
	assert.Equal(t, "ep: must be a multiple of tp/expert_tp = 2 (each TP rank holds its own experts), got 1", bad.Reason)
	assert.Equal(t, parallelsearch.Simulated, at[[3]int{2, 8, 1}].Status)
	assert.Equal(t, parallelsearch.Invalid, at[[3]int{2, 8, 2}].Status)
	for _, ep := range []int{2, 4} {
		whole, split := at[[3]int{2, ep, 1}], at[[3]int{2, ep, 2}]
		require.Equal(t, parallelsearch.Simulated, whole.Status)
		require.Equal(t, parallelsearch.Simulated, split.Status)
		assert.NotEqual(t, *whole.StepTimeS, *split.StepTimeS, "ep %d", ep)
		assert.NotEqual(t, *whole.MemoryPeakBytes, *split.MemoryPeakBytes, "ep %d", ep)
		for _, r := range []parallelsearch.ConfigRow{whole, split} {
			_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(fmt.Sprintf(`{"kind":"training",
				"model":{"preset":"mixtral-8x7b","layers":2},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
				"seq_len":1024,"parallel":{"tp":2,"dp":4,"ep":%d,"expert_tp":%d,"sequence_parallel":true,"micro_batch":1,
				"global_batch":8,"zero":1,"recompute":"full"}}`, r.EP, r.ExpertTP)))
			require.NoError(t, err)
			s := res.Tables[0].Rows.([]training.SummaryRow)[0]
			assert.InEpsilon(t, s.StepTimeS, *r.StepTimeS, 1e-9, "ep %d expert_tp %d", r.EP, r.ExpertTP)
			assert.InEpsilon(t, s.MemoryPeakBytes, *r.MemoryPeakBytes, 1e-9, "ep %d expert_tp %d", r.EP, r.ExpertTP)
		}
	}
}

// The spec's expert_tp list restricts the enumeration, 0 standing for each
// layout's tp: [1] keeps expert TP 1 alone, [0] expert TP = tp alone, and
// the two together are the default.
func TestSearchRestrictsExpertTP(t *testing.T) {
	all := search(t, mixtral(""))
	for _, c := range []struct {
		list string
		keep func(parallelsearch.ConfigRow) bool
	}{
		{"[1]", func(r parallelsearch.ConfigRow) bool { return r.ExpertTP == 1 }},
		{"[0]", func(r parallelsearch.ConfigRow) bool { return r.ExpertTP == r.TP }},
		{"[0,1]", func(parallelsearch.ConfigRow) bool { return true }},
	} {
		rows := search(t, mixtral(`,"expert_tp":`+c.list))
		want := 0
		for _, r := range all {
			if c.keep(r) {
				want++
			}
		}
		require.Len(t, rows, want, c.list)
		for _, r := range rows {
			require.True(t, c.keep(r), "%s: tp %d expert_tp %d", c.list, r.TP, r.ExpertTP)
		}
	}
}

// A bad expert_tp is a SpecError naming the list entry: negative, or
// neither 0, 1 nor a tp searched.
func TestSearchBadExpertTP(t *testing.T) {
	for list, path := range map[string]string{
		"[-1]":  "expert_tp[0]",
		"[1,4]": "expert_tp[1]",
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(mixtral(`,"expert_tp":`+list)))
		var se *spec.Error
		require.True(t, errors.As(err, &se), "%s: %v", list, err)
		require.Len(t, se.Problems, 1, "%v", se.Problems)
		assert.Equal(t, path, se.Problems[0].Path)
	}
}
