package model

// The blocks, written once for a tensor-parallel rank: GEMMs are split
// Megatron-style (column-parallel into a region, row-parallel out of it),
// attention by heads, SSM mixers by channels (Mamba-1: d_inner/t) or by heads
// and groups (Mamba-2: nheads/t, ngroups/t). Norms and residuals are
// replicated, or sharded along the sequence under sequence parallelism.

// VocabShard is one TP rank's rows of a vocabulary of v over tp ranks,
// padded first to a multiple of multiple·tp (Run.VocabMultiple; 0: none).
func VocabShard(v, tp, multiple int) int64 {
	tp = max(tp, 1)
	if multiple > 0 {
		return ceilDiv(int64(v), int64(multiple*tp)) * int64(multiple)
	}
	return ceilDiv(int64(v), int64(tp))
}

// embedding is the vocabulary-parallel input embedding: each rank gathers
// the rows of its V/t vocabulary shard (zeros elsewhere) and the partial
// rows are summed across ranks. GPT adds learned positions (and dropout).
func (b *builder) embedding() {
	c := b.c
	h, vt := int64(c.Hidden), VocabShard(c.Vocab, int(b.t), b.r.VocabMultiple)
	b.params = vt*h + int64(c.Positions)*h
	n := float64(b.T * h)
	// Read token ids and rows, write the output; with positions also read
	// the position rows and add. Backward: scatter-add dy into the fp32
	// weight gradient (read dy, read-modify-write the gradient rows).
	flops, bytes := 0.0, 4*float64(b.T)+2*n*b.e
	if c.Positions > 0 {
		flops, bytes = n, bytes+n*b.e
	}
	b.stream("embed.lookup", Embedding, flops, bytes, n, n*b.e+8*n, 0)
	b.rows(b.T, h)
	b.exit("embed", h)
	if c.Family == GPT && b.training() {
		m := float64(b.Tn * h)
		b.stream("embed.dropout", Elementwise, 2*m, m*(2*b.e+1), m, m*(2*b.e+1), m)
	}
}

// OpLogits names the output layer's GEMM (Megatron-Core's output layer, a
// plain ColumnParallelLinear, not a Transformer Engine module), and
// OpLogitsGather the inference gather of its vocabulary shards.
const (
	OpLogits       = "head.logits"
	OpLogitsGather = OpLogits + ".all_gather"
)

// lmHead is the final norm, the vocabulary-parallel output projection and,
// in training, Megatron's vocabulary-parallel cross entropy (crossEntropy).
// Inference computes logits for the last token of each sequence only and
// gathers them for sampling.
func (b *builder) lmHead() {
	c := b.c
	h, vt := int64(c.Hidden), VocabShard(c.Vocab, int(b.t), b.r.VocabMultiple)
	normParams := h
	if c.Family == GPT {
		normParams = 2 * h
	}
	b.params = normParams
	if !c.TiedEmbeddings {
		b.params += vt * h
	}
	b.norm("head.norm", b.Tn, h)
	b.enter("head", h)
	m := b.T
	if !b.training() {
		m = int64(b.r.Batch)
	}
	if b.fp8Training() && b.r.FP8OutputProj {
		b.gemmIn(b.d, OpLogits, m, vt, h)
	} else {
		b.gemm16(OpLogits, m, vt, h)
	}
	if b.training() {
		b.crossEntropy(m, vt)
		return
	}
	if b.t > 1 {
		b.add(step{fwd: []Op{NewComm(OpLogitsGather, AllGather, float64(m*int64(c.Vocab))*b.e)}})
	}
}

// Cross-entropy implementations (Run.CrossEntropyFusion), Megatron-LM's
// --cross-entropy-loss-fusion and --cross-entropy-fusion-impl.
const (
	// CrossEntropyUnfused: vocab_parallel_cross_entropy as PyTorch ops
	// (megatron/core/tensor_parallel/cross_entropy.py), Megatron-LM's
	// default.
	CrossEntropyUnfused = "none"
	// CrossEntropyNative: the same steps fused by Megatron's jit_fuser
	// (megatron/core/fusions/fused_cross_entropy.py).
	CrossEntropyNative = "native"
	// CrossEntropyTE: Transformer Engine's online-softmax Triton kernels
	// (transformer_engine/pytorch/triton/cross_entropy.py).
	CrossEntropyTE = "te"
)

