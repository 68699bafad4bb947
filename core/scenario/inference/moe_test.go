package inference_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/net"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
)

// Wide EP: a 4-layer DeepSeek-V3 (3 dense + 1 MoE, MLA) served by 16
// single-GPU replicas on two DGX H800 nodes. EP 16 shards the 256 experts
// (16 per GPU) and adds the dispatch/combine all-to-alls to every decode
// step; the MLA cache is (512+64)·2 bytes per token and layer.
func TestInferenceWideEP(t *testing.T) {
	run := func(ep int) inference.SummaryRow {
		js := fmt.Sprintf(`{"kind":"inference","model":{"preset":"deepseek-v3","layers":4},"gpu":"h800",
			"cluster":{"preset":"dgx-h800","nodes":2},"replicas":16,"ep":%d,"batch":32,"prompt_tokens":256,"output_tokens":8,"dtype":"fp8"}`, ep)
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		require.NoError(t, err)
		return res.Tables[0].Rows.([]inference.SummaryRow)[0]
	}
	one, wide := run(1), run(16)
	t.Logf("TPOT ep1 %.4g s, ep16 %.4g s; memory %.3g vs %.3g GB", one.TPOTS, wide.TPOTS, one.MemoryPeakBytes/1e9, wide.MemoryPeakBytes/1e9)
	assert.Less(t, wide.MemoryPeakBytes, one.MemoryPeakBytes, "experts are sharded")
	assert.Greater(t, wide.TPOTS, 0.0)
	// Expert weights: 1 MoE layer × 256 experts × 3·7168·2048, kept in
	// 8 bits (an FP8 run's weights are FP8, as vLLM serves DeepSeek-V3's
	// checkpoint); EP 16 keeps 1/16 of them. The largest operator's
	// workspace differs a little.
	experts := 256 * 3 * 7168 * 2048 * 1.0
	assert.InEpsilon(t, experts*15/16, one.MemoryPeakBytes-wide.MemoryPeakBytes, 0.05)
}

// Expert parallelism inside a replica (enable_expert_parallel, vLLM's
// --enable-expert-parallel): Mixtral on eight H100s holds one whole expert
// per GPU instead of an eighth of each, the same weights in all. A single
// decoding token then reads its two experts whole on two GPUs, and the
// others wait for them: slower than reading an eighth of both everywhere,
// by about the six eighths of two experts more that the busiest GPU reads.
// Bad combinations name their field.
func TestInferenceExpertsInsideTP(t *testing.T) {
	run := func(model string, tp, replicas, ep int, whole bool) (inference.SummaryRow, error) {
		js := fmt.Sprintf(`{"kind":"inference","model":%s,"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":2},
			"tp":%d,"replicas":%d,"ep":%d,"enable_expert_parallel":%t,"batch":1,"prompt_tokens":128,"output_tokens":32}`, model, tp, replicas, ep, whole)
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		if err != nil {
			return inference.SummaryRow{}, err
		}
		return res.Tables[0].Rows.([]inference.SummaryRow)[0], nil
	}
	const mixtral = `{"preset":"mixtral-8x7b","layers":4}`
	split, err := run(mixtral, 8, 1, 1, false)
	require.NoError(t, err)
	whole, err := run(mixtral, 8, 1, 1, true)
	require.NoError(t, err)
	assert.InEpsilon(t, split.MemoryPeakBytes, whole.MemoryPeakBytes, 0.01)
	// Per MoE layer the busiest GPU reads one whole expert (3·4096·14336
	// bf16 weights) where every GPU read two eighths.
	expert := 3 * 4096 * 14336 * 2.0
	extra := 4 * (expert - expert*2/8) / 3.35e12 // 4 layers at the H100's HBM bandwidth
	assert.Greater(t, whole.TPOTS-split.TPOTS, 0.8*extra, "split %.4g s, whole %.4g s", split.TPOTS, whole.TPOTS)
	assert.Less(t, whole.TPOTS-split.TPOTS, 1.6*extra, "split %.4g s, whole %.4g s", split.TPOTS, whole.TPOTS)

	for _, c := range []struct {
		model            string
		tp, replicas, ep int
		field, says      string
	}{
		{mixtral, 6, 1, 1, "tp", "must divide the experts (8)"},
		{mixtral, 4, 2, 2, "enable_expert_parallel", "use one of the two"},
		{`"llama3-8b"`, 8, 1, 1, "enable_expert_parallel", "mixture-of-experts"},
	} {
		_, err := run(c.model, c.tp, c.replicas, c.ep, true)
		require.ErrorContains(t, err, c.field, c.model)
		require.ErrorContains(t, err, c.says, c.model)
	}
}

