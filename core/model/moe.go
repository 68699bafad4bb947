package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/eidolon-sim/eidolon/core/problem"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// MoE holds a transformer's mixture-of-experts and multi-head latent
// attention hyper-parameters (zero: a dense model with standard attention).
//
// A mixture-of-experts block (pattern letter E) replaces the SwiGLU MLP by
// a router (a gating GEMM hidden → experts, then softmax or sigmoid scores
// and a top-k choice per token), routed SwiGLU experts of width
// ExpertFFNHidden of which each token visits ExpertsPerToken, and
// SharedExperts SwiGLU experts every token visits (DeepSeekMoE, Dai et al.
// 2024, arXiv 2401.06066). Tokens are permuted into expert order before the
// expert GEMMs and unpermuted (weighted by their router scores) after;
// under expert parallelism the permuted tokens travel to the rank holding
// their expert and back (all-to-all dispatch and combine).
//
// Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, §2.1)
// compresses keys and values into a KVLoRARank-wide latent (plus a shared
// QKRopeHeadDim rotary key), and queries through a QLoRARank-wide latent
// (0: queries projected directly); each head has QKNopeHeadDim + QKRopeHeadDim
// query/key dimensions and VHeadDim value dimensions. The KV cache holds
// only the latent and the rotary key: (KVLoRARank + QKRopeHeadDim) elements
// per token and layer.
type MoE struct {
	// Experts is the number of routed experts per MoE block.
	Experts int `json:"experts,omitempty"`
	// ExpertsPerToken is the router's top-k.
	ExpertsPerToken int `json:"experts_per_token,omitempty"`
	// SharedExperts every token visits, each SharedExpertFFNHidden wide
	// (default ExpertFFNHidden).
	SharedExperts         int `json:"shared_experts,omitempty"`
	SharedExpertFFNHidden int `json:"shared_expert_ffn_hidden,omitempty"`
	// ExpertFFNHidden is a routed expert's SwiGLU width (default FFNHidden).
	ExpertFFNHidden int `json:"expert_ffn_hidden,omitempty"`
	// DenseLayers are the first layers with a dense MLP (DeepSeek-V3: 3);
	// after them every MoEEvery-th layer is an MoE block (default 1).
	DenseLayers int `json:"dense_layers,omitempty"`
	MoEEvery    int `json:"moe_every,omitempty"`
	// GLULimit > 0 clamps the routed experts' gated activation inputs: the
	// gate half to at most GLULimit, the linear half to within ±GLULimit
	// (gpt-oss's swiglu_limit, 7; Megatron-Core's
	// activation_func_clamp_value). A training step pays the clamps as
	// Megatron-Core runs them (clampGLU) unless Transformer Engine's op
	// fuser runs the experts (Run.TEOpFuser); the value itself costs
	// nothing.
	GLULimit float64 `json:"glu_limit,omitempty"`
	// ExpertBias: the routed experts' linear layers add a bias (gpt-oss).
	// A training step pays the down projection's as Megatron-Core adds it
	// (expertBias) unless Transformer Engine's op fuser runs the experts;
	// the gate/up projection's is added by the grouped GEMM itself and,
	// as in inference engines' fused experts, costs nothing here.
	ExpertBias bool `json:"expert_bias,omitempty"`
	// Router scores: "softmax" (Mixtral, Qwen) or "sigmoid" (DeepSeek-V3,
	// whose auxiliary-loss-free balancing adds a per-expert bias to the
	// scores for the top-k choice). Default softmax.
	Router string `json:"router,omitempty"`

	// MTPLayers is the multi-token-prediction modules a training step runs
	// after the output head (DeepSeek-V3, arXiv 2412.19437 §2.2, trains with
	// depth 1; config.json num_nextn_predict_layers). They are not part of
	// the main model: inference and the parameter counts leave them out,
	// and the presets leave them 0 (set mtp_layers to train as DeepSeek did).
	MTPLayers int `json:"mtp_layers,omitempty"`

	// Multi-head latent attention (KVLoRARank > 0).
	QLoRARank     int `json:"q_lora_rank,omitempty"`
	KVLoRARank    int `json:"kv_lora_rank,omitempty"`
	QKRopeHeadDim int `json:"qk_rope_head_dim,omitempty"`
	QKNopeHeadDim int `json:"qk_nope_head_dim,omitempty"`
	VHeadDim      int `json:"v_head_dim,omitempty"`
}

// Router score functions.
const (
	RouterSoftmax = "softmax"
	RouterSigmoid = "sigmoid"
)

// IsMoE reports whether the model has mixture-of-experts blocks.
func (c Config) IsMoE() bool { return c.Experts > 0 }

// IsMLA reports whether attention is multi-head latent attention.
func (c Config) IsMLA() bool { return c.KVLoRARank > 0 }

func (c *Config) moeDefaults() {
	if c.Experts == 0 {
		return
	}
	if c.ExpertFFNHidden == 0 {
		c.ExpertFFNHidden = c.FFNHidden
	}
	if c.SharedExperts > 0 && c.SharedExpertFFNHidden == 0 {
		c.SharedExpertFFNHidden = c.ExpertFFNHidden
	}
	if c.MoEEvery == 0 {
		c.MoEEvery = 1
	}
	if c.Router == "" {
		c.Router = RouterSoftmax
	}
}

// moePattern is a GPT/LLaMA layer pattern: DenseLayers dense blocks, then
// every MoEEvery-th block an MoE block (all dense without experts).
func (c Config) moePattern() string {
	if c.Experts == 0 {
		return strings.Repeat(string(PatAttention), c.Layers)
	}
	var b strings.Builder
	for i := 0; i < c.Layers; i++ {
		if i >= c.DenseLayers && (i-c.DenseLayers+1)%max(c.MoEEvery, 1) == 0 {
			b.WriteRune(PatMoE)
		} else {
			b.WriteRune(PatAttention)
		}
	}
	return b.String()
}

