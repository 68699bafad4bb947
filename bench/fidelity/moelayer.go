package fidelity

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario/operators"
)

// moeLayerSrc is Megatron-LM's own MoE-layer performance test: one
// MoELayer (router, token dispatcher, Transformer Engine grouped-GEMM
// experts) built on 8 H100s with EP 8 and TP 1, fed
// 4,096 tokens a rank (sequence 4,096, micro-batch 1), forced load
// balancing, permute and router fusion, the router in FP32 (test_cases.py:
// MoEModelConfig's moe_router_dtype "fp32"); forward and backward timed with
// CUDA events around layer(input) and output.backward(grad), the mean of
// 20 iterations after 5 warm-up ones, each after a long GEMM that hides
// the host's launch of the router. Baselines recorded on H100 when the
// test was added (NVIDIA/Megatron-LM commit cf39a4d, December 2025).
const moeLayerSrc = "NVIDIA/Megatron-LM tests/functional_tests/test_cases/common/moe_perf (baseline.json at cf39a4d: one MoELayer on 8 H100, EP8 TP1, 4,096 tokens a rank, forced balance, alltoall dispatcher)"

// moeLayerCase is one of the test's model proxies and its measured times.
type moeLayerCase struct {
	name, model  string // label; the spec's model object
	fp8          bool   // Transformer Engine's block-wise FP8 recipe (else BF16)
	fwdMs, bwdMs float64
}

// moeLayerCases: test_cases.py's MIXTRAL_PROXY (hidden 4,096, 8 experts
// of 14,336, top-2, softmax router) and DEEPSEEK_PROXY (hidden 7,168, 32
// experts of 2,048, top-8, sigmoid router), with the alltoall dispatcher,
// in BF16 and with Transformer Engine's block-wise FP8 recipe. The
// DeepSeek proxy names a shared expert of 2,048
// (moe_shared_expert_intermediate_size), but the test's
// _build_transformer_config does not pass it to the TransformerConfig
// (__main__.py at cf39a4d), so the layer it times has none.
var moeLayerCases = func() []moeLayerCase {
	const mixtral = `{"family":"llama","layers":1,"hidden":4096,"heads":8,"kv_heads":8,"ffn_hidden":14336,"vocab":32000,"positions":4096,
		"experts":8,"experts_per_token":2,"expert_ffn_hidden":14336}`
	const deepseek = `{"family":"llama","layers":1,"hidden":7168,"heads":8,"kv_heads":8,"ffn_hidden":2048,"vocab":32000,"positions":4096,
		"experts":32,"experts_per_token":8,"expert_ffn_hidden":2048,"router":"sigmoid"}`
	return []moeLayerCase{
		{"Mixtral proxy (8 experts, top-2)", mixtral, false, 4.327, 7.684},
		{"Mixtral proxy (8 experts, top-2), block-wise FP8", mixtral, true, 3.788, 6.618},
		{"DeepSeek proxy (32 experts, top-8)", deepseek, false, 7.119, 10.483},
		{"DeepSeek proxy (32 experts, top-8), block-wise FP8", deepseek, true, 7.609, 10.126},
	}
}()

