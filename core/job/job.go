// Package job is the job the plan-based scenario kinds share (training,
// inference, and the fault sweeps over them): a validated spec compiled to a
// workload layout and plan (layout.go), a machine built from its cluster,
// GPU and faults (compile.Machine), the plan run on it by package exec, and
// the tables every such kind reports (ranks, timeline, memory); and the
// collective run (collective.go) the collective kind and a fault sweep over
// a collective share. It sits below the scenario drivers (which must not
// import each other) and above compile, exec and workload.
package job

import (
	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Job is a plan run on a simulated cluster, reported per rank, per stage's
// memory and as a timeline: what the training and inference kinds share.
type Job struct {
	// Path is where the job's spec sits in the document ("" at the top,
	// "training" as a fault sweep's base): compile errors carry it.
	Path           string
	Cluster        spec.Cluster
	GPU            spec.GPU
	Faults         spec.Faults
	Seed           uint64
	FullSimulation bool
	RingSteps      bool
	TimelineRanks  []int
	// Host is how the ranks' hosts issue kernels (HostOf).
	Host exec.Host
	// TPAllReduce is the algorithm of the tensor-parallel all-reduces
	// (exec.Options.TPAllReduce; "" NCCL's tuner).
	TPAllReduce net.Algorithm
	// SegmentSteps is the steps per segment of a stepped run (RunStepped):
	// 0 is the package's SegmentSteps, −1 runs the whole plan at once.
	SegmentSteps int
}

// Define is a plan-based kind: check makes its run's checks before it
// simulates (Kind.Check), and a run is simulate's outcome as tables.
func Define[T any, S interface {
	*T
	scenario.Spec
}, O interface{ Result() scenario.Result }](name, doc string,
	simulate func(env scenario.Env, s S, modify func(m *exec.Machine) error) (O, error), check func(s S) error) scenario.Kind {
	return scenario.Checked(scenario.Define(name, doc, func(env scenario.Env, s S) (scenario.Result, error) {
		out, err := simulate(env, s, nil)
		if err != nil {
			return scenario.Result{}, err
		}
		return out.Result(), nil
	}), check)
}

// HostOf is the exec host model for a spec's execution mode and host-cost
// overrides; autograd is true in training. In training, cuda_graphs
// replays every task from graphs (one per micro-batch's pass).
func HostOf(mode string, c spec.HostCosts, autograd bool) exec.Host {
	if mode == "" {
		mode = exec.Eager
	}
	return exec.Host{Mode: mode, Autograd: autograd, ForwardOpS: c.ForwardOpS, BackwardOpS: c.BackwardOpS,
		CollectiveS: c.CollectiveS, MoEOpS: c.MoEOpS}
}

// Finished is a finished Job with its shared tables.
type Finished struct {
	Machine *exec.Machine
	// Exec is the run's result (nil for a run in segments: RunStepped).
	Exec *exec.Result
	// End is when the last task finished; Collectives and Reused count
	// the collectives launched on the network and those that reused a
	// memoized duration (exec.Result).
	End                 sim.Time
	Collectives, Reused int
	// Segments is the number of plans run one after another (1: the
	// whole plan at once).
	Segments int
	Ranks    []RankRow
	// Stats are the ranks' statistics the ranks table shows, in rank order.
	Stats    []exec.RankStats
	Timeline []TimelineRow
	Memory   []MemoryRow
	// PeakBytes is the largest stage's memory per GPU, HBMBytes one GPU's.
	PeakBytes, HBMBytes float64
	SimulatedRanks      int
	mems                []workload.Memory
	marks               map[markKey]sim.Time
}

type markKey struct {
	unit int
	name string
}

// Options are the run options of the job on machine m: the machine's
// (exec.Machine.Options), with the job's ring steps and host model.
func (j Job) Options(m *exec.Machine) exec.Options {
	opt := m.Options(j.FullSimulation)
	opt.RingSteps = j.RingSteps
	opt.TPAllReduce = j.TPAllReduce
	if j.Host.Mode != "" {
		opt.Host = j.Host
	}
	return opt
}

// Run builds the machine, lets modify change it (a fault sweep's faults),
// builds the plan for the cluster's GPU count and runs it.
func (j Job) Run(env scenario.Env, modify func(m *exec.Machine) error,
	build func(gpus int) (*workload.Plan, []workload.Memory, error)) (*Finished, error) {
	m, err := j.machine(env, modify)
	if err != nil {
		return nil, err
	}
	plan, mems, err := build(m.Fabric.Topology().NumRanks())
	if err != nil {
		return nil, err
	}
	return j.runWhole(env, m, plan, mems)
}

// machine builds the job's machine (stopping when env is canceled) and
// lets modify change it.
func (j Job) machine(env scenario.Env, modify func(m *exec.Machine) error) (*exec.Machine, error) {
	m, err := compile.MachineContext(env.Context(), j.Path, j.Cluster, j.GPU, j.Faults, j.Seed)
	if err != nil {
		return nil, err
	}
	if modify != nil {
		if err := modify(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// runWhole runs a whole plan on m.
func (j Job) runWhole(env scenario.Env, m *exec.Machine, plan *workload.Plan, mems []workload.Memory) (*Finished, error) {
	if err := CheckTimelineRanks(j.TimelineRanks, plan.Ranks); err != nil {
		return nil, err
	}
	if err := env.Canceled(); err != nil {
		return nil, err
	}
	opt := j.Options(m)
	opt.Progress = env.Progress
	if err := j.healthyRoutes(env, m, &opt); err != nil {
		return nil, err
	}
	res, err := exec.Run(env.Context(), plan, opt)
	if err != nil {
		return nil, err
	}
	env.Report(1)
	r := j.finished(m, mems)
	r.Exec, r.End, r.Collectives, r.Reused, r.Segments = res, res.End, res.Collectives, res.Reused, 1
	if err := env.Canceled(); err != nil {
		return nil, err
	}
	r.setRanks(plan, res.Ranks())
	if r.Timeline, err = TimelineRows(res, TimelineRanks(j.TimelineRanks, plan, m), env.Canceled); err != nil {
		return nil, err
	}
	return r, nil
}

// healthyRoutes gives exec the cluster's routes without its faults where
// a device or link has failed: exec then simulates the replicas whose
// routes changed and mirrors the rest, as a fault sweep's samples run,
// instead of simulating every replica (a failed cable on 65,536 GPUs took
// 350 s and 18 GB so).
func (j Job) healthyRoutes(env scenario.Env, m *exec.Machine, opt *exec.Options) error {
	if opt.Full || !m.Fabric.Topology().Failed() {
		return nil
	}
	ref, err := compile.TopologyContext(env.Context(), j.Path, j.Cluster)
	if err != nil {
		return err
	}
	opt.HealthyRoute = HealthyRoute(ref)
	return nil
}

// HealthyRoute is exec.Options.HealthyRoute from ref, the cluster never
// faulted: its route between two devices, nil where even it has none.
func HealthyRoute(ref *topo.Topology) func(src, dst int) []int32 {
	return func(src, dst int) []int32 {
		p, _ := ref.Route(src, dst)
		return p
	}
}

// finished is a Finished with the machine's and the memory's fields.
func (j Job) finished(m *exec.Machine, mems []workload.Memory) *Finished {
	hbm := float64(m.GPU.HBMBytes)
	r := &Finished{Machine: m, Memory: MemoryRows(mems, hbm), HBMBytes: hbm, mems: mems}
	for _, mem := range mems {
		r.PeakBytes = max(r.PeakBytes, mem.Total())
	}
	return r
}

// setRanks sets the ranks table from the ranks' statistics.
func (r *Finished) setRanks(plan *workload.Plan, stats []exec.RankStats) {
	r.Stats = stats
	r.Ranks = RankRows(plan, stats, r.Machine, func(stage int) float64 { return r.mems[stage].Total() }, r.HBMBytes)
	for _, st := range stats {
		if st.Simulated {
			r.SimulatedRanks++
		}
	}
}

// MarkEnd is when the task unit u's program marks with name ended (see
// exec.Result.MarkEnd); a stepped run knows the marks it was asked for.
func (r *Finished) MarkEnd(u int, name string) (sim.Time, bool) {
	if r.Exec != nil {
		return r.Exec.MarkEnd(u, name)
	}
	t, ok := r.marks[markKey{u, name}]
	return t, ok
}

// MemoryColumns are the memory columns of the training and inference
// summaries (embedded in both, so their names and meaning are one).
type MemoryColumns struct {
	// MemoryPeakBytes is the largest per-GPU memory; Fits whether it fits
	// in the GPU's HBM (HBMBytes).
	MemoryPeakBytes float64 `arrow:"memory_peak_bytes"`
	HBMBytes        float64 `arrow:"hbm_bytes"`
	Fits            bool    `arrow:"fits"`
}

// SimulationColumns are the training and inference summaries' account of
// what was simulated.
type SimulationColumns struct {
	// SimulatedRanks ran their own tasks; the others mirrored a symmetric
	// replica. NetCollectives ran on the network; ReusedCollectives reused
	// the simulated time of an identical collective on an isolated
	// communicator.
	SimulatedRanks    int `arrow:"simulated_ranks"`
	NetCollectives    int `arrow:"net_collectives"`
	ReusedCollectives int `arrow:"reused_collectives"`
}

// Tables are the run's tables with its kind's summary row first: summary,
// ranks, timeline, memory.
func (r *Finished) Tables(summary any) scenario.Result {
	var out scenario.Result
	out.Add("summary", summary)
	out.Add("ranks", r.Ranks)
	out.Add("timeline", r.Timeline)
	out.Add("memory", r.Memory)
	return out
}

// MemoryColumns are the run's summary memory columns.
func (r *Finished) MemoryColumns() MemoryColumns {
	return MemoryColumns{MemoryPeakBytes: r.PeakBytes, HBMBytes: r.HBMBytes, Fits: r.PeakBytes <= r.HBMBytes}
}

// SimulationColumns are the run's summary simulation columns.
func (r *Finished) SimulationColumns() SimulationColumns {
	return SimulationColumns{SimulatedRanks: r.SimulatedRanks, NetCollectives: r.Collectives, ReusedCollectives: r.Reused}
}

// MemoryRows lists each stage's memory by category.
func MemoryRows(mems []workload.Memory, hbm float64) []MemoryRow {
	var rows []MemoryRow
	for s, m := range mems {
		for _, c := range []struct {
			name string
			v    float64
		}{{"weights", m.Weights}, {"gradients", m.Gradients}, {"optimizer", m.Optimizer},
			{"activations", m.Activations}, {"kv_cache", m.KVCache}, {"ssm_state", m.SSMState},
			{"workspace", m.Workspace}, {"total", m.Total()}} {
			rows = append(rows, MemoryRow{Stage: s, Category: c.name, Bytes: c.v, HBMBytes: hbm})
		}
	}
	return rows
}

// RankRows converts rank statistics to rows; memory gives a stage's bytes per GPU.
func RankRows(pl *workload.Plan, stats []exec.RankStats, m *exec.Machine, memory func(stage int) float64, hbm float64) []RankRow {
	t := m.Fabric.Topology()
	rows := make([]RankRow, len(stats))
	for i, s := range stats {
		u := pl.Units[s.Unit]
		tpRank := 0
		for k, r := range u.Ranks {
			if r == s.Rank {
				tpRank = k
			}
		}
		mem := memory(u.Stage)
		rows[i] = RankRow{Rank: s.Rank, Stage: u.Stage, Replica: u.Replica, TPRank: tpRank,
			Device: t.Devices[t.RankDevice(s.Rank)].Name, Simulated: s.Simulated,
			MirrorRank: pl.Units[s.MirrorOf].Ranks[tpRank], EndS: s.End.Seconds(), ComputeS: s.Compute.Seconds(),
			CommS: s.Comm.Seconds(), ExposedCommS: s.ExposedComm.Seconds(), IdleS: s.Idle.Seconds(),
			Slowdown: s.Slowdown, MemoryBytes: mem, Fits: mem <= hbm}
	}
	return rows
}

// CheckTimelineRanks requires every asked rank to exist in a plan of ranks
// ranks ([-1] alone lists none).
func CheckTimelineRanks(asked []int, ranks int) error {
	if len(asked) == 1 && asked[0] == -1 {
		return nil
	}
	var p spec.Problems
	for i, r := range asked {
		if r < 0 || r >= ranks {
			p.Addf(spec.Index("timeline_ranks", i), "must be a rank in [0, %d) (or [-1] alone for none), got %d", ranks, r)
		}
	}
	return p.Err()
}

// TimelineRanks are the ranks to list: the spec's, or the first rank of
// each stage of replica 0 plus the first spec.TimelineStragglers
// stragglers' ranks (a spec may slow every GPU of a large cluster, whose
// tasks would not fit in memory as rows).
func TimelineRanks(asked []int, pl *workload.Plan, m *exec.Machine) []int {
	if len(asked) == 1 && asked[0] == -1 {
		return nil
	}
	if len(asked) > 0 {
		return asked
	}
	var out []int
	for _, u := range pl.Replicas[0] {
		out = append(out, pl.Units[u].Ranks[0])
	}
	t := m.Fabric.Topology()
	for r, n := 0, 0; r < pl.Ranks && n < spec.TimelineStragglers; r++ {
		if m.Fabric.Slowdown(t.RankDevice(r)) != 1 {
			out = append(out, r)
			n++
		}
	}
	return out
}

// TimelineRows converts a run's spans for some ranks to rows, polling
// canceled (if set) as it goes: a timeline of millions of spans takes
// seconds.
func TimelineRows(res *exec.Result, ranks []int, canceled func() error) ([]TimelineRow, error) {
	rows := make([]TimelineRow, 0, res.Spans(ranks))
	err := res.EachSpan(ranks, func(s exec.Span) error {
		if canceled != nil && len(rows)%65536 == 0 {
			if err := canceled(); err != nil {
				return err
			}
		}
		rows = append(rows, TimelineRow{Rank: s.Rank, Stream: s.Stream, Name: s.Name, StartS: s.Start.Seconds(),
			EndS: s.End.Seconds(), Bytes: s.Bytes, FLOPs: s.FLOPs, MicroBatch: s.MicroBatch})
		return nil
	})
	return rows, err
}

// RankRow is one rank of the "ranks" table (training and inference).
type RankRow struct {
	Rank    int `arrow:"rank"`
	Stage   int `arrow:"stage"`
	Replica int `arrow:"replica"`
	TPRank  int `arrow:"tp_rank"`
	// Device is the GPU's name in the topology.
	Device string `arrow:"device"`
	// Simulated is false when the rank mirrors MirrorRank (same stage and
	// TP index of a symmetric replica), whose times are its own.
	Simulated    bool    `arrow:"simulated"`
	MirrorRank   int     `arrow:"mirror_rank"`
	EndS         float64 `arrow:"end_s"`
	ComputeS     float64 `arrow:"compute_s"`
	CommS        float64 `arrow:"comm_s"`
	ExposedCommS float64 `arrow:"exposed_comm_s"`
	IdleS        float64 `arrow:"idle_s"`
	Slowdown     float64 `arrow:"slowdown"`
	MemoryBytes  float64 `arrow:"memory_bytes"`
	Fits         bool    `arrow:"fits"`
}

// TimelineRow is one task on one rank ("timeline" table).
type TimelineRow struct {
	Rank int `arrow:"rank"`
	// Stream: compute, tp, dp or pp.
	Stream string  `arrow:"stream"`
	Name   string  `arrow:"name"`
	StartS float64 `arrow:"start_s"`
	EndS   float64 `arrow:"end_s"`
	// Bytes of a communication's payload; FLOPs of a compute task.
	Bytes float64 `arrow:"bytes"`
	FLOPs float64 `arrow:"flops"`
	// MicroBatch (training) or decode step (inference; 0 = prefill), -1
	// for per-step work.
	MicroBatch int `arrow:"micro_batch"`
}

// MemoryRow is one category of one stage's per-GPU memory ("memory" table).
type MemoryRow struct {
	Stage int `arrow:"stage"`
	// Category: weights, gradients, optimizer, activations, kv_cache,
	// ssm_state, workspace, total.
	Category string  `arrow:"category"`
	Bytes    float64 `arrow:"bytes"`
	HBMBytes float64 `arrow:"hbm_bytes"`
}