// checkMoE returns the problems of the MoE and MLA fields.
func (c Config) checkMoE() []problem.Problem {
	var ps []problem.Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, problem.Problem{Path: field, Message: fmt.Sprintf(format, args...)})
	}
	for _, f := range []struct {
		n string
		v int
	}{{"experts", c.Experts}, {"experts_per_token", c.ExpertsPerToken}, {"shared_experts", c.SharedExperts},
		{"dense_layers", c.DenseLayers}, {"moe_every", c.MoEEvery}, {"mtp_layers", c.MTPLayers}, {"q_lora_rank", c.QLoRARank},
		{"kv_lora_rank", c.KVLoRARank}, {"qk_rope_head_dim", c.QKRopeHeadDim}, {"qk_nope_head_dim", c.QKNopeHeadDim}, {"v_head_dim", c.VHeadDim}} {
		if f.v < 0 {
			bad(f.n, "must be >= 0, got %d", f.v)
		}
	}
	if !(c.GLULimit >= 0) || math.IsInf(c.GLULimit, 1) {
		bad("glu_limit", "must be a finite number >= 0 (0: no clamp), got %g", c.GLULimit)
	}
	moe := c.hasBlock(PatMoE)
	if moe {
		if c.Family != LLaMA {
			bad("family", "mixture-of-experts blocks (E) need family \"llama\" (SwiGLU experts), got %q", c.Family)
		}
		if c.Experts < 1 {
			bad("experts", "must be >= 1 for a pattern with E blocks, got %d", c.Experts)
		}
		if c.ExpertsPerToken < 1 || c.ExpertsPerToken > c.Experts {
			bad("experts_per_token", "must be in [1, experts = %d], got %d", c.Experts, c.ExpertsPerToken)
		}
		if c.ExpertFFNHidden <= 0 {
			bad("expert_ffn_hidden", "must be > 0, got %d", c.ExpertFFNHidden)
		}
		if c.SharedExperts > 0 && c.SharedExpertFFNHidden <= 0 {
			bad("shared_expert_ffn_hidden", "must be > 0 with shared experts, got %d", c.SharedExpertFFNHidden)
		}
	} else if c.Experts > 0 && c.Pattern != "" {
		bad("experts", "is %d but the pattern has no E (mixture-of-experts) block", c.Experts)
	}
	// A router is defaulted only with experts; a value given is checked
	// either way, not dropped unread.
	if (moe || c.Router != "") && c.Router != RouterSoftmax && c.Router != RouterSigmoid {
		bad("router", "must be \"softmax\" or \"sigmoid\", got %q", c.Router)
	}
	if c.DenseLayers > c.Layers {
		bad("dense_layers", "must not exceed layers (%d), got %d", c.Layers, c.DenseLayers)
	}
	// Each MTP module is a transformer layer more (DeepSeek-V3 runs one);
	// more of them than the model's layers is no model, and unbounded they
	// would escape the spec's work and memory budgets.
	if c.MTPLayers > c.Layers {
		bad("mtp_layers", "must not exceed layers (%d), got %d", c.Layers, c.MTPLayers)
	}
	if c.MTPLayers > 0 && !c.hasBlock(PatAttention) && !c.hasBlock(PatMoE) && !c.hasBlock(PatShared) {
		bad("mtp_layers", "multi-token-prediction modules are transformer layers (attention and MLP, as the model's own), but the pattern %q has no A, E or S block", c.Pattern)
	}
	if c.IsMLA() {
		if c.QKRopeHeadDim <= 0 || c.QKNopeHeadDim <= 0 || c.VHeadDim <= 0 {
			bad("kv_lora_rank", "multi-head latent attention needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim > 0, got %d, %d, %d",
				c.QKRopeHeadDim, c.QKNopeHeadDim, c.VHeadDim)
		}
	}
	return ps
}

// expertTP is the run's expert tensor-parallel degree.
func (r Run) expertTP() int64 {
	if r.ExpertTP > 0 {
		return int64(r.ExpertTP)
	}
	return int64(max(r.TP, 1))
}

// checkMoERun returns the problems of a run for the MoE and MLA blocks.
func (c Config) checkMoERun(r Run, bad func(field, format string, args ...any)) {
	t := max(r.TP, 1)
	ep := max(r.EP, 1)
	et := int(r.expertTP())
	if et != 1 && et != t {
		bad("expert_tp", "must be 1 or tp (%d), got %d", t, r.ExpertTP)
		return
	}
	if et < t && !r.SequenceParallel && !(r.Phase != Training && ep == t) {
		bad("expert_tp", "expert_tp < tp needs sequence parallelism in training (each TP rank dispatches its own tokens), or in inference ep = tp (expert parallelism inside the TP group), got expert_tp = %d with ep %d", et, ep)
	}
	if r.EP < 0 {
		bad("ep", "must be >= 1, got %d", r.EP)
	}
	if !c.hasBlock(PatMoE) {
		if ep > 1 {
			bad("ep", "expert parallelism needs a mixture-of-experts model, got ep = %d", ep)
		}
		return
	}
	if c.Experts%ep != 0 {
		bad("ep", "must divide experts (%d), got %d", c.Experts, ep)
	}
	if c.ExpertFFNHidden%et != 0 {
		bad("tp", "must divide expert_ffn_hidden (%d), got %d", c.ExpertFFNHidden, et)
	}
	if c.SharedExperts > 0 && (c.SharedExperts*c.SharedExpertFFNHidden)%t != 0 {
		bad("tp", "must divide the shared experts' width (%d), got %d", c.SharedExperts*c.SharedExpertFFNHidden, t)
	}
	if t > 1 && !r.SequenceParallel && r.Phase == Training {
		// Megatron-Core: "During training, when using Mixture of Experts
		// with tensor parallelism, sequence parallelism must be used"
		// (megatron/training/arguments.py).
		bad("sequence_parallel", "mixture-of-experts training with tp > 1 needs sequence parallelism (Megatron-Core), got tp = %d", t)
	}
	if n := len(r.ExpertTokens); n > 0 && n != c.Experts/ep {
		bad("expert_tokens", "must list one count per local expert (experts/ep = %d), got %d", c.Experts/ep, n)
	}
}

