// Package exec runs a workload.Plan on a compute model and a core/net
// fabric: every unit (a tensor-parallel group) has a compute stream and
// communication streams; a collective starts when every member unit has
// reached it and runs as flows on the network, so concurrent collectives
// contend for links; the result is a timeline per unit and statistics per
// rank.
//
// Symmetry: data-parallel replicas whose ranks are healthy and whose links
// are healthy do the same work at the same times, so by default one
// representative replica is simulated and the others mirror it: their
// tensor- and pipeline-parallel transfers are still sent on the network
// (where they share links with others) and their data-parallel collectives
// are the real ones over every member rank, but their tasks are not
// re-executed. A replica touched by a straggler, a degraded link on one of
// its routes, or a failed device is simulated on its own, as are all when
// Options.Full is set. A mirrored transfer ends when every replica's copy
// has arrived, which couples the replicas at each transfer where on their
// own they would drift apart until the data-parallel reduction: the two
// ways agree exactly on small clusters (a test checks it) and within 0.03%
// for GPT-3 175B on 1,024 GPUs, healthy or with a degraded link.
//
// Ring collectives run as ring streams (net.Collective.Stream: one flow per
// channel over all its hops at the ring's bottleneck rate) unless
// Options.RingSteps asks for a flow per rank per step; the two agree within
// 1% on a contended training step (a test checks it), and streams keep a
// data-parallel ring over hundreds of ranks to a few flows.
//
// Collectives on a communicator whose links no other communicator uses while
// it can be active (a tensor-parallel group inside an NVSwitch node, whose
// links at most carry its own data-parallel reduction after the backward)
// cannot be slowed by other traffic, so their duration depends only on the
// operation, the size and the links: the first one is simulated on the
// network and repeats reuse its simulated duration.
//
// Host (host.go): each simulated unit has a host thread that issues its
// tasks in program order at the framework's CPU cost per kernel (eager) or
// per replayed graph (cuda_graphs). A kernel starts when its stream is
// free, its dependencies are done and the host has issued it, so short
// kernels behind long ones run back to back while a stream of tiny kernels
// runs at the host's pace. The host runs ahead of the GPU by at most the
// launch queue and waits at the program's synchronisation points
// (workload.Task.HostWait). A compute task's schedule over its operators is
// priced once per program in closed form (taskCost), not per kernel event.
//
// Interference (interfere.go): while a unit's collective is in flight, its
// running compute is slowed by the SMs NCCL's thread blocks hold and the
// HBM bandwidth its traffic takes; the task's end moves when collectives
// start or end.
package exec

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Options configure a run.
type Options struct {
	// Fabric carries the transfers; its topology holds the rank mapping and
	// link health, its Slowdown the stragglers (set both before Run).
	Fabric net.Fabric
	// Kernel prices an operator on a healthy GPU of the cluster: its
	// kernels' device time, their count and the part bound by math. If nil,
	// Cost gives the device time of one kernel.
	Kernel func(op model.Op) (Kernel, error)
	// Cost is an operator's device time in seconds (used when Kernel is nil).
	Cost func(op model.Op) (float64, error)
	// Host is how the host issues kernels (host.go); the zero value models
	// no host.
	Host Host
	// Interference, if set, slows compute while a collective of the same
	// unit is in flight (interfere.go).
	Interference *Interference
	// Full simulates every replica instead of mirroring symmetric ones.
	Full bool
	// Algorithm picks the collective algorithm ("" = the net default, ring).
	Algorithm net.Algorithm
	// RingSteps runs every ring collective step by step (a flow per rank
	// per step) instead of as ring streams (net.Collective.Stream: a flow
	// per channel over all its hops). Streams are the default: the two
	// agree on uncontended rings, and a data-parallel ring over hundreds of
	// ranks costs a few flows instead of hundreds of thousands.
	RingSteps bool
	// Progress, if set, receives the fraction of the simulated units'
	// tasks done, now and then during the run.
	Progress func(fraction float64)
	// TPQuant, if set, quantizes the payload of every tensor-parallel
	// all-reduce on the wire, run with TPQuantAlgorithm ("" = Algorithm).
	// Nil keeps full-precision all-reduces.
	TPQuant          *net.Quantization
	TPQuantAlgorithm net.Algorithm
	// HealthyRoute, if set, is the path from device src to dst with no
	// fault at all (fault sweeps pass the healthy topology's routes). A
	// failed link or device then no longer forces every replica to be
	// simulated: a replica whose routes left the healthy ones is simulated
	// on its own, as one crossing a degraded link. Nil: any failure
	// simulates every replica.
	HealthyRoute func(src, dst int) []int32
	// CollectiveLaunchS is the fixed cost of every collective and transfer
	// that NCCL's tuner does not price (see Protocol) before its data moves
	// (the library's kernel launch and peer synchronization): its transfers
	// start that long after the last member arrives.
	CollectiveLaunchS float64
	// DispatchS is a floor on every collective's duration (0: none). The
	// host's issue of NCCL calls is modelled by Host instead.
	DispatchS float64
	// Protocol prices communication as NCCL runs it. All-reduce,
	// all-gather and reduce-scatter (full precision, default algorithm) go
	// through NCCL's tuner (net.NCCL: algorithm and protocol chosen by
	// size and communicator, its latency, its achieved bandwidth), computed
	// once per communicator and size. Other collectives and transfers pay
	// CollectiveLaunchS and carry their payload at the collective
	// efficiency of the slowest link technology on their routes
	// (hw.Link.CollectiveEfficiency).
	Protocol bool
	// ExactAllToAll simulates every expert-parallel all-to-all-v as flows.
	// By default the first one with a given routing matrix on a
	// communicator is simulated (with whatever else is in flight) and its
	// repeats, at every MoE block and micro-batch of the step, take its
	// duration.
	ExactAllToAll bool
}