// CrossEntropyFusions lists the allowed Run.CrossEntropyFusion values.
func CrossEntropyFusions() []string {
	return []string{CrossEntropyUnfused, CrossEntropyNative, CrossEntropyTE}
}

// crossEntropy is the vocabulary-parallel cross entropy over m tokens' vt
// logits (16-bit, b.e bytes each) as each implementation runs it, every
// step a kernel:
//   - unfused: the logits copied to fp32 (.float()), their row max, the
//     max subtracted in place, exponentiated in place, summed, and divided
//     by the sum in place: 38 bytes a logit; the fp32 softmax is kept; the
//     backward scales it in place by the loss gradient and autograd casts
//     it back to 16 bits (14). Under TP three all-reduces of one fp32 per
//     token join the vocabulary shards (max, target logit, sum).
//   - native: the fp32 copy with its max, the subtraction, exponential and
//     sum, and the division each one fused kernel (22 bytes a logit), the
//     target logit and the sum reduced in one all-reduce; the backward's
//     scaling and cast one kernel (6).
//   - te: one pass reading the 16-bit logits for the row's max and sum of
//     exponentials (online softmax), the statistics all-gathered over TP
//     (three fp32 a token), the loss from them; the backward rereads the
//     logits kept and writes the gradient over them (4 bytes a logit at
//     16 bits).
func (b *builder) crossEntropy(m, vt int64) {
	n := float64(m * vt)
	const f32 = 4
	ce := func(name string, bytes float64) Op {
		return NewStreaming("head.cross_entropy."+name, CrossEntropy, b.a, n, bytes)
	}
	comm := func(name string, kind Kind, bytesPerToken float64) {
		if b.t > 1 {
			b.add(step{fwd: []Op{NewComm("head.cross_entropy."+name, kind, bytesPerToken*float64(m))}})
		}
	}
	switch b.r.CrossEntropyFusion {
	case CrossEntropyTE:
		b.add(step{fwd: []Op{ce("online_softmax", n*b.e)}, bwd: []Op{ce("grad", 2*n*b.e)}, saved: n * b.e})
		comm("stats.all_gather", AllGather, 3*f32*float64(b.t))
	case CrossEntropyNative:
		b.add(step{fwd: []Op{ce("float_max", n*(b.e+f32))}, bwd: []Op{ce("grad", n*(f32+b.e))}})
		comm("max.all_reduce", AllReduce, f32)
		b.add(step{fwd: []Op{ce("exp_sum", 2*n*f32)}})
		comm("target_sum_exp.all_reduce", AllReduce, 2*f32)
		b.add(step{fwd: []Op{ce("div", 2*n*f32)}, saved: n * f32})
	default:
		b.add(step{fwd: []Op{ce("float", n*(b.e+f32)), ce("max", n*f32)}, bwd: []Op{ce("grad_cast", n*(f32+b.e))}})
		comm("max.all_reduce", AllReduce, f32)
		b.add(step{fwd: []Op{ce("sub_max", 2*n*f32), ce("exp", 2*n*f32), ce("sum", n*f32)}})
		comm("target.all_reduce", AllReduce, f32)
		comm("sum_exp.all_reduce", AllReduce, f32)
		b.add(step{fwd: []Op{ce("div", 2*n*f32)}, bwd: []Op{ce("grad_scale", 2*n*f32)}, saved: n * f32})
	}
}

