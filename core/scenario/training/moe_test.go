package training_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
	"github.com/eidolon-sim/eidolon/core/spec"

	"context"
	"errors"
)

// moe is a 2-layer Mixtral-8x7B on DGX H100 nodes.
func moe(nodes int, parallel, extra string) string {
	return fmt.Sprintf(`{"kind":"training","model":{"preset":"mixtral-8x7b","layers":2},"gpu":"h100-sxm",
		"cluster":{"preset":"dgx-h100","nodes":%d},"parallel":{%s},"seq_len":1024%s}`, nodes, parallel, extra)
}

func epTime(t *testing.T, res scenario.Result) (step, ep float64) {
	s := res.Tables[0].Rows.([]training.SummaryRow)[0]
	for _, r := range res.Tables[2].Rows.([]job.TimelineRow) {
		if r.Stream == "ep" && r.Rank == 0 {
			ep += r.EndS - r.StartS
		}
	}
	return s.StepTimeS, ep
}

func TestMoETrainingWithEP(t *testing.T) {
	res := run(t, moe(2, `"dp":16,"ep":8,"global_batch":32`, ""))
	step, ep := epTime(t, res)
	require.Greater(t, step, 0.0)
	require.Greater(t, ep, 0.0, "the dispatch and combine appear on the ep stream")
	s := res.Tables[0].Rows.([]training.SummaryRow)[0]
	assert.True(t, s.Fits)

	// Skewed routing: the hot expert's rank sets the pace; slower step.
	skew := run(t, moe(2, `"dp":16,"ep":8,"global_batch":32`, `,"routing":{"distribution":"zipf","skew":1.2,"seed":3}`))
	s2, ep2 := epTime(t, skew)
	assert.Greater(t, s2, step)
	assert.Greater(t, ep2, ep)

	// Capacity 1.0 with drops: close to balanced again.
	capped := run(t, moe(2, `"dp":16,"ep":8,"global_batch":32`, `,"routing":{"distribution":"zipf","skew":1.2,"seed":3,"capacity_factor":1.0}`))
	s3, _ := epTime(t, capped)
	assert.Less(t, s3, s2)
	t.Logf("step balanced %.4g s (ep %.4g s), zipf 1.2 %.4g s (ep %.4g s), capped %.4g s", step, ep, s2, ep2, s3)
}

// --recompute-modules moe reruns the MoE layer (its all-to-alls too) in
// the backward: a longer step, more time on the ep stream, fewer
// activations kept than with moe_act.
func TestMoERecomputeWholeLayer(t *testing.T) {
	par := `"dp":16,"ep":8,"global_batch":32,"recompute":"selective","recompute_modules":["%s"]`
	act := run(t, moe(2, fmt.Sprintf(par, "moe_act"), ""))
	whole := run(t, moe(2, fmt.Sprintf(par, "moe"), ""))
	s1, ep1 := epTime(t, act)
	s2, ep2 := epTime(t, whole)
	assert.Greater(t, s2, s1)
	assert.Greater(t, ep2, ep1, "the dispatch and combine run again")
	activations := func(res scenario.Result) (b float64) {
		for _, r := range res.Tables[3].Rows.([]job.MemoryRow) {
			if r.Category == "activations" && r.Stage == 0 {
				b += r.Bytes
			}
		}
		return b
	}
	assert.Less(t, activations(whole), activations(act))
}

// Expert weights shard by EP: optimizer state per GPU falls as EP grows.
func TestMoEMemoryShardsByEP(t *testing.T) {
	mem := func(ep int) float64 {
		res := run(t, moe(2, fmt.Sprintf(`"dp":16,"ep":%d,"global_batch":16,"zero":1`, ep), ""))
		var w float64
		for _, r := range res.Tables[3].Rows.([]job.MemoryRow) {
			if r.Category == "weights" {
				w += r.Bytes
			}
		}
		return w
	}
	w1, w8 := mem(1), mem(8)
	// Weights: 2 layers × 8 experts × 3·4096·14336 in bf16, of which EP 8 keeps 1/8.
	experts := 2 * 8 * 3 * 4096 * 14336 * 2.0
	assert.InEpsilon(t, experts*7/8, w1-w8, 1e-6)
}

