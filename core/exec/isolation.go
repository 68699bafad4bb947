// Isolation: communicators whose links no other communicator uses while
// they can be active, and the signature (links and ranks' speeds) that
// makes their collectives' simulated durations reusable.

package exec

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/workload"
)

type commInfo struct {
	isolated bool
	// sig names the communicator's signature: its size, its routes' links
	// (bandwidth × health, latency) and its ranks' speeds, as data
	// (engine.sigs interns it); equal sigs, equal data, equal times.
	sig int32
	// eff is the protocol efficiency of its least efficient route (the
	// bottleneck of each: net.PathEfficiency; 1 when
	// Options.Protocol is off).
	eff float64
}

// memoKey is a collective on an isolated communicator whose simulated
// duration its repeats reuse: the communicator's signature, the operation
// and its payload (math.Float64bits of the bytes), or for an all-to-all-v
// its routing matrix (workload.Task.PairsID, -1 for other operations) and
// whether it is hierarchical. Equal keys are equal collectives: no hashing,
// no collisions. Its fields fill 24 bytes with no padding, so the map
// hashes it as plain memory.
type memoKey struct {
	sig          int32
	coll, alg    uint16 // engine.name of the operation and the algorithm
	bytes        uint64
	pairs        int32
	hierarchical uint32 // 1 for a hierarchical all-to-all-v
}

// linkUsage counts the communicators (of every group) that use each link.
func (e *engine) linkUsage() {
	pl := e.plan
	e.users = make([][]int64, len(e.topo.Links))
	seen := make([]int64, len(e.topo.Links))
	for i := range seen {
		seen[i] = -1
	}
	for g, grp := range pl.Groups {
		for c, ranks := range grp.Comms {
			id := int64(g)<<20 | int64(c)
			for _, p := range e.routes(ranks) {
				for _, l := range p {
					if seen[l] != id {
						seen[l] = id
						e.users[l] = append(e.users[l], id)
					}
				}
			}
		}
	}
	e.tpOf = make([]int, len(pl.Groups))
	for g := range e.tpOf {
		e.tpOf[g] = -1
	}
	dpGroup := make([]bool, len(pl.Groups))
	for u, unit := range pl.Units {
		if g := unit.Groups[workload.SlotTP]; g >= 0 {
			e.tpOf[g] = u
		}
		if g := unit.Groups[workload.SlotDP]; g >= 0 {
			dpGroup[g] = true
		}
	}
	quietProg := make([]bool, len(pl.Programs))
	for p, prog := range pl.Programs {
		lastTP, firstDP := -1, -1
		for i, t := range prog.Tasks {
			switch {
			case t.Slot == workload.SlotTP && t.Kind == workload.Collective:
				lastTP = i
			case t.Slot == workload.SlotDP && t.Kind == workload.Collective && firstDP < 0:
				firstDP = i
			}
		}
		quietProg[p] = firstDP < 0 || lastTP < 0
		if firstDP > lastTP && lastTP >= 0 {
			for _, d := range prog.Tasks[firstDP].Deps {
				quietProg[p] = quietProg[p] || int(d) >= lastTP
			}
		}
	}
	e.quiet = make([]bool, len(pl.Groups))
	for g, grp := range pl.Groups {
		e.quiet[g] = dpGroup[g]
		for _, u := range grp.Units {
			e.quiet[g] = e.quiet[g] && quietProg[pl.Units[u].Program]
		}
	}
}

// shares reports whether communicator (g, c) may be in flight at the same
// time as communicator other on a shared link.
func (e *engine) shares(g, c int, other int64) bool {
	h, hc := int(other>>20), int(other&(1<<20-1))
	if h == g && hc == c {
		return false
	}
	// h runs only after u's TP work is done. A unit names every group it
	// belongs to, one per slot: fewer to look through than a data-parallel
	// group's units.
	if u := e.tpOf[g]; u >= 0 && e.quiet[h] && slices.Contains(e.plan.Units[u].Groups[:], h) {
		return false
	}
	return true
}

// comm returns whether communicator c of group g is isolated, and the
// signature of its links and ranks' speeds (equal signatures, equal times),
// computed once; the caller reads it and does not write it.
func (e *engine) comm(g, c int) *commInfo {
	if e.info[g] == nil {
		e.info[g] = make([]*commInfo, len(e.plan.Groups[g].Comms))
	}
	if ci := e.info[g][c]; ci != nil {
		return ci
	}
	ranks := e.plan.Groups[g].Comms[c]
	ci := commInfo{isolated: true, eff: 1}
	routes := e.routes(ranks)
	data := e.routeFigures(nil, ranks, routes)
	for _, p := range routes {
		if e.opt.Protocol {
			ci.eff = min(ci.eff, net.PathEfficiency(e.topo, p))
		}
		for _, l := range p {
			for _, other := range e.users[l] {
				if ci.isolated && e.shares(g, c, other) {
					ci.isolated = false
				}
			}
		}
	}
	for _, rk := range ranks {
		data = binary.LittleEndian.AppendUint64(data, math.Float64bits(e.opt.Fabric.Slowdown(e.topo.RankDevice(rk))))
	}
	sig, ok := e.sigs[string(data)]
	if !ok {
		sig = int32(len(e.sigs))
		e.sigs[string(data)] = sig
	}
	ci.sig = sig
	e.info[g][c] = &ci
	return &ci
}

// routes are the paths of a communicator's ring in its own order (both
// directions for two ranks: send_recv uses one, a ring all-reduce both).
func (e *engine) routes(ranks []int) [][]int32 {
	n := len(ranks)
	if n < 2 {
		return nil
	}
	var out [][]int32
	for i := 0; i < n && !e.routesStopped(); i++ {
		p, err := e.topo.Route(e.topo.RankDevice(ranks[i]), e.topo.RankDevice(ranks[(i+1)%n]))
		if err == nil {
			out = append(out, p)
		}
	}
	return out
}

// routeFigures appends to b what a communicator's ring is made of: its
// size and, route by route, each hop's bandwidth (times its health) and
// latency. Equal figures, equal transfers: a communicator's signature
// (comm) and a replica's shape (replicaShapes) are made of them.
func (e *engine) routeFigures(b []byte, ranks []int, routes [][]int32) []byte {
	put := func(x float64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x)) }
	put(float64(len(ranks)))
	put(float64(len(routes)))
	for _, p := range routes {
		put(float64(len(p)))
		for _, l := range p {
			lk := e.topo.Links[l]
			put(lk.BandwidthBytesPerS * lk.Health)
			put(lk.LatencyS)
		}
	}
	return b
}
