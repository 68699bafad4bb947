package compute

import (
	"math"

	"github.com/eidolon-sim/eidolon/core/model"
)

// Impl is how a streaming kernel is written, which sets the bandwidth it
// reaches and its latency at small sizes.
type Impl string

const (
	// ImplVectorized: a grid-stride kernel with vector loads over the whole
	// tensor (PyTorch's vectorized elementwise kernels, Adam, casts). It
	// reaches the GPU's streaming bandwidth (hw.GPU.HBMBandwidth).
	ImplVectorized Impl = "vectorized"
	// ImplRow: one thread block per row (token) looping over the row with
	// scalar loads (vLLM/sarathi rms_norm, rotary_embedding, silu_and_mul;
	// Apex's fused norms). Bandwidth hw.GPU.RowKernelBandwidth; each loop
	// iteration waits on one memory latency, so a wide row with few rows
	// is latency-bound.
	ImplRow Impl = "row"
	// ImplRowVector: PyTorch's own LayerNorm kernel
	// (vectorized_layer_norm_kernel, aten/src/ATen/native/cuda/
	// layer_norm_kernel.cu), which inference engines run for LayerNorm
	// models (vLLM's GPT-2, OPT and phi call torch.nn.LayerNorm): one
	// block of 128 threads per row loading 4 elements at a time, Welford
	// statistics over the row, then a second pass that reads the row again
	// (from L1: a row is a few KB) and writes it. A per-row reduction as
	// ImplRow's kernels, at their bandwidth; its small blocks loop over
	// w/512 vectors per pass.
	ImplRowVector Impl = "row_vector"
	// ImplGather: a per-token row lookup (embedding). Bandwidth
	// hw.GPU.GatherBandwidth, after two dependent memory latencies (the
	// token id, then its row).
	ImplGather Impl = "gather"
)

// implOf is the kernel an operator runs as by default: norms and rotary
// embeddings are row kernels, embeddings gathers, the rest (and norms that
// read their row once, Op.OnePass) vectorized.
func implOf(o model.Op) Impl {
	switch o.Kind {
	case model.Norm:
		if o.OnePass {
			return ImplVectorized
		}
		if o.NativeLayerNorm {
			return ImplRowVector
		}
		return ImplRow
	case model.Rotary:
		return ImplRow
	case model.Embedding:
		return ImplGather
	}
	return ImplVectorized
}

// rowShape gives a row kernel's threads per block, loop iterations per
// thread (per row) that wait on DRAM and that wait on L2, and the bytes it
// moves as a multiple of the op's compulsory bytes, from the kernels'
// launch code:
//   - rms_norm (vLLM/sarathi layernorm_kernels.cu): block = min(w, 1024)
//     threads, two passes over the row (sum of squares, then scale and
//     store), so x is read twice: 3 of the op's 2 bytes per element; the
//     first pass's loads come from DRAM, the second's from L1 (the row)
//     and L2 (the weight every block reads);
//   - silu_and_mul and other fused activations (activation_kernels.cu):
//     block = min(w, 1024) threads, one output element per iteration;
//   - PyTorch's vectorized_layer_norm_kernel (ImplRowVector): 128 threads
//     (num_threads() = 4 warps), 4 elements a load, two passes over the
//     row, the second from L1 and L2 (gamma and beta) as rms_norm's: its
//     compulsory bytes.
//
// w is the row width in elements (the op's N; 0 when the op does not carry
// its shape, which leaves out the latency term).
func rowShape(impl Impl, k model.Kind, w int64) (threads, dramIters, l2Iters int64, byteScale float64) {
	if impl == ImplRowVector {
		const threads, vec = 128, 4
		n := ceil(max(w, 1), threads*vec)
		return threads, n, n, 1
	}
	threads = min(max(w, 1), 1024)
	if k == model.Norm {
		n := ceil(w, threads)
		return threads, n, n, 1.5
	}
	return threads, ceil(w, threads), 0, 1
}

// smallIndexIDs is the most ids index_select hands to its small-index
// kernel (numIndices <= 16 in index_select_out_cuda_impl).
const smallIndexIDs = 16

