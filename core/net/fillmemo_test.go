package net

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/stretchr/testify/require"
)

// TestFillMemoMatchesFill: the memo gives a component the rates fill
// computed for the same paths before, which must be fill's rates bit for
// bit. Random collectives (ring streams and steps, contending) repeat a few
// times with a link's health changed midway; memoizing every component
// must give every flow the same start, end of transmission and delivery,
// and every link the same counters, as never memoizing, and the memo must
// have answered.
func TestFillMemoMatchesFill(t *testing.T) {
	hits := 0
	run := func(seed uint64, least int) ([]recordKey, []LinkStat) {
		r, tp, k, f, c := recordingNet(t, seed, "fillmemo")
		f.memoMinLinks = least
		n := tp.NumRanks()
		var cols []Collective
		for j := 0; j < 2+r.IntN(3); j++ {
			op := []Op{AllReduce, AllGather, ReduceScatter, AllToAll}[r.IntN(4)]
			size := 2 + r.IntN(n-1)
			cols = append(cols, Collective{Op: op, Bytes: float64(1 + r.IntN(8<<20)), Ranks: r.Perm(n)[:size], Channels: 1 + r.IntN(2),
				Stream: r.IntN(3) > 0})
		}
		// Each collective repeats at the same offsets, so the same
		// compositions recur.
		for rep := 0; rep < 4; rep++ {
			for j, col := range cols {
				at := sim.Time(rep*2000+j*r.IntN(50)) * sim.Microsecond
				k.At(at, func() {
					_, err := c.Start(col, nil)
					require.NoError(t, err)
				})
			}
		}
		l, h := r.IntN(len(tp.Links)), 0.3+0.7*r.Float64()
		k.At(sim.Time(3000+r.IntN(2000))*sim.Microsecond, func() { f.SetLinkHealth(l, h) })
		require.NoError(t, k.Run(context.Background()))
		if least > 0 {
			hits += f.memo.hits
		}
		return sortedRecords(f), f.LinkStats()
	}
	for seed := uint64(1); seed <= 40; seed++ {
		memo, memoLinks := run(seed, 1)
		ref, refLinks := run(seed, -1)
		require.Equal(t, ref, memo, "seed %d", seed)
		require.Equal(t, refLinks, memoLinks, "seed %d", seed)
	}
	require.Greater(t, hits, 100, "the memo answered")
}

// TestComponentSearch: settle's search (which skips the entries of a link
// that carries only the flow whose path reached it) finds, in the same
// order, the links and flows of a plain breadth-first search over every
// link's entries, on random contending collectives.
func TestComponentSearch(t *testing.T) {
	checked := 0
	for seed := uint64(1); seed <= 30; seed++ {
		r := rng.Stream(seed, "component")
		tp := randomTopology(t, r)
		k := sim.New()
		f := NewFlowNet(k, tp)
		f.onComponent = func(dirty, links, flows []int32) {
			seen := map[int32]bool{}
			got := map[int32]bool{}
			wantLinks, wantFlows := []int32{}, []int32{}
			for _, l := range dirty {
				if !seen[l] {
					seen[l] = true
					wantLinks = append(wantLinks, l)
				}
			}
			for h := 0; h < len(wantLinks); h++ {
				for _, e := range f.slow[wantLinks[h]].entries {
					if got[e.flow] {
						continue
					}
					got[e.flow] = true
					wantFlows = append(wantFlows, e.flow)
					for _, l2 := range f.flows[e.flow].path {
						if !seen[l2] {
							seen[l2] = true
							wantLinks = append(wantLinks, l2)
						}
					}
				}
			}
			require.Equal(t, wantLinks, append([]int32{}, links...), "seed %d", seed)
			require.Equal(t, wantFlows, append([]int32{}, flows...), "seed %d", seed)
			if len(flows) > 1 {
				checked++
			}
		}
		c := NewComms(f)
		n := tp.NumRanks()
		for j := 0; j < 2+r.IntN(4); j++ {
			op := []Op{AllReduce, AllGather, AllToAll}[r.IntN(3)]
			col := Collective{Op: op, Bytes: float64(1 + r.IntN(8<<20)), Ranks: r.Perm(n)[:2+r.IntN(n-1)], Channels: 1 + r.IntN(2),
				Stream: r.IntN(2) == 0}
			k.At(sim.Time(r.IntN(100))*sim.Microsecond, func() {
				_, err := c.Start(col, nil)
				require.NoError(t, err)
			})
		}
		require.NoError(t, k.Run(context.Background()))
	}
	require.Greater(t, checked, 50)
}

// TestPathIDByEnds: a point-to-point flow's path id (pathID) is the one
// the memo's map gives its path, however its flow slot was used before and
// however many destinations its source sends to (more than byEnds keeps per
// source), across a change of epoch; and byEnds holds the epoch's ends.
func TestPathIDByEnds(t *testing.T) {
	r := rng.Stream(1, "pathid")
	tp, err := topo.LeafSpineHosts(16, 4, 2, hw.Link{Name: "x", BandwidthBytesPerS: 10e9, LatencyS: 1e-6})
	require.NoError(t, err)
	n := NewFlowNet(sim.New(), tp)
	m := &n.memo
	hosts := tp.GPUs()
	dsts := make([][]int, len(hosts)) // each source's destinations
	for i := range hosts {
		for _, j := range r.Perm(len(hosts))[:endsWays+3] {
			if j != i {
				dsts[i] = append(dsts[i], hosts[j])
			}
		}
	}
	slots := make([]flow, 5) // reused by other transfers, as FlowNet's are
	for epoch := uint64(1); epoch <= 2; epoch++ {
		*m = fillMemo{epoch: epoch, ids: map[pathRef]uint32{}, byEnds: m.byEnds}
		for step := 0; step < 2000; step++ {
			i := r.IntN(len(hosts))
			src, dst := hosts[i], dsts[i][r.IntN(len(dsts[i]))]
			p, err := tp.Route(src, dst)
			require.NoError(t, err)
			f := &slots[r.IntN(len(slots))]
			if f.src != int32(src) || f.dst != int32(dst) {
				*f = flow{src: int32(src), dst: int32(dst), memoEpoch: f.memoEpoch, memoID: f.memoID}
			}
			id := n.pathID(f, p)
			want, ok := m.ids[pathRef{&p[0], len(p)}]
			require.True(t, ok)
			require.Equal(t, want, id, "step %d: %d to %d", step, src, dst)
			require.Equal(t, epoch, f.memoEpoch)
			require.Equal(t, id, f.memoID, "the flow keeps its path's id")
		}
		held := 0
		for _, e := range m.byEnds {
			if e.epoch == epoch {
				held++
			}
		}
		require.Greater(t, held, len(hosts), "epoch %d: byEnds holds several destinations per source", epoch)
	}
}
