package fidelity

import (
	"context"
	"fmt"
	"strings"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
)

// Mixture-of-experts rows: published training throughput of MoE models,
// run through the training scenario with the source's layout and flags.
// The mechanism is the one every row shares, plus the MoE model (grouped
// expert GEMMs at the tile model's efficiency per expert, all-to-all-v
// dispatch and combine as flows: Megatron-Core's all-to-all token
// dispatcher, with its copies into expert order and back where a rank
// holds several experts and the host's wait for the router's token counts
// before each dispatch; overlapped with the other micro-batch's compute
// where the source overlaps them, overlap_ep_comm).
const (
	qwenSrc         = "yanring/Megatron-MoE-ModelZoo, best_practice/qwen3/readme.md (Megatron-Core, %s dispatcher, H100)"
	mixtralSrc      = "yanring/Megatron-MoE-ModelZoo, best_practice/mixtral/run_mixtral_8x22B.sh (Megatron-Core, alltoall dispatcher, forced balance, H100: ~465 TFLOPS, ~560 with block-wise FP8)"
	deepseekSrc     = "DeepSeek-AI 2024 (arXiv 2412.19437), §1: 180K H800 GPU-hours per trillion tokens on 2,048 H800s"
	gptFastSrc      = "meta-pytorch/gpt-fast, mixtral-moe/README.md (bf16, batch 1, 5-token prompt, torch.compile with CUDA graphs, intra-node all-reduce; 8×A100 80 GB at 330 W)"
	dsProfSrc       = "deepseek-ai/profile-data, prefill (EP32, TP1, 4K prompts, 16K tokens a GPU, two micro-batches, balanced routing; H800), as lmsys.org/blog/2025-05-05-large-scale-ep derives its throughput"
	sglangDecodeSrc = "lmsys.org/blog/2025-05-05-large-scale-ep (SGLang decode, 9×8 H100, EP72 with EPLB's 288 slots, DeepEP low-latency kernels, two-batch overlap, 256 sequences a GPU, 2,000-token cache)"
	paiSrc          = "alibaba/Pai-Megatron-Patch issue #658 (Megatron-Core via Pai-Megatron-Patch 2b201af, 25.04 image, 256 H800, forced balance, no CUDA graphs)"
	sglangSrc       = "lmsys.org/blog/2025-05-05-large-scale-ep (SGLang, 4×8 H100, EP32, DeepEP normal kernels, DeepGEMM, two-batch overlap, 16,384 tokens a GPU, 4,096-token prompts, simulated perfect EPLB)"
)

// MoERows computes the MoE fidelity rows, their sources at once
// (rowsInParallel).
func MoERows(ctx context.Context) ([]Row, error) {
	return rowsInParallel(ctx, qwenMoERows, moeOtherRows, moeLayerRows, bridgeMoERows, bridgeEagerMoERows)
}

