package model

import "github.com/eidolon-sim/eidolon/core/hw"

// Kind is what an operator computes; package compute picks a cost model by kind.
type Kind string

const (
	// GroupedGEMM: one kernel over the local experts, expert i multiplying
	// its Groups[i] tokens by its own weight (NewGroupedGEMM).
	GroupedGEMM Kind = "grouped_gemm"
	// GEMM: Batch independent products C[M×N] = A[M×K]·B[K×N] on tensor cores.
	GEMM Kind = "gemm"
	// FlashAttention: fused softmax(Q·Kᵀ)·V over Batch sequences (forward).
	FlashAttention Kind = "flash_attention"
	// FlashAttentionBwd: its backward (recomputes Q·Kᵀ, then dV, dP, dQ, dK).
	FlashAttentionBwd Kind = "flash_attention_bwd"
	// DecodeAttention: one new query per sequence against a KV cache of SeqKV tokens.
	DecodeAttention Kind = "decode_attention"
	// Streaming kinds: one pass over their tensors; FLOPs and Bytes are set by
	// the model and the cost is a roofline on the vector units and HBM.
	Elementwise  Kind = "elementwise"
	Norm         Kind = "norm"
	Softmax      Kind = "softmax"
	Rotary       Kind = "rotary"
	Embedding    Kind = "embedding"
	CrossEntropy Kind = "cross_entropy"
	Adam         Kind = "adam"
	Conv1D       Kind = "conv1d"
	Quantize     Kind = "quantize"
	Dequantize   Kind = "dequantize"
	// SelectiveScan: the Mamba-1 selective scan (state kept on chip, vector units).
	SelectiveScan Kind = "selective_scan"
	// SSDScan: the Mamba-2 chunked state-space-dual scan (matmuls on tensor cores).
	SSDScan Kind = "ssd_scan"
	// SSMStep: one decode step of an SSM: read, update and write the state.
	SSMStep Kind = "ssm_step"
	// Tensor-parallel collectives: not simulated here; Bytes is the payload.
	AllReduce     Kind = "all_reduce"
	AllGather     Kind = "all_gather"
	ReduceScatter Kind = "reduce_scatter"
	// AllToAll is a mixture-of-experts dispatch or combine over the
	// expert-parallel group: M routed tokens, Bytes their payload under
	// balanced routing (the workload sizes each pair from the routing).
	AllToAll Kind = "all_to_all"
)

// Pass says where in a training step (or inference pass) an operator runs.
type Pass string

const (
	Forward    Pass = "forward"
	Backward   Pass = "backward"
	Recomputed Pass = "recompute"
	Optimizer  Pass = "optimizer"
)

