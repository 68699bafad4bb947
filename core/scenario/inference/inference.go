// Package inference is the "inference" scenario kind: a batch of requests
// served by tensor- and pipeline-parallel replicas (prefill, then decode
// with a KV cache and SSM state), simulated by package exec.
package inference

import (
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Kind{
		Name:    "inference",
		Doc:     "prefill + decode of a request batch on TP/PP replicas: TTFT, TPOT, end to end, memory, longest prompt that fits",
		NewSpec: func() scenario.Spec { return &spec.Inference{} },
		Run: func(env scenario.Env, s scenario.Spec) (scenario.Result, error) {
			out, err := Simulate(env, s.(*spec.Inference), nil)
			if err != nil {
				return scenario.Result{}, err
			}
			return out.Result(), nil
		},
	}
}

// SummaryRow is the one row of the inference "summary" table.
type SummaryRow struct {
	// TTFTS: time to the first token (the prefill through every stage);
	// TPOTS: mean time per further output token; E2ES: until the last
	// token of every request.
	TTFTS float64 `arrow:"ttft_s"`
	TPOTS float64 `arrow:"tpot_s"`
	E2ES  float64 `arrow:"e2e_s"`
	// TokensPerS is generated tokens of all replicas over E2ES.
	TokensPerS float64 `arrow:"tokens_per_s"`
	// MemoryPeakBytes is the largest per-GPU memory; Fits whether it fits
	// in HBMBytes.
	MemoryPeakBytes float64 `arrow:"memory_peak_bytes"`
	HBMBytes        float64 `arrow:"hbm_bytes"`
	Fits            bool    `arrow:"fits"`
	// LongestPromptTokens is the longest prompt that fits with the same
	// batch and output length (0: none does).
	LongestPromptTokens int `arrow:"longest_prompt_tokens"`
	GPUs                int `arrow:"gpus"`
	SimulatedRanks      int `arrow:"simulated_ranks"`
	NetCollectives      int `arrow:"net_collectives"`
	ReusedCollectives   int `arrow:"reused_collectives"`
}

// Outcome is a simulated inference run.
type Outcome struct {
	Summary  SummaryRow
	Ranks    []training.RankRow
	Timeline []training.TimelineRow
	Memory   []training.MemoryRow
	Plan     *workload.InferencePlan
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

// Layout converts a validated spec to the workload's inference layout.
func Layout(s *spec.Inference, gpus int) (workload.Inference, error) {
	m, _ := s.Model.Resolve()
	in := workload.Inference{Model: m, TP: s.TP, PP: s.PP, Replicas: s.Replicas, Batch: s.Batch,
		Prompt: s.PromptTokens, Output: s.OutputTokens, DType: hw.DType(s.DType), UnfusedAttention: s.UnfusedAttention}
	var p spec.Problems
	if n := in.Ranks(); n > gpus {
		p.Addf("replicas", "tp·pp·replicas = %d·%d·%d = %d GPUs, but the cluster has %d", s.TP, s.PP, s.Replicas, n, gpus)
	}
	for _, fp := range in.Check() {
		p.Addf(fp.Field, "%s", fp.Message)
	}
	return in, p.Err()
}

// Simulate runs a validated spec; modify as in training.Simulate.
func Simulate(env scenario.Env, s *spec.Inference, modify func(m *exec.Machine) error) (*Outcome, error) {
	m, err := exec.NewMachine(s.Cluster, s.GPU, s.Faults, s.Seed)
	if err != nil {
		return nil, err
	}
	if modify != nil {
		if err := modify(m); err != nil {
			return nil, err
		}
	}
	in, err := Layout(s, m.Fabric.Topology().NumRanks())
	if err != nil {
		return nil, err
	}
	plan, err := workload.BuildInference(in)
	if err != nil {
		return nil, err
	}
	if err := env.Canceled(); err != nil {
		return nil, err
	}
	opt := m.Options(s.FullSimulation)
	opt.Progress = env.Progress
	res, err := exec.Run(training.Ctx(env), plan.Plan, opt)
	if err != nil {
		return nil, err
	}
	env.Report(1)
	hbm := float64(m.GPU.HBMBytes)
	o := &Outcome{Plan: plan, Exec: res, Machine: m, Memory: training.MemoryRows(plan.Memory, hbm)}
	peak := 0.0
	for _, mem := range plan.Memory {
		peak = max(peak, mem.Total())
	}
	stats := res.Ranks()
	o.Ranks = training.RankRows(plan.Plan, stats, m, func(stage int) float64 { return plan.Memory[stage].Total() }, hbm)
	longest, err := in.LongestPrompt(hbm)
	if err != nil {
		return nil, err
	}
	sum := SummaryRow{E2ES: res.End.Seconds(), MemoryPeakBytes: peak, HBMBytes: hbm, Fits: peak <= hbm,
		LongestPromptTokens: longest, GPUs: plan.Ranks, NetCollectives: res.Collectives, ReusedCollectives: res.Reused}
	for _, rep := range plan.Replicas {
		if t, ok := res.MarkEnd(rep[len(rep)-1], "prefill_end"); ok {
			sum.TTFTS = max(sum.TTFTS, t.Seconds())
		}
	}
	if s.OutputTokens > 1 {
		sum.TPOTS = (sum.E2ES - sum.TTFTS) / float64(s.OutputTokens-1)
	}
	if sum.E2ES > 0 {
		sum.TokensPerS = float64(s.Replicas*s.Batch*s.OutputTokens) / sum.E2ES
	}
	for _, st := range stats {
		if st.Simulated {
			sum.SimulatedRanks++
		}
	}
	o.Summary = sum
	o.Timeline = training.TimelineRows(res, training.TimelineRanks(s.TimelineRanks, plan.Plan, m))
	return o, nil
}