// qwenMoERows are the Qwen3-235B-A22B training rows (Megatron-MoE-ModelZoo
// on H100 and GB200, Pai-Megatron-Patch on H800).
func qwenMoERows(ctx context.Context) ([]Row, error) {
	var rows []Row
	qwen, ok := model.ByName("qwen3-235b-a22b")
	if !ok {
		return nil, fmt.Errorf("no qwen3-235b-a22b preset")
	}
	// Qwen3-235B-A22B, 256 H100s, bf16, sequence 4,096, global batch
	// 2,048, micro-batch 1, TP 2, PP 32, EP 8, expert TP 1, A2A dispatcher
	// without 1F1B overlap, recompute "norm, act": 24.2 s per step, 200
	// TFLOP/s per GPU. model_configs/benchmarking/Qwen3-235B-A22B.yaml:
	// distributed optimizer (ZeRO-1), overlapped gradient reduction and
	// parameter gathering, the loss as the yaml of the run's date has it
	// (qwenLossUnfused for the readme's 4,096-token rows, launched in May
	// 2025 by examples/qwen3/run_235b.sh, 8017e11, which passes
	// --moe-router-force-load-balancing on every layout; qwenLossTE after),
	// sequence parallelism, --expert-tensor-parallel-size 1, and the
	// embedding and the loss counted as one layer each in the pipeline split
	// (--account-for-embedding-in-pipeline-split,
	// --account-for-loss-in-pipeline-split: 96 slots, 32·3 chunks of one
	// here, 8·4 chunks of three in the PP 8 rows), as the runs do.
	// Recomputation as the row's "norm, act": --recompute-granularity
	// selective --recompute-modules layernorm moe_act.
	// The readme's layout rows beside it (same model config and scripts,
	// bf16, sequence 4,096, global batch 2,048, micro-batch 1, expert TP 1,
	// DeepEP dispatcher, which runs within a node as the all-to-all does and
	// sends each token once per node across nodes, hierarchical_a2a): TP 4,
	// EP 8, PP 8, VPP 4 without recomputation (29.0 s), and TP 2, EP 32,
	// PP 8, VPP 4 with "norm, act" (19.7 s), and the same with the
	// all-to-alls overlapped by the 1F1B schedule (17.6 s, "+1f1b overlap":
	// --overlap-moe-expert-parallel-comm, overlap_ep_comm). The readme's long-context
	// table adds sequence 16,384 at TP 4 (PP 8, VPP 4, EP 8, global batch
	// 256, DeepEP, --recompute-modules layernorm moe, forced balance):
	// 295 TFLOP/s per GPU (237 dropless), and the same layout with context
	// parallelism over 32 nodes: sequence 32,768 at CP 2 (335), 65,536 at
	// CP 4 (368), 131,072 at CP 8 (389). best_practice/qwen3/run_h100_235b.sh
	// (March 2026) gives the EP 32 overlap layout again as "H100 config, 320
	// TFLOPS", with --moe-router-force-load-balancing, the later yaml's
	// fused loss and the router and
	// the dispatcher's preprocessing captured in CUDA graphs
	// (--cuda-graph-scope moe_router moe_preprocess), which the row runs
	// eagerly: the simulated host is ahead of the GPU there.
	for _, q := range []struct {
		// src names the source file when it is not the readme.
		layout, dispatcher, par, routing, src string
		// loss is the run's loss implementation (qwenLossTE, qwenLossUnfused).
		loss           string
		pp, seq, batch int
		// ref is the step time (0: not given); tflops the per-GPU
		// TFLOP/s, compared where given; dropless the readme's TFLOP/s of
		// the same run without forced balancing (0: not given).
		ref, tflops, dropless float64
	}{
		{"TP2 PP32 EP8", "A2A", `"tp":2,"pp":32,"dp":4,"ep":8,"virtual_stages":3,"recompute":"selective","recompute_modules":["layernorm","moe_act"]`, "", "", qwenLossUnfused, 32, 4096, 2048, 24.2, 200, 0},
		{"TP4 PP8 VPP4 EP8", "DeepEP", `"tp":4,"pp":8,"dp":8,"ep":8,"virtual_stages":4`, `,"routing":{"hierarchical_a2a":true}`, "", qwenLossUnfused, 8, 4096, 2048, 29.0, 0, 0},
		{"TP2 PP8 VPP4 EP32", "DeepEP", `"tp":2,"pp":8,"dp":16,"ep":32,"virtual_stages":4,"recompute":"selective","recompute_modules":["layernorm","moe_act"]`, `,"routing":{"hierarchical_a2a":true}`, "", qwenLossUnfused, 8, 4096, 2048, 19.7, 0, 0},
		{"TP2 PP8 VPP4 EP32, 1F1B all-to-all overlap", "DeepEP", `"tp":2,"pp":8,"dp":16,"ep":32,"virtual_stages":4,"recompute":"selective","recompute_modules":["layernorm","moe_act"],"overlap_ep_comm":true`, `,"routing":{"hierarchical_a2a":true}`, "", qwenLossUnfused, 8, 4096, 2048, 17.6, 0, 0},
		{"TP2 PP8 VPP4 EP32, 1F1B all-to-all overlap, forced balance", "DeepEP", `"tp":2,"pp":8,"dp":16,"ep":32,"virtual_stages":4,"recompute":"selective","recompute_modules":["layernorm","moe_act"],"overlap_ep_comm":true`, `,"routing":{"hierarchical_a2a":true}`,
			"yanring/Megatron-MoE-ModelZoo, best_practice/qwen3/run_h100_235b.sh (Megatron-Core, DeepEP dispatcher, H100, forced balance, router and preprocessing in CUDA graphs: \"H100 config, 320 TFLOPS\")", qwenLossTE, 8, 4096, 2048, 0, 320, 0},
		{"TP4 PP8 VPP4 EP8, sequence 16,384", "DeepEP", qwen16K.par, qwen16K.routing, "", qwenLossTE, 8, 16384, qwen16K.batch, 0, qwen16K.forced, qwen16K.dropless},
		{"TP4 CP2 PP8 VPP4 EP8, sequence 32,768", "DeepEP", `"tp":4,"cp":2,"pp":8,"dp":4,"ep":8,"virtual_stages":4,"recompute":"selective","recompute_modules":["layernorm","moe"]`, `,"routing":{"hierarchical_a2a":true}`, "", qwenLossTE, 8, 32768, 256, 0, 335, 277},
		{"TP4 CP4 PP8 VPP4 EP8, sequence 65,536", "DeepEP", `"tp":4,"cp":4,"pp":8,"dp":2,"ep":8,"virtual_stages":4,"recompute":"selective","recompute_modules":["layernorm","moe"]`, `,"routing":{"hierarchical_a2a":true}`, "", qwenLossTE, 8, 65536, 256, 0, 368, 320},
		{"TP4 CP8 PP8 VPP4 EP8, sequence 131,072", "DeepEP", `"tp":4,"cp":8,"pp":8,"dp":1,"ep":8,"virtual_stages":4,"recompute":"selective","recompute_modules":["layernorm","moe"]`, `,"routing":{"hierarchical_a2a":true}`, "", qwenLossTE, 8, 131072, 256, 0, 389, 357},
	} {
		s, err := qwenRun(ctx, q.par, q.batch, q.seq, q.loss, forcedRouting(q.routing))
		if err != nil {
			return nil, fmt.Errorf("qwen3-235b %s: %w", q.layout, err)
		}
		refStep := q.ref
		if refStep == 0 {
			refStep = s.ModelFLOPs / (q.tflops * 1e12 * float64(s.GPUs))
		}
		// Layer passes per GPU: micro-batches × layers per stage.
		passes := float64(s.MicroBatches) * float64(qwen.Layers) / float64(q.pp)
		c, src := "Qwen3-235B-A22B, 256 H100, "+q.layout, fmt.Sprintf(qwenSrc, q.dispatcher)
		if q.src != "" {
			src = q.src
		}
		forced := c
		if q.dropless > 0 {
			forced += ", forced balance"
		}
		note := fmt.Sprintf("compute %.1f s + exposed comm %.1f s + bubble %.1f s; %.0f layer passes per GPU (micro-batches × layers per stage): %.1f ms a pass against the reference's %.1f ms; memory %.0f GB (fits %v)",
			s.ComputeS, s.ExposedCommS, s.BubbleS, passes, s.StepTimeS/passes*1e3, refStep/passes*1e3, s.MemoryPeakBytes/1e9, s.Fits)
		if q.ref > 0 {
			rows = append(rows, row(c, "step_time_s", q.ref, s.StepTimeS, src, note))
			note = "model FLOPs per second per GPU, as Megatron-LM counts them (num_floating_point_operations: the matmuls of the active parameters and the causal attention, each backward twice its forward)"
		}
		if q.tflops > 0 {
			rows = append(rows, row(forced, "tflops_per_gpu", q.tflops, s.ModelFLOPs/s.StepTimeS/float64(s.GPUs)/1e12, src, note))
		}
		if q.dropless > 0 {
			d, err := qwenRun(ctx, q.par, q.batch, q.seq, q.loss, droplessRouting(q.routing, QwenDroplessSkew))
			if err != nil {
				return nil, fmt.Errorf("qwen3-235b %s dropless: %w", q.layout, err)
			}
			zipf := fmt.Sprintf("routing Zipf %.2f over the experts (QwenDroplessSkew, fitted on the 16,384-token pair)", QwenDroplessSkew)
			rows = append(rows,
				row(c+", dropless", "tflops_per_gpu", q.dropless, d.ModelFLOPs/d.StepTimeS/float64(d.GPUs)/1e12, src,
					fmt.Sprintf("%s: step %.1f s against %.1f s with forced balance", zipf, d.StepTimeS, s.StepTimeS)),
				row(c+", dropless over forced balance", "throughput_ratio", q.dropless/q.tflops, s.StepTimeS/d.StepTimeS, src,
					"the imbalance's cost alone: the readme's dropless over forced-balance TFLOP/s; simulated, the forced-balance step over the step with "+zipf))
		}
	}

	// The same model on 256 H800s with Alibaba's Pai-Megatron-Patch
	// (Megatron-Core 25.04 image, commit 2b201af; alibaba/Pai-Megatron-Patch
	// issue #658): sequence 4,096, PP 32 with 3 virtual stages, EP 8, the
	// official Qwen3 example's flags with forced load balancing, overlapped
	// gradient reduction and parameter gathering, Transformer Engine's fused
	// cross entropy, no CUDA graphs; four layouts with their step times.
	for _, q := range []struct {
		layout, par string
		mb, batch   int
		ref         float64
	}{
		{"TP1 PP32 VPP3 EP8, micro-batch 4, full recompute", `"tp":1,"pp":32,"dp":8,"ep":8,"virtual_stages":3,"recompute":"full"`, 4, 4096, 42.537},
		{"TP2 PP32 VPP3 EP8, micro-batch 4, full recompute", `"tp":2,"pp":32,"dp":4,"ep":8,"virtual_stages":3,"recompute":"full","sequence_parallel":true`, 4, 4096, 43.495},
		{"TP2 PP32 VPP3 EP8, micro-batch 1, recompute norm and act", `"tp":2,"pp":32,"dp":4,"ep":8,"virtual_stages":3,"recompute":"selective","recompute_modules":["layernorm","moe_act"],"sequence_parallel":true`, 1, 2048, 22.42},
		{"TP1 PP32 VPP3 EP8, micro-batch 1, recompute norm and MoE", `"tp":1,"pp":32,"dp":8,"ep":8,"virtual_stages":3,"recompute":"selective","recompute_modules":["layernorm","moe"]`, 1, 2048, 22.946},
	} {
		s, err := qwenRunOn(ctx, "h800", "dgx-h800", q.par, q.mb, q.batch, 4096, qwenLossTE+forcedRouting(""))
		if err != nil {
			return nil, fmt.Errorf("qwen3-235b on h800 %s: %w", q.layout, err)
		}
		passes := float64(s.MicroBatches) * float64(qwen.Layers) / 32
		rows = append(rows, row("Qwen3-235B-A22B, 256 H800, "+q.layout, "step_time_s", q.ref, s.StepTimeS, paiSrc,
			fmt.Sprintf("compute %.1f s + exposed comm %.1f s + bubble %.1f s; %.1f ms a layer pass (%.0f a GPU) against the reference's %.1f ms; memory %.0f GB (fits %v)",
				s.ComputeS, s.ExposedCommS, s.BubbleS, s.StepTimeS/passes*1e3, passes, q.ref/passes*1e3, s.MemoryPeakBytes/1e9, s.Fits)))
	}

	// The readme's GB200 BF16 row: 256 GB200s (64 trays of 4, in NVL72
	// racks: an NVLink domain of 72), TP 1, PP 8, EP 8, micro-batch 1,
	// global batch 8,192, sequence 4,096, no recomputation, HybridEP
	// dispatcher, no all-to-all overlap, forced load balancing: 750 TFLOP/s
	// per GPU. The cluster is four gb200-nvl72 racks of which the layout
	// uses 256 GPUs. Its command captures the attention, router and MoE
	// preprocessing in CUDA graphs (--cuda-graph-scope); the row runs
	// eagerly, as the other rows.
	// The same script's MXFP8 long-context row (best_practice/qwen3/
	// run_gb200_235b.sh: "GB200 config, MXFP8, 128k long context, 1150
	// TFLOPS"): 32 GB200 trays (128 GPUs), sequence 131,072, TP 4, CP 4,
	// PP 4 with 12 virtual stages, EP 32, micro-batch 1, global batch 1,024,
	// --fp8-recipe mxfp8 (fp8_recipe mxfp8), recompute "moe_act layernorm",
	// HybridEP without the all-to-all overlap, forced balance, no CUDA
	// graphs. Its stages of 32 (the EP group: TP × CP × DP) each keep to an
	// NVLink domain (SEGMENT=8 trays), as on gb200TwoRacks.
	for _, q := range []struct {
		label, src, cluster, par, extra string
		seq                             int
		ref                             float64
	}{
		{"256 GB200, TP1 PP8 EP8", "readme.md, GB200 table (Megatron-Core, HybridEP dispatcher, GB200 NVL72)",
			`{"preset":"gb200-nvl72","nodes":4}`, `"tp":1,"pp":8,"dp":32,"ep":8,"global_batch":8192`, ``, 4096, 750},
		{"128 GB200, TP4 CP4 PP4 VPP12 EP32, sequence 131,072, MXFP8",
			`run_gb200_235b.sh (Megatron-Core, MXFP8, HybridEP dispatcher, GB200 NVL72: "128k long context, 1150 TFLOPS")`, gb200TwoRacks,
			`"tp":4,"cp":4,"pp":4,"dp":2,"ep":32,"virtual_stages":12,"global_batch":1024,"sequence_parallel":true,"recompute":"selective","recompute_modules":["layernorm","moe_act"]`,
			`,"dtype":"fp8","fp8_recipe":"mxfp8"`, 131072, 1150},
	} {
		js := fmt.Sprintf(`{"kind":"training","model":"qwen3-235b-a22b","gpu":"gb200","cluster":%s,
		"parallel":{%s,"expert_tp":1,"micro_batch":1,
		"account_for_embedding_in_pipeline_split":true,"account_for_loss_in_pipeline_split":true,
		"zero":1,"overlap_grad_reduce":true,"overlap_param_gather":true},"seq_len":%d,"timeline_ranks":[-1]%s`, q.cluster, q.par, q.seq, q.extra) +
			qwenLossTE + qwenRouterDType + forcedRouting("") + `}`
		res, err := run(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("qwen3-235b %s: %w", q.label, err)
		}
		s := res.Tables[0].Rows.([]training.SummaryRow)[0]
		rows = append(rows, row("Qwen3-235B-A22B, "+q.label, "tflops_per_gpu", q.ref, s.ModelFLOPs/s.StepTimeS/float64(s.GPUs)/1e12,
			"yanring/Megatron-MoE-ModelZoo, best_practice/qwen3/"+q.src,
			fmt.Sprintf("step %.2f s (compute %.2f s + exposed comm %.2f s + bubble %.2f s); memory %.0f GB (fits %v); GPU parameters derived from the B200's, no table for this part",
				s.StepTimeS, s.ComputeS, s.ExposedCommS, s.BubbleS, s.MemoryPeakBytes/1e9, s.Fits)))
	}
	return rows, nil
}