// transformer is a pre-norm transformer block: attention then MLP, each with
// a residual. shared builds Zamba's shared block, whose attention reads the
// concatenation [residual, input embedding] (width 2·hidden), whose weights
// are shared by every invocation, and which ends with a per-invocation
// hidden×hidden projection.
func (b *builder) transformer(shared bool) {
	c := b.c
	gpt := c.Family == GPT
	h := int64(c.Hidden)
	in := h
	if shared {
		in = 2 * h
	}
	hd, hs, kvs, f := int64(c.HeadDim), int64(c.Heads)/b.t, b.split(int64(c.KVHeads)), int64(c.FFNHidden)/b.t
	qkv := (hs + 2*kvs) * hd
	T := b.T

	attn := in*qkv + hs*hd*h
	norms := in + h
	if c.QKNorm && !c.IsMLA() {
		norms += 2 * hd // q_norm and k_norm, replicated on every TP rank
	}
	mlp := 3 * h * f // SwiGLU: gate, up, down
	if gpt {
		attn += qkv + h // biases (the row-parallel bias is replicated)
		norms *= 2      // LayerNorm has a bias
		mlp = 2*h*f + f + h
	}
	if c.IsMLA() {
		attn = b.mlaParams()
	}
	if b.moe {
		mlp = b.moeParams()
	}
	if shared {
		b.shared = attn + norms + mlp
		b.params = h * h
		n := float64(b.Tn * in)
		b.stream("shared.concat", Elementwise, 0, 2*n*b.e, 0, 0, 0)
	} else {
		b.params = attn + norms + mlp
	}

	// With fused add-norms each norm takes in the residual add before it
	// (the previous block's MLP output; this block's attention output) and
	// the adds go: the first block's input norm has no add before it and
	// the final norm one, so every block counts two.
	fused := b.fuseAddNorm() && !shared
	if fused {
		b.fusedAddNorm("attn.norm", b.Tn, in)
	} else {
		b.norm("attn.norm", b.Tn, in)
	}
	b.recomputable(ModuleLayerNorm, float64(b.Tn*in)*b.e)
	if c.IsMLA() {
		b.mla()
	} else {
		b.attention(shared, in, hs, kvs, hd, qkv)
	}
	if fused {
		b.fusedAddNorm("mlp.norm", b.Tn, h)
	} else {
		b.residual("attn.residual", h)
		b.norm("mlp.norm", b.Tn, h)
	}
	b.recomputable(ModuleLayerNorm, float64(b.Tn*h)*b.e)
	if b.moe {
		b.moeFFN()
	} else {
		b.mlp(f)
	}
	if !fused {
		b.residual("mlp.residual", h)
	}
	if shared {
		b.gemm("shared.linear", T, h, h)
	}
}

// attention is the standard attention of a transformer block (GQA with
// rotary for LLaMA, with biases for GPT), between its norm and residual.
func (b *builder) attention(shared bool, in, hs, kvs, hd, qkv int64) {
	c := b.c
	gpt := c.Family == GPT
	h, T := int64(c.Hidden), b.T
	b.enter("attn", in)
	b.gemm("attn.qkv", T, qkv, in)
	// GPT's linear layers carry biases (Megatron-LM): the QKV bias is added
	// in its GEMM; the row-parallel outputs' biases in the fused
	// bias-dropout-add (residual), the MLP's first in the fused bias-GeLU.
	bias := gpt && b.training()
	if bias {
		b.biasGrad("attn.qkv", T, qkv)
	}
	if c.QKNorm {
		// Each head's queries, then keys, normalized as rows of head_dim
		// (Megatron-Core's q_layernorm and k_layernorm, vLLM's q_norm and
		// k_norm: two norm kernels).
		b.norm("attn.q_norm", T*hs, hd)
		b.norm("attn.k_norm", T*kvs, hd)
	}
	if !gpt && !shared {
		// Rotary on Q and K: x·cos + rotate(x)·sin, 3 FLOPs per element.
		n := float64(T * (hs + kvs) * hd)
		b.stream("attn.rotary", Rotary, 3*n, 2*n*b.e, 3*n, 2*n*b.e, 0)
		b.rows(T, (hs+kvs)*hd)
		b.rotaryHeads(hs, kvs, hd)
	}
	if !b.training() {
		b.kvCacheWrite(float64(T * 2 * kvs * hd))
	}
	b.attentionCore(hs, kvs, hd)
	b.gemm("attn.out", T, h, hs*hd)
	b.exit("attn", h)
	if bias {
		b.biasGrad("attn.out", b.Tn, h)
	}
}

