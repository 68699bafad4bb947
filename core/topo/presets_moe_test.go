package topo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GB200 NVL72: 72 GPUs in one NVLink domain at 900 GB/s per direction
// each; the H800 node: 8 GPUs at 200 GB/s NVLink, 8 NDR NICs; the B200
// node: 8 GPUs at 900 GB/s, 8 NDR NICs.
func TestMoEClusterPresets(t *testing.T) {
	c, err := PresetConfig("gb200-nvl72", 2)
	require.NoError(t, err)
	assert.Equal(t, 72, c.GPUsPerNode)
	assert.Equal(t, 900e9, c.IntraLink.BandwidthBytesPerS)
	tp, err := Preset("gb200-nvl72", 2)
	require.NoError(t, err)
	assert.Equal(t, 144, tp.NumRanks())
	first := make([]int, 73)
	for i := range first {
		first[i] = i
	}
	assert.Len(t, tp.NodesOfRanks(first[:72]), 1, "the first 72 GPUs share one NVLink domain")
	assert.Len(t, tp.NodesOfRanks(first), 2, "rank 72 is in the second rack")

	h, err := PresetConfig("dgx-h800", 1)
	require.NoError(t, err)
	assert.Equal(t, 200e9, h.IntraLink.BandwidthBytesPerS)
	assert.Equal(t, 8, h.NICsPerNode)
	assert.Equal(t, 50e9, h.NICLink.BandwidthBytesPerS)

	// DGX B200: 8 GPUs at NVLink 5's 900 GB/s per direction, 8 NDR NICs.
	b, err := PresetConfig("dgx-b200", 1)
	require.NoError(t, err)
	assert.Equal(t, 8, b.GPUsPerNode)
	assert.Equal(t, 900e9, b.IntraLink.BandwidthBytesPerS)
	assert.Equal(t, 8, b.NICsPerNode)
	assert.Equal(t, 50e9, b.NICLink.BandwidthBytesPerS)
}
