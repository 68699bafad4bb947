// Launch: the rendezvous of a collective's member units, and its
// transfers on the network (or a memoized duration on an isolated
// communicator).

package exec

import (
	"fmt"
	"math"

	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
)

type rendezvous struct {
	arrived []int64 // unit<<32 | task
	pending int
	start   sim.Time
}

// arrive registers a unit at a communication task; the last simulated
// member to arrive launches it.
func (e *engine) arrive(u int, i int32, task *workload.Task) {
	g := e.plan.Units[u].Groups[task.Slot]
	if g < 0 {
		e.k.Fail(fmt.Errorf("exec: unit %d task %q uses slot %d, which has no group", u, task.Name, task.Slot))
		return
	}
	key := uint64(g)<<32 | uint64(uint32(task.Tag))
	r := e.rv[key]
	if r == nil {
		r = &rendezvous{}
		e.rv[key] = r
	}
	r.arrived = append(r.arrived, int64(u)<<32|int64(i))
	if len(r.arrived) < e.driven[g] {
		return
	}
	delete(e.rv, key)
	e.launch(g, task, r)
}

func (e *engine) launch(g int, task *workload.Task, r *rendezvous) {
	now := e.k.Now()
	r.start = now
	for _, a := range r.arrived {
		e.res.Units[a>>32].Start[a&0xffffffff] = now
		e.commBegin(int(a>>32), task)
	}
	if lat := sim.Seconds(e.opt.CollectiveLaunchS); lat > 0 && !e.tuned(task) {
		e.k.After(lat, func() { e.issue(g, task, r) })
		return
	}
	e.issue(g, task, r)
}

// issue sends a launched collective's transfers on the network; it ends
// when every one has arrived, and no sooner than the host's dispatch
// interval after the launch.
func (e *engine) issue(g int, task *workload.Task, r *rendezvous) {
	now := e.k.Now()
	finishAll := func() {
		for _, a := range r.arrived {
			e.finish(int(a>>32), int32(a&0xffffffff))
		}
	}
	done := func() {
		r.pending--
		if r.pending > 0 {
			return
		}
		if until := r.start + sim.Seconds(e.opt.DispatchS); until > e.k.Now() {
			e.k.At(until, finishAll)
			return
		}
		finishAll()
	}
	if task.Stream == workload.StreamDP {
		e.bulkActive++
		e.bulkStarted++
		finishBulk := finishAll
		finishAll = func() {
			e.bulkActive--
			finishBulk()
		}
	}
	r.pending = 1 // held until every launch below is issued
	var reportDone func(net.Result)
	var sendDone net.SinkFunc
	// The collective's request, but for its ranks and efficiency: the
	// same on every copy.
	alg, quant, tuned := e.request(task)
	collName, algName := e.name(string(task.Coll)), e.name(string(alg))
	var copies []issueCopy
	var shapes []*net.Shape
	if task.Bytes > 0 {
		copies = e.copiesOf(g)
		if task.Coll != workload.SendRecv && task.Coll != workload.AllToAllV {
			shapes = e.shapesOf(shapeKey{int32(g), collName, algName, math.Float64bits(task.Bytes)}, len(copies))
		}
	}
	for i := range copies {
		cp := &copies[i]
		if cp.skip {
			continue // a mirror's isolated copy takes exactly the driver's time
		}
		ranks, ci := cp.ranks, cp.ci
		if task.Coll == workload.AllToAllV {
			if err := e.allToAllV(*ci, ranks, task, &r.pending, done); err != nil {
				e.k.Fail(err)
				return
			}
			continue
		}
		key := memoKey{sig: ci.sig, coll: collName, alg: algName, bytes: math.Float64bits(task.Bytes), pairs: -1}
		if ci.isolated {
			if d, ok := e.memo[key]; ok {
				r.pending++
				e.res.Reused++
				e.k.After(d, done)
				continue
			}
		}
		r.pending++
		e.res.Collectives++
		isolated := ci.isolated
		if task.Coll == workload.SendRecv {
			// One flow, as net's send_recv makes, without its machinery.
			sink := sendDone
			if sink == nil || isolated {
				start := now
				sink = net.SinkFunc(func(int) {
					if isolated {
						e.memo[key] = e.k.Now() - start
					}
					done()
				})
				if !isolated {
					sendDone = sink // one closure for the mirrors' copies
				}
			}
			if err := e.opt.Fabric.Send(e.topo.RankDevice(ranks[0]), e.topo.RankDevice(ranks[1]), task.Bytes/ci.eff, sink, 0); err != nil {
				e.k.Fail(fmt.Errorf("exec: %s from rank %d to %d: %w", task.Name, ranks[0], ranks[1], err))
				return
			}
			continue
		}
		col := net.Collective{Op: net.Op(task.Coll), Bytes: task.Bytes, Ranks: ranks, Label: task.Name, Algorithm: alg,
			ProtocolEfficiency: ci.eff, Stream: !e.opt.RingSteps, Quant: quant}
		if tuned {
			col.ProtocolEfficiency = 0
		}
		report := reportDone
		if report == nil || isolated {
			report = func(res net.Result) {
				if isolated {
					e.memo[key] = res.End - res.Start
				}
				done()
			}
			if !isolated {
				reportDone = report // one closure for the mirrors' copies
			}
		}
		sh := shapes[i]
		var err error
		if sh == nil {
			if sh, err = e.comms.Shape(col); err == nil {
				shapes[i] = sh
			}
		}
		if err == nil {
			_, err = e.comms.StartShape(sh, col, report)
		}
		if err != nil {
			e.k.Fail(fmt.Errorf("exec: %s on ranks %v: %w", task.Name, ranks, err))
			return
		}
	}
	done()
}