// mlp is the dense MLP (GELU for GPT, SwiGLU otherwise) of width f per rank.
func (b *builder) mlp(f int64) {
	c := b.c
	gpt := c.Family == GPT
	bias := gpt && b.training()
	h, T := int64(c.Hidden), b.T
	b.enter("mlp", h)
	n := float64(T * f)
	if gpt {
		b.gemm("mlp.up", T, f, h)
		if bias {
			b.biasGrad("mlp.up", T, f)
		}
		// GELU (tanh form) with the bias fused: ≈8 FLOPs per element; keeps its input.
		b.stream("mlp.gelu", Elementwise, 8*n, 2*n*b.e, 16*n, 3*n*b.e, n*b.e)
	} else {
		b.gemm("mlp.gate_up", T, 2*f, h)
		// SwiGLU silu(gate)·up: ≈6 FLOPs per element; keeps gate and up.
		b.stream("mlp.swiglu", Elementwise, 6*n, 3*n*b.e, 12*n, 5*n*b.e, 2*n*b.e)
	}
	b.gemm("mlp.down", T, h, f)
	b.exit("mlp", h)
	if bias {
		b.biasGrad("mlp.down", b.Tn, h)
	}
}

// tokenElems are the elements of one token's attention operands on a rank:
// its queries, its keys and values, its output.
type tokenElems struct{ q, kv, out int64 }

// flash adds causal FlashAttention over this rank's queries (hs query
// heads, kvs key/value heads of dimension hd), keeping saved bytes for the
// backward; per are one token's operands.
//
// Under context parallelism (Run.CP = c > 1) the rank's two chunks of the
// sequence, s tokens in all, attend to every earlier token of the whole
// sequence: with the chunks placed for balance that is the same work on
// every rank, s queries against c·s/2 keys without a mask (the causal
// attention's c·s·c·s/2 pairs over c ranks). Transformer Engine's ring
// attention (cp_comm_type "p2p") passes each rank's keys and values on to
// the next rank in c−1 steps while it computes on the chunk it holds: the
// forward receives every other rank's keys and values (an all-gather's
// traffic); the backward receives them again and returns the gradients of
// the keys and values to their ranks (a reduce-scatter's). Both run on
// the context-parallel group while the attention computes (Op.CP).
//
// The ring also runs elementwise kernels around its c attention steps
// (AttnFuncWithCPAndKVP2P): forward, each step's partial output is merged
// into the running one by its log-sum-exp (flash_attn_fwd_out_correction:
// read both, write one); backward, each step's dQ is added into the
// rank's (dq.add_) and, on the steps that take half the queries, the
// halves of Q, O and dO are first copied out contiguously, and each step's
// dK and dV are added into the buffer the ring passes on. They are priced
// as one pass each way, for c steps of the rank whose every step is full
// (the ring's steps wait for its slowest member).
//
// With Run.CPComm CPAllToAll (DeepSpeed-Ulysses; Transformer Engine's
// AttnFuncWithCPAndQKVOA2A) an all-to-all over the context-parallel group
// instead trades each rank's sequence share of every head for the whole
// sequence of heads/c heads; the rank runs the causal attention of those
// heads over the full sequence, and a second all-to-all returns the
// output to the sequence split (backward: the output's gradient, then the
// gradients of Q, K and V). The attention waits for its all-to-all.
//
// With CPAllGather (Llama 3's context parallelism, Dubey et al. 2024
// §3.3.2: all-gather the keys and values, then compute the local queries'
// attention; Transformer Engine's AttnFuncWithCPAndKVAllGather) the
// exchange is the ring's traffic without its overlap: the attention waits
// for the gather, forward and backward, and the gradients of the keys and
// values are reduce-scattered after it.
//
// The step is the attention core a selective recompute reruns (Megatron-
// Core's Attention._checkpointed_attention_forward, core_attn: the core
// attention, whichever kernel and context-parallel exchange it runs, is
// rerun in the backward from its Q, K and V): it then keeps Q, K and V and
// drops the fp32 log-sum-exp (the output is the projection's saved input).
//
// FP8 attention (Run.FP8Attention) puts Transformer Engine's casts around
// it (fp8_dpa without fp8_mha: "DPA casts the inputs from higher precision
// to FP8, performs attention in FP8, and casts the output back",
// transformer_engine/common/recipe): Q, K and V quantized as the recipe
// quantizes a GEMM's input, for their forward and transposed backward
// uses, and the output read back from FP8; backward, the output's
// gradient quantized and Q, K and V's gradients read back. The tensors
// the backward keeps are still counted at 16 bits.
func (b *builder) flash(hs, kvs, hd int64, per tokenElems, saved float64) {
	fp8 := b.training() && b.attnDType().Bytes() == 1
	tokens := float64(b.r.Batch * b.r.SeqLen)
	qkv, out := tokens*float64(per.q+per.kv), tokens*float64(per.out)
	if fp8 {
		b.add(step{fwd: b.fp8Quantize("attn.fp8_cast", qkv), bwd: []Op{b.fromFP8("attn.grad_fp8_dequantize", qkv)}})
	}
	b.flashCore(hs, kvs, hd, per, saved)
	if fp8 {
		b.add(step{fwd: []Op{b.fromFP8("attn.fp8_dequantize", out)}, bwd: b.fp8Quantize("attn.grad_fp8_cast", out)})
	}
}

