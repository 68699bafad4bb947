package parallelsearch_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/parallelsearch"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func search(t *testing.T, js string) []parallelsearch.ConfigRow {
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err)
	return res.Tables[0].Rows.([]parallelsearch.ConfigRow)
}

func TestSearchRanksAndExplains(t *testing.T) {
	rows := search(t, `{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":8},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":2},"global_batch":16,"seq_len":1024,"keep":0}`)
	// 4 tp × 4 pp (1..8 blocks) × 4 micro-batches × 4 zero × 3 recompute.
	require.Equal(t, 4*4*4*4*3, len(rows))
	status := map[string]int{}
	prev := 0.0
	for i, r := range rows {
		status[r.Status]++
		require.Equal(t, r.TP, r.ExpertTP, "a dense model's expert TP is its tp")
		if r.Status == parallelsearch.Simulated {
			require.NotNil(t, r.Rank)
			require.Equal(t, i+1, *r.Rank)
			require.GreaterOrEqual(t, *r.StepTimeS, prev)
			require.GreaterOrEqual(t, *r.StepTimeS, *r.BoundS)
			prev = *r.StepTimeS
			assert.True(t, *r.Fits)
		} else {
			require.Nil(t, r.StepTimeS)
			require.NotEmpty(t, r.Reason, "%+v", r)
		}
	}
	assert.Greater(t, status[parallelsearch.Simulated], 10)
	assert.Greater(t, status[parallelsearch.Invalid], 0)
	assert.Greater(t, status[parallelsearch.Dominated], 0)
}

// The progress before a candidate is decided is the candidates decided
// over those and the ones still under the k-th best step time: with bounds
// 1..5, before the third, 2/5 while no k-th best exists, 2/3 once it is 3.5
// (only the bound 3 is left under it), 1 once it is below every bound left.
// A real search reports it never falling and ends at 1.
func TestSearchProgressFollowsTheSimulationsLeft(t *testing.T) {
	lbs := []float64{1, 2, 3, 4, 5}
	inf := math.Inf(1)
	assert.Equal(t, 0.0, parallelsearch.SearchProgress(lbs, 0, inf))
	assert.Equal(t, 0.4, parallelsearch.SearchProgress(lbs, 2, inf))
	assert.InDelta(t, 2.0/3, parallelsearch.SearchProgress(lbs, 2, 3.5), 1e-12)
	assert.Equal(t, 1.0, parallelsearch.SearchProgress(lbs, 2, 2.5))

	var got []float64
	_, _, err := all.Run(scenario.Env{Ctx: context.Background(), Progress: func(f float64) { got = append(got, f) }},
		[]byte(`{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":8},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":2},"global_batch":16,"seq_len":1024,"keep":3}`))
	require.NoError(t, err)
	require.NotEmpty(t, got)
	for i := 1; i < len(got); i++ {
		require.GreaterOrEqual(t, got[i], got[i-1], "report %d", i)
	}
	assert.Equal(t, 1.0, got[len(got)-1])
}

// With keep = k the top k are the same as with every layout simulated, on
// one node and on two (data-parallel rings across nodes, whose collectives
// the bound times as NCCL's tuner does).
func TestBoundKeepsTheTop(t *testing.T) {
	for _, nodes := range []string{"1", "2"} {
		base := `{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":8},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":` + nodes + `},"global_batch":16,"seq_len":1024,"keep":`
		all := search(t, base+`0}`)
		top := search(t, base+`3}`)
		require.Equal(t, all[:3], top[:3], "nodes %s", nodes)
		bounded := 0
		for _, r := range top {
			if r.Status == parallelsearch.Bounded {
				bounded++
				require.Greater(t, *r.BoundS, *top[2].StepTimeS)
			}
		}
		assert.Greater(t, bounded, 0)
	}
}

func TestNothingFitsSaysWhy(t *testing.T) {
	rows := search(t, `{"kind":"parallel_search","model":"gpt3-175b","gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1},"global_batch":8,"tp":[8],"pp":[1],"micro_batch":[1]}`)
	for _, r := range rows {
		require.NotEqual(t, parallelsearch.Simulated, r.Status)
		if r.Status == parallelsearch.DoesNotFit {
			assert.Contains(t, r.Reason, "GiB")
		}
	}
}

