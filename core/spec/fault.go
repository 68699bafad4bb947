package spec

import (
	"fmt"
	"math"
)

// Faults are failures and slowdowns applied during a run, given explicitly or
// sampled from a seed. Devices are named as in the topology ("n0.gpu3",
// "n1.nic0", "n0.nvswitch", "rail2.leaf0", "spine5", "gpu4", "switch").
type Faults struct {
	Links      []LinkFault   `json:"links,omitempty"`
	Devices    []DeviceFault `json:"devices,omitempty"`
	Stragglers []Straggler   `json:"stragglers,omitempty"`
	// Sample draws more faults with the run's seed.
	Sample *FaultSample `json:"sample,omitempty"`
}

// MinLinkHealth is the least health a degraded link may keep (a link
// fault's health, fault_sweep's degraded_health): at 1e-6 a 50 GB/s NIC
// still moves 50 kB a second, and what is slower makes a collective's
// flow outlast the simulated clock's 106 days (int64 picoseconds), which
// would fail the run with no field named.
const MinLinkHealth = 1e-6

// LinkFault sets the health of the link(s) between two devices for a time.
type LinkFault struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
	// Health is the bandwidth scale: 0 fails the link, else in
	// [MinLinkHealth, 1]. Required: a missing health would otherwise read
	// as 0 and fail the link silently.
	Health float64 `json:"health" spec:"required"`
	// AtS is when it happens (default 0); UntilS when it recovers (0 = never).
	AtS    float64 `json:"at_s,omitempty"`
	UntilS float64 `json:"until_s,omitempty"`
	// BothDirections also applies it to dst -> src (a cable fault).
	BothDirections bool `json:"both_directions,omitempty"`
}

// DeviceFault fails a device (NIC, switch, GPU) and all its links for a time.
type DeviceFault struct {
	Device string  `json:"device"`
	AtS    float64 `json:"at_s,omitempty"`
	UntilS float64 `json:"until_s,omitempty"`
}

// Straggler slows a device's compute (and quantization kernels) by Slowdown.
type Straggler struct {
	Device   string  `json:"device"`
	Slowdown float64 `json:"slowdown"`
}

// FaultSample draws faults independently per cable (both directions of a
// connection) and per GPU.
type FaultSample struct {
	// LinkFailureProbability fails a cable for the whole run.
	LinkFailureProbability float64 `json:"link_failure_probability,omitempty"`
	// LinkDegradeProbability degrades a cable to DegradedHealth (default 0.5).
	LinkDegradeProbability float64 `json:"link_degrade_probability,omitempty"`
	DegradedHealth         float64 `json:"degraded_health,omitempty"`
	// StragglerProbability makes a GPU a straggler with Slowdown (default 1.5).
	StragglerProbability float64 `json:"straggler_probability,omitempty"`
	Slowdown             float64 `json:"slowdown,omitempty"`
}

// Defaults fills optional fields.
func (f *Faults) Defaults() {
	if s := f.Sample; s != nil {
		if s.DegradedHealth == 0 {
			s.DegradedHealth = 0.5
		}
		if s.Slowdown == 0 {
			s.Slowdown = 1.5
		}
	}
}

// Timed reports whether a fault happens or ends after time 0.
func (f *Faults) Timed() bool {
	for _, l := range f.Links {
		if l.AtS > 0 || l.UntilS > 0 {
			return true
		}
	}
	for _, d := range f.Devices {
		if d.AtS > 0 || d.UntilS > 0 {
			return true
		}
	}
	return false
}

// EveryReplica reports whether the faults may make core/exec simulate
// every replica instead of mirroring the healthy ones: a fault after time 0
// (mirroring is off: the replicas would be hit at different moments), a
// failed device (a spine switch reroutes every replica's routes through
// it) or sampled link failures (any number of cables). A failed link given
// alone reroutes the flows through one switch's ports (FailedLinks).
func (f *Faults) EveryReplica() bool {
	return f.Timed() || len(f.Devices) > 0 || (f.Sample != nil && f.Sample.LinkFailureProbability > 0)
}