// NCCLBaseLatencyS is the fixed latency NCCL's own cost model gives every
// ring collective with its low-latency protocol, 6.6 µs (baseLat, Ring/LL,
// in src/graph/tuning.cc); the per-hop latencies come on top from the
// links. Machine.Options charges it to the communication the tuner does
// not price (send/recv, all-to-all, broadcast).
const NCCLBaseLatencyS = 6.6e-6

// Result is a finished run.
type Result struct {
	Plan *workload.Plan
	// End is when the last task of any unit finished.
	End sim.Time
	// Units holds each unit's outcome, indexed like Plan.Units.
	Units []UnitResult
	// Collectives counts collectives launched on the network and those
	// whose duration was reused (isolated communicators); Flows the
	// network transfers.
	Collectives, Reused int
}

// UnitResult is one unit's outcome.
type UnitResult struct {
	// Simulated is false for a mirrored unit, whose times are those of
	// unit Mirror (a simulated unit at the same stage of another replica).
	Simulated bool
	Mirror    int
	// Start and End of every task of the unit's program (simulated units).
	Start, End []sim.Time
	// Slowdown is the straggler factor of each rank of the unit (1 = healthy);
	// the unit computes at its slowest rank's pace.
	Slowdown []float64
	// Nominal is each task's compute time on a healthy GPU (0 for communication).
	Nominal []sim.Time
}

type opsKey struct {
	p *model.Op
	n int
}

type progInfo struct {
	dependents [][]int32
	streams    [workload.NumStreams][]int32
	nominal    []sim.Time
	host       hostPlan
}

type unitState struct {
	remaining []int32
	started   []bool
	finished  []bool
	head      [workload.NumStreams]int32
	slow      float64
	done      int
	host      hostState
	busy      busyState
}

type rendezvous struct {
	arrived []int64 // unit<<32 | task
	pending int
	start   sim.Time
}

type commInfo struct {
	isolated bool
	sig      uint64
	// eff is the protocol efficiency on the communicator's links (1 when
	// Options.Protocol is off).
	eff float64
}

type engine struct {
	opt     Options
	k       *sim.Kernel
	comms   *net.Comms
	topo    *topo.Topology
	plan    *workload.Plan
	progs   []progInfo
	units   []unitState
	res     *Result
	simul   []bool
	rv      map[uint64]*rendezvous
	mirror  [][]int            // group -> mirror groups launched with it
	driven  []int              // group -> number of simulated member units
	info    [][]*commInfo      // group -> communicator -> info, filled on first use
	techEff map[string]float64 // link technology -> collective efficiency
	users   [][]int64          // link -> communicators using it (group<<20 | index)
	// quiet[h] is true for a data-parallel group whose collectives all
	// start after every member unit's tensor-parallel work (gradients
	// reduced after the backward, no ZeRO-3 gathers): they cannot overlap
	// in time with its members' TP collectives.
	quiet []bool
	tpOf  []int // group -> the unit whose TP group it is, or -1
	memo  map[uint64]sim.Time
	// wire is each group's per-GPU collective send rate (interference).
	wire []float64
}

