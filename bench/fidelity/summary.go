package fidelity

import (
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Quantities whose larger value is a faster run, and whose smaller value
// is; the others (memory, ratios of two runs) say nothing of speed.
var (
	rateQuantities = map[string]bool{"mfu": true, "tflops_per_gpu": true, "tokens_per_s": true,
		"tokens_per_s_per_gpu": true, "tokens_per_s_per_node": true}
	timeQuantities = map[string]bool{"step_time_s": true, "e2e_s": true, "forward_ms": true, "backward_ms": true,
		"gpu_hours_per_trillion_tokens": true, "ttft_ms": true, "itl_ms": true}
)

// simulatedFaster says whether a row's simulation runs faster than its
// reference; ok is false for a quantity that is not a speed.
func simulatedFaster(r Row) (faster, ok bool) {
	switch {
	case rateQuantities[r.Quantity]:
		return r.Simulated > r.Reference, true
	case timeQuantities[r.Quantity]:
		return r.Simulated < r.Reference, true
	}
	return false, false
}

// parenthesized matches a source's parenthesized details.
var parenthesized = regexp.MustCompile(`\s*\([^()]*\)`)

// sourceLabel is a source without its parenthesized details.
func sourceLabel(src string) string {
	return strings.TrimRight(parenthesized.ReplaceAllString(src, ""), " ,;")
}

// SourceSummary tabulates rows by source, in the order they first appear,
// then over all (where there are several): how many, their median and largest |error|, how many are
// within 10 %, and of the speed rows how many the simulation runs faster
// than measured (the direction of the error, which a median |error| hides).
func SourceSummary(rows []Row) string {
	var order []string
	by := map[string][]Row{}
	for _, r := range rows {
		l := sourceLabel(r.Source)
		if _, ok := by[l]; !ok {
			order = append(order, l)
		}
		by[l] = append(by[l], r)
	}
	var b strings.Builder
	b.WriteString("\n| source | rows | median \\|error\\| | largest \\|error\\| | within 10 % | simulated faster / speed rows |\n" +
		"|---|---:|---:|---:|---:|---:|\n")
	line := func(label string, rs []Row) {
		abs := make([]float64, len(rs))
		within, faster, speed := 0, 0, 0
		for i, r := range rs {
			abs[i] = math.Abs(r.ErrorPct)
			if abs[i] <= 10 {
				within++
			}
			if f, ok := simulatedFaster(r); ok {
				speed++
				if f {
					faster++
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f%% | %.1f%% | %d | %d / %d |\n", label, len(rs), Quantile(abs, 0.5), Quantile(abs, 1), within, faster, speed)
	}
	for _, l := range order {
		line(l, by[l])
	}
	if len(order) > 1 {
		line("**all**", rows)
	}
	return b.String()
}
