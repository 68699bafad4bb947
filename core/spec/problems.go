package spec

import "github.com/eidolon-sim/eidolon/core/problem"

// The problem type is package problem's, shared with the models (which
// report problems with paths relative to their own input); these names keep
// the spec's validators short.
type (
	// Problem is one thing wrong with a spec (see problem.Problem).
	Problem = problem.Problem
	// Error is an invalid spec: every problem found.
	Error = problem.Error
	// Problems collects validation problems; the zero value is ready to use.
	Problems = problem.Problems
)

// MaxDurationS and MinBandwidthBytesPerS bound durations and bandwidths
// (see package problem).
const (
	MaxDurationS          = problem.MaxDurationS
	MinBandwidthBytesPerS = problem.MinBandwidthBytesPerS
)

// Field joins a parent path and a field name.
func Field(parent, name string) string { return problem.Field(parent, name) }

// Index is the path of element i of a list at parent.
func Index(parent string, i int) string { return problem.Index(parent, i) }