// Run executes the plan until every task has finished.
func Run(ctx context.Context, plan *workload.Plan, opt Options) (*Result, error) {
	if opt.Fabric == nil || (opt.Cost == nil && opt.Kernel == nil) {
		return nil, fmt.Errorf("exec: Options needs a Fabric and a Kernel or Cost")
	}
	switch opt.Host.Mode {
	case "", Eager, CUDAGraphs:
	default:
		return nil, fmt.Errorf("exec: host mode %q is none of %v", opt.Host.Mode, ExecutionModes())
	}
	t := opt.Fabric.Topology()
	if t.NumRanks() < plan.Ranks {
		return nil, fmt.Errorf("the plan needs %d GPUs but the cluster has %d", plan.Ranks, t.NumRanks())
	}
	e := &engine{opt: opt, k: opt.Fabric.Kernel(), topo: t, plan: plan, rv: map[uint64]*rendezvous{},
		info: make([][]*commInfo, len(plan.Groups)), memo: map[uint64]sim.Time{}}
	e.comms = net.NewComms(opt.Fabric)
	e.res = &Result{Plan: plan, Units: make([]UnitResult, len(plan.Units))}
	if err := e.prepare(); err != nil {
		return nil, err
	}
	e.k.OnStall(e.describeStalls)
	if opt.Progress != nil {
		total := 0
		for u := range plan.Units {
			total += len(e.units[u].remaining)
		}
		e.k.Progress = func(sim.Time, uint64) {
			done := 0
			for u := range e.units {
				done += e.units[u].done
			}
			opt.Progress(float64(done) / float64(max(total, 1)))
		}
	}
	for u := range plan.Units {
		if e.simul[u] {
			e.startUnit(u)
		}
	}
	if err := e.k.Run(ctx); err != nil {
		return nil, err
	}
	for u := range plan.Units {
		if e.simul[u] && e.units[u].done < len(e.units[u].remaining) {
			return nil, fmt.Errorf("exec: run ended with unit %d blocked: %s", u, strings.Join(e.describeStalls(), "; "))
		}
	}
	return e.res, nil
}

// prepare prices the programs, picks the simulated units and the mirror
// groups, and finds isolated communicators.
func (e *engine) prepare() error {
	if err := e.price(); err != nil {
		return err
	}
	pl := e.plan
	e.pickSimulated()
	e.units = make([]unitState, len(pl.Units))
	for u, unit := range pl.Units {
		r := &e.res.Units[u]
		r.Simulated = e.simul[u]
		r.Slowdown = make([]float64, len(unit.Ranks))
		for i, rk := range unit.Ranks {
			r.Slowdown[i] = e.opt.Fabric.Slowdown(e.topo.RankDevice(rk))
		}
		if !e.simul[u] {
			continue
		}
		r.Mirror = u
		p := pl.Programs[unit.Program]
		st := &e.units[u]
		st.slow = 1
		for _, s := range r.Slowdown {
			st.slow = max(st.slow, s)
		}
		st.remaining = make([]int32, len(p.Tasks))
		st.started = make([]bool, len(p.Tasks))
		st.finished = make([]bool, len(p.Tasks))
		st.host = hostState{issued: make([]sim.Time, len(p.Tasks)), waitFor: -1}
		st.busy.task = -1
		for i, task := range p.Tasks {
			st.remaining[i] = int32(len(task.Deps))
		}
		r.Start = make([]sim.Time, len(p.Tasks))
		r.End = make([]sim.Time, len(p.Tasks))
		r.Nominal = e.progs[unit.Program].nominal
	}
	e.linkUsage()
	return nil
}

