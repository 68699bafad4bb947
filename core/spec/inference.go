package spec

import (
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
)

// Inference is the "inference" kind: a batch of requests served by
// tensor- and pipeline-parallel replicas: prefill of the prompts, then
// decode one token per step against the KV cache / SSM state. Tables:
// summary, ranks, timeline, memory.
type Inference struct {
	Header
	// Target: the model, the GPU preset and the cluster (see Target).
	Target
	// TP and PP degrees of one replica (default 1); Replicas serve
	// independent shares of the batch (default 1).
	TP       int `json:"tp,omitempty"`
	PP       int `json:"pp,omitempty"`
	Replicas int `json:"replicas,omitempty"`
	// EP is the expert-parallel degree of a mixture-of-experts model
	// (default 1): EP consecutive replicas share their experts and exchange
	// tokens by all-to-all (wide EP); it must divide replicas and the
	// experts. HierarchicalA2A as in Routing.
	EP              int  `json:"ep,omitempty"`
	HierarchicalA2A bool `json:"hierarchical_a2a,omitempty"`
	// LowLatencyA2A runs the dispatch and combine as DeepEP's low-latency
	// (decode) kernels: every pair sent directly, each kernel taking a
	// fixed time beyond its bytes (net.DeepEPLowLatencyDispatchS and
	// ...CombineS, fitted on DeepEP's published times). Needs ep >= 2,
	// not with hierarchical_a2a.
	LowLatencyA2A bool `json:"low_latency_a2a,omitempty"`
	// EnableExpertParallel spreads a mixture-of-experts model's experts over
	// each replica's TP ranks, whole (vLLM's --enable-expert-parallel
	// without data-parallel attention), instead of a TP share of every
	// expert on each rank; tp must divide the experts.
	EnableExpertParallel bool `json:"enable_expert_parallel,omitempty"`
	// TwoBatchOverlap splits each pass's sequences into two micro-batches
	// that overlap each other's expert-parallel all-to-alls (SGLang's
	// --enable-two-batch-overlap); needs ep > 1 and pp 1.
	TwoBatchOverlap bool `json:"two_batch_overlap,omitempty"`
	// RedundantExperts are extra expert slots under wide EP (DeepSeek's
	// EPLB, SGLang's --ep-num-redundant-experts): the busiest experts
	// replicated so that experts + redundant_experts slots spread evenly
	// over the ep ranks (256 + 32 = 288 over 72 GPUs). Routing fills every
	// slot alike, as EPLB's placement aims to; each rank holds its slots'
	// weights.
	RedundantExperts int `json:"redundant_experts,omitempty"`
	// DecodeOnly runs the GPUs as a disaggregated deployment's decode
	// instance: every prompt's KV cache arrives filled from a prefill
	// instance (SGLang's and vLLM's prefill-decode disaggregation, the
	// decode nodes of DeepSeek-V3's serving, arXiv 2412.19437 §3.4), so no
	// prefill runs here. TTFT is 0 (the first token comes with the cache),
	// each request generates output_tokens − 1 more, and the memory holds
	// the decode steps' activations beside the weights and the cache.
	DecodeOnly bool `json:"decode_only,omitempty"`
	// Batch is the number of requests (sequences) per replica; default 1.
	Batch int `json:"batch,omitempty"`
	// PromptTokens and OutputTokens per request; default 512 and 128.
	PromptTokens int `json:"prompt_tokens,omitempty"`
	OutputTokens int `json:"output_tokens,omitempty"`
	// Requests, if set, replaces batch, prompt_tokens and output_tokens with
	// groups of requests of different lengths (static batching: one
	// prefill per group, then decode steps over the unfinished requests).
	Requests         []RequestGroup `json:"requests,omitempty"`
	UnfusedAttention bool           `json:"unfused_attention,omitempty"`
	// FlashAttention2 as in Training.
	FlashAttention2 bool   `json:"flash_attention_2,omitempty"`
	Faults          Faults `json:"faults,omitempty"`
	FullSimulation  bool   `json:"full_simulation,omitempty"`
	// RingSteps as in Training.
	RingSteps bool `json:"ring_steps,omitempty"`
	// TimelineRanks as in Training; default the first rank of each stage of
	// replica 0 and the first TimelineStragglers stragglers' ranks.
	TimelineRanks []int `json:"timeline_ranks,omitempty"`
	// Execution: "cuda_graphs" (default: decode steps replayed from CUDA
	// graphs, prefill eager, as vLLM, SGLang and TensorRT-LLM serve) or
	// "eager" (every kernel issued by the host, as Hugging Face
	// transformers or a framework without graph capture runs). Host
	// overrides the per-kernel CPU costs.
	Execution string    `json:"execution,omitempty"`
	Host      HostCosts `json:"host,omitempty"`
	// CustomAllReduce runs the tensor-parallel all-reduces as the serving
	// engines do (vLLM's custom all-reduce, also in SGLang and
	// TensorRT-LLM: one kernel reading its NVLink peers' buffers, below
	// 8 MiB on 2, 4, 6 or 8 GPUs; NCCL otherwise; net.Custom). Default:
	// true with cuda_graphs or with TensorRT-LLM's rules (its built engine
	// carries the all-reduce plugin however it is launched), false with
	// eager otherwise (PyTorch's NCCL all-reduce, as Hugging Face
	// transformers runs).
	CustomAllReduce *bool `json:"custom_all_reduce,omitempty"`
	// CustomAllReduceEngine is whose rules pick between the custom kernels
	// and NCCL (net.CustomEngines): "vllm" (default; SGLang's are the
	// same: below 8 MiB) or "tensorrt_llm" (a built engine's all-reduce
	// plugin: up to 8,000,000 bytes, 16,000,000 on 2 GPUs, one-shot below
	// 500,000 bytes on more than 4).
	CustomAllReduceEngine string `json:"custom_all_reduce_engine,omitempty"`
	// FusedAddNorm runs each residual add inside the RMSNorm after it, one
	// vectorized kernel, as vLLM runs LLaMA-style blocks today
	// (fused_add_rms_norm; SGLang's and torch.compile's fuse them too).
	// Default false: the add and the scalar norm kernel Vidur profiled
	// (the kernels the compute model is fitted on), two kernels each.
	FusedAddNorm bool `json:"fused_add_norm,omitempty"`
	// DecodeAttention is the decode-attention kernel (DecodeAttentionKernels):
	// "flash_decoding" (default: each sequence's cache split until the SMs
	// are full and the pieces combined by a second kernel, as vLLM and
	// SGLang run FlashAttention's and FlashInfer's) or "xqa" (TensorRT-LLM's
	// XQA kernel as its runtime's multi-block mode runs it by default: a few
	// large pieces per sequence, merged in the same kernel; grouped- and
	// multi-query attention only: multi-head and MLA models keep their
	// default decode attention).
	DecodeAttention string `json:"decode_attention,omitempty"`
	// KVCacheDType is the KV cache's element type (vLLM's --kv-cache-dtype):
	// "auto" (default: the activations' type, 16-bit) or one of
	// KVCacheDTypes; "fp8" halves the cache a token takes and the bytes
	// decode attention reads.
	KVCacheDType string `json:"kv_cache_dtype,omitempty"`
	// WeightDType stores the linear layers' weights in a narrower type than
	// dtype (weight-only quantization, as GPTQ/AWQ checkpoints served by
	// vLLM's Marlin kernels): "auto" (default: dtype) or one of
	// WeightDTypes; the embedding, the output layer and a MoE router stay
	// in dtype; "mxfp4" (4.25 bits) stores the routed experts alone, as
	// gpt-oss's checkpoints do.
	WeightDType string `json:"weight_dtype,omitempty"`
}

