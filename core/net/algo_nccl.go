package net

import "github.com/eidolon-sim/eidolon/core/sim"

// tuneNCCL, the chooser of algorithm "nccl" (registry.go), asks NCCL's
// tuner (nccl.go) what it does with col and makes col that choice. The data
// then moves as a ring (a flow per step, or streams) at the choice's
// achieved bus bandwidth (its protocol efficiency on the ring's slowest
// hop), after the part of the choice's latency that the ring's links do not
// already charge (each of its steps pays the slowest hop's path latency).
//
// The registry admits only the operations the tuner models; the tuner
// needs ranks in range, checked here, before the chosen request gets its
// defaults and is validated as a whole.
func tuneNCCL(c *Comms, col *Collective, shape *checkedShape) error {
	n := len(col.Ranks)
	if err := c.ranksInRange(col.Ranks); err != nil {
		return err
	}
	col.Algorithm = Ring
	if n < 2 || !(col.Bytes > 0) {
		return nil
	}
	tkey := string(shapeKey(&Collective{Ranks: col.Ranks}))
	tu := c.tuners[tkey]
	if tu == nil {
		var err error
		if tu, err = NewNCCLTuner(c.t, col.Ranks); err != nil {
			return err
		}
		c.tuners[tkey] = tu
	}
	ch, err := tu.Choose(col.Op, col.Bytes)
	if err != nil {
		return err
	}
	shape.choice = &ch
	col.ProtocolEfficiency = 1
	if tu.LinkBytesPerS > 0 {
		col.ProtocolEfficiency = min(1, ch.BusBytesPerS/tu.LinkBytesPerS)
	}
	hop := 0.0
	for i := range col.Ranks {
		_, lat, err := c.route(col.Ranks[i], col.Ranks[(i+1)%n])
		if err != nil {
			return err
		}
		hop = max(hop, lat)
	}
	steps := n - 1
	if col.Op == AllReduce {
		steps = 2 * (n - 1)
	}
	shape.delay = sim.Seconds(max(0, ch.LatencyS-float64(steps)*hop))
	return nil
}

// NCCLBaseLatencyS is the fixed latency NCCL's own cost model gives every
// ring collective with its low-latency protocol, 6.6 µs (baseLat, Ring/LL,
// in src/graph/tuning.cc); the per-hop latencies come on top from the
// links. NCCL's tuner does not price point-to-point transfers: send_recv
// "nccl" and the training executor's transfers outside the tuner
// (send/recv, all-to-all, broadcast) are charged it.
const NCCLBaseLatencyS = 6.6e-6

// tuneSendRecv, the chooser of send_recv "nccl" (registry.go): one
// transfer from Ranks[0] to Ranks[1] (Direct's one-hop chain) after
// NCCLBaseLatencyS, at the protocol efficiency of its route's limiting link
// (PathEfficiency), as the training executor prices a pipeline stage's
// send. Its choice reports that latency and the bandwidth the route then
// gives; NCCL's p2p channels and protocols are not modelled (Channels 0).
func tuneSendRecv(c *Comms, col *Collective, shape *checkedShape) error {
	if err := c.ranksInRange(col.Ranks); err != nil {
		return err
	}
	col.Algorithm = Direct
	if len(col.Ranks) != 2 {
		return nil // validate refuses it
	}
	path, _, err := c.route(col.Ranks[0], col.Ranks[1])
	if err != nil {
		return err
	}
	col.ProtocolEfficiency = PathEfficiency(c.t, path)
	_, eff := pathRates(c.t, path)
	ch := NCCLChoice{Algorithm: Direct, LatencyS: NCCLBaseLatencyS, AlgBytesPerS: eff}
	ch.BusBytesPerS = ch.AlgBytesPerS
	ch.ModelTimeS = ch.TimeS(col.Bytes)
	shape.choice = &ch
	shape.delay = sim.Seconds(NCCLBaseLatencyS)
	return nil
}

// route is the path from rank a's device to rank b's and its one-way
// latency (the sum of its links').
func (c *Comms) route(a, b int) (path []int32, latencyS float64, err error) {
	path, err = c.t.Route(c.t.RankDevice(a), c.t.RankDevice(b))
	for _, l := range path {
		latencyS += c.t.Links[l].LatencyS
	}
	return path, latencyS, err
}