// MLADecodeAttention is MLA's absorbed decode attention of B sequences of
// skv cached tokens over hs heads of a rank: one shared "KV head" of the
// latent and rotary key; its traffic is the latent cache once (shared by
// every head, at kvBytes an element) and the queries and outputs per head.
func MLADecodeAttention(c Config, d hw.DType, kvBytes float64, B, hs, skv int64) Op {
	kvr, rope := int64(c.KVLoRARank), int64(c.QKRopeHeadDim)
	o := NewDecodeAttention("attn.decode", d, kvBytes, B, hs, 1, skv, (2*kvr+rope)/2)
	o.Bytes = float64(B) * (kvBytes*float64(skv*(kvr+rope)) + actDType(d).Bytes()*float64(hs*(2*kvr+rope)))
	return o
}

// mlaParams is the attention parameters of one MLA block on this rank:
// query down (replicated over TP, as Megatron-Core's MLA duplicates the
// down projections) and its norm, query up (split by heads), key/value
// down with the rotary key and its norm, key/value up, output.
func (b *builder) mlaParams() int64 {
	c := b.c
	h, hs := int64(c.Hidden), int64(c.Heads)/b.t
	qr, kvr, rope, nope, v := int64(c.QLoRARank), int64(c.KVLoRARank), int64(c.QKRopeHeadDim), int64(c.QKNopeHeadDim), int64(c.VHeadDim)
	q := h * hs * (nope + rope)
	if qr > 0 {
		q = h*qr + qr + qr*hs*(nope+rope)
	}
	return q + h*(kvr+rope) + kvr + kvr*hs*(nope+v) + hs*v*h
}

// mla is multi-head latent attention on this rank's heads. Training and
// prefill run it in its plain form (up-project keys and values, then
// FlashAttention with query/key dimension nope+rope and value dimension v,
// priced at head dimension (qk+v)/2, which gives its exact FLOPs); decode
// runs DeepSeek-V2's absorbed form (§2.1.3): the key up-projection is
// absorbed into the query, attention reads only the latent cache (one
// shared "KV head" of kv_lora+rope), and the value up-projection is applied
// to the attended latent.
func (b *builder) mla() {
	c := b.c
	h, hs := int64(c.Hidden), int64(c.Heads)/b.t
	qr, kvr, rope, nope, v := int64(c.QLoRARank), int64(c.KVLoRARank), int64(c.QKRopeHeadDim), int64(c.QKNopeHeadDim), int64(c.VHeadDim)
	T := b.T
	b.enter("attn", h)
	if qr > 0 {
		b.gemm("attn.q_down", T, qr, h)
		b.norm("attn.q_norm", T, qr)
		b.gemm("attn.q_up", T, hs*(nope+rope), qr)
	} else {
		b.gemm("attn.q", T, hs*(nope+rope), h)
	}
	b.gemm("attn.kv_down", T, kvr+rope, h)
	b.norm("attn.kv_norm", T, kvr)
	n := float64(T * (hs + 1) * rope)
	b.stream("attn.rotary", Rotary, 3*n, 2*n*b.e, 3*n, 2*n*b.e, 0)
	b.rows(T, (hs+1)*rope)
	b.rotaryHeads(hs, 1, rope)
	r := b.r
	if r.Phase == Decode {
		B := int64(r.Batch)
		b.kvCacheWrite(float64(T * (kvr + rope)))
		b.add(step{fwd: []Op{NewGEMM("attn.q_absorb", b.d, hs, B, kvr, nope)}})
		b.add(step{fwd: []Op{MLADecodeAttention(c, b.attnDType(), b.kv, B, hs, int64(r.KVLen)+1)}})
		b.add(step{fwd: []Op{NewGEMM("attn.v_absorb", b.d, hs, B, v, kvr)}})
		b.gemm("attn.out", T, h, hs*v)
		b.exit("attn", h)
		return
	}
	b.gemm("attn.kv_up", T, hs*(nope+v), kvr)
	if r.Phase == Prefill {
		b.kvCacheWrite(float64(T * (kvr + rope)))
	}
	B, s := int64(r.Batch), int64(r.SeqLen)
	hd := (nope + rope + v) / 2
	qk := float64(T*hs*(nope+rope)) * b.e
	b.flash(hs, hs, hd, tokenElems{q: hs * (nope + rope), kv: hs * (nope + rope + v), out: hs * v}, 2*qk+float64(T*hs*v)*b.e+4*float64(B*hs*s))
	b.gemm("attn.out", T, h, hs*v)
	b.exit("attn", h)
}

// mtp is one multi-token-prediction module in a training step (DeepSeek-V3
// §2.2): the embedding of each next token and the main model's last hidden
// state, each RMS-normalized, are concatenated and projected 2h → h, run
// through one transformer block of the model's last kind (an MoE block for
// DeepSeek-V3), then through the output head and its cross-entropy. The
// embedding and the output head are the main model's (no parameters of
// their own here); the projection is replicated over TP and runs on the
// rank's sequence shard.
func (b *builder) mtp() {
	c := b.c
	h := int64(c.Hidden)
	n := float64(b.Tn * h)
	b.stream("mtp.embed.lookup", Embedding, 0, 4*float64(b.Tn)+2*n*b.e, n, n*b.e+8*n, 0)
	b.rows(b.Tn, h)
	b.norm("mtp.hidden_norm", b.Tn, h)
	b.norm("mtp.embed_norm", b.Tn, h)
	b.gemm("mtp.proj", b.Tn, h, 2*h)
	own := 2*h + 2*h*h
	b.moe = c.Pattern != "" && rune(c.Pattern[len(c.Pattern)-1]) == PatMoE
	b.transformer(false)
	own += b.params
	b.lmHead()
	b.params = own
}

