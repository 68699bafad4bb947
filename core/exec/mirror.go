// Mirroring: which replicas are simulated (a healthy representative and
// every replica a fault touches) and which groups of mirrored units are
// launched alongside a simulated group.

package exec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eidolon-sim/eidolon/core/workload"
)

// pickSimulated chooses the simulated replicas: a healthy representative
// and every replica a fault touches; the rest mirror the representative.
func (e *engine) pickSimulated() {
	pl := e.plan
	e.simul = make([]bool, len(pl.Units))
	full := e.opt.Full
	// A failed device or link reroutes traffic wherever it was: no
	// symmetry left to rely on, unless the healthy routes are known (then
	// touched finds the rerouted replicas).
	for d := range e.topo.Devices {
		full = full || (e.topo.DeviceDown(d) && e.opt.HealthyRoute == nil)
	}
	for _, l := range e.topo.Links {
		full = full || (l.Health == 0 && e.opt.HealthyRoute == nil)
	}
	touched := make([]bool, len(pl.Replicas))
	for r, units := range pl.Replicas {
		touched[r] = full
		for _, u := range units {
			touched[r] = touched[r] || e.touched(u)
		}
	}
	e.touchCoupled(touched)
	rep := -1
	for r, units := range pl.Replicas {
		if touched[r] || rep < 0 {
			for _, u := range units {
				e.simul[u] = true
			}
		}
		if !touched[r] && rep < 0 {
			rep = r
		}
	}
	for _, units := range pl.Replicas {
		for i, u := range units {
			if !e.simul[u] {
				e.res.Units[u].Mirror = pl.Replicas[rep][i]
			}
		}
	}
	// Groups: how many simulated members each waits for; groups without
	// simulated members are launched alongside the group they mirror.
	e.driven = make([]int, len(pl.Groups))
	e.mirror = make([][]int, len(pl.Groups))
	// A group is known by its role (the slot its first unit uses it in) and
	// its units: two groups over the same units (a pipeline link and the
	// embedding group) are different groups.
	byUnits := map[string]int{}
	key := func(g int, mapTo func(int) int) string {
		var b strings.Builder
		first := pl.Groups[g].Units[0]
		for slot, h := range pl.Units[first].Groups {
			if h == g {
				fmt.Fprintf(&b, "%d:", slot)
				break
			}
		}
		for _, u := range pl.Groups[g].Units {
			fmt.Fprintf(&b, "%d,", mapTo(u))
		}
		return b.String()
	}
	id := func(u int) int { return u }
	for g, grp := range pl.Groups {
		for _, u := range grp.Units {
			if e.simul[u] {
				e.driven[g]++
			}
		}
		if e.driven[g] == len(grp.Units) {
			byUnits[key(g, id)] = g
		}
	}
	for g := range pl.Groups {
		if e.driven[g] > 0 {
			continue
		}
		d, ok := byUnits[key(g, func(u int) int { return e.res.Units[u].Mirror })]
		if ok {
			e.mirror[d] = append(e.mirror[d], g)
		}
	}
}

// touchCoupled extends touched to every replica that shares a group with a
// touched one, where the group does not span every replica: a context- or
// expert-parallel partner of a straggler waits for it layer by layer, as
// the other replicas do not (a group over every replica, the gradients'
// data-parallel one, holds up all healthy replicas alike).
func (e *engine) touchCoupled(touched []bool) {
	if !slices.Contains(touched, true) || !slices.Contains(touched, false) {
		return // nothing to spread (a healthy run, or every replica simulated)
	}
	pl := e.plan
	replicaOf := make([]int, len(pl.Units))
	for u := range replicaOf {
		replicaOf[u] = -1
	}
	for r, units := range pl.Replicas {
		for _, u := range units {
			replicaOf[u] = r
		}
	}
	parent := make([]int, len(pl.Replicas))
	for r := range parent {
		parent[r] = r
	}
	find := func(r int) int {
		for parent[r] != r {
			parent[r] = parent[parent[r]]
			r = parent[r]
		}
		return r
	}
	seen := make([]int, len(pl.Replicas)) // the last group that saw a replica, +1
	for g, grp := range pl.Groups {
		var reps []int
		for _, u := range grp.Units {
			if r := replicaOf[u]; r >= 0 && seen[r] != g+1 {
				seen[r] = g + 1
				reps = append(reps, r)
			}
		}
		if len(reps) < 2 || len(reps) == len(pl.Replicas) {
			continue
		}
		for _, r := range reps[1:] {
			parent[find(r)] = find(reps[0])
		}
	}
	hit := make([]bool, len(pl.Replicas))
	for r, t := range touched {
		if t {
			hit[find(r)] = true
		}
	}
	for r := range touched {
		touched[r] = touched[r] || hit[find(r)]
	}
}

// touched reports whether a unit's own work or transfers differ from a
// healthy unit's: a straggler rank, or a degraded link on a route of its
// tensor- or pipeline-parallel communicators.
func (e *engine) touched(u int) bool {
	unit := e.plan.Units[u]
	for _, rk := range unit.Ranks {
		if e.opt.Fabric.Slowdown(e.topo.RankDevice(rk)) != 1 {
			return true
		}
	}
	for slot, g := range unit.Groups {
		if g < 0 || workload.Slot(slot) == workload.SlotDP {
			continue
		}
		for _, ranks := range e.plan.Groups[g].Comms {
			if e.rerouted(ranks) {
				return true
			}
			for _, path := range e.routes(ranks) {
				for _, l := range path {
					if e.topo.Links[l].Health < 1 {
						return true
					}
				}
			}
		}
	}
	return false
}

// rerouted reports whether a communicator's ring (the pairs of routes)
// lost or left a healthy route (Options.HealthyRoute).
func (e *engine) rerouted(ranks []int) bool {
	if e.opt.HealthyRoute == nil || len(ranks) < 2 {
		return false
	}
	for i, r := range ranks {
		a, b := e.topo.RankDevice(r), e.topo.RankDevice(ranks[(i+1)%len(ranks)])
		p, err := e.topo.Route(a, b)
		if err != nil || !slices.Equal(p, e.opt.HealthyRoute(a, b)) {
			return true
		}
	}
	return false
}

// routes are the paths a communicator's ring (or transfer) uses.
func (e *engine) routes(ranks []int) [][]int32 {
	n := len(ranks)
	if n < 2 {
		return nil
	}
	var out [][]int32
	pairs := n
	if n == 2 {
		pairs = 2 // both directions: send_recv uses one, ring all-reduce both
	}
	for i := 0; i < pairs; i++ {
		a, b := ranks[i], ranks[(i+1)%n]
		p, err := e.topo.Route(e.topo.RankDevice(a), e.topo.RankDevice(b))
		if err == nil {
			out = append(out, p)
		}
	}
	return out
}
