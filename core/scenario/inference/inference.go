// Package inference is the "inference" scenario kind: a batch of requests
// served by tensor- and pipeline-parallel replicas (prefill, then decode
// with a KV cache and SSM state), simulated by package exec.
package inference

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Kind registers the scenario.
func Kind() scenario.Kind {
	return job.Define("inference",
		"prefill + decode of a request batch on TP/PP replicas: TTFT, TPOT, end to end, memory, longest prompt that fits",
		Simulate, Check)
}

// Check makes a run's checks before it simulates: the machine (cluster,
// GPU, fault device names), the layout on its GPU count, the timeline ranks.
func Check(s *spec.Inference) error { return job.CheckInference("", s, true) }

// SummaryRow is the one row of the inference "summary" table.
type SummaryRow struct {
	// TTFTS: time to the first token (the prefill through every stage);
	// TPOTS: time per further output token; E2ES: until the last token of
	// every request. With request groups, TTFTS and TPOTS are means over
	// requests (see the requests table).
	TTFTS float64 `arrow:"ttft_s"`
	TPOTS float64 `arrow:"tpot_s"`
	E2ES  float64 `arrow:"e2e_s"`
	// TokensPerS is generated tokens of all replicas over E2ES.
	TokensPerS float64 `arrow:"tokens_per_s"`
	// Memory: memory_peak_bytes, hbm_bytes, fits.
	job.MemoryColumns
	// LongestPromptTokens is the longest prompt that fits with the same
	// batch and output length (0: none does).
	LongestPromptTokens int `arrow:"longest_prompt_tokens"`
	GPUs                int `arrow:"gpus"`
	// simulated_ranks, net_collectives, reused_collectives.
	job.SimulationColumns
}

// RequestRow is one request group ("requests" table); every request of a
// group sees the same times.
type RequestRow struct {
	Group        int `arrow:"group"`
	Count        int `arrow:"count"`
	PromptTokens int `arrow:"prompt_tokens"`
	OutputTokens int `arrow:"output_tokens"`
	// TTFTS: its prefill's end at the last stage; E2ES: its last token;
	// TPOTS: (E2ES − TTFTS) / (output_tokens − 1), 0 for one token.
	TTFTS float64 `arrow:"ttft_s"`
	TPOTS float64 `arrow:"tpot_s"`
	E2ES  float64 `arrow:"e2e_s"`
}

// Outcome is a simulated inference run: the job's run (machine, exec
// result, ranks, timeline, memory), the plan, the summary and the requests.
type Outcome struct {
	*job.Finished
	Summary  SummaryRow
	Requests []RequestRow
	// Shape is the run's units, groups and replicas; Stages each stage's
	// memory (a long decode runs in segments: job.Job.RunStepped, whose
	// Finished.Segments counts them).
	Shape  *workload.Plan
	Stages []workload.Memory
}

// marks are the program marks the requests table reads: each request
// group's first and last token.
func marks(in workload.Inference) []string {
	groups := in.Groups()
	var out []string
	for gi, g := range groups {
		out = append(out, fmt.Sprintf("step.%d", gi))
		if g.Output > 1 {
			out = append(out, fmt.Sprintf("step.%d", len(groups)-1+g.Output-1))
		}
	}
	return out
}

// Result packs the tables.
func (o *Outcome) Result() scenario.Result {
	r := o.Tables([]SummaryRow{o.Summary})
	r.Add("requests", o.Requests)
	return r
}

// Simulate runs a validated spec (job.Inference); modify, if set, changes
// the machine after the spec's faults and before the run.
func Simulate(env scenario.Env, s *spec.Inference, modify func(m *exec.Machine) error) (*Outcome, error) {
	return SimulateSegments(env, s, modify, 0)
}

// SimulateSegments is Simulate with segment steps per segment of a long
// decode (job.Job.SegmentSteps: 0 the default, −1 the whole plan at once);
// the tables are the same whatever it is.
func SimulateSegments(env scenario.Env, s *spec.Inference, modify func(m *exec.Machine) error, segment int) (*Outcome, error) {
	j := job.Inference(s)
	j.SegmentSteps = segment
	var in workload.Inference
	var ib *workload.InferenceBuilder
	run, err := j.RunStepped(env, modify, func(gpus int) (job.Stepped, error) {
		var err error
		if in, ib, err = job.InferenceBuilder(s, gpus, env.Canceled); err != nil {
			return nil, err
		}
		return ib, nil
	}, func() []string { return marks(in) })
	if err != nil {
		return nil, err
	}
	plan := ib.Shape()
	o := &Outcome{Finished: run, Shape: plan, Stages: ib.Stages()}
	longest, err := in.LongestPrompt(run.HBMBytes)
	if err != nil {
		return nil, err
	}
	sum := SummaryRow{E2ES: run.End.Seconds(), MemoryColumns: run.MemoryColumns(), LongestPromptTokens: longest, GPUs: plan.Ranks,
		SimulationColumns: run.SimulationColumns()}
	// Per request group: its first token leaves the last stage of each
	// replica at its prefill's end, its last at decode step output−1.
	groups := in.Groups()
	var requests, outputs, tpotN float64
	for gi, g := range groups {
		row := RequestRow{Group: gi, Count: g.Count, PromptTokens: g.Prompt, OutputTokens: g.Output}
		for _, rep := range plan.Replicas {
			last := rep[len(rep)-1]
			first, _ := run.MarkEnd(last, fmt.Sprintf("step.%d", gi))
			end := first
			if g.Output > 1 {
				end, _ = run.MarkEnd(last, fmt.Sprintf("step.%d", len(groups)-1+g.Output-1))
			}
			row.TTFTS = max(row.TTFTS, first.Seconds())
			row.E2ES = max(row.E2ES, end.Seconds())
		}
		if g.Output > 1 {
			row.TPOTS = (row.E2ES - row.TTFTS) / float64(g.Output-1)
			sum.TPOTS += float64(g.Count) * row.TPOTS
			tpotN += float64(g.Count)
		}
		sum.TTFTS += float64(g.Count) * row.TTFTS
		requests += float64(g.Count)
		outputs += float64(g.Count * g.Output)
		o.Requests = append(o.Requests, row)
	}
	sum.TTFTS /= requests
	if tpotN > 0 {
		sum.TPOTS /= tpotN
	}
	if sum.E2ES > 0 {
		sum.TokensPerS = float64(s.Replicas) * outputs / sum.E2ES
	}
	o.Summary = sum
	return o, nil
}
