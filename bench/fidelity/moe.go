package fidelity

import (
	"context"
	"fmt"

	"github.com/eidolon-sim/eidolon/core/scenario/training"
)

// Mixture-of-experts rows: published training throughput of MoE models,
// run through the training scenario with the source's layout. The
// mechanism is the one every row shares, plus the MoE model (grouped
// expert GEMMs at the tile model's efficiency per expert, all-to-all-v
// dispatch and combine as flows, not overlapped with compute:
// Megatron-Core's all-to-all token dispatcher).
const (
	qwenSrc     = "yanring/Megatron-MoE-ModelZoo, best_practice/Qwen3/readme.md (Megatron-Core, A2A dispatcher, H100)"
	deepseekSrc = "DeepSeek-AI 2024 (arXiv 2412.19437), §1: 180K H800 GPU-hours per trillion tokens on 2,048 H800s"
)

// MoERows computes the MoE fidelity rows.
func MoERows(ctx context.Context) ([]Row, error) {
	var rows []Row
	// Qwen3-235B-A22B, 256 H100s, bf16, sequence 4,096, global batch
	// 2,048, micro-batch 1, TP 2, PP 32, EP 8, A2A dispatcher, recompute
	// "norm, act": 24.2 s per step, 200 TFLOP/s per GPU. Eidolon's expert
	// TP is the TP degree and EP must divide DP (4): the run uses EP 4 with
	// expert TP 2 (the same expert weights and FLOPs per GPU as EP 8,
	// ETP 1), 2 virtual stages (94 layers do not fill 32·3 chunks evenly;
	// the bubble is 3% either way) and selective recomputation.
	js := `{"kind":"training","model":"qwen3-235b-a22b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":32},
		"parallel":{"tp":2,"pp":32,"dp":4,"ep":4,"micro_batch":1,"global_batch":2048,"virtual_stages":2,
		"sequence_parallel":true,"recompute":"selective","zero":1},"seq_len":4096,"timeline_ranks":[-1]}`
	res, err := run(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("qwen3-235b: %w", err)
	}
	s := res.Tables[0].Rows.([]training.SummaryRow)[0]
	note := fmt.Sprintf("compute %.1f s + exposed comm %.1f s + bubble %.1f s; memory %.0f GB (fits %v); EP 4 × expert TP 2 for EP 8 × ETP 1",
		s.ComputeS, s.ExposedCommS, s.BubbleS, s.MemoryPeakBytes/1e9, s.Fits)
	rows = append(rows, row("Qwen3-235B-A22B, 256 H100, TP2 PP32 EP8", "step_time_s", 24.2, s.StepTimeS, qwenSrc, note))
	rows = append(rows, row("Qwen3-235B-A22B, 256 H100, TP2 PP32 EP8", "tflops_per_gpu", 200, s.ModelFLOPs/s.StepTimeS/float64(s.GPUs)/1e12, qwenSrc,
		"model FLOPs (matmuls of the active parameters and attention) per second per GPU"))

	// DeepSeek-V3 on 2,048 H800s: PP 16, EP 64 (8 nodes), ZeRO-1 DP, FP8
	// GEMMs, sequence 4,096, batch 15,360, node-limited routing (≤ 4 nodes
	// per token) with DeepEP-style hierarchical all-to-alls that send each
	// token once per node (§3.2.2). Its DualPipe schedule, which overlaps
	// dispatch and combine with another micro-batch's compute, is not
	// modelled (1F1B). Recomputation is selective: DeepSeek recomputes
	// RMSNorm and the MLA up-projections only, not the MoE (§3.3.3); its
	// FP8 activation caching, which makes that fit in 80 GB, is not
	// modelled, so the memory column exceeds the HBM.
	js = `{"kind":"training","model":"deepseek-v3","gpu":"h800","cluster":{"preset":"dgx-h800","nodes":256},
		"parallel":{"tp":1,"pp":16,"dp":128,"ep":64,"micro_batch":1,"global_batch":15360,"zero":1,"recompute":"selective"},
		"seq_len":4096,"dtype":"fp8","routing":{"hierarchical_a2a":true,"node_limit":4},"timeline_ranks":[-1]}`
	if res, err = run(ctx, js); err != nil {
		return nil, fmt.Errorf("deepseek-v3: %w", err)
	}
	s = res.Tables[0].Rows.([]training.SummaryRow)[0]
	tokens := 15360.0 * 4096
	gpuHours := s.StepTimeS * 2048 / 3600 * 1e12 / tokens
	note = fmt.Sprintf("step %.1f s (compute %.1f s + exposed comm %.1f s + bubble %.1f s); no DualPipe overlap; memory %.0f GB (fp8 activation caching not modelled)",
		s.StepTimeS, s.ComputeS, s.ExposedCommS, s.BubbleS, s.MemoryPeakBytes/1e9)
	rows = append(rows, row("DeepSeek-V3, 2,048 H800, PP16 EP64", "gpu_hours_per_trillion_tokens", 180e3, gpuHours, deepseekSrc, note))
	return rows, nil
}
