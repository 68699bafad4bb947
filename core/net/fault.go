package net

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
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

// ApplyFaults resolves a fault spec against the fabric's topology, draws the
// sampled faults from the seed's "faults" stream, sets stragglers now and
// schedules every health change on the kernel. It returns the schedule in
// time order. Unknown device names or missing links are a *spec.Error.
func ApplyFaults(f Fabric, fs spec.Faults, seed uint64) ([]FaultEvent, error) {
	t := f.Topology()
	var p spec.Problems
	dev := func(path, name string) int {
		d, ok := t.DeviceByName(name)
		if !ok {
			p.Addf(path, "no device named %q in cluster %q", name, t.Name)
			return -1
		}
		return d
	}
	var evs []FaultEvent
	linkChange := func(l int, h, at, until float64) {
		evs = append(evs, FaultEvent{At: sim.Seconds(at), What: "link_health", Link: l, Device: -1, Health: h})
		if until > 0 {
			evs = append(evs, FaultEvent{At: sim.Seconds(until), What: "link_health", Link: l, Device: -1, Health: t.Links[l].Health})
		}
	}
	for i, lf := range fs.Links {
		path := spec.Index("faults.links", i)
		a, b := dev(spec.Field(path, "src"), lf.Src), dev(spec.Field(path, "dst"), lf.Dst)
		if a < 0 || b < 0 {
			continue
		}
		pairs := [][2]int{{a, b}}
		if lf.BothDirections {
			pairs = append(pairs, [2]int{b, a})
		}
		for _, pr := range pairs {
			l, ok := t.LinkBetween(pr[0], pr[1])
			if !ok {
				p.Addf(path, "no link from %s to %s", t.Devices[pr[0]].Name, t.Devices[pr[1]].Name)
				continue
			}
			linkChange(l, lf.Health, lf.AtS, lf.UntilS)
		}
	}
	for i, df := range fs.Devices {
		d := dev(spec.Field(spec.Index("faults.devices", i), "device"), df.Device)
		if d < 0 {
			continue
		}
		evs = append(evs, FaultEvent{At: sim.Seconds(df.AtS), What: "device_down", Link: -1, Device: d})
		if df.UntilS > 0 {
			evs = append(evs, FaultEvent{At: sim.Seconds(df.UntilS), What: "device_up", Link: -1, Device: d})
		}
	}
	for i, s := range fs.Stragglers {
		if d := dev(spec.Field(spec.Index("faults.stragglers", i), "device"), s.Device); d >= 0 {
			evs = append(evs, FaultEvent{What: "straggler", Link: -1, Device: d, Health: s.Slowdown})
		}
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	if s := fs.Sample; s != nil {
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

// sampleFaults draws, per cable (a link and its reverse, taken once from the
// lower-numbered end) and per GPU, independent failures, degradations and
// stragglers for the whole run.
func sampleFaults(t *topo.Topology, s *spec.FaultSample, seed uint64) []FaultEvent {
	r := rng.Stream(seed, "faults")
	var evs []FaultEvent
	for l, lk := range t.Links {
		if lk.Src > lk.Dst {
			continue
		}
		rev, hasRev := t.LinkBetween(lk.Dst, lk.Src)
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

// FromSpec builds a fabric on kernel k from a validated cluster spec
// ("flow" model = FlowNet, "unaware" = Unaware), applies the faults
// (sampled ones from seed) and attaches a collective engine: everything an
// executor needs in one call. The topology's build polls the context k
// watches (sim.Kernel.Watch).
func FromSpec(k *sim.Kernel, cluster spec.Cluster, faults spec.Faults, seed uint64, model string) (Fabric, *Comms, []FaultEvent, error) {
	tp, err := topo.FromSpecContext(k.Watched(), cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	var f Fabric
	switch model {
	case "", "flow":
		f = NewFlowNet(k, tp)
	case "unaware":
		f = NewUnaware(k, tp)
	default:
		return nil, nil, nil, fmt.Errorf("unknown network model %q (want \"flow\" or \"unaware\")", model)
	}
	evs, err := ApplyFaults(f, faults, seed)
	if err != nil {
		return nil, nil, nil, err
	}
	return f, NewComms(f), evs, nil
}