// moeLayerRows runs each case as a one-layer training step on one DGX H100
// (EP 8, data parallel 8, a sequence a rank), its weight gradients written
// once as the test's layer writes them (its TransformerConfig leaves
// gradient_accumulation_fusion at Megatron-Core's default, false, and the
// test sets the gradients to None before each iteration; with the fp32
// accumulation the backward rows read 0.2 point slower), and times the MoE
// layer as the test does: from the router to the unpermutation forward, from the
// unpermutation's gradient to the router's backward. The timeline merges
// the operators between two collectives into one task, so the router's
// forward (which follows the attention in one task) and its backward
// (which precedes the attention's) are priced by the operators scenario
// and cut from the attention's side of their tasks, as is the residual
// add after the layer.
func moeLayerRows(ctx context.Context) ([]Row, error) {
	var rows []Row
	for _, c := range moeLayerCases {
		dtype, recipe := "bf16", ""
		if c.fp8 {
			dtype, recipe = "fp8", `,"fp8_recipe":"blockwise"`
		}
		js := fmt.Sprintf(`{"kind":"training","model":%s,"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
			"parallel":{"tp":1,"pp":1,"dp":8,"ep":8,"micro_batch":1,"global_batch":8},"seq_len":4096,"dtype":%q%s,
			"no_gradient_accumulation_fusion":true,"moe_router_dtype":"fp32","timeline_ranks":[0]%s}`, c.model, dtype, recipe, forcedRouting(""))
		res, err := run(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("moe layer %s: %w", c.name, err)
		}
		ops, err := run(ctx, fmt.Sprintf(`{"kind":"operators","model":%s,"gpu":"h100-sxm","seq_len":4096,"batch":1,"dtype":%q,"moe_router_dtype":"fp32"}`, c.model, dtype))
		if err != nil {
			return nil, fmt.Errorf("moe layer %s operators: %w", c.name, err)
		}
		priced := func(pass string, keep func(op string) bool) float64 {
			s := 0.0
			for _, o := range ops.Tables[2].Rows.([]operators.OperatorRow) {
				if o.Pass == pass && keep(o.Op) {
					s += o.TimeS
				}
			}
			return s
		}
		router := func(op string) bool { return strings.HasPrefix(op, "moe.router") }
		fwd, bwd, err := moeLayerSpans(res.Tables[2].Rows.([]job.TimelineRow),
			priced("forward", router),
			priced("forward", func(op string) bool { return op == "mlp.residual" }),
			priced("backward", func(op string) bool { return router(op) || op == "moe.permute.bwd" }))
		if err != nil {
			return nil, fmt.Errorf("moe layer %s: %w", c.name, err)
		}
		label := "Megatron-Core MoE layer, " + c.name + ", H100 EP8"
		rows = append(rows,
			row(label, "forward_ms", c.fwdMs, 1e3*fwd, moeLayerSrc, "router to unpermutation on rank 0: the dispatch and combine all-to-alls, the host's wait for the token counts, the grouped expert GEMMs"),
			row(label, "backward_ms", c.bwdMs, 1e3*bwd, moeLayerSrc, "the unpermutation's gradient to the router's backward on rank 0"))
	}
	return rows, nil
}

// moeLayerSpans cuts the MoE layer's forward and backward out of rank 0's
// first micro-batch: routerS is the router's forward time (at the end of
// the task it shares with the attention), residualS the residual add that
// ends the task after the combine, routerBwdS the permutation's and the
// router's backward (at the start of the task they share with the
// attention's backward).
func moeLayerSpans(tl []job.TimelineRow, routerS, residualS, routerBwdS float64) (fwd, bwd float64, err error) {
	fwdStart, fwdEnd := math.NaN(), math.NaN()
	bwdStart, bwdEnd := math.Inf(1), math.NaN()
	for _, r := range tl {
		if r.MicroBatch != 0 || r.Rank != 0 {
			continue
		}
		switch {
		case strings.HasPrefix(r.Name, "mb0.fwd.") && strings.HasSuffix(r.Name, "moe.router.topk"):
			fwdStart = r.EndS - routerS
		case strings.HasPrefix(r.Name, "mb0.fwd.") && strings.HasSuffix(r.Name, "mlp.residual") && strings.Contains(r.Name, "moe."):
			fwdEnd = r.EndS - residualS
		case strings.HasPrefix(r.Name, "mb0.bwd.moe.permute.bwd"):
			bwdEnd = r.StartS + routerBwdS
		case strings.HasPrefix(r.Name, "mb0.bwd.") && strings.Contains(r.Name, "moe."):
			bwdStart = math.Min(bwdStart, r.StartS)
		}
	}
	if math.IsNaN(fwdStart+fwdEnd+bwdEnd) || math.IsInf(bwdStart, 1) {
		return 0, 0, fmt.Errorf("timeline lacks the MoE layer's tasks")
	}
	return fwdEnd - fwdStart, bwdEnd - bwdStart, nil
}
