package spec

// Routing is how a mixture-of-experts model's tokens are assigned to
// experts in a training step or an inference pass (workload.Routing).
type Routing struct {
	// Distribution: "balanced" (default: every expert gets exactly its
	// share, what auxiliary-loss-free balancing aims at), "uniform" (each
	// token's k experts drawn uniformly, seeded: Megatron-Core's
	// --moe-router-force-load-balancing, which routes on random logits),
	// "zipf" (popularity ∝
	// 1/rank^skew over a seeded expert order), "table" (popularity ∝ loads).
	Distribution string  `json:"distribution,omitempty"`
	Skew         float64 `json:"skew,omitempty"`
	// Loads is each expert's relative load (distribution "table"), e.g. a
	// per-expert column of an Arrow table; one entry per routed expert.
	Loads []float64 `json:"loads,omitempty"`
	// Seed of the draw; default the spec's seed.
	Seed uint64 `json:"seed,omitempty"`
	// CapacityFactor caps each expert at ceil(capacity_factor·tokens·k/experts)
	// tokens from each rank, dropping the rest; 0 (default) is dropless.
	// PadToCapacity pads every expert to the capacity.
	CapacityFactor float64 `json:"capacity_factor,omitempty"`
	PadToCapacity  bool    `json:"pad_to_capacity,omitempty"`
	// HierarchicalA2A sends the dispatch and combine across nodes in two
	// hops (network to the same-index GPU, then NVLink), as DeepEP does.
	HierarchicalA2A bool `json:"hierarchical_a2a,omitempty"`
	// NodeLimit is the most nodes a token's experts lie on (DeepSeek-V3: 4;
	// 0 = no limit); with hierarchical_a2a each token crosses the network
	// once per node it is sent to (DeepEP's deduplication).
	NodeLimit int `json:"node_limit,omitempty"`
}

// Defaults fills the distribution: "table" when loads are given, "zipf"
// when a skew is, "balanced" otherwise (a routing that names its loads
// means to use them).
func (r *Routing) Defaults(seed uint64) {
	if r.Distribution == "" {
		switch {
		case len(r.Loads) > 0:
			r.Distribution = "table"
		case r.Skew != 0:
			r.Distribution = "zipf"
		default:
			r.Distribution = "balanced"
		}
	}
	if r.Seed == 0 {
		r.Seed = seed
	}
}

// Validate reports every problem under path.
func (r *Routing) Validate(p *Problems, path string) {
	p.OneOf(Field(path, "distribution"), r.Distribution, []string{"balanced", "uniform", "zipf", "table"})
	if !(r.Skew >= 0) {
		p.Addf(Field(path, "skew"), "must be >= 0, got %v", r.Skew)
	}
	// A field the distribution does not read would be ignored silently.
	if r.Skew != 0 && r.Distribution != "zipf" {
		p.Addf(Field(path, "skew"), "applies to distribution \"zipf\", not %q", r.Distribution)
	}
	if len(r.Loads) > 0 && r.Distribution != "table" {
		p.Addf(Field(path, "loads"), "applies to distribution \"table\", not %q", r.Distribution)
	}
	p.IntInRange(Field(path, "node_limit"), r.NodeLimit, 0, 1<<16)
	if !(r.CapacityFactor >= 0) {
		p.Addf(Field(path, "capacity_factor"), "must be >= 0 (0 = dropless), got %v", r.CapacityFactor)
	}
}
