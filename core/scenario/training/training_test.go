package training_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func run(t testing.TB, js string) scenario.Result {
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err, js)
	return res
}

func summary(t testing.TB, js string) training.SummaryRow {
	return run(t, js).Tables[0].Rows.([]training.SummaryRow)[0]
}

// small is a 4-layer GPT-22B on DGX A100 nodes.
func small(nodes int, parallel, extra string) string {
	return fmt.Sprintf(`{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":%d},"parallel":{%s},"seq_len":1024%s}`, nodes, parallel, extra)
}

func TestTablesAndBreakdown(t *testing.T) {
	res := run(t, small(2, `"tp":4,"pp":2,"dp":2,"global_batch":8,"sequence_parallel":true,"recompute":"selective"`, ""))
	names := []string{}
	for _, tb := range res.Tables {
		names = append(names, tb.Name)
	}
	require.Equal(t, []string{"summary", "ranks", "timeline", "memory"}, names)
	s := res.Tables[0].Rows.([]training.SummaryRow)[0]
	assert.InEpsilon(t, s.StepTimeS, s.ComputeS+s.ExposedCommS+s.BubbleS, 1e-9)
	assert.Greater(t, s.MFU, 0.0)
	assert.LessOrEqual(t, s.MFU, s.HFU)
	assert.True(t, s.Fits)
	ranks := res.Tables[1].Rows.([]job.RankRow)
	require.Len(t, ranks, 16)
	tl := res.Tables[2].Rows.([]job.TimelineRow)
	require.NotEmpty(t, tl)
	for _, r := range tl {
		require.LessOrEqual(t, r.StartS, r.EndS)
		require.LessOrEqual(t, r.EndS, s.StepTimeS+1e-12)
	}
}

// Mirroring symmetric replicas gives the same times as simulating every
// replica, healthy or not: a straggler and a degraded link make their
// replicas simulated on their own.
func TestMirroringMatchesFullSimulation(t *testing.T) {
	// Two TP groups share each node's NVSwitch with their DP all-reduce:
	// reduced after the backward the TP collectives are still reusable,
	// bucketed during the backward they are not.
	// The interleaved schedule over two stages links them both ways, and the
	// tied embedding joins them a third time.
	for _, variant := range []string{`"overlap_grad_reduce":true`, `"overlap_grad_reduce":false`, `"virtual_stages":2`} {
		par := `"tp":4,"pp":2,"dp":2,"global_batch":8,` + variant
		overlap := variant
		for _, faults := range []string{
			``,
			`,"faults":{"stragglers":[{"device":"n1.gpu5","slowdown":1.3}]}`,
			`,"faults":{"links":[{"src":"n0.gpu5","dst":"n0.nic5","health":0.2}]}`,
			`,"faults":{"links":[{"src":"n1.gpu2","dst":"n1.nvswitch","health":0.5}]}`,
			// failed: its traffic leaves through the fabric; the replicas
			// whose routes changed are simulated (job gives exec the
			// healthy routes), not every replica
			`,"faults":{"links":[{"src":"n1.gpu2","dst":"n1.nvswitch","health":0,"both_directions":true}]}`,
		} {
			mirrored := summary(t, small(2, par, faults))
			full := summary(t, small(2, par, faults+`,"full_simulation":true`))
			assert.InEpsilon(t, full.StepTimeS, mirrored.StepTimeS, 1e-9, overlap+faults)
			assert.Equal(t, 16, full.SimulatedRanks)
			if faults == "" {
				assert.Equal(t, 8, mirrored.SimulatedRanks, "one replica of two")
			}
		}
	}
	// A failed link reroutes its replica's traffic; job gives exec the
	// healthy routes, so the other replicas stay mirrored.
	failed := `{"kind":"training","model":{"preset":"gpt-22b","layers":2},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":4},
		"parallel":{"tp":8,"dp":4,"global_batch":8},"seq_len":2048,
		"faults":{"links":[{"src":"n3.gpu2","dst":"n3.nvswitch","health":0,"both_directions":true}]}}`
	mirrored, full := summary(t, failed), summary(t, strings.Replace(failed, `"faults"`, `"full_simulation":true,"faults"`, 1))
	assert.InEpsilon(t, full.StepTimeS, mirrored.StepTimeS, 1e-9)
	assert.Equal(t, 16, mirrored.SimulatedRanks, "the healthy representative and the failed link's replica")
	assert.Equal(t, 32, full.SimulatedRanks)
	// A straggler's context- and expert-parallel partners wait for it layer
	// by layer, as the other replicas do not: they are simulated with it.
	for _, js := range []string{
		`{"kind":"training","model":{"preset":"gpt-22b","layers":2},"gpu":"h800","cluster":{"preset":"dgx-h800","nodes":2},
			"parallel":{"tp":2,"pp":2,"dp":2,"cp":2,"micro_batch":2,"global_batch":4,"sequence_parallel":true,"recompute":"full"},
			"seq_len":4096,"faults":{"stragglers":[{"device":"n0.gpu4","slowdown":1.5}]}}`,
		`{"kind":"training","model":{"preset":"mixtral-8x7b","layers":2},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
			"parallel":{"tp":2,"dp":4,"ep":2,"global_batch":8,"sequence_parallel":true,"zero":3,"overlap_grad_reduce":true},
			"seq_len":2048,"faults":{"stragglers":[{"device":"n0.gpu5","slowdown":1.5}]}}`,
		// Two GPUs share each NIC: the expert-data-parallel groups of the
		// mirrored replicas ({1,9}, ..., {7,15}) share it with the
		// representative's {0,8}, so they are launched beside it (no
		// fault: full_simulation is added before "faults" below).
		`{"kind":"training","model":{"preset":"qwen3-30b-a3b","layers":2},"gpu":"a100-40gb","cluster":{"preset":"aws-p4d","nodes":2},
			"parallel":{"tp":1,"dp":16,"ep":8,"global_batch":16,"zero":1},"seq_len":512,"faults":{}}`,
		// A straggler behind a shared NIC: its pipeline sends change what
		// its neighbour's get on the PCIe switch and the NIC, so the
		// neighbour's replica is simulated with it.
		`{"kind":"training","model":{"preset":"llama2-7b","layers":4},"gpu":"a100-40gb","cluster":{"preset":"aws-p4d","nodes":2},
			"parallel":{"tp":1,"pp":2,"dp":8,"micro_batch":2,"global_batch":32},"seq_len":1024,
			"faults":{"stragglers":[{"device":"n0.gpu1","slowdown":1.3}]}}`,
		// Stages of 6 GPUs on 8-GPU nodes: some replicas' pipeline links
		// stay inside a node, others cross: three shapes, each simulated.
		`{"kind":"training","model":{"preset":"llama2-7b","layers":8},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":3},
			"parallel":{"tp":2,"pp":4,"dp":3,"global_batch":24},"seq_len":2048,"faults":{}}`,
		// Stages of 32 GPUs on 72-GPU racks (the GB200 Qwen3 row's layout).
		`{"kind":"training","model":{"preset":"qwen3-235b-a22b","layers":8},"gpu":"gb200","cluster":{"preset":"gb200-nvl72","nodes":4},
			"parallel":{"tp":1,"pp":8,"dp":32,"ep":8,"expert_tp":1,"global_batch":256,"zero":1,"overlap_grad_reduce":true},"seq_len":4096,"faults":{}}`,
		// A degraded GPU-NIC link slows one expert-data-parallel group's
		// gradients: NCCL's ring for it leaves node 1 through that NIC on
		// another channel than the communicator's order does.
		`{"kind":"training","model":{"preset":"qwen3-30b-a3b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":2},
			"parallel":{"tp":1,"dp":16,"ep":4,"global_batch":32,"zero":1},
			"seq_len":1024,"faults":{"links":[{"src":"n1.gpu3","dst":"n1.nic3","health":0.7}]}}`,
	} {
		mirrored := summary(t, js)
		full := summary(t, strings.Replace(js, `"faults"`, `"full_simulation":true,"faults"`, 1))
		assert.InEpsilon(t, full.StepTimeS, mirrored.StepTimeS, 1e-12, js)
	}
	par := `"tp":4,"pp":2,"dp":2,"global_batch":8`
	healthy := summary(t, small(2, par, ""))
	slow := summary(t, small(2, par, `,"faults":{"stragglers":[{"device":"n1.gpu5","slowdown":1.3}]}`))
	assert.Greater(t, slow.StepTimeS, healthy.StepTimeS)
}

