package net

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/stretchr/testify/require"
)

// TestStartShapeIsStart: starting a kept shape (Comms.Shape, then
// StartShape, as the executor does) runs the same collective as Start,
// with NCCL's tuner too: the same results, in the same order.
func TestStartShapeIsStart(t *testing.T) {
	run := func(seed uint64, kept bool) []Result {
		r := rng.Stream(seed, "shape")
		tp := randomTopology(t, r)
		k := sim.New()
		c := NewComms(NewFlowNet(k, tp))
		n := tp.NumRanks()
		var out []Result
		for j := 0; j < 2+r.IntN(3); j++ {
			op := []Op{AllReduce, AllGather, ReduceScatter}[r.IntN(3)]
			col := Collective{Op: op, Algorithm: []Algorithm{"", NCCL}[r.IntN(2)], Bytes: float64(1 + r.IntN(8<<20)),
				Ranks: r.Perm(n)[:2+r.IntN(n-1)], Stream: r.IntN(2) == 0, ProtocolEfficiency: []float64{0, 0.8}[r.IntN(2)]}
			for rep := 0; rep < 3; rep++ {
				k.At(sim.Time(rep*1000+r.IntN(100))*sim.Microsecond, func() {
					done := func(res Result) { out = append(out, res) }
					if !kept {
						_, err := c.Start(col, done)
						require.NoError(t, err)
						return
					}
					sh, err := c.Shape(col)
					require.NoError(t, err)
					_, err = c.StartShape(sh, col, done)
					require.NoError(t, err)
				})
			}
		}
		require.NoError(t, k.Run(context.Background()))
		return out
	}
	for seed := uint64(1); seed <= 30; seed++ {
		want := run(seed, false)
		require.NotEmpty(t, want)
		require.Equal(t, want, run(seed, true), "seed %d", seed)
	}
}
