// Package training is the "training" scenario kind: one training step of a
// model on a cluster under a parallel layout, simulated by package exec over
// the compute model and the congestion-aware network.
package training

import (
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Checked(kind(), Check)
}

// Check makes a run's checks before it simulates: the machine (cluster,
// GPU, fault device names), the layout on its GPU count, the timeline ranks.
func Check(s *spec.Training) error {
	m, err := exec.NewMachine(s.Cluster, s.GPU, s.Faults, s.Seed)
	if err != nil {
		return err
	}
	t, err := Layout(s, m.Fabric.Topology().NumRanks())
	if err != nil {
		return err
	}
	return CheckTimelineRanks(s.TimelineRanks, t.Par.TP*t.Par.PP*t.Par.DP)
}

func kind() scenario.Kind {
	return scenario.Define("training",
		"one training step (DP/ZeRO, TP, SP, PP schedules, recompute) on compute + network: step time, MFU, timeline, memory",
		func(env scenario.Env, s *spec.Training) (scenario.Result, error) {
			out, err := Simulate(env, s, nil)
			if err != nil {
				return scenario.Result{}, err
			}
			return out.Result(), nil
		})
}

// SummaryRow is the one row of the training "summary" table. Times are of
// the rank that finishes last (the critical path), whose compute_s +
// exposed_comm_s + bubble_s = step_time_s.
type SummaryRow struct {
	// StepTimeS is the simulated time of one step (all ranks done).
	StepTimeS float64 `arrow:"step_time_s"`
	// TokensPerS is global batch × sequence length / step time.
	TokensPerS float64 `arrow:"tokens_per_s"`
	// MFU: model FLOPs (matmuls, the Megatron formula's count) per second
	// over the GPUs' dense peak; HFU adds recomputed FLOPs.
	MFU float64 `arrow:"mfu"`
	HFU float64 `arrow:"hfu"`
	// ComputeS: the critical rank's GPU busy time; ExposedCommS: time it
	// communicated without computing; BubbleS: time it waited for neither
	// (pipeline bubbles, waiting for peers).
	ComputeS     float64 `arrow:"compute_s"`
	ExposedCommS float64 `arrow:"exposed_comm_s"`
	BubbleS      float64 `arrow:"bubble_s"`
	// MemoryPeakBytes is the largest per-GPU memory; Fits whether it fits
	// in the GPU's HBM (HBMBytes).
	MemoryPeakBytes float64 `arrow:"memory_peak_bytes"`
	HBMBytes        float64 `arrow:"hbm_bytes"`
	Fits            bool    `arrow:"fits"`
	// ModelFLOPs per step (all GPUs); GPUs used; micro-batches per replica.
	ModelFLOPs   float64 `arrow:"model_flops"`
	GPUs         int     `arrow:"gpus"`
	MicroBatches int     `arrow:"micro_batches"`
	// SimulatedRanks ran their own tasks; the others mirrored a symmetric
	// replica. NetCollectives ran on the network; ReusedCollectives reused
	// the simulated time of an identical collective on an isolated
	// communicator.
	SimulatedRanks    int `arrow:"simulated_ranks"`
	NetCollectives    int `arrow:"net_collectives"`
	ReusedCollectives int `arrow:"reused_collectives"`
}

// RankRow is one rank of the "ranks" table.
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

// Outcome is a simulated training step.
type Outcome struct {
	Summary  SummaryRow
	Ranks    []RankRow
	Timeline []TimelineRow
	Memory   []MemoryRow
	Plan     *workload.TrainingPlan
	Exec     *exec.Result
	Machine  *exec.Machine
}

// Result packs the tables.
func (o *Outcome) Result() scenario.Result {
	var r scenario.Result
	r.Add("summary", []SummaryRow{o.Summary})
	r.Add("ranks", o.Ranks)
	r.Add("timeline", o.Timeline)
	r.Add("memory", o.Memory)
	return r
}

// Layout converts a validated spec to the workload's training layout; gpus
// is the cluster's GPU count (DP and the global batch default from it).
func Layout(s *spec.Training, gpus int) (workload.Training, error) {
	m, _ := s.Model.Resolve()
	par := s.Parallel
	var p spec.Problems
	par.Resolve(gpus, &p, "parallel")
	if err := p.Err(); err != nil {
		return workload.Training{}, err
	}
	t := workload.Training{Model: m, SeqLen: s.SeqLen, DType: hw.DType(s.DType), GradDType: hw.DType(s.GradDType),
		UnfusedAttention: s.UnfusedAttention,
		Par: workload.Parallel{TP: par.TP, PP: par.PP, DP: par.DP, MicroBatch: par.MicroBatch, GlobalBatch: par.GlobalBatch,
			Schedule: workload.Schedule(par.Schedule), VirtualStages: par.VirtualStages, SequenceParallel: par.SequenceParallel,
			Recompute: model.Recompute(par.Recompute), ZeRO: par.ZeRO, OverlapGradReduce: par.OverlapGradReduce,
			BucketParams: par.BucketParams, OverlapTPComm: par.OverlapTPComm}}
	for _, fp := range t.Check() {
		path := fp.Field
		switch path {
		case "seq_len":
		default:
			if len(path) < 6 || path[:6] != "model." {
				path = spec.Field("parallel", path)
			}
		}
		p.Addf(path, "%s", fp.Message)
	}
	return t, p.Err()
}