// price computes each program's dependents, stream lists, compute times
// and host schedule; tasks sharing an operator slice are priced once.
func (e *engine) price() error {
	cache := map[opsKey]taskCost{}
	kernel := e.opt.Kernel
	if kernel == nil {
		cost := e.opt.Cost
		kernel = func(o model.Op) (Kernel, error) {
			c, err := cost(o)
			return Kernel{DeviceS: c, Kernels: 1, MathS: c}, err
		}
	}
	for pi := range e.plan.Programs {
		p := &e.plan.Programs[pi]
		info := progInfo{dependents: make([][]int32, len(p.Tasks)), nominal: make([]sim.Time, len(p.Tasks))}
		for i, task := range p.Tasks {
			for _, d := range task.Deps {
				info.dependents[d] = append(info.dependents[d], int32(i))
			}
			info.streams[task.Stream] = append(info.streams[task.Stream], int32(i))
		}
		hp, err := e.planHost(p, kernel, cache)
		if err != nil {
			return err
		}
		for i := range p.Tasks {
			info.nominal[i] = hp.cost[i].D
		}
		info.host = hp
		e.progs = append(e.progs, info)
	}
	return nil
}

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
	rep := -1
	for r, units := range pl.Replicas {
		touched := full
		for _, u := range units {
			touched = touched || e.touched(u)
		}
		if touched || rep < 0 {
			for _, u := range units {
				e.simul[u] = true
			}
		}
		if !touched && rep < 0 {
			rep = r
		}
	}
	for r, units := range pl.Replicas {
		for i, u := range units {
			if !e.simul[u] {
				e.res.Units[u].Mirror = pl.Replicas[rep][i]
			}
			_ = r
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
	if u := e.tpOf[g]; u >= 0 && e.quiet[h] {
		for _, m := range e.plan.Groups[h].Units {
			if m == u {
				return false // h runs only after u's TP work is done
			}
		}
	}
	return true
}

// comm returns whether communicator c of group g is isolated, and the
// signature of its links and ranks' speeds (equal signatures, equal times).
func (e *engine) comm(g, c int) commInfo {
	if e.info[g] == nil {
		e.info[g] = make([]*commInfo, len(e.plan.Groups[g].Comms))
	}
	if ci := e.info[g][c]; ci != nil {
		return *ci
	}
	ranks := e.plan.Groups[g].Comms[c]
	h := fnv.New64a()
	var buf [8]byte
	put := func(x float64) {
		b := math.Float64bits(x)
		for i := range buf {
			buf[i] = byte(b >> (8 * i))
		}
		h.Write(buf[:])
	}
	ci := commInfo{isolated: true, eff: 1}
	put(float64(len(ranks)))
	for _, p := range e.routes(ranks) {
		put(float64(len(p)))
		for _, l := range p {
			lk := e.topo.Links[l]
			if e.opt.Protocol {
				ci.eff = min(ci.eff, e.linkEfficiency(lk.Tech))
			}
			put(lk.BandwidthBytesPerS * lk.Health)
			put(lk.LatencyS)
			for _, other := range e.users[l] {
				if ci.isolated && e.shares(g, c, other) {
					ci.isolated = false
				}
			}
		}
	}
	for _, rk := range ranks {
		put(e.opt.Fabric.Slowdown(e.topo.RankDevice(rk)))
	}
	ci.sig = h.Sum64()
	e.info[g][c] = &ci
	return ci
}

func (e *engine) startUnit(u int) {
	st := &e.units[u]
	if e.opt.Host.Mode != "" {
		e.advance(u)
		return
	}
	for i := range st.remaining {
		if st.remaining[i] == 0 {
			e.tryStart(u, int32(i))
		}
	}
}

func (e *engine) tryStart(u int, i int32) {
	st := &e.units[u]
	if st.started[i] || st.remaining[i] > 0 {
		return
	}
	hostOn := e.opt.Host.Mode != ""
	if hostOn && i >= st.host.next {
		return // the host has not issued it yet
	}
	prog := e.plan.Units[u].Program
	p := &e.plan.Programs[prog]
	task := &p.Tasks[i]
	if task.Stream.Serial() && e.progs[prog].streams[task.Stream][st.head[task.Stream]] != i {
		return
	}
	st.started[i] = true
	now := e.k.Now()
	hp := &e.progs[prog].host
	if task.Kind == workload.Compute {
		tc := &hp.cost[i]
		d, a := tc.D, tc.A
		if st.slow != 1 {
			d = sim.Time(float64(d) * st.slow)
			a += sim.Time(float64(tc.Star) * (st.slow - 1))
		}
		start, end := now, now+d
		if hostOn {
			h0 := st.host.issued[i]
			start = max(now, h0+tc.First)
			end = max(end, h0+a)
		}
		e.res.Units[u].Start[i] = start
		e.startCompute(u, i, now, d, end)
		return
	}
	if hostOn {
		// The NCCL kernel is enqueued when the host's call returns.
		if t := st.host.issued[i] + hp.issue[i]; t > now {
			e.k.At(t, func() { e.arrive(u, i, task) })
			return
		}
	}
	e.arrive(u, i, task)
}

// Handle completes a compute task (the kernel's handler argument is
// unit<<32|task); a task whose end was moved (interference) ignores its
// stale events.
func (e *engine) Handle(arg int) {
	u, i := arg>>32, int32(arg&0xffffffff)
	if e.units[u].finished[i] {
		return // a stale end of a task whose end moved earlier
	}
	if b := &e.units[u].busy; b.task == i {
		if e.k.Now() != b.end {
			return
		}
		b.task = -1
	}
	e.finish(u, i)
}

func (e *engine) finish(u int, i int32) {
	st := &e.units[u]
	now := e.k.Now()
	e.res.Units[u].End[i] = now
	if now > e.res.End {
		e.res.End = now
	}
	st.done++
	st.finished[i] = true
	prog := e.plan.Units[u].Program
	task := &e.plan.Programs[prog].Tasks[i]
	if task.Kind != workload.Compute {
		e.commEnd(u, task)
	}
	if task.Stream.Serial() {
		st.head[task.Stream]++
		list := e.progs[prog].streams[task.Stream]
		if h := st.head[task.Stream]; int(h) < len(list) {
			e.tryStart(u, list[h])
		}
	}
	for _, d := range e.progs[prog].dependents[i] {
		st.remaining[d]--
		if st.remaining[d] == 0 {
			e.tryStart(u, d)
		}
	}
	if st.host.waitFor == i {
		e.advance(u)
	}
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
	r.pending = 1 // held until every launch below is issued
	groups := append([]int{g}, e.mirror[g]...)
	for gi, gg := range groups {
		for c, ranks := range e.plan.Groups[gg].Comms {
			if task.Bytes <= 0 || len(ranks) < 2 {
				continue
			}
			ci := e.comm(gg, c)
			if gi > 0 && ci.isolated && ci.sig == e.comm(g, min(c, len(e.plan.Groups[g].Comms)-1)).sig {
				continue // a mirror's isolated copy takes exactly the driver's time
			}
			if task.Coll == workload.AllToAllV {
				if err := e.allToAllV(ci, ranks, task, &r.pending, done); err != nil {
					e.k.Fail(err)
					return
				}
				continue
			}
			key := ci.sig*31 + uint64(math.Float64bits(task.Bytes)) ^ uint64(len(task.Coll))<<56 ^ hashString(string(task.Coll))
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
				start := now
				sink := net.SinkFunc(func(int) {
					if isolated {
						e.memo[key] = e.k.Now() - start
					}
					done()
				})
				if err := e.opt.Fabric.Send(e.topo.RankDevice(ranks[0]), e.topo.RankDevice(ranks[1]), task.Bytes/ci.eff, sink, 0); err != nil {
					e.k.Fail(fmt.Errorf("exec: %s from rank %d to %d: %w", task.Name, ranks[0], ranks[1], err))
					return
				}
				continue
			}
			col := net.Collective{Op: net.Op(task.Coll), Bytes: task.Bytes, Ranks: ranks, Label: task.Name, Algorithm: e.opt.Algorithm,
				ProtocolEfficiency: ci.eff, Stream: !e.opt.RingSteps}
			if e.tuned(task) {
				col.Algorithm, col.ProtocolEfficiency = net.NCCL, 0
			}
			if q := e.opt.TPQuant; q != nil && task.Coll == model.AllReduce && task.Slot == workload.SlotTP {
				col.Quant = q
				if e.opt.TPQuantAlgorithm != "" {
					col.Algorithm = e.opt.TPQuantAlgorithm
				}
			}
			if _, err := e.comms.Start(col, func(res net.Result) {
				if isolated {
					e.memo[key] = res.End - res.Start
				}
				done()
			}); err != nil {
				e.k.Fail(fmt.Errorf("exec: %s on ranks %v: %w", task.Name, ranks, err))
				return
			}
		}
	}
	done()
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

// linkEfficiency is a link technology's collective efficiency (1 if
// unknown), looked up once per technology.
func (e *engine) linkEfficiency(tech string) float64 {
	if eff, ok := e.techEff[tech]; ok {
		return eff
	}
	eff := 1.0
	if l, ok := hw.LinkByName(tech); ok && l.CollectiveEfficiency > 0 {
		eff = l.CollectiveEfficiency
	}
	if e.techEff == nil {
		e.techEff = map[string]float64{}
	}
	e.techEff[tech] = eff
	return eff
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// describeStalls names blocked tasks when the event queue runs dry.
func (e *engine) describeStalls() []string {
	var out []string
	keys := make([]uint64, 0, len(e.rv))
	for k := range e.rv {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		r := e.rv[k]
		a := r.arrived[0]
		u, i := int(a>>32), int(a&0xffffffff)
		task := e.plan.Programs[e.plan.Units[u].Program].Tasks[i]
		out = append(out, fmt.Sprintf("%s (tag %d) waits for %d of %d units (unit %d arrived)",
			task.Name, task.Tag, e.driven[int(k>>32)]-len(r.arrived), e.driven[int(k>>32)], u))
		if len(out) >= 5 {
			break
		}
	}
	return out
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
