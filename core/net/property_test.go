package net

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// randomTopology draws one of several builders from r.
func randomTopology(t *testing.T, r *rand.Rand) *topo.Topology {
	l := hw.Link{Name: "x", BandwidthBytesPerS: float64(1+r.IntN(100)) * 1e9, LatencyS: float64(r.IntN(5)) * 1e-6}
	var tp *topo.Topology
	var err error
	switch r.IntN(5) {
	case 0:
		tp, err = topo.Ring(2+r.IntN(10), l)
	case 1:
		tp, err = topo.Torus([]int{2 + r.IntN(3), 2 + r.IntN(3)}, l)
	case 2:
		tp, err = topo.SingleSwitch(2+r.IntN(10), l)
	case 3:
		tp, err = topo.LeafSpineHosts(4+r.IntN(20), 4+2*r.IntN(3), float64(1+r.IntN(3)), l)
	default:
		tp, err = topo.Preset("dgx-a100", 1+r.IntN(3))
	}
	require.NoError(t, err)
	return tp
}

// recordingNet is a FlowNet keeping its records on a topology drawn from
// the seed's stream, and the stream to draw the traffic from.
func recordingNet(t *testing.T, seed uint64, stream string) (*rand.Rand, *topo.Topology, *sim.Kernel, *FlowNet, *Comms) {
	r := rng.Stream(seed, stream)
	tp := randomTopology(t, r)
	k := sim.New()
	f := NewFlowNet(k, tp)
	f.KeepRecords = true
	return r, tp, k, f, NewComms(f)
}

// TestPropertiesRandomFlows: random flows at random times on random
// topologies, some links degraded mid-run. After every instant no link is
// over capacity; time never goes back; every flow is delivered after it
// started; bytes are conserved: each link carried exactly the bytes of the
// flows routed over it (no faults that reroute here).
// Reproduce a failure with: go test ./core/net -run TestPropertiesRandomFlows/seed=N
func TestPropertiesRandomFlows(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rng.Stream(seed, "property")
			tp := randomTopology(t, r)
			k := sim.New()
			f := NewFlowNet(k, tp)
			gpus := tp.GPUs()
			want := make([]float64, len(tp.Links))
			sent, delivered := 0, 0
			last := sim.Time(0)
			f.OnDeliver(func(rec FlowRecord) {
				require.GreaterOrEqual(t, rec.Delivered, rec.TxEnd)
				require.GreaterOrEqual(t, rec.TxEnd, rec.Start)
				delivered++
			})
			// Time is checked at every event. Capacity is checked at the first
			// event of each new instant, when the previous instant's rates are
			// settled (within an instant, a capacity cut or a new flow may
			// not be applied yet).
			check := func() {
				require.GreaterOrEqual(t, k.Now(), last, "time went back")
				if k.Now() > last {
					require.NoError(t, f.CheckCapacity())
				}
				last = k.Now()
			}
			for i := 0; i < 60; i++ {
				at := sim.Time(r.IntN(2000)) * sim.Microsecond
				src, dst := gpus[r.IntN(len(gpus))], gpus[r.IntN(len(gpus))]
				bytes := float64(1 + r.IntN(1<<24))
				k.At(at, func() {
					check()
					path, err := tp.Route(src, dst)
					require.NoError(t, err)
					for _, l := range path {
						want[l] += bytes
					}
					sent++
					require.NoError(t, f.Send(src, dst, bytes, SinkFunc(func(int) { check() }), i))
				})
			}
			for j := 0; j < 3; j++ {
				l := r.IntN(len(tp.Links))
				h := 0.2 + 0.8*r.Float64()
				k.At(sim.Time(r.IntN(2000))*sim.Microsecond, func() { check(); f.SetLinkHealth(l, h) })
			}
			require.NoError(t, k.Run(context.Background()))
			require.NoError(t, f.CheckCapacity())
			require.Equal(t, sent, delivered)
			require.Zero(t, f.ActiveFlows())
			for l, st := range f.LinkStats() {
				require.InDelta(t, want[l], st.Bytes, 1e-6*math.Max(1, want[l]), "link %s", tp.LinkName(l))
				if want[l] == 0 {
					require.Zero(t, st.Busy)
				}
			}
		})
	}
}

