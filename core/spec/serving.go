package spec

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/net"
)

// Serving is the "serving" kind: requests arriving over time at TP·PP
// replicas that batch them continuously (a vLLM-style scheduler with
// chunked prefill and a paged KV cache), optionally split into prefill and
// decode pools. Tables: requests, iterations, summary.
type Serving struct {
	Header
	// Target: the model, the GPU preset and the cluster (see Target).
	Target
	// TP and PP of a replica (default 1); Replicas engines (default 1).
	TP       int `json:"tp,omitempty"`
	PP       int `json:"pp,omitempty"`
	Replicas int `json:"replicas,omitempty"`
	// EP (default 1) makes each replica EP data-parallel attention ranks of
	// TP GPUs serving a mixture-of-experts model with wide expert
	// parallelism: every rank attends to its own sequences (its own KV
	// cache), the experts spread over the EP ranks (each TP-sharded over
	// its rank's GPUs, whole at tp 1, as the inference kind's "ep"),
	// dispatch and combine an all-to-all among the ranks, and the ranks
	// step together, the scheduler dealing each iteration's sequences to
	// them evenly (SGLang's --enable-dp-attention, vLLM's
	// --data-parallel-size with --enable-expert-parallel). Engine limits
	// are per rank. Needs pp 1 and engine.enable_expert_parallel off; with
	// disaggregation both pools' replicas are such groups.
	EP int `json:"ep,omitempty"`
	// RedundantExperts are extra expert slots over the ep ranks, as in the
	// inference kind (DeepSeek's EPLB, SGLang's
	// --ep-num-redundant-experts): experts + redundant_experts spread
	// evenly, every slot an even share of the routing.
	RedundantExperts int    `json:"redundant_experts,omitempty"`
	Faults           Faults `json:"faults,omitempty"`
	// Routing of arrivals to replicas: "round_robin", "least_outstanding"
	// (default) or "kv_aware" (a replica holding the request's prefix
	// first, then least outstanding, then least KV used).
	Routing        string             `json:"routing,omitempty"`
	Engine         ServingEngine      `json:"engine,omitempty"`
	Workload       ServingWorkload    `json:"workload"`
	Disaggregation *ServingDisaggSpec `json:"disaggregation,omitempty"`
	SLO            ServingSLO         `json:"slo,omitempty"`
	// Search, if set, simulates every combination of its lists (the rest of
	// the spec fixed) and ranks the configurations that meet the SLOs by
	// GPUs, then goodput: table "configs".
	Search *ServingSearch `json:"search,omitempty"`
	// Execution as in the inference kind: "cuda_graphs" (default:
	// decode-only iterations replay a captured graph, iterations with
	// prefill run eagerly, as vLLM does outside its piecewise graphs) or
	// "eager". Host overrides the per-kernel CPU costs.
	Execution string    `json:"execution,omitempty"`
	Host      HostCosts `json:"host,omitempty"`
}

// ServingSearch lists the values to combine; an empty list keeps the
// spec's value. PrefillReplicas 0 means co-located.
type ServingSearch struct {
	TP                  []int `json:"tp,omitempty"`
	PP                  []int `json:"pp,omitempty"`
	EP                  []int `json:"ep,omitempty"`
	Replicas            []int `json:"replicas,omitempty"`
	MaxNumBatchedTokens []int `json:"max_num_batched_tokens,omitempty"`
	ChunkTokens         []int `json:"chunk_tokens,omitempty"`
	PrefillReplicas     []int `json:"prefill_replicas,omitempty"`
	// EnableExpertParallel lists engine.enable_expert_parallel values (a
	// mixture-of-experts model's experts split by TP, or whole per GPU).
	EnableExpertParallel []bool `json:"enable_expert_parallel,omitempty"`
	// KVCacheDType and WeightDType list engine.kv_cache_dtype and
	// engine.weight_dtype values (an FP8 cache, quantized weights).
	KVCacheDType []string `json:"kv_cache_dtype,omitempty"`
	WeightDType  []string `json:"weight_dtype,omitempty"`
	// NumSpeculativeTokens lists engine.speculative.num_speculative_tokens
	// values, 0 for none (needs engine.speculative: its method, acceptance
	// and drafter).
	NumSpeculativeTokens []int `json:"num_speculative_tokens,omitempty"`
	// Attainment is the share of requests that must meet every SLO for a
	// configuration to pass; default 0.9.
	Attainment float64 `json:"attainment,omitempty"`
}