// Outputs move the expected way.
func TestDirections(t *testing.T) {
	// A faster inter-node network shortens a step whose data-parallel
	// all-reduce crosses nodes.
	net := func(nic string) float64 {
		return summary(t, fmt.Sprintf(`{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
			"cluster":{"topology":"composed","nodes":2,"intra_link":"nvlink3","nic_link":%q,"host_link":"pcie5-x16"},
			"parallel":{"tp":8,"dp":2,"global_batch":2},"seq_len":1024}`, nic)).StepTimeS
	}
	assert.Less(t, net("ib-ndr"), net("ib-hdr"))

	// A bigger batch takes longer per step but not per token.
	b4 := summary(t, small(1, `"tp":8,"global_batch":4`, ""))
	b8 := summary(t, small(1, `"tp":8,"global_batch":8`, ""))
	assert.Greater(t, b8.StepTimeS, b4.StepTimeS)
	assert.GreaterOrEqual(t, b8.TokensPerS, b4.TokensPerS*0.999)

	// More pipeline stages (on more GPUs): less memory per GPU, more bubble.
	var prevMem, prevBubble float64
	for i, pp := range []int{1, 2, 4} {
		s := summary(t, small(1, fmt.Sprintf(`"tp":2,"pp":%d,"dp":1,"global_batch":8`, pp), ""))
		if i > 0 {
			assert.Less(t, s.MemoryPeakBytes, prevMem, "pp %d memory", pp)
			assert.Greater(t, s.BubbleS, prevBubble, "pp %d bubble", pp)
		}
		prevMem, prevBubble = s.MemoryPeakBytes, s.BubbleS
	}

	// Recomputation trades time for memory.
	none := summary(t, small(1, `"tp":8,"global_batch":8,"micro_batch":4`, ""))
	full := summary(t, small(1, `"tp":8,"global_batch":8,"micro_batch":4,"recompute":"full"`, ""))
	assert.Greater(t, full.StepTimeS, none.StepTimeS)
	assert.Less(t, full.MemoryPeakBytes, none.MemoryPeakBytes)
}