// Layouts are simulated on every core ahead of the in-order decisions; the
// table is the same on one core as on several (run with -race, this also
// checks the workers share nothing unguarded).
func TestTableDoesNotDependOnCores(t *testing.T) {
	js := `{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":8},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":2},"global_batch":16,"seq_len":1024,"keep":3}`
	was := runtime.GOMAXPROCS(1)
	one := search(t, js)
	runtime.GOMAXPROCS(4)
	four := search(t, js)
	runtime.GOMAXPROCS(was)
	require.Equal(t, one, four)
	bounded := 0
	for _, r := range four {
		if r.Status == parallelsearch.Bounded {
			bounded++
		}
	}
	require.Greater(t, bounded, 0, "the keep = 3 cut applies")
}

// A layout whose simulation panics (a bug) fails the search with a
// *scenario.PanicError carrying the worker's stack; the process survives.
func TestWorkerPanicIsReported(t *testing.T) {
	defer parallelsearch.PanicInLayout(2)()
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"parallel_search",
		"model":{"preset":"gpt-22b","layers":8},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"global_batch":8,"seq_len":1024,"tp":[1,2],"pp":[1],"keep":0}`))
	var pe *scenario.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, pe.Error(), "assignment to entry in nil map")
	assert.Contains(t, pe.Stack, "parallelsearch.simulateGuarded")
}

// A dense model has no expert TP to search: asked for expert TP 1 too, the
// search adds only invalid layouts (tp > 1) with the training check's
// reason, and the other rows are the default's.
func TestDenseExpertTPIsTP(t *testing.T) {
	base := `{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1},"global_batch":8,"seq_len":512,"tp":[1,2,4],"pp":[1,2],
		"micro_batch":[1],"keep":3`
	def := search(t, base+`}`)
	both := search(t, base+`,"expert_tp":[0,1]}`)
	var same []parallelsearch.ConfigRow
	for _, r := range both {
		if r.ExpertTP == r.TP {
			same = append(same, r)
			continue
		}
		require.Equal(t, 1, r.ExpertTP)
		require.Equal(t, parallelsearch.Invalid, r.Status)
		if r.Reason != "ZeRO shards over data- and context-parallel ranks; dp·cp is 1" {
			require.Equal(t, fmt.Sprintf("expert_tp: expert tensor parallelism needs a mixture-of-experts model: must be tp (%d), got 1", r.TP), r.Reason)
		}
	}
	require.Equal(t, def, same)
	require.Equal(t, len(def)+2*2*4*3, len(both), "tp 2 and 4 × pp 1 and 2 × 4 zero × 3 recompute at expert TP 1")
}

// Context parallelism in the search: at 131,072 tokens Llama-3-8B's
// activations fit a GPU at TP 2 only with the sequence split four ways
// (full recomputation); every layout's dp is GPUs / (tp·cp·pp), and cp 8
// leaves no GPU for it.
func TestSearchEnumeratesCP(t *testing.T) {
	rows := search(t, `{"kind":"parallel_search","model":"llama3-8b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
		"global_batch":8,"seq_len":131072,"tp":[2],"pp":[1],"cp":[1,2,4,8],"micro_batch":[1],"recompute":["full"],"zero":[1],"keep":0}`)
	require.Len(t, rows, 4)
	status := map[int]string{}
	for _, r := range rows {
		status[r.CP] = r.Status
		if r.Status != parallelsearch.Invalid {
			require.Equal(t, 4/r.CP, r.DP, "%+v", r)
		}
		if r.Status == parallelsearch.Simulated {
			require.GreaterOrEqual(t, *r.StepTimeS, *r.BoundS)
		}
	}
	require.Equal(t, map[int]string{1: parallelsearch.DoesNotFit, 2: parallelsearch.DoesNotFit, 4: parallelsearch.Simulated, 8: parallelsearch.Invalid}, status)
}
