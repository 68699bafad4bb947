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
// network and repeats reuse its simulated duration (isolation.go: the
// memo is keyed by the communicator's signature as data, the operation and
// the payload, so distinct collectives never share a duration).
//
// Files: exec.go (options, result, Run), schedule.go (task start and
// finish), mirror.go (simulated and mirrored replicas), isolation.go
// (isolated communicators, signatures), launch.go (rendezvous and launch
// on the network), alltoallv.go, host.go, interfere.go, stats.go.
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
	"strings"

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
	// TPAllReduce, if set, is the algorithm every full-precision
	// tensor-parallel all-reduce runs with in place of NCCL's tuner:
	// net.Custom for an inference engine's custom all-reduce (which hands
	// what it does not serve back to the tuner).
	TPAllReduce net.Algorithm
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
	// efficiency of the link that limits their route
	// (hw.Link.CollectiveEfficiency; net.PathEfficiency), each pair of an
	// all-to-all-v its own.
	Protocol bool
	// ExactAllToAll simulates every expert-parallel all-to-all-v as flows.
	// By default the first one with a given routing matrix on a
	// communicator is simulated (with whatever else is in flight) and its
	// repeats, at every MoE block and micro-batch of the step, take its
	// duration.
	ExactAllToAll bool
}

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
	// Stretched is, for a compute task that interference slowed, the
	// device time it took on the unit (its slowest rank's pace): nil when
	// none was, 0 for every task not slowed.
	Stretched []sim.Time
	// Host is the unit's host clock when it issued its last task
	// (simulated units with a host model).
	Host sim.Time
}

type opsKey struct {
	p *model.Op
	n int
}

type engine struct {
	// ctx is the running plan's: pricing a plan of millions of tasks
	// takes seconds, and a Ctrl-C must not wait for it.
	ctx    context.Context
	opt    Options
	k      *sim.Kernel
	comms  *net.Comms
	topo   *topo.Topology
	plan   *workload.Plan
	progs  []progInfo
	units  []unitState
	res    *Result
	simul  []bool
	rv     map[uint64]*rendezvous
	mirror [][]int       // group -> mirror groups launched with it
	driven []int         // group -> number of simulated member units
	info   [][]*commInfo // group -> communicator -> info, filled on first use
	copies [][]issueCopy // driver group -> its collectives' copies (copiesOf)
	shapes map[shapeKey][]*net.Shape
	held   map[heldKey]int // SMs a request holds (engine.heldSMs)
	users  [][]int64       // link -> communicators using it (group<<20 | index)
	// quiet[h] is true for a data-parallel group whose collectives all
	// start after every member unit's tensor-parallel work (gradients
	// reduced after the backward, no ZeRO-3 gathers): they cannot overlap
	// in time with its members' TP collectives.
	quiet []bool
	tpOf  []int // group -> the unit whose TP group it is, or -1
	memo  map[memoKey]sim.Time
	// names interns the operation and algorithm names in memo and shape
	// keys: a key of small integers hashes several times faster than one
	// of strings, and issue looks keys up at every collective's start.
	names []string
	// bulkActive counts the data-parallel stream's collectives in flight
	// (gradient reductions, weight gathers: traffic that does not repeat
	// with every layer); bulkStarted counts those ever started. An
	// all-to-all-v's duration is memoized only from a run they left alone.
	bulkActive, bulkStarted int
	// sigs interns communicator signatures (commInfo.sig).
	sigs map[string]int32
	// wire is each group's per-GPU collective send rate (interference).
	wire []float64
	// mirrorOf is each unit's representative (pickSimulated).
	mirrorOf []int
	// resume continues the session's plan before (nil: none).
	resume *Resume

	// settingUp, polls and stop: the set-up's route lookups poll ctx
	// (routesStopped); the run's do not (it polls elsewhere, and a route
	// list cut short must not reach it).
	settingUp bool
	polls     int
	stop      error
}

// Resume is what a session's plan continues from the plan before it.
type Resume struct {
	// Host is each unit's host clock when it reaches the plan's first task:
	// where the plan before left it (UnitResult.Host), or later, up to the
	// end of the task it would have synchronised on.
	Host []sim.Time
	// Last is each program's task before its first (nil: none): whether a
	// captured graph continues across the plans.
	Last []*workload.Task
}

// Run executes the plan until every task has finished.
func Run(ctx context.Context, plan *workload.Plan, opt Options) (*Result, error) {
	s, err := NewSession(ctx, plan, opt)
	if err != nil {
		return nil, err
	}
	return s.Run(ctx, plan, nil)
}