// FlashAttention-2's kernels slow a step on Hopper, where they forgo its
// warpgroup MMAs, and cost the same on Ampere, whose native MMA they issue;
// with context parallelism too.
func TestFlashAttention2(t *testing.T) {
	on := func(gpu, cluster, parallel, extra string) training.SummaryRow {
		return summary(t, fmt.Sprintf(`{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":%q,
			"cluster":{"preset":%q,"nodes":1},"parallel":{%s},"seq_len":4096%s}`, gpu, cluster, parallel, extra))
	}
	for _, par := range []string{`"tp":8`, `"tp":4,"cp":2`} {
		h, h2 := on("h100-sxm", "dgx-h100", par, ""), on("h100-sxm", "dgx-h100", par, `,"flash_attention_2":true`)
		assert.Greater(t, h2.StepTimeS, h.StepTimeS, par)
		assert.Equal(t, h.ModelFLOPs, h2.ModelFLOPs, par)
		a, a2 := on("a100-80gb-sxm", "dgx-a100", par, ""), on("a100-80gb-sxm", "dgx-a100", par, `,"flash_attention_2":true`)
		assert.Equal(t, a.StepTimeS, a2.StepTimeS, par)
	}
}

func TestNotFittingIsReported(t *testing.T) {
	s := summary(t, `{"kind":"training","model":"gpt3-175b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"parallel":{"tp":8,"global_batch":1},"seq_len":2048,"timeline_ranks":[-1]}`)
	assert.False(t, s.Fits)
	assert.Greater(t, s.MemoryPeakBytes, s.HBMBytes)
}

// MXFP8 (fp8_recipe mxfp8) trains on Blackwell at the FP8 rate, its
// casts a little dearer than per-tensor scaling's (each writes rowwise and
// columnwise copies with their scales, and the norm-fed inputs are cast
// rather than transposed): slower than the default recipe, faster than
// BF16. Elsewhere it is a SpecError (TestSpecErrorsNameFields).
func TestMXFP8OnBlackwell(t *testing.T) {
	b200 := func(extra string) training.SummaryRow {
		return summary(t, fmt.Sprintf(`{"kind":"training","model":{"preset":"llama3-8b","layers":4},"gpu":"b200",
			"cluster":{"preset":"dgx-b200","nodes":1},"parallel":{"dp":8,"global_batch":8},"seq_len":4096,"timeline_ranks":[-1]%s}`, extra))
	}
	bf16, delayed, mx := b200(``), b200(`,"dtype":"fp8"`), b200(`,"dtype":"fp8","fp8_recipe":"mxfp8"`)
	assert.Less(t, mx.StepTimeS, bf16.StepTimeS)
	assert.Greater(t, mx.StepTimeS, delayed.StepTimeS)
	assert.Equal(t, delayed.ModelFLOPs, mx.ModelFLOPs)
}

// FP8 attention (fp8_attention) runs the attention's matmuls at the FP8
// rate for the price of its casts: at a long sequence on Blackwell, where
// the attention is much of a step, the step is shorter; the model FLOPs
// do not change.
func TestFP8AttentionShortensLongSequences(t *testing.T) {
	b200 := func(extra string) training.SummaryRow {
		return summary(t, fmt.Sprintf(`{"kind":"training","model":{"preset":"llama3-8b","layers":4},"gpu":"b200",
			"cluster":{"preset":"dgx-b200","nodes":1},"parallel":{"dp":8,"global_batch":8},"seq_len":16384,"dtype":"fp8","fp8_recipe":"mxfp8","timeline_ranks":[-1]%s}`, extra))
	}
	bf16Attn, fp8Attn := b200(``), b200(`,"fp8_attention":true`)
	assert.Less(t, fp8Attn.StepTimeS, bf16Attn.StepTimeS)
	assert.Equal(t, bf16Attn.ModelFLOPs, fp8Attn.ModelFLOPs)
}

func TestSpecErrorsNameFields(t *testing.T) {
	for js, path := range map[string]string{
		small(1, `"tp":3`, ""):                                                                                     "parallel.tp",
		small(1, `"tp":8,"pp":2`, ""):                                                                              "parallel.dp",
		small(1, `"tp":8,"schedule":"zigzag"`, ""):                                                                 "parallel.schedule",
		small(1, `"tp":8,"global_batch":3,"dp":2`, ""):                                                             "parallel.dp",
		small(1, `"tp":8,"recompute":"selective","recompute_modules":["mlp_act"]`, ""):                             "parallel.recompute_modules",
		small(1, `"tp":8,"recompute":"full","recompute_modules":["layernorm"]`, ""):                                "parallel.recompute_modules",
		small(1, `"tp":8,"sequence_parallel":true,"expert_tp":1`, ""):                                              "parallel.expert_tp", // a dense model
		strings.Replace(small(1, `"tp":8`, `,"dtype":"fp8","fp8_recipe":"mxfp8"`), "a100-80gb-sxm", "h100-sxm", 1): "fp8_recipe",         // Blackwell's
		small(1, `"tp":4,"dp":2,"zero":1,"overlap_param_gather":true`, ""):                                         "parallel.overlap_param_gather",
		small(1, `"tp":8`, `,"cross_entropy_fusion":"liger"`):                                                      "cross_entropy_fusion",
		small(1, `"tp":8`, `,"fp8_recipe":"blockwise"`):                                                            "fp8_recipe", // bf16
		small(1, `"tp":8`, `,"moe_router_dtype":"fp64"`):                                                           "moe_router_dtype",
		small(1, `"tp":8`, `,"fp8_dispatch":true`):                                                                 "fp8_dispatch", // bf16
		small(1, `"tp":8`, `,"te_op_fuser":true`):                                                                  "te_op_fuser",  // no experts
		small(1, `"tp":8`, `,"flash_attention_2":true,"unfused_attention":true`):                                   "flash_attention_2",
		small(1, `"tp":8`, `,"fp8_attention":true`):                                                                "fp8_attention", // bf16
		small(1, `"tp":8`, `,"dtype":"fp8","fp8_attention":true,"unfused_attention":true`):                         "fp8_attention",
		small(1, `"tp":8`, `,"dtype":"fp8","fp8_output_proj":true`):                                                "fp8_output_proj", // delayed scaling
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		var se *spec.Error
		require.True(t, errors.As(err, &se), "%s: %v", js, err)
		assert.Contains(t, err.Error(), path)
	}
}

