// Package quant computes, for real, the numerics of a quantized all-reduce:
// int8 or fp8 (e4m3) values with one absmax scale per block of elements,
// reduced on a ring with the (de)quantization fused into the communication
// kernel, as the quantized all-reduce of SSM tensor parallelism does (Dutt
// et al. 2026, arXiv 2602.21144), or two-shot (reduce-scatter of quantized
// shards sent directly, dequantize and accumulate in fp32, requantize,
// all-gather), as separate quantize and dequantize kernels around a direct
// exchange compose it. It answers how far the reduced result lands from the
// exact sum; the time and wire bytes of the collective are package net's
// business.
package quant

import (
	"fmt"
	"math"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// Format is the element type on the wire.
type Format string

const (
	// None sends the 16-bit values as they are.
	None Format = "none"
	// INT8: symmetric integers in [−127, 127], scale = absmax/127.
	INT8 Format = "int8"
	// FP8: OCP fp8 e4m3 (4 exponent bits, bias 7, 3 mantissa bits, no
	// infinities, largest finite 448), scale = absmax/448.
	FP8 Format = "fp8"
)

// Formats lists the format names.
func Formats() []string { return []string{string(None), string(INT8), string(FP8)} }

// Parse returns the format with this name.
func Parse(name string) (Format, error) {
	for _, f := range Formats() {
		if f == name {
			return Format(f), nil
		}
	}
	return "", fmt.Errorf("quantization must be one of %v, got %q", Formats(), name)
}

// WireElemBytes is the size of one element on the wire (2: bf16 unquantized).
func (f Format) WireElemBytes() float64 {
	if f == None {
		return 2
	}
	return 1
}

// maxCode is the largest magnitude the format represents.
func (f Format) maxCode() float64 {
	if f == FP8 {
		return 448
	}
	return 127
}

// roundFP8 rounds v (|v| ≤ 448) to the nearest e4m3 value, ties to even:
// normal numbers have a spacing of 2^(e−3) in the binade [2^e, 2^(e+1)),
// e ≥ −6; below 2^−6 the subnormals are spaced 2^−9.
func roundFP8(v float64) float64 {
	a := math.Abs(v)
	if a == 0 {
		return 0
	}
	e := math.Floor(math.Log2(a))
	step := math.Ldexp(1, int(e)-3)
	if e < -6 {
		step = math.Ldexp(1, -9)
	}
	return math.Copysign(min(math.RoundToEven(a/step)*step, 448), v)
}

// code rounds a scaled value to the format's grid.
func (f Format) code(v float64) float64 {
	if f == FP8 {
		return roundFP8(v)
	}
	return max(-127, min(127, math.RoundToEven(v)))
}

// RoundTrip quantizes x block by block (one absmax scale per block of
// `block` elements, the last block possibly shorter) and writes the
// dequantized values to out (len(out) == len(x)). None copies.
func (f Format) RoundTrip(x, out []float32, block int) {
	if f == None {
		copy(out, x)
		return
	}
	block = max(block, 1)
	for lo := 0; lo < len(x); lo += block {
		hi := min(lo+block, len(x))
		absmax := 0.0
		for _, v := range x[lo:hi] {
			absmax = max(absmax, math.Abs(float64(v)))
		}
		if absmax == 0 {
			clear(out[lo:hi])
			continue
		}
		// The scale travels as fp32.
		scale := float64(float32(absmax / f.maxCode()))
		for i := lo; i < hi; i++ {
			out[i] = float32(f.code(float64(x[i])/scale) * scale)
		}
	}
}

// TwoShotAllReduce sums the ranks' vectors (equal lengths) as a quantized
// two-shot all-reduce: the vector is cut into one contiguous shard per
// rank; in the reduce-scatter every rank sends each other rank that rank's
// shard quantized (its own shard stays at full precision), and the owner
// dequantizes and accumulates in fp32; in the all-gather each owner sends
// its reduced shard quantized and every rank, the owner included (so that
// all replicas agree bit for bit), keeps the dequantized values. It
// returns the result every rank holds.
func (f Format) TwoShotAllReduce(inputs [][]float32, block int) []float32 {
	n := len(inputs[0])
	t := len(inputs)
	out := make([]float32, n)
	shard := (n + t - 1) / t
	buf := make([]float32, shard)
	acc := make([]float32, shard)
	for j := 0; j < t; j++ {
		lo, hi := min(j*shard, n), min((j+1)*shard, n)
		m := hi - lo
		copy(acc[:m], inputs[j][lo:hi])
		for r := 0; r < t; r++ {
			if r == j {
				continue
			}
			f.RoundTrip(inputs[r][lo:hi], buf[:m], block)
			for i := 0; i < m; i++ {
				acc[i] += buf[i]
			}
		}
		if t == 1 {
			copy(out[lo:hi], acc[:m])
			continue
		}
		f.RoundTrip(acc[:m], out[lo:hi], block)
	}
	return out
}

// RingAllReduce sums the ranks' vectors as NCCL's ring all-reduce does
// with a fused quantizing kernel: the vector is cut into one shard per
// rank; in the reduce-scatter, shard j's partial sum starts at rank j+1 and
// travels the ring, each hop sending it quantized and the receiver
// dequantizing and adding its own full-precision shard in fp32, until rank
// j holds the sum (t−1 quantizations of growing partial sums); in the
// all-gather, rank j quantizes the sum once and the codes are forwarded as
// they are, every rank (j included, so that replicas agree bit for bit)
// keeping the dequantized values. It returns the result every rank holds.
func (f Format) RingAllReduce(inputs [][]float32, block int) []float32 {
	n := len(inputs[0])
	t := len(inputs)
	out := make([]float32, n)
	shard := (n + t - 1) / t
	acc := make([]float32, shard)
	buf := make([]float32, shard)
	for j := 0; j < t; j++ {
		lo, hi := min(j*shard, n), min((j+1)*shard, n)
		m := hi - lo
		if t == 1 {
			copy(out[lo:hi], inputs[0][lo:hi])
			continue
		}
		// Hop k goes from rank j+k to rank j+k+1 (mod t), k = 1..t−1.
		copy(acc[:m], inputs[(j+1)%t][lo:hi])
		for k := 1; k < t; k++ {
			f.RoundTrip(acc[:m], buf[:m], block)
			r := (j + k + 1) % t
			for i := 0; i < m; i++ {
				acc[i] = buf[i] + inputs[r][lo+i]
			}
		}
		f.RoundTrip(acc[:m], out[lo:hi], block)
	}
	return out
}

// RelativeError is ‖y − s‖₂ / ‖s‖₂ of a result y against the exact sum s
// of the inputs (computed in float64).
func RelativeError(inputs [][]float32, y []float32) float64 {
	var num, den float64
	for i := range y {
		s := 0.0
		for _, x := range inputs {
			s += float64(x[i])
		}
		d := float64(y[i]) - s
		num += d * d
		den += s * s
	}
	if den == 0 {
		return 0
	}
	return math.Sqrt(num / den)
}

// Activations draws the partial outputs of a row-parallel projection on
// `ranks` ranks: tokens rows of width hidden, each rank's partial sum
// Gaussian with a per-channel magnitude that is log-normal (σ = 1), as
// hidden states of language models have a few channels far larger than
// the rest (Dettmers et al. 2022, LLM.int8(), arXiv 2208.07339). The
// channel magnitudes are shared by the ranks; the draws are seeded.
func Activations(seed uint64, ranks, tokens, hidden int) [][]float32 {
	r := rng.Stream(seed, "quant.activations")
	scale := make([]float64, hidden)
	for c := range scale {
		scale[c] = math.Exp(r.NormFloat64())
	}
	out := make([][]float32, ranks)
	for k := range out {
		v := make([]float32, tokens*hidden)
		for i := range v {
			v[i] = float32(scale[i%hidden] * r.NormFloat64())
		}
		out[k] = v
	}
	return out
}

// Error is the relative error of a two-shot all-reduce in format f over
// `ranks` ranks of synthetic activations (tokens × hidden) drawn from seed.
func Error(f Format, seed uint64, ranks, tokens, hidden, block int) float64 {
	in := Activations(seed, ranks, tokens, hidden)
	return RelativeError(in, f.TwoShotAllReduce(in, block))
}

// RingError is Error for the fused ring all-reduce (RingAllReduce).
func RingError(f Format, seed uint64, ranks, tokens, hidden, block int) float64 {
	in := Activations(seed, ranks, tokens, hidden)
	return RelativeError(in, f.RingAllReduce(in, block))
}
