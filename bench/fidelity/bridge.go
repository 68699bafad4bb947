package fidelity

import (
	"context"
	"fmt"
	"strings"

	"github.com/eidolon-sim/eidolon/core/scenario/training"
)

// bridgeSrc is Megatron-Bridge's performance summary of the NeMo 25.11
// container (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md as
// committed with the 25.11 numbers, 97ad8cc and 5776a6d, December 2025;
// since moved to docs/performance-summary-archive.md): pre-training
// tokens/s per GPU of its performance recipes on DGX-GB300, DGX-GB200,
// DGX-B200 and DGX-H100, each row with its layout, batch and precision.
const bridgeSrc = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, 25.11 NeMo container, pre-training"

// nvl72Racks is n GPUs as NVL72 racks (the preset, with its NICs) of
// which a layout uses 64 (16 of the 18 compute trays), so that
// power-of-two stages keep to a rack's NVLink domain: n/64 racks, the
// preset's one rack up to 64 GPUs, its NICs and their PCIe links.
func nvl72Racks(preset, nic, pcie string) func(int) string {
	return func(n int) string {
		if n <= 64 {
			return fmt.Sprintf(`{"preset":%q,"nodes":1}`, preset)
		}
		return fmt.Sprintf(`{"topology":"composed","nodes":%d,"gpus_per_node":64,"intra":"nvswitch","intra_link":"nvlink5","nics_per_node":64,"nic_link":%q,"host_link":%q}`, n/64, nic, pcie)
	}
}

// rackAligned is each NVL72 part's rack-aligned cluster, by GPU preset.
var rackAligned = map[string]func(int) string{
	"gb200": nvl72Racks("gb200-nvl72", "ib-ndr", "pcie5-x16"),
	"gb300": nvl72Racks("gb300-nvl72", "ib-xdr", "pcie6-x16"),
}

// dgx is n GPUs as nodes of an 8-GPU preset (one node below 8).
func dgx(preset string) func(int) string {
	return func(n int) string { return fmt.Sprintf(`{"preset":%q,"nodes":%d}`, preset, max(n/8, 1)) }
}

