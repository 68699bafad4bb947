package spec

import (
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// Operators is the "operators" kind: every operator of one model pass on
// one GPU (one tensor-parallel rank), with its FLOPs, traffic per memory
// level, what bounds it and its time.
type Operators struct {
	Header
	// GPU: a preset name (eidolon.presets.gpus()), e.g. "h100-sxm", or a
	// preset with figures changed (see GPU).
	GPU GPU `json:"gpu"`
	// Model: a preset name or hyper-parameters (see Model).
	Model Model `json:"model"`
	// Phase: "training" (forward, backward, optimizer), "prefill" or
	// "decode" (one new token per sequence). Default "training".
	Phase string `json:"phase,omitempty"`
	// Batch is sequences per pass (the micro-batch in training); default 1,
	// at most 2^20 (and batch·seq_len·max(seq_len, kv_len)·width ≤ 2^62).
	Batch int `json:"batch,omitempty"`
	// SeqLen is tokens per sequence in training and prefill; default 2048,
	// at most 2^24.
	SeqLen int `json:"seq_len,omitempty"`
	// KVLen is the tokens already cached per sequence in decode; default
	// 2048, at most 2^26.
	KVLen int `json:"kv_len,omitempty"`
	// DType of the math: fp32, tf32, bf16, fp16, fp8, int8, fp4 (NVFP4,
	// prefill and decode on Blackwell); default "bf16".
	DType string `json:"dtype,omitempty"`
	// TP is the Megatron tensor-parallel degree (the ops of one rank); default 1.
	TP int `json:"tp,omitempty"`
	// SequenceParallel shards norms and residuals along the sequence.
	SequenceParallel bool `json:"sequence_parallel,omitempty"`
	// Recompute: "none" (default), "selective" or "full" (training).
	Recompute string `json:"recompute,omitempty"`
	// UnfusedAttention materializes the attention scores instead of FlashAttention.
	UnfusedAttention bool `json:"unfused_attention,omitempty"`
	// FlashAttention2 runs FlashAttention-2's kernels, as the training kind's.
	FlashAttention2 bool `json:"flash_attention_2,omitempty"`
	// MoERouterDType: "fp32" runs a training pass's mixture-of-experts
	// router in FP32, as the training kind's moe_router_dtype.
	MoERouterDType string `json:"moe_router_dtype,omitempty"`
}

// Defaults fills optional fields.
func (s *Operators) Defaults() {
	if s.Phase == "" {
		s.Phase = string(model.Training)
	}
	if s.Batch == 0 {
		s.Batch = 1
	}
	if s.SeqLen == 0 {
		s.SeqLen = 2048
	}
	if s.KVLen == 0 {
		s.KVLen = 2048
	}
	if s.DType == "" {
		s.DType = string(hw.BF16)
	}
	if s.TP == 0 {
		s.TP = 1
	}
	if s.Recompute == "" {
		s.Recompute = string(model.RecomputeNone)
	}
}

// Validate reports every problem.
func (s *Operators) Validate(p *Problems) {
	gpu, okGPU := s.GPU.Validate(p, "gpu")
	n := p.Len()
	s.Model.Validate(p, "model")
	if p.Len() > n {
		return
	}
	dtypes := make([]string, len(hw.DTypes))
	for i, d := range hw.DTypes {
		dtypes[i] = string(d)
	}
	if !p.OneOf("dtype", s.DType, dtypes) {
		return
	}
	if okGPU && gpu.Peak(hw.DType(s.DType)) == 0 {
		p.Addf("dtype", "%s has no %s math units; choose one of its types", s.GPU, s.DType)
	}
	if hw.DType(s.DType) == hw.FP4 && s.Phase == string(model.Training) {
		p.Addf("dtype", "fp4 (NVFP4) is modelled for the prefill and decode phases, not training")
	}
	c, _ := s.Model.Resolve()
	n = p.Len()
	for _, fp := range c.CheckRun(s.Run()) {
		p.Addf(fp.Path, "%s", fp.Message)
	}
	if p.Len() > n {
		return
	}
	validateRouterDType(p, s.MoERouterDType)
	p.IntInRange("batch", s.Batch, 1, 1<<20)
	p.IntInRange("seq_len", s.SeqLen, 1, 1<<24)
	p.IntInRange("kv_len", s.KVLen, 0, 1<<26)
	p.IntInRange("tp", s.TP, 1, 1<<12)
	if p.Len() > n {
		return
	}
	// Operator shapes multiply batch, both sequence lengths and the widest
	// dimension (attention scores: batch·heads·seq·kv); keep that product
	// (and so every FLOP count) far inside int64 and float64's exact range.
	ctx := float64(s.SeqLen)
	if s.Phase == "decode" {
		ctx = 1
	}
	wide := float64(max(c.Hidden, c.FFNHidden, c.Vocab, c.Heads*max(c.HeadDim, 1)))
	if w := float64(s.Batch) * ctx * float64(max(s.SeqLen, s.KVLen)) * wide; w > 1<<62 {
		p.Addf("batch", "batch·seq_len·max(seq_len, kv_len)·width = %.3g exceeds 2^62: the pass is too large to count (batch %d, seq_len %d, kv_len %d)", w, s.Batch, s.SeqLen, s.KVLen)
	}
}

// Run is the work the spec describes, for package model. A training pass
// accumulates its weight gradients into fp32 buffers, as the training
// kind's default (grad_dtype "fp32") does.
func (s *Operators) Run() model.Run {
	r := model.Run{
		Phase: model.Phase(s.Phase), Batch: s.Batch, SeqLen: s.SeqLen, KVLen: s.KVLen,
		TP: s.TP, SequenceParallel: s.SequenceParallel, Recompute: model.Recompute(s.Recompute),
		DType: hw.DType(s.DType), UnfusedAttention: s.UnfusedAttention, FlashAttention2: s.FlashAttention2, RouterDType: hw.DType(s.MoERouterDType),
	}
	if r.Phase == model.Training {
		r.GradDType = hw.FP32
	}
	return r
}
