package net

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// Op is a collective operation. Sizes follow the nccl-tests convention: for
// all_reduce, broadcast, reduce and send_recv the buffer size; for
// all_gather the total output (each rank contributes Bytes/n); for
// reduce_scatter the total input (each rank keeps Bytes/n); for all_to_all
// each rank's send buffer (Bytes/n to every peer).
type Op string

const (
	AllReduce     Op = "all_reduce"
	AllGather     Op = "all_gather"
	ReduceScatter Op = "reduce_scatter"
	AllToAll      Op = "all_to_all"
	Broadcast     Op = "broadcast"
	Reduce        Op = "reduce"
	SendRecv      Op = "send_recv"
)

// Algorithm is how an operation is decomposed into transfers.
type Algorithm string

const (
	// Ring: n−1 (or 2(n−1) for all_reduce) steps to the ring neighbour;
	// for broadcast/reduce a pipelined chain from/to the root.
	Ring Algorithm = "ring"
	// Tree: for all_reduce NCCL's double binary tree (two in-order binary
	// trees, the second shifted by one rank so most leaves of one are inner
	// nodes of the other; each reduces then broadcasts half the data,
	// pipelined in chunks); for broadcast/reduce one binary tree at the root.
	Tree Algorithm = "tree"
	// HalvingDoubling: Rabenseifner's recursive halving reduce-scatter then
	// recursive doubling all-gather; needs a power-of-two rank count.
	HalvingDoubling Algorithm = "halving_doubling"
	// Direct: every rank sends its share to every other rank at once
	// (all_reduce: a direct reduce-scatter, then a direct all-gather).
	Direct Algorithm = "direct"
	// Hierarchical all_reduce: ring reduce-scatter inside each node, ring
	// all-reduce across nodes among ranks of equal local index, ring
	// all-gather inside each node. Needs equal ranks per node.
	Hierarchical Algorithm = "hierarchical"
)

// Ops lists the operations in a fixed order.
func Ops() []Op {
	return []Op{AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv}
}

// Algorithms lists what an operation supports; the first is its default.
func Algorithms(op Op) []Algorithm {
	switch op {
	case AllReduce:
		return []Algorithm{Ring, Tree, HalvingDoubling, Direct, Hierarchical, NCCL}
	case AllGather, ReduceScatter:
		return []Algorithm{Ring, Direct, NCCL}
	case AllToAll, SendRecv:
		return []Algorithm{Direct}
	case Broadcast, Reduce:
		return []Algorithm{Ring, Tree}
	}
	return nil
}

