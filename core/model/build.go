package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eidolon-sim/eidolon/core/problem"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// Phase is the kind of work a graph describes.
type Phase string

const (
	// Training is one step on one micro-batch: forward, backward, optimizer.
	Training Phase = "training"
	// Prefill processes each prompt (SeqLen tokens), filling the KV cache / SSM state.
	Prefill Phase = "prefill"
	// Decode generates one token per sequence against KVLen cached tokens.
	Decode Phase = "decode"
)

// Recompute is the activation recomputation policy (Korthikanti et al. 2022).
type Recompute string

const (
	RecomputeNone Recompute = "none"
	// RecomputeSelective recomputes the attention core (scores, softmax,
	// dropout, context) in the backward and keeps everything else.
	RecomputeSelective Recompute = "selective"
	// RecomputeFull keeps only each block's input and reruns its forward.
	RecomputeFull Recompute = "full"
)

// Modules a selective recomputation reruns (Megatron-Core's
// --recompute-modules): the attention core (the default), the layer's two
// norms (input_layernorm and pre_mlp_layernorm: their outputs are not kept),
// the routed experts' activation (its output, the down projection's input,
// is not kept) and the whole mixture-of-experts layer (TransformerLayer
// checkpoints self.mlp with its input, the pre-MLP norm's output: router,
// dispatch and combine all-to-alls, experts and shared experts rerun in
// the backward, and only that input is kept).
const (
	ModuleCoreAttn  = "core_attn"
	ModuleLayerNorm = "layernorm"
	ModuleMoEAct    = "moe_act"
	ModuleMoE       = "moe"
)

// RecomputeModules lists the modules a selective recomputation may name.
func RecomputeModules() []string {
	return []string{ModuleCoreAttn, ModuleLayerNorm, ModuleMoEAct, ModuleMoE}
}

// Run is the work to generate operators for, on one tensor-parallel rank.
type Run struct {
	Phase Phase
	// Batch is the number of sequences (the micro-batch in training).
	Batch int
	// SeqLen is tokens per sequence (training and prefill).
	SeqLen int
	// KVLen is the tokens already cached per sequence (decode).
	KVLen int
	// TP is the Megatron tensor-parallel degree; 0 means 1.
	TP int
	// SequenceParallel shards norms, dropout and residuals over the TP ranks
	// along the sequence (all-gather / reduce-scatter instead of all-reduce).
	SequenceParallel bool
	Recompute        Recompute
	// RecomputeModules are what a selective recomputation reruns (nil:
	// ModuleCoreAttn only, Megatron-Core's default).
	RecomputeModules []string
	// DType is the math type of GEMMs and attention (activations are 16-bit
	// when it is an 8-bit type).
	DType hw.DType
	// KVDType is the KV cache's element type in inference ("" keeps the
	// activation type): vLLM's --kv-cache-dtype fp8 stores keys and values
	// in 8 bits, written so by the cache write and read so by decode
	// attention (which dequantizes them to the math type).
	KVDType hw.DType
	// WeightDType, in inference, stores the linear layers' weights (not the
	// embedding, the output layer or a MoE router, which engines leave in
	// 16 bits) in a narrower type: weight-only quantization ("int8",
	// "int4"; "" keeps DType).
	WeightDType hw.DType
	// GradDType, in training, is the type of the buffer every weight
	// gradient GEMM accumulates into: Megatron-LM and Megatron-Core fuse the
	// accumulation into the GEMM by default (--gradient-accumulation-fusion:
	// apex's wgrad_gemm_accum_fp32, Transformer Engine's
	// fuse_wgrad_accumulation), which reads and writes the fp32 main_grad
	// instead of writing a 16-bit gradient. "" writes the gradient once.
	GradDType hw.DType
	// FP8Recipe, when training with an 8-bit DType, is how the linear
	// layers' FP8 GEMMs take their scales and accumulate (FP8Delayed,
	// Megatron-Core's default, when empty).
	FP8Recipe string
	// VocabMultiple pads the vocabulary to a multiple of VocabMultiple·TP
	// before it is split over the TP ranks, as Megatron-LM does
	// (--make-vocab-size-divisible-by, 128 by default), so that each rank's
	// shard of the embedding and the output layer is a multiple of it; 0
	// splits the vocabulary as it is (each rank ⌈V/TP⌉ rows).
	VocabMultiple int
	// CrossEntropyFusion is the training loss's implementation
	// (CrossEntropyUnfused when empty).
	CrossEntropyFusion string
	// RouterDType, in training, is the type a mixture-of-experts router's
	// GEMM and scores run in (Megatron-Core's --moe-router-dtype; FP32:
	// RouterGatingLinearFunction casts its input and weight up); "" the
	// math's (16-bit under FP8).
	RouterDType hw.DType
	// FP8Dispatch, in FP8 training, sends a mixture-of-experts layer's
	// dispatch all-to-all (and, backward, the output gradients' way to the
	// experts) in FP8 with one FP32 scale per 128 elements, quantized
	// before it, as DeepSeek-V3's framework does (arXiv 2412.19437,
	// §3.3.2). Without it they carry the activation type, as Megatron-Core's
	// dispatchers send them: its all-to-all, DeepEP and HybridEP
	// dispatchers pass the hidden states as given and Transformer Engine
	// quantizes each expert's input after the dispatch
	// (megatron/core/transformer/moe/fused_a2a.py; HybridEP "does not
	// support fp8 dispatch"). Inference engines that compute in FP8
	// dispatch FP8 (SGLang and DeepEP's FP8 kernels), whatever it says.
	FP8Dispatch bool
	// TEOpFuser, in training, runs a mixture-of-experts layer's expert MLP
	// as Transformer Engine's fused operations (Megatron-Core's
	// --use-transformer-engine-op-fuser), which clamp the activation's
	// inputs inside its kernel (Megatron-LM #5940, July 2026: clamped
	// SwiGLU on the Transformer Engine grouped-MLP path); without it
	// Megatron-Core clamps them in eager PyTorch first (clampGLU).
	TEOpFuser bool
	// UnfusedAttention materializes the score matrix (Megatron without
	// FlashAttention): batched GEMMs, softmax and dropout kernels.
	UnfusedAttention bool
	// FlashAttention2 runs the attention as FlashAttention-2's kernels
	// (Op.SyncMMA), as a framework does that turns the part's own fused
	// attention off (Transformer Engine with NVTE_FUSED_ATTN=0 falls back
	// to flash-attn 2). False runs the fastest fused attention the part
	// has: cuDNN's or FlashAttention-3 on Hopper, FlashAttention-2 on
	// Ampere, whose native MMA it issues anyway.
	FlashAttention2 bool
	// FP8Attention, in FP8 training, runs the attention in FP8 as
	// Transformer Engine's DotProductAttention does with the recipe's
	// fp8_dpa (Megatron-Core's --fp8-dot-product-attention): its Q·Kᵀ and
	// P·V at the FP8 rate, Q, K and V cast to FP8 before it and its output
	// cast back after it, the output gradient cast to FP8 and Q, K and V's
	// gradients cast back in the backward (fp8Attention). False keeps the
	// attention in 16 bits, as Transformer Engine does by default.
	FP8Attention bool
	// FP8OutputProj, in MXFP8 training, runs the output layer's GEMMs in
	// MXFP8 as Transformer Engine's linear layer, its input and output
	// gradient cast (Megatron-Core's fp8_output_proj, which requires the
	// mxfp8 recipe: TELMHeadColumnParallelLinear); false keeps it in 16
	// bits, as Megatron-Core's plain ColumnParallelLinear head runs.
	FP8OutputProj bool
	// FusedAddNorm, in inference, runs each residual add inside the RMSNorm
	// after it, as one vectorized kernel (fusedAddNorm), as the serving
	// engines run LLaMA-style blocks; false keeps the add and the norm two
	// kernels (Hugging Face transformers, Vidur's profiled kernels).
	FusedAddNorm bool
	// XQADecode runs the decode attention as TensorRT-LLM's XQA kernel
	// (Op.XQA: its own split of each cache, merged in one kernel); false
	// as flash-decoding, the split vLLM and SGLang run through
	// FlashAttention and FlashInfer.
	XQADecode bool
	// LocalSSMProjections keeps Mamba-1's x_proj local to each rank's
	// channel shard (the SSM tensor-parallel partition of Dutt et al. 2026,
	// arXiv 2602.21144): no all-reduce of its output, one all-reduce per
	// block. False is the Megatron split as is (x_proj row-parallel, two
	// all-reduces per block).
	LocalSSMProjections bool
	// EP is the expert-parallel degree: each rank holds experts/EP routed
	// experts of every MoE block; 0 means 1.
	EP int
	// ExpertTP is the expert tensor-parallel degree (0 means TP): 1 or TP.
	// With 1 (training under sequence parallelism) each TP rank dispatches
	// its own sequence shard and holds whole experts: no gather over TP.
	ExpertTP int
	// CP is the context-parallel degree (Megatron-Core
	// --context-parallel-size; 0 means 1), training only: SeqLen is then
	// this rank's share of a sequence of CP·SeqLen tokens, two chunks
	// placed so that every rank does the same share of the causal
	// attention (chunk i and 2·CP−1−i of 2·CP), and the attention gathers
	// the other ranks' keys and values as Transformer Engine's ring
	// attention passes them (cp_comm_type "p2p"; contextParallelAttention).
	CP int
	// CPComm is how the context-parallel ranks exchange what attention
	// needs: CPRing ("" or "p2p", the ring above), CPAllGather
	// ("all_gather": the keys and values gathered before the attention, as
	// Llama 3 trained) or CPAllToAll ("a2a": DeepSpeed-Ulysses); Transformer
	// Engine's cp_comm_type values.
	CPComm string
	// ExpertTokens is the tokens each of this rank's experts processes in
	// one MoE block (after the expert-TP gather), from the routing; nil is
	// the balanced share batch·seq_len·k/experts·EP·ExpertTP/TP each.
	ExpertTokens []int64
}

