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
	require.NoError(t, f.Send(0, 2, 1e6, nop, 0)) // A
	require.NoError(t, f.Send(0, 1, 1e6, nop, 1)) // B
	require.NoError(t, f.Send(1, 2, 1e6, nop, 2)) // C
	require.NoError(t, f.Send(1, 2, 1e6, nop, 3)) // D
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

func TestSwitchClosedForms(t *testing.T) {
	n, S := 8, float64(1<<30)
	sw := func() Fabric {
		tp, _ := topo.SingleSwitch(n, testLink) // GPU->switch->GPU: 2 links of α/2 each
		return NewFlowNet(sim.New(), tp)
	}
	fn := float64(n)
	cases := []struct {
		col  Collective
		want float64
	}{
		// Halving-doubling: log2(n) steps each way; step k moves
		// S/2^(k+1) between partners, one flow per port each way:
		// 2·(S/2 + S/4 + ... + S/n)/B + 2·log2(n)·α = 2(n−1)/n·S/B + 2·3·α.
		{Collective{Op: AllReduce, Algorithm: HalvingDoubling}, 2*(fn-1)/fn*S/bw + 6*alpha},
		// Direct: each rank's uplink carries n−1 flows of S/n at once
		// (B/(n−1) each), twice: 2(n−1)/n·S/B + 2α.
		{Collective{Op: AllReduce, Algorithm: Direct}, 2*(fn-1)/fn*S/bw + 2*alpha},
		// One-shot: each rank's uplink carries its whole buffer to each of
		// the n−1 others at once, one phase: (n−1)·S/B + α.
		{Collective{Op: AllReduce, Algorithm: OneShot}, (fn-1)*S/bw + alpha},
		// All-to-all: one direct phase: (n−1)/n·S/B + α.
		{Collective{Op: AllToAll}, (fn-1)/fn*S/bw + alpha},
		// Ring on a switch is the ring formula (one flow per port).
		{Collective{Op: AllReduce, Algorithm: Ring}, 2*(fn-1)/fn*S/bw + 2*(fn-1)*alpha},
		// Send/recv: S/B + α.
		{Collective{Op: SendRecv, Ranks: []int{2, 5}}, S/bw + alpha},
	}
	for _, c := range cases {
		if c.col.Ranks == nil {
			c.col.Ranks = all(n)
		}
		c.col.Bytes = S
		got := runOne(t, sw(), c.col)
		require.InEpsilon(t, c.want, got, 0.01, "%s %s", c.col.Op, c.col.Algorithm)
	}
}

func TestPipelinedBroadcastChain(t *testing.T) {
	// A chain of n over a switch with C chunks: the last chunk leaves the
	// root after C·(S/C)/B and needs n−2 more forwards of (S/C)/B + α:
	// T = (C + n − 2)·(S/C/B + α) + α·... bounded by S/B·(1 + (n−2)/C) + (C+n)·α.
	n, C, S := 8, 32, float64(1<<30)
	tp, _ := topo.SingleSwitch(n, testLink)
	got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: Broadcast, Algorithm: Ring, Bytes: S, Ranks: all(n), Chunks: C})
	want := float64(C+n-2) * (S/float64(C)/bw + alpha)
	require.InEpsilon(t, want, got, 0.02)
	require.Less(t, got, 1.25*S/bw, "pipelining hides most of the chain")
}

func TestDefaultPipelineCutsFixedPieces(t *testing.T) {
	// By default a chain moves pieces of one MiB, the last carrying the
	// rest: 2.5 MiB is two full pieces and a half one. The chain's first
	// piece crosses n−1 hops, the later ones follow one piece-time apart:
	// T = (n−2)·(M/B + α) + S/B + 3α.
	n, mib := 8, float64(1<<20)
	tp, _ := topo.SingleSwitch(n, testLink)
	got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: Broadcast, Algorithm: Ring, Bytes: 2.5 * mib, Ranks: all(n)})
	want := float64(n-2)*(mib/bw+alpha) + 2.5*mib/bw + 3*alpha
	require.InEpsilon(t, want, got, 0.02)

	// More data never takes less time, across the pieces' boundaries
	// (before, 1.5 MiB went as one unpipelined piece and took longer than 2).
	for _, op := range []Op{Broadcast, Reduce} {
		for _, alg := range []Algorithm{Ring, Tree} {
			prev := 0.0
			for s := 0.25 * mib; s <= 80*mib; s *= 1.25 {
				got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: op, Algorithm: alg, Bytes: s, Ranks: all(n)})
				require.GreaterOrEqual(t, got, prev*(1-1e-9), "%s %s at %.0f bytes", op, alg, s)
				prev = got
			}
		}
	}
}