// Simulate runs a validated spec. modify, if set, changes the machine
// (link health, failed devices, stragglers on m.Fabric) after the spec's
// faults and before the step: fault sweeps use it to vary one cluster.
func Simulate(env scenario.Env, s *spec.Training, modify func(m *exec.Machine) error) (*Outcome, error) {
	var t workload.Training
	var plan *workload.TrainingPlan
	job := Job{Cluster: s.Cluster, GPU: s.GPU, Faults: s.Faults, Seed: s.Seed,
		FullSimulation: s.FullSimulation, RingSteps: s.RingSteps, TimelineRanks: s.TimelineRanks}
	run, err := job.Run(env, modify, func(gpus int) (*workload.Plan, []workload.Memory, error) {
		var err error
		if t, err = Layout(s, gpus); err != nil {
			return nil, nil, err
		}
		if plan, err = workload.BuildTraining(t); err != nil {
			return nil, nil, err
		}
		return plan.Plan, plan.Memory, nil
	})
	if err != nil {
		return nil, err
	}
	o := &Outcome{Plan: plan, Exec: run.Exec, Machine: run.Machine, Ranks: run.Ranks, Timeline: run.Timeline, Memory: run.Memory}
	stats := run.Exec.Ranks()
	crit := critical(stats)
	step := run.Exec.End.Seconds()
	gpus := plan.Ranks
	peakFlops := run.Machine.GPU.Peak(t.DType) * float64(gpus)
	sum := SummaryRow{StepTimeS: step, MemoryPeakBytes: run.PeakBytes, HBMBytes: run.HBMBytes, Fits: run.PeakBytes <= run.HBMBytes,
		ModelFLOPs: plan.ModelFLOPs, GPUs: gpus, MicroBatches: t.MicroBatches(), SimulatedRanks: run.SimulatedRanks,
		NetCollectives: run.Exec.Collectives, ReusedCollectives: run.Exec.Reused}
	if step > 0 {
		sum.TokensPerS = plan.Tokens / step
		sum.MFU = plan.ModelFLOPs / step / peakFlops
		sum.HFU = plan.HardwareFLOPs / step / peakFlops
	}
	if crit >= 0 {
		c := stats[crit]
		sum.ComputeS, sum.ExposedCommS = c.Compute.Seconds(), c.ExposedComm.Seconds()
		sum.BubbleS = max(0, step-sum.ComputeS-sum.ExposedCommS)
	}
	o.Summary = sum
	return o, nil
}

// Job is what the training and inference kinds share: a plan run on a
// simulated cluster, reported per rank, per stage's memory and as a timeline.
type Job struct {
	Cluster        spec.Cluster
	GPU            string
	Faults         spec.Faults
	Seed           uint64
	FullSimulation bool
	RingSteps      bool
	TimelineRanks  []int
}

// JobRun is a finished Job with its shared tables.
type JobRun struct {
	Machine  *exec.Machine
	Exec     *exec.Result
	Ranks    []RankRow
	Timeline []TimelineRow
	Memory   []MemoryRow
	// PeakBytes is the largest stage's memory per GPU, HBMBytes one GPU's.
	PeakBytes, HBMBytes float64
	SimulatedRanks      int
}

// Run builds the machine, lets modify change it (a fault sweep's faults),
// builds the plan for the cluster's GPU count and runs it.
func (j Job) Run(env scenario.Env, modify func(m *exec.Machine) error,
	build func(gpus int) (*workload.Plan, []workload.Memory, error)) (*JobRun, error) {
	m, err := exec.NewMachine(j.Cluster, j.GPU, j.Faults, j.Seed)
	if err != nil {
		return nil, err
	}
	if modify != nil {
		if err := modify(m); err != nil {
			return nil, err
		}
	}
	plan, mems, err := build(m.Fabric.Topology().NumRanks())
	if err != nil {
		return nil, err
	}
	if err := CheckTimelineRanks(j.TimelineRanks, plan.Ranks); err != nil {
		return nil, err
	}
	if err := env.Canceled(); err != nil {
		return nil, err
	}
	opt := m.Options(j.FullSimulation)
	opt.RingSteps = j.RingSteps
	opt.Progress = env.Progress
	res, err := exec.Run(env.Context(), plan, opt)
	if err != nil {
		return nil, err
	}
	env.Report(1)
	hbm := float64(m.GPU.HBMBytes)
	r := &JobRun{Machine: m, Exec: res, Memory: MemoryRows(mems, hbm), HBMBytes: hbm}
	for _, mem := range mems {
		r.PeakBytes = max(r.PeakBytes, mem.Total())
	}
	stats := res.Ranks()
	r.Ranks = RankRows(plan, stats, m, func(stage int) float64 { return mems[stage].Total() }, hbm)
	for _, st := range stats {
		if st.Simulated {
			r.SimulatedRanks++
		}
	}
	r.Timeline = TimelineRows(res, TimelineRanks(j.TimelineRanks, plan, m))
	return r, nil
}

// critical is the index of the rank that finishes last (lowest rank on ties).
func critical(stats []exec.RankStats) int {
	best := -1
	for i, s := range stats {
		if best < 0 || s.End > stats[best].End {
			best = i
		}
	}
	return best
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
// each stage of replica 0 plus every straggler's rank.
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
	for r := 0; r < pl.Ranks; r++ {
		if m.Fabric.Slowdown(t.RankDevice(r)) != 1 {
			out = append(out, r)
		}
	}
	return out
}

// TimelineRows converts a run's spans for some ranks to rows.
func TimelineRows(res *exec.Result, ranks []int) []TimelineRow {
	spans := res.Timeline(ranks)
	rows := make([]TimelineRow, len(spans))
	for i, s := range spans {
		rows[i] = TimelineRow{Rank: s.Rank, Stream: s.Stream, Name: s.Name, StartS: s.Start.Seconds(),
			EndS: s.End.Seconds(), Bytes: s.Bytes, FLOPs: s.FLOPs, MicroBatch: s.MicroBatch}
	}
	return rows
}