// Context-parallel exchanges (Run.CPComm).
const (
	CPRing      = "p2p"
	CPAllGather = "all_gather"
	CPAllToAll  = "a2a"
)

// Block names.
const (
	BlockEmbedding   = "embedding"
	BlockTransformer = "transformer"
	BlockMamba       = "mamba"
	BlockMamba2      = "mamba2"
	BlockShared      = "shared_attention"
	BlockMoE         = "moe_transformer"
	// BlockTransformerSWA and BlockMoESWA are those blocks with a sliding
	// window (Config.SlidingWindow, WindowPattern's S), BlockTransformerChunked
	// and BlockMoEChunked with chunked attention (Config.AttentionChunk, C).
	BlockTransformerSWA     = "transformer_swa"
	BlockMoESWA             = "moe_transformer_swa"
	BlockTransformerChunked = "transformer_chunked"
	BlockMoEChunked         = "moe_transformer_chunked"
	BlockLMHead             = "lm_head"
	BlockMTP                = "mtp"
)

// IsAttentionBlock reports whether blocks named name run attention (and
// hold a KV cache): the transformer blocks, windowed or not, MoE or not,
// and the shared attention block.
func IsAttentionBlock(name string) bool {
	return name == BlockShared || name == BlockTransformer || name == BlockMoE || IsLocalBlock(name)
}

// IsLocalBlock reports whether blocks named name attend locally (a
// sliding window or chunks: Config.Local).
func IsLocalBlock(name string) bool {
	switch name {
	case BlockTransformerSWA, BlockMoESWA, BlockTransformerChunked, BlockMoEChunked:
		return true
	}
	return false
}

// IsMoEBlock reports whether blocks named name are mixture-of-experts transformer blocks.
func IsMoEBlock(name string) bool {
	return name == BlockMoE || name == BlockMoESWA || name == BlockMoEChunked
}

// Block is one kind of block and its operators on one rank, for one instance.
type Block struct {
	Name string
	// Count is how many times the block occurs in the model.
	Count int
	// Forward lists the forward operators in execution order, including the
	// tensor-parallel collectives (IsComm) where they sit.
	Forward []Op
	// Backward (training) lists recomputed forward operators first, then the
	// gradient operators, in execution order, with their collectives.
	Backward []Op
	// Optimizer (training) is the optimizer step (OptimizerStep) over this
	// instance's own weights.
	Optimizer []Op
	// SharedOptimizer (training) is the optimizer step over weights shared by every
	// instance (Zamba's shared block); it runs once per step, not per instance.
	SharedOptimizer []Op
	// Params is the parameters of one instance on this rank; SharedParams the
	// parameters shared by all instances (counted once).
	Params, SharedParams int64
	// ExpertParams is the part of Params in routed experts (sharded by
	// expert parallelism, reduced over the expert-data-parallel group).
	ExpertParams int64
	// QuantizedParams is the part of Params stored in Run.WeightDType (the
	// linear layers' weights of a weight-only quantized inference run).
	QuantizedParams int64
	// ActivationBytes is what one instance keeps from forward to backward
	// (training), under the run's recompute policy.
	ActivationBytes float64
}