// fromFP8 reads n FP8 elements back into the activation type.
func (b *builder) fromFP8(name string, n float64) Op {
	return NewStreaming(name, Quantize, b.a, n, n*(1+b.e))
}

// flashCore is flash's attention step, without FP8 attention's casts.
func (b *builder) flashCore(hs, kvs, hd int64, per tokenElems, saved float64) {
	r := b.r
	B, s, c := int64(r.Batch), int64(r.SeqLen), int64(max(r.CP, 1))
	defer b.recomputable(ModuleCoreAttn, 4*float64(B*hs*s)) // after the step each branch adds
	if c == 1 {
		fa := b.flashAttention(B, hs, kvs, s, s, hd, true)
		b.add(step{fwd: []Op{fa}, bwd: []Op{flashBackward(fa)}, saved: saved})
		return
	}
	if r.CPComm == CPAllToAll {
		fa := b.flashAttention(B, hs/c, max(kvs/c, 1), c*s, c*s, hd, true)
		qkv := NewComm("attn.cp.qkv_all_to_all", AllToAll, float64(B*s*(per.q+per.kv))*b.e)
		out := NewComm("attn.cp.out_all_to_all", AllToAll, float64(B*s*per.out)*b.e)
		dout, dqkv := out, qkv
		dout.Name, dqkv.Name = "attn.cp.dout_all_to_all", "attn.cp.dqkv_all_to_all"
		for _, o := range []*Op{&qkv, &out, &dout, &dqkv} {
			o.CP = true
		}
		b.add(step{fwd: []Op{qkv, fa, out}, bwd: []Op{dout, flashBackward(fa), dqkv}, saved: saved})
		return
	}
	fa := b.flashAttention(B, hs, kvs, s, c*s/2, hd, false)
	gathered := float64(B*c*s*per.kv) * b.e
	kv := NewComm("attn.cp.kv_all_gather", AllGather, gathered)
	dkv := NewComm("attn.cp.dkv_reduce_scatter", ReduceScatter, gathered)
	kv.CP, dkv.CP = true, true
	if r.CPComm == CPAllGather {
		b.add(step{fwd: []Op{kv, fa}, bwd: []Op{kv, flashBackward(fa), dkv}, saved: saved})
		return
	}
	kv.Alongside, dkv.Alongside = true, true
	out := float64(B*s*per.out) * b.e // the rank's attention output (or dQ)
	kvs2 := float64(B*s*per.kv) * b.e // its keys and values (or their gradients)
	steps := float64(c)
	merge := NewStreaming("attn.cp.out_correction", Elementwise, b.a, 6*steps*out/b.e, 3*steps*out)
	accumulate := NewStreaming("attn.cp.grad_accumulate", Elementwise, b.a, steps*(out+kvs2)/b.e,
		3*(2*steps-1)*out+3*steps*kvs2)
	b.add(step{fwd: []Op{kv, fa, merge}, bwd: []Op{kv, dkv, flashBackward(fa), accumulate}, saved: saved})
}

// flashAttention is the run's FlashAttention forward over this rank's
// heads (FlashAttention-2's kernels where Run.FlashAttention2 says so).
func (b *builder) flashAttention(batch, heads, kvHeads, sq, skv, hd int64, causal bool) Op {
	fa := NewLocalFlashAttention("attn.flash", b.attnDType(), batch, heads, kvHeads, sq, skv, hd, causal, b.local)
	fa.SyncMMA = b.r.FlashAttention2
	return fa
}