// streaming prices a one-pass kernel: its bytes pass through L2 from HBM
// at the implementation's bandwidth, its math runs at the vector rate
// (tensor rate for the SSD matmuls). Row kernels with their shape (M rows
// of N elements) run in waves of the blocks the SMs hold at once, each
// wave its threads' loop of dependent loads; the kernel takes the longer
// of that chain and its bytes over bandwidth, a norm each wave the longer
// of its chain and its own bytes (rowWaves).
func (e *Evaluator) streaming(o model.Op, impl Impl) Cost {
	g := e.gpu
	c := Cost{BytesL2: o.Bytes, BytesHBM: o.Bytes, Kernels: kernelsPerOp(o)}
	bw := g.HBMBandwidth()
	switch impl {
	case ImplRow, ImplRowVector:
		if o.Kind == model.Rotary && impl == ImplRow {
			return e.rotary(c, o)
		}
		threads, dramIters, l2Iters, scale := rowShape(impl, o.Kind, o.N)
		c.BytesL2 = o.Bytes * scale
		bw = g.RowKernelBandwidth() / scale
		if res := e.residentStream(o); o.Kind == model.Norm && impl == ImplRow && res > 0 {
			// The norm's first pass only reads its row (the sum of
			// squares): the part of its input still in L2 (residentStream:
			// the residual add before it wrote the rows in the order the
			// norm reads them) it reads at L2's bandwidth, the rest at the
			// row kernel's. Vidur's norms show it: CodeLlama-34B's
			// 8,192-wide rows on an A100 cost 26 ns a token up to 512
			// tokens (8.4 MB of input) and 45 ns from 640, where the input
			// outgrows a quarter of L2. silu_and_mul shows no such knee
			// (priced so, its held-out median went from 2.8 to 4.8 %);
			// RoPE reads it (rotary).
			bw = e.readResident(&c, res, g.RowKernelBandwidth())
		}
		if o.M > 0 && o.N > 0 && g.MemoryLatencyS > 0 {
			resident := int64(g.SMCount) * max(int64(g.ThreadsPerSM())/threads, 1)
			chain := float64(dramIters)*g.MemoryLatencyS + float64(l2Iters)*g.L2Latency()
			waves := float64(ceil(o.M, resident)) * chain
			if o.Kind == model.Norm {
				// A norm's waves each take the longer of their loop and
				// their bytes (rowWaves). silu_and_mul priced so reads the
				// same on the held-out split (A100 elementwise 2.8 %) but
				// moves the joint kernel fit to another basin of its
				// stepped loss (objective 0.0509 against 0.0523, held-out
				// A100 GEMM median 5.1 %, MosaicML's 2,048-token A100 rows
				// up to +11 %); it keeps the longer of its whole chain
				// and its bytes.
				waves = rowWaves(o.M, resident, chain, c.BytesHBM/bw)
			}
			mathTime := safeDiv(o.FLOPs, e.mathPeak(o))
			lat := mathTime
			if waves > c.BytesHBM/bw {
				// Some wave waits on its loop rather than its bytes.
				lat = math.Max(mathTime, waves)
			}
			c = e.finishBW(c, o.FLOPs, lat, bw, 0, 0)
			if c.Bound == BoundCompute && lat > mathTime {
				c.Bound = BoundLatency
			}
			return c
		}
	case ImplGather:
		// Each thread loads its token id, then the row it names: two
		// dependent memory latencies before the first byte moves. Up to
		// 16 ids PyTorch's index_select runs indexSelectSmallIndex
		// (aten/src/ATen/native/cuda/Indexing.cu), whose threads walk the
		// ids one after another, each id's two loads before the next:
		// the chain grows with the ids (Vidur's A100 embeddings: 3, 4, 5,
		// 8, 14 µs at 1, 2, 4, 8, 16 tokens, whatever the hidden size).
		// The rows stream only after the chain, so it adds to their
		// bytes' time (the larger of the two left H100's 24-160-token
		// gathers 0.5-1 µs short: held-out median 5.6 % against 3.6 %).
		chain := 2 * g.MemoryLatencyS
		if o.M > 0 && o.M <= smallIndexIDs {
			chain *= float64(o.M)
		}
		c = e.finishBW(c, o.FLOPs, 0, g.GatherBandwidth(), chain, 0)
		if chain > c.BytesHBM/g.GatherBandwidth() {
			c.Bound = BoundLatency
		}
		return c
	case ImplVectorized:
		c.BytesHBM -= e.residentInput(o)
	}
	return e.finishBW(c, o.FLOPs, safeDiv(o.FLOPs, e.mathPeak(o)), bw, 0, 0)
}

// rowWaves is the time of a row kernel's rows run in waves of the blocks the
// SMs hold at once (resident): each wave takes the longer of its threads'
// loop (chain: each iteration waiting on DRAM's latency or, where the loop
// reads what L1 and L2 hold, on L2's) and its own rows' share of the
// kernel's bytes time (bytesS). A full wave of wide rows is bound by its
// bytes, a last partial wave by its loop: Vidur's A100 norms of 8,192-wide
// rows take 8 µs for up to 216 rows (one wave of two 1,024-thread blocks
// per SM), 14 µs for 256 (a full wave, then 40 rows that wait the whole
// chain) and 18-20 µs for 448-512. Priced as the longer of the whole
// kernel's chain and its bytes, a partial wave's chain hid under the full
// waves' bytes: those rows read 10 % fast and the held-out A100 norm
// median was 5.1 % (4.7 % by waves).
func rowWaves(rows, resident int64, chain, bytesS float64) float64 {
	full, part := rows/resident, rows%resident
	perRow := bytesS / float64(rows)
	t := float64(full) * math.Max(chain, perRow*float64(resident))
	if part > 0 {
		t += math.Max(chain, perRow*float64(part))
	}
	return t
}

