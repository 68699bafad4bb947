package topo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// sharedNICCluster is 2 nodes of 8 GPUs on NVSwitch (nvlink3) with 4 HDR
// NICs each (25 GB/s per direction), two GPUs per PCIe Gen4 switch
// (31.5 GB/s per direction) and one NIC per switch.
func sharedNICCluster(t *testing.T) *topo.Topology {
	nics := 4
	c := spec.Cluster{Topology: "composed", Nodes: 2, NICsPerNode: &nics,
		IntraLink: spec.Link{Preset: "nvlink3"}, NICLink: spec.Link{Preset: "ib-hdr"}, HostLink: spec.Link{Preset: "pcie4-x16"}}
	c.Defaults()
	var p spec.Problems
	c.Validate(&p, "cluster")
	require.NoError(t, p.Err())
	require.Equal(t, 2, c.GPUsPerPCIeSwitch, "4 NICs for 8 GPUs: two GPUs share each NIC by default")
	tp, err := compile.Topology("", c)
	require.NoError(t, err)
	return tp
}

// sendPair sends S bytes from n0.gpu<a> to n1.gpu<a> and from n0.gpu<b> to
// n1.gpu<b> at once and returns both delivery times in seconds.
func sendPair(t *testing.T, tp *topo.Topology, a, b string, S float64) []float64 {
	k := sim.New()
	f := net.NewFlowNet(k, tp)
	var ends []float64
	sink := net.SinkFunc(func(int) { ends = append(ends, k.Now().Seconds()) })
	for i, g := range []string{a, b} {
		src, ok := tp.DeviceByName("n0." + g)
		require.True(t, ok)
		dst, ok := tp.DeviceByName("n1." + g)
		require.True(t, ok)
		require.NoError(t, f.Send(src, dst, S, sink, i))
	}
	k.Settle(func() { require.NoError(t, f.CheckCapacity()) })
	require.NoError(t, k.Run(context.Background()))
	require.Len(t, ends, 2)
	return ends
}

func TestGPUsSharingANICGetHalfItsBandwidth(t *testing.T) {
	tp := sharedNICCluster(t)
	const S = 1e9
	const B = 25e9 // ib-hdr: 200 Gb/s per direction
	// Path of n0.gpuX -> n1.gpuX (same rail, one leaf): GPU -> pcie.up ->
	// NIC -> leaf -> NIC -> pcie.down -> GPU. Four PCIe ports at half the
	// 1.5 µs switch hop each and two NIC links at half the 1 µs hop each:
	// latency = 4·0.75 + 2·0.5 = 4 µs.
	const lat = 4e-6
	// gpu0 and gpu1 share PCIe switch 0 and its NIC 0: both flows cross
	// nic0 -> leaf at B (the PCIe ports, 31.5 GB/s, carry 2 × B/2 = B, less
	// than their capacity), so max-min gives each B/2:
	// T = S / (B/2) + lat = 2S/B + lat = 80 µs + 4 µs.
	shared := sendPair(t, tp, "gpu0", "gpu1", S)
	for _, e := range shared {
		require.InEpsilon(t, 2*S/B+lat, e, 1e-9)
	}
	// gpu0 and gpu2 are on switches 0 and 1, NICs 0 and 1 (rails 0 and 1):
	// nothing is shared, each flow runs at B: T = S/B + lat.
	apart := sendPair(t, tp, "gpu0", "gpu2", S)
	for _, e := range apart {
		require.InEpsilon(t, S/B+lat, e, 1e-9)
	}
	// NCCL builds one channel per NIC a node's GPUs can use: 4, not 8.
	require.Equal(t, 4, net.DefaultChannels(tp, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}))
}

func TestSharedNICAllReduceCompletes(t *testing.T) {
	// A 16-rank ring all-reduce over the shared NICs runs to completion
	// (before, GPUs 4..7 of each node had no route off the node) and is
	// bounded below by the NICs: 4 channels (one per NIC), each a ring of
	// n = 16 ranks moving 2(n−1)/n · S/4 bytes per rank, and each crossing
	// from node to node through a NIC at B = 25 GB/s: T >= 2(n−1)/n · S/4 / B.
	// net's channel order rotates each node's ranks by the channel index
	// times the GPUs per NIC, so every channel leaves through a NIC of its
	// own: T is within a few per cent of the bound (the ring's per-hop
	// latencies and the NVLink and PCIe hops on the way).
	tp := sharedNICCluster(t)
	k := sim.New()
	f := net.NewFlowNet(k, tp)
	c := net.NewComms(f)
	const S = 256 << 20
	var res *net.Result
	ranks := make([]int, 16)
	for i := range ranks {
		ranks[i] = i
	}
	_, err := c.Start(net.Collective{Op: net.AllReduce, Algorithm: net.Ring, Bytes: S, Ranks: ranks}, func(r net.Result) { res = &r })
	require.NoError(t, err)
	require.NoError(t, k.Run(context.Background()))
	require.NotNil(t, res)
	n := 16.0
	lower := 2 * (n - 1) / n * (S / 4) / 25e9
	got := (res.End - res.Start).Seconds()
	require.Greater(t, got, lower)
	require.Less(t, got, 1.1*lower, "each channel has a NIC of its own, and the NICs are the bottleneck")
}