// Op is one operator on one tensor-parallel rank, with its shape. FLOPs and
// Bytes are exact counts from the shape, set by the constructors below.
type Op struct {
	// Name is "<part>.<op>", e.g. "attn.qkv", "mlp.down.wgrad", "mixer.scan".
	Name string
	Kind Kind
	Pass Pass
	// DType is the type of the math (GEMM operands; activations otherwise).
	DType hw.DType

	// GEMM shape: Batch problems of [M×K]·[K×N]. Attention: Batch sequences.
	// Streaming kernels that work row by row (norms, rotary embeddings,
	// embedding gathers, residual adds): M rows of N elements, which prices
	// their latency at few rows (core/compute streaming); 0 when unknown.
	M, N, K, Batch int64
	// Attention shape: query heads, key/value heads, query and key lengths,
	// head dimension; Causal masks keys after the query; Local (causal
	// only) limits each query to a window or its chunk of the keys.
	Heads, KVHeads, SeqQ, SeqKV, HeadDim int64
	Causal                               bool
	Local                                Local

	// FLOPs is the arithmetic the kernel performs (multiply-add = 2).
	FLOPs float64
	// Bytes is the compulsory HBM traffic: every input read once, every output
	// written once. For collectives, the payload (the full tensor) in bytes.
	Bytes float64
	// Tensor is true when the math runs on tensor cores (matmuls).
	Tensor bool
	// Groups (grouped GEMMs) is each expert's token count; GroupK marks a
	// weight gradient, whose groups are the reduction dimension.
	Groups []int64
	GroupK bool
	// Fused (grouped GEMMs) runs every expert's tiles in one grid, as
	// inference engines' fused MoE kernels do (vLLM's fused_moe), instead
	// of expert after expert (compute.Evaluator.fusedGrouped).
	Fused bool
	// Return (all-to-all) marks a transfer from the experts' ranks back to
	// the tokens' ranks (the combine, and the dispatch's backward).
	Return bool
	// MoELayer marks an operator of a mixture-of-experts layer's router,
	// token dispatcher or routed experts, whose framework code around the
	// kernel costs an eager host more than a plain operator (exec.Host).
	MoELayer bool
	// HostSync marks an operator whose framework code blocks the host
	// until the GPU has run everything issued before it (a blocking copy
	// to the device: torch.tensor(x, device=cuda) copies through
	// cudaStreamSynchronize, pytorch/pytorch#120996), so the host cannot
	// run ahead across it.
	HostSync bool
	// CP marks a collective over the context-parallel group (what the
	// attention of a sequence split over ranks exchanges, Run.CP) instead
	// of the tensor-parallel group. Alongside marks one that runs while the
	// op after it computes (ring attention's exchange); otherwise what
	// follows waits for it.
	CP, Alongside bool
	// Accumulate, on a weight gradient GEMM, is the type of the gradient
	// buffer the GEMM adds its product into, reading and writing it
	// (Megatron's gradient-accumulation fusion into the fp32 main_grad);
	// "" writes the output once in the activation type.
	Accumulate hw.DType
	// SplitAccumulator, on an 8-bit GEMM, adds the tensor cores' partial
	// sums into FP32 registers at the GPU's promotion interval
	// (hw.GPU.FP8PromotionIntervalK; Transformer Engine's
	// use_split_accumulator, cuBLAS without fast accumulation); false runs
	// fast accumulation.
	SplitAccumulator bool
	// TokensK marks a GEMM that reduces over the tokens (a weight
	// gradient): its K is no operand's row length, so it does not set the
	// rows' alignment (compute's rowsAligned), whatever the token count.
	TokensK bool
	// WeightDType, on a forward GEMM (grouped or not) of an inference run,
	// is the type its weight operand B is stored and read in when narrower
	// than DType (weight-only quantization: int8 or int4 weights with
	// 16-bit activations, dequantized in the kernel); "" is DType.
	WeightDType hw.DType
	// OnePass marks a norm whose kernel holds its row in registers and
	// reads its input once with vector loads (Megatron-LM's persistent
	// LayerNorm, apex.contrib FastLayerNorm; Transformer Engine's norms);
	// the default norm kernel (vLLM's rms_norm) reads its row twice.
	OnePass bool
	// XQA marks a decode attention run by TensorRT-LLM's XQA kernel (its
	// generation-phase kernel for grouped-query and multi-query attention;
	// multi-head attention keeps flash-decoding's split), which splits
	// each sequence's cache by its own multi-block heuristic and merges the
	// pieces inside the kernel; false runs flash-decoding's split and
	// combine kernel (compute.Evaluator.decode).
	XQA bool
	// SyncMMA marks a FlashAttention kernel built on Ampere's synchronous
	// warp-level MMA (FlashAttention-2's), whose matmuls run at the part's
	// hw.GPU.SyncMMAPeak; false runs the part's own fused attention at its
	// tensor rate.
	SyncMMA bool
	// NativeLayerNorm marks a LayerNorm run by PyTorch's own kernel
	// (torch.nn.LayerNorm, as inference engines run LayerNorm models):
	// 128-thread blocks with vector loads, where vLLM's rms_norm runs
	// blocks of up to 1,024 threads with scalar loads.
	NativeLayerNorm bool
}

// IsComm reports whether the op is a collective (tensor-parallel, or
// context-parallel where CP is set).
func (o Op) IsComm() bool {
	return o.Kind == AllReduce || o.Kind == AllGather || o.Kind == ReduceScatter || o.Kind == AllToAll
}