// Two-batch overlap (SGLang's --enable-two-batch-overlap, DeepSeek's
// inference system): a wide-EP prefill split into two micro-batches whose
// layers interleave, so one's dispatch or combine crosses the network
// while the other computes. It does the same work (the same FLOPs) in less
// time, but no less than either stream alone is busy (the compute stream
// runs every kernel, the expert-parallel stream every all-to-all, each in
// order); one sequence per replica cannot split and runs as before.
func TestInferenceTwoBatchOverlap(t *testing.T) {
	run := func(batch int, tbo bool) (inference.SummaryRow, scenario.Result) {
		js := fmt.Sprintf(`{"kind":"inference","model":{"preset":"deepseek-v3","layers":6},"gpu":"h800",
			"cluster":{"preset":"dgx-h800","nodes":2},"replicas":16,"ep":16,"hierarchical_a2a":true,"two_batch_overlap":%t,
			"batch":%d,"prompt_tokens":1024,"output_tokens":1,"dtype":"fp8","timeline_ranks":[0]}`, tbo, batch)
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		require.NoError(t, err)
		return res.Tables[0].Rows.([]inference.SummaryRow)[0], res
	}
	busy := func(res scenario.Result) (compute, ep, flops float64) {
		for _, tb := range res.Tables {
			if tb.Name != "timeline" {
				continue
			}
			for _, r := range tb.Rows.([]job.TimelineRow) {
				switch r.Stream {
				case "compute":
					compute += r.EndS - r.StartS
					flops += r.FLOPs
				case "ep":
					ep += r.EndS - r.StartS
				}
			}
		}
		return compute, ep, flops
	}
	plain, plainRes := run(8, false)
	tbo, tboRes := run(8, true)
	c0, e0, f0 := busy(plainRes)
	c1, e1, f1 := busy(tboRes)
	t.Logf("TTFT %.4g s alone, %.4g s overlapped; compute %.4g / %.4g s, all-to-all %.4g / %.4g s", plain.TTFTS, tbo.TTFTS, c0, c1, e0, e1)
	require.Positive(t, e0, "the prefill exchanges tokens")
	assert.InEpsilon(t, f0, f1, 1e-9, "the same work")
	assert.Less(t, tbo.TTFTS, plain.TTFTS)
	assert.GreaterOrEqual(t, tbo.TTFTS, max(c1, e1)*(1-1e-9))
	// Alone, the streams take turns: the prefill is at least their sum.
	assert.GreaterOrEqual(t, plain.TTFTS, (c0+e0)*(1-1e-9))

	// One micro-batch's activations at a time: less memory, the same
	// weights and cache (SGLang fits twice the prefill tokens with it).
	assert.Less(t, tbo.MemoryPeakBytes, plain.MemoryPeakBytes)
	assert.Greater(t, tbo.LongestPromptTokens, plain.LongestPromptTokens)

	one, _ := run(1, false)
	oneTBO, _ := run(1, true)
	assert.Equal(t, one.TTFTS, oneTBO.TTFTS, "one sequence runs whole")
	assert.Equal(t, one.MemoryPeakBytes, oneTBO.MemoryPeakBytes)

	for _, bad := range []string{
		`"model":"llama3-8b","gpu":"h800","cluster":{"preset":"dgx-h800","nodes":1},"replicas":8,"two_batch_overlap":true`,
		`"model":{"preset":"deepseek-v3","layers":4},"gpu":"h800","cluster":{"preset":"dgx-h800","nodes":1},"replicas":8,"two_batch_overlap":true`,
		`"model":{"preset":"deepseek-v3","layers":4},"gpu":"h800","cluster":{"preset":"dgx-h800","nodes":2},"pp":2,"replicas":8,"ep":8,"two_batch_overlap":true`,
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"inference",`+bad+`}`))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "two_batch_overlap")
	}
	// So with the all-to-all kernels' choice: nothing to send without wide EP.
	for _, field := range []string{"hierarchical_a2a", "low_latency_a2a"} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"inference","model":"llama3-8b","gpu":"h800",
			"cluster":{"preset":"dgx-h800","nodes":1},"replicas":8,"`+field+`":true}`))
		require.ErrorContains(t, err, field+": acts on the expert-parallel all-to-alls")
	}
	// ep counts replicas; experts over one replica's TP ranks are another switch.
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"inference","model":{"preset":"mixtral-8x7b","layers":2},
		"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"tp":2,"ep":2}`))
	require.ErrorContains(t, err, "ep: must be >= 1 and divide replicas (1), got 2: ep replicas share their experts; experts spread over one replica's TP ranks are enable_expert_parallel")
}