func TestConcurrentCollectivesContend(t *testing.T) { // Two identical ring all-reduces on one ring share every link: the
	// bandwidth term doubles, the latency term does not.
	n, S := 8, float64(1<<30)
	tp, _ := topo.Ring(n, testLink)
	k := sim.New()
	c := NewComms(NewFlowNet(k, tp))
	var ends []sim.Time
	for i := 0; i < 2; i++ {
		_, err := c.Start(Collective{Op: AllReduce, Bytes: S, Ranks: all(n)}, func(r Result) { ends = append(ends, r.End) })
		require.NoError(t, err)
	}
	require.NoError(t, k.Run(context.Background()))
	require.Len(t, ends, 2)
	fn := float64(n)
	want := 2*(2*(fn-1)/fn*S/bw) + 2*(fn-1)*alpha
	require.InEpsilon(t, want, ends[1].Seconds(), 0.01)
}

func TestQuantizedPayload(t *testing.T) {
	// bf16 → int8 with an fp32 scale per 128 elements: wire = S/2·(1 + 4/128)
	// bytes instead of S, so the bandwidth term shrinks by that ratio; the
	// kernel callback adds its time before each send and after each receive.
	n, S := 4, float64(1<<30)
	q := &Quantization{ElemBytes: 2, WireElemBytes: 1, BlockElems: 128, ScaleBytes: 4}
	require.InEpsilon(t, S/2*(1+4.0/128), q.WireBytes(S), 1e-9)
	tp, _ := topo.Ring(n, testLink)
	plain := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Bytes: S, Ranks: all(n)})
	quant := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Bytes: S, Ranks: all(n), Quant: q})
	lat := 2 * float64(n-1) * alpha
	require.InEpsilon(t, (plain-lat)*q.WireBytes(S)/S, quant-lat, 0.01)
	calls := 0
	q.KernelTime = func(dev int, elems float64) sim.Time { calls++; return sim.Microsecond }
	withKernel := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Bytes: S, Ranks: all(n), Quant: q})
	// 2(n−1) steps, each one quantize + one dequantize on the critical path.
	require.InEpsilon(t, quant+2*float64(n-1)*2e-6, withKernel, 0.01)
	require.Equal(t, 2*2*(n-1)*n, calls)
}

func TestUnawareIgnoresContention(t *testing.T) {
	tp, _ := topo.SingleSwitch(3, hw.Link{Name: "x", BandwidthBytesPerS: bw})
	k := sim.New()
	u := NewUnaware(k, tp)
	var ends []sim.Time
	for src := 0; src < 2; src++ {
		require.NoError(t, u.Send(src, 2, 1e9, SinkFunc(func(int) { ends = append(ends, k.Now()) }), 0))
	}
	require.NoError(t, k.Run(context.Background()))
	// Each alone: S/B, although both cross switch->gpu2 (FlowNet: 2S/B).
	require.InEpsilon(t, 1e9/bw, ends[1].Seconds(), 1e-9)
	down, _ := tp.LinkBetween(3, 2)
	require.Equal(t, 2e9, u.LinkStats()[down].Bytes)
}

func TestTimeVaryingLinkFault(t *testing.T) {
	// One flow of S = 1 GB at B over one link; the link runs at half health
	// for 2 ms from t = 1 ms: in [0,1 ms) 0.1 GB moves, in [1,3 ms) 0.1 GB,
	// the last 0.8 GB at full rate takes 8 ms: done at 11 ms (+α).
	tp, _ := topo.Ring(2, testLink)
	k := sim.New()
	f := NewFlowNet(k, tp)
	_, err := ApplyFaults(f, FaultPlan{Links: []LinkFault{{Link: linkBetween(t, f.Topology(), "gpu0", "gpu1"), Health: 0.5, AtS: 1e-3, UntilS: 3e-3}}}, 0)
	require.NoError(t, err)
	var end sim.Time
	require.NoError(t, f.Send(0, 1, 1e9, SinkFunc(func(int) { end = k.Now() }), 0))
	require.NoError(t, k.Run(context.Background()))
	require.InEpsilon(t, 11e-3+alpha, end.Seconds(), 1e-6)
}

