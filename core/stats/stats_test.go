package stats

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// numpy.quantile's default: linear between order statistics.
func TestQuantileLikeNumpy(t *testing.T) {
	xs := []float64{7, 1, 3, 5}
	require.InDelta(t, 4.0, Median(xs), 1e-12)        // np.median([7,1,3,5])
	require.InDelta(t, 6.4, Quantile(xs, 0.9), 1e-12) // np.quantile(..., 0.9)
	require.Equal(t, 1.0, Quantile(xs, 0))
	require.Equal(t, 7.0, Quantile(xs, 1))
	require.Equal(t, []float64{7, 1, 3, 5}, xs, "not reordered")
	require.Equal(t, 0.0, Quantile(nil, 0.5))
	require.Equal(t, 2.0, Quantile([]float64{2}, 0.99))
}