// Redundant experts (EPLB): 256 + 32 slots over 72 GPUs is 4 a GPU, where
// 256 alone does not divide; each GPU holds its four slots' weights, and
// the balanced routing spreads a token's 8 slots over all 288. Over EP 16
// the 32 extra slots add two experts' weights a GPU, each layer's 2 more
// GEMMs of fewer tokens.
func TestInferenceRedundantExperts(t *testing.T) {
	run := func(nodes, ep, redundant int) (inference.SummaryRow, error) {
		js := fmt.Sprintf(`{"kind":"inference","model":{"preset":"deepseek-v3","layers":4},"gpu":"h800",
			"cluster":{"preset":"dgx-h800","nodes":%d},"replicas":%d,"ep":%d,"redundant_experts":%d,
			"batch":16,"prompt_tokens":256,"output_tokens":4,"dtype":"fp8"}`, nodes, ep, ep, redundant)
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		if err != nil {
			return inference.SummaryRow{}, err
		}
		return res.Tables[0].Rows.([]inference.SummaryRow)[0], nil
	}
	_, err := run(9, 72, 0)
	require.ErrorContains(t, err, "ep")
	wide, err := run(9, 72, 32)
	require.NoError(t, err)
	assert.Positive(t, wide.TPOTS)

	plain, err := run(2, 16, 0)
	require.NoError(t, err)
	more, err := run(2, 16, 32)
	require.NoError(t, err)
	expert := 3 * 7168 * 2048 * 1.0 // one expert of one MoE layer, FP8 weights
	assert.InEpsilon(t, 2*expert, more.MemoryPeakBytes-plain.MemoryPeakBytes, 0.05)

	for _, c := range []struct{ nodes, ep, redundant int }{{2, 16, -1}, {2, 16, 300}, {2, 1, 16}} {
		_, err := run(c.nodes, c.ep, c.redundant)
		require.ErrorContains(t, err, "redundant_experts", "%+v", c)
	}
	_, err = run(2, 16, 8)
	require.ErrorContains(t, err, "must divide the experts plus redundant_experts")
}

// DeepEP's low-latency kernels (low_latency_a2a): the same direct
// all-to-alls, each dispatch and combine taking the kernels' fixed time
// more. Without the overlap every one is on the decode step's path, so a
// step of L MoE layers grows by exactly L·(dispatch + combine) fixed
// times; with hierarchical_a2a, or without expert parallelism, it is an
// error naming the field.
func TestInferenceLowLatencyAllToAll(t *testing.T) {
	const layers = 5 // DeepSeek-V3's first 3 are dense: 2 MoE layers
	run := func(extra string) (inference.SummaryRow, error) {
		js := fmt.Sprintf(`{"kind":"inference","model":{"preset":"deepseek-v3","layers":%d},"gpu":"h800",
			"cluster":{"preset":"dgx-h800","nodes":2},"replicas":16,"ep":16,"batch":8,"prompt_tokens":128,"output_tokens":3,"dtype":"fp8"%s}`, layers, extra)
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		if err != nil {
			return inference.SummaryRow{}, err
		}
		return res.Tables[0].Rows.([]inference.SummaryRow)[0], nil
	}
	plain, err := run("")
	require.NoError(t, err)
	ll, err := run(`,"low_latency_a2a":true`)
	require.NoError(t, err)
	moe := float64(layers - 3)
	assert.InDelta(t, plain.TPOTS+moe*(net.DeepEPLowLatencyDispatchS+net.DeepEPLowLatencyCombineS), ll.TPOTS, 1e-7)
	for _, bad := range []string{`,"low_latency_a2a":true,"hierarchical_a2a":true`, `,"low_latency_a2a":true,"ep":1`} {
		_, err := run(bad)
		require.ErrorContains(t, err, "low_latency_a2a", bad)
	}
}
