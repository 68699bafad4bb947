package spec

import "github.com/eidolon-sim/eidolon/core/problem"

// FaultSweep is the "fault_sweep" kind: one base run (a training step, an
// inference batch or a collective) simulated again under many fault sets,
// each drawn with the sweep's seed or enumerated one cable at a time.
// Tables: samples, links, summary, cables.
type FaultSweep struct {
	Header
	// The base run: exactly one of Training, Inference, Collective (their
	// "kind" may be omitted). Its own faults are in force in every sample,
	// healthy run included; its own seed draws its own sampled faults.
	Training   *Training   `json:"training,omitempty"`
	Inference  *Inference  `json:"inference,omitempty"`
	Collective *Collective `json:"collective,omitempty"`
	// Mode: "sample" (default) draws Samples fault sets of the sizes below;
	// "single_link" enumerates the eligible cables (or Cables of them,
	// drawn with the seed), each alone degraded to DegradedHealth and alone
	// failed, as SingleLinkFaults says.
	Mode string `json:"mode,omitempty"`
	// Samples in "sample" mode; default 100.
	Samples int `json:"samples,omitempty"`
	// Per sample, distinct and uniformly drawn: LinkFailures failed cables,
	// LinkDegradations cables at health DegradedHealth (default 0.5),
	// NICFailures failed NICs, SwitchFailures failed switches, Stragglers
	// GPUs computing StragglerSlowdown (default 1.5) times slower. A cable
	// is both directions of a connection.
	LinkFailures      int     `json:"link_failures,omitempty"`
	LinkDegradations  int     `json:"link_degradations,omitempty"`
	DegradedHealth    float64 `json:"degraded_health,omitempty"`
	NICFailures       int     `json:"nic_failures,omitempty"`
	SwitchFailures    int     `json:"switch_failures,omitempty"`
	Stragglers        int     `json:"stragglers,omitempty"`
	StragglerSlowdown float64 `json:"straggler_slowdown,omitempty"`
	// Links: the cables faults may hit: "all" (default), "node" (both ends
	// in one host: NVLink, PCIe) or "fabric" (the others: NIC to leaf,
	// leaf to spine, direct GPU-to-GPU cables between hosts).
	Links string `json:"links,omitempty"`
	// SingleLinkFaults in "single_link" mode: "both" (default), "degrade"
	// or "fail". Cables: how many eligible cables to enumerate (0 = all).
	SingleLinkFaults string `json:"single_link_faults,omitempty"`
	Cables           int    `json:"cables,omitempty"`
	// Shards splits a sweep into independent runs (e.g. points of
	// eidolon.sweep on a Dask cluster): this run simulates only the
	// samples i with i mod Shards = Shard, numbered as in the whole sweep,
	// and its summary covers those. Default 1 shard.
	Shards int `json:"shards,omitempty"`
	Shard  int `json:"shard,omitempty"`
}

// FaultSweepModes are the sweep modes.
func FaultSweepModes() []string { return []string{"sample", "single_link"} }

// Defaults fills optional fields.
func (s *FaultSweep) Defaults() {
	if s.Mode == "" {
		s.Mode = "sample"
	}
	if s.Samples == 0 {
		s.Samples = 100
	}
	if s.DegradedHealth == 0 {
		s.DegradedHealth = 0.5
	}
	if s.StragglerSlowdown == 0 {
		s.StragglerSlowdown = 1.5
	}
	if s.Links == "" {
		s.Links = "all"
	}
	if s.SingleLinkFaults == "" {
		s.SingleLinkFaults = "both"
	}
	if s.Shards == 0 {
		s.Shards = 1
	}
	switch {
	case s.Training != nil:
		s.Training.Defaults()
	case s.Inference != nil:
		s.Inference.Defaults()
	case s.Collective != nil:
		s.Collective.Defaults()
	}
}

// BaseKind is the base run's kind ("" when none or several are given).
func (s *FaultSweep) BaseKind() string {
	kind, n := "", 0
	for _, b := range []struct {
		name string
		set  bool
	}{{"training", s.Training != nil}, {"inference", s.Inference != nil}, {"collective", s.Collective != nil}} {
		if b.set {
			kind, n = b.name, n+1
		}
	}
	if n != 1 {
		return ""
	}
	return kind
}

// Validate reports every problem; the base's under its field name.
func (s *FaultSweep) Validate(p *Problems) {
	kind := s.BaseKind()
	if kind == "" {
		p.Addf("", "needs exactly one base run: training, inference or collective")
	} else {
		var base interface {
			Head() *Header
			Validate(*Problems)
		}
		switch kind {
		case "training":
			base = s.Training
		case "inference":
			base = s.Inference
		default:
			base = s.Collective
			if len(s.Collective.SizesBytes) != 1 {
				p.Addf("collective.sizes_bytes", "a fault sweep times one size, got %d", len(s.Collective.SizesBytes))
			}
			if len(s.Collective.Algorithms) != 1 {
				p.Addf("collective.algorithms", "a fault sweep times one algorithm, got %d", len(s.Collective.Algorithms))
			}
		}
		if k := base.Head().Kind; k != "" && k != kind {
			p.Addf(Field(kind, "kind"), "must be %q or omitted, got %q", kind, k)
		}
		// The sweep's own limits bound every sample; the base's would be
		// ignored silently.
		if h := base.Head(); h.MaxEvents != 0 || h.MaxMemoryBytes != 0 {
			f := "max_events"
			if h.MaxEvents == 0 {
				f = "max_memory_bytes"
			}
			p.Addf(Field(kind, f), "set it on the fault sweep itself, whose limits cover all its samples")
		}
		var bp Problems
		base.Validate(&bp)
		p.Merge("", problem.Under(kind, bp.Err()))
	}
	p.IntInRange("samples", s.Samples, 1, 1<<20)
	if p.OneOf("mode", s.Mode, FaultSweepModes()) && s.Mode == "sample" {
		if s.LinkFailures+s.LinkDegradations+s.NICFailures+s.SwitchFailures+s.Stragglers == 0 {
			p.Addf("", "a sample needs at least one fault: set link_failures, link_degradations, nic_failures, switch_failures or stragglers")
		}
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"link_failures", s.LinkFailures}, {"link_degradations", s.LinkDegradations}, {"nic_failures", s.NICFailures},
		{"switch_failures", s.SwitchFailures}, {"stragglers", s.Stragglers}, {"cables", s.Cables}} {
		p.IntInRange(c.name, c.v, 0, 1<<20)
		// A field the mode does not read would be ignored silently.
		if c.v > 0 && s.Mode == "single_link" && c.name != "cables" {
			p.Addf(c.name, "applies to mode \"sample\" (single_link faults one cable at a time), not %q", s.Mode)
		}
	}
	if s.Mode == "sample" && s.Cables > 0 {
		p.Addf("cables", "applies to mode \"single_link\", not %q", s.Mode)
	}
	if s.Mode == "sample" && s.SingleLinkFaults != "both" {
		p.Addf("single_link_faults", "applies to mode \"single_link\", not %q", s.Mode)
	}
	p.InRange("degraded_health", s.DegradedHealth, MinLinkHealth, 1)
	p.InRange("straggler_slowdown", s.StragglerSlowdown, 1, 1e6)
	p.OneOf("links", s.Links, []string{"all", "node", "fabric"})
	p.OneOf("single_link_faults", s.SingleLinkFaults, []string{"both", "degrade", "fail"})
	p.IntInRange("shards", s.Shards, 1, 1<<20)
	p.IntInRange("shard", s.Shard, 0, max(0, s.Shards-1))
}
