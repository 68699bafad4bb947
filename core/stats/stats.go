// Package stats holds the summary statistics the tables report: one
// quantile, numpy's default (linear between order statistics), for every
// p50/p90/p99 and median the kinds and the fidelity reports give.
package stats

import (
	"math"
	"slices"
)

// Quantile q (in [0, 1]) of xs, linear between order statistics, without
// reordering xs; 0 for none.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := xs
	if !slices.IsSorted(xs) {
		s = slices.Clone(xs)
		slices.Sort(s)
	}
	p := q * float64(len(s)-1)
	i := int(math.Floor(p))
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (p-float64(i))*(s[i+1]-s[i])
}

// Median of xs (0 for none), without reordering them.
func Median(xs []float64) float64 { return Quantile(xs, 0.5) }
