package topo

import (
	"context"
	"errors"
	"testing"

	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/require"
)

// Building a large cluster polls its cancellation all along (every 64th
// node of each pass), and stops at the first poll that fails.
func TestClusterBuildPollsCancellation(t *testing.T) {
	stop := errors.New("stop")
	for _, fail := range []int{1, 3, 40} {
		c, err := PresetConfig("dgx-h100", 2048)
		require.NoError(t, err)
		polls := 0
		c.Canceled = func() error {
			if polls++; polls >= fail {
				return stop
			}
			return nil
		}
		_, err = Cluster(c)
		require.ErrorIs(t, err, stop)
		require.Equal(t, fail, polls, "stops at the failing poll")
	}
	// uncanceled, it polls through every pass: nodes (twice) and NICs
	// every 64 nodes, and the leaves
	c, err := PresetConfig("dgx-h100", 2048)
	require.NoError(t, err)
	polls := 0
	c.Canceled = func() error { polls++; return nil }
	tp, err := Cluster(c)
	require.NoError(t, err)
	require.Equal(t, 2048*8, tp.NumRanks())
	require.GreaterOrEqual(t, polls, 3*2048/64)
}

// A canceled context stops preset and composed clusters from the spec.
func TestFromSpecContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []spec.Cluster{
		{Preset: "dgx-h100", Nodes: 16384},
		{Topology: "composed", Nodes: 4096, GPUsPerNode: 8, Intra: "nvswitch", IntraLink: "nvlink4", NICLink: "ib-ndr", Fabric: "rail_optimized", Radix: 64},
	} {
		c.Defaults()
		_, err := FromSpecContext(ctx, c)
		require.ErrorIs(t, err, context.Canceled, c)
		_, err = FromSpecContext(context.Background(), spec.Cluster{Preset: c.Preset, Nodes: 2, Topology: c.Topology,
			GPUsPerNode: c.GPUsPerNode, Intra: c.Intra, IntraLink: c.IntraLink, NICLink: c.NICLink, Fabric: c.Fabric, Radix: c.Radix})
		require.NoError(t, err)
	}
}
