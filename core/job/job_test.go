package job_test

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func trainingSpec(t *testing.T, extra string) *spec.Training {
	_, s, err := all.Decode([]byte(`{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":2},"parallel":{"tp":4,"pp":2,"dp":2,"global_batch":8},"seq_len":1024` + extra + `}`))
	require.NoError(t, err)
	return s.(*spec.Training)
}

// The host model: eager by default, the spec's costs carried; in
// inference with cuda_graphs, decode steps (micro-batch ≥ the request
// groups) are captured and prefill is not.
func TestHostOf(t *testing.T) {
	h := job.HostOf("", spec.HostCosts{ForwardOpS: 7e-6}, true)
	assert.Equal(t, exec.Host{Mode: exec.Eager, Autograd: true, ForwardOpS: 7e-6}, h)
	_, s, err := all.Decode([]byte(`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"execution":"cuda_graphs","requests":[{"count":1,"prompt_tokens":8,"output_tokens":2},{"count":1,"prompt_tokens":16,"output_tokens":2}]}`))
	require.NoError(t, err)
	ih := job.InferenceHost(s.(*spec.Inference))
	assert.False(t, ih.Autograd)
	require.NotNil(t, ih.Captured)
	assert.False(t, ih.Captured(&workload.Task{MicroBatch: 1}), "prefill of the second group")
	assert.True(t, ih.Captured(&workload.Task{MicroBatch: 2}), "the first decode step")
}

// Run's shared tables: a row per rank, one simulated replica of two (DP 2
// mirrored), eight memory categories per stage whose total is the peak, and
// by default the timeline of the first rank of each stage of replica 0.
func TestRunTables(t *testing.T) {
	s := trainingSpec(t, "")
	j := job.Training(s)
	var plan *workload.TrainingPlan
	r, err := j.Run(scenario.Env{Ctx: context.Background()}, nil, func(gpus int) (*workload.Plan, []workload.Memory, error) {
		var err error
		_, plan, err = job.TrainingPlan(s, gpus, nil)
		if err != nil {
			return nil, nil, err
		}
		return plan.Plan, plan.Memory, nil
	})
	require.NoError(t, err)
	require.Len(t, r.Ranks, 16)
	assert.Equal(t, 8, r.SimulatedRanks, "TP 4 × PP 2 of one replica")
	require.Len(t, r.Memory, 2*8)
	peak := 0.0
	for _, m := range r.Memory {
		if m.Category == "total" {
			peak = max(peak, m.Bytes)
		}
	}
	assert.Equal(t, peak, r.PeakBytes)
	assert.Equal(t, 80e9, r.HBMBytes)
	ranks := map[int]bool{}
	for _, row := range r.Timeline {
		ranks[row.Rank] = true
	}
	first := map[int]bool{}
	for _, u := range plan.Replicas[0] {
		first[plan.Units[u].Ranks[0]] = true
	}
	assert.Equal(t, first, ranks)

	// Every GPU a straggler: the first of each stage and the first
	// spec.TimelineStragglers stragglers' ranks, not every rank.
	_, slowed, err := all.Decode([]byte(`{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":4},"parallel":{"tp":4,"pp":2,"global_batch":8},"seq_len":1024,
		"faults":{"sample":{"straggler_probability":1}}}`))
	require.NoError(t, err)
	slowSpec := slowed.(*spec.Training)
	var slowPlan *workload.TrainingPlan
	sr, err := job.Training(slowSpec).Run(scenario.Env{Ctx: context.Background()}, nil, func(gpus int) (*workload.Plan, []workload.Memory, error) {
		var err error
		if _, slowPlan, err = job.TrainingPlan(slowSpec, gpus, nil); err != nil {
			return nil, nil, err
		}
		return slowPlan.Plan, slowPlan.Memory, nil
	})
	require.NoError(t, err)
	listed := map[int]bool{}
	for _, row := range sr.Timeline {
		listed[row.Rank] = true
	}
	want := map[int]bool{}
	for r := range spec.TimelineStragglers {
		want[r] = true
	}
	for _, u := range slowPlan.Replicas[0] {
		want[slowPlan.Units[u].Ranks[0]] = true
	}
	assert.Equal(t, want, listed, "of 32 slowed ranks, 0-15 (the first in rank order) and each stage's first")
	// The run options are the machine's with the job's ring steps and host.
	j.RingSteps, j.Host = true, exec.Host{Mode: exec.CUDAGraphs}
	opt := j.Options(r.Machine)
	assert.True(t, opt.RingSteps)
	assert.Equal(t, exec.CUDAGraphs, opt.Host.Mode)
}
