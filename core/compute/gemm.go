package compute

import (
	"math"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

type gemmKey struct {
	m, n, k, batch int64
	d              hw.DType
	// acc is the type of the buffer the output is added into ("" when the
	// output is written once; model.Op.Accumulate).
	acc hw.DType
	// promoteK is the reduction elements between two promotions of an
	// 8-bit GEMM's accumulators into FP32 (0: none; promotionK).
	promoteK int64
	// w is the type the B operand (the weights) is stored in ("": d;
	// model.Op.WeightDType).
	w hw.DType
	// tokensK: K is the tokens, no operand's row (model.Op.TokensK).
	tokensK bool
}

type gemmPlan struct{ cost Cost }

// gemm prices Batch products [M×K]·[K×N], memoized per shape and type.
func (e *Evaluator) gemm(o model.Op) Cost {
	key := gemmKey{o.M, o.N, o.K, max(o.Batch, 1), o.DType, o.Accumulate, e.promotionK(o), o.WeightDType, o.TokensK}
	if p, ok := e.gemms[key]; ok {
		return p.cost
	}
	c := e.searchTiles(key)
	e.gemms[key] = gemmPlan{c}
	return c
}

// promotionK is the interval at which GEMM o adds its tensor cores'
// partial sums into FP32 registers: the GPU's FP8 promotion interval for
// an 8-bit GEMM with a split accumulator, else 0.
func (e *Evaluator) promotionK(o model.Op) int64 {
	if !o.SplitAccumulator || o.DType.Bytes() != 1 {
		return 0
	}
	return int64(e.gpu.FP8PromotionIntervalK)
}

// searchTiles tries the CTA tile shapes a GEMM library offers (CUTLASS-style
// M×N×K tiles, split-K for problems with too few tiles to fill the GPU)
// that fit the SM: two pipeline stages of A and B tiles in shared memory,
// fp32 accumulators in at most half the register file. Each is priced as:
//
//   - math: waves = ⌈tiles / SMs⌉; each wave is one tile on an SM: its
//     K-steps at the main loop's MMA rate (hw.GPU.TensorEfficiency of an
//     SM's share of the peak) plus its fixed prologue and epilogue
//     (GEMMTileOverheadCycles). The partial last wave and padding are lost,
//     and the fixed part is what makes short-K and few-tile GEMMs slow.
//     An 8-bit GEMM with a split accumulator also adds its tile's
//     accumulators into FP32 registers every promotion interval of K, one
//     FP32 add per accumulator on the CUDA cores, in series with the MMAs
//     that produced them (the adds need the MMAs' results): on an H100 at
//     the fitted main-loop rate 18 % of an FP8 tile's math, where
//     torchao's FP8 training benchmarks measure fast accumulation 1.1–1.2×
//     faster (pytorch/ao issue 2377);
//   - shared memory: each warp (64×64 warp tiles) reads its A rows and B
//     columns of every staged K-slice;
//   - L2: each tile loads its A panel (tile_m × K) and B panel (K × tile_n),
//     writes its output (split-K: its slice's fp32 partials; a weight
//     gradient accumulated into its buffer reads it first);
//   - split-K's reduction: cuBLAS follows a split-K GEMM with a second
//     kernel (splitKreduce_kernel in profiler traces) that reads every
//     slice's fp32 partials and writes the output, at the vectorized
//     kernels' bandwidth after its own fixed device time. Without it the
//     model chose splits of 8 and 16 that Vidur's GEMMs run 11-15 % slower
//     than priced, on both GPUs (bench/fidelity/KERNELS.md);
//   - alignment: a GEMM whose K or N rows are not multiples of 16 bytes
//     runs cuBLAS's narrow-load kernels, its main loop at
//     hw.GPU.UnalignedMMAFraction of the rate (fitted on the EleutherAI
//     cookbook's unaligned A100 sweep: priced as the aligned kernels run,
//     its held-out half read 25 % fast);
//   - HBM: compulsory traffic when the smaller operand fits in L2 (it stays
//     resident while the larger streams once); otherwise the smaller is
//     re-read once per wave-sized band of the larger, at the GEMM's
//     operand bandwidth (hw.GPU.GEMMBandwidth).
//
// The main loop overlaps its loads (the slowest of math, shared memory, L2
// and HBM sets its time, with a rounded knee between math and HBM); the
// tiles' fixed parts and the kernel's launch add to it. The fastest
// candidate is kept: a "largest tile that fills the SMs" heuristic, closer
// to cuBLAS on some sweeps (the cookbook's narrow-n mm), came out worse
// on Vidur's held-out GEMMs (bench/fidelity/KERNELS.md), so the tile
// choice is the best one and the library's misses are part of the error.
func (e *Evaluator) searchTiles(key gemmKey) Cost {
	g := e.gpu
	in, out, sms, peakSM, overheadS := e.tileRates(key.d)
	inB := weightBytes(key.w, in)
	if unaligned(key.n, key.k, key.d, key.tokensK) {
		peakSM = g.UnalignedMMAPeak(key.d) / float64(sms)
	}
	hbmBW := g.GEMMBandwidth()
	useful := 2 * float64(key.batch) * float64(key.m) * float64(key.n) * float64(key.k)
	l2 := float64(g.L2Bytes)

	best := Cost{TimeS: math.Inf(1)}
	rows := []int64{256, 128, 64}
	if key.w != "" {
		// Marlin's tiles go down to 16 rows (one MMA's height) for small
		// batches, where a cuBLAS GEMM pads to 64 (IST-DASLab/marlin:
		// 16-row A slices, near-ideal int4 speed-ups up to batch 16-32).
		rows = append(rows, 32, 16)
	}
	tilesThatFit(g, in, rows, []int64{64, 32}, func(bm, bn, bk int64) {
		for _, split := range [...]int64{1, 2, 4, 8, 16} {
			kslice := ceil(key.k, split)
			if split > 1 && (kslice < 4*bk || ceil(key.m, bm)*ceil(key.n, bn)*key.batch*split > 2*sms) {
				break
			}
			kp := ceil(kslice, bk) * bk
			gm, gn := ceil(key.m, bm), ceil(key.n, bn)
			tiles := gm * gn * key.batch * split
			waves := ceil(tiles, sms)
			tileFLOPs := 2 * float64(bm*bn*kp)

			c := Cost{TileM: int(bm), TileN: int(bn), TileK: int(bk), SplitK: int(split), Waves: int(waves), Kernels: 1}
			c.ExecutedFLOPs = float64(tiles) * tileFLOPs
			mathTime := float64(waves)*tileFLOPs/peakSM + e.promotionS(key.promoteK, waves, bm, bn, kp)

			wm, wn := min(bm, 64), min(bn, 64)
			c.BytesSMEM = float64(tiles) * (float64(bm*(bn/wn))*in + float64(bn*(bm/wm))*inB) * float64(kp)

			outBytes := float64(key.batch*key.m*key.n) * out
			if key.acc != "" {
				// Accumulating: the epilogue reads the buffer and writes it back.
				outBytes = float64(key.batch*key.m*key.n) * 2 * key.acc.Bytes()
			}
			// What the tiles' epilogue writes: the output, or with split-K
			// each slice's fp32 partials, which the reduction kernel
			// reads back and sums into the output.
			epilogue, reduceS := outBytes, 0.0
			if split > 1 {
				epilogue = float64(split*key.batch*key.m*key.n) * 4
				c.Kernels = 2
				reduceS = (epilogue + outBytes) / g.HBMBandwidth()
			}
			c.BytesL2 = float64(tiles)*(float64(bm)*in+float64(bn)*inB)*float64(kp) + epilogue

			a := float64(key.m*key.k) * in
			b := float64(key.k*key.n) * inB
			small, large := math.Min(a, b), math.Max(a, b)
			operands := small + large
			if small > l2 {
				// Bands of the larger operand covered by one wave.
				s := min(sms, tiles)
				wr := min(gm, int64(math.Ceil(math.Sqrt(float64(s)))))
				wc := min(gn, ceil(s, wr))
				bands := ceil(gm, wr)
				if b > a {
					bands = ceil(gn, wc)
				}
				operands = large + small*float64(bands)
			}
			c.BytesHBM = float64(key.batch) * operands
			if split == 1 || epilogue > l2 {
				c.BytesHBM += epilogue
			}
			c = e.finishBW(c, useful, mathTime, hbmBW, float64(waves)*overheadS, gemmOverlapP)
			if split > 1 {
				c.TimeS += reduceS
				c.BytesL2 += epilogue + outBytes
				c.BytesHBM += outBytes
			}
			c.TileEfficiency = useful / (float64(waves*sms) * tileFLOPs)
			best = faster(best, c)
		}
	})
	return best
}

// promotionS is what promoting a tile's partial sums costs a kernel of
// waves waves of bm×bn tiles over kp reduction elements: every promoteK of
// them (0: never) each accumulator is added into FP32 registers on the CUDA
// cores, one add per SM cycle lane (VectorFP32FlopsPerS counts an FMA as
// two FLOPs).
func (e *Evaluator) promotionS(promoteK, waves, bm, bn, kp int64) float64 {
	if promoteK <= 0 {
		return 0
	}
	addsSM := e.gpu.VectorFP32FlopsPerS / 2 / float64(e.gpu.SMCount)
	return float64(waves) * float64(ceil(kp, promoteK)*bm*bn) / addsSM
}

// tileRates are what a tile of a kernel of type d is priced with: operand
// and output bytes an element, the SMs, one SM's share of the tensor peak
// and the tile's fixed prologue and epilogue in seconds.
func (e *Evaluator) tileRates(d hw.DType) (in, out float64, sms int64, peakSM, overheadS float64) {
	g := e.gpu
	in = d.Bytes()
	sms = int64(g.SMCount)
	return in, max(in, 2), sms, g.TensorPeak(d) / float64(sms), g.GEMMTileOverheadCycles / g.ClockHz
}

// weightBytes is the bytes of a B (weight) element stored in w ("" keeps
// the operand type's in), its group's scale included. A weight-only
// quantized GEMM (Marlin, vLLM's GPTQ/AWQ kernels) streams its narrow
// weights through L2 and shared memory and dequantizes them in registers,
// overlapped with the MMAs of the previous K-slice, so only the weights'
// traffic shrinks; the MMAs run at the activations' type.
func weightBytes(w hw.DType, in float64) float64 {
	if w == "" {
		return in
	}
	return model.StoredWeightBytes(w)
}

// tilesThatFit calls f with every CTA tile of ms rows, 64–256 columns and
// ks reduction elements that fits an SM: fp32 accumulators in at most half
// the register file, two pipeline stages of its A and B tiles (in bytes an
// element) in shared memory.
func tilesThatFit(g hw.GPU, in float64, ms, ks []int64, f func(bm, bn, bk int64)) {
	for _, bm := range ms {
		for _, bn := range [...]int64{256, 128, 64} {
			if float64(bm*bn*4) > float64(g.RegisterBytesPerSM)/2 {
				continue
			}
			for _, bk := range ks {
				if 2*float64((bm+bn)*bk)*in <= float64(g.SharedMemBytesPerSM) {
					f(bm, bn, bk)
				}
			}
		}
	}
}

// faster is the faster of two tile choices; among equally fast ones, the
// one with the least padded work.
func faster(best, c Cost) Cost {
	if c.TimeS < best.TimeS*(1-1e-12) || (c.TimeS <= best.TimeS*(1+1e-12) && c.ExecutedFLOPs < best.ExecutedFLOPs) {
		return c
	}
	return best
}

// gemmOverlapP rounds the roofline's knee for GEMM tiles: the main loop's
// MMAs and its operand loads overlap imperfectly near the ridge (a GEMM
// whose math and weight streaming take equally long runs 2^(1/p) × either:
// Vidur's A100 GEMMs of 128 tokens against 8192×57344 weights take 720 µs
// where math and streaming each take ~500). 3 rather than 2: with the other
// parameters refitted, the kernel fit's training objective is 0.072 at 3
// and 0.077 at 2 (A100), 0.065 at both (H100).
const gemmOverlapP = 3

func ceil(a, b int64) int64 { return (a + b - 1) / b }

// Unaligned reports whether GEMM o runs the narrow-load kernels whose main
// loop hw.GPU.UnalignedMMAFraction prices: its rows of K or N elements do
// not start on 16-byte boundaries, as the fast kernels' 16-byte copies
// need. A linear layer's rows are its K and N elements long; the tokens
// are no operand's row (M, or a weight gradient's K: model.Op.TokensK).
func Unaligned(o model.Op) bool { return unaligned(o.N, o.K, o.DType, o.TokensK) }

// unaligned is Unaligned for rows of n and k elements of type d, the
// elements alone (an NVFP4 row's block scales are stored apart).
func unaligned(n, k int64, d hw.DType, tokensK bool) bool {
	b := d.Bytes()
	if d == hw.FP4 {
		b = 0.5
	}
	rows := func(x int64) bool { return math.Mod(float64(x)*b, 16) == 0 }
	return !rows(n) || (!tokensK && !rows(k))
}
