package net

import (
	"fmt"
	"slices"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// FaultEvent is one scheduled change, for timelines.
type FaultEvent struct {
	At sim.Time
	// What: "link_health", "device_down", "device_up", "straggler".
	What string
	// Link is the link id (or -1); Device the device id (or -1).
	Link, Device int
	Health       float64
}

// FaultPlan is a run's faults in plain values: link and device ids of one
// topology (package compile resolves a validated spec's device names into
// one, with the spec's paths in its problems).
type FaultPlan struct {
	Links      []LinkFault
	Devices    []DeviceFault
	Stragglers []Straggler
	// Sample draws more faults with the run's seed.
	Sample *FaultSample
}

// LinkFault sets one directed link's health (0 fails it) from AtS until
// UntilS (0: never restored).
type LinkFault struct {
	Link                int
	Health, AtS, UntilS float64
}

// DeviceFault fails a device and all its links from AtS until UntilS (0: never).
type DeviceFault struct {
	Device      int
	AtS, UntilS float64
}

// Straggler slows a device's compute by Slowdown.
type Straggler struct {
	Device   int
	Slowdown float64
}

// FaultSample draws faults independently per cable (a link and its
// reverse) and per GPU: a cable fails with LinkFailureProbability or runs
// at DegradedHealth with LinkDegradeProbability; a GPU straggles by
// Slowdown with StragglerProbability.
type FaultSample struct {
	LinkFailureProbability, LinkDegradeProbability, DegradedHealth float64
	StragglerProbability, Slowdown                                 float64
}

// With is the plan followed by extra's explicit faults (new slices: p's are
// never appended to); p's sample stays.
func (p FaultPlan) With(extra FaultPlan) FaultPlan {
	return FaultPlan{
		Links:      append(slices.Clip(p.Links), extra.Links...),
		Devices:    append(slices.Clip(p.Devices), extra.Devices...),
		Stragglers: append(slices.Clip(p.Stragglers), extra.Stragglers...),
		Sample:     p.Sample,
	}
}

// ApplyFaults draws the plan's sampled faults from the seed's "faults"
// stream, sets stragglers now and schedules every health change on the
// kernel. It returns the schedule in time order. An id the fabric's
// topology does not have is an error (a plan compiled for another cluster).
func ApplyFaults(f Fabric, fp FaultPlan, seed uint64) ([]FaultEvent, error) {
	t := f.Topology()
	var evs []FaultEvent
	for _, lf := range fp.Links {
		if lf.Link < 0 || lf.Link >= len(t.Links) {
			return nil, fmt.Errorf("fault on link %d: cluster %q has %d links", lf.Link, t.Name, len(t.Links))
		}
		evs = append(evs, FaultEvent{At: sim.Seconds(lf.AtS), What: "link_health", Link: lf.Link, Device: -1, Health: lf.Health})
		if lf.UntilS > 0 {
			evs = append(evs, FaultEvent{At: sim.Seconds(lf.UntilS), What: "link_health", Link: lf.Link, Device: -1, Health: t.Links[lf.Link].Health})
		}
	}
	device := func(d int) error {
		if d < 0 || d >= len(t.Devices) {
			return fmt.Errorf("fault on device %d: cluster %q has %d devices", d, t.Name, len(t.Devices))
		}
		return nil
	}
	for _, df := range fp.Devices {
		if err := device(df.Device); err != nil {
			return nil, err
		}
		evs = append(evs, FaultEvent{At: sim.Seconds(df.AtS), What: "device_down", Link: -1, Device: df.Device})
		if df.UntilS > 0 {
			evs = append(evs, FaultEvent{At: sim.Seconds(df.UntilS), What: "device_up", Link: -1, Device: df.Device})
		}
	}
	for _, s := range fp.Stragglers {
		if err := device(s.Device); err != nil {
			return nil, err
		}
		evs = append(evs, FaultEvent{What: "straggler", Link: -1, Device: s.Device, Health: s.Slowdown})
	}
	if s := fp.Sample; s != nil {
		evs = append(evs, sampleFaults(t, s, seed)...)
	}
	sortEvents(evs)
	k := f.Kernel()
	for _, e := range evs {
		e := e
		switch e.What {
		case "straggler":
			f.SetSlowdown(e.Device, e.Health)
		case "link_health":
			k.At(e.At, func() { f.SetLinkHealth(e.Link, e.Health) })
		case "device_down", "device_up":
			k.At(e.At, func() { f.SetDeviceDown(e.Device, e.What == "device_down") })
		}
	}
	return evs, nil
}

// sampleFaults draws, per cable (a link and its reverse, topo.Reverse,
// taken once from the lower-numbered end, topo.CableEnds) and per GPU,
// independent failures, degradations and stragglers for the whole run.
func sampleFaults(t *topo.Topology, s *FaultSample, seed uint64) []FaultEvent {
	r := rng.Stream(seed, "faults")
	var evs []FaultEvent
	for l := range t.Links {
		if a, b := t.CableEnds(l); a > b {
			continue
		}
		rev, hasRev := t.Reverse(l)
		u := r.Float64()
		h := -1.0
		switch {
		case u < s.LinkFailureProbability:
			h = 0
		case u < s.LinkFailureProbability+s.LinkDegradeProbability:
			h = s.DegradedHealth
		}
		if h < 0 {
			continue
		}
		evs = append(evs, FaultEvent{What: "link_health", Link: l, Device: -1, Health: h})
		if hasRev {
			evs = append(evs, FaultEvent{What: "link_health", Link: rev, Device: -1, Health: h})
		}
	}
	for _, g := range t.GPUs() {
		if r.Float64() < s.StragglerProbability {
			evs = append(evs, FaultEvent{What: "straggler", Link: -1, Device: g, Health: s.Slowdown})
		}
	}
	return evs
}

func sortEvents(evs []FaultEvent) {
	// insertion order is the tie-break: a stable sort by time
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].At < evs[j-1].At; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

// Describe names a fault event's target.
func (e FaultEvent) Describe(t *topo.Topology) string {
	if e.Link >= 0 {
		return fmt.Sprintf("%s health %.3g", t.LinkName(e.Link), e.Health)
	}
	if e.What == "straggler" {
		return fmt.Sprintf("%s slowdown %.3g", t.Devices[e.Device].Name, e.Health)
	}
	return t.Devices[e.Device].Name
}

// Build makes a fabric on kernel k over topology t ("flow" model =
// FlowNet, "unaware" = Unaware), applies the fault plan (sampled faults
// from seed) and attaches a collective engine: everything an executor
// needs in one call.
func Build(k *sim.Kernel, t *topo.Topology, faults FaultPlan, seed uint64, model string) (Fabric, *Comms, []FaultEvent, error) {
	var f Fabric
	switch model {
	case "", "flow":
		f = NewFlowNet(k, t)
	case "unaware":
		f = NewUnaware(k, t)
	default:
		return nil, nil, nil, fmt.Errorf("unknown network model %q (want \"flow\" or \"unaware\")", model)
	}
	evs, err := ApplyFaults(f, faults, seed)
	if err != nil {
		return nil, nil, nil, err
	}
	return f, NewComms(f), evs, nil
}
