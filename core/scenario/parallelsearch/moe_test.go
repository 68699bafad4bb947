package parallelsearch_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/scenario/parallelsearch"
)

// A mixture-of-experts search enumerates EP (1, 2, 4, 8 for Mixtral's 8
// experts), rejects EP that does not divide dp, and simulates EP layouts;
// every simulated step is at least its bound.
func TestSearchEnumeratesEP(t *testing.T) {
	rows := search(t, `{"kind":"parallel_search","model":{"preset":"mixtral-8x7b","layers":2},"gpu":"h100-sxm",
		"cluster":{"preset":"dgx-h100","nodes":1},"global_batch":8,"seq_len":1024,"tp":[1,2],"pp":[1],
		"micro_batch":[1],"zero":[1],"recompute":["full"],"keep":0}`)
	require.Len(t, rows, 2*4)
	seen := map[int]bool{}
	for _, r := range rows {
		if r.StepTimeS != nil {
			t.Logf("tp %d ep %d dp %d step %.4g bound %.4g", r.TP, r.EP, r.DP, *r.StepTimeS, *r.BoundS)
		}
		if r.Status == parallelsearch.Simulated {
			seen[r.EP] = true
			require.GreaterOrEqual(t, *r.StepTimeS, *r.BoundS)
		}
		if r.TP == 2 && r.EP == 8 {
			assert.Equal(t, parallelsearch.Invalid, r.Status, "dp 4 is not divisible by ep 8")
			assert.Contains(t, r.Reason, "ep")
		}
	}
	assert.True(t, seen[1] && seen[8], "%v", seen)
}