// Graph is a model's operators for one run on one rank.
type Graph struct {
	Config Config
	Run    Run
	Blocks []Block
	// Order lists, first to last, the index in Blocks of each position of
	// the model: embedding, the pattern's blocks, LM head, then (training)
	// the multi-token-prediction modules.
	Order []int
}

// Tail is the positions from the LM head on: the head and the
// multi-token-prediction modules that follow it, which the last pipeline
// stage runs.
func (g Graph) Tail() int {
	for i := len(g.Order) - 1; i >= 0; i-- {
		if g.Blocks[g.Order[i]].Name == BlockLMHead {
			return len(g.Order) - i
		}
	}
	return 1
}

// Block returns the block with this name.
func (g Graph) Block(name string) (Block, bool) {
	for _, b := range g.Blocks {
		if b.Name == name {
			return b, true
		}
	}
	return Block{}, false
}

// CheckRun returns every problem of a run for this (defaulted, valid) config,
// with the Run field names as JSON spec fields.
func (c Config) CheckRun(r Run) []problem.Problem {
	var ps []problem.Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, problem.Problem{Path: field, Message: fmt.Sprintf(format, args...)})
	}
	if r.Phase != Training && r.Phase != Prefill && r.Phase != Decode {
		bad("phase", "must be one of training, prefill, decode, got %q", r.Phase)
	}
	if r.Batch <= 0 {
		bad("batch", "must be > 0, got %d", r.Batch)
	}
	if r.Phase != Decode && r.SeqLen <= 0 {
		bad("seq_len", "must be > 0, got %d", r.SeqLen)
	}
	if r.Phase == Decode && r.KVLen < 0 {
		bad("kv_len", "must be >= 0, got %d", r.KVLen)
	}
	if r.DType.Bytes() == 0 {
		bad("dtype", "must be one of fp32, tf32, bf16, fp16, fp8, int8, got %q", r.DType)
	}
	switch r.Recompute {
	case "", RecomputeNone, RecomputeSelective, RecomputeFull:
	default:
		bad("recompute", "must be one of none, selective, full, got %q", r.Recompute)
	}
	if len(r.RecomputeModules) > 0 && r.Recompute != RecomputeSelective {
		bad("recompute_modules", "apply to recompute \"selective\" only, got recompute %q", r.Recompute)
	}
	for _, m := range r.RecomputeModules {
		if !slices.Contains(RecomputeModules(), m) {
			bad("recompute_modules", "must be among %v, got %q", RecomputeModules(), m)
		}
	}
	t := max(r.TP, 1)
	if r.TP < 0 {
		bad("tp", "must be >= 1, got %d", r.TP)
	}
	div := func(field string, v int) {
		if v%t != 0 {
			bad("tp", "must divide %s (%d), got %d", field, v, t)
		}
	}
	if c.hasBlock(PatAttention) || c.hasBlock(PatShared) || c.hasBlock(PatMoE) {
		div("heads", c.Heads)
		if c.hasBlock(PatAttention) || c.hasBlock(PatShared) {
			div("ffn_hidden", c.FFNHidden)
		}
		if !c.IsMLA() && c.KVHeads%t != 0 && t%c.KVHeads != 0 {
			bad("tp", "must divide kv_heads (%d) or be a multiple of it, got %d", c.KVHeads, t)
		}
	}
	if c.hasBlock(PatSSM) {
		div("d_inner", c.DInner())
		if c.SSM == Mamba2 {
			div("SSM heads", c.SSMHeads())
			if c.NGroups%t != 0 && t%c.NGroups != 0 {
				bad("tp", "must divide n_groups (%d) or be a multiple of it, got %d", c.NGroups, t)
			}
		}
	}
	c.checkMoERun(r, bad)
	if r.FlashAttention2 && r.UnfusedAttention {
		bad("flash_attention_2", "runs FlashAttention-2's kernels, where unfused_attention runs no FlashAttention: set one of them")
	}
	if r.CP < 0 {
		bad("cp", "must be >= 1, got %d", r.CP)
	}
	if r.CP > 1 {
		switch {
		case r.Phase != Training:
			bad("cp", "context parallelism is modelled in training only, got phase %q", r.Phase)
		case r.UnfusedAttention:
			bad("cp", "context parallelism needs FlashAttention (Transformer Engine's ring attention), not unfused_attention")
		case c.hasBlock(PatSSM):
			bad("cp", "context parallelism of SSM blocks is not modelled (cp must be 1 for a model with Mamba blocks)")
		case c.LocalKind().On() && r.CPComm != CPAllToAll:
			comm := r.CPComm
			if comm == "" {
				comm = CPRing
			}
			bad("cp", "local attention (a sliding window or chunks) is modelled with cp_comm_type %q only (each rank attends over the whole sequence), got %q", CPAllToAll, comm)
		case r.SeqLen%2 != 0:
			bad("cp", "needs each rank's share of the sequence (%d tokens) to split into two chunks (seq_len a multiple of 2·cp)", r.SeqLen)
		}
	}
	switch r.CPComm {
	case "", CPRing, CPAllGather:
	case CPAllToAll:
		// Each rank attends with heads/cp of its tensor-parallel share of
		// the heads (query and key/value alike).
		heads, kv := c.Heads/t, c.KVHeads/t
		if c.IsMLA() {
			kv = heads
		}
		if cp := max(r.CP, 1); heads%cp != 0 || max(kv, 1)%cp != 0 {
			bad("cp_comm_type", "\"a2a\" splits the heads over cp: needs the heads (%d) and key/value heads (%d) of a tensor-parallel rank to be multiples of cp (%d)", heads, max(kv, 1), cp)
		}
	default:
		bad("cp_comm_type", "must be one of %s, %s, %s, got %q", CPRing, CPAllGather, CPAllToAll, r.CPComm)
	}
	if r.SequenceParallel && r.Phase != Decode && (r.Batch*r.SeqLen)%t != 0 {
		bad("sequence_parallel", "needs batch·seq_len (%d) divisible by tp (%d)", r.Batch*r.SeqLen, t)
	}
	return ps
}

