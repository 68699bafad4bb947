package hw

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPCIeGenerations(t *testing.T) {
	// x16 per direction = GT/s per lane · 16 lanes · 128/130 (encoding) / 8:
	// Gen3 8 GT/s → 15.75 GB/s, Gen4 16 GT/s → 31.51 GB/s, Gen5 32 GT/s →
	// 63.02 GB/s; each generation doubles the last.
	want := map[string]float64{"pcie3-x16": 15.754e9, "pcie4-x16": 31.508e9, "pcie5-x16": 63.015e9}
	prev := 0.0
	for _, name := range []string{"pcie3-x16", "pcie4-x16", "pcie5-x16"} {
		l, ok := LinkByName(name)
		require.True(t, ok, name)
		require.InDelta(t, want[name], l.BandwidthBytesPerS, 0.001e9, name)
		if prev > 0 {
			require.InDelta(t, 2*prev, l.BandwidthBytesPerS, 1, name)
		}
		prev = l.BandwidthBytesPerS
		require.InDelta(t, 1.5e-6, l.LatencyS, 1e-12, name)
	}
	// One EFA card of a p4d: 100 Gb/s = 12.5 GB/s per direction, four of
	// them give the instance's 400 Gb/s.
	efa, ok := LinkByName("efa-100g")
	require.True(t, ok)
	require.Equal(t, 12.5e9, efa.BandwidthBytesPerS)
}
