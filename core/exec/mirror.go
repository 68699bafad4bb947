// Mirroring: which replicas are simulated (a healthy representative and
// every replica a fault touches) and which groups of mirrored units are
// launched alongside a simulated group.

package exec

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/eidolon-sim/eidolon/core/workload"
)

// pickSimulated chooses the simulated replicas: a healthy representative
// of each shape and every replica a fault touches; the rest mirror the
// representative of their shape.
func (e *engine) pickSimulated() {
	pl := e.plan
	e.simul = make([]bool, len(pl.Units))
	full := e.opt.Full
	// A failed device or link reroutes traffic wherever it was: no
	// symmetry left to rely on, unless the healthy routes are known (then
	// touched finds the rerouted replicas).
	full = full || (e.topo.Failed() && e.opt.HealthyRoute == nil)
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
	// Each untouched replica mirrors the first one of its shape, which is
	// simulated (replicaShapes).
	var shapes []string
	if slices.Contains(touched, false) {
		shapes = e.replicaShapes()
	}
	repOf := map[string]int{}
	for r, units := range pl.Replicas {
		rep, ok := -1, false
		if !touched[r] {
			if rep, ok = repOf[shapes[r]]; !ok {
				repOf[shapes[r]] = r
			}
		}
		if !ok {
			for _, u := range units {
				e.simul[u] = true
			}
			continue
		}
		for i, u := range units {
			e.res.Units[u].Mirror = pl.Replicas[rep][i]
		}
	}
	// Groups: how many simulated members each waits for; groups without
	// simulated members are launched alongside the group they mirror: the
	// group with a simulated member whose image (a simulated unit itself, a
	// mirrored unit its representative) is theirs. Groups spanning replicas
	// need the partly simulated ones: an expert-parallel group of the
	// representative's replica and mirrored ones, or an expert-data-parallel
	// group; launched alongside them, the other such groups' traffic shares
	// the links (a NIC two GPUs share) as it does in a full simulation.
	e.driven = make([]int, len(pl.Groups))
	e.mirror = make([][]int, len(pl.Groups))
	// A group is known by its role (the slot its first unit uses it in) and
	// its units' images: two groups over the same units (a pipeline link
	// and the embedding group) are different groups.
	image := func(u int) int {
		if e.simul[u] {
			return u
		}
		return e.res.Units[u].Mirror
	}
	key := func(g int) string {
		var b strings.Builder
		first := pl.Groups[g].Units[0]
		for slot, h := range pl.Units[first].Groups {
			if h == g {
				fmt.Fprintf(&b, "%d:", slot)
				break
			}
		}
		for _, u := range pl.Groups[g].Units {
			fmt.Fprintf(&b, "%d,", image(u))
		}
		return b.String()
	}
	byImage := map[string]int{}
	for g, grp := range pl.Groups {
		for _, u := range grp.Units {
			if e.simul[u] {
				e.driven[g]++
			}
		}
		if e.driven[g] > 0 {
			byImage[key(g)] = g
		}
	}
	for g := range pl.Groups {
		if e.driven[g] > 0 {
			continue
		}
		d, ok := byImage[key(g)]
		if ok {
			e.mirror[d] = append(e.mirror[d], g)
		}
	}
}

// touchCoupled extends touched to every replica that shares a group with a
// touched one, where the group does not span every replica: a context- or
// expert-parallel partner of a straggler waits for it layer by layer, as
// the other replicas do not (a group over every replica, the gradients'
// data-parallel one, holds up all healthy replicas alike). So does a
// replica whose transfers share a link inside a node with a touched one's
// (coupleByNodeLinks).
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
	e.coupleByNodeLinks(replicaOf, func(a, b int) { parent[find(a)] = find(b) })
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

// coupleByNodeLinks joins replicas whose communicators (but the
// data-parallel group's) route through a common link inside a node: GPUs
// behind one PCIe switch and NIC share its links, so a straggler's or a
// degraded route's changed traffic changes what its neighbour's transfers
// get there. Fabric links (leaf, spine) are left out: every replica's
// traffic crosses them, and joining through them would simulate all.
func (e *engine) coupleByNodeLinks(replicaOf []int, join func(a, b int)) {
	pl := e.plan
	rankReplica := map[int]int{}
	for u, unit := range pl.Units {
		if r := replicaOf[u]; r >= 0 {
			for _, rk := range unit.Ranks {
				rankReplica[rk] = r
			}
		}
	}
	first := map[int32]int{} // link -> the first replica seen on it
	done := make([]bool, len(pl.Groups))
	for _, unit := range pl.Units {
		for slot, g := range unit.Groups {
			if g < 0 || done[g] || workload.Slot(slot) == workload.SlotDP {
				continue
			}
			done[g] = true
			for _, ranks := range pl.Groups[g].Comms {
				for i, a := range ranks {
					r, ok := rankReplica[a]
					if !ok || len(ranks) < 2 || e.routesStopped() {
						continue
					}
					p, err := e.topo.Route(e.topo.RankDevice(a), e.topo.RankDevice(ranks[(i+1)%len(ranks)]))
					if err != nil {
						continue
					}
					for _, l := range p {
						lk := e.topo.Links[l]
						if e.topo.Devices[lk.Src].Node < 0 || e.topo.Devices[lk.Dst].Node < 0 {
							continue
						}
						if f, ok := first[l]; ok {
							join(r, f)
						} else {
							first[l] = r
						}
					}
				}
			}
		}
	}
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
				if e.routesStopped() {
					return false
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

// replicaShapes names each replica's shape: the routes of its units'
// communicators but the data-parallel group's (each hop's bandwidth, health
// and latency, in ring order), slot by slot. Replicas of one shape do the
// same work at the same times, so one of them stands for the rest; a node
// or rack boundary that cuts some replicas' pipeline links and not others'
// (stages of 6 GPUs on 8-GPU nodes, of 32 on 72-GPU racks) makes another
// shape.
func (e *engine) replicaShapes() []string {
	pl := e.plan
	ids := map[string]int{} // a group's routes -> their id
	groupID := make([]int, len(pl.Groups))
	for g := range groupID {
		groupID[g] = -1
	}
	id := func(g int) int {
		if groupID[g] >= 0 {
			return groupID[g]
		}
		var b []byte
		for _, ranks := range pl.Groups[g].Comms {
			b = e.routeFigures(b, ranks, e.routes(ranks))
		}
		n, ok := ids[string(b)]
		if !ok {
			n = len(ids)
			ids[string(b)] = n
		}
		groupID[g] = n
		return n
	}
	out := make([]string, len(pl.Replicas))
	for r, units := range pl.Replicas {
		var b []byte
		for _, u := range units {
			for slot, g := range pl.Units[u].Groups {
				if g >= 0 && workload.Slot(slot) != workload.SlotDP {
					b = binary.LittleEndian.AppendUint32(b, uint32(slot))
					b = binary.LittleEndian.AppendUint32(b, uint32(id(g)))
				}
			}
		}
		out[r] = string(b)
	}
	return out
}