// Build generates the operators of config c for run r on one TP rank.
// c must be defaulted and valid (Check), r valid for it (CheckRun).
func Build(c Config, r Run) (Graph, error) {
	if ps := append(c.Check(), c.CheckRun(r)...); len(ps) > 0 {
		return Graph{}, fmt.Errorf("model %q: %s: %s", c.Name, ps[0].Path, ps[0].Message)
	}
	if r.TP == 0 {
		r.TP = 1
	}
	if r.Recompute == "" {
		r.Recompute = RecomputeNone
	}
	if r.Phase != Training {
		r.Recompute = RecomputeNone
	}
	g := Graph{Config: c, Run: r}
	index := map[string]int{}
	add := func(name string, count int, f func(b *builder)) {
		if i, ok := index[name]; ok {
			g.Blocks[i].Count += count
			g.Order = append(g.Order, i)
			return
		}
		b := newBuilder(c, r)
		f(b)
		index[name] = len(g.Blocks)
		g.Order = append(g.Order, len(g.Blocks))
		g.Blocks = append(g.Blocks, b.block(name, count))
	}
	add(BlockEmbedding, 1, (*builder).embedding)
	k := 0 // attention layers so far
	for _, p := range c.Pattern {
		var l Local
		if p == PatAttention || p == PatMoE {
			l = c.Local(k)
			k++
		}
		dense, moe := BlockTransformerSWA, BlockMoESWA
		if l.Chunk > 0 {
			dense, moe = BlockTransformerChunked, BlockMoEChunked
		}
		switch {
		case p == PatAttention && l.On():
			add(dense, 1, func(b *builder) { b.local = l; b.transformer(false) })
		case p == PatMoE && l.On():
			add(moe, 1, func(b *builder) { b.local, b.moe = l, true; b.transformer(false) })
		case p == PatAttention:
			add(BlockTransformer, 1, func(b *builder) { b.transformer(false) })
		case p == PatMoE:
			add(BlockMoE, 1, func(b *builder) { b.moe = true; b.transformer(false) })
		case p == PatShared:
			add(BlockShared, 1, func(b *builder) { b.transformer(true) })
		case p == PatSSM:
			if c.SSM == Mamba2 {
				add(BlockMamba2, 1, (*builder).mamba2)
			} else {
				add(BlockMamba, 1, (*builder).mamba1)
			}
		}
	}
	add(BlockLMHead, 1, (*builder).lmHead)
	if r.Phase == Training {
		for i := 0; i < c.MTPLayers; i++ {
			add(BlockMTP, 1, (*builder).mtp)
		}
	}
	return g, nil
}

// step is one forward operator (or collective) with its backward and the
// activations it keeps for the backward.
type step struct {
	fwd []Op
	bwd []Op // in backward execution order
	// saved bytes are kept for the backward; of those, `dropped` are not kept
	// under a selective recompute of the step's module, where the step
	// reruns in the backward ("" = never recomputed selectively). dropped
	// may be kept by the next step (a norm's output is the next GEMM's
	// saved input).
	saved, dropped float64
	module         string
	// group is the enclosing module a selective recompute may rerun whole
	// (ModuleMoE); groupInput marks its first step, whose saved input is
	// the checkpoint's and stays kept.
	group      string
	groupInput bool
	// plain marks operators issued as plain PyTorch calls inside a
	// mixture-of-experts layer, which do not carry the layer's module
	// code (markMoELayer).
	plain bool
}

// recomputable marks the last step as selective recomputation's module m,
// dropping its output of out bytes (kept by the step that reads it).
func (b *builder) recomputable(m string, out float64) {
	s := &b.steps[len(b.steps)-1]
	s.module, s.dropped = m, out
}

// checkpointed marks the steps from start on as module m, rerun whole by a
// selective recompute of m (the first step's saved input is kept).
func (b *builder) checkpointed(m string, start int) {
	for i := start; i < len(b.steps); i++ {
		b.steps[i].group = m
	}
	if start < len(b.steps) {
		b.steps[start].groupInput = true
	}
}

// recomputes reports whether selective recomputation reruns module m.
func (r Run) recomputes(m string) bool {
	if r.Recompute != RecomputeSelective || m == "" {
		return false
	}
	if len(r.RecomputeModules) == 0 {
		return m == ModuleCoreAttn
	}
	return slices.Contains(r.RecomputeModules, m)
}

type builder struct {
	c  Config
	r  Run
	d  hw.DType // math type
	a  hw.DType // activation type
	e  float64  // activation bytes per element
	kv float64  // KV cache bytes per element
	t  int64    // TP degree
	sp bool     // sequence parallel
	// T is tokens in this pass on a rank; Tn tokens in the norm/residual
	// region (T/t under sequence parallelism).
	T, Tn int64
	steps []step
	// gathered: the next GEMM's input was all-gathered along the sequence;
	// it keeps only its shard (and re-gathers it in the backward).
	gathered bool
	params   int64
	shared   int64
	expert   int64 // routed-expert parameters in params
	quant    int64 // parameters in params stored in Run.WeightDType
	moe      bool  // the transformer block's FFN is a mixture of experts
	local    Local // the block's local attention (zero: full)
}

func newBuilder(c Config, r Run) *builder {
	b := &builder{c: c, r: r, d: r.DType, a: actDType(r.DType), t: int64(r.TP)}
	b.e = b.a.Bytes()
	b.kv = KVBytes(r.KVDType, r.DType)
	b.T = int64(r.Batch)
	if r.Phase != Decode {
		b.T *= int64(r.SeqLen)
	}
	b.Tn = b.T
	if r.SequenceParallel && b.t > 1 && r.Phase != Decode {
		b.sp = true
		b.Tn = b.T / b.t
	}
	return b
}

func (b *builder) training() bool { return b.r.Phase == Training }

// GroupScaleBytes is what an integer weight-only quantized weight adds for
// its group's scale: one 16-bit scale per 128 weights (GPTQ's and
// AutoAWQ's default group_size 128, which vLLM's Marlin kernels read, and
// Marlin's own ideal-speed model counts). FP8 weights carry one scale per
// channel, nothing per weight.
const GroupScaleBytes = 2.0 / 128