func TestFailedLinkMidFlowReroutes(t *testing.T) {
	// Ring of 4: gpu0->gpu1 direct; it fails at 1 ms, the rest goes the long
	// way (3 hops, 3α) at the same bandwidth.
	tp, _ := topo.Ring(4, testLink)
	k := sim.New()
	f := NewFlowNet(k, tp)
	_, err := ApplyFaults(f, FaultPlan{Links: []LinkFault{{Link: linkBetween(t, f.Topology(), "gpu0", "gpu1"), Health: 0, AtS: 1e-3}}}, 0)
	require.NoError(t, err)
	var rec FlowRecord
	f.OnDeliver(func(r FlowRecord) { rec = r })
	require.NoError(t, f.Send(0, 1, 1e9, SinkFunc(func(int) {}), 0))
	require.NoError(t, k.Run(context.Background()))
	require.Equal(t, 3, rec.Hops)
	require.InEpsilon(t, 1e9/bw+3*alpha, rec.Delivered.Seconds(), 1e-6)
}

func TestDeliveryHookGivesArrivalsAtOneDevice(t *testing.T) {
	// What Eidola needs: every chunk arriving at device 3 during a ring
	// all-gather over 8 GPUs: n−1 arrivals, increasing, one per step.
	tp, _ := topo.Ring(8, testLink)
	k := sim.New()
	f := NewFlowNet(k, tp)
	var at []sim.Time
	f.OnDeliver(func(r FlowRecord) {
		if r.Dst == 3 {
			require.Equal(t, 2, r.Src)
			at = append(at, r.Delivered)
		}
	})
	c := NewComms(f)
	_, err := c.Start(Collective{Op: AllGather, Bytes: 8e6, Ranks: all(8)}, nil)
	require.NoError(t, err)
	require.NoError(t, k.Run(context.Background()))
	require.Len(t, at, 7)
	step := 1e6/bw + alpha
	for i, a := range at {
		require.InEpsilon(t, float64(i+1)*step, a.Seconds(), 1e-6)
	}
}

func TestInvalidRequests(t *testing.T) {
	tp, _ := topo.Ring(6, testLink)
	c := NewComms(NewFlowNet(sim.New(), tp))
	for _, bad := range []Collective{
		{Op: "gather", Ranks: all(6)},
		{Op: AllReduce, Algorithm: "magic", Ranks: all(6)},
		{Op: AllReduce, Algorithm: HalvingDoubling, Ranks: all(6)},
		{Op: AllGather, Ranks: []int{0, 9}},
		{Op: AllGather, Ranks: []int{1, 1}},
		{Op: SendRecv, Ranks: all(3)},
	} {
		_, err := c.Start(bad, nil)
		require.Error(t, err, "%+v", bad)
	}
}

// lossy drops one transfer, to show a stalled collective is reported with
// the ranks that wait, not silently ended.
type lossy struct {
	*FlowNet
	dropped bool
}

func (l *lossy) Send(src, dst int, bytes float64, sink Sink, tag int) error {
	if !l.dropped && src == 2 {
		l.dropped = true
		return nil
	}
	return l.FlowNet.Send(src, dst, bytes, sink, tag)
}

func TestStalledCollectiveNamesBlockedRanks(t *testing.T) {
	tp, _ := topo.Ring(4, testLink)
	k := sim.New()
	c := NewComms(&lossy{FlowNet: NewFlowNet(k, tp)})
	_, err := c.Start(Collective{Op: AllReduce, Bytes: 1e6, Ranks: all(4)}, nil)
	require.NoError(t, err)
	err = k.Run(context.Background())
	require.ErrorIs(t, err, sim.ErrStalled)
	// Rank 3 never hears from rank 2 at step 0, so it cannot send step 1 to
	// rank 0, which then cannot send step 2, and so on round the ring.
	require.Contains(t, err.Error(), "collective 0 (all_reduce ring): rank 0 (instance 0) at step 2 waits for 1 message(s), has 0")
	require.Contains(t, err.Error(), "1 more blocked ranks")
}