// residentInput is the part of a streaming op's input still in L2, read
// from it instead of HBM (L2 residency between kernels): of the input the
// previous kernel just wrote (one M×N tensor), up to a quarter of L2. A
// quarter: A100 and H100 split their L2 in two partitions and the
// producer's own streams evict the rest. Vidur's A100 residual adds of
// 8,192-wide rows fit it: with 1.70 TB/s from HBM (what the largest
// reach), 512 tokens (8.4 MB tensors) read one input from L2, and 1,024 to
// 32,768 tokens (17-537 MB) save the same 10 MB each (27, 112 and 944 µs
// measured). Ops without their shape read everything from HBM, as do ops
// whose bytes are no more than that one tensor.
func (e *Evaluator) residentInput(o model.Op) float64 {
	one := float64(o.M*o.N) * actBytes(o)
	if o.M <= 0 || o.N <= 0 || one >= o.Bytes {
		return 0
	}
	return math.Min(one, float64(e.gpu.L2Bytes)/4)
}

// residentStream is the part of an input still in L2 when the kernel
// before wrote it in the order this one reads it (the residual add before
// a norm: both walk the rows in order). Up to L2's share (residentInput)
// all of it; beyond, the reader's own misses evict what it has not yet
// reached, so the part left falls to none at twice the share (2·share −
// input). Pure least-recently-used replacement would keep none of a stream
// longer than the share (each miss evicts the oldest line left, the next
// one needed); L2's replacement is not pure LRU, and Vidur's A100 norms
// fade rather than drop: 8,192-wide rows stream at 890-930 GB/s up to 640
// tokens (10.5 MB of input), 800-850 at 768 and 665-690 from 1,024
// (16.8 MB), the rate of their 4,096-token rows; 4,096-wide rows the same
// at twice the tokens. (Held-out A100 norm median: 6.5 % keeping the
// share at every size, as the kernels after a GEMM do, whose output is
// written tile by tile, not in the rows' order; 6.0 % with LRU's drop,
// its rows just past the share 23-35 % slow; 5.9 % with the fade.)
func (e *Evaluator) residentStream(o model.Op) float64 {
	res := e.residentInput(o)
	if one := float64(o.M*o.N) * actBytes(o); res < one {
		return math.Max(0, 2*res-one)
	}
	return res
}

// rotary prices vLLM/sarathi's rotary_embedding_kernel (pos_encoding_kernels
// .cu) as its launch code runs it: a block per token of min(query heads ·
// head_dim/2, 512) threads, each rotating one (x, y) pair in place per
// iteration, first over the query heads' pairs, then over the key heads'
// (a key loop of one head's 64 pairs leaves most of a 512-thread block
// idle). Each iteration's stores precede the next one's loads, so the
// latency chain of the resident blocks' iterations adds to the bytes'
// time: the input's part still in L2 (residentInput) at L2's bandwidth, as
// the norm reads it, the rest at the kernel's own (hw.GPU.RotaryBandwidth).
// An op without its heads runs its N/2 pairs as one loop; one without its
// rows (a backward) pays its bytes alone.
func (e *Evaluator) rotary(c Cost, o model.Op) Cost {
	g := e.gpu
	q, k := max(o.N/2, 1), int64(0)
	if o.Heads > 0 && o.HeadDim > 0 {
		half := max(o.HeadDim/2, 1)
		q, k = o.Heads*half, max(o.KVHeads, 0)*half
	}
	threads := min(q, 512)
	iters := ceil(q, threads) + ceil(k, threads)
	resident := int64(g.SMCount) * max(int64(g.ThreadsPerSM())/threads, 1)
	chain := float64(ceil(o.M, resident)*iters) * g.MemoryLatencyS
	bw := g.RotaryBandwidth()
	if res := e.residentInput(o); res > 0 {
		bw = e.readResident(&c, res, bw)
	}
	return e.finishBW(c, o.FLOPs, safeDiv(o.FLOPs, e.mathPeak(o)), bw, chain, 0)
}

// readResident takes res bytes of c's input from L2 at L2's bandwidth, the
// rest of its bytes at bw, and returns the bandwidth that gives c's
// remaining HBM bytes the time of both.
func (e *Evaluator) readResident(c *Cost, res, bw float64) float64 {
	t := (c.BytesL2-res)/bw + res/e.gpu.L2BandwidthBytesPerS
	c.BytesHBM -= res
	return c.BytesHBM / t
}