// TestPropertiesRandomCollectives: random collectives (op, algorithm, group,
// size), several at once, with sampled faults: each completes, or the run
// ends with an error that names the problem (never silently).
func TestPropertiesRandomCollectives(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rng.Stream(seed, "collectives")
			tp := randomTopology(t, r)
			k := sim.New()
			f := NewFlowNet(k, tp)
			fs := FaultPlan{Sample: &FaultSample{LinkDegradeProbability: 0.2, DegradedHealth: 0.5,
				LinkFailureProbability: 0.05 * float64(r.IntN(2))}}
			_, err := ApplyFaults(f, fs, seed)
			require.NoError(t, err)
			c := NewComms(f)
			n := tp.NumRanks()
			started, done := 0, 0
			for j := 0; j < 1+r.IntN(3); j++ {
				op := Ops()[r.IntN(len(Ops()))]
				algs := Algorithms(op)
				alg := algs[r.IntN(len(algs))]
				size := n
				if op == SendRecv {
					size = 2
				} else if alg != HalvingDoubling && alg != Hierarchical {
					size = 1 + r.IntN(n)
				}
				if size > n {
					continue
				}
				ranks := r.Perm(n)[:size]
				if alg == Hierarchical {
					ranks = all(n)
				}
				_, err := c.Start(Collective{Op: op, Algorithm: alg, Bytes: float64(r.IntN(64 << 20)), Ranks: ranks,
					Root: r.IntN(size), Chunks: r.IntN(4), Stream: r.IntN(2) == 1}, func(Result) { done++ })
				if err != nil {
					// Only requests the algorithm cannot serve are refused.
					require.Regexp(t, "power-of-two|same number of ranks", err.Error())
					continue
				}
				started++
			}
			err = k.Run(context.Background())
			if err != nil {
				require.Regexp(t, "partitioned|no progress", err.Error())
				return
			}
			require.Equal(t, started, done)
		})
	}
}

// TestFastPathMatchesMaxMin: flows that start alone on their links skip the
// max-min recomputation, charge their links at once and are delivered by a
// single event. Random collectives (several at once, contending, with link
// health changes mid-run) must give every flow the same start, end of
// transmission and delivery as sending every flow through progressive
// filling.
func TestFastPathMatchesMaxMin(t *testing.T) {
	run := func(seed uint64, noFast bool) ([]recordKey, []LinkStat) {
		r, tp, k, f, c := recordingNet(t, seed, "fastpath")
		f.noFast = noFast
		n := tp.NumRanks()
		for j := 0; j < 1+r.IntN(3); j++ {
			op := []Op{AllReduce, AllGather, Broadcast, AllToAll}[r.IntN(4)]
			size := 1 + r.IntN(n)
			col := Collective{Op: op, Bytes: float64(1 + r.IntN(32<<20)), Ranks: r.Perm(n)[:size], Chunks: r.IntN(3), Channels: 1 + r.IntN(2),
				Stream: r.IntN(2) == 1}
			k.At(sim.Time(r.IntN(100))*sim.Microsecond, func() {
				_, err := c.Start(col, nil)
				require.NoError(t, err)
			})
		}
		l, h := r.IntN(len(tp.Links)), 0.3+0.7*r.Float64()
		k.At(sim.Time(r.IntN(500))*sim.Microsecond, func() { f.SetLinkHealth(l, h) })
		require.NoError(t, k.Run(context.Background()))
		return sortedRecords(f), f.LinkStats()
	}
	for seed := uint64(1); seed <= 40; seed++ {
		fast, fastLinks := run(seed, false)
		ref, refLinks := run(seed, true)
		require.Equal(t, ref, fast, "seed %d", seed)
		requireSameLinks(t, refLinks, fastLinks, fmt.Sprintf("seed %d", seed))
	}
}

// requireSameLinks: the same busy times and peaks, and the same bytes up to
// the rounding of summing the flows' progress in another order.
func requireSameLinks(t *testing.T, want, got []LinkStat, what string) {
	require.Len(t, got, len(want), what)
	for l := range want {
		require.InDelta(t, want[l].Bytes, got[l].Bytes, 1e-9*max(1, want[l].Bytes), "%s link %d", what, l)
		require.Equal(t, want[l].Busy, got[l].Busy, "%s link %d", what, l)
		require.Equal(t, want[l].PeakFlows, got[l].PeakFlows, "%s link %d", what, l)
	}
}

