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
	var hit map[int]bool // group -> groupTouched, where a route may differ
	if e.routesMayDiffer() {
		hit = map[int]bool{}
	}
	for r, units := range pl.Replicas {
		touched[r] = full
		for _, u := range units {
			touched[r] = touched[r] || e.touched(u, hit)
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
// healthy unit's: a straggler rank, or a degraded or rerouted link between
// ranks of its tensor-, pipeline-, context- or expert-parallel
// communicators (groupTouched).
func (e *engine) touched(u int, hit map[int]bool) bool {
	unit := e.plan.Units[u]
	for _, rk := range unit.Ranks {
		if e.opt.Fabric.Slowdown(e.topo.RankDevice(rk)) != 1 {
			return true
		}
	}
	if hit == nil {
		return false
	}
	for slot, g := range unit.Groups {
		if g < 0 || workload.Slot(slot) == workload.SlotDP {
			continue
		}
		t, ok := hit[g]
		if !ok {
			t = e.groupTouched(g)
			hit[g] = t
		}
		if t {
			return true
		}
	}
	return false
}

// routesMayDiffer reports whether a route can differ from a healthy
// cluster's: a link is degraded, or healthy routes are given to compare.
func (e *engine) routesMayDiffer() bool {
	if e.opt.HealthyRoute != nil {
		return true
	}
	for _, l := range e.topo.Links {
		if l.Health < 1 {
			return true
		}
	}
	return false
}

// groupTouched reports whether a route between two ranks of one of group
// g's communicators crosses a degraded link or left its healthy route
// (Options.HealthyRoute). Every ordered pair is checked, not only the
// communicator's ring order: across nodes NCCL's channels build rings of
// their own (one per rail, net.DefaultChannels), and trees and all-to-alls
// pair other ranks still.
func (e *engine) groupTouched(g int) bool {
	for _, ranks := range e.plan.Groups[g].Comms {
		for i, a := range ranks {
			for j, b := range ranks {
				if i == j {
					continue
				}
				da, db := e.topo.RankDevice(a), e.topo.RankDevice(b)
				p, err := e.topo.Route(da, db)
				if e.opt.HealthyRoute != nil && (err != nil || !slices.Equal(p, e.opt.HealthyRoute(da, db))) {
					return true
				}
				for _, l := range p {
					if e.topo.Links[l].Health < 1 {
						return true
					}
				}
			}
		}
	}
	return false
}
