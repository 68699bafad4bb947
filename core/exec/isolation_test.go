package exec

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// halvesPlan is two units of four ranks of one DGX A100 (ranks 0–3 and
// 4–7), each with its own TP group and one all-reduce of 1 MiB.
func halvesPlan() *workload.Plan {
	prog := workload.Program{Tasks: []workload.Task{{Name: "ar", Kind: workload.Collective, Stream: workload.StreamTP,
		Coll: model.AllReduce, Bytes: 1 << 20, Slot: workload.SlotTP}}}
	pl := &workload.Plan{Programs: []workload.Program{prog}, Ranks: 8}
	for u, ranks := range [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}} {
		unit := workload.Unit{Ranks: ranks}
		for i := range unit.Groups {
			unit.Groups[i] = -1
		}
		unit.Groups[workload.SlotTP] = u
		pl.Units = append(pl.Units, unit)
		pl.Groups = append(pl.Groups, workload.Group{Units: []int{u}, Comms: [][]int{ranks}})
		pl.Replicas = append(pl.Replicas, []int{u})
	}
	return pl
}

// Communicators over the same kind of links and healthy ranks share a
// signature; a degraded link on one's routes or a straggler gives it its
// own: the signature is the data (sizes, links' bandwidth × health and
// latency, rank speeds), not a hash of it.
func TestCommSignatureIsItsData(t *testing.T) {
	sigs := func(setup func(e *engine)) (int32, int32) {
		f := dgx(t, 1)
		e := &engine{opt: Options{Fabric: f, Cost: fixedCost}, k: f.Kernel(), topo: f.Topology(), plan: halvesPlan(),
			info: make([][]*commInfo, 2), memo: map[memoKey]sim.Time{}, sigs: map[string]int32{}}
		e.res = &Result{Plan: e.plan, Units: make([]UnitResult, 2)}
		if setup != nil {
			setup(e)
		}
		e.setup()
		require.NoError(t, e.prepare())
		a, b := e.comm(0, 0), e.comm(1, 0)
		assert.True(t, a.isolated)
		assert.True(t, b.isolated)
		return a.sig, b.sig
	}
	a, b := sigs(nil)
	assert.Equal(t, a, b, "two halves of an NVSwitch node are alike")
	a, b = sigs(func(e *engine) {
		for l, lk := range e.topo.Links {
			if e.topo.Devices[lk.Src].Name == "n0.gpu5" {
				e.topo.SetHealth(l, 0.5)
			}
		}
	})
	assert.NotEqual(t, a, b, "a degraded link on the second half's routes")
	a, b = sigs(func(e *engine) { e.opt.Fabric.SetSlowdown(e.topo.RankDevice(1), 1.5) })
	assert.NotEqual(t, a, b, "a straggler in the first half")
}

// The memo is keyed by operation and payload too: alternating all-reduces
// of two sizes on one isolated communicator run each size once on the
// network, and every repeat takes its own size's time.
func TestMemoKeyTellsSizesApart(t *testing.T) {
	run := func(sizes ...float64) *Result {
		pl := onePlan(0, len(sizes))
		for i := range pl.Programs[0].Tasks {
			if task := &pl.Programs[0].Tasks[i]; task.Kind == workload.Collective {
				task.Bytes = sizes[i/2]
			}
		}
		res, err := Run(context.Background(), pl, Options{Fabric: dgx(t, 1), Cost: fixedCost})
		require.NoError(t, err)
		return res
	}
	small, large := run(1<<20), run(64<<20)
	mixed := run(1<<20, 64<<20, 1<<20, 64<<20)
	assert.Equal(t, 2, mixed.Collectives)
	assert.Equal(t, 2, mixed.Reused)
	// Each single run is 1 ms of compute then its all-reduce; the mixed run
	// is two of each, back to back.
	assert.Equal(t, 2*small.End+2*large.End, mixed.End)
}