// ExpertSlots checks redundant_experts r for model m's experts spread
// over ep ranks, and returns the expert slots the ranks hold: the experts
// plus r when r is valid, the experts otherwise.
func ExpertSlots(p *Problems, m model.Config, r, ep int) int {
	switch ep = max(ep, 1); {
	case r == 0:
	case r < 0 || r > m.Experts:
		p.Addf("redundant_experts", "must be between 0 and the experts (%d), got %d", m.Experts, r)
	case !m.IsMoE() || ep < 2:
		p.Addf("redundant_experts", "spreads replicated experts over the ep ranks: needs a mixture-of-experts model and ep >= 2, got ep %d", ep)
	case (m.Experts+r)%ep != 0:
		p.Addf("ep", "must divide the experts plus redundant_experts (%d + %d = %d), got %d", m.Experts, r, m.Experts+r, ep)
	default:
		return m.Experts + r
	}
	return m.Experts
}

// WeightDTypes lists the allowed weight_dtype values.
func WeightDTypes() []string { return []string{"auto", "fp8", "int8", "int4", "mxfp4"} }

// validateWeightDType checks weight_dtype at path against the math type
// and the model m (mxfp4 quantizes routed experts only).
func validateWeightDType(p *Problems, path, w, dtype string, m Model) {
	if !p.OneOf(path, w, WeightDTypes()) || w == "auto" {
		return
	}
	if c, ok := m.Resolve(); ok && w == string(hw.MXFP4) && !c.IsMoE() {
		p.Addf(path, "mxfp4 quantizes a mixture-of-experts model's routed experts (gpt-oss's checkpoints); %q has none: use int4 or int8", c.Name)
	}
	if d := hw.DType(dtype); d.Bytes() > 0 && (hw.DType(w).Bytes() >= d.Bytes() || d == hw.FP4) {
		p.Addf(path, "%s weights are no narrower than dtype %s; choose a narrower type or \"auto\"", w, dtype)
	}
}

// Decode-attention kernels (decode_attention).
const (
	DecodeFlash = "flash_decoding"
	DecodeXQA   = "xqa"
)

