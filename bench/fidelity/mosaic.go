package fidelity

import (
	"context"
	"fmt"

	"github.com/eidolon-sim/eidolon/core/scenario/training"
)

// mosaicSrc is the MPT training benchmarks of MosaicML's LLM Foundry
// (scripts/train/benchmarking/README.md, tables "A100 80GB with 1600 Gbps
// node-node interconnect (RoCE)" and "H100 80GB BF16"): throughput in
// tokens/s over every GPU of the run, torch FSDP FULL_SHARD with
// limit_all_gathers, amp_bf16 (MP mode DEFAULT), the runs' activation
// checkpointing, sweep.sh's image mosaicml/pytorch:2.0.1_cu118 (PyTorch
// 2.0.1 built on CUDA 11.8) and the MPT yamls' attn_impl triton (the
// Triton FlashAttention of 2022-23, llmfoundry/models/layers/
// flash_attn_triton.py, compiled by the pre-MLIR Triton: Ampere's mma.sync
// on either GPU, so the rows run flash_attention_2, the kernels built on
// it, which on Hopper run at hw.GPU.SyncMMAFraction of the main loop).
const mosaicSrc = "mosaicml/llm-foundry scripts/train/benchmarking/README.md (MPT, FSDP FULL_SHARD, amp_bf16, attn_impl triton, PyTorch 2.0.1 on CUDA 11.8)"

// mptShape is an MPT yaml's d_model, n_heads and n_layers
// (scripts/train/yamls/pretrain/mpt-*.yaml: expansion_ratio 4, vocab 50368,
// no biases, ALiBi, tied embeddings).
var mptShape = map[string][3]int{
	"350m": {1024, 16, 24}, "760m": {1536, 12, 24}, "1b": {2048, 16, 24}, "3b": {2560, 20, 32},
	"7b": {4096, 32, 32}, "13b": {5120, 40, 40}, "30b": {7168, 56, 48}, "70b": {8192, 64, 80},
}

// MosaicRow is one row of the benchmark tables.
type MosaicRow struct {
	GPU, Size            string
	Seq, GPUs, MB, Accum int
	Checkpointing        bool
	TokensPerS           float64
}

// MosaicRows is a cut of both tables: every model size at 2,048 tokens,
// and longer sequences for the 1B, 3B and 7B models.
var MosaicRows = []MosaicRow{
	{"a100", "350m", 2048, 8, 32, 2, false, 470263}, {"a100", "760m", 2048, 8, 24, 2, false, 259472},
	{"a100", "1b", 2048, 8, 14, 4, false, 164109}, {"a100", "3b", 2048, 8, 10, 2, false, 86491},
	{"a100", "7b", 2048, 8, 6, 2, false, 37130}, {"a100", "13b", 2048, 8, 2, 3, false, 18097},
	{"a100", "30b", 2048, 8, 3, 21, true, 7330}, {"a100", "7b", 4096, 8, 16, 2, true, 29472},
	{"a100", "3b", 8192, 8, 3, 6, false, 61567}, {"a100", "1b", 32768, 8, 1, 4, false, 50207},
	{"a100", "7b", 32768, 8, 2, 2, true, 13382},
	{"h100", "760m", 2048, 8, 24, 2, false, 505177}, {"h100", "1b", 2048, 8, 14, 1, false, 363645},
	{"h100", "3b", 2048, 16, 10, 3, false, 386285}, {"h100", "7b", 2048, 8, 6, 1, false, 85144},
	{"h100", "13b", 2048, 8, 2, 1, false, 38336}, {"h100", "30b", 2048, 8, 3, 21, true, 16022},
	{"h100", "70b", 2048, 64, 8, 4, true, 66523}, {"h100", "7b", 4096, 8, 16, 2, true, 68893},
	{"h100", "1b", 8192, 8, 3, 4, false, 233256}, {"h100", "7b", 32768, 8, 2, 2, true, 26550},
}

// mosaicSpec runs a row as FSDP FULL_SHARD runs it: data parallelism over
// every GPU with ZeRO-3 (each layer's weights gathered for its forward and
// backward, gradients reduce-scattered under the backward), the run's
// micro-batch and accumulation, full recomputation where it checkpoints.
// MPT is the GPT family's block (LayerNorm, GELU, 4× MLP) at the yaml's
// shape, its embedding tied to the output layer (its vocabulary of 50,368
// unpadded: LLM Foundry is no Megatron); the family's biases
// (which MPT leaves out) stay, well under 1 % of the work.
func mosaicSpec(r MosaicRow) string {
	gpu, preset := "a100-80gb-sxm", "dgx-a100"
	if r.GPU == "h100" {
		gpu, preset = "h100-sxm", "dgx-h100"
	}
	s := mptShape[r.Size]
	rec := "none"
	if r.Checkpointing {
		rec = "full"
	}
	return fmt.Sprintf(`{"kind":"training","model":{"family":"gpt","hidden":%d,"heads":%d,"layers":%d,"ffn_hidden":%d,"vocab":50368,"tied_embeddings":true,"positions":%d},
		"gpu":%q,"cluster":{"preset":%q,"nodes":%d},
		"parallel":{"tp":1,"pp":1,"micro_batch":%d,"global_batch":%d,"recompute":%q,"zero":3,"overlap_grad_reduce":true},
		"seq_len":%d,"dtype":"bf16","make_vocab_size_divisible_by":1,"flash_attention_2":true}`, s[0], s[1], s[2], 4*s[0], r.Seq, gpu, preset, r.GPUs/8, r.MB, r.MB*r.Accum*r.GPUs, rec, r.Seq)
}

// MosaicFidelityRows runs MosaicRows.
func MosaicFidelityRows(ctx context.Context) ([]Row, error) {
	var rows []Row
	for _, r := range MosaicRows {
		res, err := run(ctx, mosaicSpec(r))
		if err != nil {
			return nil, fmt.Errorf("mpt-%s %s: %w", r.Size, r.GPU, err)
		}
		s := res.Tables[0].Rows.([]training.SummaryRow)[0]
		tps := float64(r.MB*r.Accum*r.GPUs*r.Seq) / s.StepTimeS
		ac := ""
		if r.Checkpointing {
			ac = ", checkpointing"
		}
		rows = append(rows, row(fmt.Sprintf("MPT-%s on %d %s, sequence %d, micro-batch %d%s", r.Size, r.GPUs, map[string]string{"a100": "A100 80GB", "h100": "H100"}[r.GPU], r.Seq, r.MB, ac),
			"tokens_per_s", r.TokensPerS, tps, mosaicSrc,
			fmt.Sprintf("step %.2f s: compute %.2f s + exposed comm %.2f s; MFU %.0f%%", s.StepTimeS, s.ComputeS, s.ExposedCommS, 100*s.MFU)))
	}
	return rows, nil
}