// moeParams is the FFN parameters of one MoE block on this rank: the
// router (replicated; a sigmoid router adds its per-expert balancing bias),
// the rank's E/ep routed experts split over TP, and the shared experts.
// It also records the routed experts' share in b.expert.
func (b *builder) moeParams() int64 {
	c := b.c
	h, ep := int64(c.Hidden), int64(max(b.r.EP, 1))
	router := int64(c.Experts) * h
	if c.Router == RouterSigmoid {
		router += int64(c.Experts)
	}
	b.expert = int64(c.Experts) / ep * 3 * h * int64(c.ExpertFFNHidden) / b.r.expertTP()
	shared := 3 * h * int64(c.SharedExperts*c.SharedExpertFFNHidden) / b.t
	return router + b.expert + shared
}

// expertTokens is the tokens each local expert processes in this pass (after
// the expert-TP gather): Run.ExpertTokens, or the balanced share
// T·k/E·ep·et/t of the expert-parallel group's tokens (the group's ep
// members each route T·et/t tokens).
func (b *builder) expertTokens() []int64 {
	c := b.c
	loc := c.Experts / max(b.r.EP, 1)
	if len(b.r.ExpertTokens) == loc {
		return b.r.ExpertTokens
	}
	out := make([]int64, loc)
	total := b.T * int64(c.ExpertsPerToken) * b.r.expertTP() / b.t
	if b.expertsInTP() {
		// The busiest rank's share, rounded up: a decode step of fewer
		// routed slots than ranks still runs an expert somewhere.
		total = (b.T*int64(c.ExpertsPerToken) + b.t - 1) / b.t
	}
	for i := range out {
		out[i] = total / int64(loc)
		if int64(i) < total%int64(loc) {
			out[i]++
		}
	}
	return out
}

// expertsInTP is expert parallelism inside the tensor-parallel group in
// inference (vLLM's --enable-expert-parallel without data-parallel
// attention: Run.EP = TP, Run.ExpertTP = 1): every TP rank holds all the
// tokens and E/TP whole experts, computes the slots routed to them, and the
// token outputs' partial sums are all-reduced as with experts split by TP;
// no token is dispatched.
func (b *builder) expertsInTP() bool {
	return !b.sp && b.r.expertTP() < b.t
}

// OpPermute names the permutation of a rank's routed tokens into dispatch
// order, the last operator before the dispatch all-to-all: a training
// step's host waits for the work before it (the router and the token
// counts) to learn the all-to-all's sizes (workload's dispatch sync).
const OpPermute = "moe.permute"

// dispatchBytesPerToken is the size of one routed token in a dispatch
// all-to-all (the forward's, and the backward's transfer of the output
// gradients to the experts): hidden elements in the activation type, or
// with fp8 math and an FP8 dispatch (Run.FP8Dispatch; inference in FP8)
// DeepSeek-V3's (§3.3.2: "we quantize the activation before MoE
// up-projections into FP8 and then apply dispatch components ... A
// similar strategy is applied to the activation gradient before MoE
// down-projections", 1×128 tiles with one fp32 scale each); the forward
// and backward combines carry the activation type.
func (b *builder) dispatchBytesPerToken() float64 {
	h := float64(b.c.Hidden)
	if b.d.Bytes() == 1 && (b.r.FP8Dispatch || !b.training()) {
		return h + 4*math.Ceil(h/128)
	}
	if b.d == hw.FP4 {
		// NVFP4 inference dispatches the experts' inputs quantized, each
		// element with its share of a scale per 16 (TensorRT-LLM's MoE
		// all-to-all quantizes before it sends).
		return h * b.d.Bytes()
	}
	return h * b.e
}