func inferenceSummary(t testing.TB, js string) inference.SummaryRow {
	return run(t, js).Tables[0].Rows.([]inference.SummaryRow)[0]
}

// FlashAttention-2 slows an H100 prefill, whose attention it runs, and
// leaves the decode steps' attention (flash-decoding's kernels) alone.
func TestInferenceFlashAttention2(t *testing.T) {
	at := func(extra string) inference.SummaryRow {
		return inferenceSummary(t, `{"kind":"inference","model":"llama2-7b","gpu":"h100-sxm",
			"cluster":{"preset":"dgx-h100","nodes":1},"tp":1,"batch":4,"prompt_tokens":4096,"output_tokens":8`+extra+`}`)
	}
	fused, fa2 := at(""), at(`,"flash_attention_2":true`)
	assert.Greater(t, fa2.TTFTS, 1.02*fused.TTFTS)
	assert.InEpsilon(t, fused.TPOTS, fa2.TPOTS, 1e-9)
}

func TestInferenceDirections(t *testing.T) {
	at := func(tp, batch, prompt int) inference.SummaryRow {
		return inferenceSummary(t, fmt.Sprintf(`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm",
			"cluster":{"preset":"dgx-a100","nodes":1},"tp":%d,"batch":%d,"prompt_tokens":%d,"output_tokens":16}`, tp, batch, prompt))
	}
	one, two := at(1, 1, 200), at(2, 1, 200)
	assert.Less(t, two.E2ES, one.E2ES)
	assert.Less(t, one.TTFTS, one.E2ES)
	assert.InEpsilon(t, one.E2ES, one.TTFTS+15*one.TPOTS, 1e-9)
	assert.Greater(t, two.LongestPromptTokens, one.LongestPromptTokens)
	long := at(1, 1, 2000)
	assert.Greater(t, long.TTFTS, one.TTFTS)
	assert.Greater(t, long.TPOTS, one.TPOTS)
	big := at(1, 8, 200)
	assert.Greater(t, big.TokensPerS, one.TokensPerS)

	// A pipeline of two stages and two replicas over four GPUs.
	pp := inferenceSummary(t, `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"pp":2,"replicas":2,"batch":2,"prompt_tokens":128,"output_tokens":8}`)
	assert.True(t, pp.Fits)
	assert.Greater(t, pp.TTFTS, 0.0)

	// A Mamba model keeps SSM state instead of a KV cache.
	res := run(t, `{"kind":"inference","model":"mamba-1.4b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"tp":2,"batch":4,"prompt_tokens":256,"output_tokens":8}`)
	for _, r := range res.Tables[3].Rows.([]job.MemoryRow) {
		switch r.Category {
		case "kv_cache":
			assert.Zero(t, r.Bytes)
		case "ssm_state":
			assert.Greater(t, r.Bytes, 0.0)
		}
	}
}

// Every layout feature runs to the end with consistent tables.
func TestFeatureMatrix(t *testing.T) {
	for _, par := range []string{
		`"tp":2,"pp":2,"dp":2,"global_batch":8,"schedule":"gpipe"`,
		`"tp":2,"pp":2,"dp":2,"global_batch":8,"virtual_stages":2,"sequence_parallel":true`,
		`"tp":2,"pp":2,"dp":2,"global_batch":8,"zero":1,"overlap_grad_reduce":true,"bucket_params":1000000`,
		`"tp":2,"pp":2,"dp":2,"global_batch":8,"zero":2,"recompute":"full"`,
		`"tp":2,"pp":2,"dp":2,"global_batch":8,"zero":3,"recompute":"selective","sequence_parallel":true`,
		`"tp":4,"pp":1,"dp":2,"global_batch":4,"micro_batch":2,"overlap_tp_comm":true`,
		`"tp":4,"pp":2,"dp":1,"global_batch":4,"sequence_parallel":true,"tp_comm_overlap":true,"recompute":"full"`,
		`"tp":1,"pp":4,"dp":2,"global_batch":8`,
	} {
		for _, model := range []string{`{"preset":"gpt-22b","layers":4}`, `{"preset":"zamba-7b","layers":8,"pattern":"MMSMMMSMMM"}`, `{"preset":"mamba2-2.7b","layers":4}`} {
			js := fmt.Sprintf(`{"kind":"training","model":%s,"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
				"parallel":{%s},"seq_len":512,"timeline_ranks":[0]}`, model, par)
			res := run(t, js)
			s := res.Tables[0].Rows.([]training.SummaryRow)[0]
			require.Greater(t, s.StepTimeS, 0.0, js)
			require.Less(t, s.HFU, 1.0, js)
			var compute float64
			for _, r := range res.Tables[2].Rows.([]job.TimelineRow) {
				require.LessOrEqual(t, r.EndS, s.StepTimeS+1e-12, js)
				if r.Stream == "compute" {
					compute += r.EndS - r.StartS
				}
			}
			rank0 := res.Tables[1].Rows.([]job.RankRow)[0]
			assert.InEpsilon(t, rank0.ComputeS, compute, 1e-6, js)
		}
	}
}

