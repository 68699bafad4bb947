package net

import (
	"errors"
	"fmt"
	"math"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// Unaware is the congestion-unaware model: each transfer takes its path's
// latency plus bytes over the path's bottleneck capacity, as if it were
// alone on the network. It is cheaper than FlowNet and shows what
// contention costs when the two are compared. Link counters are kept the
// same way (a link may then show more than 100% utilization: that excess is
// the contention this model ignores).
type Unaware struct {
	counters
	lc      []linkCounter
	pending []unawareFlow
	free    []int32
}

type unawareFlow struct {
	rec  FlowRecord
	path []int32
	sink Sink
}

// NewUnaware builds the congestion-unaware model.
func NewUnaware(k *sim.Kernel, t *topo.Topology) *Unaware {
	u := &Unaware{lc: make([]linkCounter, len(t.Links))}
	u.counters = newCounters(k, t, func(l int) linkCounter { return u.lc[l] })
	return u
}

// Send implements Fabric.
func (u *Unaware) Send(src, dst int, bytes float64, sink Sink, tag int) error {
	path, err := u.t.Route(src, dst)
	if err != nil {
		return err
	}
	rate := math.Inf(1)
	for _, l := range path {
		rate = min(rate, u.t.Capacity(int(l)))
	}
	u.launch(src, dst, path, pathLatency(u.t, path), rate, bytes, sink, tag)
	return nil
}

// SendRing implements Fabric: the stream alone at its bottleneck.
func (u *Unaware) SendRing(hops []Hop, steps int, bytes float64, sink Sink, tag int) error {
	if len(hops) == 0 {
		return fmt.Errorf("a ring stream needs at least one hop")
	}
	path, lat, rate, _, err := ringRoute(u.k, u.t, hops, steps)
	if errors.Is(err, errInterrupted) {
		return nil // Run returns why
	}
	if err != nil {
		return err
	}
	u.launch(int(hops[0].Src), int(hops[len(hops)-1].Dst), path, lat, rate, bytes, sink, tag)
	return nil
}

func (u *Unaware) launch(src, dst int, path []int32, lat sim.Time, rate, bytes float64, sink Sink, tag int) {
	now := u.k.Now()
	tx := sim.Time(0)
	if len(path) > 0 && bytes > 0 {
		tx = sim.SecondsCeil(bytes / rate)
	}
	var i int32
	if k := len(u.free); k > 0 {
		i = u.free[k-1]
		u.free = u.free[:k-1]
	} else {
		u.pending = append(u.pending, unawareFlow{})
		i = int32(len(u.pending) - 1)
	}
	u.pending[i] = unawareFlow{path: path, sink: sink, rec: FlowRecord{ID: u.nextFlow, Src: src, Dst: dst,
		Bytes: bytes, Start: now, TxEnd: now + tx, Delivered: now + tx + lat, Hops: len(path), Tag: tag}}
	u.nextFlow++
	for _, l := range path {
		u.lc[l].enter(now)
		u.lc[l].bytes += bytes
	}
	u.k.AtHandler(now+tx, u, int(i)<<1)
}

// Handle implements sim.Handler: bit 0 clear = end of transmission, set = delivery.
func (u *Unaware) Handle(arg int) {
	i := arg >> 1
	f := &u.pending[i]
	if arg&1 == 0 {
		now := u.k.Now()
		for _, l := range f.path {
			u.lc[l].leave(now)
		}
		u.k.AtHandler(f.rec.Delivered, u, arg|1)
		return
	}
	rec, sink := f.rec, f.sink
	*f = unawareFlow{}
	u.free = append(u.free, int32(i))
	u.deliver(rec)
	sink.Delivered(rec.Tag)
}

// SetLinkHealth implements Fabric; flows already sent keep their times.
func (u *Unaware) SetLinkHealth(link int, health float64) { u.t.SetHealth(link, health) }

// SetDeviceDown implements Fabric; flows already sent keep their times.
func (u *Unaware) SetDeviceDown(device int, down bool) { u.t.SetDeviceDown(device, down) }