// StoredWeightBytes is what one weight stored in w takes, its group's
// scale included.
func StoredWeightBytes(w hw.DType) float64 {
	if w == hw.INT4 || w == hw.INT8 {
		return w.Bytes() + GroupScaleBytes
	}
	return w.Bytes()
}

// WeightBytes is the memory of a block's own and shared parameters when an
// inference run keeps them in the math type d (an 8-bit run's weights are
// 8-bit, as vLLM's FP8 checkpoints) and its quantized parameters
// (Block.QuantizedParams: its own first, the rest shared, as Zamba's shared
// block quantizes its per-use linear and its shared attention and MLP) in
// w with their group scales.
func WeightBytes(blk Block, d, w hw.DType) (own, shared float64) {
	e, we := d.Bytes(), StoredWeightBytes(w)
	quant := blk.QuantizedParams
	if w == "" {
		quant = 0
	}
	q := min(quant, blk.Params)
	sq := min(quant-q, blk.SharedParams)
	return float64(blk.Params-q)*e + float64(q)*we, float64(blk.SharedParams-sq)*e + float64(sq)*we
}

// KVBytes is the bytes of one KV cache element of type kv ("" the
// activation type of math type d).
func KVBytes(kv, d hw.DType) float64 {
	if kv == "" {
		return actDType(d).Bytes()
	}
	return kv.Bytes()
}

func (b *builder) add(s step) { b.steps = append(b.steps, s) }

// gemm adds Y[m×n] = X[m×k]·W[k×n] with its two gradient GEMMs,
// dX = dY·Wᵀ (m×k over n) and dW = Xᵀ·dY (k×n over m); it keeps X.
func (b *builder) gemm(name string, m, n, k int64) {
	quantized := b.fromActivation()
	b.gemmIn(b.d, name, m, n, k)
	if !b.training() && b.blockScaledFP8() {
		// A block-scaled checkpoint's linear layer (the router and the
		// output layer, gemm16, are not block-scaled in it): a
		// block-scaled GEMM whose input is quantized per token group first,
		// unless the activation before it wrote it so.
		st := &b.steps[len(b.steps)-1]
		st.fwd[0].SplitAccumulator = true
		if !quantized {
			// Per-token-group quantization (SGLang's
			// per_token_group_quant_fp8, DeepSeek's per_token_cast_to_fp8
			// in its profile): one FP32 scale per 128 elements.
			st.fwd = append([]Op{QuantizeOp(name+".fp8_quant", m*k, b.a, b.d, 128)}, st.fwd...)
		}
	}
	b.quantizeWeights()
}

// quantizeWeights stores the weights of the forward GEMM just added in
// Run.WeightDType (inference only) and counts them in the block's
// quantized parameters.
//
// MXFP4 quantizes the routed experts only, as gpt-oss's checkpoint does
// (its quantization_config leaves the attention, the router, the
// embedding and the output layer in BF16: modules_to_not_convert).
func (b *builder) quantizeWeights() {
	w := b.r.WeightDType
	if w == "" || b.training() {
		return
	}
	f := b.steps[len(b.steps)-1].fwd
	for i := range f {
		if f[i].Kind == GroupedGEMM || f[i].Kind == GEMM && w != hw.MXFP4 {
			b.quant += int64(max(len(f[i].Groups), 1)) * f[i].K * f[i].N
			f[i] = f[i].WithWeights(w)
		}
	}
}

// gemm16 is gemm in 16-bit math when the run trains in FP8: the layers
// Megatron leaves out of Transformer Engine's FP8 recipe (the output
// layer is a plain ColumnParallelLinear, the MoE router a torch linear).
func (b *builder) gemm16(name string, m, n, k int64) {
	d := b.d
	if b.fp8Training() {
		d = b.a
	}
	b.gemmIn(d, name, m, n, k)
}

func (b *builder) gemmIn(d hw.DType, name string, m, n, k int64) {
	saved := float64(m*k) * b.e
	if b.gathered {
		saved /= float64(b.t)
		b.gathered = false
	}
	fwd := []Op{NewGEMM(name, d, 1, m, n, k)}
	wgrad := NewGEMM(name+".wgrad", d, 1, k, n, m)
	wgrad.TokensK = true
	bwd := []Op{NewGEMM(name+".dgrad", d, 1, m, k, n), b.accumulate(wgrad)}
	if b.fp8Training() && d == b.d {
		fwd, bwd = b.fp8Linear(name, float64(m*k), float64(m*n), b.fromNorm(), fwd, bwd)
		saved *= d.Bytes() / b.e
	}
	b.add(step{fwd: fwd, bwd: bwd, saved: saved})
}

// FP8 training recipes: which of a linear layer's FP8 GEMMs run with a
// split accumulator (Op.SplitAccumulator).
const (
	// FP8Delayed: Megatron-Core's --fp8-recipe delayed, its default
	// (Transformer Engine's DelayedScaling): one scale per tensor, taken
	// from the amax history, so each cast also records its tensor's amax
	// in the same pass; the forward GEMM with fast accumulation, the input
	// and weight gradients with a split accumulator
	// (transformer_engine/pytorch/module/base.py: _2X_ACC_FPROP False,
	// _2X_ACC_DGRAD and _2X_ACC_WGRAD True).
	FP8Delayed = "delayed"
	// FP8Tensorwise: Megatron-Core's --fp8-recipe tensorwise (Transformer
	// Engine's Float8CurrentScaling): the GEMMs as FP8Delayed, but each
	// tensor's scale comes from its own amax, which a kernel of its own
	// reads the tensor for before the cast (fp8Quantize).
	FP8Tensorwise = "tensorwise"
	// FP8Blockwise: scales per 1×128 activation tile and 128×128 weight
	// block (DeepSeek-V3 §3.3, DeepGEMM, Transformer Engine's
	// Float8BlockScaling, Megatron's --fp8-recipe blockwise): every GEMM
	// applies its scales and promotes per 128-element block.
	FP8Blockwise = "blockwise"
	// FP8MXFP8: Megatron-Core's --fp8-recipe mxfp8 (Transformer Engine's
	// MXFP8BlockScaling): OCP microscaling, an E8M0 scale per 32 elements
	// along the reduction, which Blackwell's tensor cores apply inside the
	// MMA (tcgen05's block-scaled kinds) while accumulating in FP32 in
	// tensor memory, so no GEMM promotes on the CUDA cores; Transformer
	// Engine runs it on Blackwell only (MXFP8 needs compute capability 10).
	// A scale block runs along K, so the transposed use of a tensor (the
	// weight gradient's input, the input gradient's weight) is a
	// quantization of its own: each cast writes the tensor rowwise and
	// columnwise with their scales (MXFP8Quantize).
	FP8MXFP8 = "mxfp8"
)