// Overlapping communication with computation never slows a step.
func TestOverlapHelps(t *testing.T) {
	base := `"tp":4,"pp":1,"dp":2,"global_batch":8,"micro_batch":2`
	plain := summary(t, small(1, base+`,"overlap_tp_comm":false`, ""))
	tpOverlap := summary(t, small(1, base, "")) // on by default, as Megatron-LM runs
	dpOverlap := summary(t, small(1, base+`,"overlap_tp_comm":false,"overlap_grad_reduce":true,"bucket_params":10000000`, ""))
	assert.Less(t, tpOverlap.StepTimeS, plain.StepTimeS)
	assert.Less(t, dpOverlap.StepTimeS, plain.StepTimeS)
	assert.Less(t, tpOverlap.ExposedCommS, plain.ExposedCommS)
	zero1 := base + `,"zero":1,"overlap_grad_reduce":true,"bucket_params":10000000`
	gatherAfter := summary(t, small(1, zero1, ""))
	gatherUnder := summary(t, small(1, zero1+`,"overlap_param_gather":true`, ""))
	assert.Less(t, gatherUnder.StepTimeS, gatherAfter.StepTimeS)
	assert.Less(t, gatherUnder.ExposedCommS, gatherAfter.ExposedCommS)
}

// ring_steps runs the rings step by step: the same step within 1% as the
// default ring streams, for data-parallel ZeRO-1 and ZeRO-3 layouts across
// nodes (inference alike, its tensor-parallel rings inside a node).
func TestRingStepsAgreeWithStreams(t *testing.T) {
	for _, par := range []string{`"tp":2,"pp":2,"zero":1,"global_batch":16`, `"tp":4,"pp":1,"zero":3,"global_batch":16`} {
		streams := summary(t, small(4, par, ""))
		steps := summary(t, small(4, par, `,"ring_steps":true`))
		assert.InEpsilon(t, steps.StepTimeS, streams.StepTimeS, 0.01, par)
	}
	inf := `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"tp":4,"requests":[{"count":2,"prompt_tokens":256,"output_tokens":16}]%s}`
	get := func(extra string) float64 {
		return run(t, fmt.Sprintf(inf, extra)).Tables[0].Rows.([]inference.SummaryRow)[0].E2ES
	}
	assert.InEpsilon(t, get(`,"ring_steps":true`), get(""), 0.01)
}

// The execution mode is in the spec: eager (the default) issues every
// kernel from the host, cuda_graphs replays them; a small-kernel step
// (micro-batch 1, TP 8, short sequences) is host-bound in eager and faster
// with graphs; larger host costs lengthen it; a bad mode is a SpecError.
func TestExecutionMode(t *testing.T) {
	par := `"tp":8,"global_batch":2,"micro_batch":1`
	tiny := func(extra string) string {
		return fmt.Sprintf(`{"kind":"training","model":{"preset":"llama2-7b","layers":4},"gpu":"a100-80gb-sxm",
			"cluster":{"preset":"dgx-a100","nodes":1},"parallel":{%s},"seq_len":128%s}`, par, extra)
	}
	eager := summary(t, tiny(""))
	explicit := summary(t, tiny(`,"execution":"eager"`))
	graphs := summary(t, tiny(`,"execution":"cuda_graphs"`))
	slowHost := summary(t, tiny(`,"host":{"forward_op_s":50e-6,"backward_op_s":50e-6}`))
	assert.Equal(t, eager.StepTimeS, explicit.StepTimeS)
	assert.Less(t, graphs.StepTimeS, eager.StepTimeS)
	assert.Greater(t, slowHost.StepTimeS, eager.StepTimeS)
	// The device's own work does not change with the mode, but for how
	// its kernels meet the collectives overlapping them (interference):
	// with the tensor-parallel all-reduces not overlapped, not at all.
	par = `"tp":8,"global_batch":2,"micro_batch":1,"overlap_tp_comm":false`
	assert.InEpsilon(t, summary(t, tiny("")).ComputeS, summary(t, tiny(`,"host":{"forward_op_s":50e-6,"backward_op_s":50e-6}`)).ComputeS, 1e-9)
	par = `"tp":8,"global_batch":2,"micro_batch":1`

	for js, path := range map[string]string{
		tiny(`,"execution":"lazy"`):         "execution",
		tiny(`,"host":{"collective_s":-1}`): "host.collective_s",
		// Graphs replay every task: a host cost would be ignored.
		tiny(`,"execution":"cuda_graphs","host":{"forward_op_s":50e-6}`): `host.forward_op_s: applies to execution "eager"`,
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		var se *spec.Error
		require.True(t, errors.As(err, &se), "%s: %v", js, err)
		assert.Contains(t, err.Error(), path)
	}
}