// ServingEngine is the engine configuration (vLLM's names).
type ServingEngine struct {
	// MaxNumBatchedTokens per iteration and MaxNumSeqs running at once;
	// defaults as vLLM V1's OpenAI server sets them by GPU
	// (servingBatchDefaults): 8192 and 1024 on GPUs of 70 GiB or more
	// other than the A100, 2048 and 256 on the others.
	MaxNumBatchedTokens int `json:"max_num_batched_tokens,omitempty"`
	MaxNumSeqs          int `json:"max_num_seqs,omitempty"`
	// ChunkedPrefill (default true, as vLLM V1) and ChunkTokens, the most
	// prefill tokens of one sequence per iteration (default
	// max_num_batched_tokens; at most that).
	ChunkedPrefill *bool `json:"chunked_prefill,omitempty"`
	ChunkTokens    int   `json:"chunk_tokens,omitempty"`
	// BlockTokens is the KV block size; default 16.
	BlockTokens int `json:"block_tokens,omitempty"`
	// GPUMemoryUtilization is the share of HBM the engine may use for
	// weights, activations and KV cache; default 0.9. KVBlocks, if set,
	// replaces the blocks that leaves.
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization,omitempty"`
	// KVCacheFreeMemoryFraction, when set, sizes the KV cache as
	// TensorRT-LLM does instead: that share of the memory the weights and
	// activations leave free (KvCacheConfig's free_gpu_memory_fraction,
	// 0.9 by default there), in place of what gpu_memory_utilization's share
	// of all of it leaves (vLLM's rule). With 70 GB of FP8 weights on two
	// 80 GB GPUs the two rules give the cache 37 and 34 GB.
	KVCacheFreeMemoryFraction float64 `json:"kv_cache_free_memory_fraction,omitempty"`
	KVBlocks                  int     `json:"kv_blocks,omitempty"`
	// Preemption: "recompute" (default) or "swap" (over the host link,
	// SwapBandwidthBytesPerS, default PCIe 4.0 x16).
	Preemption             string  `json:"preemption,omitempty"`
	SwapBandwidthBytesPerS float64 `json:"swap_bandwidth_bytes_per_s,omitempty"`
	// PrefixCaching caches shared prefixes (workload prefix ids); default
	// true. PrefixHitRate instead takes that share of every prompt as cached.
	PrefixCaching *bool   `json:"prefix_caching,omitempty"`
	PrefixHitRate float64 `json:"prefix_hit_rate,omitempty"`
	// FrontendS is the API server's time per request before the scheduler
	// sees it (HTTP, chat template, tokenization); default 0. It counts in
	// TTFT and end to end, which client-side tools time from the send.
	FrontendS float64 `json:"frontend_s,omitempty"`
	// FrontendSPerToken is the API server's time per prompt token on top
	// (tokenizing the prompt, which an OpenAI-compatible server does before
	// the engine sees it); default TokenizeSPerToken, 0 for none. A request
	// reaches the scheduler frontend_s + frontend_s_per_token · prompt
	// tokens after its replica's API server starts on it; the server takes
	// one request at a time (vLLM's single tokenizer thread).
	FrontendSPerToken *float64 `json:"frontend_s_per_token,omitempty"`
	// StepOverheadS is the engine loop's CPU time per iteration that its
	// GPUs wait for (scheduling, input preparation, sampling and output
	// processing done between iterations, as a synchronous loop does:
	// vLLM without async scheduling), and StepOverheadSPerSeq its time per
	// scheduled sequence on top; default 0 (an engine that hides them under
	// the previous iteration). Measured, vLLM's scheduling overhead can
	// exceed half of the inference time (V. Srivatsa, D. Li, Y. Zhang and
	// R. Abhyankar, WukLab 2024, mlsys.wuklab.io/posts/scheduling_overhead:
	// mostly tensor pre- and post-processing; SGLang's far lower), so no
	// one default fits every engine.
	StepOverheadS       float64 `json:"step_overhead_s,omitempty"`
	StepOverheadSPerSeq float64 `json:"step_overhead_s_per_seq,omitempty"`
	// CustomAllReduce as in the inference kind (default: true with
	// cuda_graphs or custom_all_reduce_engine "tensorrt_llm", false with
	// eager otherwise).
	CustomAllReduce *bool `json:"custom_all_reduce,omitempty"`
	// CustomAllReduceEngine as in the inference kind ("vllm", the default,
	// or "tensorrt_llm").
	CustomAllReduceEngine string `json:"custom_all_reduce_engine,omitempty"`
	// FusedAddNorm as in the inference kind (default false).
	FusedAddNorm bool `json:"fused_add_norm,omitempty"`
	// FlashAttention2 runs the prefill attention as flash-attn 2's kernels,
	// as the inference kind's flash_attention_2 (default false: the part's
	// fused attention).
	FlashAttention2 bool `json:"flash_attention_2,omitempty"`
	// DecodeAttention as in the inference kind ("flash_decoding", the
	// default, or "xqa").
	DecodeAttention string `json:"decode_attention,omitempty"`
	// All2AllBackend is how ep ranks exchange tokens (net.A2ABackends:
	// "direct", the default, "deepep_low_latency", "deepep_high_throughput"
	// or "deepep_auto", vLLM's --all2all-backend names and SGLang's
	// --deepep-mode auto); needs ep >= 2 unless "direct".
	All2AllBackend string `json:"all2all_backend,omitempty"`
	// KVCacheDType as in the inference kind ("auto" or one of
	// KVCacheDTypes): "fp8" fits twice the tokens in the same blocks' memory.
	KVCacheDType string `json:"kv_cache_dtype,omitempty"`
	// WeightDType as in the inference kind ("auto" or one of WeightDTypes):
	// weight-only quantization, which leaves more memory to the KV cache.
	WeightDType string `json:"weight_dtype,omitempty"`
	// EnableExpertParallel as in the inference kind: a mixture-of-experts
	// model's experts spread whole over a replica's TP ranks (vLLM's
	// --enable-expert-parallel).
	EnableExpertParallel bool `json:"enable_expert_parallel,omitempty"`
	// Speculative decoding (vLLM's speculative_config); nil: none.
	Speculative *ServingSpeculative `json:"speculative,omitempty"`
}