// FP8Recipes lists the allowed Run.FP8Recipe values.
func FP8Recipes() []string { return []string{FP8Delayed, FP8Tensorwise, FP8Blockwise, FP8MXFP8} }

// fp8Linear applies the FP8 recipe to a linear layer's GEMMs (fwd, bwd):
// Transformer Engine's casts (fp8Casts) and the split accumulator where
// the recipe runs one.
func (b *builder) fp8Linear(name string, in, grad float64, normFed bool, fwd, bwd []Op) ([]Op, []Op) {
	split := func(ops []Op) {
		for i := range ops {
			if ops[i].Tensor {
				ops[i].SplitAccumulator = true
			}
		}
	}
	if b.r.FP8Recipe != FP8MXFP8 {
		split(bwd)
	}
	if b.blockScaledFP8() {
		split(fwd)
	}
	return b.fp8Casts(name, in, grad, normFed, fwd, bwd)
}

// fp8Casts puts Transformer Engine's FP8 casts around an FP8 linear layer
// whose input has in elements and whose output gradient has grad: each is
// cast as is and transposed (what the weight gradient reads), and the
// transposed FP8 input is what the backward keeps. A norm-fed input
// (LayerNormLinear) is written in FP8 by the norm itself and only
// transposed in the backward (fp8_transpose); the norm's own output is
// still priced at 16 bits (1 byte an element over). Under MXFP8 the norm
// writes 16 bits and a cast follows, as for any input: Transformer
// Engine fuses MXFP8 output into a norm only on cuDNN's kernels, off
// unless NVTE_NORM_FWD_USE_CUDNN is set (pytorch/csrc/extensions/
// normalization.cpp, layernorm_fwd and rmsnorm_fwd: force_unfused_kernel).
func (b *builder) fp8Casts(name string, in, grad float64, normFed bool, fwd, bwd []Op) ([]Op, []Op) {
	if normFed && b.r.FP8Recipe != FP8MXFP8 {
		bwd = append([]Op{NewStreaming(name+".fp8_transpose", Quantize, b.d, 0, 2*in)}, bwd...)
	} else {
		fwd = append(b.fp8Quantize(name+".fp8_cast", in), fwd...)
	}
	return fwd, append(b.fp8Quantize(name+".grad_fp8_cast", grad), bwd...)
}

// fp8Quantize is the cast of n 16-bit elements to FP8 under the run's
// recipe: FP8CastTranspose, after FP8Amax under current scaling
// (FP8Tensorwise); MXFP8Quantize under FP8MXFP8.
func (b *builder) fp8Quantize(name string, n float64) []Op {
	switch b.r.FP8Recipe {
	case FP8Tensorwise:
		return []Op{FP8Amax(name+".amax", b.a, n), FP8CastTranspose(name, b.a, n)}
	case FP8MXFP8:
		return []Op{MXFP8Quantize(name, b.a, n)}
	}
	return []Op{FP8CastTranspose(name, b.a, n)}
}

// fp8Training reports whether the run trains with 8-bit GEMMs, which
// Megatron runs through Transformer Engine's FP8 recipe: the linear
// layers' GEMMs in FP8 with their inputs and output gradients cast, the
// attention, the output layer and the router in 16-bit.
func (b *builder) fp8Training() bool { return b.training() && b.d.Bytes() == 1 }

// FP8CastTranspose is Transformer Engine's cast_transpose of n elements of
// type d (transformer_engine/common/transpose/cast_transpose.cu): it reads
// the tensor once, takes its amax, and writes it in FP8 twice, as is and
// transposed (what a GEMM of the backward reads). Block scaling's
// quantizers move the same bytes (their scales aside).
func FP8CastTranspose(name string, d hw.DType, n float64) Op {
	return NewStreaming(name, Quantize, d, 3*n, n*(d.Bytes()+2))
}

// MXFP8Quantize is Transformer Engine's MXFP8 quantization of n elements
// of type d for a GEMM and its transposed use (MXFP8Quantizer with
// rowwise and columnwise usage): it reads the tensor once and writes it
// twice in FP8, along rows and along columns, each copy with an E8M0
// scale byte per 32 elements, the largest magnitude of each block taken
// in registers.
func MXFP8Quantize(name string, d hw.DType, n float64) Op {
	return NewStreaming(name, Quantize, d, 3*n, n*(d.Bytes()+2+2.0/hw.MXBlock))
}

// FP8Amax is current scaling's amax of n elements of type d, a reduction
// that reads the tensor before its cast can scale it
// (Float8CurrentScalingQuantizer: compute_amax, then the cast). On an H200
// NVL, Transformer Engine's GEMM benchmark measures current scaling 0.32,
// 0.49 and 0.50 ms a layer slower than delayed scaling (forward, input
// gradient and weight gradient shapes of its 5B model:
// docs/examples/gemm_profiling); one more read of every cast tensor is
// priced at 0.32, 0.39 and 0.51 ms (bench/fidelity TestTEGEMMBenchmark).
func FP8Amax(name string, d hw.DType, n float64) Op {
	return NewStreaming(name, Quantize, d, n, n*d.Bytes())
}

// lastForward is the last forward computation built so far (collectives
// aside).
func (b *builder) lastForward() (Op, bool) {
	for i := len(b.steps) - 1; i >= 0; i-- {
		for j := len(b.steps[i].fwd) - 1; j >= 0; j-- {
			if o := b.steps[i].fwd[j]; !o.IsComm() {
				return o, true
			}
		}
	}
	return Op{}, false
}

// fromNorm reports whether the next GEMM reads a norm's output.
func (b *builder) fromNorm() bool {
	o, ok := b.lastForward()
	return ok && o.Kind == Norm
}

// fromActivation reports whether the next GEMM reads an MLP activation's
// output (SwiGLU or GELU: the block builders' ".swiglu" and ".gelu"
// operators), which block-scaled FP8 engines quantize inside the
// activation's kernel (DeepSeek's swiglu_forward_with_weight_and_
// per_token_cast_to_fp8, SGLang's fused SiLU-and-quantize kernels).
func (b *builder) fromActivation() bool {
	o, ok := b.lastForward()
	return ok && (strings.HasSuffix(o.Name, ".swiglu") || strings.HasSuffix(o.Name, ".gelu"))
}