// localKeys is the cached keys a decoding query of a context of n tokens
// (itself the last) reads: all of them, or those its local attention leaves.
func (b *builder) localKeys(n int64) int64 { return b.local.Keys(n - 1) }

// kvCacheWrite appends a pass's n new cache elements (keys and values, or
// MLA's latent and rotary key) to the KV cache: read in the activation
// type, written in the cache's (Run.KVDType).
func (b *builder) kvCacheWrite(n float64) {
	b.stream("attn.kv_cache_write", Elementwise, 0, n*(b.e+b.kv), 0, 0, 0)
}

// attentionCore is causal self-attention over this rank's heads: decode
// attention over the cache, FlashAttention, or the unfused Megatron kernels.
func (b *builder) attentionCore(hs, kvs, hd int64) {
	r := b.r
	B := int64(r.Batch)
	if r.Phase == Decode {
		o := NewDecodeAttention("attn.decode", b.attnDType(), b.kv, B, hs, kvs, b.localKeys(int64(r.KVLen)+1), hd)
		o.XQA = r.XQADecode
		b.add(step{fwd: []Op{o}})
		return
	}
	s := int64(r.SeqLen)
	qk := float64(b.T*(hs+kvs)*hd) * b.e // Q and K, kept (outputs of attn.qkv)
	v := float64(b.T*kvs*hd) * b.e
	if !r.UnfusedAttention {
		// Keeps Q, K, V and the fp32 log-sum-exp per query row.
		b.flash(hs, kvs, hd, tokenElems{q: hs * hd, kv: 2 * kvs * hd, out: hs * hd}, qk+v+4*float64(B*hs*s))
		return
	}
	bh := B * hs
	p := float64(bh * s * s) // score elements
	// Megatron-LM splits the QKV GEMM's output into Q, K and V views; the
	// backward of the split concatenates their gradients into one tensor
	// (a copy: read and write every element).
	n := float64(b.T*(hs+2*kvs)*hd) * b.e
	b.add(step{bwd: []Op{NewStreaming("attn.qkv.split.bwd", Elementwise, b.a, 0, 2*n)}})
	b.add(step{
		fwd: []Op{NewGEMM("attn.scores", b.attnDType(), bh, s, s, hd)},
		// dQ = dS·K and dK = dSᵀ·Q, each [s×hd] over s.
		bwd:   []Op{NewGEMM("attn.scores.dq", b.attnDType(), bh, s, hd, s), NewGEMM("attn.scores.dk", b.attnDType(), bh, s, hd, s)},
		saved: qk, module: ModuleCoreAttn,
	})
	// Scale, causal mask and softmax: ≈5 FLOPs per score; keeps the probabilities.
	b.add(step{
		fwd:   []Op{NewStreaming("attn.softmax", Softmax, b.a, 5*p, 2*p*b.e)},
		bwd:   []Op{NewStreaming("attn.softmax.bwd", Softmax, b.a, 4*p, 3*p*b.e)},
		saved: p * b.e, dropped: p * b.e, module: ModuleCoreAttn,
	})
	if b.c.Family == GPT {
		b.add(step{
			fwd:   []Op{NewStreaming("attn.dropout", Elementwise, b.a, 2*p, p*(2*b.e+1))},
			bwd:   []Op{NewStreaming("attn.dropout.bwd", Elementwise, b.a, p, p*(2*b.e+1))},
			saved: p, dropped: p, module: ModuleCoreAttn,
		})
	}
	b.add(step{
		// The context leaves the batched GEMM as [batch·heads, s, d] and is
		// permuted to [s, batch, heads·d] with .contiguous(), a copy
		// (Megatron-LM CoreAttention); its gradient needs none (the batched
		// GEMMs take the strided view).
		fwd: []Op{NewGEMM("attn.context", b.attnDType(), bh, s, hd, s),
			NewStreaming("attn.context.permute", Elementwise, b.a, 0, 2*float64(b.T*hs*hd)*b.e)},
		// dP = dO·Vᵀ [s×s] over hd, dV = Pᵀ·dO [s×hd] over s.
		bwd:   []Op{NewGEMM("attn.context.dp", b.attnDType(), bh, s, s, hd), NewGEMM("attn.context.dv", b.attnDType(), bh, s, hd, s)},
		saved: p*b.e + v, dropped: p * b.e, module: ModuleCoreAttn,
	})
}