// moeFFN is the mixture-of-experts FFN (Megatron-Core MoELayer with the
// all-to-all token dispatcher): router on this rank's tokens, permute into
// expert order, dispatch all-to-all over the expert-parallel group, (expert
// TP > 1) all-gather of the received tokens over the TP group, grouped
// SwiGLU expert GEMMs over the rank's experts (each split over the expert
// TP ranks) with their token counts, the activation scaled by the routing
// probabilities, reduce-scatter, combine all-to-all, unpermute (a sum);
// then the shared experts as a dense TP MLP (not overlapped with the
// dispatch: Megatron-Core's default moe_shared_expert_overlap = false).
func (b *builder) moeFFN() {
	c := b.c
	h, E, k := int64(c.Hidden), int64(c.Experts), int64(c.ExpertsPerToken)
	et := b.r.expertTP()
	fe := int64(c.ExpertFFNHidden) / et
	Tn := b.Tn
	R := Tn * k // routed (token, expert) slots leaving this rank
	start := len(b.steps)
	ne := float64(Tn * E)
	le := b.e // the router's logits' element size
	if b.r.RouterDType == hw.FP32 && b.training() {
		// RouterGatingLinearFunction: the input cast up (its gradient cast
		// back), then the GEMM in FP32, which keeps its FP32 input.
		n := float64(Tn * h)
		b.stream("moe.router.cast", Elementwise, 0, n*(b.e+4), 0, n*(4+b.e), 0)
		b.gemmIn(hw.FP32, "moe.router", Tn, E, h)
		b.steps[len(b.steps)-1].saved *= 4 / b.e
		le = 4
	} else {
		b.gemm16("moe.router", Tn, E, h)
	}
	topk := 5 + math.Log2(float64(k)+1)
	b.stream("moe.router.topk", Softmax, topk*ne, ne*le+8*float64(R), 4*ne, 2*ne*le+8*float64(R), 4*ne)
	hr := float64(R * h)
	b.stream(OpPermute, Elementwise, 0, float64(Tn*h)*b.e+hr*b.e+8*float64(R), hr, hr*b.e+float64(Tn*h)*b.e, 0)
	wd := b.dispatchBytesPerToken()
	if !b.expertsInTP() {
		b.add(step{
			fwd: []Op{{Name: "moe.dispatch.all_to_all", Kind: AllToAll, M: R, Bytes: float64(R) * wd}},
			bwd: []Op{{Name: "moe.dispatch.all_to_all.bwd", Kind: AllToAll, M: R, Bytes: float64(R*h) * 2, Return: true}},
		})
	}
	groups := b.expertTokens()
	var recv int64
	for _, g := range groups {
		recv += g
	}
	full := float64(recv*h) * b.e
	if et > 1 && b.sp {
		b.add(step{
			fwd: []Op{NewComm("moe.tp.all_gather", AllGather, full)},
			bwd: []Op{NewComm("moe.tp.reduce_scatter", ReduceScatter, full)},
		})
	}
	b.sortChunks("moe.sort_chunks", groups, wd)
	b.grouped("moe.experts.gate_up", groups, 2*fe, h)
	b.quantizeWeights()
	// SwiGLU scaled by each slot's routing probability (Megatron-Core's
	// experts apply the probabilities after the activation, so the
	// unpermutation is a plain sum): keeps the gate/up output and the fp32
	// probabilities; the backward also gives the probabilities' gradient.
	n, r := float64(recv*fe), float64(recv)
	dropped := n * b.e // the activation's output, the down projection's input
	if c.GLULimit > 0 && b.training() && !b.r.TEOpFuser {
		b.clampGLU(n)
		dropped += 2 * n * b.e // the concatenation the fused kernel keeps
	}
	b.stream("moe.experts.swiglu", Elementwise, 7*n, 3*n*b.e+4*r, 14*n, 5*n*b.e+8*r, 2*n*b.e+4*r)
	if c.GLULimit > 0 && b.training() && !b.r.TEOpFuser {
		// weighted_bias_quick_geglu_impl copies its linear offset to the
		// GPU with torch.tensor before the fused kernel, a copy PyTorch
		// finishes with cudaStreamSynchronize (pytorch/pytorch#120996,
		// #190217): the host waits for the gate/up GEMM and the clamps,
		// in the forward and in moe_act's recomputation.
		b.steps[len(b.steps)-1].fwd[0].HostSync = true
	}
	b.recomputable(ModuleMoEAct, dropped)
	b.grouped("moe.experts.down", groups, h, fe)
	b.quantizeWeights()
	if c.ExpertBias && b.training() && !b.r.TEOpFuser {
		b.expertBias(groups)
	}
	if et > 1 && b.sp {
		b.add(step{
			fwd: []Op{NewComm("moe.tp.reduce_scatter", ReduceScatter, full)},
			bwd: []Op{NewComm("moe.tp.all_gather", AllGather, full)},
		})
	}
	b.sortChunks("moe.unsort_chunks", groups, b.e*float64(h))
	if !b.expertsInTP() {
		b.add(step{
			fwd: []Op{{Name: "moe.combine.all_to_all", Kind: AllToAll, M: R, Bytes: float64(R*h) * 2, Return: true}},
			bwd: []Op{{Name: "moe.combine.all_to_all.bwd", Kind: AllToAll, M: R, Bytes: float64(R) * wd}},
		})
	}
	// Sum of each token's k (already weighted) expert outputs through the
	// row map (MoEAlltoAllTokenDispatcher.combine_postprocess: unpermute
	// without probabilities); its backward gathers the output gradient
	// back to the k slots, so it keeps nothing.
	b.stream("moe.unpermute", Elementwise, hr, hr*b.e+4*float64(R)+float64(Tn*h)*b.e, 0, hr*b.e+4*float64(R)+float64(Tn*h)*b.e, 0)
	if b.t > 1 && !b.sp {
		// Without sequence parallelism every TP rank holds all the tokens
		// and the row-parallel down projection leaves partial sums: the
		// token outputs are all-reduced once their k expert outputs are
		// summed (the sum is linear), as vLLM's FusedMoE reduces its final
		// hidden states (reduce_results), not every routed slot.
		out := float64(Tn*h) * b.e
		b.add(step{fwd: []Op{NewComm("moe.tp.all_reduce", AllReduce, out)}, bwd: []Op{NewComm("moe.tp.bwd_all_reduce", AllReduce, out)}})
	}
	b.markMoELayer(start)
	if c.SharedExperts > 0 {
		fs := int64(c.SharedExperts*c.SharedExpertFFNHidden) / b.t
		b.enter("moe.shared", h)
		b.gemm("moe.shared.gate_up", b.T, 2*fs, h)
		ns := float64(b.T * fs)
		b.stream("moe.shared.swiglu", Elementwise, 6*ns, 3*ns*b.e, 12*ns, 5*ns*b.e, 2*ns*b.e)
		b.gemm("moe.shared.down", b.T, h, fs)
		b.exit("moe.shared", h)
		m := float64(Tn * h)
		b.stream("moe.shared.add", Elementwise, m, 3*m*b.e, 0, 0, 0)
	}
	b.checkpointed(ModuleMoE, start)
}

// clampGLU is Megatron-Core's clamp of the experts' gate/up output, n
// elements a half, before its fused activation (Config.GLULimit): eager
// PyTorch clamps the gate half from above and the linear half on both
// sides, each into a tensor of its own, and concatenates the two
// (megatron/core/fusions/fused_bias_geglu.py, weighted_bias_quick_geglu_impl,
// NVIDIA/Megatron-LM 1fb2a0c): three kernels, after which the fused kernel
// reads the concatenation. Backward: each clamp's gradient masks its half
// (reads the gradient and the clamp's saved input, writes the gradient)
// and the chunk's gradient assembles the halves into the gate/up output's
// (the concatenation's own gradient is two views: no kernel). The clamps
// keep the gate/up output, which a recomputation of moe_act keeps as its
// input and reruns all three from. They are plain PyTorch calls on the host
// (step.plain). Inference engines fuse the clamp into
// their activation kernel (vLLM's swigluoai_and_mul): training only.
func (b *builder) clampGLU(n float64) {
	for _, c := range []struct {
		name     string
		compares float64
	}{{"moe.experts.glu_clamp.gate", 1}, {"moe.experts.glu_clamp.linear", 2}} {
		b.stream(c.name, Elementwise, c.compares*n, 2*n*b.e, c.compares*n, 3*n*b.e, n*b.e)
		b.recomputable(ModuleMoEAct, 0)
		b.steps[len(b.steps)-1].plain = true
	}
	b.add(step{fwd: []Op{NewStreaming("moe.experts.glu_clamp.cat", Elementwise, b.a, 0, 4*n*b.e)},
		bwd: []Op{NewStreaming("moe.experts.glu_clamp.grad_cat", Elementwise, b.a, 0, 4*n*b.e)}, plain: true})
	b.recomputable(ModuleMoEAct, 0)
}

