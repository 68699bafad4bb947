package training_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// llama7b is a 4-layer LLaMA-2-7B at TP 1 on DGX A100 nodes, one sequence
// per GPU.
func llama7b(nodes int, parallel string) string {
	return fmt.Sprintf(`{"kind":"training","model":{"preset":"llama2-7b","layers":4},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":%d},"parallel":{"tp":1,"global_batch":%d%s},"seq_len":2048,"timeline_ranks":[0]}`,
		nodes, 8*nodes, parallel)
}

// dpTasks is rank 0's data-parallel tasks by name.
func dpTasks(t *testing.T, js string) map[string]job.TimelineRow {
	out := map[string]job.TimelineRow{}
	for _, r := range run(t, js).Tables[2].Rows.([]job.TimelineRow) {
		if r.Stream == "dp" {
			out[r.Name] = r
		}
	}
	return out
}

func optimizerBytes(t *testing.T, js string) float64 {
	for _, m := range run(t, js).Tables[3].Rows.([]job.MemoryRow) {
		if m.Category == "optimizer" {
			return m.Bytes
		}
	}
	t.Fatal("no optimizer row")
	return 0
}

// Two distributed-optimizer instances on two nodes: each node's eight
// replicas reduce-scatter the gradients among themselves, as eight GPUs of
// one node do alone (the same bytes, the same time), and the two nodes
// then all-reduce each GPU's eighth over its own rail; the weights are
// gathered within the node. The optimizer state, sharded over eight
// replicas instead of sixteen, doubles. One instance is no instance.
func TestDistributedOptimizerInstances(t *testing.T) {
	two := dpTasks(t, llama7b(2, `,"zero":1,"distributed_optimizer_instances":2`))
	alone := dpTasks(t, llama7b(1, `,"zero":1`))
	rs, across, gather := two["grad_reduce_scatter"], two["grad_reduce_scatter.across_instances"], two["param_all_gather"]
	require.Positive(t, across.Bytes)
	assert.InEpsilon(t, rs.Bytes/8, across.Bytes, 1e-12)
	assert.GreaterOrEqual(t, across.StartS, rs.EndS, "the shards are all-reduced after the reduce-scatter")
	assert.InEpsilon(t, alone["grad_reduce_scatter"].EndS-alone["grad_reduce_scatter"].StartS, rs.EndS-rs.StartS, 0.01)
	assert.InEpsilon(t, alone["param_all_gather"].EndS-alone["param_all_gather"].StartS, gather.EndS-gather.StartS, 0.01)
	for _, z := range []int{1, 3} {
		full := optimizerBytes(t, llama7b(2, fmt.Sprintf(`,"zero":%d`, z)))
		assert.InEpsilon(t, 2*full, optimizerBytes(t, llama7b(2, fmt.Sprintf(`,"zero":%d,"distributed_optimizer_instances":2`, z))), 1e-9)
		assert.InEpsilon(t, 4*full, optimizerBytes(t, llama7b(2, fmt.Sprintf(`,"zero":%d,"distributed_optimizer_instances":4`, z))), 1e-9)
	}
	assert.Equal(t, run(t, llama7b(2, `,"zero":1`)), run(t, llama7b(2, `,"zero":1,"distributed_optimizer_instances":1`)))
}

func TestDistributedOptimizerInstancesProblems(t *testing.T) {
	for _, c := range []struct{ js, want string }{
		{llama7b(2, `,"distributed_optimizer_instances":2`), "needs zero >= 1"},
		{llama7b(2, `,"zero":1,"distributed_optimizer_instances":3`), "must divide the data-parallel ranks (dp·cp = 16)"},
		{llama7b(2, `,"zero":1,"distributed_optimizer_instances":16`), "instances of at least 2"},
		{strings.Replace(llama7b(1, `,"zero":1,"ep":8,"distributed_optimizer_instances":2`), `"llama2-7b","layers":4`, `"mixtral-8x7b","layers":2`, 1), "applies to dense models"},
	} {
		se := specError(t, c.js)
		assert.Contains(t, se.Error(), "parallel.distributed_optimizer_instances", c.js)
		assert.Contains(t, se.Error(), c.want, c.js)
	}
}

func specError(t *testing.T, js string) *spec.Error {
	t.Helper()
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	var se *spec.Error
	require.True(t, errors.As(err, &se), "%s: %v", js, err)
	return se
}