func TestOneRankCollectiveCompletesAsAnEvent(t *testing.T) {
	tp, _ := topo.Ring(4, testLink)
	k := sim.New()
	c := NewComms(NewFlowNet(k, tp))
	called := false
	_, err := c.Start(Collective{Op: AllReduce, Bytes: 1e6, Ranks: []int{2}}, func(r Result) {
		called = true
		require.Equal(t, r.Start, r.End)
	})
	require.NoError(t, err)
	require.False(t, called, "not from inside Start")
	require.NoError(t, k.Run(context.Background()))
	require.True(t, called)
}

func TestLateJoinerSharesWithARunningFlow(t *testing.T) {
	// A: gpu0 -> gpu2 (S = 1 GB at B = 100 GB/s) from t = 0, alone until
	// B: gpu1 -> gpu2 (1 GB) joins at t1 = 4 ms on switch->gpu2. By t1 A has
	// sent 0.4 GB; then both get B/2: A ends at 4 + 0.6/50 s = 16 ms. B has
	// 0.4 GB left then and runs alone: ends at 16 + 4 = 20 ms. Each is
	// delivered one path latency (2·α/2 = α) after its last byte.
	tp, _ := topo.SingleSwitch(3, testLink)
	k := sim.New()
	f := NewFlowNet(k, tp)
	ends := map[int]sim.Time{}
	sink := SinkFunc(func(tag int) { ends[tag] = k.Now() })
	require.NoError(t, f.Send(0, 2, 1e9, sink, 0))
	k.At(4*sim.Millisecond, func() { require.NoError(t, f.Send(1, 2, 1e9, sink, 1)) })
	require.NoError(t, k.Run(context.Background()))
	require.InEpsilon(t, 16e-3+alpha, ends[0].Seconds(), 1e-9)
	require.InEpsilon(t, 20e-3+alpha, ends[1].Seconds(), 1e-9)
	st := f.LinkStats()
	down, _ := tp.LinkBetween(3, 2)
	up0, _ := tp.LinkBetween(0, 3)
	require.InEpsilon(t, 2e9, st[down].Bytes, 1e-9)
	require.InEpsilon(t, 1e9, st[up0].Bytes, 1e-9)
	require.InEpsilon(t, 20e-3, st[down].Busy.Seconds(), 1e-9)
	require.InEpsilon(t, 16e-3, st[up0].Busy.Seconds(), 1e-9)
	require.Equal(t, 2, st[down].PeakFlows)
}

func TestDefaultChannelsOneRingPerRail(t *testing.T) {
	tp, err := topo.Preset("dgx-h100", 2)
	require.NoError(t, err)
	// Inside one node: one ring. Across nodes: one per rail the group's GPUs
	// on each node reach (min of NICs and GPUs there, on the poorest node).
	require.Equal(t, 1, DefaultChannels(tp, all(8)))
	require.Equal(t, 8, DefaultChannels(tp, all(16)))
	require.Equal(t, 1, DefaultChannels(tp, []int{0, 8}))
	require.Equal(t, 4, DefaultChannels(tp, []int{0, 1, 2, 3, 8, 9, 10, 11}))
	require.Equal(t, 2, DefaultChannels(tp, []int{0, 1, 8, 9, 10, 11}))
	ring, err := topo.Ring(4, testLink)
	require.NoError(t, err)
	require.Equal(t, 1, DefaultChannels(ring, all(4)))

	// 1 GiB ring all-reduce over both nodes with the default: 8 channels,
	// each a ring of n = 16 ranks carrying S/8. Each channel leaves a node
	// on its own rail (gpu → nic 63 GB/s, nic → leaf → nic 50 GB/s, nic →
	// gpu; latencies 0.75 + 0.5 + 0.5 + 0.75 µs = 2.5 µs) and its in-node
	// hops share each GPU's 450 GB/s NVLink among ≤ 8 channels (≥ 56 GB/s),
	// so the NIC's B = 50 GB/s paces every step and the slow hop's α = 2.5 µs
	// adds to it: T = 2(n−1)·(S/(8n)/B + α).
	const S, n, B, alpha = float64(1 << 30), 16, 50e9, 2.5e-6
	got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Bytes: S, Ranks: all(n)})
	want := 2 * (n - 1) * (S/(8*n)/B + alpha)
	require.InEpsilon(t, want, got, 0.01)
	// That is ≈ 8 NICs' worth of bus bandwidth; one channel gets one NIC's.
	one := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Bytes: S, Ranks: all(n), Channels: 1})
	require.InEpsilon(t, B, S/one*BusBandwidthFactor(AllReduce, n), 0.01)
	require.Greater(t, S/got*BusBandwidthFactor(AllReduce, n), 7.5*B)
}