// Selective-scan arithmetic per (token, channel, state) element: discretize
// exp(Δ·A) (2), Δ·B·u (2), h = Ā·h + B̄u (2), y += C·h (2), plus the exp
// itself counted as one: 9. Per (token, channel): softplus(Δ), D·u skip and
// the SiLU(z) gate, ≈5 (Gu & Dao 2023, Algorithm 2; the CUDA kernel
// selective_scan_fwd). The backward kernel recomputes the forward states
// and runs the reverse scan: 3× the forward state arithmetic.
const (
	scanFlopsPerState   = 9
	scanFlopsPerChannel = 5
)

// conv is the depthwise causal conv1d (k taps) with SiLU fused over ch
// channels (causal_conv1d); decode updates the rolling conv state instead.
func (b *builder) conv(ch int64) {
	k := int64(b.c.DConv)
	if b.r.Phase == Decode {
		n := float64(int64(b.r.Batch) * ch)
		// Read the state (k−1 columns) and x, write the shifted state and y.
		b.stream("mixer.conv_step", Conv1D, float64(2*k+4)*n, float64(2*k)*n*b.e, 0, 0, 0)
		return
	}
	n := float64(b.T * ch)
	bytes := 2 * n * b.e
	if b.r.Phase == Prefill {
		bytes += float64(int64(b.r.Batch)*ch*(k-1)) * b.e // conv state for decoding
	}
	b.stream("mixer.conv1d", Conv1D, float64(2*k+4)*n, bytes, float64(4*k+4)*n, 3*n*b.e, n*b.e)
}

// ssmStep is one decode step of the recurrence for ch channels of a
// state of size N: read and write the state, 9 FLOPs per state element.
func (b *builder) ssmStep(ch, groups int64) {
	N := int64(b.c.DState)
	n := float64(int64(b.r.Batch) * ch)
	st := n * float64(N)
	io := (4*n + 2*float64(int64(b.r.Batch)*groups*N)) * b.e // x, dt, z in; y out; B, C in
	b.stream("mixer.ssm_step", SSMStep, scanFlopsPerState*st+scanFlopsPerChannel*n, 2*st*b.e+io, 0, 0, 0)
}

// mamba1 is a Mamba-1 block: norm, in_proj (x and z), conv1d, x_proj (Δ, B,
// C), dt_proj, selective scan, out_proj. Under TP each rank holds d_inner/t
// channels; x_proj contracts over channels, so its small output is summed
// across ranks.
func (b *builder) mamba1() {
	c := b.c
	h, dit, N, R, k := int64(c.Hidden), int64(c.DInner())/b.t, int64(c.DState), int64(c.DtRank), int64(c.DConv)
	T := b.T
	b.params = h*2*dit + dit*(k+1) + dit*(R+2*N) + R*dit + dit + dit*N + dit + dit*h + h

	b.norm("mixer.norm", b.Tn, h)
	b.enter("mixer", h)
	b.gemm("mixer.in_proj", T, 2*dit, h)
	b.conv(dit)
	b.gemm("mixer.x_proj", T, R+2*N, dit)
	if !b.r.LocalSSMProjections {
		b.partialSum("mixer.x_proj", R+2*N)
	}
	b.gemm("mixer.dt_proj", T, dit, R)
	if b.r.Phase == Decode {
		b.ssmStep(dit, 1)
	} else {
		n := float64(T * dit)
		st := n * float64(N)
		bc := float64(2*T*N) * b.e
		// Read u, Δ, z, B, C; write y (the states stay on chip).
		bytes := 4*n*b.e + bc
		if b.r.Phase == Prefill {
			bytes += float64(int64(b.r.Batch)*dit*N) * b.e // final state for decoding
		}
		b.stream("mixer.scan", SelectiveScan,
			scanFlopsPerState*st+scanFlopsPerChannel*n, bytes,
			3*scanFlopsPerState*st+2*scanFlopsPerChannel*n, 7*n*b.e+2*bc,
			2*n*b.e+bc) // keeps Δ, z, B, C (u is x_proj's kept input)
	}
	b.gemm("mixer.out_proj", T, h, dit)
	b.exit("mixer", h)
	b.residual("mixer.residual", h)
}

