package net

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/sim"
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
	type key struct {
		src, dst                int
		bytes                   float64
		start, txEnd, delivered sim.Time
	}
	hits := 0
	run := func(seed uint64, least int) ([]key, []LinkStat) {
		r := rng.Stream(seed, "fillmemo")
		tp := randomTopology(t, r)
		k := sim.New()
		f := NewFlowNet(k, tp)
		f.memoMinLinks = least
		f.KeepRecords = true
		c := NewComms(f)
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
		var out []key
		for _, rec := range f.Records() {
			out = append(out, key{rec.Src, rec.Dst, rec.Bytes, rec.Start, rec.TxEnd, rec.Delivered})
		}
		slices.SortFunc(out, func(a, b key) int {
			return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.src, b.src), cmp.Compare(a.dst, b.dst),
				cmp.Compare(a.delivered, b.delivered), cmp.Compare(a.bytes, b.bytes))
		})
		return out, f.LinkStats()
	}
	for seed := uint64(1); seed <= 40; seed++ {
		memo, memoLinks := run(seed, 1)
		ref, refLinks := run(seed, -1)
		require.Equal(t, ref, memo, "seed %d", seed)
		require.Equal(t, refLinks, memoLinks, "seed %d", seed)
	}
	require.Greater(t, hits, 100, "the memo answered")
}