// expertBias is Megatron-Core's bias of the routed experts' down
// projection (TEGroupedMLP._apply_bias, NVIDIA/Megatron-LM a329dd6, the
// eager path it keeps for host token counts): a Python loop over the local
// experts, each adding its bias times the slots' routing probabilities to
// its rows (t + b·p: the product and the sum, each a PyTorch operator
// writing FP32, as a BF16 bias times FP32 probabilities promotes), then
// the rows concatenated and cast back to the activation type. Backward:
// the cast's gradient up to FP32, then per expert the rows' gradient cast
// to the activation type, the bias's gradient (g·p summed over the rows,
// cast to the bias's type and added into its main gradient by
// Megatron-Core's gradient hook) and the probabilities' (g·b summed over
// the hidden size), and the rows' and the probabilities' gradients
// concatenated. Every one is a plain operator on the host (step.plain),
// not the MoE layer's module code.
func (b *builder) expertBias(groups []int64) {
	h := float64(b.c.Hidden)
	grad := b.e
	if b.r.GradDType != "" {
		grad = b.r.GradDType.Bytes()
	}
	var rows float64
	for _, g := range groups {
		rows += float64(g)
	}
	for i, g := range groups {
		n, p := float64(g)*h, 4*float64(g)
		pre := fmt.Sprintf("moe.experts.bias.%d", i)
		b.add(step{plain: true,
			fwd: []Op{
				NewStreaming(pre+".scale", Elementwise, b.a, n, h*b.e+p+4*n),
				NewStreaming(pre+".add", Elementwise, b.a, n, n*b.e+8*n),
			},
			bwd: []Op{
				NewStreaming(pre+".grad_rows", Elementwise, b.a, 0, 4*n+n*b.e),
				NewStreaming(pre+".grad_bias", Elementwise, b.a, n, 8*n+p),
				NewStreaming(pre+".grad_bias.sum", Elementwise, b.a, n, 4*n+4*h),
				NewStreaming(pre+".grad_bias.cast", Elementwise, b.a, 0, 4*h+h*b.e),
				NewStreaming(pre+".grad_bias.accumulate", Elementwise, b.a, h, h*b.e+2*h*grad),
				NewStreaming(pre+".grad_probs", Elementwise, b.a, n, 8*n+h*b.e),
				NewStreaming(pre+".grad_probs.sum", Elementwise, b.a, n, 4*n+p),
			}})
	}
	m := rows * h
	b.add(step{plain: true,
		fwd: []Op{
			NewStreaming("moe.experts.bias.cat", Elementwise, b.a, 0, 8*m),
			NewStreaming("moe.experts.bias.cast", Elementwise, b.a, 0, 4*m+m*b.e),
		},
		bwd: []Op{
			NewStreaming("moe.experts.bias.cast.bwd", Elementwise, b.a, 0, m*b.e+4*m),
			NewStreaming("moe.experts.bias.grad_cat", Elementwise, b.a, 0, 2*m*b.e),
			NewStreaming("moe.experts.bias.grad_cat_probs", Elementwise, b.a, 0, 8*rows),
		}})
}

// markMoELayer marks the operators of the steps from start on as the MoE
// layer's (Op.MoELayer), but for plain PyTorch operators (step.plain).
func (b *builder) markMoELayer(start int) {
	for i := start; i < len(b.steps); i++ {
		if b.steps[i].plain {
			continue
		}
		for _, ops := range [][]Op{b.steps[i].fwd, b.steps[i].bwd} {
			for j := range ops {
				ops[j].MoELayer = true
			}
		}
	}
}

// sortChunks is Megatron-Core's second permutation (training with more
// than one local expert): the all-to-all delivers the received tokens
// grouped by source rank, and the experts need them grouped by expert, so
// the dispatcher copies them into expert order after the dispatch
// (MoEAlltoAllTokenDispatcher.dispatch_postprocess, sort_chunks_by_idxs,
// with their routing probabilities) and back into rank order before the
// combine (combine_preprocess); the backward of each is the inverse copy
// of the gradients, in the activation type. Each reads and writes every
// received token: wd bytes per token forward (the dispatched type for the
// first, the activation type for the second). Inference engines gather
// the rows inside their fused expert kernels instead, so only training
// pays it.
func (b *builder) sortChunks(name string, groups []int64, wd float64) {
	if !b.training() || len(groups) < 2 {
		return
	}
	var recv int64
	for _, g := range groups {
		recv += g
	}
	r := float64(recv)
	h := float64(b.c.Hidden)
	b.stream(name, Elementwise, 0, 2*r*wd+2*4*r+8*r, 0, 2*r*h*b.e+8*r, 0)
}