// attnDType is the type of attention's math: 16-bit with an 8- or 4-bit dtype
// (NVFP4 checkpoints, as FP8 ones, quantize the linear layers only).
// Training: Transformer Engine runs DotProductAttention in BF16 unless
// fp8_dpa is set (Run.FP8Attention); DeepSeek-V3 §3.3 keeps its attention in BF16 too.
// Inference: the engines' FP8 checkpoints quantize the linear layers
// (vLLM's Fp8LinearMethod, SGLang's w8a8_block_fp8) and attend in 16 bits,
// an FP8 KV cache dequantized as it is read; DeepSeek's own prefill
// profile (deepseek-ai/profile-data) runs FlashAttention's BF16 kernel.
func (b *builder) attnDType() hw.DType {
	if b.fp8Training() && b.r.FP8Attention {
		return b.d
	}
	if b.d.Bytes() < 2 {
		return b.a
	}
	return b.d
}

// blockScaledFP8 reports whether the run's FP8 GEMMs scale per block and so
// promote their partial sums every 128 elements (Op.SplitAccumulator):
// training under FP8Blockwise, inference of a model whose FP8 checkpoint
// is block-scaled (Config.FP8BlockScaled).
func (b *builder) blockScaledFP8() bool {
	if b.d.Bytes() != 1 {
		return false
	}
	if b.training() {
		return b.r.FP8Recipe == FP8Blockwise
	}
	return b.c.FP8BlockScaled
}

// accumulate makes a weight gradient GEMM add into the run's gradient
// buffer (Run.GradDType): its output is read and written in that type
// rather than written once in the activation type.
func (b *builder) accumulate(o Op) Op {
	if !b.training() || b.r.GradDType == "" {
		return o
	}
	outputs := float64(o.M * o.N)
	if o.GroupK {
		outputs = float64(len(o.Groups)) * float64(o.K*o.N)
	}
	o.Bytes += outputs * (2*b.r.GradDType.Bytes() - actDType(o.DType).Bytes())
	o.Accumulate = b.r.GradDType
	return o
}

// stream adds a one-pass operator: fwd FLOPs and bytes, bwd FLOPs and
// bytes (no backward kernel when bwdBytes is 0), and bytes kept.
func (b *builder) stream(name string, kind Kind, flops, bytes, bwdFlops, bwdBytes, saved float64) {
	s := step{fwd: []Op{NewStreaming(name, kind, b.a, flops, bytes)}, saved: saved}
	if bwdBytes > 0 {
		s.bwd = []Op{NewStreaming(name+".bwd", kind, b.a, bwdFlops, bwdBytes)}
	}
	b.add(s)
}

// rows gives the forward kernel just added its row shape: rows of w
// elements.
func (b *builder) rows(rows, w int64) {
	f := b.steps[len(b.steps)-1].fwd
	f[0].M, f[0].N = rows, w
}

// rotaryHeads gives the rotary kernel just added its heads (query, key)
// and their dimension: its launch geometry (core/compute rotary).
func (b *builder) rotaryHeads(q, k, dim int64) {
	f := b.steps[len(b.steps)-1].fwd
	f[0].Heads, f[0].KVHeads, f[0].HeadDim = q, k, dim
}

// norm is a LayerNorm (GPT) or RMSNorm over n elements of rows of width w:
// read x, write y (and fp32 statistics per row). LayerNorm: ≈8 FLOPs per
// element (mean, variance, normalize, affine), RMSNorm ≈5. Keeps x. In
// training its forward reads x once (Op.OnePass); inference engines run
// vLLM's two-pass rms_norm kernel, or for a LayerNorm PyTorch's
// (Op.NativeLayerNorm).
//
// The backward is the fused-norm kernels' three launches (apex
// layer_norm_cuda_kernel.cu, HostLayerNormGradient / HostRMSNormGradient,
// which Megatron-LM's fused_kernels copy): cuComputePartGradGammaBeta reads
// dy and x and writes fp32 partial weight gradients over 16 row slices,
// cuComputeGradGammaBeta sums them, cuComputeGradInput reads dy and x again
// and writes dx (twice the forward's FLOPs in all).
func (b *builder) norm(name string, rows, w int64) {
	n := float64(rows * w)
	fl := 5.0
	if b.c.Family == GPT {
		fl = 8
	}
	s := step{fwd: []Op{NewStreaming(name, Norm, b.a, fl*n, 2*n*b.e+8*float64(rows))}, saved: n * b.e}
	// Inference engines run a LayerNorm model's norms with PyTorch's own
	// kernel (vLLM's GPT-2, OPT and phi call torch.nn.LayerNorm), an
	// RMSNorm with their rms_norm kernel.
	s.fwd[0].NativeLayerNorm = b.c.Family == GPT && !b.training()
	if b.training() {
		// Megatron-LM runs its persistent LayerNorm for the hidden sizes
		// apex.contrib's FastLayerNorm supports (persist_ln_hidden_sizes in
		// megatron/model/fused_layer_norm.py, on by default), Megatron-Core
		// Transformer Engine's norm kernels, which descend from it.
		s.fwd[0].OnePass = true
		const slices = 16 // part_size in HostLayerNormGradient
		weights := 1.0
		if b.c.Family == GPT {
			weights = 2 // gamma and beta
		}
		part := weights * slices * float64(w) * 4
		s.bwd = []Op{
			NewStreaming(name+".bwd.weight_partial", Norm, b.a, fl*n/2, 2*n*b.e+part),
			NewStreaming(name+".bwd.weight", Norm, b.a, part/4, part+weights*float64(w)*4),
			NewStreaming(name+".bwd", Norm, b.a, 3*fl*n/2, 3*n*b.e+8*float64(rows)),
		}
	}
	b.add(s)
	b.rows(rows, w)
}

