package topo

import (
	"context"
	"errors"
	"testing"

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

// A canceled context stops preset and composed clusters built from a
// description.
func TestBuildContextCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []Description{
		{Preset: "dgx-h100", Nodes: 16384},
		{Kind: KindComposed, Nodes: 4096, GPUsPerNode: 8, NICsPerNode: 8, Intra: IntraNVSwitch, IntraLink: link(t, "nvlink4"),
			NICLink: link(t, "ib-ndr"), HostLink: link(t, "pcie5-x16"), Fabric: RailOptimized, Radix: 64, Oversubscription: 1},
	} {
		_, err := BuildContext(ctx, d)
		require.ErrorIs(t, err, context.Canceled, d)
		d.Nodes = 2
		_, err = BuildContext(context.Background(), d)
		require.NoError(t, err)
	}
}
