package compute

import (
	"math"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// Softmax work per attention score, in fp32 vector-lane instructions: the
// online softmax's scale-and-subtract, running max, sum and conversion (4),
// plus the exponential on the special-function units, which issue at a
// quarter of the A100's FP32 lane rate (NVIDIA CUDA C++ Programming Guide,
// "Arithmetic Instructions" throughput table: 16 vs 64 results per clock per
// SM), counted as 4. FlashAttention-2 does not overlap it with the matmuls.
// Hopper's and Blackwell's SMs have 128 FP32 lanes and still 16
// exponentials a clock (B200: 5 tera-exponentials a second in NVIDIA's
// Blackwell Ultra figures), an eighth, while their fused kernels overlap
// the softmax with the asynchronous MMAs: counted right and added, the
// H100's forward reads 17 % under cuDNN's at 16k tokens; counted right and
// overlapped in full, 28 % over it, and a B200's 1,595 TFLOP/s, where
// FlashAttention-4 reports 1,613 (KERNELS.md). The count of 4, added, is
// what matches the H100's kernels, from which the backward's lane work is
// fitted; on Blackwell it prices the attention at cuDNN's early speed, not
// FlashAttention-4's (MOE_FIDELITY.md's GB200 long-context row).
const softmaxLaneOpsPerScore = 8

// softmaxExpLaneOps is the exponential's share of softmaxLaneOpsPerScore
// (and of the backward's recomputed P), counted at 16 exponentials a
// clock an SM. A part whose special-function units issue more
// (hw.GPU.ExpPerClockPerSM: Blackwell Ultra's 32) pays proportionally
// less of it, forward and backward alike.
const softmaxExpLaneOps = 4

// expLaneOpsSaved is what the part's exponential rate takes off the
// counted softmax work per score: 0 at 16 a clock, 2 at 32.
func expLaneOpsSaved(g hw.GPU) float64 { return softmaxExpLaneOps * (1 - 16/g.ExpPerClock()) }

// FlashBackwardLaneOpsPerScore is the backward main loop's time per score
// beyond its matmuls, in the same lane-instruction units. Counted from
// FlashAttention-2's backward (flash_bwd_kernel.h), it recomputes P
// (scale-and-subtract and the exponential, 5), forms dS = P∘(dP − D) (2)
// and converts P and dS to 16 bits for the next matmuls (2): about the
// forward's 8. Yet the backward kernels run their main loop slower per
// matmul FLOP than their forward, not faster: at 16k tokens
// FlashAttention-3 and cuDNN reach 0.87 of their forward's TFLOP/s (Shah
// et al. 2024, arXiv 2407.08608, Figures 5–6, H100), where counting only
// those instructions gives 1.16 (the softmax's share diluted by five
// matmuls instead of two). What the backward does not overlap (the extra
// accumulators' register pressure, the dQ accumulation, the synchronization
// between its matmuls) is priced as more such time per score: fitted on
// cuDNN's backward bars at 1k, 4k and 16k tokens (cuDNN is the fused
// attention Transformer Engine runs on Hopper, as the Megatron and NeMo
// runs do), checked on the others and on FlashAttention-3's (`go test
// ./bench/fidelity -run TestFlashBackwardFitIsOptimal -v`, KERNELS.md).
// A kernel's structure, not the GPU's: every GPU takes it.
const FlashBackwardLaneOpsPerScore = 26

// flashTile returns FlashAttention-2's query and key block sizes for a head
// dimension: 128×64 up to d = 128 and 128×32 beyond (flash_fwd_launch_template.h).
func flashTile(hd int64) (br, bc int64) {
	if hd <= 128 {
		return 128, 64
	}
	return 128, 32
}

// flashBwdTile returns FlashAttention-2's backward query and key block
// sizes (flash_bwd_launch_template.h, GPUs with at least 144 KB of shared
// memory a block, A100 and H100): 128×128 up to d = 64, 64×128 up to 128,
// 64×64 beyond. Its thread blocks each own a key block and stream the
// query blocks past it, so the key block sets how often the queries are
// read. Priced with the forward's tiles (128×32 above head dim 128),
// DeepSeek-V3's attention backward (head dims 192 and 128, 128 heads, 4,096
// tokens) was bound by that L2 traffic at 5.8 ms on an H800 where DeepSeek's
// profile measures 4.3 ms (KERNELS.md); with these, 3.6 ms.
func flashBwdTile(hd int64) (br, bc int64) {
	switch {
	case hd <= 64:
		return 128, 128
	case hd <= 128:
		return 64, 128
	}
	return 64, 64
}

// flash prices FlashAttention (forward or backward). Each thread block owns
// Br queries of one head and streams that head's keys and values from L2 in
// Bc blocks, skipping blocks entirely above a causal diagonal. Math: the
// matmul FLOPs of the blocks computed (padding included) at the tensor peak,
// plus the softmax on the vector lanes. HBM: compulsory when the keys and
// values of the heads running at once fit in L2, else each block rereads them.
func (e *Evaluator) flash(o model.Op) Cost {
	g := e.gpu
	bwd := o.Kind == model.FlashAttentionBwd
	br, bc := flashTile(o.HeadDim)
	if bwd {
		br, bc = flashBwdTile(o.HeadDim)
	}
	in := actBytes(o)
	qTiles := ceil(o.SeqQ, br)
	// Key blocks computed, summed over query blocks (causal: up to the
	// diagonal; local attention also skips the blocks before the first
	// query's first key, as FlashAttention's window_size does).
	var pairs int64
	off := o.SeqKV - o.SeqQ
	for i := int64(0); i < qTiles; i++ {
		first, keys := int64(0), o.SeqKV
		if o.Causal {
			keys = min(o.SeqKV, off+(i+1)*br)
			first = o.Local.First(off + i*br)
		}
		pairs += ceil(keys, bc) - first/bc
	}
	heads := o.Batch * o.Heads
	blocks := heads * qTiles
	if bwd {
		blocks = heads * ceil(o.SeqKV, bc) // a block per key block
	}
	// Matmul FLOPs per (Br × Bc) block: Q·Kᵀ and P·V, 2 FLOPs each per MAC.
	perBlock := 4 * float64(br*bc*o.HeadDim)
	scale := 1.0
	if bwd {
		scale = 2.5 // five matmuls against two
	}
	mm := scale * float64(heads*pairs) * perBlock
	scores := float64(heads*pairs) * float64(br*bc)
	lanes := g.VectorFP32FlopsPerS / 2 // an FMA is 2 FLOPs of the vector peak
	laneOps := float64(softmaxLaneOpsPerScore)
	if bwd {
		laneOps = e.flashBwdLaneOps
	}
	laneOps -= expLaneOpsSaved(g)
	peak := g.TensorPeak(o.DType)
	if o.SyncMMA {
		peak = g.SyncMMAPeak(o.DType)
	}
	mathTime := mm/peak + laneOps*scores/lanes

	// Per computed block pair the forward streams a K and a V tile; the
	// backward (one thread block per key block) streams a Q and a dO tile and
	// accumulates into dQ in fp32 through L2 (read and write).
	stream := float64(heads*pairs) * 2 * float64(bc*o.HeadDim) * in
	if bwd {
		stream = float64(heads*pairs) * 2 * float64(br*o.HeadDim) * (in + 4)
	}
	c := Cost{ExecutedFLOPs: mm, Kernels: 1}
	c.BytesL2 = stream + o.Bytes
	own := br // each block's own tile: its queries (forward), its keys and values (backward)
	if bwd {
		own = 2 * bc
	}
	c.BytesSMEM = stream + float64(blocks)*float64(own*o.HeadDim)*in
	c.BytesHBM = o.Bytes
	// What the blocks stream (forward: K and V; backward: Q, dO and the
	// fp32 dQ) comes from HBM once if it all fits in L2. Otherwise the
	// blocks of a wave, which start together and walk the same key (or
	// query) blocks of their head at the same pace, share each tile
	// through L2 while it is fresh, so a head's operands are read once per
	// wave its blocks span (in grid order the query heads that share a
	// key/value head are adjacent: grouped-query attention's group reads
	// its key/value head as one).
	// Local attention bounds what the blocks of a wave read to the keys
	// (backward: the queries) of one window or chunk beside their own block.
	keys, queries := o.SeqKV, o.SeqQ
	if span := o.Local.Span(); o.Causal && span > 0 {
		keys, queries = min(keys, span+br), min(queries, span+bc)
	}
	active := min(blocks, int64(g.SMCount))
	group := float64(o.Heads) / float64(max(o.KVHeads, 1))
	operands := float64(o.Batch*max(o.KVHeads, 1)) * 2 * float64(keys*o.HeadDim) * in
	span := max(1, float64(qTiles)*group/float64(active))
	if bwd {
		operands = float64(o.Batch*o.Heads*queries*o.HeadDim) * (2*in + 4)
		span = max(1, float64(ceil(o.SeqKV, bc))/float64(active))
	}
	if operands > float64(g.L2Bytes) {
		c.BytesHBM = o.Bytes + min(stream, (span-1)*operands)
	}
	var passes float64
	if bwd {
		// The backward is three kernels (FlashAttention-2's run_mha_bwd,
		// flash_bwd_launch_template.h): a preprocess reads O and dO for
		// D = rowsum(dO∘O) and zeroes the fp32 dQ accumulator the main
		// kernel adds into, and a last kernel converts that accumulator
		// to dQ. Their passes over memory run before and after the main
		// loop, at the streaming bandwidth.
		q := float64(o.Batch*o.Heads*o.SeqQ) * float64(o.HeadDim)
		passes = q*(2*in+4+4) + 4*float64(o.Batch*o.Heads*o.SeqQ)
		c.Kernels = 3
	}
	// Each thread block pays a GEMM tile's fixed prologue and epilogue
	// (loading its first tiles; normalizing and storing its output), one
	// block per SM at a time: short sequences, with few key blocks per
	// query block, feel it.
	c = e.finish(c, o.FLOPs, mathTime, 1, e.blockWaves(blocks)+passes/g.HBMBandwidth())
	c.BytesHBM += passes
	c.Intensity = c.FLOPs / c.BytesHBM
	return c
}

// decode prices attention of one query per sequence over a KV cache:
// reading the cache dominates. Flash-decoding (Dao et al. 2023) splits each
// (sequence, KV head) along the keys, in chunks of at least 256, into just
// enough pieces to occupy the SMs; each piece rereads the queries and writes
// an fp32 partial output and log-sum-exp that a combine step reads back.
// With fewer pieces than SMs only that share of HBM bandwidth is drawn (each
// SM streams its own share of the memory system). A split cache takes a
// second kernel to combine the pieces (FlashAttention-2's
// flash_fwd_splitkv_combine_kernel), and every piece, a thread block, pays
// a GEMM tile's fixed cost per wave of blocks over the SMs, as in flash.
//
// TensorRT-LLM's XQA kernel (model.Op.XQA, for grouped-query and
// multi-query attention; TensorRT-LLM runs multi-head attention on its
// masked-MHA kernel, which splits to fill the SMs as flash-decoding does)
// splits by its own heuristic
// (xqaBlocksPerSequence) and merges the pieces in the same kernel: each
// block counts itself done on a semaphore, and the last of a sequence's
// blocks to finish reads the others' partial outputs and reduces them, a
// tail after the main loop (one atomic and one read's latency, then the
// partials at one SM's share of L2) instead of a second kernel.
func (e *Evaluator) decode(o model.Op) Cost {
	g := e.gpu
	sms := int64(g.SMCount)
	seqHeads := o.Batch * o.KVHeads
	splits := min(ceil(o.SeqKV, 256), max(1, ceil(sms, seqHeads)))
	xqa := o.XQA && o.Heads > o.KVHeads
	if xqa {
		splits = xqaBlocksPerSequence(o.SeqKV, seqHeads, sms, o.Batch)
	}
	share := math.Min(1, float64(seqHeads*splits)/float64(sms))
	q := float64(o.Batch*o.Heads*o.HeadDim) * actBytes(o)
	partials := float64(splits-1) * (q + 2*float64(o.Batch*o.Heads)*float64(o.HeadDim+1)*4)
	c := Cost{BytesL2: o.Bytes + partials, BytesHBM: o.Bytes + partials, Kernels: 1}
	if splits > 1 && !xqa {
		c.Kernels = 2
	}
	// Scores: one per (head, key); GQA shares each K/V read across heads.
	lanes := g.VectorFP32FlopsPerS / 2
	scores := float64(o.Batch*o.Heads) * float64(o.SeqKV)
	mathTime := o.FLOPs/g.TensorPeak(o.DType) + (softmaxLaneOpsPerScore-expLaneOpsSaved(g))*scores/lanes
	fixed := e.blockWaves(seqHeads * splits)
	if xqa && splits > 1 {
		merged := float64(splits*o.Heads/max(o.KVHeads, 1)) * float64(o.HeadDim+1) * 4
		fixed += 2*g.MemoryLatencyS + merged/(g.L2BandwidthBytesPerS/float64(sms))
	}
	return e.finish(c, o.FLOPs, mathTime, share, fixed)
}

// xqaBlocksPerSequence is how many thread blocks TensorRT-LLM's XQA kernel
// gives each sequence's cache in multi-block mode, which its runtime turns
// on by default (executor::ExtendedRuntimePerfKnobConfig, multiBlockMode =
// true): one per 128 cached tokens (kMinHistoryTokensPerBlock), at most
// round(√(8·n)) of those n ("otherwise the final reduction may
// dominate"), cut so that the grid of (sequence, KV head, block) stays
// within 8 waves of the SMs (kTargetWaveFactor), and within the 6,000
// sub-sequences its workspace reserves (computeMultiBlockCount,
// decoderXQAImplCommon.h; constants in decoderXQAConstants.h). Where
// flash-decoding splits a lone sequence until the SMs are full, XQA keeps
// a few large blocks: a 21,000-token cache takes 36 blocks, not 83.
func xqaBlocksPerSequence(history, seqHeads, sms, batch int64) int64 {
	n := max(history/128, 1)
	n = min(n, int64(math.Round(math.Sqrt(float64(n)*8))))
	if waves := float64(seqHeads*n) / float64(sms) / 8; waves > 1 {
		n = int64(math.Floor(float64(n) / waves))
	}
	return max(min(n, 6000/max(batch, 1)), 1)
}

// blockWaves is the fixed cost of a kernel's thread blocks run one per SM
// at a time: a GEMM tile's prologue and epilogue (hw.GPU.GEMMTileOverheadCycles)
// per wave.
func (e *Evaluator) blockWaves(blocks int64) float64 {
	g := e.gpu
	return float64(ceil(blocks, int64(g.SMCount))) * g.GEMMTileOverheadCycles / g.ClockHz
}

func actBytes(o model.Op) float64 { return max(o.DType.Bytes(), 2) }