// recordKey is a delivered transfer as the equivalence tests compare them.
type recordKey struct {
	src, dst                int
	bytes                   float64
	start, txEnd, delivered sim.Time
}

// sortedRecords are f's transfers in a fixed order (start, ends, then
// endpoints), so that runs whose event order differs compare equal.
func sortedRecords(f *FlowNet) []recordKey {
	var out []recordKey
	for _, rec := range f.Records() {
		out = append(out, recordKey{rec.Src, rec.Dst, rec.Bytes, rec.Start, rec.TxEnd, rec.Delivered})
	}
	slices.SortFunc(out, func(a, b recordKey) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.src, b.src), cmp.Compare(a.dst, b.dst),
			cmp.Compare(a.delivered, b.delivered), cmp.Compare(a.bytes, b.bytes))
	})
	return out
}

// TestRefillMatchesFilling: after flows leave, settle fills again only the
// flows the last filling fixed at or above the lowest share a departed flow
// had, from each link's history, or none when none of those is still
// sending (fillRecord, refill). Random transfers and collectives at random
// times, with a link degraded mid-run, must give every flow the same start,
// end of transmission and delivery, bit for bit, as filling every component
// whole; each refill's link state must match the flows on the links; and
// refill must have run.
func TestRefillMatchesFilling(t *testing.T) {
	run := func(seed uint64, noRefill bool) ([]recordKey, []LinkStat, int) {
		r, tp, k, f, c := recordingNet(t, seed, "replay")
		f.noRefill = noRefill
		f.onRefill = func(links, flows []int32) { checkRefillState(t, f, links, flows) }
		n := tp.NumRanks()
		for j := 0; j < 1+r.IntN(3); j++ {
			op := []Op{AllReduce, AllGather, AllToAll, AllToAll}[r.IntN(4)]
			col := Collective{Op: op, Algorithm: Direct, Bytes: float64(1 + r.IntN(32<<20)), Ranks: r.Perm(n)[:2+r.IntN(n-1)]}
			k.At(sim.Time(r.IntN(100))*sim.Microsecond, func() {
				_, err := c.Start(col, nil)
				require.NoError(t, err)
			})
		}
		gpus := tp.GPUs()
		for j := 0; j < 50; j++ {
			src, dst, bytes := gpus[r.IntN(len(gpus))], gpus[r.IntN(len(gpus))], float64(1+r.IntN(8<<20))
			k.At(sim.Time(r.IntN(300))*sim.Microsecond, func() {
				require.NoError(t, f.Send(src, dst, bytes, SinkFunc(func(int) {}), 0))
			})
		}
		l, h := r.IntN(len(tp.Links)), 0.3+0.7*r.Float64()
		k.At(sim.Time(r.IntN(500))*sim.Microsecond, func() { f.SetLinkHealth(l, h) })
		require.NoError(t, k.Run(context.Background()))
		return sortedRecords(f), f.LinkStats(), f.refills
	}
	refills := 0
	for seed := uint64(1); seed <= 40; seed++ {
		got, gotLinks, n := run(seed, false)
		ref, refLinks, _ := run(seed, true)
		refills += n
		require.Equal(t, ref, got, "seed %d", seed)
		requireSameLinks(t, refLinks, gotLinks, fmt.Sprintf("seed %d", seed))
	}
	require.Positive(t, refills, "no settle took refill")
}

// checkRefillState: the links' state a refill takes from their histories
// is what the flows still on them and fixed before the cut leave: each
// link's capacity less their rates, and its other flows unfixed.
func checkRefillState(t *testing.T, f *FlowNet, links, flows []int32) {
	refilled := map[int32]bool{}
	for _, i := range flows {
		refilled[i] = true
	}
	for _, l := range links {
		ls := &f.slow[l]
		rem, unfixed := ls.capacity, int32(0)
		for _, e := range ls.entries {
			if refilled[e.flow] {
				unfixed++
			} else {
				rem -= f.flows[e.flow].rate
			}
		}
		require.Equal(t, unfixed, ls.unfixed, "link %d unfixed", l)
		require.InDelta(t, max(0, rem), ls.rem, 1e-9*ls.capacity, "link %d capacity left", l)
	}
}