// ModelFLOPs is what a model-FLOP count credits a matmul op with (Megatron-
// LM's num_floating_point_operations, model FLOPs utilization): its FLOPs,
// but FlashAttention's backward is two forwards' worth (dV, dP, dQ and dK),
// not its kernel's 2.5: the scores it recomputes are the kernel's work, as
// a recomputed layer's forward is (Dao 2023, arXiv 2307.08691; the model
// count gives attention's backward twice its forward, the whole pass three
// times). Hardware FLOPs keep the recomputation.
func (o Op) ModelFLOPs() float64 {
	if o.Kind == FlashAttentionBwd {
		return o.FLOPs * 2 / flashBackwardRatio
	}
	return o.FLOPs
}

// IsMatmul reports whether the op's FLOPs are matrix multiplications (GEMMs
// and attention), the FLOPs that the Megatron formula counts.
func (o Op) IsMatmul() bool {
	switch o.Kind {
	case GEMM, GroupedGEMM, FlashAttention, FlashAttentionBwd, DecodeAttention, SSDScan:
		return true
	}
	return false
}

// actDType is the type activations are stored in: 8-bit math keeps 16-bit
// activations (fp8/int8 are GEMM operand formats).
func actDType(d hw.DType) hw.DType {
	if d.Bytes() < 2 {
		return hw.BF16
	}
	return d
}

// NewGEMM is Batch products [M×K]·[K×N] with operands of type d and output in
// the activation type.
func NewGEMM(name string, d hw.DType, batch, m, n, k int64) Op {
	b := float64(batch)
	in, out := d.Bytes(), actDType(d).Bytes()
	return Op{
		Name: name, Kind: GEMM, DType: d, M: m, N: n, K: k, Batch: batch,
		FLOPs:  2 * b * float64(m) * float64(n) * float64(k),
		Bytes:  b * (in*float64(m*k+k*n) + out*float64(m*n)),
		Tensor: true,
	}
}

// RowChunk is GEMM o over m of its rows, as a GEMM split along M computes
// each part: every part reads the whole weight; the type, pass and
// accumulation flags stay o's.
func (o Op) RowChunk(m int64) Op {
	c := NewGEMM(o.Name, o.DType, o.Batch, m, o.N, o.K)
	c.Pass, c.Accumulate, c.SplitAccumulator = o.Pass, o.Accumulate, o.SplitAccumulator
	if o.WeightDType != "" {
		c = c.WithWeights(o.WeightDType)
	}
	return c
}

// WithWeights stores GEMM o's weights (operand B, K×N per expert of a
// grouped GEMM) in type w, which moves its bytes accordingly.
func (o Op) WithWeights(w hw.DType) Op {
	b := o.DType.Bytes()
	experts := float64(max(len(o.Groups), 1))
	o.Bytes -= experts * float64(o.K*o.N) * (b - StoredWeightBytes(w)) * float64(max(o.Batch, 1))
	o.WeightDType = w
	return o
}

// NewStreaming is a one-pass operator of the given kind over elements, with
// flopsPer arithmetic per element and bytes of compulsory HBM traffic.
func NewStreaming(name string, kind Kind, d hw.DType, flops, bytes float64) Op {
	return Op{Name: name, Kind: kind, DType: d, FLOPs: flops, Bytes: bytes}
}

// NewComm is a tensor-parallel collective over a payload of bytes.
func NewComm(name string, kind Kind, bytes float64) Op {
	return Op{Name: name, Kind: kind, Bytes: bytes}
}

// Local is a layer's local attention; the zero value is full causal
// attention. Window > 0: a sliding window, each query sees the Window keys
// ending at its own position (Config.SlidingWindow); Chunk > 0: chunked
// attention, each query sees the keys of its own chunk of Chunk tokens up
// to itself (Llama 4's attention_chunk_size, Config.AttentionChunk).
type Local struct{ Window, Chunk int64 }

// On reports whether l limits the keys.
func (l Local) On() bool { return l.Window > 0 || l.Chunk > 0 }

// First is the first key a query at 0-based position p sees.
func (l Local) First(p int64) int64 {
	switch {
	case l.Window > 0:
		return max(0, p-l.Window+1)
	case l.Chunk > 0:
		return p / l.Chunk * l.Chunk
	}
	return 0
}

