// Package scenario defines what every scenario driver provides and receives.
// Drivers live in sub-packages (ssmtp, seedflood, eidola, faults, ...) and are
// listed in package all, the one place that knows every kind.
package scenario

import (
	"context"

	"github.com/eidolon-sim/eidolon/core/spec"
)

// Spec is a scenario's decoded input. Implementations are structs in package
// spec that embed spec.Header.
type Spec interface {
	// Head gives the common header (kind, seed, name).
	Head() *spec.Header
	// Defaults fills unset optional fields; it never reports problems.
	Defaults()
	// Validate reports every problem with its field path.
	Validate(p *spec.Problems)
}

// Env is what a run may use from the outside world: a cancellation signal,
// checked between events, and a progress sink.
type Env struct {
	Ctx context.Context
	// Progress receives the fraction done in [0, 1]; it may be nil.
	Progress func(fraction float64)
	// Clock reads a wall clock in seconds. The core never reads one itself
	// (runs stay deterministic); the bindings pass one in so that drivers
	// can report how long parts of a run took. It may be nil.
	Clock func() float64
	// MaxMemoryBytes refuses, before it starts, a run whose estimated
	// memory (spec.Budget) exceeds it, unless the spec sets its own
	// max_memory_bytes; 0: no limit. The core cannot know the machine: the
	// bindings pass a fraction of its memory.
	MaxMemoryBytes float64
}

// Elapsed starts a wall-clock timer: the returned function gives the
// seconds since, or nil when the run has no clock.
func (e Env) Elapsed() func() *float64 {
	if e.Clock == nil {
		return func() *float64 { return nil }
	}
	start := e.Clock()
	return func() *float64 {
		d := e.Clock() - start
		return &d
	}
}

// Report sends progress if a sink is attached.
func (e Env) Report(fraction float64) {
	if e.Progress != nil {
		e.Progress(fraction)
	}
}

// Context is the run's context (background when the caller gave none).
func (e Env) Context() context.Context {
	if e.Ctx == nil {
		return context.Background()
	}
	return e.Ctx
}

// Canceled returns the context's error, if the run was stopped.
func (e Env) Canceled() error {
	if e.Ctx == nil {
		return nil
	}
	return e.Ctx.Err()
}

// Table is one named result table: Rows is a slice of structs whose fields
// carry `arrow:"column_name"` tags (see package table).
type Table struct {
	Name string
	Rows any
}

// Result is everything a run returns, in a fixed table order.
type Result struct {
	Tables []Table
}

// Add appends a table.
func (r *Result) Add(name string, rows any) {
	r.Tables = append(r.Tables, Table{Name: name, Rows: rows})
}

// Kind describes one scenario kind.
type Kind struct {
	Name string
	// Doc is one line for listings.
	Doc string
	// NewSpec returns a pointer to an empty spec of this kind.
	NewSpec func() Spec
	// Run simulates a validated spec.
	Run func(env Env, s Spec) (Result, error)
	// Check, if set, makes the checks a run would make before simulating
	// that need more than the spec (the cluster built: its GPU count,
	// device names, ranks), without simulating; validation calls it so
	// that it reports what a run would reject.
	Check func(s Spec) error
}

// Checked gives kind k the compile-only check check (see Kind.Check).
func Checked[T any, S interface {
	*T
	Spec
}](k Kind, check func(s S) error) Kind {
	k.Check = func(s Spec) error { return check(s.(S)) }
	return k
}

// Define describes a kind whose spec type is S (a pointer to a struct in
// package spec): run receives the decoded spec as that type.
func Define[T any, S interface {
	*T
	Spec
}](name, doc string, run func(env Env, s S) (Result, error)) Kind {
	return Kind{Name: name, Doc: doc,
		NewSpec: func() Spec { return S(new(T)) },
		Run:     func(env Env, s Spec) (Result, error) { return run(env, s.(S)) }}
}
