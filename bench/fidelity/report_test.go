package fidelity

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rowTable is rows as a Markdown table, with a source column when
// sources is set; every simulated value must be a positive number.
func rowTable(t *testing.T, rows []Row, sources bool) string {
	var b strings.Builder
	if sources {
		fmt.Fprintf(&b, "\n| case | quantity | reference | simulated | error | source | note |\n|---|---|---|---|---|---|---|\n")
	} else {
		fmt.Fprintf(&b, "\n| case | quantity | reference | simulated | error | note |\n|---|---|---|---|---|---|\n")
	}
	for _, r := range rows {
		require.False(t, math.IsNaN(r.Simulated) || r.Simulated <= 0, r.Case)
		src := ""
		if sources {
			src = " " + r.Source + " |"
		}
		fmt.Fprintf(&b, "| %s | %s | %.4g | %.4g | %+.1f%% |%s %s |\n", r.Case, r.Quantity, r.Reference, r.Simulated, r.ErrorPct, src, r.Note)
	}
	return b.String()
}

// checkReport writes doc to file with -update, and otherwise fails when
// the committed file differs from it; run names the test that makes it.
func checkReport(t *testing.T, file, run, doc string) {
	if *update {
		require.NoError(t, os.WriteFile(file, []byte(doc), 0o644))
		return
	}
	committed, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, string(committed), doc, "%s is stale: run go test ./bench/fidelity -run %s -update and review the diff", file, run)
}