// moeOtherRows are the Mixtral, DeepSeek-V3 and MoE inference rows.
func moeOtherRows(ctx context.Context) ([]Row, error) {
	var rows []Row

	// Mixtral-8x7B FP8 as NVIDIA's NeMo performance summary ran it on 64
	// B200s (NeMo 25.02, eight DGX-B200 nodes: 15,457 tokens/s per GPU) and
	// on 64 GB200s (NeMo 25.04, one NVL72 rack's NVLink domain: 19,275):
	// per-tensor FP8 scaling, global batch 256, micro-batch 2, sequence
	// 4,096, TP 1, PP 1, EP 8, its recipe's distributed optimizer with
	// overlapped gradient reduction and parameter gathering, the fused loss;
	// as NeMo's performance script ran it on both (scripts/llm/performance/
	// pretrain_mixtral_8x7b.py at v2.2.0, model_configs_gb200.csv at
	// v2.3.0): gradients reduced in BF16 (grad_reduce_in_fp32 False) and each
	// layer in CUDA graphs (enable_cuda_graph); and as its recipe's
	// performance mode runs it (nemo/collections/llm/recipes/mixtral_8x7b.py,
	// pretrain_performance_optimizations, at v2.2.0 and v2.3.0), with
	// Megatron-Core's token drop: MegatronTokenDropCallback's capacity
	// factor 1.0 with every expert's input padded to the capacity, so that
	// every all-to-all has a static size and the host never waits for the
	// token counts.
	for _, c := range []struct {
		gpu, cluster, label, release string
		ref                          float64
	}{
		{"b200", `{"preset":"dgx-b200","nodes":8}`, "B200", "NeMo 25.02, pre-training at FP8 on DGX-B200", 15457},
		{"gb200", `{"preset":"gb200-nvl72","nodes":1}`, "GB200", "NeMo 25.04, pre-training at FP8 on DGX-GB200", 19275},
	} {
		js := fmt.Sprintf(`{"kind":"training","model":"mixtral-8x7b","gpu":%q,"cluster":%s,
		"parallel":{"tp":1,"pp":1,"dp":64,"ep":8,"micro_batch":2,"global_batch":256,"zero":1,"overlap_grad_reduce":true,"overlap_param_gather":true},
		"seq_len":4096,"dtype":"fp8","grad_dtype":"bf16","cross_entropy_fusion":"native","execution":"cuda_graphs",
		"routing":{"capacity_factor":1,"pad_to_capacity":true},"timeline_ranks":[-1]}`, c.gpu, c.cluster)
		res, err := run(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("mixtral-8x7b %s: %w", c.gpu, err)
		}
		s := res.Tables[0].Rows.([]training.SummaryRow)[0]
		rows = append(rows, row("Mixtral-8x7B FP8, 64 "+c.label+", EP8", "tokens_per_s_per_gpu", c.ref, 256*4096/s.StepTimeS/64,
			"NVIDIA NeMo Framework performance summary, "+c.release,
			fmt.Sprintf("step %.2f s (compute %.2f s + exposed comm %.2f s + bubble %.2f s); memory %.0f GB; GPU parameters derived, no table for this part",
				s.StepTimeS, s.ComputeS, s.ExposedCommS, s.BubbleS, s.MemoryPeakBytes/1e9)))
	}

	// Mixtral-8x22B on 128 H100s (16 nodes), bf16, sequence 4,096, TP 2,
	// PP 8, EP 8, expert TP 1, 7 virtual stages, micro-batch 1, global
	// batch 256, alltoall dispatcher, distributed optimizer, overlapped
	// gradient reduction and parameter gathering, no recomputation (runtime_configs/benchmarking/
	// runtime.conf and model_configs/benchmarking/Mixtral-8x22B.yaml, which
	// fuses the cross entropy with Megatron's native kernels);
	// forced load balancing: ~465 TFLOP/s per GPU.
	// The same script's block-wise FP8 run (PR=fp8, Transformer Engine's
	// FP8 recipe on the linear layers with per-block scales, every GEMM
	// promoting its accumulators per 128 elements) "should be around 560
	// TFLOPS". Both figures came with the commit (b09773a, December 2025)
	// that moved --tp-comm-overlap from the model's yaml into
	// sbatch_benchmarking.sh for PR=bf16 alone: the BF16 run overlaps its
	// tensor-parallel communication with the GEMMs (tp_comm_overlap), the
	// FP8 run does not.
	var s training.SummaryRow
	for _, m := range []struct {
		dtype, label, par string
		ref               float64
	}{{`"bf16"`, "", `,"tp_comm_overlap":true`, 465}, {`"fp8","fp8_recipe":"blockwise"`, ", FP8", "", 560}} {
		js := fmt.Sprintf(`{"kind":"training","model":"mixtral-8x22b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":16},
		"parallel":{"tp":2,"pp":8,"dp":8,"ep":8,"expert_tp":1,"micro_batch":1,"global_batch":256,"virtual_stages":7,
		"sequence_parallel":true,"zero":1,"overlap_grad_reduce":true,"overlap_param_gather":true%s},"seq_len":4096,"dtype":%s,"cross_entropy_fusion":"native","timeline_ranks":[-1]%s}`, m.par, m.dtype, forcedRouting(""))
		res, err := run(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("mixtral-8x22b %s: %w", m.dtype, err)
		}
		s = res.Tables[0].Rows.([]training.SummaryRow)[0]
		rows = append(rows, row("Mixtral-8x22B, 128 H100, TP2 PP8 VPP7 EP8"+m.label, "tflops_per_gpu", m.ref, s.ModelFLOPs/s.StepTimeS/float64(s.GPUs)/1e12, mixtralSrc,
			fmt.Sprintf("step %.2f s (compute %.2f s + exposed comm %.2f s + bubble %.2f s); memory %.0f GB", s.StepTimeS, s.ComputeS, s.ExposedCommS, s.BubbleS, s.MemoryPeakBytes/1e9)))
	}

	// DeepSeek-V3 on 2,048 H800s: PP 16, EP 64 (8 nodes), ZeRO-1 DP, FP8
	// GEMMs (block-wise scaling, every GEMM promoting per 128 elements:
	// §3.3.2) and fp8 dispatches, sequence 4,096, batch 15,360, node-limited
	// routing (≤ 4 nodes per token) with DeepEP-style hierarchical
	// all-to-alls that send each token once per node (§3.2.2). DualPipe's
	// overlap of a forward chunk's all-to-alls with a backward chunk's
	// compute (§3.2.1) is overlap_ep_comm, on the interleaved order below
	// (DualPipe's smaller bidirectional bubble is not modelled).
	// Recomputation is selective: DeepSeek recomputes RMSNorm and the MLA
	// up-projections only, not the MoE (§3.3.3): the layer norms here
	// (recompute module layernorm; the up-projections' recompute is not
	// modelled, which keeps their outputs in memory). The FP8 recipe keeps
	// the linear layers' inputs in FP8 for the backward, as DeepSeek caches
	// them (§3.3.2), and the attention, the output head and the router in
	// BF16 (§3.3.2: "the embedding module, the output head, MoE gating
	// modules, normalization operators, and attention operators"); the
	// rest of its activation caching (the SwiGLU inputs, the fp32 optimizer
	// states in BF16) is not modelled, so the memory column exceeds the HBM. It trains with one multi-token-prediction module (§2.2, §4.2:
	// depth 1). DualPipe holds two chunks on every rank, the shallowest
	// and the deepest layers on one (§2.2, §3.2.1); the layout the
	// simulator can run closest to it is Megatron-Core's DeepSeek-V3
	// recipe's, which the row runs as written (--pipeline-model-parallel-
	// layout "Et|(tt|)*30mL", Megatron-MoE-ModelZoo best_practice/
	// deepseek-v3): 16 stages of two interleaved chunks, the first the
	// embedding and one layer, the last the MTP module and the loss. The interleaved schedule needs
	// the micro-batches per replica to be a multiple of the stages: 128
	// (global batch 16,384) where DeepSeek ran 120 (15,360); the GPU-hours
	// are per token. Gradient reduction and parameter gathering overlap
	// the compute and the loss is fused, as the recipe runs them
	// (model_configs/benchmarking/DeepSeek-V3.yaml: --cross-entropy-loss-fusion
	// with the native implementation).
	const dsBatch = 16384
	js := fmt.Sprintf(`{"kind":"training","model":{"preset":"deepseek-v3","mtp_layers":1},"gpu":"h800","cluster":{"preset":"dgx-h800","nodes":256},
		"parallel":{"tp":1,"pp":16,"pipeline_model_parallel_layout":"Et|(tt|)*30mL",
			"dp":128,"ep":64,"micro_batch":1,"global_batch":%d,"zero":1,"overlap_grad_reduce":true,"overlap_param_gather":true,"recompute":"selective","recompute_modules":["layernorm"],"overlap_ep_comm":true},
		"seq_len":4096,"dtype":"fp8","fp8_recipe":"blockwise","fp8_dispatch":true,"cross_entropy_fusion":"native","routing":{"hierarchical_a2a":true,"node_limit":4},"timeline_ranks":[-1]}`, dsBatch)
	res, err := run(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("deepseek-v3: %w", err)
	}
	s = res.Tables[0].Rows.([]training.SummaryRow)[0]
	tokens := dsBatch * 4096.0
	gpuHours := s.StepTimeS * 2048 / 3600 * 1e12 / tokens
	note := fmt.Sprintf("step %.1f s (critical rank: compute %.1f s + exposed comm %.1f s + waiting %.1f s); EP overlap as DualPipe's, Megatron-Core's interleaved layout; memory %.0f GB",
		s.StepTimeS, s.ComputeS, s.ExposedCommS, s.BubbleS, s.MemoryPeakBytes/1e9)
	rows = append(rows, row("DeepSeek-V3, 2,048 H800, PP16 EP64", "gpu_hours_per_trillion_tokens", 180e3, gpuHours, deepseekSrc, note))

	// Mixtral-8x7B inference at batch 1 (gpt-fast's mixtral-moe): every
	// GPU holds a TP share of all eight experts, each token reads its two
	// experts' shares, and tokens/s is the 200 generated tokens over the
	// whole generate() call (the 5-token prefill included). It runs from
	// CUDA graphs (torch.compile mode "reduce-overhead") with PyTorch's
	// intra-node all-reduce (ENABLE_INTRA_NODE_COMM=1): the inference
	// kind's cuda_graphs execution, whose default all-reduce is the custom
	// one, with Inductor's residual adds fused into the norms
	// (fused_add_norm).
	for _, g := range []struct {
		tp  int
		ref float64
	}{{2, 96.67}, {4, 155.35}, {8, 227.82}} {
		js := fmt.Sprintf(`{"kind":"inference","model":"mixtral-8x7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
			"tp":%d,"batch":1,"prompt_tokens":5,"output_tokens":200,"dtype":"bf16","execution":"cuda_graphs","fused_add_norm":true}`, g.tp)
		if res, err = run(ctx, js); err != nil {
			return nil, fmt.Errorf("mixtral-8x7b tp%d: %w", g.tp, err)
		}
		is := res.Tables[0].Rows.([]inference.SummaryRow)[0]
		rows = append(rows, row(fmt.Sprintf("Mixtral-8x7B inference, batch 1, A100 TP%d", g.tp), "tokens_per_s", g.ref, is.TokensPerS, gptFastSrc,
			fmt.Sprintf("TTFT %.1f ms + 199 × TPOT %.2f ms", 1e3*is.TTFTS, 1e3*is.TPOTS)))
	}

	// DeepSeek-V3 prefill with wide EP and two-batch overlap: 32 GPUs (4
	// nodes), one replica a GPU (data-parallel attention, TP 1), EP 32,
	// 16,384 tokens a GPU as four 4,096-token prompts, FP8 GEMMs, DeepEP's
	// normal kernels (hierarchical_a2a), balanced routing as both sources
	// simulate it; throughput per node is 8 × 16,384 tokens over the
	// prefill.
	for _, p := range []struct {
		gpu, cluster, src string
		ref               float64
	}{{"h800", "dgx-h800", dsProfSrc, 62713}, {"h100-sxm", "dgx-h100", sglangSrc, 59337}} {
		js := fmt.Sprintf(`{"kind":"inference","model":"deepseek-v3","gpu":%q,"cluster":{"preset":%q,"nodes":4},
			"replicas":32,"ep":32,"hierarchical_a2a":true,"two_batch_overlap":true,"batch":4,"prompt_tokens":4096,"output_tokens":1,
			"dtype":"fp8","timeline_ranks":[0]}`, p.gpu, p.cluster)
		if res, err = run(ctx, js); err != nil {
			return nil, fmt.Errorf("deepseek-v3 prefill on %s: %w", p.gpu, err)
		}
		is := res.Tables[0].Rows.([]inference.SummaryRow)[0]
		compute, a2a := streamBusy(res, "compute"), streamBusy(res, "ep")
		rows = append(rows, row(fmt.Sprintf("DeepSeek-V3 prefill, 32 %s, EP32, two-batch overlap", strings.ToUpper(strings.TrimSuffix(p.gpu, "-sxm"))),
			"tokens_per_s_per_node", p.ref, 8*16384/is.TTFTS, p.src,
			fmt.Sprintf("prefill %.2f s: compute stream busy %.2f s, all-to-all stream %.2f s; memory %.0f GB", is.TTFTS, compute, a2a, is.MemoryPeakBytes/1e9)))
	}

	// DeepSeek-V3 decode on SGLang's 9 decode nodes: EP 72 over 288 expert
	// slots (EPLB's 32 redundant experts), 256 sequences a GPU at a
	// 2,000-token cache, two-batch overlap, DeepEP's low-latency kernels
	// (low_latency_a2a: the all-to-all-v without the relay, each kernel's
	// fixed time on top), CUDA graphs; throughput per node is 8 × 256
	// tokens over a decode step. The decode nodes receive every cache from
	// SGLang's prefill nodes (decode_only): run with its prefill as well,
	// these GPUs would hold its activations too, 46 GB beside the weights
	// and the cache, and not fit.
	js = `{"kind":"inference","model":"deepseek-v3","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":9},
		"replicas":72,"ep":72,"redundant_experts":32,"two_batch_overlap":true,"low_latency_a2a":true,"decode_only":true,
		"batch":256,"prompt_tokens":2000,"output_tokens":4,"dtype":"fp8"}`
	if res, err = run(ctx, js); err != nil {
		return nil, fmt.Errorf("deepseek-v3 decode: %w", err)
	}
	is := res.Tables[0].Rows.([]inference.SummaryRow)[0]
	rows = append(rows, row("DeepSeek-V3 decode, 72 H100, EP72 + 32 redundant experts, two-batch overlap", "tokens_per_s_per_node", 22282, 8*256/is.TPOTS, sglangDecodeSrc,
		fmt.Sprintf("decode step %.1f ms at 256 sequences a GPU; a decode instance (the caches from the prefill nodes): memory %.0f GB (fits %t)", 1e3*is.TPOTS, is.MemoryPeakBytes/1e9, is.Fits)))
	return rows, nil
}

