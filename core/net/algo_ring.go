package net

import (
	"fmt"
	"slices"

	"github.com/eidolon-sim/eidolon/core/topo"
)

// The ring family: all_reduce, all_gather and reduce_scatter as rings
// (NCCL's channels: several rings, each crossing nodes through NICs of its
// own; by steps or as ring streams), and broadcast and reduce as a
// pipelined chain from or to the root. ringProg also runs the hierarchical
// all-reduce's segments (algo_hierarchical.go).

// buildRing: n−1 steps (2(n−1) for all_reduce) to the next rank of each
// channel's ring, each step carrying Bytes/(chunks·channels·n).
func buildRing(c *Comms, col *Collective) (program, error) {
	n := len(col.Ranks)
	steps := n - 1
	if col.Op == AllReduce {
		steps = 2 * (n - 1)
	}
	p := &ringProg{chunks: col.Chunks}
	per := col.Bytes / float64(col.Chunks) / float64(col.Channels)
	for _, order := range c.channelOrders(col.Ranks, col.Channels) {
		p.channels = append(p.channels, []segment{{steps, per / float64(n), ringNext(order)}})
	}
	return p, nil
}

// buildChain: broadcast down (reduce up) a chain from the root, pipelined
// in chunks: a tree program over chains. Like NCCL's ring broadcast and
// reduce, the data is split over the channels, each a chain along its
// ring's order (channelOrders: across nodes one per rail, through NICs of
// its own) starting at the root; one channel is the communicator's order
// from the root.
func buildChain(c *Comms, col *Collective) (program, error) {
	channels := max(col.Channels, 1)
	return rootedTrees(col, chain, c.channelOrders(col.Ranks, channels)), nil
}

// ringNext maps each communicator index of order to the next one, around.
func ringNext(order []int) []int32 {
	next := make([]int32, len(order))
	for i, p := range order {
		next[p] = int32(order[(i+1)%len(order)])
	}
	return next
}

// DefaultChannels is the number of ring channels NCCL would build for a
// communicator. Across nodes, one per rail: the NICs of a node that the
// communicator's GPUs there can each use alone, i.e. min(NICs, ranks) on
// the least-provisioned node. NCCL's ring search gives each channel its own
// NIC ("NET0 is already used by the first channel; so we don't want to use
// it twice", S. Jeaugey, github.com/NVIDIA/nccl/issues/1313), so all-reduce
// "will form multiple rings so that it can utilize all the available NICs
// for maximum bandwidth" (NVIDIA, github.com/NVIDIA/nccl-tests/issues/277).
// Inside one node (or on a topology without hosts) it is 1: on an NVSwitch
// every channel's ring uses the same links, and one ring already reaches
// the per-GPU NVLink bandwidth that NCCL's HGX-H100 figure is compared
// with (bench/net_test.go); more would only multiply flows.
func DefaultChannels(t *topo.Topology, ranks []int) int {
	groups := t.NodesOfRanks(ranks)
	if len(groups) < 2 {
		return 1
	}
	ch := -1
	for _, g := range groups {
		node := t.Devices[t.RankDevice(g[0])].Node
		c := min(len(g), t.NICsOnNode(node))
		if ch < 0 || c < ch {
			ch = c
		}
	}
	return max(1, ch)
}

// nodesByGPU groups ranks by node (nodes in communicator order), each
// node's ranks in the order of their GPUs whatever the communicator's:
// NCCL searches its rings on the topology, and a communicator listed
// rail-aligned already (every other node backwards, job.RailAligned)
// reversed again by channelOrders, or paired across nodes by its position
// in that order (buildHierarchical), would cross between nodes on
// different rails, through the spine.
func (c *Comms) nodesByGPU(ranks []int) [][]int {
	groups := c.t.NodesOfRanks(ranks)
	for _, g := range groups {
		slices.SortFunc(g, func(a, b int) int { return c.t.RankDevice(a) - c.t.RankDevice(b) })
	}
	return groups
}

// channelOrders are the ring orders (communicator indices) of channels
// channels. One channel keeps the communicator's order. Several channels
// group ranks by node (in communicator order), rotate each node's ranks by
// the channel and reverse every other node, so the ring leaves a node and
// enters the next through GPUs of the same local index (the same rail: no
// spine hop on a rail-optimized fabric), and different channels use
// different NICs, as NCCL's channels do. The grouping is made once for
// every channel: on half a million ranks it takes a third of a second.
func (c *Comms) channelOrders(ranks []int, channels int) [][]int {
	orders := make([][]int, channels)
	if channels == 1 {
		order := make([]int, len(ranks))
		for i := range order {
			order[i] = i
		}
		orders[0] = order
		return orders
	}
	idx := make(map[int]int, len(ranks))
	for i, r := range ranks {
		idx[r] = i
	}
	groups := c.nodesByGPU(ranks)
	// With fewer NICs than ranks on the node (GPUs sharing a NIC behind a
	// PCIe switch), rotate by the ranks per NIC so that each channel
	// leaves through a NIC of its own.
	strides := make([]int, len(groups))
	for gi, g := range groups {
		strides[gi] = 1
		if nics := c.t.NICsOnNode(c.t.Devices[c.t.RankDevice(g[0])].Node); nics > 0 && nics < len(g) && len(g)%nics == 0 {
			strides[gi] = len(g) / nics
		}
	}
	for ch := range orders {
		order := make([]int, 0, len(ranks))
		for gi, g := range groups {
			for j := range g {
				k := j
				if gi%2 == 1 {
					k = len(g) - 1 - j
				}
				order = append(order, idx[g[(k+ch*strides[gi])%len(g)]])
			}
		}
		orders[ch] = order
	}
	return orders
}

