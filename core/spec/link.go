package spec

import (
	"encoding/json"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// Link is a link of a cluster: a link preset's name ("nvlink4") or, to ask
// what a faster or slower link would do, the preset with figures changed:
//
//	{"preset": "nvlink5", "bandwidth_bytes_per_s": 1.2e12}
//
// The preset names the technology (which NCCL's tuner and the protocols
// read); what is not given is the preset's.
type Link struct {
	Preset string `json:"preset" spec:"required"`
	// BandwidthBytesPerS per direction, at least 1e6 (MinBandwidthBytesPerS).
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s,omitempty"`
	// LatencyS one way per hop, in [0, 1e6] s (MaxDurationS).
	LatencyS *float64 `json:"latency_s,omitempty"`
	// CollectiveEfficiency: the share of the bandwidth a collective
	// library's protocol leaves for payload, in (0, 1].
	CollectiveEfficiency float64 `json:"collective_efficiency,omitempty"`
	decodeProblems       []Problem
}

// linkFields is Link without its JSON methods, for strict decoding.
type linkFields Link

// UnmarshalJSON accepts a preset name or an object of a preset and figures.
func (l *Link) UnmarshalJSON(data []byte) error {
	*l = Link{}
	var f linkFields
	object, probs, err := decodeNameOrObject(data, &l.Preset, &f)
	if err != nil || !object {
		return err
	}
	*l = Link(f)
	l.decodeProblems = probs
	return nil
}

// MarshalJSON writes a bare preset as its name, anything else as an object.
func (l Link) MarshalJSON() ([]byte, error) {
	if l.BandwidthBytesPerS == 0 && l.LatencyS == nil && l.CollectiveEfficiency == 0 {
		return json.Marshal(l.Preset)
	}
	return json.Marshal(linkFields(l))
}

// IsZero reports a link that names nothing (what omitzero leaves out).
func (l Link) IsZero() bool {
	return l.Preset == "" && l.BandwidthBytesPerS == 0 && l.LatencyS == nil && l.CollectiveEfficiency == 0
}

// absent reports a link the spec did not give (one given as a bad object
// is not absent: its problems are reported, not replaced by a default).
func (l Link) absent() bool { return l.IsZero() && len(l.decodeProblems) == 0 }

// Validate reports what is wrong with the link at path.
func (l Link) Validate(p *Problems, path string) {
	for _, dp := range l.decodeProblems {
		dp.Path = Field(path, dp.Path)
		p.Add(dp)
	}
	at := path
	if l.BandwidthBytesPerS != 0 || l.LatencyS != nil || l.CollectiveEfficiency != 0 {
		at = Field(path, "preset")
	}
	if l.Preset != "" || len(l.decodeProblems) == 0 { // a missing preset is a decode problem
		p.OneOf(at, l.Preset, hw.LinkNames())
	}
	if l.BandwidthBytesPerS != 0 {
		p.Bandwidth(Field(path, "bandwidth_bytes_per_s"), l.BandwidthBytesPerS)
	}
	if l.LatencyS != nil {
		p.Duration(Field(path, "latency_s"), *l.LatencyS)
	}
	if l.CollectiveEfficiency != 0 {
		p.InRange(Field(path, "collective_efficiency"), l.CollectiveEfficiency, 0.01, 1)
	}
}

// Resolve returns the link: the preset with the figures given (the zero
// link when the spec gave none).
func (l Link) Resolve() hw.Link {
	out, _ := hw.LinkByName(l.Preset)
	if l.BandwidthBytesPerS > 0 {
		out.BandwidthBytesPerS = l.BandwidthBytesPerS
	}
	if l.LatencyS != nil {
		out.LatencyS = *l.LatencyS
	}
	if l.CollectiveEfficiency > 0 {
		out.CollectiveEfficiency = l.CollectiveEfficiency
	}
	return out
}
