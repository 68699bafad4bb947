package net

import (
	"errors"
	"math"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// Fabric moves bytes between devices on a shared kernel. It is the narrow
// interface collectives and the executor use, so models of different
// fidelity sit behind it: *FlowNet (max-min fair sharing, congestion) and
// *Unaware (each transfer alone on its path, no contention).
type Fabric interface {
	// Kernel is the event loop the fabric schedules on.
	Kernel() *sim.Kernel
	// Topology is the machine, with rank -> device mapping and link health.
	Topology() *topo.Topology
	// Send starts moving bytes from device src to device dst now; when the
	// last byte has arrived, sink.Delivered(tag) runs. It fails only when dst
	// cannot be reached (*topo.UnreachableError).
	Send(src, dst int, bytes float64, sink Sink, tag int) error
	// SendRing starts a ring stream now: every hop (device pair) carries
	// bytes, all at one rate, as a ring runs when each GPU forwards what it
	// receives in slices small enough that every hop streams at once (NCCL
	// pipelines each ring step in slices); the stream moves at its most
	// congested hop, and a link that several hops cross carries bytes for
	// each. It is delivered bytes/rate after it starts plus `steps` times
	// the hops' mean path latency (each byte crosses steps hops).
	SendRing(hops []Hop, steps int, bytes float64, sink Sink, tag int) error
	// OnDeliver registers a hook called with every delivered flow's record.
	OnDeliver(func(FlowRecord))
	// LinkStats returns per-link counters up to now, one per topology link.
	LinkStats() []LinkStat
	// SetLinkHealth changes a link's health now (0 fails it; flows on it
	// are rerouted, or the run fails when no route is left).
	SetLinkHealth(link int, health float64)
	// SetDeviceDown fails or restores a device (NIC, switch, GPU) now.
	SetDeviceDown(device int, down bool)
	// Slowdown is the straggler factor of a device (1 = nominal); compute on
	// that device should take this much longer.
	Slowdown(device int) float64
	// SetSlowdown marks a device as a straggler.
	SetSlowdown(device int, factor float64)
}

// Hop is one (source, destination) device pair of a ring stream.
type Hop struct{ Src, Dst int32 }

// Sink receives deliveries; tag is whatever the sender passed to Send.
type Sink interface {
	Delivered(tag int)
}

// SinkFunc adapts a function to Sink, for one-off transfers.
type SinkFunc func(tag int)

// Delivered calls f.
func (f SinkFunc) Delivered(tag int) { f(tag) }

// FlowRecord describes one delivered transfer.
type FlowRecord struct {
	// ID numbers flows in the order they were sent.
	ID int64
	// Src and Dst are device ids (see Topology().Devices).
	Src, Dst int
	Bytes    float64
	// Start is when the flow was sent, TxEnd when its last byte left the
	// path's bottleneck, Delivered = TxEnd + path latency.
	Start, TxEnd, Delivered sim.Time
	// Hops is the path length in links at delivery.
	Hops int
	// Tag is the sender's tag.
	Tag int
}

// LinkStat holds the counters of one directed link.
type LinkStat struct {
	Link     int
	Src, Dst int
	// Bytes carried so far.
	Bytes float64
	// Busy is the total time the link carried at least one flow.
	Busy sim.Time
	// PeakFlows is the largest number of flows that shared the link at once.
	PeakFlows int
	// BandwidthBytesPerS is the healthy bandwidth (utilization is measured
	// against it, so a degraded link shows below 100% even when saturated).
	BandwidthBytesPerS float64
}

// counters is the bookkeeping both fabrics share: per-link stats, faults,
// stragglers and delivery hooks. Each fabric keeps its link counters where
// its hot path wants them; link finds one.
type counters struct {
	k        *sim.Kernel
	t        *topo.Topology
	link     func(l int) linkCounter
	hooks    []func(FlowRecord)
	slow     map[int]float64
	nextFlow int64
}

func newCounters(k *sim.Kernel, t *topo.Topology, link func(l int) linkCounter) counters {
	return counters{k: k, t: t, link: link, slow: map[int]float64{}}
}

func (c *counters) Kernel() *sim.Kernel          { return c.k }
func (c *counters) Topology() *topo.Topology     { return c.t }
func (c *counters) OnDeliver(f func(FlowRecord)) { c.hooks = append(c.hooks, f) }

func (c *counters) Slowdown(device int) float64 {
	if s, ok := c.slow[device]; ok {
		return s
	}
	return 1
}

func (c *counters) SetSlowdown(device int, factor float64) { c.slow[device] = factor }

// linkCounter is one link's bookkeeping: bytes, busy time, concurrency.
type linkCounter struct {
	bytes  float64
	busy   sim.Time
	since  sim.Time
	active int32
	peak   int32
}

// enter records a flow joining the link at now.
func (x *linkCounter) enter(now sim.Time) {
	x.active++
	if x.active == 1 {
		x.since = now
	}
	x.peak = max(x.peak, x.active)
}

// leave records a flow leaving the link at t (<= now).
func (x *linkCounter) leave(t sim.Time) {
	x.active--
	if x.active == 0 {
		x.busy += t - x.since
	}
}

func (c *counters) LinkStats() []LinkStat {
	out := make([]LinkStat, len(c.t.Links))
	now := c.k.Now()
	for i, l := range c.t.Links {
		x := c.link(i)
		out[i] = LinkStat{Link: i, Src: l.Src, Dst: l.Dst, Bytes: x.bytes, Busy: x.busy,
			PeakFlows: int(x.peak), BandwidthBytesPerS: l.BandwidthBytesPerS}
		if x.active > 0 {
			out[i].Busy += now - x.since
		}
	}
	return out
}

func (c *counters) deliver(r FlowRecord) {
	for _, h := range c.hooks {
		h(r)
	}
}

func pathLatency(t *topo.Topology, path []int32) sim.Time {
	var s float64
	for _, l := range path {
		s += t.Links[l].LatencyS
	}
	return sim.Seconds(s)
}

// errInterrupted: a set-up step stopped because the run is canceled or has
// failed; the kernel's Run returns why.
var errInterrupted = errors.New("interrupted")

// ringRoute is a ring stream's path: the hops' routes one after another
// (a link once per hop that crosses it), its latency (steps times the mean
// hop latency), its rate alone on the network (each link's capacity over
// the hops crossing it, at the tightest link) and whether some link is
// crossed more than once; errInterrupted when the kernel's run is canceled
// or failed on the way (sim.Kernel.Interrupted).
func ringRoute(k *sim.Kernel, t *topo.Topology, hops []Hop, steps int) (path []int32, lat sim.Time, rate float64, dup bool, err error) {
	crossings := map[int32]int{}
	var latS float64
	for _, h := range hops {
		if k.Interrupted() { // a ring of half a million ranks routes for a second
			return nil, 0, 0, false, errInterrupted
		}
		p, err := t.Route(int(h.Src), int(h.Dst))
		if err != nil {
			return nil, 0, 0, false, err
		}
		path = append(path, p...)
		for _, l := range p {
			crossings[l]++
			latS += t.Links[l].LatencyS
		}
	}
	rate = math.Inf(1)
	for l, k := range crossings {
		rate = min(rate, t.Capacity(int(l))/float64(k))
		dup = dup || k > 1
	}
	if len(hops) > 0 {
		lat = sim.Seconds(latS * float64(steps) / float64(len(hops)))
	}
	return path, lat, rate, dup, nil
}
