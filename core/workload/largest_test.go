package workload

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLargest(t *testing.T) {
	for _, c := range []struct{ threshold, limit, want int }{
		{37, 1 << 20, 37}, {1, 64, 1}, {64, 64, 64}, {0, 64, 0}, {1000, 100, 100}, {99, 100, 99},
	} {
		calls := 0
		got, err := Largest(c.limit, func(n int) (bool, error) {
			calls++
			require.True(t, n >= 1 && n <= c.limit, "probed %d outside [1, %d]", n, c.limit)
			return n <= c.threshold, nil
		})
		require.NoError(t, err)
		require.Equal(t, c.want, got, "threshold %d limit %d", c.threshold, c.limit)
		require.LessOrEqual(t, calls, 2*21+2, "doubling then bisection, not a scan")
	}
	boom := errors.New("boom")
	_, err := Largest(100, func(n int) (bool, error) {
		if n > 8 {
			return false, boom
		}
		return true, nil
	})
	require.ErrorIs(t, err, boom)
}
