package net

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

const (
	bw    = 100e9 // B/s per direction
	alpha = 2e-6  // s per hop
)

var testLink = hw.Link{Name: "test", BandwidthBytesPerS: bw, LatencyS: alpha}

func all(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

// runOne runs a single collective to completion and returns its duration.
func runOne(t *testing.T, f Fabric, col Collective) float64 {
	t.Helper()
	c := NewComms(f)
	var res *Result
	_, err := c.Start(col, func(r Result) { res = &r })
	require.NoError(t, err)
	require.NoError(t, f.Kernel().Run(context.Background()))
	require.NotNil(t, res, "collective did not complete")
	return (res.End - res.Start).Seconds()
}

func TestRingAllReduceClosedForm(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8, 16} {
		for _, S := range []float64{1 << 10, 1 << 20, 1 << 30} {
			tp, err := topo.Ring(n, testLink)
			require.NoError(t, err)
			got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Algorithm: Ring, Bytes: S, Ranks: all(n)})
			// 2(n−1) steps; in each, every rank sends S/n bytes to its
			// neighbour over its own link (no sharing: one flow per
			// directed link) at B, then waits α for the last byte to arrive:
			// T = 2(n−1)·(S/(nB) + α) = 2(n−1)/n·S/B + 2(n−1)·α.
			want := 2*float64(n-1)/float64(n)*S/bw + 2*float64(n-1)*alpha
			require.InEpsilon(t, want, got, 0.01, "n=%d S=%v", n, S)
		}
	}
}

func TestRingAllGatherAndReduceScatterClosedForm(t *testing.T) {
	n, S := 8, float64(1<<30)
	for _, op := range []Op{AllGather, ReduceScatter} {
		tp, _ := topo.Ring(n, testLink)
		got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: op, Bytes: S, Ranks: all(n)})
		// n−1 steps of S/n bytes each: (n−1)/n·S/B + (n−1)·α.
		want := float64(n-1)/float64(n)*S/bw + float64(n-1)*alpha
		require.InEpsilon(t, want, got, 0.01, "%s", op)
	}
}

func TestTwoFlowsOnOneLinkGetHalfEach(t *testing.T) {
	// gpu0 - switch - gpu2 and gpu1 - switch - gpu2: both flows cross the
	// switch->gpu2 link of bandwidth B, so each gets B/2 and S bytes take
	// 2S/B; a lone flow takes S/B.
	tp, _ := topo.SingleSwitch(3, hw.Link{Name: "x", BandwidthBytesPerS: bw})
	k := sim.New()
	f := NewFlowNet(k, tp)
	S := 1e9
	var ends []sim.Time
	sink := SinkFunc(func(int) { ends = append(ends, k.Now()) })
	require.NoError(t, f.Send(0, 2, S, sink, 0))
	require.NoError(t, f.Send(1, 2, S, sink, 1))
	k.Settle(func() { require.NoError(t, f.CheckCapacity()) })
	require.NoError(t, k.Run(context.Background()))
	require.Len(t, ends, 2)
	require.InEpsilon(t, 2*S/bw, ends[0].Seconds(), 1e-9)
	require.Equal(t, ends[0], ends[1])
	st := f.LinkStats()
	down, _ := tp.LinkBetween(3, 2)
	require.Equal(t, 2, st[down].PeakFlows)
	require.InEpsilon(t, 2*S, st[down].Bytes, 1e-9)
}

func TestTextbookMaxMin(t *testing.T) {
	// Bertsekas & Gallager's example: a line a-b-c with links L1 = a->b
	// (capacity 1) and L2 = b->c (capacity 2). Flow A uses L1 and L2, B uses
	// L1, C and D use L2. L1 is the bottleneck first: share 1/2 for A and B.
	// Then L2 has 2 − 1/2 = 1.5 left for C and D: 0.75 each.
	tp, err := topo.EdgeList(3, 0, []topo.Edge{
		{A: 0, B: 1, BandwidthBytesPerS: 1, Directed: true},
		{A: 1, B: 2, BandwidthBytesPerS: 2, Directed: true},
	})
	require.NoError(t, err)
	k := sim.New()
	f := NewFlowNet(k, tp)
	nop := SinkFunc(func(int) {})
	require.NoError(t, f.Send(0, 2, 1e12, nop, 0)) // A
	require.NoError(t, f.Send(0, 1, 1e12, nop, 1)) // B
	require.NoError(t, f.Send(1, 2, 1e12, nop, 2)) // C
	require.NoError(t, f.Send(1, 2, 1e12, nop, 3)) // D
	k.Settle(func() {
		got := []float64{f.flows[0].rate, f.flows[1].rate, f.flows[2].rate, f.flows[3].rate}
		require.InDeltaSlice(t, []float64{0.5, 0.5, 0.75, 0.75}, got, 1e-12)
		k.Fail(context.Canceled)
	})
	require.ErrorIs(t, k.Run(context.Background()), context.Canceled)
}

func TestEveryAlgorithmCompletes(t *testing.T) {
	tp, err := topo.Preset("dgx-h100", 2)
	require.NoError(t, err)
	for _, op := range Ops() {
		for _, alg := range Algorithms(op) {
			ranks := all(16)
			if op == SendRecv {
				ranks = []int{0, 9}
			}
			got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: op, Algorithm: alg, Bytes: 64 << 20, Ranks: ranks})
			require.Greater(t, got, 0.0, "%s %s", op, alg)
		}
	}
}
