package spec

// Selftest is the "selftest" kind: a diagnostic run that exercises the
// machinery around a simulation (progress, cancellation, error and panic
// handling at the Python boundary) without modelling anything.
type Selftest struct {
	Header
	// Iterations of a deterministic busy loop; 0 means 1,000,000.
	// Large values make a run long enough to interrupt.
	Iterations int64 `json:"iterations,omitempty"`
	// Panic makes the run panic, to show the bindings recover it.
	Panic bool `json:"panic,omitempty"`
	// Fail makes the run return this message as a simulation error.
	Fail string `json:"fail,omitempty"`
}

func (s *Selftest) Defaults() {
	if s.Iterations == 0 {
		s.Iterations = 1_000_000
	}
}

func (s *Selftest) Validate(p *Problems) {
	if s.Iterations < 1 || s.Iterations > 1e15 {
		p.AddAllowed("iterations", "[1, 1e15]", "must be in [1, 1e15], got %d", s.Iterations)
	}
}