// ServingSpeculative is speculative decoding as vLLM V1 runs it: every
// decoding sequence proposes NumSpeculativeTokens draft tokens an
// iteration, which the target verifies in its next (1 + k query tokens a
// sequence, their logits all computed); a draft is kept with probability
// PerTokenAcceptance α if the ones before it were, and the target adds a
// token of its own, so a step yields 1 to k + 1 tokens, a mean acceptance
// length of (1 − α^(k+1)) / (1 − α) (Leviathan et al. 2023, arXiv
// 2211.17192: rejection sampling keeps the target's output distribution,
// so the drafter sets only how many tokens a step yields). α depends on the
// drafter and the data: about 0.8 for EAGLE's draft head on chat
// benchmarks (Li et al. 2024, arXiv 2401.15077, its acceptance rate of
// chain drafts). vLLM's "draft acceptance rate" (drafts kept over drafts
// proposed) is lower than α, as the drafts after a rejection are not
// kept: the summary reports it beside the mean acceptance length.
type ServingSpeculative struct {
	// Method: "ngram" (prompt lookup on the CPU, vLLM's [ngram]: the
	// drafts cost the GPUs nothing) or "draft_model" (DraftModel proposes
	// them on the replica's GPUs at its TP: its pass over each prefill
	// chunk, then k decode passes over the verifying sequences an
	// iteration, its weights and KV cache beside the target's in memory).
	// An EAGLE head is about one decoder layer of the target with its
	// output layer: {"preset": <target>, "layers": 1}.
	Method               string  `json:"method"`
	NumSpeculativeTokens int     `json:"num_speculative_tokens"`
	PerTokenAcceptance   float64 `json:"per_token_acceptance"`
	DraftModel           *Model  `json:"draft_model,omitempty"`
}

// Speculative decoding methods (ServingSpeculative.Method).
const (
	SpecNgram      = "ngram"
	SpecDraftModel = "draft_model"
)

