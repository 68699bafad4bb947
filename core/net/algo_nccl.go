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
	ch, tu, err := c.chooseNCCL(col.Op, col.Ranks, col.Bytes)
	if err != nil {
		return err
	}
	shape.choice = &ch
	col.ProtocolEfficiency = 1
	if tu.LinkBytesPerS > 0 {
		col.ProtocolEfficiency = min(1, ch.BusBytesPerS/tu.LinkBytesPerS)
	}
	steps := n - 1
	if col.Op == AllReduce {
		steps = 2 * (n - 1)
	}
	charged, err := c.ringLatency(col, steps)
	if err != nil {
		return err
	}
	shape.delay = sim.Seconds(max(0, ch.LatencyS-charged))
	return nil
}

// chooseNCCL is the choice of the tuner of the communicator over ranks
// (built at its first collective) for op on bytes.
func (c *Comms) chooseNCCL(op Op, ranks []int, bytes float64) (NCCLChoice, *NCCLTuner, error) {
	tkey := string(shapeKey(&Collective{Ranks: ranks}))
	tu := c.tuners[tkey]
	if tu == nil {
		var err error
		if tu, err = NewNCCLTuner(c.t, ranks); err != nil {
			return NCCLChoice{}, nil, err
		}
		tu.Before221 = c.ncclBefore221
		c.tuners[tkey] = tu
	}
	ch, err := tu.Choose(op, bytes)
	return ch, tu, err
}

// NCCLChannels is the channels, one thread block each, that NCCL runs op
// on bytes over ranks with (the tuner's choice: fewer for small messages,
// NVLS its own count), as algorithm "nccl" runs it; 0 where that moves no
// data (fewer than two ranks or no bytes).
func (c *Comms) NCCLChannels(op Op, ranks []int, bytes float64) (int, error) {
	if len(ranks) < 2 || !(bytes > 0) {
		return 0, nil
	}
	if err := c.ranksInRange(ranks); err != nil {
		return 0, err
	}
	ch, _, err := c.chooseNCCL(op, ranks, bytes)
	return ch.Channels, err
}

// ringLatency is the latency the links charge a ring of steps steps over
// col's ranks, as it will run (its channels' orders, Comms.channelOrders):
// step by step, every step waits for its slowest hop; as ring streams, a
// channel's stream pays its hops' mean latency a step (ringRoute), and the
// slowest channel ends the collective. The two differ where a ring mixes
// NVLink hops with network hops (several GPUs of a node in a multi-node
// ring): charging the slowest hop every step there left a stream run short
// of NCCL's latency by steps × (slowest − mean hop), 71 µs for a 64-rank
// all-gather on 16 DGX H100 nodes, 4 GPUs a node.
func (c *Comms) ringLatency(col *Collective, steps int) (float64, error) {
	channels := col.Channels
	if channels == 0 {
		channels = DefaultChannels(c.t, col.Ranks)
	}
	key := string(shapeKey(&Collective{Ranks: col.Ranks, Channels: channels}))
	h, ok := c.hops[key]
	if !ok {
		var err error
		if h, err = c.measureHops(col.Ranks, channels); err != nil {
			return 0, err
		}
		c.hops[key] = h
	}
	if col.Stream {
		return float64(steps) * h.mean, nil
	}
	return float64(steps) * h.slowest, nil
}

// ringHops are a communicator's ring hop latencies: the largest mean over
// its channels' rings and the slowest hop of any.
type ringHops struct{ mean, slowest float64 }

func (c *Comms) measureHops(ranks []int, channels int) (ringHops, error) {
	var h ringHops
	n := len(ranks)
	k := c.f.Kernel()
	for _, order := range c.channelOrders(ranks, channels) {
		sum, hops := 0.0, 0
		for i := range order {
			if k.Interrupted() { // canceled: routing a ring of half a million ranks takes seconds; Run returns why
				return h, nil
			}
			a, b := ranks[order[i]], ranks[order[(i+1)%n]]
			if c.t.RankDevice(a) == c.t.RankDevice(b) {
				continue
			}
			_, lat, err := c.route(a, b)
			if err != nil {
				return h, err
			}
			sum, hops = sum+lat, hops+1
			h.slowest = max(h.slowest, lat)
		}
		if hops > 0 {
			h.mean = max(h.mean, sum/float64(hops))
		}
	}
	return h, nil
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