// The channels' rings leave every node on one rail whatever order the
// communicator lists a node's GPUs in: listed rail-aligned (every other
// node backwards, as the collective kind's default group is), reversed
// again they crossed between nodes on different rails, through the spine,
// whose uplinks two channels then shared: a 1 GiB all-reduce over 4 DGX
// A100 nodes ran at half the bus bandwidth of the ascending order. The
// hierarchical all-reduce pairs GPUs across nodes by their place on the
// node, also whatever the order (it ran 36 % slower rail-aligned).
func TestChannelRingsKeepTheirRailInAnyOrder(t *testing.T) {
	tp, err := topo.Preset("dgx-a100", 4)
	require.NoError(t, err)
	var railAligned []int
	for n := range 4 {
		for j := range 8 {
			if n%2 == 1 {
				j = 7 - j
			}
			railAligned = append(railAligned, 8*n+j)
		}
	}
	const S = float64(1 << 30)
	for _, col := range []Collective{
		{Op: AllReduce, Bytes: S, Stream: true},
		{Op: AllReduce, Algorithm: Hierarchical, Bytes: S},
	} {
		col.Ranks = all(32)
		ascending := runOne(t, NewFlowNet(sim.New(), tp), col)
		col.Ranks = railAligned
		aligned := runOne(t, NewFlowNet(sim.New(), tp), col)
		require.InEpsilon(t, ascending, aligned, 1e-9, col.Algorithm)
	}
	orders := (&Comms{t: tp}).channelOrders(railAligned, 8)
	for _, ch := range []int{0, 3, 7} {
		order := orders[ch]
		for i := range order {
			a, b := railAligned[order[i]], railAligned[order[(i+1)%len(order)]]
			if a/8 != b/8 {
				require.Equal(t, a%8, b%8, "channel %d: %d -> %d leaves its rail", ch, a, b)
			}
		}
	}
}

// A ring broadcast or reduce across nodes splits its data over the
// channels' chains, as NCCL's does, each leaving a node through a NIC of
// its own: over 2 DGX H100 nodes 1 GiB moves at nearly 8 NICs' rate, where
// one chain (all a broadcast had before) crosses through one.
func TestChainChannelsUseEveryNIC(t *testing.T) {
	tp, err := topo.Preset("dgx-h100", 2)
	require.NoError(t, err)
	const S, nic = float64(1 << 30), 50e9
	for _, op := range []Op{Broadcast, Reduce} {
		col := Collective{Op: op, Algorithm: Ring, Bytes: S, Ranks: all(16), Root: 3}
		eight := runOne(t, NewFlowNet(sim.New(), tp), col)
		col.Channels = 1
		one := runOne(t, NewFlowNet(sim.New(), tp), col)
		require.InEpsilon(t, nic, S/one, 0.05, op)
		require.Greater(t, S/eight, 6*nic, op)
		require.Less(t, S/eight, 8*nic, op)
	}
}

// linkBetween is the id of the link from device a to device b, by name.
func linkBetween(t *testing.T, tp *topo.Topology, a, b string) int {
	da, ok := tp.DeviceByName(a)
	require.True(t, ok, a)
	db, ok := tp.DeviceByName(b)
	require.True(t, ok, b)
	l, ok := tp.LinkBetween(da, db)
	require.True(t, ok, "%s -> %s", a, b)
	return l
}
