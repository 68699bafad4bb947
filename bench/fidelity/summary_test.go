package fidelity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSourceSummaryCountsDirectionAndSpread(t *testing.T) {
	rows := []Row{
		row("a", "step_time_s", 10, 9, "Paper A (arXiv 1), Table 1", ""),       // −10 %: faster
		row("b", "tflops_per_gpu", 100, 120, "Paper A (arXiv 1), Table 1", ""), // +20 %: faster
		row("c", "gib_per_gpu", 10, 10.5, "Paper A (arXiv 1), Table 1", ""),    // memory: no direction
		row("d", "e2e_s", 2, 2.1, "Blog B", ""),                                // +5 %: slower
	}
	f, ok := simulatedFaster(rows[0])
	require.True(t, ok)
	require.True(t, f)
	_, ok = simulatedFaster(rows[2])
	require.False(t, ok)
	require.Equal(t, "Paper A, Table 1", sourceLabel(rows[0].Source))

	s := SourceSummary(rows)
	require.Contains(t, s, "| Paper A, Table 1 | 3 | 10.0% | 20.0% | 2 | 2 / 2 |")
	require.Contains(t, s, "| Blog B | 1 | 5.0% | 5.0% | 1 | 0 / 1 |")
	require.Contains(t, s, "| **all** | 4 | 7.5% | 20.0% | 3 | 2 / 3 |")
	require.NotContains(t, SourceSummary(rows[3:]), "**all**")
}