// bridgeRows are the summary's dense rows (Llama 3 8B and 70B, Llama 3.1
// 405B) on every part it lists, run as the 25.11
// performance recipes run them (scripts/performance/configs/llama at
// 97ad8cc): FP8 with current per-tensor scaling ("FP8-CS": fp8_recipe
// tensorwise; the bracketed MXFP8 figures: mxfp8), the gradients reduced
// in BF16 (grad_reduce_in_fp32 False), the fused loss, cuDNN's attention,
// sequence parallelism and Transformer Engine's comm-GEMM overlap with
// TP, the distributed optimizer overlapping its reduction and gathering
// (not the gathering under MXFP8, which the recipes turn off: "causes NaN
// grad norm"), Megatron-FSDP where the table says FSDP (zero 3), and the
// Llama 3 8B recipes' full-iteration CUDA graphs on Blackwell
// (cuda_graph_scope "full_iteration": execution cuda_graphs). Not
// modelled, and said in each row's note: the H100 8B recipe's
// recomputation of 5 layers (recompute_num_layers) and the GB200
// and GB300 70B recipes' activation offloading to the Grace CPU
// (cpu_offloading_num_layers 40 and 20).
func bridgeRows(ctx context.Context) ([]Row, error) {
	gb200, gb300 := rackAligned["gb200"], rackAligned["gb300"]
	var rows []Row
	for _, c := range []struct {
		model, name, gpu, label, recipe string
		cluster                         func(int) string
		gpus, gb, mb, tp, pp, cp, vp    int
		fsdp, graphs                    bool
		ref                             float64
		unmodelled                      string
	}{
		{"llama3-8b", "LLaMA-3-8B", "gb300", "GB300", "tensorwise", gb300, 8, 128, 2, 1, 1, 1, 1, false, true, 37556, ""},
		{"llama3-8b", "LLaMA-3-8B", "gb300", "GB300", "mxfp8", gb300, 8, 128, 2, 1, 1, 1, 1, false, true, 36108, ""},
		{"llama3-70b", "LLaMA-3-70B", "gb300", "GB300", "tensorwise", gb300, 64, 256, 2, 1, 1, 1, 1, true, false, 4520, "; the recipe's activation offloading to the CPU (20 layers) not modelled"},
		{"llama3-405b", "LLaMA-3.1-405B", "gb300", "GB300", "tensorwise", gb300, 256, 1536, 1, 2, 8, 2, 4, false, false, 999, ""},
		{"llama3-8b", "LLaMA-3-8B", "gb200", "GB200", "tensorwise", gb200, 8, 128, 2, 1, 1, 1, 1, false, true, 31508, ""},
		{"llama3-8b", "LLaMA-3-8B", "gb200", "GB200", "mxfp8", gb200, 8, 128, 2, 1, 1, 1, 1, false, true, 29789, ""},
		{"llama3-70b", "LLaMA-3-70B", "gb200", "GB200", "tensorwise", gb200, 64, 256, 2, 1, 1, 1, 1, true, false, 4312, "; the recipe's activation offloading to the CPU (40 layers) not modelled"},
		{"llama3-405b", "LLaMA-3.1-405B", "gb200", "GB200", "tensorwise", gb200, 256, 1536, 1, 4, 16, 1, 4, false, false, 813, ""},
		{"llama3-8b", "LLaMA-3-8B", "b200", "B200", "tensorwise", dgx("dgx-b200"), 8, 128, 2, 1, 1, 1, 1, false, true, 30624, ""},
		{"llama3-8b", "LLaMA-3-8B", "b200", "B200", "mxfp8", dgx("dgx-b200"), 8, 128, 2, 1, 1, 1, 1, false, true, 29521, ""},
		{"llama3-405b", "LLaMA-3.1-405B", "b200", "B200", "tensorwise", dgx("dgx-b200"), 128, 64, 1, 4, 8, 2, 8, false, false, 661, ""},
		{"llama3-405b", "LLaMA-3.1-405B", "b200", "B200", "mxfp8", dgx("dgx-b200"), 128, 64, 1, 4, 8, 2, 8, false, false, 624, ""},
		{"llama3-8b", "LLaMA-3-8B", "h100-sxm", "H100", "tensorwise", dgx("dgx-h100"), 8, 128, 1, 1, 1, 1, 1, true, false, 14451, "; the recipe's recomputation of 5 layers not modelled"},
		{"llama3-70b", "LLaMA-3-70B", "h100-sxm", "H100", "tensorwise", dgx("dgx-h100"), 64, 128, 1, 4, 8, 1, 5, false, false, 1602, ""},
		{"llama3-405b", "LLaMA-3.1-405B", "h100-sxm", "H100", "tensorwise", dgx("dgx-h100"), 1024, 512, 1, 8, 8, 2, 8, false, false, 292, ""},
	} {
		zero, gather, exec := 1, c.recipe != "mxfp8", "eager"
		if c.fsdp {
			zero, gather = 3, false
		}
		if c.graphs {
			exec = "cuda_graphs"
		}
		dp := c.gpus / (c.tp * c.pp * c.cp)
		js := fmt.Sprintf(`{"kind":"training","model":%q,"gpu":%q,"cluster":%s,
			"parallel":{"tp":%d,"pp":%d,"cp":%d,"dp":%d,"virtual_stages":%d,"micro_batch":%d,"global_batch":%d,
				"sequence_parallel":%v,"tp_comm_overlap":%v,"zero":%d,"overlap_grad_reduce":true,"overlap_param_gather":%v,"recompute":"none"},
			"seq_len":8192,"dtype":"fp8","fp8_recipe":%q,"grad_dtype":"bf16","execution":%q,"cross_entropy_fusion":"native"}`,
			c.model, c.gpu, c.cluster(c.gpus), c.tp, c.pp, c.cp, dp, c.vp, c.mb, c.gb, c.tp > 1, c.tp > 1, zero, gather, c.recipe, exec)
		res, err := run(ctx, js)
		if err != nil {
			return nil, fmt.Errorf("megatron-bridge %s on %d %s: %w", c.name, c.gpus, c.label, err)
		}
		s := res.Tables[0].Rows.([]training.SummaryRow)[0]
		layout := fmt.Sprintf("TP%d PP%d CP%d VP%d", c.tp, c.pp, c.cp, c.vp)
		if c.fsdp {
			layout = "FSDP"
		}
		precision := "FP8-CS"
		if c.recipe == "mxfp8" {
			precision = "MXFP8"
		}
		rows = append(rows, row(fmt.Sprintf("%s %s on %d %s, %s, micro-batch %d", c.name, precision, c.gpus, c.label, layout, c.mb),
			"tokens_per_s_per_gpu", c.ref, float64(c.gb*8192)/s.StepTimeS/float64(c.gpus), bridgeSrc,
			fmt.Sprintf("step %.2f s: compute %.2f s + exposed comm %.2f s + bubble %.2f s; %s%s",
				s.StepTimeS, s.ComputeS, s.ExposedCommS, s.BubbleS, exec, c.unmodelled)))
	}
	return rows, nil
}

