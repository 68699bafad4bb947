package net

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/stretchr/testify/require"
)

// vLLM's custom all-reduce on one DGX H100 (8 GPUs on NVSwitch, 450 GB/s
// each way): alone on its links it takes its kernel's latency plus the
// bytes a rank reads at the kernel's share of the link: one-shot below
// 256 KiB ((n−1)·S read), two-shot from there to below 8 MiB
// (2(n−1)/n·S); from 8 MiB, across nodes, or on a rank count vLLM does not
// serve, it is NCCL's tuner exactly.
func TestCustomAllReduceClosedForms(t *testing.T) {
	node, err := topo.Preset("dgx-h100", 1)
	require.NoError(t, err)
	nodes2, err := topo.Preset("dgx-h100", 2)
	require.NoError(t, err)
	run := func(tp *topo.Topology, alg Algorithm, bytes float64, ranks []int) float64 {
		return runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Algorithm: alg, Bytes: bytes, Ranks: ranks})
	}
	const n, link = 8.0, 450e9
	oneBW, twoBW := CustomOneShotLinkShare*link, CustomTwoShotLinkShare*link
	for _, c := range []struct {
		bytes, want float64
	}{
		{80 << 10, CustomOneShotLatencyS + (n-1)*(80<<10)/oneBW},
		{255 << 10, CustomOneShotLatencyS + (n-1)*(255<<10)/oneBW},
		{256 << 10, CustomTwoShotLatencyS + 2*(n-1)/n*(256<<10)/twoBW},
		{8<<20 - 16, CustomTwoShotLatencyS + 2*(n-1)/n*(8<<20-16)/twoBW},
	} {
		require.InEpsilon(t, c.want, run(node, Custom, c.bytes, all(8)), 1e-3, "%g bytes", c.bytes)
	}
	// 2 GPUs: one-shot at every size below 8 MiB.
	require.InEpsilon(t, CustomOneShotLatencyS+(4<<20)/oneBW, run(node, Custom, 4<<20, []int{0, 1}), 1e-3)
	// Where vLLM hands the all-reduce to NCCL, the time is NCCL's.
	for _, c := range []struct {
		tp    *topo.Topology
		bytes float64
		ranks []int
	}{
		{node, 8 << 20, all(8)},
		{node, 80 << 10, all(3)},
		{nodes2, 80 << 10, all(16)},
		{nodes2, 80 << 10, []int{0, 8}},
	} {
		require.InEpsilon(t, run(c.tp, NCCL, c.bytes, c.ranks), run(c.tp, Custom, c.bytes, c.ranks), 1e-12, "%g bytes on %v", c.bytes, c.ranks)
	}
	ok, err := CustomEligible(&Comms{t: nodes2}, []int{0, 8}, 80<<10)
	require.NoError(t, err)
	require.False(t, ok, "ranks on two nodes are not NVLink peers")
}
