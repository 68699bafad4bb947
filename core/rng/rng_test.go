package rng

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Gamma(k, 1) has mean k and variance k; 200,000 draws put the sample
// mean within about 3σ/√n = 3·√(k/n) of k, so 1.5 % of k for k >= 0.5,
// and the variance within a few per cent.
func TestGammaMoments(t *testing.T) {
	for _, k := range []float64{0.5, 1, 2.5, 10} {
		r := Stream(7, "gamma")
		const n = 200000
		var sum, sq float64
		for i := 0; i < n; i++ {
			x := Gamma(r, k)
			assert.Greater(t, x, 0.0)
			sum += x
			sq += x * x
		}
		mean := sum / n
		variance := sq/n - mean*mean
		assert.InEpsilon(t, k, mean, 0.015, "shape %g: mean", k)
		assert.InEpsilon(t, k, variance, 0.05, "shape %g: variance", k)
	}
}