// Session runs plans that share their units, groups and ranks one after
// another on the same fabric and clock, each from where the one before
// left off: a long decode run in segments of steps (core/job), so that
// only one segment's tasks are held at a time. What holds across plans is
// kept — the simulated units and mirrors, the communicators' isolation and
// signatures, the memoized collective durations — and each plan's tasks,
// times and host state are released when the next one runs. A plan must
// start when the one before it has left nothing in flight (no transfer, no
// rendezvous, no queued launch: every task done, as when each plan ends in
// a host synchronisation on all its work); its tasks then see exactly what
// they would have seen as the continuation of one plan.
type Session struct {
	e *engine
}

// NewSession prepares a session for plans shaped like plan: its units,
// groups, replicas and ranks, and (from its programs) which data-parallel
// groups reduce only after their members' tensor-parallel work, which must
// hold for every plan the session runs. ctx cancels the set-up, whose
// routing of every communicator takes minutes on half a million GPUs.
func NewSession(ctx context.Context, plan *workload.Plan, opt Options) (*Session, error) {
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
	e := &engine{ctx: ctx, opt: opt, k: opt.Fabric.Kernel(), topo: t, plan: plan, rv: map[uint64]*rendezvous{},
		info: make([][]*commInfo, len(plan.Groups)), memo: map[memoKey]sim.Time{}, sigs: map[string]int32{}}
	e.comms = net.NewComms(opt.Fabric)
	e.res = &Result{Plan: plan, Units: make([]UnitResult, len(plan.Units))}
	if err := e.setup(); err != nil {
		return nil, err
	}
	e.k.OnStall("exec", e.describeStalls)
	return &Session{e: e}, nil
}

// SetProgress replaces the run option Progress for the session's next runs.
func (s *Session) SetProgress(f func(fraction float64)) { s.e.opt.Progress = f }

// Simulated reports which units of plan a run with opt simulates (the
// others mirror one of them); ctx cancels it.
func Simulated(ctx context.Context, plan *workload.Plan, opt Options) ([]bool, error) {
	e := &engine{ctx: ctx, settingUp: true, opt: opt, topo: opt.Fabric.Topology(), plan: plan, res: &Result{Units: make([]UnitResult, len(plan.Units))}}
	e.pickSimulated()
	return e.simul, e.stop
}

// Run executes plan (shaped like the session's) until every task has
// finished, from the clock's current time; from, if set, continues the
// plan before (each host's clock and each program's task before).
func (s *Session) Run(ctx context.Context, plan *workload.Plan, from *Resume) (*Result, error) {
	e := s.e
	e.ctx, e.resume = ctx, from
	opt := e.opt
	if len(plan.Units) != len(e.simul) || len(plan.Groups) != len(e.info) {
		return nil, fmt.Errorf("exec: a session's plans must share their units and groups")
	}
	if plan != e.plan {
		e.copies, e.held = nil, nil // they hold the plan's ranks
	}
	e.plan = plan
	e.progs = nil
	e.res = &Result{Plan: plan, Units: make([]UnitResult, len(plan.Units))}
	for u := range plan.Units {
		e.res.Units[u].Mirror = e.mirrorOf[u]
	}
	if err := e.prepare(); err != nil {
		return nil, err
	}
	e.k.Progress = nil
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
			if from != nil && u < len(from.Host) {
				e.units[u].host.at, e.units[u].host.resumed = from.Host[u], true
			}
			e.startUnit(u)
		}
	}
	e.resume = nil
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

// setup picks the simulated units and the mirror groups, and finds
// isolated communicators: what holds for every plan of a session.
func (e *engine) setup() error {
	e.settingUp = true
	defer func() { e.settingUp = false }()
	e.pickSimulated()
	e.linkUsage()
	e.mirrorOf = make([]int, len(e.plan.Units))
	for u := range e.plan.Units {
		e.mirrorOf[u] = e.res.Units[u].Mirror
	}
	return e.stop
}

// routesStopped polls the set-up's context every 64th route lookup and
// remembers a cancellation; the set-up's lookups after it are skipped, and
// it returns the cancellation.
func (e *engine) routesStopped() bool {
	if e.stop == nil && e.settingUp && e.ctx != nil {
		if e.polls++; e.polls%64 == 0 {
			e.stop = e.ctx.Err()
		}
	}
	return e.stop != nil
}

// prepare prices the programs and sets up the simulated units' state.
func (e *engine) prepare() error {
	if err := e.price(); err != nil {
		return err
	}
	pl := e.plan
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
	return nil
}

// canceled polls the run's context every 4,096th task index i.
func (e *engine) canceled(i int) error {
	if e.ctx == nil || i%4096 != 0 {
		return nil
	}
	return e.ctx.Err()
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
			if err := e.canceled(i); err != nil {
				return err
			}
			for _, d := range task.Deps {
				info.dependents[d] = append(info.dependents[d], int32(i))
			}
			info.streams[task.Stream] = append(info.streams[task.Stream], int32(i))
		}
		var prev *workload.Task
		if e.resume != nil && pi < len(e.resume.Last) {
			prev = e.resume.Last[pi]
		}
		hp, err := e.planHost(p, kernel, cache, prev)
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
