// Package all lists every scenario kind and runs a spec document end to end:
// decode, defaults, validation, simulation.
package all

import (
	"errors"
	"fmt"
	"sort"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/calibrate"
	"github.com/eidolon-sim/eidolon/core/scenario/collective"
	"github.com/eidolon-sim/eidolon/core/scenario/eidola"
	"github.com/eidolon-sim/eidolon/core/scenario/faultsweep"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/eidolon-sim/eidolon/core/scenario/operators"
	"github.com/eidolon-sim/eidolon/core/scenario/parallelsearch"
	"github.com/eidolon-sim/eidolon/core/scenario/seedflood"
	"github.com/eidolon-sim/eidolon/core/scenario/selftest"
	"github.com/eidolon-sim/eidolon/core/scenario/serving"
	"github.com/eidolon-sim/eidolon/core/scenario/ssmtp"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// Kinds returns every scenario kind, sorted by name.
func Kinds() []scenario.Kind {
	ks := []scenario.Kind{
		selftest.Kind(),
		operators.Kind(),
		collective.Kind(),
		seedflood.Kind(),
		eidola.Kind(),
		training.Kind(),
		inference.Kind(),
		serving.Kind(),
		faultsweep.Kind(),
		ssmtp.Kind(),
		parallelsearch.Kind(),
		calibrate.Kind(),
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	return ks
}

// Decode parses, defaults and validates a spec document.
func Decode(data []byte) (scenario.Kind, scenario.Spec, error) {
	name, err := spec.Kind(data)
	if err != nil {
		return scenario.Kind{}, nil, err
	}
	kinds := Kinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
		if k.Name != name {
			continue
		}
		s := k.NewSpec()
		var p spec.Problems
		if err := spec.Decode(data, s); err != nil {
			// Type errors and unknown fields do not hide the range errors
			// beside them: what decoded is validated too, except where it
			// only repeats a type error's place.
			var se *spec.Error
			if !errors.As(err, &se) {
				return k, nil, err
			}
			s.Defaults()
			var v spec.Problems
			s.Validate(&v)
			p.Merge("", err)
			for _, vp := range v.List() {
				if !overlapsAny(vp.Path, se.Problems) {
					p.Add(vp)
				}
			}
			return k, nil, p.Err()
		}
		s.Defaults()
		s.Validate(&p)
		s.Head().ValidateLimits(&p)
		return k, s, p.Err()
	}
	var p spec.Problems
	p.OneOf("kind", name, names)
	return scenario.Kind{}, nil, p.Err()
}

func overlapsAny(path string, ps []spec.Problem) bool {
	for _, q := range ps {
		if spec.Overlaps(path, q.Path) {
			return true
		}
	}
	return false
}

// Validate decodes, defaults and validates a spec document, then makes the
// kind's compile-only checks (Kind.Check: the cluster built, layouts and
// ranks against it) without simulating, so that it rejects what Run would.
//
// maxMemoryBytes is the memory limit when the spec sets none (0: none).
func Validate(data []byte, maxMemoryBytes float64) error {
	return ValidateWithin(data, maxMemoryBytes, 0)
}

// ValidateWithin is Validate on a machine of ceiling bytes (0: unknown): a
// spec's max_memory_bytes above it is refused, as it would admit a run
// that exhausts the machine.
func ValidateWithin(data []byte, maxMemoryBytes, ceiling float64) error {
	k, s, err := Decode(data)
	if err != nil {
		return err
	}
	if err := checkBudget(s, maxMemoryBytes, ceiling); err != nil {
		return err
	}
	if k.Check == nil {
		return nil
	}
	return k.Check(s)
}

// Admit decodes a spec document and checks its budget against
// maxMemoryBytes (see Validate): what a run needs to be allowed to start.
func Admit(data []byte, maxMemoryBytes float64) (scenario.Kind, scenario.Spec, error) {
	return AdmitWithin(data, maxMemoryBytes, 0)
}

// AdmitWithin is Admit on a machine of ceiling bytes (see ValidateWithin).
func AdmitWithin(data []byte, maxMemoryBytes, ceiling float64) (scenario.Kind, scenario.Spec, error) {
	k, s, err := Decode(data)
	if err != nil {
		return k, s, err
	}
	return k, s, checkBudget(s, maxMemoryBytes, ceiling)
}

// checkBudget refuses a spec whose max_memory_bytes exceeds the machine's
// ceiling (0: unknown), or whose estimated memory (spec.Budget) exceeds
// its max_memory_bytes, or limit when it sets none, or whose estimated
// events exceed its max_events (default spec.DefaultMaxEvents).
func checkBudget(s scenario.Spec, limit, ceiling float64) error {
	m := s.Head().MaxMemoryBytes
	if err := spec.CheckMemoryCeiling(m, ceiling); err != nil {
		return err
	}
	b, ok := s.(spec.Budgeted)
	if !ok {
		return nil
	}
	if m > 0 {
		limit = m
	}
	return spec.CheckBudget(b.Budget(), limit, s.Head().MaxEvents)
}

// Run decodes and simulates a spec document.
func Run(env scenario.Env, data []byte) (scenario.Spec, scenario.Result, error) {
	k, s, err := Decode(data)
	if err != nil {
		return nil, scenario.Result{}, err
	}
	if err := checkBudget(s, env.MaxMemoryBytes, 0); err != nil {
		return nil, scenario.Result{}, err
	}
	res, err := k.Run(env, s)
	if err != nil {
		return s, scenario.Result{}, err
	}
	if len(res.Tables) == 0 {
		return s, res, fmt.Errorf("scenario %q returned no tables", k.Name)
	}
	return s, res, nil
}