// streamBusy is the time the timeline's rank 0 spends on one stream.
func streamBusy(res scenario.Result, stream string) float64 {
	var busy float64
	for _, tb := range res.Tables {
		if tb.Name != "timeline" {
			continue
		}
		for _, r := range tb.Rows.([]job.TimelineRow) {
			if r.Rank == 0 && r.Stream == stream {
				busy += r.EndS - r.StartS
			}
		}
	}
	return busy
}

// QwenDroplessSkew is the Zipf exponent of Qwen3-235B-A22B's routing in the
// Megatron-MoE-ModelZoo runs without forced balancing (the released
// checkpoint, --finetune, dropless): the readme's long-context table gives
// each layout's TFLOP/s with forced balance and dropless, and this exponent
// makes the simulated ratio at 16,384 tokens the published one (237 / 295;
// `go test ./bench/fidelity -run TestQwenDroplessSkewFit -v` refits it);
// the 32,768 to 131,072-token pairs check it. One popularity over a seeded
// order of the experts, as the routing's Zipf draw gives every MoE layer
// and micro-batch (workload.RouteZipf).
const QwenDroplessSkew = 0.86

// qwen16K is the readme's 16,384-token long-context layout and its two
// published TFLOP/s, forced balance and dropless: the pair
// QwenDroplessSkew is fitted on.
var qwen16K = struct {
	par, routing     string
	batch            int
	forced, dropless float64
}{`"tp":4,"pp":8,"dp":8,"ep":8,"virtual_stages":4,"recompute":"selective","recompute_modules":["layernorm","moe"]`, `,"routing":{"hierarchical_a2a":true}`, 256, 295, 237}

