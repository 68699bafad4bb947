// Package selftest is a diagnostic scenario: a deterministic busy loop that
// reports progress, honours cancellation, and can fail or panic on request.
package selftest

import (
	"errors"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// SummaryRow is the single row of the selftest "summary" table.
type SummaryRow struct {
	Iterations int64  `arrow:"iterations"`
	Checksum   uint64 `arrow:"checksum"`
}

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Define("selftest",
		"diagnostic busy loop: progress, cancellation, errors and panics at the boundary",
		run)
}

// checkEvery is how many iterations pass between cancellation checks.
const checkEvery = 1 << 16

func run(env scenario.Env, st *spec.Selftest) (scenario.Result, error) {
	if st.Panic {
		panic("selftest: panic requested by the spec")
	}
	if st.Fail != "" {
		return scenario.Result{}, errors.New(st.Fail)
	}
	x := st.Seed | 1
	for i := int64(0); i < st.Iterations; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		if i%checkEvery == 0 {
			if err := env.Canceled(); err != nil {
				return scenario.Result{}, err
			}
			env.Report(float64(i) / float64(st.Iterations))
		}
	}
	env.Report(1)
	var r scenario.Result
	r.Add("summary", []SummaryRow{{Iterations: st.Iterations, Checksum: x}})
	return r, nil
}