// TestRoutingDistributionFollowsItsFields: loads or a skew given without a
// distribution are used (table, zipf), not dropped for the balanced default.
func TestRoutingDistributionFollowsItsFields(t *testing.T) {
	par := `"dp":8,"ep":8,"global_batch":8`
	balanced, _ := epTime(t, run(t, moe(1, par, "")))
	for _, routing := range []string{`{"loads":[8,1,1,1,1,1,1,1]}`, `{"skew":1.5,"seed":3}`} {
		step, _ := epTime(t, run(t, moe(1, par, `,"routing":`+routing)))
		assert.Greater(t, step, balanced*1.05, "%s: a hot expert sets the pace", routing)
	}
}

func TestMoEBadSpecs(t *testing.T) {
	for _, c := range []struct{ js, field string }{
		{moe(1, `"dp":8,"ep":3`, ""), "parallel.ep"},
		{moe(2, `"dp":4,"ep":16`, ""), "parallel.ep"},
		{moe(2, `"dp":16,"ep":16`, ""), "parallel.ep"}, // 16 does not divide Mixtral's 8 experts
		{`{"kind":"training","model":{"preset":"mixtral-8x7b","layers":2,"experts_per_token":9},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1}}`, "model.experts_per_token"},
		{moe(1, `"dp":8`, `,"routing":{"distribution":"table","loads":[1,2]}`), "routing.loads"},
		// A field the named distribution does not read would be ignored.
		{moe(1, `"dp":8,"ep":8`, `,"routing":{"distribution":"uniform","loads":[8,1,1,1,1,1,1,1]}`), "routing.loads"},
		{moe(1, `"dp":8,"ep":8`, `,"routing":{"distribution":"balanced","skew":1.2}`), "routing.skew"},
		// What acts on the all-to-alls needs them.
		{moe(1, `"dp":8,"overlap_ep_comm":true`, ""), "parallel.overlap_ep_comm"},
		{moe(1, `"dp":8`, `,"dtype":"fp8","fp8_dispatch":true`), "fp8_dispatch"},
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(c.js))
		var se *spec.Error
		require.True(t, errors.As(err, &se), "%s: %v", c.js, err)
		found := false
		for _, p := range se.Problems {
			found = found || p.Path == c.field
		}
		assert.True(t, found, "%s: want %s, got %v", c.js, c.field, se.Problems)
	}
}

// gpt-oss's clamped activation costs an eager Megatron-Core step its three
// clamp kernels each way (model clampGLU); Transformer Engine's op fuser
// clamps inside the activation kernel, so the step with it is the step of
// the same model without the clamp.
func TestTEOpFuserFusesTheClamp(t *testing.T) {
	step := func(model, extra string) float64 {
		js := fmt.Sprintf(`{"kind":"training","model":%s,"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
			"parallel":{"dp":8,"ep":8,"global_batch":8},"seq_len":1024%s}`, model, extra)
		return run(t, js).Tables[0].Rows.([]training.SummaryRow)[0].StepTimeS
	}
	const gptOSS = `"family":"llama","layers":2,"hidden":2880,"heads":64,"kv_heads":8,"head_dim":64,"ffn_hidden":2880,"vocab":201088,
		"sliding_window":128,"window_pattern":"SF","experts":32,"experts_per_token":4`
	clamped, plain := `{`+gptOSS+`,"glu_limit":7}`, `{`+gptOSS+`}`
	assert.Greater(t, step(clamped, ""), step(clamped, `,"te_op_fuser":true`))
	assert.InDelta(t, step(clamped, `,"te_op_fuser":true`), step(plain, ""), 1e-12)
}
