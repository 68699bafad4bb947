package net

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// TestRingStreamClosedForm: a streamed ring takes the same closed form as
// the stepped one: all-reduce 2(n−1)/n·S/B + 2(n−1)·α (one stream carrying
// 2(n−1)·S/n bytes over every hop at B, its bytes crossing 2(n−1) hops of
// latency α), all-gather and reduce-scatter (n−1)/n·S/B + (n−1)·α. The two
// granularities agree to rounding.
func TestRingStreamClosedForm(t *testing.T) {
	for _, n := range []int{2, 3, 8, 16} {
		for _, S := range []float64{1 << 10, 1 << 30} {
			for _, op := range []Op{AllReduce, AllGather, ReduceScatter} {
				tp, err := topo.Ring(n, testLink)
				require.NoError(t, err)
				steps := float64(n - 1)
				if op == AllReduce {
					steps *= 2
				}
				want := steps/float64(n)*S/bw + steps*alpha
				col := Collective{Op: op, Algorithm: Ring, Bytes: S, Ranks: all(n)}
				stepped := runOne(t, NewFlowNet(sim.New(), tp), col)
				col.Stream = true
				streamed := runOne(t, NewFlowNet(sim.New(), tp), col)
				require.InEpsilon(t, want, streamed, 0.01, "%s n=%d S=%v", op, n, S)
				require.InEpsilon(t, stepped, streamed, 1e-6, "%s n=%d S=%v", op, n, S)
				unaware := runOne(t, NewUnaware(sim.New(), tp), col)
				require.InEpsilon(t, streamed, unaware, 1e-9, "%s n=%d S=%v: alone, unaware = flow", op, n, S)
			}
		}
	}
}

// TestRingStreamsShareLinks: two rings over the same GPUs at once share
// every hop, so each streams at B/2 and the all-reduce's bandwidth term
// doubles: 2·2(n−1)/n·S/B + 2(n−1)·α, as with stepped rings.
func TestRingStreamsShareLinks(t *testing.T) {
	n, S := 8, float64(1<<30)
	tp, _ := topo.Ring(n, testLink)
	for _, stream := range []bool{false, true} {
		k := sim.New()
		f := NewFlowNet(k, tp)
		c := NewComms(f)
		var ends []float64
		for range 2 {
			_, err := c.Start(Collective{Op: AllReduce, Bytes: S, Ranks: all(n), Stream: stream}, func(r Result) {
				ends = append(ends, (r.End - r.Start).Seconds())
			})
			require.NoError(t, err)
		}
		k.Settle(func() { require.NoError(t, f.CheckCapacity()) })
		require.NoError(t, k.Run(context.Background()))
		want := 2*2*float64(n-1)/float64(n)*S/bw + 2*float64(n-1)*alpha
		require.Len(t, ends, 2)
		for _, e := range ends {
			require.InEpsilon(t, want, e, 0.01, "stream=%v", stream)
		}
	}
}

// TestRingStreamCrossingALinkTwice: GPUs 0, 1 on switch A and 2, 3 on
// switch B, one A–B cable; the ring 0→2→1→3→0 crosses A→B with hops 0→2
// and 1→3 and B→A with 2→1 and 3→0, so each direction carries the stream
// twice and it moves at B/2: an all-gather of S takes 3/4·S/(B/2), as the
// stepped ring (two flows per step on the cable) does.
func TestRingStreamCrossingALinkTwice(t *testing.T) {
	var edges []topo.Edge
	for g, sw := range []int{4, 4, 5, 5} {
		edges = append(edges, topo.Edge{A: g, B: sw, BandwidthBytesPerS: 4 * bw})
	}
	edges = append(edges, topo.Edge{A: 4, B: 5, BandwidthBytesPerS: bw})
	tp, err := topo.EdgeList(4, 2, edges)
	require.NoError(t, err)
	S := float64(1 << 30)
	col := Collective{Op: AllGather, Bytes: S, Ranks: []int{0, 2, 1, 3}}
	stepped := runOne(t, NewFlowNet(sim.New(), tp), col)
	col.Stream = true
	k := sim.New()
	f := NewFlowNet(k, tp)
	streamed := runOne(t, f, col)
	want := 0.75 * S / (bw / 2)
	require.InEpsilon(t, want, streamed, 1e-6)
	require.InEpsilon(t, stepped, streamed, 1e-6)
	ab, _ := tp.LinkBetween(4, 5)
	require.InEpsilon(t, 2*0.75*S, f.LinkStats()[ab].Bytes, 1e-9, "the cable carries the stream's bytes twice")
	require.InEpsilon(t, want, runOne(t, NewUnaware(sim.New(), tp), col), 1e-6, "unaware: the shared cable still halves a lone stream")
}