// grouped adds a grouped GEMM over the local experts: expert i multiplies
// its groups[i] tokens [groups[i]×k]·[k×n]; the backward is the grouped
// input gradient (groups over M) and the grouped weight gradient (groups
// over the reduction dimension). Keeps its input.
func (b *builder) grouped(name string, groups []int64, n, k int64) {
	var m int64
	for _, g := range groups {
		m += g
	}
	fwd := []Op{NewGroupedGEMM(name, b.d, groups, n, k, false)}
	// Inference engines run the experts as one fused MoE kernel.
	fwd[0].Fused = !b.training()
	fwd[0].SplitAccumulator = !b.training() && b.blockScaledFP8()
	bwd := []Op{
		NewGroupedGEMM(name+".dgrad", b.d, groups, k, n, false),
		b.accumulate(NewGroupedGEMM(name+".wgrad", b.d, groups, k, n, true)),
	}
	saved := float64(m*k) * b.e
	if b.fp8Training() {
		// Transformer Engine's GroupedLinear casts every expert's input and
		// output gradient in one kernel (fused_multi_cast_transpose), as
		// gemm's casts; DeepSeek-V3 casts before the dispatch instead, the
		// same bytes.
		fwd, bwd = b.fp8Linear(name, float64(m*k), float64(m*n), false, fwd, bwd)
		saved *= b.d.Bytes() / b.e
	}
	b.add(step{fwd: fwd, bwd: bwd, saved: saved})
}

// NewGroupedGEMM is one grouped GEMM over len(groups) experts, each with its
// own weight [k×n]: expert i computes [groups[i]×k]·[k×n], or with groupK
// (weight gradients) [k'×n]·... over groups[i] as the reduction: the
// product [K×N] summed over groups[i] tokens, where K and N are the
// weight's dimensions. M is the total tokens.
func NewGroupedGEMM(name string, d hw.DType, groups []int64, n, k int64, groupK bool) Op {
	var m int64
	for _, g := range groups {
		m += g
	}
	in, out := d.Bytes(), actDType(d).Bytes()
	e := float64(len(groups))
	o := Op{Name: name, Kind: GroupedGEMM, DType: d, M: m, N: n, K: k, Batch: 1, Groups: groups, GroupK: groupK, Tensor: true,
		FLOPs: 2 * float64(m) * float64(n) * float64(k)}
	if groupK {
		// dW_i [k×n] = X_iᵀ·dY_i: read X (m×k) and dY (m×n), write every dW_i.
		o.Bytes = in*float64(m)*float64(k+n) + out*e*float64(k*n)
	} else {
		o.Bytes = in*(float64(m*k)+e*float64(k*n)) + out*float64(m*n)
	}
	return o
}

// ActiveParams is the parameters one token uses: every parameter except
// the routed experts it is not sent to (E − k per MoE block).
func ActiveParams(c Config) int64 {
	n := Params(c)
	if c.Experts == 0 {
		return n
	}
	per := 3 * int64(c.Hidden) * int64(c.ExpertFFNHidden)
	return n - int64(strings.Count(c.Pattern, string(PatMoE)))*int64(c.Experts-c.ExpertsPerToken)*per
}

// MoEPreset is a mixture-of-experts preset with the active parameter count
// its source states, and how the source counts it.
type MoEPreset struct {
	Preset
	PublishedActiveParams float64
	// ActiveExcludesInputEmbedding: the source's activated parameters leave
	// out the input embedding (a table lookup that does no math) and keep
	// the output head. DeepSeek counts so: DeepSeek-V2-Lite's config
	// (27 layers, hidden 2048, 64 routed experts of 1408 + 2 shared, top-6,
	// vocab 102400) counts 2.45B activated that way, published "2.4B";
	// with both embeddings it would be 2.66B, with neither 2.24B.
	ActiveExcludesInputEmbedding bool
	// ActiveStep, when set, is the resolution of a published active count
	// given to fewer digits than the 1% check needs: the count then lies
	// within the figure's interval, [published − step/2, published +
	// step/2) for a rounded figure, [published, published + step) for a
	// truncated one (ActiveTruncated).
	ActiveStep      float64
	ActiveTruncated bool
}

// PublishedActive is the preset's active parameter count under its
// source's convention (ActiveParams, without the input embedding where the
// source leaves it out).
func (p MoEPreset) PublishedActive(c Config) int64 {
	n := ActiveParams(c)
	if p.ActiveExcludesInputEmbedding {
		n -= int64(c.Vocab) * int64(c.Hidden)
	}
	return n
}