// QwenDroplessRatio runs the 16,384-token layout with forced balance once
// and returns its throughput with routing Zipf skew over that one, the quantity
// QwenDroplessSkew is fitted to make the published dropless / forced (also
// returned).
func QwenDroplessRatio(ctx context.Context) (ratio func(skew float64) (float64, error), published float64, err error) {
	b, err := qwenRun(ctx, qwen16K.par, qwen16K.batch, 16384, qwenLossTE, forcedRouting(qwen16K.routing))
	if err != nil {
		return nil, 0, err
	}
	ratio = func(skew float64) (float64, error) {
		d, err := qwenRun(ctx, qwen16K.par, qwen16K.batch, 16384, qwenLossTE, droplessRouting(qwen16K.routing, skew))
		if err != nil {
			return 0, err
		}
		return b.StepTimeS / d.StepTimeS, nil
	}
	return ratio, qwen16K.dropless / qwen16K.forced, nil
}

// qwenRun is one Qwen3-235B-A22B training step on 256 H100s with the
// ModelZoo's flags (model_configs/benchmarking/Qwen3-235B-A22B.yaml: see
// MoERows), the layout par, the global batch, the sequence, the loss
// (qwenLossTE or qwenLossUnfused) and routing (a JSON fragment
// ",\"routing\":{...}" or "").
func qwenRun(ctx context.Context, par string, batch, seq int, loss, routing string) (training.SummaryRow, error) {
	return qwenRunOn(ctx, "h100-sxm", "dgx-h100", par+`,"sequence_parallel":true`, 1, batch, seq, loss+qwenRouterDType+routing)
}