// Efficiency moves the right way with the host model on: a bigger
// micro-batch raises MFU (longer kernels amortize the host's issue and
// the fixed costs); higher TP on a small model lowers it (smaller kernels,
// more collectives per FLOP); a faster network shortens the step
// (TestDirections).
func TestEfficiencyDirections(t *testing.T) {
	seven := func(par string) training.SummaryRow {
		return summary(t, fmt.Sprintf(`{"kind":"training","model":{"preset":"llama2-7b","layers":4},"gpu":"a100-80gb-sxm",
			"cluster":{"preset":"dgx-a100","nodes":1},"parallel":{%s},"seq_len":1024,"timeline_ranks":[-1]}`, par))
	}
	var prev float64
	for i, mb := range []int{1, 2, 4} {
		s := seven(fmt.Sprintf(`"tp":8,"global_batch":8,"micro_batch":%d`, mb))
		if i > 0 {
			assert.Greater(t, s.MFU, prev, "micro-batch %d", mb)
		}
		prev = s.MFU
	}
	// One tensor-parallel group of tp GPUs in an NVSwitch node, no data
	// parallelism: the same work split tp ways.
	for i, tp := range []int{1, 2, 4, 8} {
		s := summary(t, fmt.Sprintf(`{"kind":"training","model":{"preset":"llama2-7b","layers":4},"gpu":"a100-80gb-sxm",
			"cluster":{"topology":"composed","nodes":1,"gpus_per_node":%d,"intra_link":"nvlink3","nic_link":"ib-hdr","host_link":"pcie4-x16"},
			"parallel":{"tp":%d,"global_batch":8,"micro_batch":1},"seq_len":1024,"timeline_ranks":[-1]}`, tp, tp))
		if i > 0 {
			assert.Less(t, s.MFU, prev, "tp %d", tp)
		}
		prev = s.MFU
	}
}