// Keys is the keys a query at 0-based position p sees (itself included).
func (l Local) Keys(p int64) int64 { return p - l.First(p) + 1 }

// Span is the most keys any query sees, what a layer's KV cache must keep
// of a sequence (Window or Chunk; 0: every token).
func (l Local) Span() int64 { return max(l.Window, l.Chunk) }

// attnPairs is the number of (query, key) pairs attended: all sq·skv, or
// under a causal mask with queries at the end of the keys, Σ over queries of
// the keys up to and including it that l leaves them.
func attnPairs(sq, skv int64, causal bool, l Local) float64 {
	if !causal {
		return float64(sq) * float64(skv)
	}
	// The queries sit at positions skv−sq … skv−1.
	return l.keysBefore(skv) - l.keysBefore(skv-sq)
}

// keysBefore is Σ over positions p < x of Keys(p), in closed form: x(x+1)/2
// without local attention; with a window w the first w positions count
// 1…w and the rest w each; with chunks of c, x = q·c + r counts q whole
// chunks of c(c+1)/2 and r(r+1)/2.
func (l Local) keysBefore(x int64) float64 {
	tri := func(n int64) float64 { return float64(n) * float64(n+1) / 2 }
	switch {
	case l.Window > 0 && x > l.Window:
		return tri(l.Window) + float64(x-l.Window)*float64(l.Window)
	case l.Chunk > 0:
		return float64(x/l.Chunk)*tri(l.Chunk) + tri(x%l.Chunk)
	}
	return tri(x)
}

// NewFlashAttention is the fused attention forward: Q·Kᵀ and P·V, 2 FLOPs per
// multiply-add, 4·pairs·d per head. Traffic: read Q, K, V, write O (and the
// fp32 log-sum-exp kept for the backward).
func NewFlashAttention(name string, d hw.DType, batch, heads, kvHeads, sq, skv, hd int64, causal bool) Op {
	return NewLocalFlashAttention(name, d, batch, heads, kvHeads, sq, skv, hd, causal, Local{})
}

// NewLocalFlashAttention is NewFlashAttention with local attention l:
// FlashAttention's window_size (a sliding window) or a chunked mask, which
// skip the key blocks wholly outside every query's keys. Its keys and
// values are still read once.
func NewLocalFlashAttention(name string, d hw.DType, batch, heads, kvHeads, sq, skv, hd int64, causal bool, l Local) Op {
	pairs := attnPairs(sq, skv, causal, l)
	e := actDType(d).Bytes()
	b := float64(batch)
	return Op{
		Name: name, Kind: FlashAttention, DType: d, Batch: batch,
		Heads: heads, KVHeads: kvHeads, SeqQ: sq, SeqKV: skv, HeadDim: hd, Causal: causal, Local: l,
		FLOPs:  4 * b * float64(heads) * pairs * float64(hd),
		Bytes:  b*e*float64(hd)*(2*float64(heads*sq)+2*float64(kvHeads*skv)) + 4*b*float64(heads*sq),
		Tensor: true,
	}
}

// flashBackwardRatio is FlashAttention's backward FLOPs over its forward's:
// five matmuls of the forward's size against two.
const flashBackwardRatio = 2.5

// flashBackward is FlashAttention-2's backward: five matmuls of the forward's
// size (S = Q·Kᵀ recomputed, dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q)
// against the forward's two, so 2.5× its FLOPs (Dao 2023, arXiv 2307.08691).
// Traffic: read Q, K, V, O, dO, lse; write dQ, dK, dV.
func flashBackward(f Op) Op {
	b := f
	e := actDType(f.DType).Bytes()
	bt := float64(f.Batch)
	q := float64(f.Heads*f.SeqQ) * float64(f.HeadDim)
	kv := float64(f.KVHeads*f.SeqKV) * float64(f.HeadDim)
	b.Name = f.Name + ".bwd"
	b.Kind = FlashAttentionBwd
	b.FLOPs = flashBackwardRatio * f.FLOPs
	b.Bytes = bt*e*(3*q+2*kv+q+2*kv) + 4*bt*float64(f.Heads*f.SeqQ)
	return b
}