// The loss's implementation in a Qwen3 run, a spec fragment. The ModelZoo's
// yaml fuses it with Transformer Engine's kernels from August 2025 on
// (--cross-entropy-loss-fusion, --cross-entropy-fusion-impl te: commit
// 274316a), the long-context, GB200 and later H100 runs' (qwenLossTE, as
// Pai-Megatron-Patch's rows: its Qwen3 script passes
// --cross-entropy-loss-fusion and the issue --cross-entropy-fusion-impl te);
// the readme's 4,096-token H100 rows ran the yaml of May 2025 (b06a6d8,
// beside examples/qwen3/run_235b.sh of 8017e11, which launched them),
// which has no --cross-entropy-loss-fusion: Megatron's unfused loss over
// fp32 logits (qwenLossUnfused).
const (
	qwenLossTE      = `,"cross_entropy_fusion":"te"`
	qwenLossUnfused = `,"cross_entropy_fusion":"none"`
)

// qwenRouterDType is the ModelZoo's --moe-router-dtype fp32
// (model_configs/benchmarking/Qwen3-235B-A22B.yaml), a spec fragment.
const qwenRouterDType = `,"moe_router_dtype":"fp32"`

// qwenRunOn is qwenRun on 32 nodes of a preset, with the micro-batch given
// (par names the sequence parallelism) and extra, the spec's further
// members as a JSON fragment (",\"routing\":{...}", "" for none).
func qwenRunOn(ctx context.Context, gpu, cluster, par string, microBatch, batch, seq int, extra string) (training.SummaryRow, error) {
	js := fmt.Sprintf(`{"kind":"training","model":"qwen3-235b-a22b","gpu":%q,"cluster":{"preset":%q,"nodes":32},
		"parallel":{%s,"expert_tp":1,"micro_batch":%d,"global_batch":%d,
		"account_for_embedding_in_pipeline_split":true,"account_for_loss_in_pipeline_split":true,
		"zero":1,"overlap_grad_reduce":true,"overlap_param_gather":true},"seq_len":%d,"timeline_ranks":[-1]%s}`, gpu, cluster, par, microBatch, batch, seq, extra)
	res, err := run(ctx, js)
	if err != nil {
		return training.SummaryRow{}, err
	}
	return res.Tables[0].Rows.([]training.SummaryRow)[0], nil
}

// forcedRouting is a row's routing fragment (",\"routing\":{...}" or "")
// as Megatron-Core's --moe-router-force-load-balancing routes: random
// logits, so each token's k experts are drawn uniformly
// (megatron/core/transformer/moe/moe_utils.py, apply_random_logits:
// logits.clone().normal_()), balanced in expectation but not expert by
// expert, and the most loaded rank sets each layer's pace.
func forcedRouting(routing string) string {
	return withDistribution(routing, `"distribution":"uniform"`)
}

// droplessRouting is a row's routing fragment with a Zipf draw of the given
// exponent.
func droplessRouting(routing string, skew float64) string {
	return withDistribution(routing, fmt.Sprintf(`"distribution":"zipf","skew":%g`, skew))
}

// withDistribution adds the fields dist to a routing fragment.
func withDistribution(routing, dist string) string {
	if routing == "" {
		return `,"routing":{` + dist + `}`
	}
	return strings.TrimSuffix(routing, "}") + "," + dist + "}"
}
