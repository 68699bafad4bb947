// Package training is the "training" scenario kind: one training step of a
// model on a cluster under a parallel layout, simulated by package exec over
// the compute model and the congestion-aware network.
package training

import (
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Kind registers the scenario.
func Kind() scenario.Kind {
	return job.Define("training",
		"one training step (DP/ZeRO, TP, SP, CP, PP schedules, recompute, EP) on compute + network: step time, MFU, timeline, memory",
		Simulate, Check)
}

// Check makes a run's checks before it simulates: the machine (cluster,
// GPU, fault device names), the layout on its GPU count, the timeline ranks.
func Check(s *spec.Training) error { return job.CheckTraining("", s, true) }

// SummaryRow is the one row of the training "summary" table. Times are of
// the rank that finishes last (the critical path), whose compute_s +
// exposed_comm_s + bubble_s = step_time_s.
type SummaryRow struct {
	// StepTimeS is the simulated time of one step (all ranks done).
	StepTimeS float64 `arrow:"step_time_s"`
	// TokensPerS is global batch × sequence length / step time.
	TokensPerS float64 `arrow:"tokens_per_s"`
	// MFU: model FLOPs (matmuls, the Megatron formula's count, independent
	// of the routing) per second over the GPUs' dense peak in the run's
	// dtype (an fp8 run's over the FP8 peak, twice the BF16 one on
	// Hopper: its BF16-peak MFU is twice the column); HFU counts the
	// matmuls the simulated ranks run: recomputation, and under imbalanced
	// routing the expert tokens each rank's program processes.
	MFU float64 `arrow:"mfu"`
	HFU float64 `arrow:"hfu"`
	// ComputeS: the critical rank's GPU busy time; ExposedCommS: time it
	// communicated without computing; BubbleS: time it waited for neither
	// (pipeline bubbles, waiting for peers, waiting for its host to issue
	// kernels, and the stretch of compute slowed by overlapped collectives:
	// compute_s is the kernels' own device time).
	ComputeS     float64 `arrow:"compute_s"`
	ExposedCommS float64 `arrow:"exposed_comm_s"`
	BubbleS      float64 `arrow:"bubble_s"`
	// Memory: memory_peak_bytes, hbm_bytes, fits.
	job.MemoryColumns
	// ModelFLOPs per step (all GPUs); GPUs used; micro-batches per replica.
	ModelFLOPs   float64 `arrow:"model_flops"`
	GPUs         int     `arrow:"gpus"`
	MicroBatches int     `arrow:"micro_batches"`
	// simulated_ranks, net_collectives, reused_collectives.
	job.SimulationColumns
	// Mixture of experts (1, 0, 0 for dense models): the most loaded EP
	// rank's expert tokens over the mean, and the fractions of routed
	// tokens dropped over capacity and of processed slots that are padding.
	ExpertLoadMax float64 `arrow:"expert_load_max"`
	TokensDropped float64 `arrow:"tokens_dropped"`
	TokensPadded  float64 `arrow:"tokens_padded"`
}

// Outcome is a simulated training step: the job's run (machine, exec
// result, ranks, timeline, memory), the plan and the summary.
type Outcome struct {
	*job.Finished
	Summary SummaryRow
	Plan    *workload.TrainingPlan
}

// Result packs the tables.
func (o *Outcome) Result() scenario.Result { return o.Tables([]SummaryRow{o.Summary}) }

// Simulate runs a validated spec (job.Training). modify, if set, changes the machine
// (link health, failed devices, stragglers on m.Fabric) after the spec's
// faults and before the step: fault sweeps use it to vary one cluster.
func Simulate(env scenario.Env, s *spec.Training, modify func(m *exec.Machine) error) (*Outcome, error) {
	var t workload.Training
	var plan *workload.TrainingPlan
	run, err := job.Training(s).Run(env, modify, func(gpus int) (*workload.Plan, []workload.Memory, error) {
		var err error
		if t, plan, err = job.TrainingPlan(s, gpus, env.Canceled); err != nil {
			return nil, nil, err
		}
		return plan.Plan, plan.Memory, nil
	})
	if err != nil {
		return nil, err
	}
	o := &Outcome{Finished: run, Plan: plan}
	stats := run.Stats
	crit := critical(stats)
	step := run.Exec.End.Seconds()
	gpus := plan.Ranks
	peakFlops := run.Machine.GPU.Peak(t.DType) * float64(gpus)
	sum := SummaryRow{StepTimeS: step, MemoryColumns: run.MemoryColumns(),
		ModelFLOPs: plan.ModelFLOPs, GPUs: gpus, MicroBatches: t.MicroBatches(), SimulationColumns: run.SimulationColumns(), ExpertLoadMax: 1}
	if a := plan.Routing; a != nil {
		sum.ExpertLoadMax, sum.TokensDropped, sum.TokensPadded = a.MaxLoad(), a.Dropped, a.Padded
	}
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