// NewDecodeAttention is one query token per sequence against skv cached
// keys and values: read the KV cache (the dominant traffic) at kvBytes an
// element and Q, write O.
func NewDecodeAttention(name string, d hw.DType, kvBytes float64, batch, heads, kvHeads, skv, hd int64) Op {
	e := actDType(d).Bytes()
	b := float64(batch)
	return Op{
		Name: name, Kind: DecodeAttention, DType: d, Batch: batch,
		Heads: heads, KVHeads: kvHeads, SeqQ: 1, SeqKV: skv, HeadDim: hd,
		FLOPs:  4 * b * float64(heads) * float64(skv) * float64(hd),
		Bytes:  b * float64(hd) * (2*kvBytes*float64(kvHeads*skv) + 2*e*float64(heads)),
		Tensor: true,
	}
}

// Adam's per-parameter cost (apex FusedAdam, the kernel Megatron-LM steps
// with): read the fp32 master weight, gradient, m and v (16 B), write
// master, m and v (12 B). About 14 FLOPs: m and v updates (3 + 4), bias
// corrections (2), the update with weight decay (5).
const (
	adamBytesPerParam = 28
	adamFlopsPerParam = 14
)

// AdamOp is the Adam kernel alone over params parameters (on one rank).
func AdamOp(name string, params int64) Op {
	p := float64(params)
	o := NewStreaming(name, Adam, hw.FP32, adamFlopsPerParam*p, adamBytesPerParam*p)
	o.Pass = Optimizer
	return o
}

// OptimizerStep is a training step's optimizer as Megatron-LM runs it
// (megatron/optimizer/optimizer.py, MixedPrecisionOptimizer.step and the
// training loop's zero_grad), over `shard` parameters whose gradients are
// gradBytes wide, weights of type d:
//
//   - fp16 only (a loss scaler): unscale the gradients and check them for
//     inf/NaN (torch._amp_foreach_non_finite_check_and_unscale_: read and
//     write each gradient, ≈2 FLOPs);
//   - the global gradient norm for clipping (multi_tensor_l2norm: read each
//     gradient, 2 FLOPs); the rescale that follows only when the norm
//     exceeds the threshold is left out;
//   - Adam (AdamOp);
//   - weights narrower than fp32: copy the fp32 masters into the 16-bit
//     working weights (_copy_main_params_to_model_params: read 4 B, write
//     the weight);
//   - zero the gradient buffer for the next step (write each gradient).
func OptimizerStep(name string, shard int64, d hw.DType, gradBytes float64) []Op {
	p := float64(shard)
	step := func(suffix string, flops, bytes float64) Op {
		o := NewStreaming(name+"."+suffix, Adam, hw.FP32, flops*p, bytes*p)
		o.Pass = Optimizer
		return o
	}
	var ops []Op
	if d == hw.FP16 {
		ops = append(ops, step("unscale", 2, 2*gradBytes))
	}
	ops = append(ops, step("grad_norm", 2, gradBytes), AdamOp(name+".adam", shard))
	if w := d.Bytes(); w < 4 {
		ops = append(ops, step("copy_to_model", 0, 4+max(w, 2)))
	}
	return append(ops, step("zero_grad", 0, gradBytes))
}

// QuantizeOp converts elements from type `from` to the 8-bit type `to` with
// one fp32 scale per group of groupSize elements: read, find the group's
// absolute maximum, scale and round (3 FLOPs per element), write.
func QuantizeOp(name string, elements int64, from, to hw.DType, groupSize int64) Op {
	n := float64(elements)
	scales := 4 * n / float64(max(groupSize, 1))
	return NewStreaming(name, Quantize, from, 3*n, n*(from.Bytes()+to.Bytes())+scales)
}

// DequantizeOp is the reverse: read 8-bit values and scales, multiply, write.
func DequantizeOp(name string, elements int64, from, to hw.DType, groupSize int64) Op {
	n := float64(elements)
	scales := 4 * n / float64(max(groupSize, 1))
	return NewStreaming(name, Dequantize, to, n, n*(from.Bytes()+to.Bytes())+scales)
}