// Inference decodes from CUDA graphs by default; eager decode of a batch-1
// LLaMA-2-7B at TP 8 is host-bound (its ~450 kernels per token are shorter
// than their issue), so its TPOT is longer, and it keeps falling less with
// TP. The prefill is eager in both: the same TTFT with the same
// all-reduce. The engines' custom all-reduce (the default with graphs)
// shortens the decode's small all-reduces.
func TestInferenceExecutionMode(t *testing.T) {
	at := func(tp int, mode string) inference.SummaryRow {
		return inferenceSummary(t, fmt.Sprintf(`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm",
			"cluster":{"preset":"dgx-a100","nodes":1},"tp":%d,"batch":1,"prompt_tokens":200,"output_tokens":8%s}`, tp, mode))
	}
	def, graphs, eager := at(8, ""), at(8, `,"execution":"cuda_graphs"`), at(8, `,"execution":"eager"`)
	assert.Equal(t, def.E2ES, graphs.E2ES)
	assert.Less(t, graphs.TPOTS, eager.TPOTS)
	assert.Equal(t, graphs.TTFTS, at(8, `,"execution":"eager","custom_all_reduce":true`).TTFTS)
	assert.Less(t, graphs.TPOTS, at(8, `,"custom_all_reduce":false`).TPOTS)
	// Eager: 32 layers × (12 operators + 2 all-reduces) × 8.5 µs ≈ 3.8 ms
	// of host per token bound the TPOT from below.
	assert.Greater(t, eager.TPOTS, 32*14*8.5e-6)
	one := at(1, `,"execution":"eager"`)
	oneG := at(1, "")
	assert.Greater(t, one.TPOTS/eager.TPOTS, 1.0)
	assert.Less(t, one.TPOTS/eager.TPOTS, oneG.TPOTS/graphs.TPOTS, "graphs scale better with TP")

	// Fused add-norms (vLLM's fused_add_rms_norm) shorten both phases:
	// one vectorized kernel where the scalar norm and the add ran.
	fused := at(8, `,"fused_add_norm":true`)
	assert.Less(t, fused.TTFTS, graphs.TTFTS)
	assert.Less(t, fused.TPOTS, graphs.TPOTS)

	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm",
			"cluster":{"preset":"dgx-a100","nodes":1},"execution":"graphs"}`))
	var se *spec.Error
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Contains(t, err.Error(), "execution")
}

// A large vocabulary's LM head weighs on the last pipeline stage: giving
// that stage fewer layers (Megatron-Core's uneven split) shortens the step
// of Llama-3-8B (a 128K vocabulary) on four stages, and the split reaches
// the spec as decoder_first/last_pipeline_num_layers, a bad one as a
// SpecError naming the field.
func TestUnevenPipelineSplitShortensTheLastStage(t *testing.T) {
	step := func(split string) training.SummaryRow {
		return summary(t, fmt.Sprintf(`{"kind":"training","model":"llama3-8b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
			"parallel":{"tp":2,"pp":4,"global_batch":16%s},"seq_len":4096,"dtype":"bf16"}`, split))
	}
	even, uneven := step(""), step(`,"decoder_first_pipeline_num_layers":9,"decoder_last_pipeline_num_layers":5`)
	require.Less(t, uneven.StepTimeS, even.StepTimeS)
	require.Less(t, uneven.BubbleS, even.BubbleS)
	// The same split written as a pipeline layout times the same step;
	// two chunks a stage set virtual_stages (and the interleaved schedule).
	require.Equal(t, uneven, step(`,"pipeline_model_parallel_layout":"Et*9|t*9|t*9|t*5L"`))
	require.Equal(t, uneven, step(`,"virtual_stages":1,"pipeline_model_parallel_layout":"E,t*9|(t*9|)*2,t*5,L"`))
	interleaved := step(`,"pipeline_model_parallel_layout":"Et*5|(t*4|)*2t*3|t*4|(t*5|)*2t*2L"`)
	require.Less(t, interleaved.BubbleS, uneven.BubbleS)

	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"training","model":"llama3-8b","gpu":"h100-sxm",
		"cluster":{"preset":"dgx-h100","nodes":1},"parallel":{"tp":2,"pp":4,"decoder_last_pipeline_num_layers":7},"seq_len":4096}`))
	var pe *problem.Error
	require.ErrorAs(t, err, &pe)
	require.Contains(t, err.Error(), "parallel.decoder_last_pipeline_num_layers")
	_, _, err = all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"training","model":"llama3-8b","gpu":"h100-sxm",
		"cluster":{"preset":"dgx-h100","nodes":1},"parallel":{"tp":2,"pp":4,"pipeline_model_parallel_layout":"Et*9|t*9|t*9|t*4L"},"seq_len":4096}`))
	require.ErrorAs(t, err, &pe)
	require.Contains(t, err.Error(), "parallel.pipeline_model_parallel_layout")
	require.Contains(t, err.Error(), "31 transformer layers")
}

// Context parallelism on a long sequence: splitting each sequence over cp
// ranks keeps the step's tokens and model FLOPs, shrinks the activations
// each GPU holds, and runs the ring attention's exchange on its own stream
// ("cp" in the timeline) under the attention. Bad layouts name the field.
func TestContextParallelStep(t *testing.T) {
	step := func(nodes int, par string) scenario.Result {
		return run(t, fmt.Sprintf(`{"kind":"training","model":{"preset":"llama3-8b","layers":4},"gpu":"h100-sxm",
			"cluster":{"preset":"dgx-h100","nodes":%d},"parallel":{%s,"global_batch":8,"sequence_parallel":true},
			"seq_len":32768,"dtype":"bf16","timeline_ranks":[0]}`, nodes, par))
	}
	sum := func(r scenario.Result) training.SummaryRow { return r.Tables[0].Rows.([]training.SummaryRow)[0] }
	plain, cp := step(1, `"tp":4,"dp":2`), step(1, `"tp":4,"cp":2,"dp":1`)
	sp, sc := sum(plain), sum(cp)
	require.InEpsilon(t, sp.TokensPerS*sp.StepTimeS, sc.TokensPerS*sc.StepTimeS, 1e-9)
	require.InEpsilon(t, sp.ModelFLOPs, sc.ModelFLOPs, 1e-3)
	require.Less(t, sc.MemoryPeakBytes, sp.MemoryPeakBytes)
	busy := map[string]float64{}
	for _, r := range cp.Tables[2].Rows.([]job.TimelineRow) {
		if r.Rank == 0 {
			busy[r.Stream] += r.EndS - r.StartS
		}
	}
	require.Positive(t, busy["cp"], "the exchange runs on the cp stream")
	require.Less(t, sc.StepTimeS, busy["compute"]+busy["tp"]+busy["dp"]+busy["cp"], "the exchange runs under the attention")
	require.Less(t, sc.ExposedCommS, busy["tp"]+busy["dp"]+busy["cp"])
	// The context-parallel ranks are replicas of one another's program:
	// mirrored, they time the step as simulating every one does.
	mirrored := `{"kind":"training","model":{"preset":"llama3-8b","layers":4},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":2},
		"parallel":{"tp":2,"cp":2,"pp":2,"global_batch":16,"sequence_parallel":true},"seq_len":16384,"dtype":"bf16"%s}`
	require.Equal(t, summary(t, fmt.Sprintf(mirrored, "")).StepTimeS, summary(t, fmt.Sprintf(mirrored, `,"full_simulation":true`)).StepTimeS)

	// Ulysses' all-to-all (cp_comm_type a2a) and the gathered keys and
	// values (all_gather) come before the attention: each forward
	// attention starts after its exchange ends.
	for comm, exchange := range map[string]string{"a2a": "attn.cp.qkv_all_to_all", "all_gather": "attn.cp.kv_all_gather"} {
		res := step(1, `"tp":4,"cp":2,"dp":1,"cp_comm_type":"`+comm+`"`)
		var exchanged, attended []float64
		for _, r := range res.Tables[2].Rows.([]job.TimelineRow) {
			switch {
			case r.Rank == 0 && strings.HasSuffix(r.Name, exchange) && strings.Contains(r.Name, "fwd."):
				exchanged = append(exchanged, r.EndS)
			case r.Rank == 0 && strings.Contains(r.Name, "fwd.attn.flash"):
				attended = append(attended, r.StartS)
			}
		}
		require.NotEmpty(t, exchanged, comm)
		require.Equal(t, len(exchanged), len(attended), comm)
		for i := range exchanged {
			require.GreaterOrEqual(t, attended[i], exchanged[i], comm)
		}
	}

	for _, tc := range []struct {
		nodes           int
		par, seq, field string
	}{
		{1, `"tp":4,"cp":2`, "32769", "parallel.cp"},
		{1, `"tp":4,"cp":4,"dp":2`, "32768", "parallel.dp"},
		{2, `"tp":4,"cp":4,"cp_comm_type":"a2a"`, "32768", "parallel.cp_comm_type"}, // 2 key/value heads a rank
		{1, `"tp":2,"cp":4,"cp_comm_type":"ring"`, "32768", "parallel.cp_comm_type"},
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(fmt.Sprintf(`{"kind":"training","model":"llama3-8b","gpu":"h100-sxm",
			"cluster":{"preset":"dgx-h100","nodes":%d},"parallel":{%s},"seq_len":%s}`, tc.nodes, tc.par, tc.seq)))
		var pe *problem.Error
		require.ErrorAs(t, err, &pe, tc.par)
		require.Contains(t, err.Error(), tc.field)
	}
}

// Virtual stages need stages to pass chunks between: with pp 1 they are a
// SpecError naming virtual_stages (the simulation failed with an internal
// "slot has no group" error before), from the field or from a layout.
func TestVirtualStagesNeedStages(t *testing.T) {
	for _, par := range []string{`"virtual_stages":2`, `"pipeline_model_parallel_layout":"Et*2|t*2L"`} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"training","model":{"preset":"llama3-8b","layers":4},"gpu":"h100-sxm",
			"cluster":{"preset":"dgx-h100","nodes":1},"parallel":{"tp":2,"pp":1,`+par+`,"global_batch":8},"seq_len":1024}`))
		var pe *problem.Error
		require.ErrorAs(t, err, &pe, par)
		require.Contains(t, err.Error(), "parallel.virtual_stages", par)
	}
}