// bridgeMoESrc is the summary of the NeMo 26.08 container (Megatron-Bridge
// 4ab94df, August 2026): MoE pre-training in MXFP8 on DGX-GB200 and
// DGX-GB300, forced balance, token-dropless.
const bridgeMoESrc = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, 26.08 NeMo container, MoE pre-training in MXFP8"

// bridgeEagerMoESrc is the summary of the NeMo 26.04.01 container
// (Megatron-Bridge 21d102f, May 2026; docs/performance-summary-archive.md
// since): MoE pre-training on DGX-H100 and DGX-B200, forced balance,
// token-dropless.
const bridgeEagerMoESrc = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, 26.04.01 NeMo container, MoE pre-training on DGX-H100 and DGX-B200"

// bridgeMoERows are the 26.08 summary's MoE rows for the models with a
// preset (DeepSeek-V3, gpt-oss-120b, Qwen3-30B-A3B, Qwen3-235B-A22B; not
// DeepSeek-V4 and the Nemotron 3 hybrids), run as their recipes at 4ab94df
// configure them (src/megatron/bridge/perf_recipes/{deepseek,gpt_oss,qwen}:
// _enable_hybridep_full_iteration_mxfp8 and its DeepSeek and gpt-oss
// counterparts): MXFP8, the whole iteration captured in CUDA graphs
// (execution cuda_graphs), the dispatch and combine overlapped by the 1F1B
// schedule (overlap_moe_expert_parallel_comm: overlap_ep_comm), HybridEP's
// all-to-alls within the rack's NVLink domain, no recomputation, forced
// balance, the experts' MLP as Transformer Engine's fused operations
// (use_transformer_engine_op_fuser: te_op_fuser), the layouts of the table
// on racks of 64 used GPUs, the attention in FP8 where the recipe sets
// fp8_dot_product_attention (fp8_attention: Qwen3 and gpt-oss on both racks,
// DeepSeek-V3 on GB300 only) and the output layer in MXFP8 where it sets
// fp8_output_proj (DeepSeek-V3, gpt-oss). Not modelled, and said in the
// report: the GB200 DeepSeek-V3 recipe's recomputation of the MLA
// up-projections (mla_up_proj), the recipes' delayed weight gradients
// (delay_wgrad_compute) and the paged stash of expert activations
// (moe_paged_stash, with CPU buffers) that lets rows fit which the memory
// model says do not.
func bridgeMoERows(ctx context.Context) ([]Row, error) {
	var rows []Row
	for _, c := range []struct {
		model, name, gpu         string
		gpus, gb, mb, pp, vp, ep int
		fp8Attention, fp8Head    bool
		ref                      float64
	}{
		{"deepseek-v3", "DeepSeek-V3", "gb200", 256, 4096, 1, 4, 4, 64, false, true, 4912},
		{"gpt-oss-120b", "gpt-oss-120b", "gb200", 64, 1280, 4, 1, 1, 64, true, true, 28672},
		{"qwen3-30b-a3b", "Qwen3-30B-A3B", "gb200", 8, 512, 4, 1, 1, 8, true, false, 39936},
		{"qwen3-235b-a22b", "Qwen3-235B-A22B", "gb200", 256, 8192, 1, 8, 3, 32, true, false, 7280},
		{"deepseek-v3", "DeepSeek-V3", "gb300", 256, 4096, 1, 2, 8, 32, true, true, 6288},
		{"gpt-oss-120b", "gpt-oss-120b", "gb300", 64, 1280, 4, 1, 1, 16, true, true, 33024},
		{"qwen3-30b-a3b", "Qwen3-30B-A3B", "gb300", 8, 512, 8, 1, 1, 8, true, false, 44544},
		{"qwen3-235b-a22b", "Qwen3-235B-A22B", "gb300", 256, 8192, 2, 4, 12, 32, true, false, 8816},
	} {
		model, layout := fmt.Sprintf("%q", c.model), ""
		if c.model == "deepseek-v3" {
			// DeepSeek-V3 trains with its multi-token-prediction module
			// (the recipe's model from the Hugging Face config:
			// num_nextn_predict_layers 1), on 16 virtual stages laid out
			// as set_deepseek_v3_pipeline_model_parallel_layout's (4, 4)
			// layout and the GB300 recipe's string: the embedding and four
			// layers, fourteen of four, the last layer with the MTP module
			// and the loss.
			model = `{"preset":"deepseek-v3","mtp_layers":1}`
			layout = `"pipeline_model_parallel_layout":"Et*4|(t*4|)*14tmL",`
		}
		js := fmt.Sprintf(`{"kind":"training","model":%s,"gpu":%q,"cluster":%s,
			"parallel":{"tp":1,"pp":%d,"dp":%d,"ep":%d,"expert_tp":1,"virtual_stages":%d,%s"micro_batch":%d,"global_batch":%d,
				"zero":1,"overlap_grad_reduce":true,"recompute":"none","overlap_ep_comm":true},
			"seq_len":4096,"dtype":"fp8","fp8_recipe":"mxfp8","grad_dtype":"bf16","execution":"cuda_graphs","cross_entropy_fusion":"native","te_op_fuser":true,"fp8_attention":%v,"fp8_output_proj":%v%s}`,
			model, c.gpu, rackAligned[c.gpu](c.gpus), c.pp, c.gpus/c.pp, c.ep, c.vp, layout, c.mb, c.gb, c.fp8Attention, c.fp8Head, forcedRouting(""))
		r, err := bridgeMoERow(ctx, fmt.Sprintf("%s MXFP8, %d %s, PP%d VP%d EP%d, micro-batch %d", c.name, c.gpus, strings.ToUpper(c.gpu), c.pp, c.vp, c.ep, c.mb),
			bridgeMoESrc, js, c.ref, c.gb, c.gpus, "; GPU parameters derived from the B200's, no table for this part")
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// bridgeEagerMoERows are the 26.04.01 summary's MoE rows on DGX-H100 and
// DGX-B200 for the models with a preset (not DeepSeek-V3, whose B200
// recipe splits its stages by a layout string of its own, nor the Nemotron
// 3 hybrids), run as the release's performance scripts configure them
// (scripts/performance/configs/{qwen,gpt_oss} at 21d102f, the V2 variants
// where the table's global batch is theirs): eager, Transformer Engine's
// op fuser off (utils/overrides.py) so that gpt-oss's clamped activation
// runs as Megatron-Core's eager clamps, the fused loss ("te"), gradients
// reduced in BF16, forced balance, no recomputation but gpt-oss's
// layernorm and moe_act, the all-to-all dispatcher where the recipe keeps
// it, HybridEP where it sets it (across two H100 nodes as DeepEP's
// hierarchical all-to-all), the H100 Qwen3-235B all-to-alls overlapped by
// the 1F1B schedule (moe_a2a_overlap), the embedding and the loss counted
// in its pipeline split. FP8 is current per-tensor scaling on H100
// ("FP8-CS": tensorwise), MXFP8 on B200. The B200 Qwen3-30B-A3B recipe
// captures its attention, router and dispatcher preprocessing in CUDA
// graphs, which the row runs eagerly.
func bridgeEagerMoERows(ctx context.Context) ([]Row, error) {
	var rows []Row
	h100, b200 := dgx("dgx-h100"), dgx("dgx-b200")
	for _, c := range []struct {
		model, name, gpu, precision  string
		cluster                      func(int) string
		gpus, gb, mb, tp, pp, vp, ep int
		recompute                    string // the selective recompute's modules (JSON list), "" none
		overlap, hierarchical        bool
		ref                          float64
	}{
		{"qwen3-30b-a3b", "Qwen3-30B-A3B", "h100-sxm", "FP8-CS", h100, 16, 1024, 1, 1, 1, 1, 16, "", false, true, 8960},
		{"qwen3-235b-a22b", "Qwen3-235B-A22B", "h100-sxm", "FP8-CS", h100, 256, 8192, 1, 2, 8, 4, 32, "", true, false, 1712},
		{"gpt-oss-120b", "gpt-oss-120b", "h100-sxm", "BF16", h100, 64, 1280, 1, 1, 4, 1, 8, `["layernorm","moe_act"]`, false, false, 5824},
		{"gpt-oss-120b", "gpt-oss-120b", "b200", "BF16", b200, 64, 1280, 4, 1, 1, 1, 8, `["layernorm","moe_act"]`, false, false, 13568},
		{"qwen3-30b-a3b", "Qwen3-30B-A3B", "b200", "MXFP8", b200, 8, 512, 4, 1, 1, 1, 8, "", false, false, 27136},
		{"qwen3-235b-a22b", "Qwen3-235B-A22B", "b200", "MXFP8", b200, 256, 8192, 1, 1, 8, 1, 8, "", false, false, 3776},
	} {
		precision := map[string]string{"BF16": `"dtype":"bf16"`, "FP8-CS": `"dtype":"fp8","fp8_recipe":"tensorwise"`, "MXFP8": `"dtype":"fp8","fp8_recipe":"mxfp8"`}[c.precision]
		recompute := `"recompute":"none"`
		if c.recompute != "" {
			recompute = `"recompute":"selective","recompute_modules":` + c.recompute
		}
		routing := ""
		if c.hierarchical {
			routing = `,"routing":{"hierarchical_a2a":true}`
		}
		js := fmt.Sprintf(`{"kind":"training","model":%q,"gpu":%q,"cluster":%s,
			"parallel":{"tp":%d,"pp":%d,"dp":%d,"ep":%d,"expert_tp":1,"virtual_stages":%d,"micro_batch":%d,"global_batch":%d,
				"sequence_parallel":%v,"zero":1,"overlap_grad_reduce":true,"overlap_param_gather":true,%s,"overlap_ep_comm":%v,
				"account_for_embedding_in_pipeline_split":%v,"account_for_loss_in_pipeline_split":%v},
			"seq_len":4096,%s,"grad_dtype":"bf16","cross_entropy_fusion":"te"%s}`,
			c.model, c.gpu, c.cluster(c.gpus), c.tp, c.pp, c.gpus/(c.tp*c.pp), c.ep, c.vp, c.mb, c.gb, c.tp > 1, recompute, c.overlap,
			c.model == "qwen3-235b-a22b", c.model == "qwen3-235b-a22b", precision, forcedRouting(routing))
		suffix := ""
		if c.gpu == "b200" {
			suffix = "; GPU parameters derived, no table for this part"
		}
		label := fmt.Sprintf("%s %s, %d %s, TP%d PP%d VP%d EP%d, micro-batch %d", c.name, c.precision, c.gpus, strings.ToUpper(strings.TrimSuffix(c.gpu, "-sxm")), c.tp, c.pp, c.vp, c.ep, c.mb)
		r, err := bridgeMoERow(ctx, label, bridgeEagerMoESrc, js, c.ref, c.gb, c.gpus, suffix)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// bridgeMoERow runs one summary row's training spec and compares its
// tokens/s per GPU (gb sequences of 4,096 tokens a step over gpus).
func bridgeMoERow(ctx context.Context, label, src, js string, ref float64, gb, gpus int, noteSuffix string) (Row, error) {
	res, err := run(ctx, js)
	if err != nil {
		return Row{}, fmt.Errorf("megatron-bridge %s: %w", label, err)
	}
	s := res.Tables[0].Rows.([]training.SummaryRow)[0]
	return row(label, "tokens_per_s_per_gpu", ref, float64(gb*4096)/s.StepTimeS/float64(gpus), src,
		fmt.Sprintf("step %.2f s (compute %.2f s + exposed comm %.2f s + bubble %.2f s); memory %.0f GB (fits %v)%s",
			s.StepTimeS, s.ComputeS, s.ExposedCommS, s.BubbleS, s.MemoryPeakBytes/1e9, s.Fits, noteSuffix)), nil
}