// TimelineStragglers is how many stragglers' ranks a default timeline
// lists beside the first rank of each stage (in rank order).
const TimelineStragglers = 16

// touchedReplicas bounds how many of n replicas of gpus GPUs each the
// faults make core/exec simulate beside the first, where they do not make
// it simulate all (EveryReplica): each straggler's replica, ReplicasPerFailedLink
// for each link given failed or degraded (its flows cross one switch's
// ports), and of sampled stragglers and degraded cables the expected
// share of replicas with at least one (a replica's GPUs each on about
// two cables: its NVLink and its NIC's).
func (f *Faults) touchedReplicas(n, gpus int) float64 {
	touched := float64(len(f.Stragglers) + ReplicasPerFailedLink*len(f.Links))
	if s := f.Sample; s != nil {
		healthy := math.Pow(1-s.StragglerProbability, float64(gpus)) * math.Pow(1-s.LinkDegradeProbability, 2*float64(gpus))
		touched += (1 - healthy) * float64(n)
	}
	return touched
}

// timelineStragglers is how many stragglers' ranks a default timeline
// lists: the given ones and, where stragglers are sampled, as many more,
// up to TimelineStragglers.
func (f *Faults) timelineStragglers() float64 {
	n := len(f.Stragglers)
	if f.Sample != nil && f.Sample.StragglerProbability > 0 {
		n = TimelineStragglers
	}
	return float64(min(n, TimelineStragglers))
}

// ReplicasPerFailedLink bounds the replicas one failed cable makes core/exec
// simulate: the routes it changes are those through one switch's ports,
// whose nodes (half a 64-port leaf) hold at most this many replicas' ranks.
const ReplicasPerFailedLink = 32

// Validate reports every problem under path. Device names are checked when
// the topology is built.
func (f *Faults) Validate(p *Problems, path string) {
	window := func(ep string, at, until float64) {
		p.NonNegative(Field(ep, "at_s"), at)
		if until != 0 && !(until > at) {
			p.Addf(Field(ep, "until_s"), "must be 0 (never recovers) or > at_s = %v, got %v", at, until)
		}
	}
	for i, l := range f.Links {
		ep := Index(Field(path, "links"), i)
		if l.Src == "" || l.Dst == "" {
			p.Addf(ep, "needs src and dst device names")
		}
		if h := l.Health; !(h == 0 || h >= MinLinkHealth && h <= 1) {
			p.AddAllowed(Field(ep, "health"), fmt.Sprintf("0 or [%v, 1]", MinLinkHealth),
				"must be 0 (a failed link) or in [%v, 1], got %v", MinLinkHealth, h)
		}
		window(ep, l.AtS, l.UntilS)
	}
	for i, d := range f.Devices {
		ep := Index(Field(path, "devices"), i)
		if d.Device == "" {
			p.Addf(Field(ep, "device"), "needs a device name")
		}
		window(ep, d.AtS, d.UntilS)
	}
	for i, s := range f.Stragglers {
		ep := Index(Field(path, "stragglers"), i)
		if s.Device == "" {
			p.Addf(Field(ep, "device"), "needs a device name")
		}
		p.InRange(Field(ep, "slowdown"), s.Slowdown, 1, 1e6)
	}
	if s := f.Sample; s != nil {
		sp := Field(path, "sample")
		p.InRange(Field(sp, "link_failure_probability"), s.LinkFailureProbability, 0, 1)
		p.InRange(Field(sp, "link_degrade_probability"), s.LinkDegradeProbability, 0, 1)
		p.InRange(Field(sp, "degraded_health"), s.DegradedHealth, MinLinkHealth, 1)
		p.InRange(Field(sp, "straggler_probability"), s.StragglerProbability, 0, 1)
		p.InRange(Field(sp, "slowdown"), s.Slowdown, 1, 1e6)
	}
}