// A kernel the host issues after its stream is free runs from its issue,
// so a collective in flight before then does not slow it: its span stays
// inside its interval, the rank's compute spans never overlap, and the
// step is its compute, exposed communication and bubble, whatever
// overlaps (TE's comm-GEMM overlap, bucketed gradients, context
// parallelism, overlapped all-to-alls, stragglers) and in either execution.
func TestComputeSpansNeverOverlapUnderInterference(t *testing.T) {
	h100 := func(nodes int, model, parallel, extra string) string {
		return fmt.Sprintf(`{"kind":"training","model":{"preset":%q,"layers":4},"gpu":"h100-sxm",
			"cluster":{"preset":"dgx-h100","nodes":%d},"parallel":{%s},"seq_len":512,"timeline_ranks":[0]%s}`, model, nodes, parallel, extra)
	}
	for _, js := range []string{
		h100(1, "gpt-1.7b", `"tp":8,"global_batch":2,"micro_batch":2,"sequence_parallel":true,"tp_comm_overlap":true,"recompute":"full"`, ``),
		h100(2, "gpt-1.7b", `"tp":2,"dp":8,"global_batch":32,"sequence_parallel":true,"tp_comm_overlap":true,"overlap_grad_reduce":true`, `,"dtype":"fp8"`),
		h100(2, "gpt-22b", `"pp":2,"dp":4,"cp":2,"global_batch":32,"micro_batch":2,"virtual_stages":2,"zero":1,"overlap_grad_reduce":true,"overlap_param_gather":true`, ``),
		h100(1, "mixtral-8x7b", `"dp":4,"cp":2,"ep":4,"global_batch":16,"overlap_ep_comm":true,"zero":3,"overlap_grad_reduce":true`, `,"execution":"cuda_graphs"`),
		h100(1, "llama2-7b", `"tp":4,"dp":2,"global_batch":8,"sequence_parallel":true,"tp_comm_overlap":true`,
			`,"faults":{"stragglers":[{"device":"n0.gpu0","slowdown":1.3}]}`),
	} {
		res := run(t, js)
		s := res.Tables[0].Rows.([]training.SummaryRow)[0]
		require.InEpsilon(t, s.StepTimeS, s.ComputeS+s.ExposedCommS+s.BubbleS, 1e-9, js)
		var last float64
		for _, r := range res.Tables[2].Rows.([]job.TimelineRow) {
			if r.Stream != "compute" {
				continue
			}
			require.GreaterOrEqual(t, r.StartS, last-1e-12, "%s: %s starts before the compute before it ends\n%s", r.Name, js)
			require.LessOrEqual(t, r.EndS, s.StepTimeS+1e-12, js)
			last = r.EndS
		}
	}
}

// GPT-2's vocabulary of 50,257 columns is no multiple of 8: Megatron-LM
// pads it to a multiple of 128·TP (--make-vocab-size-divisible-by 128) and
// so does the training kind by default, and the padded step is the faster
// one (nanoGPT pads to 50,304 for the same reason); make_vocab_size_divisible_by
// 1 leaves the rows unaligned.
func TestVocabularyPaddedAsMegatron(t *testing.T) {
	step := func(extra string) training.SummaryRow {
		return summary(t, `{"kind":"training","model":{"family":"gpt","layers":2,"hidden":768,"heads":12,"ffn_hidden":3072,"vocab":50257,"positions":1024},
			"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"parallel":{"tp":1,"pp":1,"dp":1,"micro_batch":8,"global_batch":8},"seq_len":1024`+extra+`}`)
	}
	padded, unpadded := step(""), step(`,"make_vocab_size_divisible_by":1`)
	require.Less(t, padded.StepTimeS, unpadded.StepTimeS)
	require.Equal(t, int64(50304), model.VocabShard(50257, 1, 128))
	require.Equal(t, int64(6400), model.VocabShard(50257, 8, 128)) // 51,200 over 8
	require.Equal(t, int64(6283), model.VocabShard(50257, 8, 0))
}