// MoEPresets are the mixture-of-experts presets, as published (before
// defaults), each from its Hugging Face config.json.
func MoEPresets() []MoEPreset {
	return []MoEPreset{
		// mistralai/Mixtral-8x7B-v0.1 config.json: hidden_size 4096,
		// intermediate_size 14336, 32 layers, 32 heads, 8 KV heads,
		// num_local_experts 8, num_experts_per_tok 2, vocab 32000, untied.
		// Mistral AI, "Mixtral of experts" (2023-12-11): 46.7B total, 12.9B per token.
		{Preset{Config{Name: "mixtral-8x7b", Family: LLaMA, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, FFNHidden: 14336, Vocab: 32000,
			MoE: MoE{Experts: 8, ExpertsPerToken: 2}}, 46.7e9, "mistralai/Mixtral-8x7B-v0.1 config.json; Mistral AI, Mixtral of experts (46.7B total, 12.9B active)"}, 12.9e9, false, 0, false},
		// mistralai/Mixtral-8x22B-v0.1 config.json: hidden_size 6144,
		// intermediate_size 16384, 56 layers, 48 heads, 8 KV heads, 8
		// experts, top-2, vocab 32000, untied. Mistral AI, "Cheaper,
		// Better, Faster, Stronger" (2024-04-17): 141B total, 39B active.
		{Preset{Config{Name: "mixtral-8x22b", Family: LLaMA, Layers: 56, Hidden: 6144, Heads: 48, KVHeads: 8, FFNHidden: 16384, Vocab: 32000,
			MoE: MoE{Experts: 8, ExpertsPerToken: 2}}, 141e9, "mistralai/Mixtral-8x22B-v0.1 config.json; Mistral AI (141B total, 39B active)"}, 39e9, false, 0, false},
		// deepseek-ai/DeepSeek-V3 config.json: hidden_size 7168, 61 layers,
		// first_k_dense_replace 3 (intermediate_size 18432),
		// moe_intermediate_size 2048, n_routed_experts 256, n_shared_experts
		// 1, num_experts_per_tok 8, scoring_func sigmoid, 128 heads,
		// q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64,
		// qk_nope_head_dim 128, v_head_dim 128, vocab 129280, untied. The
		// multi-token-prediction module (14B of the 685B on Hugging Face) is
		// not part of the main model. Its FP8 checkpoint scales weights per
		// 128×128 block (quantization_config.weight_block_size). DeepSeek-AI
		// 2024, arXiv 2412.19437: 671B total, 37B activated per token.
		{Preset{Config{Name: "deepseek-v3", Family: LLaMA, Layers: 61, Hidden: 7168, Heads: 128, FFNHidden: 18432, Vocab: 129280,
			MoE: MoE{Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, ExpertFFNHidden: 2048, DenseLayers: 3, Router: RouterSigmoid,
				QLoRARank: 1536, KVLoRARank: 512, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128}, FP8BlockScaled: true}, 671e9,
			"deepseek-ai/DeepSeek-V3 config.json; DeepSeek-AI 2024, arXiv 2412.19437 (671B total, 37B active)"}, 37e9, true, 1e9, false},
		// Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, 48 layers, 32
		// heads, 4 KV heads, head_dim 128, num_experts 128,
		// num_experts_per_tok 8, moe_intermediate_size 768, vocab 151936,
		// untied. Model card: 30.5B total, 3.3B activated, 29.9B
		// non-embedding (so its counts include both embeddings). The
		// activated count is 3.353B: the card's "3.3B" truncates it.
		{Preset{Config{Name: "qwen3-30b-a3b", Family: LLaMA, Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, FFNHidden: 6144, Vocab: 151936, QKNorm: true,
			MoE: MoE{Experts: 128, ExpertsPerToken: 8, ExpertFFNHidden: 768}}, 30.5e9, "Qwen/Qwen3-30B-A3B config.json and model card (30.5B total, 3.3B active)"}, 3.3e9, false, 0.1e9, true},
		// Qwen/Qwen3-235B-A22B config.json: hidden_size 4096, 94 layers, 64
		// heads, 4 KV heads, head_dim 128, 128 experts, top-8,
		// moe_intermediate_size 1536, vocab 151936, untied. Model card:
		// 235B total, 22B activated.
		{Preset{Config{Name: "qwen3-235b-a22b", Family: LLaMA, Layers: 94, Hidden: 4096, Heads: 64, KVHeads: 4, HeadDim: 128, FFNHidden: 12288, Vocab: 151936, QKNorm: true,
			MoE: MoE{Experts: 128, ExpertsPerToken: 8, ExpertFFNHidden: 1536}}, 235e9, "Qwen/Qwen3-235B-A22B config.json and model card (235B total, 22B active)"}, 22e9, false, 0, false},
		// openai/gpt-oss-120b and gpt-oss-20b config.json: hidden_size 2880,
		// 36 and 24 layers, 64 heads of head_dim 64, 8 KV heads,
		// num_local_experts 128 and 32, num_experts_per_tok 4,
		// intermediate_size 2880, vocab 201088, untied, sliding_window 128
		// with layer_types alternating sliding_attention and
		// full_attention from layer 0, swiglu_limit 7.0. OpenAI 2025, gpt-oss-120b &
		// gpt-oss-20b Model Card (arXiv 2508.10925), Table 1: 116.83B and
		// 20.91B total, 5.13B and 3.61B active, the active counts without
		// the input embedding (attention, four experts, the unembedding).
		// Its attention and experts' biases and the sinks (a logit per
		// head) are left out: 0.03 % of the count.
		{Preset{gptOSS("gpt-oss-120b", 36, 128), 116.83e9, "openai/gpt-oss-120b config.json; OpenAI 2025, arXiv 2508.10925, Table 1 (116.83B total, 5.13B active)"}, 5.13e9, true, 0, false},
		{Preset{gptOSS("gpt-oss-20b", 24, 32), 20.91e9, "openai/gpt-oss-20b config.json; OpenAI 2025, arXiv 2508.10925, Table 1 (20.91B total, 3.61B active)"}, 3.61e9, true, 0, false},
		// meta-llama/Llama-4-Maverick-17B-128E config.json, text_config:
		// hidden_size 5120, 48 layers, 40 heads of head_dim 128, 8 KV heads,
		// interleave_moe_layer_step 2 (every second layer routes each token
		// to one of 128 experts of intermediate_size 8192 beside a shared
		// expert of that size; the others are dense MLPs of
		// intermediate_size_mlp 16384), vocab 202048, untied,
		// attention_chunk_size 8192 on the rotary layers, every fourth
		// layer (no_rope_layers 0) global. Meta AI, "The Llama 4 herd"
		// (2025-04-05): 400B total, 17B active parameters (the vision
		// encoder is not modelled).
		{Preset{Config{Name: "llama4-maverick", Family: LLaMA, Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, FFNHidden: 16384, Vocab: 202048,
			AttentionChunk: 8192, WindowPattern: "CCCF",
			MoE: MoE{Experts: 128, ExpertsPerToken: 1, SharedExperts: 1, SharedExpertFFNHidden: 8192, ExpertFFNHidden: 8192, MoEEvery: 2, Router: RouterSigmoid}},
			400e9, "meta-llama/Llama-4-Maverick-17B-128E config.json; Meta AI, The Llama 4 herd (400B total, 17B active)"}, 17e9, false, 1e9, false},
	}
}

// gptOSS is a gpt-oss model of layers layers and experts experts (top-4):
// attention alternating between a 128-token band and the full context.
func gptOSS(name string, layers, experts int) Config {
	return Config{Name: name, Family: LLaMA, Layers: layers, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, FFNHidden: 2880, Vocab: 201088,
		SlidingWindow: 128, WindowPattern: "SF", MoE: MoE{Experts: experts, ExpertsPerToken: 4, GLULimit: 7, ExpertBias: true}}
}
