package parallelsearch

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
	"github.com/stretchr/testify/require"
)

// A collective alone on the network, run as the executor runs it (NCCL's
// tuner, ring streams), takes the choice's time LatencyS + bytes /
// AlgBytesPerS (net's TestNCCLCollectiveClosedForm). ring.timeS leaves out
// the ring's per-step hop latencies, so
//
//	simulated - steps·hop <= timeS <= simulated,
//
// where steps is n-1 (2(n-1) for an all-reduce) and hop the slowest
// neighbour's path latency: the bound is tight up to the links' latencies.
func TestRingTimeIsALowerBound(t *testing.T) {
	for _, tc := range []struct {
		preset string
		nodes  int
		ranks  []int
	}{
		{"dgx-a100", 1, []int{0, 1, 2, 3, 4, 5, 6, 7}}, // a tensor-parallel group
		{"dgx-a100", 2, []int{0, 8}},                   // data-parallel, one rank per node
		{"dgx-a100", 4, []int{0, 8, 16, 24}},
		{"dgx-h100", 2, []int{0, 2, 4, 6, 8, 10, 12, 14}}, // tp 2: four ranks per node
	} {
		m, err := compile.Machine("", spec.Cluster{Preset: tc.preset, Nodes: tc.nodes}, spec.GPU{Preset: "a100-80gb-sxm"}, spec.Faults{}, 1)
		require.NoError(t, err)
		rs := &rings{t: m.Fabric.Topology()}
		r, err := rs.get(tc.ranks)
		require.NoError(t, err)
		again, err := rs.get(append([]int(nil), tc.ranks...))
		require.NoError(t, err)
		require.Same(t, r, again, "memoized by ranks")
		for _, kind := range []model.Kind{model.AllReduce, model.AllGather, model.ReduceScatter} {
			for _, bytes := range []float64{64 << 10, 16 << 20, 1 << 30} {
				lb, err := r.timeS([]workload.Coll{{Kind: kind, Bytes: bytes}})
				require.NoError(t, err)
				mm, err := compile.Machine("", spec.Cluster{Preset: tc.preset, Nodes: tc.nodes}, spec.GPU{Preset: "a100-80gb-sxm"}, spec.Faults{}, 1)
				require.NoError(t, err)
				c := net.NewComms(mm.Fabric)
				var got float64
				_, err = c.Start(net.Collective{Op: net.Op(kind), Algorithm: net.NCCL, Bytes: bytes, Ranks: tc.ranks, Stream: true},
					func(res net.Result) { got = (res.End - res.Start).Seconds() })
				require.NoError(t, err)
				require.NoError(t, mm.Fabric.Kernel().Run(context.Background()))
				steps := float64(len(tc.ranks) - 1)
				if kind == model.AllReduce {
					steps *= 2
				}
				require.LessOrEqual(t, lb, got*(1+1e-9), "%s %v %s %v", tc.preset, tc.ranks, kind, bytes)
				require.GreaterOrEqual(t, lb, got-steps*r.hopS-1e-12, "%s %v %s %v", tc.preset, tc.ranks, kind, bytes)
			}
		}
	}
	// Two collectives on one ring: their bounds add.
	m, err := compile.Machine("", spec.Cluster{Preset: "dgx-a100", Nodes: 2}, spec.GPU{Preset: "a100-80gb-sxm"}, spec.Faults{}, 1)
	require.NoError(t, err)
	r, err := (&rings{t: m.Fabric.Topology()}).get([]int{0, 8})
	require.NoError(t, err)
	a, _ := r.timeS([]workload.Coll{{Kind: model.AllReduce, Bytes: 1 << 20}})
	b, _ := r.timeS([]workload.Coll{{Kind: model.AllGather, Bytes: 1 << 24}})
	ab, _ := r.timeS([]workload.Coll{{Kind: model.AllReduce, Bytes: 1 << 20}, {Kind: model.AllGather, Bytes: 1 << 24}})
	require.InEpsilon(t, a+b, ab, 1e-12)
}
