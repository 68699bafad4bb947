package fidelity

import (
	"context"
	"fmt"
	"strings"

	"github.com/eidolon-sim/eidolon/core/scenario/serving"
	sv "github.com/eidolon-sim/eidolon/core/serving"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// specBenchSrc is the profile the speculative-decoding rows compare with:
// SpecDecode-Bench's timing model of vLLM (v0.10/0.11) serving
// Llama-3.1-8B-Instruct on one H100 with EAGLE-3 drafts (Liu et al. 2025,
// "Speculative Decoding: Performance or Illusion?", arXiv 2601.11580;
// SpecDecode-Bench/simulator, predictor.py, Llama8BH100), fitted by its
// authors on their profiles of InstructCoder at batch 1 to 64.
const specBenchSrc = "SpecDecode-Bench (arXiv 2601.11580), predictor.py's Llama8BH100 profile fit (vLLM, Llama-3.1-8B, one H100, EAGLE-3)"

// specBench's fitted times, seconds: the target's forward pass is
// TargetKV per cached token + TargetToken per batched token + TargetFixed;
// the EAGLE-3 drafter's k passes DraftKV per cached token + DraftToken per
// draft token + DraftFixed.
const (
	specBenchTargetKV    = 3.92645679e-08
	specBenchTargetToken = 2.10103129e-05
	specBenchTargetFixed = 5.88590713e-03
	specBenchDraftKV     = 2.37768493e-09
	specBenchDraftToken  = 8.41429603e-07
	specBenchDraftFixed  = 2.13526175e-03
	// specBenchStepOverhead is the fit's engine time a step beside the passes.
	specBenchStepOverhead = 1.20683946e-03
)

// SpecDecodeRow is one batch of verifying sequences: the simulated
// verification pass and drafter's passes against the profile fit's.
type SpecDecodeRow struct {
	Batch, Drafts, CacheTokens int
	VerifyS, RefVerifyS        float64
	DraftS, RefDraftS          float64
}

// SpecDecodeRows prices one iteration of batch sequences each verifying
// drafts tokens against a cache of cacheTokens, on the serving kind's own
// replica (llama3-8b on an H100, vLLM's CUDA graphs), the drafter an
// EAGLE-sized one (one decoder layer of the target with its output layer).
func SpecDecodeRows(ctx context.Context, drafts, cacheTokens int, batches []int) ([]SpecDecodeRow, error) {
	js := fmt.Sprintf(`{"kind":"serving","model":"llama3-8b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},
		"engine":{"speculative":{"method":"draft_model","num_speculative_tokens":%d,"per_token_acceptance":0.7,
		"draft_model":{"preset":"llama3-8b","layers":1}}},"workload":{"rate_per_s":1,"requests":1}}`, drafts)
	var s spec.Serving
	if err := spec.Decode([]byte(js), &s); err != nil {
		return nil, err
	}
	s.Defaults()
	st, err := serving.Build(ctx, &s)
	if err != nil {
		return nil, err
	}
	var out []SpecDecodeRow
	for _, b := range batches {
		sh := &sv.Shape{Tokens: b * (drafts + 1), Logits: b * (drafts + 1), Verify: b, VerifyQuery: drafts + 1, VerifyKV: cacheTokens}
		v, err := st.Pricers[0].Iteration(sh)
		if err != nil {
			return nil, err
		}
		d, err := st.Replicas[0].Draft(sh)
		if err != nil {
			return nil, err
		}
		kv := float64(b * cacheTokens)
		out = append(out, SpecDecodeRow{Batch: b, Drafts: drafts, CacheTokens: cacheTokens, VerifyS: v, DraftS: d,
			RefVerifyS: specBenchTargetKV*kv + specBenchTargetToken*float64(b*(drafts+1)) + specBenchTargetFixed,
			RefDraftS:  specBenchDraftKV*kv + specBenchDraftToken*float64(b*drafts) + specBenchDraftFixed})
	}
	return out, nil
}

// SpecDecodeReport is SERVING_FIDELITY.md's section on speculative decoding.
func SpecDecodeReport(rows []SpecDecodeRow) string {
	var b strings.Builder
	b.WriteString("\n## Speculative decoding\n\n")
	fmt.Fprintf(&b, "Against %s: one iteration of the serving kind's replica (llama3-8b on one H100, CUDA graphs) whose "+
		"sequences each verify %d drafts against a %d-token cache, and its drafter's %d passes (one decoder layer of the "+
		"target with its output layer, the size of an EAGLE head). Nothing is fitted to these figures; the profile fit is "+
		"itself a model of its authors' measurements, not the measurements.\n\n", specBenchSrc, rows[0].Drafts, rows[0].CacheTokens, rows[0].Drafts)
	b.WriteString("| sequences | verification ms | profile fit ms | error | drafter ms | profile fit ms | error |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %.2f | %.2f | %s | %.2f | %.2f | %s |\n", r.Batch, 1e3*r.VerifyS, 1e3*r.RefVerifyS,
			signedPct(r.VerifyS/r.RefVerifyS-1), 1e3*r.DraftS, 1e3*r.RefDraftS, signedPct(r.DraftS/r.RefDraftS-1))
	}
	fmt.Fprintf(&b, "\nThe verification is the target's pass over every sequence's 1 + k tokens, its drafts attending as further "+
		"query heads of the decode attention; against the fit it reads %s at one sequence and %s at %d. "+
		"The fit keeps the engine's own time apart, %.1f ms a step (overhead_constant_per_step), which the serving kind charges "+
		"only through engine.step_overhead_s (0 by default). The fit's drafter costs about the same whatever k (0.8 µs a draft "+
		"token); the simulated one runs k passes, each a decode step of the one-layer drafter.\n",
		signedPct(rows[0].VerifyS/rows[0].RefVerifyS-1), signedPct(rows[len(rows)-1].VerifyS/rows[len(rows)-1].RefVerifyS-1),
		rows[len(rows)-1].Batch, 1e3*specBenchStepOverhead)
	return b.String()
}
