package spec

import (
	"strings"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// Training is the "training" kind: one training step of a model on a
// cluster under a parallel layout, simulated over the compute model and the
// network. Tables: summary, ranks, timeline, memory.
type Training struct {
	Header
	// Target: the model, the GPU preset and the cluster (see Target).
	Target
	// Parallel is the layout; see Parallel.
	Parallel Parallel `json:"parallel"`
	// Step: sequence length, gradient type, FP8 recipe, loss and attention
	// implementations (see Step).
	Step
	// Faults: degraded or failed links, failed devices, stragglers.
	Faults Faults `json:"faults,omitempty"`
	// FullSimulation simulates every data-parallel replica instead of one
	// representative for the symmetric ones (same answer, slower).
	FullSimulation bool `json:"full_simulation,omitempty"`
	// RingSteps runs ring collectives step by step (a flow per rank per
	// step, as the collective kind's default) instead of as ring streams
	// (one flow per channel over all its hops): slower, and within 1% on a
	// contended step; for checking the two against each other.
	RingSteps bool `json:"ring_steps,omitempty"`
	// TimelineRanks are the ranks whose tasks the timeline table lists;
	// default the first rank of each pipeline stage of replica 0 and the
	// first TimelineStragglers stragglers' ranks. [-1] lists none.
	TimelineRanks []int `json:"timeline_ranks,omitempty"`
	// Execution is how the host issues kernels: "eager" (default, as
	// Megatron-LM runs: PyTorch issues every kernel from the host) or
	// "cuda_graphs" (each micro-batch's passes replayed from captured
	// graphs). Host overrides its per-kernel CPU costs.
	Execution string    `json:"execution,omitempty"`
	Host      HostCosts `json:"host,omitempty"`
	// Routing assigns a mixture-of-experts model's tokens to experts.
	Routing Routing `json:"routing,omitempty"`
}

// HostCosts override the host's CPU time per kernel issued eagerly, in
// seconds (0 keeps the measured defaults of core/exec/host.go).
type HostCosts struct {
	// ForwardOpS: one forward operator, framework dispatch to the kernel
	// launch (training adds autograd's recording).
	ForwardOpS float64 `json:"forward_op_s,omitempty"`
	// BackwardOpS: one backward operator run by the autograd engine.
	BackwardOpS float64 `json:"backward_op_s,omitempty"`
	// CollectiveS: one NCCL call through torch.distributed.
	CollectiveS float64 `json:"collective_s,omitempty"`
	// MoEOpS: one operator of a mixture-of-experts layer in training
	// (Megatron-Core's module code around it included).
	MoEOpS float64 `json:"moe_op_s,omitempty"`
}

// ExecutionModes are the allowed values of "execution".
func ExecutionModes() []string { return []string{"eager", "cuda_graphs"} }

// validate checks the costs of a training run (autograd: a backward
// pass, Megatron-Core's MoE module code) or an inference one, issued as
// execution says. A cost the run's host never pays would be ignored
// silently: a training step in cuda_graphs replays every task from
// graphs, and inference has no backward pass or MoE module code.
func (h HostCosts) validate(p *Problems, path string, training bool, execution string) {
	for _, f := range []struct {
		name     string
		v        float64
		training bool // read by training runs alone
	}{{"forward_op_s", h.ForwardOpS, false}, {"backward_op_s", h.BackwardOpS, true},
		{"collective_s", h.CollectiveS, false}, {"moe_op_s", h.MoEOpS, true}} {
		field := Field(path, f.name)
		p.InRange(field, f.v, 0, 1)
		switch {
		case f.v == 0:
		case training && execution == "cuda_graphs":
			p.Addf(field, "applies to execution \"eager\": with cuda_graphs a training step replays every task from graphs")
		case f.training && !training:
			p.Addf(field, "applies to training (its backward pass and mixture-of-experts module code), not to this kind")
		}
	}
}

// Defaults fills optional fields.
func (s *Training) Defaults() {
	if s.Execution == "" {
		s.Execution = "eager"
	}
	s.Target.defaults()
	s.Step.defaults()
	s.Cluster.Defaults()
	s.Parallel.Defaults()
	s.Routing.Defaults(s.Seed)
	s.Faults.Defaults()
}

// Validate reports every problem.
func (s *Training) Validate(p *Problems) {
	g, ok := s.Target.validate(p, &s.Faults)
	s.Step.validate(p, s.DType, g, ok)
	s.Parallel.Validate(p, "parallel")
	p.OneOf("execution", s.Execution, ExecutionModes())
	s.Host.validate(p, "host", true, s.Execution)
	s.Routing.Validate(p, "routing")
}

// Step is how a training step computes, shared by the kinds that simulate
// one (training, parallel_search).
type Step struct {
	// SeqLen is tokens per sequence; default 2048.
	SeqLen int `json:"seq_len,omitempty"`
	// GradDType of the accumulated and reduced gradients (default "fp32",
	// Megatron's main grads, which every weight-gradient GEMM reads and
	// writes: its gradient-accumulation fusion); the math's is Target's DType.
	GradDType string `json:"grad_dtype,omitempty"`
	// FP8Recipe, with an 8-bit dtype, is Megatron-Core's --fp8-recipe:
	// "delayed" (default, Megatron-Core's: per-tensor scales from the amax
	// history, the forward GEMM with fast accumulation, the gradients'
	// with a split accumulator), "tensorwise" (per-tensor current scaling:
	// the same GEMMs, each cast after a pass that takes its tensor's amax)
	// or "blockwise" (per-block scales, every GEMM promoting per 128
	// elements: DeepSeek-V3's recipe), or on Blackwell "mxfp8" (a scale
	// per 32 elements, applied in the MMA; each cast writes rowwise and
	// columnwise copies).
	FP8Recipe string `json:"fp8_recipe,omitempty"`
	// CrossEntropyFusion is the loss's implementation: "none" (default,
	// Megatron-LM's: PyTorch ops over fp32 logits), "native" (Megatron's
	// jit-fused kernels) or "te" (Transformer Engine's online-softmax
	// kernels): --cross-entropy-loss-fusion and --cross-entropy-fusion-impl.
	CrossEntropyFusion string `json:"cross_entropy_fusion,omitempty"`
	// MakeVocabSizeDivisibleBy is Megatron-LM's
	// --make-vocab-size-divisible-by: the vocabulary is padded to a
	// multiple of it times the TP degree before it is split (default 128,
	// Megatron-LM's; 1 pads only to a multiple of TP).
	MakeVocabSizeDivisibleBy int `json:"make_vocab_size_divisible_by,omitempty"`
	// UnfusedAttention uses Megatron's unfused attention (no FlashAttention).
	UnfusedAttention bool `json:"unfused_attention,omitempty"`
	// FlashAttention2 runs the attention as FlashAttention-2's kernels
	// (flash-attn 2, as Transformer Engine does with NVTE_FUSED_ATTN=0)
	// instead of the part's fastest fused attention (model.Run.FlashAttention2).
	FlashAttention2 bool `json:"flash_attention_2,omitempty"`
	// NoGradAccumulationFusion is Megatron-LM's
	// --no-gradient-accumulation-fusion (Megatron-Core's
	// gradient_accumulation_fusion false, its TransformerConfig default):
	// each weight-gradient GEMM writes a 16-bit gradient once instead of
	// adding into the grad_dtype main gradient.
	NoGradAccumulationFusion bool `json:"no_gradient_accumulation_fusion,omitempty"`
	// MoERouterDType is Megatron-Core's --moe-router-dtype: "fp32" runs a
	// mixture-of-experts router's GEMM and scores in FP32 (its input and
	// weight cast up, its input gradient cast back); "" (default) in the
	// math's type.
	MoERouterDType string `json:"moe_router_dtype,omitempty"`
	// FP8Dispatch, in FP8 training, sends the mixture-of-experts dispatch
	// all-to-alls in FP8 with per-128 scales, quantized before them
	// (DeepSeek-V3's framework); false (default) in the activation type,
	// as Megatron-Core's dispatchers do (model.Run.FP8Dispatch).
	FP8Dispatch bool `json:"fp8_dispatch,omitempty"`
	// TEOpFuser is Megatron-Core's --use-transformer-engine-op-fuser: a
	// mixture-of-experts layer's expert MLP runs as Transformer Engine's
	// fused operations, its clamped activation one kernel
	// (model.Run.TEOpFuser).
	TEOpFuser bool `json:"te_op_fuser,omitempty"`
	// FP8Attention is Megatron-Core's --fp8-dot-product-attention: in FP8
	// training, the attention's matmuls in FP8 with its inputs and output
	// cast (model.Run.FP8Attention).
	FP8Attention bool `json:"fp8_attention,omitempty"`
	// FP8OutputProj is Megatron-Core's fp8_output_proj: in MXFP8 training,
	// the output layer's GEMMs in MXFP8 (model.Run.FP8OutputProj).
	FP8OutputProj bool `json:"fp8_output_proj,omitempty"`
}

func (s *Step) defaults() {
	if s.SeqLen == 0 {
		s.SeqLen = 2048
	}
	if s.GradDType == "" {
		s.GradDType = string(hw.FP32)
	}
	if s.CrossEntropyFusion == "" {
		s.CrossEntropyFusion = model.CrossEntropyUnfused
	}
	if s.MakeVocabSizeDivisibleBy == 0 {
		s.MakeVocabSizeDivisibleBy = 128
	}
}

// validateRouterDType checks a moe_router_dtype: "" (the math's type) or
// "fp32", the one Megatron-Core's --moe-router-dtype choice modelled.
func validateRouterDType(p *Problems, d string) {
	if d != "" {
		p.OneOf("moe_router_dtype", d, []string{string(hw.FP32)})
	}
}

// validate checks the step's options for math in dtype on the target's
// GPU g (ok: g resolved).
func (s *Step) validate(p *Problems, dtype string, g hw.GPU, ok bool) {
	p.OneOf("grad_dtype", s.GradDType, []string{"fp32", "bf16", "fp16"})
	if hw.DType(dtype) == hw.FP4 {
		p.Addf("dtype", "fp4 (NVFP4) is modelled for inference and serving, not training; train in fp8, bf16, fp16, tf32 or fp32")
	}
	if s.FP8Recipe != "" {
		p.OneOf("fp8_recipe", s.FP8Recipe, model.FP8Recipes())
		if hw.DType(dtype).Bytes() != 1 {
			p.Addf("fp8_recipe", "applies to FP8 training only: dtype is %q (use \"fp8\", or leave fp8_recipe out)", dtype)
		}
		if ok && s.FP8Recipe == model.FP8MXFP8 && !g.BlockScaledMMA() {
			p.Addf("fp8_recipe", "mxfp8's block scales are applied by Blackwell's tensor cores (%s), which %s lacks: use delayed, tensorwise or blockwise",
				strings.Join(hw.BlockScaledPresets(), ", "), g.Name)
		}
	}
	p.OneOf("cross_entropy_fusion", s.CrossEntropyFusion, model.CrossEntropyFusions())
	p.IntInRange("make_vocab_size_divisible_by", s.MakeVocabSizeDivisibleBy, 1, 1<<16)
	validateRouterDType(p, s.MoERouterDType)
	if s.FP8Dispatch && hw.DType(dtype).Bytes() != 1 {
		p.Addf("fp8_dispatch", "applies to FP8 training only: dtype is %q (use \"fp8\", or leave fp8_dispatch out)", dtype)
	}
	if s.FP8Attention {
		switch {
		case hw.DType(dtype).Bytes() != 1:
			p.Addf("fp8_attention", "applies to FP8 training only: dtype is %q (use \"fp8\", or leave fp8_attention out)", dtype)
		case s.UnfusedAttention, s.FlashAttention2:
			p.Addf("fp8_attention", "runs on Transformer Engine's fused attention, which unfused_attention and flash_attention_2 turn off (leave one out)")
		}
	}
	if s.FP8OutputProj && (hw.DType(dtype).Bytes() != 1 || s.FP8Recipe != model.FP8MXFP8) {
		p.Addf("fp8_output_proj", "applies to MXFP8 training only (dtype \"fp8\", fp8_recipe \"mxfp8\", as Megatron-Core requires): dtype is %q, fp8_recipe %q", dtype, s.FP8Recipe)
	}
	p.IntInRange("seq_len", s.SeqLen, 1, 1<<24)
}

// Target is what a run is of and on: the model, the GPU preset, the
// cluster and the number type. The kinds that simulate a model on a
// cluster embed it first.
type Target struct {
	// Model: a preset name or hyper-parameters (see Model).
	Model Model `json:"model"`
	// GPU: a preset name (eidolon.presets.gpus()), e.g. "a100-80gb-sxm",
	// or a preset with figures changed (see GPU).
	GPU     GPU     `json:"gpu"`
	Cluster Cluster `json:"cluster"`
	// DType of the math, weights, activations and KV cache or SSM state;
	// default "bf16".
	DType string `json:"dtype,omitempty"`
}

func (t *Target) defaults() {
	if t.DType == "" {
		t.DType = string(hw.BF16)
	}
}

// validate checks the target with the run's faults and returns its GPU
// when that resolved.
func (t *Target) validate(p *Problems, f *Faults) (hw.GPU, bool) {
	dtype := t.DType
	g, ok := t.GPU.Validate(p, "gpu")
	dtypes := make([]string, len(hw.DTypes))
	for i, d := range hw.DTypes {
		dtypes[i] = string(d)
	}
	if p.OneOf("dtype", dtype, dtypes) && ok && g.Peak(hw.DType(dtype)) == 0 {
		p.Addf("dtype", "%s has no %s math units; choose one of its types", t.GPU, dtype)
	}
	t.Model.Validate(p, "model")
	t.Cluster.Validate(p, "cluster")
	f.Validate(p, "faults")
	return g, ok
}

// SimulatesEveryReplica says whether the step simulates every
// data-parallel replica: full_simulation, or distributed-optimizer
// instances, whose groups differ from replica to replica.
func (s *Training) SimulatesEveryReplica() bool {
	return s.FullSimulation || s.Parallel.DistributedOptimizerInstances > 1
}