// ServingWorkload is how requests arrive.
type ServingWorkload struct {
	// Arrival: "poisson" (default), "gamma" (Burstiness: the shape; 1 is
	// Poisson, below 1 burstier), "closed_loop" (Concurrency clients) or
	// "trace" (Trace).
	Arrival     string  `json:"arrival,omitempty"`
	RatePerS    float64 `json:"rate_per_s,omitempty"`
	Burstiness  float64 `json:"burstiness,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	// Requests to send (default 1000), or DurationS of arrivals if set.
	Requests  int     `json:"requests,omitempty"`
	DurationS float64 `json:"duration_s,omitempty"`
	// WarmupRequests (the first ones, by arrival) are left out of the summary.
	WarmupRequests int `json:"warmup_requests,omitempty"`
	// PromptTokens and OutputTokens: lengths per request.
	PromptTokens Lengths `json:"prompt_tokens,omitempty"`
	OutputTokens Lengths `json:"output_tokens,omitempty"`
	// PrefixGroups shared prefixes of PrefixTokens tokens, one drawn per
	// request (0: none).
	PrefixGroups int           `json:"prefix_groups,omitempty"`
	PrefixTokens int           `json:"prefix_tokens,omitempty"`
	Trace        *ServingTrace `json:"trace,omitempty"`
}

// Lengths of prompts or outputs: "fixed" Tokens (default 512 prompt, 128
// output; a bare number is a fixed length), "uniform" on [MinTokens, MaxTokens], "lognormal" with median
// Tokens and Sigma, clipped to [MinTokens, MaxTokens] (defaults 1 and
// 16·Tokens), or "table": Values in turn.
type Lengths struct {
	Dist      string  `json:"dist,omitempty"`
	Tokens    int     `json:"tokens,omitempty"`
	MinTokens int     `json:"min_tokens,omitempty"`
	MaxTokens int     `json:"max_tokens,omitempty"`
	Sigma     float64 `json:"sigma,omitempty"`
	Values    []int   `json:"values,omitempty"`
}

// ServingTrace is a request trace as columns (an Arrow table's columns,
// eidolon.datasets.trace); PrefixID and PrefixTokens are optional.
type ServingTrace struct {
	ArrivalS     []float64 `json:"arrival_s"`
	PromptTokens []int     `json:"prompt_tokens"`
	OutputTokens []int     `json:"output_tokens"`
	PrefixID     []int     `json:"prefix_id,omitempty"`
	PrefixTokens []int     `json:"prefix_tokens,omitempty"`
}

// ServingDisaggSpec splits the replicas: the first PrefillReplicas only
// prefill, the rest only decode; the KV cache moves between them over the
// cluster's network.
type ServingDisaggSpec struct {
	PrefillReplicas int `json:"prefill_replicas"`
}

// ServingSLO are the latency objectives goodput counts against (0: none).
// ITLS is the mean inter-token latency of a request.
type ServingSLO struct {
	TTFTS float64 `json:"ttft_s,omitempty"`
	ITLS  float64 `json:"itl_s,omitempty"`
	E2ES  float64 `json:"e2e_s,omitempty"`
}

// objectOf is the Lengths a bare number stands for: that many tokens,
// every request ("prompt_tokens": 512 is {"dist": "fixed", "tokens": 512}).
func (*Lengths) objectOf(n json.Number) map[string]any {
	return map[string]any{"dist": "fixed", "tokens": n}
}

func (l *Lengths) defaults(tokens int) {
	if l.Dist == "" {
		l.Dist = "fixed"
		if len(l.Values) > 0 {
			l.Dist = "table"
		}
	}
	if l.Tokens == 0 {
		l.Tokens = tokens
	}
	if l.Dist != "uniform" && l.Dist != "lognormal" { // no bounds drawn
		return
	}
	if l.MinTokens == 0 {
		l.MinTokens = 1
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = 16 * l.Tokens
	}
	if l.Dist == "lognormal" && l.Sigma == 0 {
		l.Sigma = 0.5
	}
}

func (l *Lengths) validate(p *Problems, path string) {
	if !p.OneOf(Field(path, "dist"), l.Dist, []string{"fixed", "uniform", "lognormal", "table"}) {
		return
	}
	p.IntInRange(Field(path, "tokens"), l.Tokens, 1, 1<<24)
	if l.Dist == "uniform" || l.Dist == "lognormal" { // the others draw no bounds
		p.IntInRange(Field(path, "min_tokens"), l.MinTokens, 1, 1<<24)
		p.IntInRange(Field(path, "max_tokens"), l.MaxTokens, l.MinTokens, 1<<24)
	} else {
		// A field the distribution does not draw with would be ignored.
		for _, f := range []struct {
			name string
			v    int
		}{{"min_tokens", l.MinTokens}, {"max_tokens", l.MaxTokens}} {
			if f.v != 0 {
				p.Addf(Field(path, f.name), "applies to dist \"uniform\" or \"lognormal\", not %q", l.Dist)
			}
		}
	}
	if l.Dist == "lognormal" {
		p.InRange(Field(path, "sigma"), l.Sigma, 0, 10)
	} else if l.Sigma != 0 {
		p.Addf(Field(path, "sigma"), "applies to dist \"lognormal\", not %q", l.Dist)
	}
	if l.Dist != "table" && len(l.Values) > 0 {
		p.Addf(Field(path, "values"), "applies to dist \"table\", not %q", l.Dist)
	}
	if l.Dist == "table" {
		if len(l.Values) == 0 {
			p.Addf(Field(path, "values"), "must list at least one length for dist \"table\"")
		}
		for i, v := range l.Values {
			p.IntInRange(Index(Field(path, "values"), i), v, 1, 1<<24)
		}
	}
}

// Largest is the longest length the distribution can draw.
func (l *Lengths) Largest() int {
	switch l.Dist {
	case "uniform", "lognormal":
		return l.MaxTokens
	case "table":
		m := 0
		for _, v := range l.Values {
			m = max(m, v)
		}
		return m
	}
	return l.Tokens
}

// TokenizeSPerToken is the default API server time per prompt token: one
// CPU thread of Hugging Face tokenizers encodes Llama 3.1's tokenizer at
// 1.93 MB/s on prompt-sized documents (huggingface/tokenizers PR #1582,
// XNLI, 10 documents of ~2.5 KB), about 2.07 µs a token at 4 bytes a token.
// OpenAI-compatible servers (vLLM's, TensorRT-LLM's and NIM's frontends)
// tokenize with it before the engine sees the request.
const TokenizeSPerToken = 4 / 1.93e6

// servingBatchDefaults are vLLM V1's token budget and sequence limit for
// its OpenAI-compatible server on a GPU (EngineArgs._set_default_args_v1 in
// vllm/engine/arg_utils.py, checked by test_defaults_with_usage_context in
// tests/engine/test_arg_utils.py): 8192 tokens and 1024 sequences on GPUs
// with at least 70 GiB of memory whose name does not contain "a100" (H100,
// H200, MI300X), 2048 and 256 on the others, the A100 80 GB included; a
// what-if part by its memory and its preset's name.
func servingBatchDefaults(gpu GPU) (tokens, seqs int) {
	g, ok := gpu.Resolve()
	// The name vLLM reads is the device's: a what-if part's preset.
	if ok && float64(g.HBMBytes) >= 70*(1<<30) && !strings.Contains(strings.ToLower(gpu.Preset), "a100") {
		return 8192, 1024
	}
	return 2048, 256
}

// Defaults fills optional fields.
func (s *Serving) Defaults() {
	if s.Execution == "" {
		s.Execution = "cuda_graphs"
	}
	customAllReduceDefault(&s.Engine.CustomAllReduce, &s.Engine.CustomAllReduceEngine, s.Execution)
	if s.Engine.DecodeAttention == "" {
		s.Engine.DecodeAttention = DecodeFlash
	}
	if s.Engine.All2AllBackend == "" {
		s.Engine.All2AllBackend = net.A2ADirect
	}
	for _, f := range []*int{&s.TP, &s.PP, &s.Replicas, &s.EP} {
		if *f == 0 {
			*f = 1
		}
	}
	s.Target.defaults()
	if s.Routing == "" {
		s.Routing = "least_outstanding"
	}
	e := &s.Engine
	tokens, seqs := servingBatchDefaults(s.GPU)
	if e.MaxNumBatchedTokens == 0 {
		e.MaxNumBatchedTokens = tokens
	}
	if e.MaxNumSeqs == 0 {
		e.MaxNumSeqs = seqs
	}
	if e.ChunkedPrefill == nil {
		t := true
		e.ChunkedPrefill = &t
	}
	if e.ChunkTokens == 0 {
		e.ChunkTokens = e.MaxNumBatchedTokens
	}
	if e.BlockTokens == 0 {
		e.BlockTokens = 16
	}
	if e.GPUMemoryUtilization == 0 {
		e.GPUMemoryUtilization = 0.9
	}
	if e.Preemption == "" {
		e.Preemption = "recompute"
	}
	if e.SwapBandwidthBytesPerS == 0 {
		if l, ok := hw.LinkByName("pcie4-x16"); ok {
			e.SwapBandwidthBytesPerS = l.BandwidthBytesPerS
		}
	}
	if e.PrefixCaching == nil {
		t := true
		e.PrefixCaching = &t
	}
	if e.FrontendSPerToken == nil {
		k := TokenizeSPerToken
		e.FrontendSPerToken = &k
	}
	if e.KVCacheDType == "" {
		e.KVCacheDType = "auto"
	}
	if e.WeightDType == "" {
		e.WeightDType = "auto"
	}
	w := &s.Workload
	if w.Arrival == "" {
		w.Arrival = "poisson"
		if w.Trace != nil {
			w.Arrival = "trace"
		}
	}
	if w.Burstiness == 0 {
		w.Burstiness = 1
	}
	if w.Requests == 0 && w.DurationS == 0 && w.Arrival != "trace" {
		w.Requests = 1000
	}
	w.PromptTokens.defaults(512)
	w.OutputTokens.defaults(128)
	if q := s.Search; q != nil && q.Attainment == 0 {
		q.Attainment = 0.9
	}
	s.Cluster.Defaults()
	s.Faults.Defaults()
}

// Validate reports every problem.
func (s *Serving) Validate(p *Problems) {
	p.OneOf("execution", s.Execution, ExecutionModes())
	s.Host.validate(p, "host", false, s.Execution)
	if q := s.Search; q != nil {
		for _, l := range []struct {
			name string
			v    []int
			lo   int
		}{{"tp", q.TP, 1}, {"pp", q.PP, 1}, {"ep", q.EP, 1}, {"replicas", q.Replicas, 1}, {"max_num_batched_tokens", q.MaxNumBatchedTokens, 1},
			{"chunk_tokens", q.ChunkTokens, 1}, {"prefill_replicas", q.PrefillReplicas, 0}} {
			for i, v := range l.v {
				p.IntInRange(Index(Field("search", l.name), i), v, l.lo, 1<<24)
			}
		}
		for i, v := range q.KVCacheDType {
			validateKVCacheDType(p, Index(Field("search", "kv_cache_dtype"), i), v, s.GPU)
		}
		for i, v := range q.WeightDType {
			validateWeightDType(p, Index(Field("search", "weight_dtype"), i), v, s.DType, s.Model)
		}
		for i, v := range q.NumSpeculativeTokens {
			p.IntInRange(Index(Field("search", "num_speculative_tokens"), i), v, 0, 64)
		}
		if len(q.NumSpeculativeTokens) > 0 && s.Engine.Speculative == nil {
			p.Addf("search.num_speculative_tokens", "varies engine.speculative's drafts: give engine.speculative (its method and per_token_acceptance)")
		}
		if q.Attainment <= 0 || q.Attainment > 1 {
			p.Addf("search.attainment", "must be in (0, 1], got %g", q.Attainment)
		}
		if s.SLO == (ServingSLO{}) {
			p.Addf("slo", "a search needs at least one SLO (ttft_s, itl_s or e2e_s)")
		}
	}
	s.Target.validate(p, &s.Faults)
	p.IntInRange("tp", s.TP, 1, 1<<16)
	p.IntInRange("pp", s.PP, 1, 1<<16)
	p.IntInRange("replicas", s.Replicas, 1, 1<<20)
	p.IntInRange("ep", s.EP, 1, 1<<16)
	if s.EP > 1 {
		if s.PP != 1 {
			p.Addf("ep", "data-parallel attention ranks step together through one pass: needs pp 1, got pp %d", s.PP)
		}
		if m, ok := s.Model.Resolve(); ok {
			switch {
			case !m.IsMoE():
				p.Addf("ep", "spreads a mixture-of-experts model's experts over the ep ranks; %q has no experts", m.Name)
			case s.RedundantExperts == 0 && m.Experts%s.EP != 0:
				p.Addf("ep", "must divide the experts (%d), got %d (redundant_experts can make up the difference)", m.Experts, s.EP)
			}
		}
		if s.Engine.EnableExpertParallel {
			p.Addf("engine.enable_expert_parallel", "spreads the experts inside each TP group; with ep %d they spread over the ep ranks: leave it off", s.EP)
		}
	}
	if b := s.Engine.All2AllBackend; p.OneOf("engine.all2all_backend", b, net.A2ABackends()) && b != net.A2ADirect && s.EP < 2 {
		p.Addf("engine.all2all_backend", "exchanges tokens among data-parallel attention ranks: needs ep >= 2, got ep %d", s.EP)
	}
	if m, ok := s.Model.Resolve(); ok {
		ExpertSlots(p, m, s.RedundantExperts, s.EP)
	}
	p.OneOf("routing", s.Routing, []string{"round_robin", "least_outstanding", "kv_aware"})
	e := s.Engine
	p.IntInRange("engine.max_num_batched_tokens", e.MaxNumBatchedTokens, 1, 1<<24)
	p.IntInRange("engine.max_num_seqs", e.MaxNumSeqs, 1, 1<<20)
	if e.ChunkTokens < 1 || e.ChunkTokens > e.MaxNumBatchedTokens {
		p.Addf("engine.chunk_tokens", "must be in [1, engine.max_num_batched_tokens = %d], got %d", e.MaxNumBatchedTokens, e.ChunkTokens)
	}
	p.IntInRange("engine.block_tokens", e.BlockTokens, 1, 1<<16)
	if e.GPUMemoryUtilization <= 0 || e.GPUMemoryUtilization > 1 {
		p.Addf("engine.gpu_memory_utilization", "must be in (0, 1], got %g", e.GPUMemoryUtilization)
	}
	if e.KVCacheFreeMemoryFraction < 0 || e.KVCacheFreeMemoryFraction > 1 {
		p.Addf("engine.kv_cache_free_memory_fraction", "must be in (0, 1] (or 0: gpu_memory_utilization's rule), got %g", e.KVCacheFreeMemoryFraction)
	}
	p.IntInRange("engine.kv_blocks", e.KVBlocks, 0, 1<<30)
	p.OneOf("engine.preemption", e.Preemption, []string{"recompute", "swap"})
	p.Positive("engine.swap_bandwidth_bytes_per_s", e.SwapBandwidthBytesPerS)
	p.Duration("engine.frontend_s", e.FrontendS)
	if e.FrontendSPerToken != nil {
		p.Duration("engine.frontend_s_per_token", *e.FrontendSPerToken)
	}
	validateKVCacheDType(p, "engine.kv_cache_dtype", e.KVCacheDType, s.GPU)
	p.OneOf("engine.custom_all_reduce_engine", e.CustomAllReduceEngine, net.CustomEngines())
	p.OneOf("engine.decode_attention", e.DecodeAttention, DecodeAttentionKernels())
	validateWeightDType(p, "engine.weight_dtype", e.WeightDType, s.DType, s.Model)
	p.Duration("engine.step_overhead_s", e.StepOverheadS)
	p.Duration("engine.step_overhead_s_per_seq", e.StepOverheadSPerSeq)
	if e.PrefixHitRate < 0 || e.PrefixHitRate >= 1 {
		p.Addf("engine.prefix_hit_rate", "must be in [0, 1), got %g", e.PrefixHitRate)
	}
	s.validateSpeculative(p)
	w := s.Workload
	if p.OneOf("workload.arrival", w.Arrival, []string{"poisson", "gamma", "closed_loop", "trace"}) {
		switch w.Arrival {
		case "poisson", "gamma":
			if !(w.RatePerS > 0) || math.IsInf(w.RatePerS, 0) {
				p.Addf("workload.rate_per_s", "must be > 0 requests per second for arrival %q, got %g", w.Arrival, w.RatePerS)
			}
			if !(w.Burstiness > 0) || (w.Arrival == "poisson" && w.Burstiness != 1) {
				p.Addf("workload.burstiness", "must be > 0 (and 1 for poisson; use arrival \"gamma\"), got %g", w.Burstiness)
			}
		case "closed_loop":
			p.IntInRange("workload.concurrency", w.Concurrency, 1, 1<<20)
		case "trace":
			s.validateTrace(p)
		}
		if w.Arrival != "poisson" && w.Arrival != "gamma" && w.RatePerS != 0 {
			p.Addf("workload.rate_per_s", "applies to arrival poisson or gamma, not %q", w.Arrival)
		}
		if w.Arrival != "trace" && w.Trace != nil {
			p.Addf("workload.trace", "applies to arrival \"trace\", not %q", w.Arrival)
		}
		if w.Arrival != "closed_loop" && w.Concurrency != 0 {
			p.Addf("workload.concurrency", "applies to arrival \"closed_loop\", not %q", w.Arrival)
		}
		if (w.Arrival == "closed_loop" || w.Arrival == "trace") && w.Burstiness != 1 {
			p.Addf("workload.burstiness", "applies to arrival \"gamma\", not %q", w.Arrival)
		}
	}
	p.IntInRange("workload.requests", w.Requests, 0, 1<<26)
	p.NonNegative("workload.duration_s", w.DurationS)
	if w.Requests > 0 && w.DurationS > 0 {
		p.Addf("workload.duration_s", "give requests or duration_s, not both")
	}
	p.IntInRange("workload.warmup_requests", w.WarmupRequests, 0, 1<<26)
	if w.Requests > 0 && w.WarmupRequests >= w.Requests {
		p.Addf("workload.warmup_requests", "must be less than workload.requests (%d), got %d", w.Requests, w.WarmupRequests)
	}
	w.PromptTokens.validate(p, "workload.prompt_tokens")
	w.OutputTokens.validate(p, "workload.output_tokens")
	p.IntInRange("workload.prefix_groups", w.PrefixGroups, 0, 1<<24)
	if w.PrefixGroups > 0 {
		p.IntInRange("workload.prefix_tokens", w.PrefixTokens, 1, 1<<24)
	} else {
		p.IntInRange("workload.prefix_tokens", w.PrefixTokens, 0, 1<<24)
	}
	if !*e.ChunkedPrefill && w.PromptTokens.Largest() > e.MaxNumBatchedTokens {
		p.Addf("workload.prompt_tokens", "without chunked prefill every prompt must fit engine.max_num_batched_tokens (%d), but up to %d tokens are drawn",
			e.MaxNumBatchedTokens, w.PromptTokens.Largest())
	}
	if d := s.Disaggregation; d != nil {
		p.IntInRange("disaggregation.prefill_replicas", d.PrefillReplicas, 1, max(s.Replicas-1, 1))
		if s.Replicas < 2 {
			p.Addf("replicas", "disaggregation needs at least 2 replicas (a prefill and a decode one), got %d", s.Replicas)
		}
	}
	// Iterations are priced once per shape: a fault holds for the whole run.
	for i, l := range s.Faults.Links {
		if l.AtS != 0 || l.UntilS != 0 {
			p.Addf(Index("faults.links", i), "serving applies faults for the whole run; at_s and until_s must be 0")
		}
	}
	for i, d := range s.Faults.Devices {
		if d.AtS != 0 || d.UntilS != 0 {
			p.Addf(Index("faults.devices", i), "serving applies faults for the whole run; at_s and until_s must be 0")
		}
	}
	p.NonNegative("slo.ttft_s", s.SLO.TTFTS)
	p.NonNegative("slo.itl_s", s.SLO.ITLS)
	p.NonNegative("slo.e2e_s", s.SLO.E2ES)
}

func (s *Serving) validateTrace(p *Problems) {
	t := s.Workload.Trace
	if t == nil {
		p.Addf("workload.trace", "arrival \"trace\" needs a trace (arrival_s, prompt_tokens, output_tokens)")
		return
	}
	n := len(t.ArrivalS)
	if n == 0 {
		p.Addf("workload.trace.arrival_s", "must list at least one request")
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"prompt_tokens", len(t.PromptTokens)}, {"output_tokens", len(t.OutputTokens)}} {
		if c.n != n {
			p.Addf("workload.trace."+c.name, "must have one entry per arrival_s (%d), got %d", n, c.n)
		}
	}
	if len(t.PrefixID) != 0 && len(t.PrefixID) != n {
		p.Addf("workload.trace.prefix_id", "must be empty or have one entry per arrival_s (%d), got %d", n, len(t.PrefixID))
	}
	if len(t.PrefixTokens) != len(t.PrefixID) {
		p.Addf("workload.trace.prefix_tokens", "must have one entry per prefix_id (%d), got %d", len(t.PrefixID), len(t.PrefixTokens))
	}
	for i := 0; i < n; i++ {
		if !(t.ArrivalS[i] >= 0) || (i > 0 && t.ArrivalS[i] < t.ArrivalS[i-1]) {
			p.Addf(Index("workload.trace.arrival_s", i), "must be >= 0 and sorted, got %g", t.ArrivalS[i])
			break
		}
	}
	for i, v := range t.PromptTokens {
		if v < 1 || v > 1<<24 {
			p.Addf(Index("workload.trace.prompt_tokens", i), "must be in [1, %d], got %d", 1<<24, v)
			break
		}
	}
	for i, v := range t.OutputTokens {
		if v < 1 || v > 1<<24 {
			p.Addf(Index("workload.trace.output_tokens", i), "must be in [1, %d], got %d", 1<<24, v)
			break
		}
	}
	for i := range t.PrefixID {
		if t.PrefixID[i] < -1 || (i < len(t.PrefixTokens) && t.PrefixTokens[i] < 0) {
			p.Addf(Index("workload.trace.prefix_id", i), "must be >= -1 (-1: none) with prefix_tokens >= 0, got %d", t.PrefixID[i])
			break
		}
	}
	if s.Workload.Requests != 0 || s.Workload.DurationS != 0 {
		p.Addf("workload.requests", "a trace sends its own requests; leave requests and duration_s unset")
	}
}

// validateSpeculative checks engine.speculative.
func (s *Serving) validateSpeculative(p *Problems) {
	sp := s.Engine.Speculative
	if sp == nil {
		return
	}
	const path = "engine.speculative"
	if p.OneOf(Field(path, "method"), sp.Method, []string{SpecNgram, SpecDraftModel}) {
		switch {
		case sp.Method == SpecDraftModel && sp.DraftModel == nil:
			p.Addf(Field(path, "draft_model"), "required for method %q: the model that proposes the drafts", SpecDraftModel)
		case sp.Method != SpecDraftModel && sp.DraftModel != nil:
			p.Addf(Field(path, "draft_model"), "applies to method %q only, not %q", SpecDraftModel, sp.Method)
		}
	}
	p.IntInRange(Field(path, "num_speculative_tokens"), sp.NumSpeculativeTokens, 1, 64)
	p.InRange(Field(path, "per_token_acceptance"), sp.PerTokenAcceptance, 0, 1)
	if sp.DraftModel != nil {
		sp.DraftModel.Validate(p, Field(path, "draft_model"))
	}
	if s.PP > 1 {
		p.Addf(path, "verifies drafts on one pipeline stage (vLLM V1 has no speculative decoding with pipeline parallelism): needs pp 1, got %d", s.PP)
	}
	if s.EP > 1 {
		p.Addf(path, "needs ep 1 (data-parallel attention ranks are not modelled with drafts), got %d", s.EP)
	}
}