// fusedAddNorm is the residual add of the block output before it and the
// RMSNorm after it as one kernel, as vLLM runs LLaMA-style blocks
// (fused_add_rms_norm, vllm-project/vllm PR #1667; SGLang and TensorRT-LLM
// fuse them too, and Inductor under torch.compile): read the block output
// and the residual stream, write the new residual stream and the normed
// rows, n·(1 add + 5 norm) FLOPs. Its FP16/BF16 specialization loads and
// stores 8 elements at a time (layernorm_kernels.cu, vllm PR #3662: "this
// kernel is memory latency-bound"), so it streams at the vectorized
// kernels' bandwidth (Op.OnePass) where the separate norm is the scalar
// one-block-per-row kernel.
func (b *builder) fusedAddNorm(name string, rows, w int64) {
	n := float64(rows * w)
	o := NewStreaming(name, Norm, b.a, 6*n, 4*n*b.e+8*float64(rows))
	o.OnePass = true
	b.add(step{fwd: []Op{o}})
	b.rows(rows, w)
}

// fuseAddNorm reports whether a block's residual adds run inside the next
// norm (Run.FusedAddNorm: inference with RMSNorm).
func (b *builder) fuseAddNorm() bool {
	return b.r.FusedAddNorm && !b.training() && b.c.Family != GPT
}

// biasGrad is the gradient of a bias added over rows of width w: a column
// sum of dy (PyTorch's reduction of a broadcast add's gradient, or the
// grad_output.sum(0) of Megatron-LM's linear layers), into an fp32
// gradient. Backward only; it sits after the op that adds the bias, so it
// runs before that op's own backward.
func (b *builder) biasGrad(name string, rows, w int64) {
	n := float64(rows * w)
	b.add(step{bwd: []Op{NewStreaming(name+".bias_grad", Elementwise, b.a, n, n*b.e+4*float64(w))}})
}

// residual adds the block output to the residual stream (read 2, write 1);
// GPT fuses bias, dropout and the add (Megatron's bias_dropout_add), which
// also writes a 1-byte mask kept for the backward, whose kernel reads dy and
// the mask and writes dx.
func (b *builder) residual(name string, w int64) {
	n := float64(b.Tn * w)
	if b.c.Family == GPT && b.training() {
		b.stream(name, Elementwise, 3*n, n*(3*b.e+1), n, n*(2*b.e+1), n)
	} else {
		b.stream(name, Elementwise, n, 3*n*b.e, 0, 0, 0)
	}
	b.rows(b.Tn, w)
}

// enter is Megatron's f: the start of a tensor-parallel region fed with the
// replicated width-w activations. Forward: identity (sequence parallel:
// all-gather of the sequence shards). Backward: all-reduce of the input
// gradient (sequence parallel: reduce-scatter, after re-gathering the input
// that the first GEMM's weight gradient needs).
func (b *builder) enter(name string, w int64) {
	if b.t == 1 {
		return
	}
	full := float64(b.T*w) * b.e
	if b.sp {
		b.gathered = true
		b.add(step{
			fwd: []Op{NewComm(name+".all_gather", AllGather, full)},
			bwd: []Op{NewComm(name+".all_gather", AllGather, full), NewComm(name+".reduce_scatter", ReduceScatter, full)},
		})
		return
	}
	b.add(step{bwd: []Op{NewComm(name+".all_reduce", AllReduce, full)}})
}

// exit is Megatron's g: the end of a tensor-parallel region, whose row-split
// GEMM leaves partial sums. Forward: all-reduce (sequence parallel:
// reduce-scatter). Backward: identity (sequence parallel: all-gather).
func (b *builder) exit(name string, w int64) {
	if b.t == 1 {
		return
	}
	full := float64(b.T*w) * b.e
	if b.sp {
		b.add(step{
			fwd: []Op{NewComm(name+".reduce_scatter", ReduceScatter, full)},
			bwd: []Op{NewComm(name+".all_gather", AllGather, full)},
		})
		return
	}
	b.add(step{fwd: []Op{NewComm(name+".all_reduce", AllReduce, full)}})
}

// partialSum is a contraction over channels split across ranks whose small
// output feeds column-split consumers again (Mamba-1's x_proj): all-reduce
// forward, and all-reduce of its gradient backward.
func (b *builder) partialSum(name string, w int64) {
	if b.t == 1 {
		return
	}
	full := float64(b.T*w) * b.e
	b.add(step{
		fwd: []Op{NewComm(name+".all_reduce", AllReduce, full)},
		bwd: []Op{NewComm(name+".bwd_all_reduce", AllReduce, full)},
	})
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// split is a count divided over the TP ranks, replicated when smaller than t.
func (b *builder) split(n int64) int64 { return max(n/b.t, 1) }

// block assembles the steps into a Block under the run's recompute policy.
func (b *builder) block(name string, count int) Block {
	blk := Block{Name: name, Count: count, Params: b.params, SharedParams: b.shared, ExpertParams: b.expert, QuantizedParams: b.quant}
	for _, s := range b.steps {
		for _, o := range s.fwd {
			o.Pass = Forward
			blk.Forward = append(blk.Forward, o)
		}
	}
	if !b.training() {
		return blk
	}
	full := b.r.Recompute == RecomputeFull && name != BlockEmbedding && name != BlockLMHead
	if full {
		blk.ActivationBytes = float64(b.Tn*int64(b.c.Hidden)) * b.e
		for _, s := range b.steps {
			blk.Backward = append(blk.Backward, recomputed(s.fwd)...)
		}
	} else {
		for _, s := range b.steps {
			blk.ActivationBytes += s.saved
			switch {
			case b.r.recomputes(s.group):
				if !s.groupInput {
					blk.ActivationBytes -= s.saved
				}
				blk.Backward = append(blk.Backward, recomputed(s.fwd)...)
			case b.r.recomputes(s.module):
				blk.ActivationBytes -= s.dropped
				blk.Backward = append(blk.Backward, recomputed(s.fwd)...)
			}
		}
	}
	for i := len(b.steps) - 1; i >= 0; i-- {
		for _, o := range b.steps[i].bwd {
			o.Pass = Backward
			blk.Backward = append(blk.Backward, o)
		}
	}
	// fp32 main gradients (Megatron-LM's default gradient buffer).
	if b.params > 0 {
		blk.Optimizer = OptimizerStep(name+".optimizer", b.params, b.d, 4)
	}
	if b.shared > 0 {
		blk.SharedOptimizer = OptimizerStep(name+".shared_optimizer", b.shared, b.d, 4)
	}
	return blk
}

func recomputed(ops []Op) []Op {
	out := make([]Op, len(ops))
	for i, o := range ops {
		o.Pass = Recomputed
		out[i] = o
	}
	return out
}
