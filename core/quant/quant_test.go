package quant

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFP8GridPoints(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{0, 0},
		{1, 1},
		{448, 448},
		{500, 448}, // saturates at the largest finite value
		// In [1, 2) the spacing is 2^−3: 1.0625 is a tie between 1 and
		// 1.125 and goes to the even mantissa, 1.
		{1.0625, 1},
		{1.1, 1.125},
		// In [256, 448] the spacing is 2^(8−3) = 32: 300 → 288.
		{300, 288},
		// Subnormals are multiples of 2^−9: 3.2·2^−9 → 3·2^−9.
		{3.2 / 512, 3.0 / 512},
		{-1.1, -1.125},
	} {
		require.Equal(t, c.want, roundFP8(c.in), "round(%v)", c.in)
	}
}

func TestRoundTripErrorBounds(t *testing.T) {
	x := Activations(3, 1, 4, 1000)[0]
	out := make([]float32, len(x))
	const block = 64
	INT8.RoundTrip(x, out, block)
	for lo := 0; lo < len(x); lo += block {
		absmax := 0.0
		for _, v := range x[lo:min(lo+block, len(x))] {
			absmax = max(absmax, math.Abs(float64(v)))
		}
		// int8: at most half a step, step = absmax/127 (plus float32 slack).
		for i := lo; i < min(lo+block, len(x)); i++ {
			require.LessOrEqual(t, math.Abs(float64(out[i]-x[i])), absmax/127/2*(1+1e-5)+1e-7)
		}
	}
	FP8.RoundTrip(x, out, block)
	for i := range x {
		// e4m3 normals keep 3 mantissa bits: relative error ≤ 2^−4 (values
		// below the smallest normal of the block's scale are subnormal).
		if math.Abs(float64(x[i])) > 1e-2 {
			require.LessOrEqual(t, math.Abs(float64(out[i]-x[i])), math.Abs(float64(x[i]))/16*(1+1e-5)+1e-6)
		}
	}
	None.RoundTrip(x, out, block)
	require.Equal(t, x, out)
}

func TestTwoShotExactWithoutQuantization(t *testing.T) {
	in := Activations(1, 4, 8, 256)
	// Unquantized, the result is the fp32 sum: error at float32 rounding.
	require.Less(t, RelativeError(in, None.TwoShotAllReduce(in, 128)), 1e-6)
	// One rank sends nothing: exact whatever the format.
	one := in[:1]
	require.Zero(t, RelativeError(one, INT8.TwoShotAllReduce(one, 128)))
}

func TestTwoShotErrors(t *testing.T) {
	e8 := Error(INT8, 7, 4, 16, 1024, 128)
	f8 := Error(FP8, 7, 4, 16, 1024, 128)
	// Block-scaled int8 keeps ~7 bits over the block's range, e4m3 3
	// mantissa bits: both under 10%, int8 below fp8 on Gaussian blocks.
	require.Greater(t, e8, 0.0)
	require.Less(t, e8, f8)
	require.Less(t, f8, 0.1)
	// Larger blocks share one scale over more outliers: int8 error grows.
	require.Less(t, Error(INT8, 7, 4, 16, 1024, 32), Error(INT8, 7, 4, 16, 1024, 1024))
	// Deterministic per seed.
	require.Equal(t, e8, Error(INT8, 7, 4, 16, 1024, 128))
	require.NotEqual(t, e8, Error(INT8, 8, 4, 16, 1024, 128))
}

func TestParse(t *testing.T) {
	f, err := Parse("fp8")
	require.NoError(t, err)
	require.Equal(t, FP8, f)
	_, err = Parse("int4")
	require.ErrorContains(t, err, "int4")
	require.Equal(t, 1.0, INT8.WireElemBytes())
	require.Equal(t, 2.0, None.WireElemBytes())
}

func TestRingAllReduce(t *testing.T) {
	in := Activations(5, 4, 8, 256)
	// Unquantized, the ring's result is the fp32 sum.
	require.Less(t, RelativeError(in, None.RingAllReduce(in, 128)), 1e-6)
	require.Zero(t, RelativeError(in[:1], INT8.RingAllReduce(in[:1], 128)))
	// On two ranks the ring's one hop is the two-shot's one exchange: rank
	// j adds the other's quantized shard to its own, then the sum is
	// quantized once for the all-gather, so the two agree bit for bit.
	two := in[:2]
	require.Equal(t, INT8.TwoShotAllReduce(two, 128), INT8.RingAllReduce(two, 128))
	require.Equal(t, FP8.TwoShotAllReduce(two, 128), FP8.RingAllReduce(two, 128))
	// On four ranks the ring quantizes each partial sum t−1 = 3 times in a
	// row, the two-shot each input once: errors of the same order (each
	// quantization adds at most half a step of its block's absmax),
	// both small.
	ring, shot := RingError(INT8, 7, 4, 16, 1024, 128), Error(INT8, 7, 4, 16, 1024, 128)
	require.Greater(t, ring, 0.0)
	require.Less(t, ring, 0.05)
	require.InDelta(t, 1, ring/shot, 1)
	require.Equal(t, ring, RingError(INT8, 7, 4, 16, 1024, 128))
}