// issueCopy is one communicator a collective on a driver group is issued
// on: the group's own, then its mirror groups' (pickSimulated), in that
// order.
type issueCopy struct {
	ranks []int
	ci    *commInfo
	// skip: a mirror's isolated copy with the driver's signature takes
	// exactly the driver's time, so it is not issued.
	skip bool
}

// copiesOf lists the communicators of driver group g and of its mirrors
// that a collective is issued on (those of two ranks or more), found once:
// issue runs for every collective of every simulated unit, and a dense
// list spares it the groups' and their infos' look-ups per copy.
func (e *engine) copiesOf(g int) []issueCopy {
	if e.copies == nil {
		e.copies = make([][]issueCopy, len(e.plan.Groups))
	}
	if cs := e.copies[g]; cs != nil {
		return cs
	}
	cs := []issueCopy{}
	mirrors := e.mirror[g]
	driverComms := len(e.plan.Groups[g].Comms)
	for gi := 0; gi <= len(mirrors); gi++ {
		gg := g
		if gi > 0 {
			gg = mirrors[gi-1]
		}
		for c, ranks := range e.plan.Groups[gg].Comms {
			if len(ranks) < 2 {
				continue
			}
			ci := e.comm(gg, c)
			skip := gi > 0 && ci.isolated && ci.sig == e.comm(g, min(c, driverComms-1)).sig
			cs = append(cs, issueCopy{ranks: ranks, ci: ci, skip: skip})
		}
	}
	e.copies[g] = cs
	return cs
}

// shapeKey is a collective request on a driver group's copies.
type shapeKey struct {
	g       int32
	op, alg uint16 // engine.name of each
	bytes   uint64 // 16 bytes, no padding: hashed as plain memory
}

// name is s's index in the engine's interned names (engine.names): the few
// operation and algorithm names a plan uses, compared, not hashed.
func (e *engine) name(s string) uint16 {
	for i, n := range e.names {
		if n == s {
			return uint16(i)
		}
	}
	e.names = append(e.names, s)
	return uint16(len(e.names) - 1)
}

// shapesOf holds the checked shapes (net.Comms.Shape) of a request (k: its
// driver group, operation, algorithm and payload) on each of the group's n
// copies, by copy, each filled at its first start: a
// step starts the same few requests again and again, and each mirror group
// is a copy of one driver group only, so this is the one cache of them.
func (e *engine) shapesOf(k shapeKey, n int) []*net.Shape {
	sh, ok := e.shapes[k]
	if !ok {
		if e.shapes == nil {
			e.shapes = map[shapeKey][]*net.Shape{}
		}
		sh = make([]*net.Shape, n)
		e.shapes[k] = sh
	}
	return sh
}

// request is the algorithm and quantization a communication task runs
// with, and whether NCCL's tuner prices it (tuned).
func (e *engine) request(task *workload.Task) (alg net.Algorithm, quant *net.Quantization, tuned bool) {
	alg, tuned = e.opt.Algorithm, e.tuned(task)
	if task.Coll == model.AllToAll {
		alg = net.Direct // every rank's share straight to its peer (net has no other)
	}
	if tuned {
		alg = net.NCCL
		if e.opt.TPAllReduce != "" && task.Coll == model.AllReduce && task.Slot == workload.SlotTP {
			alg = e.opt.TPAllReduce
		}
	}
	if q := e.opt.TPQuant; q != nil && task.Coll == model.AllReduce && task.Slot == workload.SlotTP {
		quant = q
		if e.opt.TPQuantAlgorithm != "" {
			alg = e.opt.TPQuantAlgorithm
		}
	}
	return alg, quant, tuned
}

// tuned reports whether NCCL's tuner prices a communication task: with
// Protocol on, the default algorithm, and an all-reduce, all-gather or
// reduce-scatter whose payload is not quantized.
func (e *engine) tuned(task *workload.Task) bool {
	if !e.opt.Protocol || e.opt.Algorithm != "" {
		return false
	}
	switch task.Coll {
	case model.AllReduce:
		return e.opt.TPQuant == nil || task.Slot != workload.SlotTP
	case model.AllGather, model.ReduceScatter:
		return true
	}
	return false
}

// RingTimeBound is a lower bound on the simulated time of a ring
// collective over ranks: its slowest hop carries steps messages of bytes/n
// one after another, each at most at that hop's bottleneck bandwidth
// (steps = 2(n−1) for all-reduce, n−1 for all-gather and reduce-scatter).
func RingTimeBound(t *topo.Topology, kind model.Kind, bytes float64, ranks []int) (float64, error) {
	n := len(ranks)
	if n < 2 || bytes <= 0 {
		return 0, nil
	}
	slowest := math.Inf(1)
	for i := range ranks {
		path, err := t.Route(t.RankDevice(ranks[i]), t.RankDevice(ranks[(i+1)%n]))
		if err != nil {
			return 0, err
		}
		for _, l := range path {
			slowest = min(slowest, t.Capacity(int(l)))
		}
	}
	steps := float64(n - 1)
	if kind == model.AllReduce {
		steps *= 2
	}
	return steps * bytes / float64(n) / slowest, nil
}