// DecodeAttentionKernels lists the allowed decode_attention values.
func DecodeAttentionKernels() []string { return []string{DecodeFlash, DecodeXQA} }

// KVCacheDTypes lists the allowed kv_cache_dtype values.
func KVCacheDTypes() []string { return []string{"auto", "bf16", "fp16", "fp8", "fp4"} }

// validateKVCacheDType checks a kv_cache_dtype at path for the GPU g: an
// NVFP4 cache ("fp4", TensorRT-LLM's on Blackwell) needs a part with FP4
// math.
func validateKVCacheDType(p *Problems, path, kv string, g GPU) {
	if !p.OneOf(path, kv, KVCacheDTypes()) || kv != string(hw.FP4) {
		return
	}
	if gpu, ok := g.Resolve(); ok && gpu.Peak(hw.FP4) == 0 {
		p.Addf(path, "an fp4 (NVFP4) KV cache is Blackwell's: %s has no FP4 math; use fp8", g)
	}
}

// StorageDType is the type a filled kv_cache_dtype or weight_dtype names
// ("" for "auto": the activations' or dtype's, as model.Run takes it).
func StorageDType(s string) hw.DType {
	if s == "auto" {
		return ""
	}
	return hw.DType(s)
}

// TPAllReduce is the tensor-parallel all-reduce of an inference or serving
// spec's filled custom_all_reduce and custom_all_reduce_engine: that
// engine's custom all-reduce, or NCCL's tuner ("").
func TPAllReduce(custom *bool, engine string) net.Algorithm {
	if custom != nil && *custom {
		return net.CustomFor(engine)
	}
	return ""
}

// customAllReduceDefault fills CustomAllReduce from the execution mode and
// CustomAllReduceEngine with the default engine's rules.
func customAllReduceDefault(p **bool, engine *string, execution string) {
	if *p == nil {
		on := execution == "cuda_graphs" || *engine == net.TRTLLMCustom.Engine
		*p = &on
	}
	if *engine == "" {
		*engine = net.CustomEngines()[0]
	}
}

// RequestGroup is Count requests of the same prompt and output lengths.
type RequestGroup struct {
	Count        int `json:"count"`
	PromptTokens int `json:"prompt_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Defaults fills optional fields.
func (s *Inference) Defaults() {
	if s.Execution == "" {
		s.Execution = "cuda_graphs"
	}
	if s.KVCacheDType == "" {
		s.KVCacheDType = "auto"
	}
	if s.WeightDType == "" {
		s.WeightDType = "auto"
	}
	customAllReduceDefault(&s.CustomAllReduce, &s.CustomAllReduceEngine, s.Execution)
	if s.DecodeAttention == "" {
		s.DecodeAttention = DecodeFlash
	}
	for _, f := range []*int{&s.TP, &s.PP, &s.Replicas, &s.Batch, &s.EP} {
		if *f == 0 {
			*f = 1
		}
	}
	if s.PromptTokens == 0 {
		s.PromptTokens = 512
	}
	if s.OutputTokens == 0 {
		s.OutputTokens = 128
	}
	s.Target.defaults()
	s.Cluster.Defaults()
	s.Faults.Defaults()
}

// Validate reports every problem.
func (s *Inference) Validate(p *Problems) {
	s.Target.validate(p, &s.Faults)
	p.IntInRange("tp", s.TP, 1, 1<<16)
	p.IntInRange("pp", s.PP, 1, 1<<16)
	p.IntInRange("replicas", s.Replicas, 1, 1<<20)
	p.IntInRange("ep", s.EP, 1, 1<<16)
	p.IntInRange("batch", s.Batch, 1, 1<<20)
	p.IntInRange("prompt_tokens", s.PromptTokens, 1, 1<<24)
	p.IntInRange("output_tokens", s.OutputTokens, 1, 1<<20)
	p.OneOf("execution", s.Execution, ExecutionModes())
	validateKVCacheDType(p, "kv_cache_dtype", s.KVCacheDType, s.GPU)
	p.OneOf("custom_all_reduce_engine", s.CustomAllReduceEngine, net.CustomEngines())
	p.OneOf("decode_attention", s.DecodeAttention, DecodeAttentionKernels())
	validateWeightDType(p, "weight_dtype", s.WeightDType, s.DType, s.Model)
	s.Host.validate(p, "host", false, s.Execution)
	for i, r := range s.Requests {
		path := Index("requests", i)
		p.IntInRange(Field(path, "count"), r.Count, 1, 1<<20)
		p.IntInRange(Field(path, "prompt_tokens"), r.PromptTokens, 1, 1<<24)
		p.IntInRange(Field(path, "output_tokens"), r.OutputTokens, 1, 1<<20)
	}
	checkPassSize(p, "batch", s.Batch, s.PromptTokens, s.PromptTokens+s.OutputTokens, &s.Model)
	for i, r := range s.Requests {
		checkPassSize(p, Index("requests", i), r.Count, r.PromptTokens, r.PromptTokens+r.OutputTokens, &s.Model)
	}
}