// TestRingStreamReroutesAroundAFailure: a streamed ring all-gather over a
// 4-GPU ring topology (0→1→2→3→0) whose link gpu0→gpu1 fails half-way:
// the stream's hop 0→1 goes the long way round, 0→3→2→1, over links of the
// reverse direction, which the ring leaves idle; so the stream keeps its
// rate and only its latency grows.
func TestRingStreamReroutesAroundAFailure(t *testing.T) {
	tp, _ := topo.Ring(4, testLink)
	col := Collective{Op: AllGather, Bytes: 1 << 30, Ranks: all(4), Stream: true}
	healthy := runOne(t, NewFlowNet(sim.New(), tp), col)
	tp2, _ := topo.Ring(4, testLink)
	k := sim.New()
	f := NewFlowNet(k, tp2)
	_, err := ApplyFaults(f, FaultPlan{Links: []LinkFault{{Link: linkBetween(t, f.Topology(), "gpu0", "gpu1"), Health: 0, AtS: healthy / 2}}}, 0)
	require.NoError(t, err)
	var rec FlowRecord
	f.OnDeliver(func(r FlowRecord) { rec = r })
	got := runOne(t, f, col)
	require.Equal(t, 3+3, rec.Hops, "hop 0→1 rerouted over three links, the other three hops one each")
	require.GreaterOrEqual(t, got, healthy)
	require.InEpsilon(t, healthy, got, 0.01, "the reverse links are idle: only latency is added")
}

// TestStreamKeepsStepsWhereItMust: quantized payloads and non-ring
// algorithms run by steps even when Stream is set (their per-step kernels
// and messages are the model); a one-rank ring completes as an event.
func TestStreamKeepsStepsWhereItMust(t *testing.T) {
	tp, err := topo.Preset("dgx-h100", 2)
	require.NoError(t, err)
	q := &Quantization{ElemBytes: 2, WireElemBytes: 1, BlockElems: 128, ScaleBytes: 4}
	for _, col := range []Collective{
		{Op: AllReduce, Algorithm: Tree, Bytes: 64 << 20, Ranks: all(16), Stream: true},
		{Op: AllReduce, Bytes: 64 << 20, Ranks: all(16), Stream: true, Quant: q},
	} {
		k := sim.New()
		c := NewComms(NewFlowNet(k, tp))
		var res Result
		_, err := c.Start(col, func(r Result) { res = r })
		require.NoError(t, err)
		require.NoError(t, k.Run(context.Background()))
		require.Greater(t, res.Flows, 16, "%s: per-step flows", col.Algorithm)
	}
	got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Bytes: 1 << 20, Ranks: []int{3}, Stream: true})
	require.Zero(t, got)
}

// TestHierarchicalStreamsMatchSteps: on two DGX-H100 nodes the streamed
// hierarchical all-reduce and the default (channels per rail) ring agree
// with their stepped runs within 2%: streams run each phase at its
// bottleneck where steps pay each step's slowest hop.
func TestHierarchicalStreamsMatchSteps(t *testing.T) {
	tp, err := topo.Preset("dgx-h100", 2)
	require.NoError(t, err)
	for _, alg := range []Algorithm{Ring, Hierarchical} {
		col := Collective{Op: AllReduce, Algorithm: alg, Bytes: 1 << 30, Ranks: all(16)}
		stepped := runOne(t, NewFlowNet(sim.New(), tp), col)
		col.Stream = true
		streamed := runOne(t, NewFlowNet(sim.New(), tp), col)
		require.InEpsilon(t, stepped, streamed, 0.02, "%s", alg)
	}
}
