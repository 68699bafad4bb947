// Package spec is Eidolon's input language: JSON documents decoded strictly
// into plain Go structs (units in every field name), completed by Defaults()
// and checked by Validate(), which reports every problem with its field path.
//
// Every spec document starts with a Header: "kind" picks the scenario,
// "seed" is the master seed that every random stream of the run derives from.
// Each scenario kind has its own spec struct in this package, embedding Header.
package spec

// Header is common to every spec document.
type Header struct {
	// Kind selects the scenario, e.g. "operators", "collective", "training".
	Kind string `json:"kind"`
	// Seed is the master seed; the same spec and seed give the same tables.
	Seed uint64 `json:"seed,omitempty"`
	// Name is a free label copied into the tables' metadata.
	Name string `json:"name,omitempty"`
	// MaxMemoryBytes caps the run's estimated memory (spec.Budget): a spec
	// over it is refused before the run starts. 0 (default): the limit the
	// caller passes (the bindings: half of this machine's memory).
	MaxMemoryBytes float64 `json:"max_memory_bytes,omitempty"`
	// MaxEvents caps the run's estimated simulated events (spec.Budget,
	// the run's work): a spec over it is refused before the run starts.
	// 0 (default): DefaultMaxEvents.
	MaxEvents float64 `json:"max_events,omitempty"`
}

// Head returns the header, so scenario code can read it through an interface.
func (h *Header) Head() *Header { return h }