// mamba2 is a Mamba-2 block: norm, packed in_proj [z, x, B, C, dt], conv1d
// over [x, B, C], chunked SSD scan, gated RMSNorm, out_proj. Under TP each
// rank holds nheads/t heads and ngroups/t groups (a group replicated when
// t > ngroups), with one all-reduce after out_proj (Dao & Gu 2024, §8).
func (b *builder) mamba2() {
	c := b.c
	h, N, P, k := int64(c.Hidden), int64(c.DState), int64(c.SSMHeadDim), int64(c.DConv)
	Ht := int64(c.SSMHeads()) / b.t
	Gt := b.split(int64(c.NGroups))
	dit := Ht * P
	convC := dit + 2*Gt*N
	T := b.T
	b.params = h*(2*dit+2*Gt*N+Ht) + convC*(k+1) + 3*Ht + dit + dit*h + h

	b.norm("mixer.norm", b.Tn, h)
	b.enter("mixer", h)
	b.gemm("mixer.in_proj", T, 2*dit+2*Gt*N+Ht, h)
	b.conv(convC)
	if b.r.Phase == Decode {
		b.ssmStep(dit, Gt)
	} else {
		b.ssd(Ht, Gt, P, N)
	}
	// Gated RMSNorm y·silu(z), normalized per group: ≈9 FLOPs per element;
	// keeps y and z.
	n := float64(T * dit)
	b.stream("mixer.gated_norm", Norm, 9*n, 3*n*b.e, 18*n, 5*n*b.e, 2*n*b.e)
	b.gemm("mixer.out_proj", T, h, dit)
	b.exit("mixer", h)
	b.residual("mixer.residual", h)
}

// ssd is the Mamba-2 chunked scan (Dao & Gu 2024, §6, the ssd_combined
// kernels) over chunks of Q tokens, as matmuls: C·Bᵀ within each chunk per
// group (2·Q·N per token), the masked scores times X per head (2·Q·P), chunk
// states Bᵀ·X (2·N·P per token and head), states to outputs C·state
// (2·N·P), the decay mask (Q per token and head) and the inter-chunk
// recurrence (2·P·N per chunk and head). Traffic: read x, B, C, dt; write y;
// chunk states (fp32) written and read back twice. The backward is twice the
// forward's matmuls plus recomputing the chunk states (the kernels keep
// none), with twice the traffic.
func (b *builder) ssd(Ht, Gt, P, N int64) {
	r := b.r
	L := int64(r.SeqLen)
	Q := min(int64(b.c.ChunkSize), L)
	chunks := int64(r.Batch) * ceilDiv(L, Q)
	Tq := float64(chunks * Q)
	states := float64(chunks * Ht * P * N)
	flops := 2*Tq*float64(Q*N*Gt) + 2*Tq*float64(Q*Ht*P) + 4*Tq*float64(N*Ht*P) + Tq*float64(Q*Ht) + 2*states
	io := float64(2*b.T*Ht*P+2*b.T*Gt*N)*b.e + 4*float64(b.T*Ht)
	bytes := io + 4*4*states
	if r.Phase == Prefill {
		bytes += float64(int64(r.Batch)*Ht*P*N) * b.e // final state for decoding
	}
	fwd := NewStreaming("mixer.ssd", SSDScan, b.a, flops, bytes)
	fwd.Tensor = true
	bwd := NewStreaming("mixer.ssd.bwd", SSDScan, b.a, 2*flops+2*Tq*float64(N*Ht*P)+2*states, 2*bytes)
	bwd.Tensor = true
	// Keeps x, B, C (conv outputs) and dt (fp32).
	b.add(step{fwd: []Op{fwd}, bwd: []Op{bwd}, saved: float64(b.T*(Ht*P+2*Gt*N))*b.e + 4*float64(b.T*Ht)})
}