// BusBandwidthFactor converts algorithm bandwidth to bus bandwidth
// (nccl-tests, doc/PERFORMANCE.md): all_reduce 2(n−1)/n; all_gather,
// reduce_scatter, all_to_all (n−1)/n; broadcast, reduce, send_recv 1.
func BusBandwidthFactor(op Op, n int) float64 {
	switch op {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case AllGather, ReduceScatter, AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// Quantization sends a reduced-precision payload: each element goes on the
// wire as WireElemBytes plus one ScaleBytes scale per BlockElems elements.
type Quantization struct {
	// ElemBytes is the size of an unquantized element (2 for bf16).
	ElemBytes float64
	// WireElemBytes is the quantized element size (1 for int8 and fp8).
	WireElemBytes float64
	// BlockElems elements share one scale.
	BlockElems int
	// ScaleBytes is the size of one scale (4 for an fp32 scale).
	ScaleBytes float64
	// KernelTime, if set, is the time to quantize or dequantize `elems`
	// elements on a device (from the compute model; net does not know
	// GPUs). It is charged before every send (quantize, on the sender) and
	// after every receive (dequantize, on the receiver), scaled by the
	// device's straggler slowdown.
	KernelTime func(device int, elems float64) sim.Time
}

// WireBytes is the size on the wire of a payload of unquantized bytes.
func (q *Quantization) WireBytes(payload float64) float64 {
	elems := payload / q.ElemBytes
	blocks := float64(int64((elems + float64(q.BlockElems) - 1) / float64(q.BlockElems)))
	return elems*q.WireElemBytes + blocks*q.ScaleBytes
}

// Collective is one operation on a communicator.
type Collective struct {
	Op        Op
	Algorithm Algorithm // "" = the operation's default
	// Bytes by the nccl-tests convention (see Op).
	Bytes float64
	// Ranks of the communicator in order (ring order, tree positions).
	// send_recv: Ranks[0] sends to Ranks[1].
	Ranks []int
	// Root is the index in Ranks of the broadcast/reduce root.
	Root int
	// Chunks splits the data into pipelined pieces; 0 picks 1 for ring,
	// halving-doubling and direct, and one chunk per MiB (at most 64) for
	// trees and chains, whose pipelining needs it.
	Chunks int
	// Channels splits a ring algorithm over parallel rings, each carrying
	// Bytes/Channels; channel c rotates every node's ranks by c (and
	// reverses every other node) so the rings cross between nodes on the
	// same rail, each channel through different NICs (NCCL's channels).
	// 0 picks what NCCL does (DefaultChannels): one ring per rail when the
	// communicator spans nodes, one ring inside a node.
	Channels int
	// Stream runs each ring channel's segments (a flat ring has one) as
	// ring streams (Fabric.SendRing): one flow over all the ring's hops at
	// its bottleneck rate, instead of a flow per rank per step. NCCL
	// pipelines every step in slices, so a ring does stream; the two agree
	// on uncontended rings and streams cost O(channels), not O(n² ·
	// channels), which is what a training step with large data-parallel
	// rings needs. Ring algorithms only (others, and quantized payloads,
	// whose kernels run per step, keep their steps).
	Stream bool
	// Quant, if set, quantizes the payload on the wire.
	Quant *Quantization
	// ProtocolEfficiency in (0, 1] is the fraction of link time that carries
	// payload under the collective library's protocol (flags, headers,
	// synchronization); every message occupies its links for bytes /
	// efficiency. 0 means 1 (an ideal protocol). NVIDIA's NCCL maintainers
	// state ~20% protocol overhead on NVLink: 370 of 450 GB/s on H100
	// (github.com/NVIDIA/nccl-tests/issues/212).
	ProtocolEfficiency float64
	// Label is carried into results.
	Label string
}

// Result reports a finished collective.
type Result struct {
	ID         int
	Collective Collective
	Start, End sim.Time
	// Flows is the number of transfers; WireBytes their total size.
	Flows     int
	WireBytes float64
	// NCCL is what NCCL's tuner chose (Algorithm "nccl"), else nil.
	NCCL *NCCLChoice
}

// Comms runs collectives over a Fabric: several may be in flight at once
// and contend for links. Create one per fabric with NewComms.
type Comms struct {
	f      Fabric
	fn     *FlowNet // f, when it is one: called directly on the hot path
	t      *topo.Topology
	active map[int]*run
	nextID int
	// shapes holds the requests already checked, by shapeKey, with their
	// defaults filled in and their programs: a training step starts the
	// same collective on the same communicator thousands of times.
	shapes map[string]checkedShape
	// tuners holds NCCL's model of each communicator (by its ranks).
	tuners map[string]*NCCLTuner
}

type checkedShape struct {
	col  Collective
	prog program
	// choice and delay, for Algorithm "nccl": the tuner's answer and the
	// part of its latency the links do not already charge.
	choice *NCCLChoice
	delay  sim.Time
}

// shapeKey is what a collective's checks and program depend on: the
// operation, algorithm, payload, root, chunks, channels and ranks.
func shapeKey(col *Collective) string {
	b := make([]byte, 0, 32+len(col.Op)+len(col.Algorithm)+2*len(col.Ranks))
	b = append(b, col.Op...)
	b = append(b, 0)
	b = append(b, col.Algorithm...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(col.Bytes))
	for _, v := range []int{col.Root, col.Chunks, col.Channels} {
		b = binary.AppendVarint(b, int64(v))
	}
	for _, r := range col.Ranks {
		b = binary.AppendVarint(b, int64(r))
	}
	return string(b)
}

// NewComms attaches a collective engine to a fabric; it registers a stall
// describer on the kernel naming ranks of unfinished collectives.
func NewComms(f Fabric) *Comms {
	c := &Comms{f: f, t: f.Topology(), active: map[int]*run{}, shapes: map[string]checkedShape{}, tuners: map[string]*NCCLTuner{}}
	c.fn, _ = f.(*FlowNet)
	f.Kernel().OnStall(c.describeStalls)
	return c
}

// Start begins a collective now; done runs (as a kernel event) when every
// rank has finished.
// It returns the collective's id, or an error for an invalid request
// (unknown algorithm, ranks out of range, non-power-of-two halving-doubling,
// unequal nodes for hierarchical, unreachable peers).
func (c *Comms) Start(col Collective, done func(Result)) (int, error) {
	key := shapeKey(&col)
	shape, ok := c.shapes[key]
	if ok {
		col.Algorithm, col.Channels, col.Chunks = shape.col.Algorithm, shape.col.Channels, shape.col.Chunks
		if shape.choice != nil {
			col.ProtocolEfficiency = shape.col.ProtocolEfficiency
		}
		if err := checkPayload(&col); err != nil {
			return 0, err
		}
	} else {
		var err error
		if shape, err = c.checkShape(&col); err != nil {
			return 0, err
		}
		c.shapes[key] = shape
	}
	prog := shape.prog
	n := len(col.Ranks)
	r := &run{c: c, id: c.nextID, col: col, prog: prog, n: n, done: done, start: c.f.Kernel().Now(),
		inst: prog.instances(), perGroup: prog.groupSize(), serialize: prog.pipelined(), choice: shape.choice}
	r.ring, _ = prog.(*ringProg)
	c.nextID++
	r.devs = make([]int, n)
	for i, rk := range col.Ranks {
		r.devs[i] = c.t.RankDevice(rk)
	}
	c.active[r.id] = r
	if shape.delay > 0 {
		c.f.Kernel().After(shape.delay, r.begin)
	} else {
		r.begin()
	}
	return r.id, nil
}

// checkShape checks a new request and builds its program (and, for
// Algorithm "nccl", asks NCCL's tuner once for this communicator and size).
func (c *Comms) checkShape(col *Collective) (checkedShape, error) {
	var shape checkedShape
	if col.Algorithm == NCCL {
		if err := c.tune(col, &shape); err != nil {
			return shape, err
		}
	}
	if err := c.check(col); err != nil {
		return shape, err
	}
	prog, err := c.program(*col)
	if err != nil {
		return shape, err
	}
	shape.col, shape.prog = *col, prog
	return shape, nil
}

// tune asks NCCL's tuner what it does with col. The data then moves as a
// ring (a flow per step, or streams) at the choice's achieved bus
// bandwidth (its protocol efficiency on the ring's slowest hop), after the
// part of the choice's latency that the ring's links do not already charge
// (each of its steps pays the slowest hop's path latency).
func (c *Comms) tune(col *Collective, shape *checkedShape) error {
	if col.Op != AllReduce && col.Op != AllGather && col.Op != ReduceScatter {
		return fmt.Errorf("%s does not support algorithm %q", col.Op, NCCL)
	}
	n := len(col.Ranks)
	for _, r := range col.Ranks {
		if r < 0 || r >= c.t.NumRanks() {
			return fmt.Errorf("rank %d out of range [0, %d)", r, c.t.NumRanks())
		}
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
		path, err := c.t.Route(c.t.RankDevice(col.Ranks[i]), c.t.RankDevice(col.Ranks[(i+1)%n]))
		if err != nil {
			return err
		}
		lat := 0.0
		for _, l := range path {
			lat += c.t.Links[l].LatencyS
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

// begin sends a started collective's first messages (after the tuner's
// latency, for Algorithm "nccl").
func (r *run) begin() {
	col, n := &r.col, r.n
	if col.Stream && col.Quant == nil && r.ring != nil {
		r.streaming = len(r.ring.channels)
		for ch := range r.ring.channels {
			r.stream(ch, 0)
		}
		return
	}
	if r.ring != nil && r.ring.chunks == 1 && col.Quant == nil && len(r.ring.channels[0]) == 1 {
		for _, segs := range r.ring.channels {
			r.flat = append(r.flat, segs[0])
		}
	}
	r.rankBits = uint(bits.Len(uint(n - 1)))
	r.instBits = uint(bits.Len(uint(r.inst - 1)))
	r.state = make([]rankState, r.inst*n)
	if r.serialize {
		r.waiting = make([][]pendingSend, r.inst/r.perGroup*n)
		r.more = make([][]sendQueue, r.inst/r.perGroup*n)
		r.group = make([]int32, r.inst)
		for i := range r.group {
			r.group[i] = int32(i / r.perGroup)
		}
	}
	for inst := 0; inst < r.inst; inst++ {
		for rank := 0; rank < n; rank++ {
			r.advance(inst, rank)
		}
	}
}

// Send is a point-to-point transfer between ranks; done runs at delivery.
func (c *Comms) Send(srcRank, dstRank int, bytes float64, done func()) error {
	return c.f.Send(c.t.RankDevice(srcRank), c.t.RankDevice(dstRank), bytes, SinkFunc(func(int) { done() }), 0)
}

func (c *Comms) check(col *Collective) error {
	algs := Algorithms(col.Op)
	if algs == nil {
		return fmt.Errorf("unknown collective %q (have %v)", col.Op, Ops())
	}
	if col.Algorithm == "" {
		col.Algorithm = algs[0]
	}
	ok := false
	for _, a := range algs {
		ok = ok || a == col.Algorithm
	}
	if !ok {
		return fmt.Errorf("%s does not support algorithm %q (supports %v)", col.Op, col.Algorithm, algs)
	}
	n := len(col.Ranks)
	if n < 1 || (col.Op == SendRecv && n != 2) {
		return fmt.Errorf("%s needs %s ranks, got %d", col.Op, map[bool]string{true: "exactly 2", false: "at least 1"}[col.Op == SendRecv], n)
	}
	seen := map[int]bool{}
	for _, r := range col.Ranks {
		if r < 0 || r >= c.t.NumRanks() {
			return fmt.Errorf("rank %d out of range [0, %d)", r, c.t.NumRanks())
		}
		if seen[r] {
			return fmt.Errorf("rank %d appears twice in the communicator", r)
		}
		seen[r] = true
	}
	if col.Root < 0 || col.Root >= n {
		return fmt.Errorf("root index %d out of range [0, %d)", col.Root, n)
	}
	if !(col.Bytes >= 0) {
		return fmt.Errorf("bytes must be >= 0, got %v", col.Bytes)
	}
	if col.Chunks < 0 {
		return fmt.Errorf("chunks must be >= 0, got %d", col.Chunks)
	}
	if col.Channels < 0 {
		return fmt.Errorf("channels must be >= 0, got %d", col.Channels)
	}
	if col.Channels == 0 {
		col.Channels = DefaultChannels(c.t, col.Ranks)
	}
	if col.Chunks == 0 {
		col.Chunks = 1
		if col.Algorithm == Tree || (col.Algorithm == Ring && (col.Op == Broadcast || col.Op == Reduce)) {
			col.Chunks = max(1, min(64, int(col.Bytes/(1<<20))))
		}
	}
	return checkPayload(col)
}

// checkPayload checks what a collective's program does not depend on.
func checkPayload(col *Collective) error {
	if col.ProtocolEfficiency == 0 {
		col.ProtocolEfficiency = 1
	}
	if !(col.ProtocolEfficiency > 0 && col.ProtocolEfficiency <= 1) {
		return fmt.Errorf("protocol efficiency must be in (0, 1], got %v", col.ProtocolEfficiency)
	}
	if q := col.Quant; q != nil && (q.ElemBytes <= 0 || q.WireElemBytes <= 0 || q.BlockElems < 1 || q.ScaleBytes < 0) {
		return fmt.Errorf("quantization needs elem_bytes > 0, wire_elem_bytes > 0, block_elems >= 1, scale_bytes >= 0")
	}
	return nil
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

func (c *Comms) describeStalls() []string {
	ids := make([]int, 0, len(c.active))
	for id := range c.active {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var out []string
	for _, id := range ids {
		r := c.active[id]
		if r.streaming > 0 {
			out = append(out, fmt.Sprintf("collective %d (%s %s): %d ring stream(s) not delivered", id, r.col.Op, r.col.Algorithm, r.streaming))
			continue
		}
		shown := 0
		for i, st := range r.state {
			inst, rank := i/r.n, i%r.n
			if int(st.op) >= r.ops(inst, rank) {
				continue
			}
			if shown < 3 {
				out = append(out, fmt.Sprintf("collective %d (%s %s): rank %d (instance %d) at step %d waits for %d message(s), has %d",
					id, r.col.Op, r.col.Algorithm, r.col.Ranks[rank], inst, st.op, r.wait(inst, rank, int(st.op)), st.got))
			}
			shown++
		}
		if shown > 3 {
			out = append(out, fmt.Sprintf("collective %d: %d more blocked ranks", id, shown-3))
		}
	}
	return out
}

// A run executes a program: for each instance (chunk, tree) and rank, a
// sequence of ops; op k waits for wait(k) messages addressed to it, then
// sends its messages, each addressed to an op of the receiver. Like an NCCL
// channel's connection, a (sender, receiver) pair has one message in flight
// per instance group; later messages queue in order. This is flow control:
// without it a rank upstream of a slow link would pile up concurrent flows
// that real buffers (a few slots per connection) do not allow.
type run struct {
	c      *Comms
	id     int
	col    Collective
	prog   program
	choice *NCCLChoice
	// ring is prog when it is a ring: the hot program at scale is called
	// without interface dispatch.
	ring      *ringProg
	n, inst   int
	perGroup  int     // instances per group (consecutive)
	group     []int32 // by instance (a look-up, not two divisions per message)
	devs      []int
	state     []rankState // per (instance, rank)
	finished  int
	flows     int
	wire      float64
	start     sim.Time
	done      func(Result)
	serialize bool
	// waiting holds, per (group, sender), the sends queued behind the
	// connection to its first receiver (see rankState); more, the queues
	// to further receivers.
	waiting [][]pendingSend
	more    [][]sendQueue
	// early holds, by state index, ops of messages that arrived before
	// their op was current (rare: never in a ring).
	early   map[int][]int32
	buf     []msg
	payload map[int]float64 // unquantized bytes by tag, when quantizing
	// A tag packs (op, instance, receiver, sender) in bit fields of these
	// widths, so a delivery decodes it with shifts, not divisions.
	rankBits, instBits uint
	// streaming counts the ring channels whose streams are unfinished
	// (Collective.Stream; the per-step fields above are then unused).
	streaming int
	// flat, for a ring of one segment per channel and one chunk without
	// quantization, is each channel's segment (ringDelivered).
	flat []segment
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
		if err := r.c.f.SendRing(hops, g.steps, bytes, streamSink{r}, ch<<segBits|seg); err != nil {
			r.c.f.Kernel().Fail(fmt.Errorf("collective %d (%s %s): %w", r.id, r.col.Op, r.col.Algorithm, err))
		}
		return
	}
	if r.streaming--; r.streaming == 0 {
		r.finish()
	}
}

// rankState is an (instance, rank)'s progress and, in the first instance of
// each group, the rank's connection to its first receiver in the group. In
// 16 bytes, so that a ring's states stay in the core's cache at 8,192 GPUs
// (128 KiB), and ring neighbours, who are next to each other, share lines;
// what is rarely there (queued sends, early messages) lives in side tables.
type rankState struct {
	op  int32
	got int32
	// to is the first receiver + 1 (0 while unused); load counts messages
	// handed to that connection and not yet delivered: one in flight, the
	// rest waiting in run.waiting.
	to, load int32
}

type msg struct {
	to    int32 // receiver index in the communicator
	op    int32 // receiver's op this message counts for
	bytes float64
}

type sendQueue struct {
	to, load int32 // as in rankState
	waiting  []pendingSend
}

type pendingSend struct {
	inst, from int
	m          msg
}

// ops, wait and sends call the program, a ring directly.
func (r *run) ops(inst, rank int) int {
	if r.ring != nil {
		return r.ring.ops(inst, rank)
	}
	return r.prog.ops(inst, rank)
}

func (r *run) wait(inst, rank, k int) int {
	if r.ring != nil {
		return r.ring.wait(inst, rank, k)
	}
	return r.prog.wait(inst, rank, k)
}

func (r *run) sends(inst, rank, k int, buf []msg) []msg {
	if r.ring != nil {
		return r.ring.sends(inst, rank, k, buf)
	}
	return r.prog.sends(inst, rank, k, buf)
}

func (r *run) advance(inst, rank int) {
	st := &r.state[inst*r.n+rank]
	ops := r.ops(inst, rank)
	for int(st.op) < ops {
		k := int(st.op)
		if int(st.got) < r.wait(inst, rank, k) {
			return
		}
		r.buf = r.sends(inst, rank, k, r.buf[:0])
		for _, m := range r.buf {
			r.transmit(inst, rank, m)
		}
		st.op++
		st.got = 0
		if len(r.early) > 0 {
			r.takeEarly(inst*r.n+rank, st)
		}
	}
	if int(st.op) == ops {
		st.op++ // count once
		r.finished++
		if r.finished == r.inst*r.n {
			r.finish()
		}
	}
}

// takeEarly counts the messages for st's new op that arrived early.
func (r *run) takeEarly(i int, st *rankState) {
	early, ok := r.early[i]
	if !ok {
		return
	}
	kept := early[:0]
	for _, o := range early {
		if o == st.op {
			st.got++
		} else {
			kept = append(kept, o)
		}
	}
	if len(kept) == 0 {
		delete(r.early, i)
	} else {
		r.early[i] = kept
	}
}

// finish reports completion from its own event, never from inside Start
// (a one-rank or zero-step collective finishes at once): callers are not
// re-entered.
func (r *run) finish() {
	delete(r.c.active, r.id)
	if r.done != nil {
		k := r.c.f.Kernel()
		res := Result{ID: r.id, Collective: r.col, Start: r.start, End: k.Now(), Flows: r.flows, WireBytes: r.wire, NCCL: r.choice}
		k.After(0, func() { r.done(res) })
	}
}

// transmit hands a message to its connection: sent now if the connection
// is free, else queued behind the one in flight.
func (r *run) transmit(inst, from int, m msg) {
	if r.serialize {
		load, waiting := r.queue(inst, from, int(m.to))
		if *load++; *load > 1 {
			*waiting = append(*waiting, pendingSend{inst, from, m})
			return
		}
	}
	r.emit(inst, from, m)
}

// emit sends a message (after quantizing it, if the payload is quantized).
func (r *run) emit(inst, from int, m msg) {
	tag := ((int(m.op)<<r.instBits|inst)<<r.rankBits|int(m.to))<<r.rankBits | from
	if q := r.col.Quant; q != nil {
		if r.payload == nil {
			r.payload = map[int]float64{}
		}
		r.payload[tag] = m.bytes
		wire := q.WireBytes(m.bytes) / r.col.ProtocolEfficiency
		if d := r.kernelTime(from, m.bytes); d > 0 {
			r.c.f.Kernel().After(d, func() { r.send(from, int(m.to), wire, tag) })
			return
		}
		r.send(from, int(m.to), wire, tag)
		return
	}
	r.send(from, int(m.to), m.bytes/r.col.ProtocolEfficiency, tag)
}

// queue finds the load and the waiting sends of a connection in inst's
// group. A ring sender has one receiver per group, found without a scan (in
// the sender's state of the group's first instance); trees and
// halving-doubling talk to a handful of peers, so a short scan beats a map.
func (r *run) queue(inst, from, to int) (load *int32, waiting *[]pendingSend) {
	g := int(r.group[inst])
	st := &r.state[g*r.perGroup*r.n+from] // the group's first instance
	i := g*r.n + from
	if int(st.to) == to+1 {
		return &st.load, &r.waiting[i]
	}
	if st.to == 0 {
		st.to = int32(to + 1)
		return &st.load, &r.waiting[i]
	}
	qs := r.more[i]
	for j := range qs {
		if int(qs[j].to) == to+1 {
			return &qs[j].load, &qs[j].waiting
		}
	}
	r.more[i] = append(qs, sendQueue{to: int32(to + 1)})
	q := &r.more[i][len(qs)]
	return &q.load, &q.waiting
}

func (r *run) send(from, to int, bytes float64, tag int) {
	r.flows++
	r.wire += bytes
	var err error
	if fn := r.c.fn; fn != nil {
		err = fn.Send(r.devs[from], r.devs[to], bytes, r, tag)
	} else {
		err = r.c.f.Send(r.devs[from], r.devs[to], bytes, r, tag)
	}
	if err != nil {
		r.c.f.Kernel().Fail(fmt.Errorf("collective %d (%s %s): %w", r.id, r.col.Op, r.col.Algorithm, err))
	}
}

func (r *run) kernelTime(rank int, payload float64) sim.Time {
	q := r.col.Quant
	if q == nil || q.KernelTime == nil {
		return 0
	}
	d := q.KernelTime(r.devs[rank], payload/q.ElemBytes)
	return sim.Time(float64(d) * r.c.f.Slowdown(r.devs[rank]))
}

// untag decodes emit's tag.
func (r *run) untag(tag int) (from, to, inst int, op int32) {
	mask := 1<<r.rankBits - 1
	return tag & mask, tag >> r.rankBits & mask, tag >> (2 * r.rankBits) & (1<<r.instBits - 1),
		int32(tag >> (2*r.rankBits + r.instBits))
}

// Delivered implements Sink.
func (r *run) Delivered(tag int) {
	if r.flat != nil && len(r.early) == 0 {
		r.ringDelivered(tag)
		return
	}
	from, to, inst, op := r.untag(tag)
	if r.serialize {
		// The next waiting message, if any, takes the connection.
		load, waiting := r.queue(inst, from, to)
		if *load--; *load > 0 {
			p := (*waiting)[0]
			*waiting = (*waiting)[1:]
			r.emit(p.inst, p.from, p.m)
		}
	}
	if r.col.Quant != nil {
		payload := r.payload[tag]
		delete(r.payload, tag)
		if d := r.kernelTime(to, payload); d > 0 {
			r.c.f.Kernel().After(d, func() { r.arrive(inst, to, op) })
			return
		}
	}
	r.arrive(inst, to, op)
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

// arrive counts a message for op at a rank, advancing it when due.
func (r *run) arrive(inst, to int, op int32) {
	i := inst*r.n + to
	st := &r.state[i]
	if op == st.op {
		st.got++
		r.advance(inst, to)
	} else {
		if r.early == nil {
			r.early = map[int][]int32{}
		}
		r.early[i] = append(r.early[i], op)
	}
}

// program describes an algorithm lazily, so a ring over 8,192 ranks needs no
// per-step storage.
type program interface {
	instances() int
	// groupSize: instances come in groups of this many consecutive ones
	// (the chunks of one channel or tree), which share connections in
	// order (pipelined chunks).
	groupSize() int
	// pipelined: whether messages of a group go one at a time per
	// connection (direct programs fan out to every peer and do not queue).
	pipelined() bool
	ops(inst, rank int) int
	wait(inst, rank, k int) int
	sends(inst, rank, k int, buf []msg) []msg
}

func (c *Comms) program(col Collective) (program, error) {
	n := len(col.Ranks)
	chunks := col.Chunks
	per := col.Bytes / float64(chunks)
	ringNext := func(order []int) []int32 {
		next := make([]int32, n)
		for i, p := range order {
			next[p] = int32(order[(i+1)%len(order)])
		}
		return next
	}
	identity := make([]int, n)
	for i := range identity {
		identity[i] = i
	}
	switch {
	case (col.Op == AllReduce || col.Op == AllGather || col.Op == ReduceScatter) && col.Algorithm == Ring:
		steps := n - 1
		if col.Op == AllReduce {
			steps = 2 * (n - 1)
		}
		p := &ringProg{chunks: chunks}
		per /= float64(col.Channels)
		for ch := 0; ch < col.Channels; ch++ {
			p.channels = append(p.channels, []segment{{steps, per / float64(n), ringNext(c.channelOrder(col.Ranks, ch, col.Channels))}})
		}
		return p, nil
	case col.Op == AllReduce && col.Algorithm == Hierarchical:
		groups := c.t.NodesOfRanks(col.Ranks)
		// groups hold global ranks; convert to communicator indices.
		idx := map[int]int{}
		for i, rk := range col.Ranks {
			idx[rk] = i
		}
		L := len(groups[0])
		for _, g := range groups {
			if len(g) != L {
				return nil, fmt.Errorf("hierarchical all_reduce needs the same number of ranks on every node, got %d and %d", L, len(g))
			}
		}
		G := len(groups)
		intra := make([]int32, n)
		cross := make([]int32, n)
		for gi, g := range groups {
			for li, rk := range g {
				intra[idx[rk]] = int32(idx[g[(li+1)%L]])
				cross[idx[rk]] = int32(idx[groups[(gi+1)%G][li]])
			}
		}
		return &ringProg{chunks: chunks, channels: [][]segment{{
			{L - 1, per / float64(L), intra},
			{2 * (G - 1), per / float64(L*G), cross},
			{L - 1, per / float64(L), intra},
		}}}, nil
	case col.Op == AllReduce && col.Algorithm == HalvingDoubling:
		if n&(n-1) != 0 {
			return nil, fmt.Errorf("halving_doubling needs a power-of-two number of ranks, got %d", n)
		}
		return &hdProg{chunks: chunks, n: n, log: bits.Len(uint(n)) - 1, bytes: per}, nil
	case col.Algorithm == Direct:
		phases := 1
		if col.Op == AllReduce {
			phases = 2
		}
		if col.Op == SendRecv {
			return &treeProg{chunks: chunks, bytes: per, trees: []tree{chain([]int{0, 1}, n)}, down: true}, nil
		}
		return &directProg{chunks: chunks, n: n, phases: phases, bytes: per / float64(n)}, nil
	case col.Op == AllReduce && col.Algorithm == Tree:
		order := identity
		shifted := make([]int, n)
		for i := range shifted {
			shifted[i] = (i + 1) % n
		}
		trees := []tree{inorder(order, n), inorder(shifted, n)}
		if n == 1 {
			trees = trees[:1]
		}
		return &treeProg{chunks: chunks, bytes: per / float64(len(trees)), trees: trees, up: true, down: true}, nil
	case col.Op == Broadcast || col.Op == Reduce:
		order := make([]int, n)
		for i := range order {
			order[i] = (col.Root + i) % n
		}
		var t tree
		if col.Algorithm == Ring {
			t = chain(order, n)
		} else {
			t = heapTree(order, n)
		}
		return &treeProg{chunks: chunks, bytes: per, trees: []tree{t}, up: col.Op == Reduce, down: col.Op == Broadcast}, nil
	}
	return nil, fmt.Errorf("%s with algorithm %q is not implemented", col.Op, col.Algorithm)
}

// channelOrder is the ring order (communicator indices) of channel ch. One
// channel keeps the communicator's order. Several channels group ranks by
// node (in communicator order), rotate each node's ranks by ch and reverse
// every other node, so the ring leaves a node and enters the next through
// GPUs of the same local index (the same rail: no spine hop on a
// rail-optimized fabric), and different channels use different NICs, as
// NCCL's channels do.
func (c *Comms) channelOrder(ranks []int, ch, channels int) []int {
	if channels == 1 {
		order := make([]int, len(ranks))
		for i := range order {
			order[i] = i
		}
		return order
	}
	idx := make(map[int]int, len(ranks))
	for i, r := range ranks {
		idx[r] = i
	}
	var order []int
	for gi, g := range c.t.NodesOfRanks(ranks) {
		// With fewer NICs than ranks on the node (GPUs sharing a NIC behind
		// a PCIe switch), rotate by the ranks per NIC so that each channel
		// leaves through a NIC of its own.
		stride := 1
		if nics := c.t.NICsOnNode(c.t.Devices[c.t.RankDevice(g[0])].Node); nics > 0 && nics < len(g) && len(g)%nics == 0 {
			stride = len(g) / nics
		}
		for j := range g {
			k := j
			if gi%2 == 1 {
				k = len(g) - 1 - j
			}
			order = append(order, idx[g[(k+ch*stride)%len(g)]])
		}
	}
	return order
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
	// (a cached program serves one communicator: the devices are fixed).
	hops [][][]Hop
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

// hdProg: recursive halving then recursive doubling with partner rank ^ d.
type hdProg struct {
	chunks, n, log int
	bytes          float64
}

func (p *hdProg) instances() int   { return p.chunks }
func (p *hdProg) groupSize() int   { return p.chunks }
func (p *hdProg) pipelined() bool  { return true }
func (p *hdProg) ops(int, int) int { return 2*p.log + 1 }
func (p *hdProg) wait(_, _, k int) int {
	if k == 0 {
		return 0
	}
	return 1
}
func (p *hdProg) sends(_, rank, k int, buf []msg) []msg {
	if k >= 2*p.log {
		return buf
	}
	var dist int
	var bytes float64
	if k < p.log { // halving: distances n/2, n/4, ..., 1; bytes S/2, S/4, ..., S/n
		dist = p.n >> (k + 1)
		bytes = p.bytes / float64(int(1)<<(k+1))
	} else { // doubling: distances 1, 2, ..., n/2; bytes S/n, ..., S/2
		j := k - p.log
		dist = 1 << j
		bytes = p.bytes / float64(int(1)<<(p.log-j))
	}
	return append(buf, msg{to: int32(rank ^ dist), op: int32(k + 1), bytes: bytes})
}

// directProg: in each phase every rank sends `bytes` to every other rank.
type directProg struct {
	chunks, n, phases int
	bytes             float64
}

func (p *directProg) instances() int   { return p.chunks }
func (p *directProg) groupSize() int   { return p.chunks }
func (p *directProg) pipelined() bool  { return false } // one message per peer per phase
func (p *directProg) ops(int, int) int { return p.phases + 1 }
func (p *directProg) wait(_, _, k int) int {
	if k == 0 {
		return 0
	}
	return p.n - 1
}
func (p *directProg) sends(_, rank, k int, buf []msg) []msg {
	if k >= p.phases {
		return buf
	}
	for j := 1; j < p.n; j++ {
		buf = append(buf, msg{to: int32((rank + j) % p.n), op: int32(k + 1), bytes: p.bytes})
	}
	return buf
}

// tree is a rooted tree over communicator indices.
type tree struct {
	root     int
	parent   []int32 // -1 at the root
	children [][]int32
}

func newTree(n int) tree {
	t := tree{parent: make([]int32, n), children: make([][]int32, n)}
	for i := range t.parent {
		t.parent[i] = -1
	}
	return t
}

func (t *tree) link(parent, child int) {
	t.parent[child] = int32(parent)
	t.children[parent] = append(t.children[parent], int32(child))
}

// chain: order[0] -> order[1] -> ... (a pipelined ring broadcast).
func chain(order []int, n int) tree {
	t := newTree(n)
	t.root = order[0]
	for i := 1; i < len(order); i++ {
		t.link(order[i-1], order[i])
	}
	return t
}

// heapTree: order[0] is the root, order[i]'s parent is order[(i-1)/2].
func heapTree(order []int, n int) tree {
	t := newTree(n)
	t.root = order[0]
	for i := 1; i < len(order); i++ {
		t.link(order[(i-1)/2], order[i])
	}
	return t
}

// inorder: a balanced binary tree whose in-order traversal is `order`
// (NCCL's double binary tree builds two such trees).
func inorder(order []int, n int) tree {
	t := newTree(n)
	var build func(lo, hi int) int
	build = func(lo, hi int) int {
		if lo >= hi {
			return -1
		}
		mid := (lo + hi) / 2
		for _, c := range []int{build(lo, mid), build(mid+1, hi)} {
			if c >= 0 {
				t.link(order[mid], c)
			}
		}
		return order[mid]
	}
	t.root = build(0, len(order))
	return t
}

// treeProg: reduce up the tree (a node sends to its parent after hearing
// from all children), then broadcast down (a node forwards what its parent
// sent to each child). Instances are trees × chunks.
type treeProg struct {
	chunks   int
	bytes    float64 // per tree per chunk
	trees    []tree
	up, down bool
}

func (p *treeProg) instances() int      { return len(p.trees) * p.chunks }
func (p *treeProg) groupSize() int      { return p.chunks }
func (p *treeProg) pipelined() bool     { return true }
func (p *treeProg) tree(inst int) *tree { return &p.trees[inst/p.chunks] }
func (p *treeProg) ops(int, int) int {
	n := 0
	if p.up {
		n++
	}
	if p.down {
		n++
	}
	return n
}

// phase maps op k to "up" (0) or "down" (1).
func (p *treeProg) phase(k int) int {
	if p.up && k == 0 {
		return 0
	}
	return 1
}

func (p *treeProg) wait(inst, rank, k int) int {
	t := p.tree(inst)
	if p.phase(k) == 0 {
		return len(t.children[rank])
	}
	if rank == t.root {
		return 0
	}
	return 1
}

func (p *treeProg) sends(inst, rank, k int, buf []msg) []msg {
	t := p.tree(inst)
	if p.phase(k) == 0 {
		if par := t.parent[rank]; par >= 0 {
			buf = append(buf, msg{to: par, op: 0, bytes: p.bytes})
		}
		return buf
	}
	down := int32(0)
	if p.up {
		down = 1
	}
	for _, ch := range t.children[rank] {
		buf = append(buf, msg{to: ch, op: down, bytes: p.bytes})
	}
	return buf
}