// ringProg: consecutive segments of ring steps; in each step every rank sends
// one message to its next rank in the segment's rings. Each channel has its
// own segments (ring order); instances are channels × chunks.
type ringProg struct {
	chunks   int
	channels [][]segment
	steps    int // total over segments, computed on first use
	// byInst is channels by instance (inst / chunks looked up, not divided
	// on every message), built on first use.
	byInst [][]segment
	// hops of each channel's segments as ring streams, built on first use
	// (a cached program serves one communicator: the devices are fixed),
	// and their routes on a FlowNet (FlowNet.sendRing).
	hops  [][][]Hop
	route [][]*ringInfo
}

type segment struct {
	steps int
	bytes float64
	next  []int32
}

func (p *ringProg) instances() int  { return p.chunks * len(p.channels) }
func (p *ringProg) groupSize() int  { return p.chunks }
func (p *ringProg) pipelined() bool { return true }
func (p *ringProg) total() int {
	if p.steps == 0 {
		for _, g := range p.channels[0] {
			p.steps += g.steps
		}
	}
	return p.steps
}
func (p *ringProg) ops(int, int) int { return p.total() + 1 }
func (p *ringProg) wait(_, _, k int) int {
	if k == 0 {
		return 0
	}
	return 1
}
func (p *ringProg) sends(inst, rank, k int, buf []msg) []msg {
	if p.byInst == nil {
		for i := range p.instances() {
			p.byInst = append(p.byInst, p.channels[i/p.chunks])
		}
	}
	step := k
	for _, g := range p.byInst[inst] {
		if step < g.steps {
			return append(buf, msg{to: g.next[rank], op: int32(k + 1), bytes: g.bytes})
		}
		step -= g.steps
	}
	return buf
}

// streamSink receives a ring stream run's deliveries; the tag packs
// (channel, segment).
type streamSink struct{ r *run }

const segBits = 8

func (s streamSink) Delivered(tag int) {
	s.r.stream(tag>>segBits, tag&(1<<segBits-1)+1)
}

// stream sends channel ch's segment seg as one ring stream (empty segments,
// such as the in-node phases of a one-GPU-per-node hierarchy, are
// skipped); after its last segment the channel is done.
func (r *run) stream(ch, seg int) {
	p := r.ring
	segs := p.channels[ch]
	if p.hops == nil {
		p.hops = make([][][]Hop, len(p.channels))
	}
	if p.hops[ch] == nil {
		p.hops[ch] = make([][]Hop, len(segs))
		if p.route == nil {
			p.route = make([][]*ringInfo, len(p.channels))
		}
		p.route[ch] = make([]*ringInfo, len(segs))
		for k, g := range segs {
			for i, to := range g.next {
				if int(to) != i && g.steps > 0 {
					p.hops[ch][k] = append(p.hops[ch][k], Hop{int32(r.devs[i]), int32(r.devs[to])})
				}
			}
		}
	}
	for ; seg < len(segs); seg++ {
		g := segs[seg]
		hops := p.hops[ch][seg]
		if len(hops) == 0 {
			continue
		}
		// Every hop carries each step's bytes for every chunk.
		bytes := float64(g.steps) * g.bytes * float64(r.ring.chunks) / r.col.ProtocolEfficiency
		r.flows++
		r.wire += bytes * float64(len(hops))
		var err error
		if fn := r.c.fn; fn != nil {
			err = fn.sendRing(&p.route[ch][seg], hops, g.steps, bytes, streamSink{r}, ch<<segBits|seg)
		} else {
			err = r.c.f.SendRing(hops, g.steps, bytes, streamSink{r}, ch<<segBits|seg)
		}
		if err != nil {
			r.c.f.Kernel().Fail(fmt.Errorf("collective %d (%s %s): %w", r.id, r.col.Op, r.col.Algorithm, err))
		}
		return
	}
	if r.streaming--; r.streaming == 0 {
		r.finish()
	}
}

// ringDelivered is Delivered, arrive and advance for a flat ring (one
// segment per channel, one chunk, no quantization), the case that runs
// hundreds of millions of times at 8,192 GPUs: the same steps with the
// program's answers inlined (op 0 sent at start; op k in 1..steps waits for
// one message and sends step k to the next rank, the last op sends none).
func (r *run) ringDelivered(tag int) {
	from, to, inst, op := r.untag(tag)
	base := inst * r.n
	// The connection from -> to is from's (one receiver per instance).
	src := &r.state[base+from]
	if src.load--; src.load > 0 {
		w := &r.waiting[base+from]
		p := (*w)[0]
		*w = (*w)[1:]
		r.emit(p.inst, p.from, p.m)
	}
	st := &r.state[base+to]
	if op != st.op {
		r.arrive(inst, to, op)
		return
	}
	seg := &r.flat[inst]
	if k := int(st.op); k < seg.steps {
		m := msg{to: seg.next[to], op: int32(k + 1), bytes: seg.bytes}
		st.op++
		st.got = 0
		if st.to == 0 {
			st.to = m.to + 1
		}
		if st.load++; st.load > 1 {
			r.waiting[base+to] = append(r.waiting[base+to], pendingSend{inst, to, m})
			return
		}
		r.emit(inst, to, m)
		return
	}
	st.op += 2 // the last op, then counted once
	r.finished++
	if r.finished == r.inst*r.n {
		r.finish()
	}
}
