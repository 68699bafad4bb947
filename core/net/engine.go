package net

// The collective engine: Comms checks a request once per shape (registry.go
// finds its algorithm; collective.go fills its defaults and validates it),
// has the algorithm's builder make its program, and runs the program on the
// fabric: per (instance, rank) a sequence of ops that wait for messages and
// send messages, with one message in flight per connection. The programs
// live in algo_*.go, one file per algorithm family.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// Comms runs collectives over a Fabric: several may be in flight at once
// and contend for links. Create one per fabric with NewComms.
type Comms struct {
	f  Fabric
	fn *FlowNet // f, when it is one: called directly on the hot path
	t  *topo.Topology
	// active holds the unfinished runs (run.at is each one's index).
	active []*run
	// later holds the runs with a begin or a completion scheduled (a
	// kernel event on c, the slot in its argument: no closure per run);
	// free lists its empty slots, and spare the finished runs to reuse.
	later  []*run
	free   []int32
	spare  []*run
	nextID int
	// shapes holds the requests already checked, by shapeKey, with their
	// defaults filled in and their programs: a training step starts the
	// same collective on the same communicator thousands of times.
	shapes map[string]*Shape
	// tuners holds NCCL's model of each communicator (by its ranks).
	tuners map[string]*NCCLTuner
	// ncclBefore221: the tuners choose as releases before 2.21 do.
	ncclBefore221 bool
	// hops holds each communicator's ring hop latencies (by its ranks
	// and channels).
	hops map[string]ringHops
	key  []byte // Start's scratch for shapeKey
}

type checkedShape struct {
	col  Collective
	prog program
	// choice and delay, for Algorithm "nccl": the tuner's answer and the
	// part of its latency the links do not already charge.
	choice *NCCLChoice
	delay  sim.Time
	// devs is each rank's device (read only: shared by the shape's runs).
	devs []int
}

// shapeKey is what a collective's checks and program depend on: the
// operation, algorithm, payload, root, chunks, channels and ranks.
func shapeKey(col *Collective) string {
	return string(appendShapeKey(make([]byte, 0, 32+len(col.Op)+len(col.Algorithm)+2*len(col.Ranks)), col))
}

// appendShapeKey appends shapeKey's bytes to b (Start looks shapes up
// without allocating a key).
func appendShapeKey(b []byte, col *Collective) []byte {
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
	return b
}

// NewComms attaches a collective engine to a fabric; it registers a stall
// describer on the kernel naming ranks of unfinished collectives.
func NewComms(f Fabric) *Comms {
	c := &Comms{f: f, t: f.Topology(), shapes: map[string]*Shape{}, tuners: map[string]*NCCLTuner{}, hops: map[string]ringHops{}}
	c.fn, _ = f.(*FlowNet)
	f.Kernel().OnStall("net", c.describeStalls)
	return c
}

// SetNCCLBefore221 makes algorithm "nccl" choose as NCCL's releases
// before 2.21 do (NCCLTuner.Before221); call it before the first
// collective.
func (c *Comms) SetNCCLBefore221(before bool) { c.ncclBefore221 = before }

// Start begins a collective now; done runs (as a kernel event) when every
// rank has finished.
// It returns the collective's id, or an error for an invalid request
// (unknown algorithm, ranks out of range, non-power-of-two halving-doubling,
// unequal nodes for hierarchical, unreachable peers).
func (c *Comms) Start(col Collective, done func(Result)) (int, error) {
	shape, err := c.Shape(col)
	if err != nil {
		return 0, err
	}
	return c.StartShape(shape, col, done)
}

// Shape is a collective request that Comms has checked, with its program:
// what Start looks up by the request's operation, algorithm, bytes, root,
// chunks, channels and ranks. A caller that starts the same request again
// and again (the executor, at every layer) keeps it and calls StartShape.
type Shape struct{ checkedShape }

// Shape returns the checked shape of col (checking it the first time), or
// the error Start would return.
func (c *Comms) Shape(col Collective) (*Shape, error) {
	c.key = appendShapeKey(c.key[:0], &col)
	if shape, ok := c.shapes[string(c.key)]; ok {
		return shape, nil
	}
	shape := &Shape{}
	var err error
	if shape.checkedShape, err = c.checkShape(&col); err != nil {
		return nil, err
	}
	c.shapes[string(c.key)] = shape
	return shape, nil
}

// StartShape is Start for a request whose shape (Comms.Shape of a
// collective with the same operation, algorithm, bytes, root, chunks,
// channels and ranks) is known: col takes the shape's defaults and choice,
// as Start gives them.
func (c *Comms) StartShape(shape *Shape, col Collective, done func(Result)) (int, error) {
	col.Algorithm, col.Channels, col.Chunks, col.chunkBytes = shape.col.Algorithm, shape.col.Channels, shape.col.Chunks, shape.col.chunkBytes
	if shape.choice != nil {
		col.ProtocolEfficiency = shape.col.ProtocolEfficiency
	}
	payloadDefaults(&col)
	if err := validatePayload(&col); err != nil {
		return 0, err
	}
	return c.start(shape, col, done), nil
}

// start runs a checked request (col with its defaults filled).
func (c *Comms) start(shape *Shape, col Collective, done func(Result)) int {
	prog := shape.prog
	n := len(col.Ranks)
	var r *run
	if k := len(c.spare); k > 0 {
		r = c.spare[k-1]
		c.spare = c.spare[:k-1]
	} else {
		r = &run{}
	}
	*r = run{c: c, id: c.nextID, col: col, prog: prog, n: n, done: done, start: c.f.Kernel().Now(),
		inst: prog.instances(), perGroup: prog.groupSize(), serialize: prog.pipelined(), choice: shape.choice}
	r.ring, _ = prog.(*ringProg)
	c.nextID++
	r.devs = shape.devs
	r.at = len(c.active)
	c.active = append(c.active, r)
	if shape.delay > 0 {
		k := c.f.Kernel()
		k.AtHandler(sim.Add(k.Now(), shape.delay), c, c.schedule(r, evBegin))
	} else {
		r.begin()
	}
	return r.id
}

// Kinds of the events Comms schedules on itself (the low bit of the
// argument; the rest is the run's slot in later).
const (
	evBegin = 0
	evDone  = 1
)

// schedule gives r a slot in later and returns the event argument.
func (c *Comms) schedule(r *run, kind int) int {
	var slot int32
	if k := len(c.free); k > 0 {
		slot = c.free[k-1]
		c.free = c.free[:k-1]
		c.later[slot] = r
	} else {
		slot = int32(len(c.later))
		c.later = append(c.later, r)
	}
	return int(slot)<<1 | kind
}

// Handle implements sim.Handler: a run's delayed begin, or its completion
// reported to its caller (after which the run is reused).
func (c *Comms) Handle(arg int) {
	slot := int32(arg >> 1)
	r := c.later[slot]
	c.later[slot] = nil
	c.free = append(c.free, slot)
	if arg&1 == evBegin {
		r.begin()
		return
	}
	r.done(Result{ID: r.id, Collective: r.col, Start: r.start, End: c.f.Kernel().Now(), Flows: r.flows, WireBytes: r.wire, NCCL: r.choice})
	// Nothing refers to a reported run: every message was delivered.
	*r = run{}
	c.spare = append(c.spare, r)
}

// checkShape checks a new request and builds its program: the registry
// entry of its operation and algorithm; for an algorithm that chooses
// another (NCCL's tuner, asked once for this communicator and size), the
// choice and its entry; then defaults, validation and the entry's builder.
func (c *Comms) checkShape(col *Collective) (checkedShape, error) {
	var shape checkedShape
	a, err := lookup(col.Op, col.Algorithm)
	if err != nil {
		return shape, err
	}
	if a.choose != nil {
		if err := a.choose(c, col, &shape); err != nil {
			return shape, err
		}
		if a, err = lookup(col.Op, col.Algorithm); err != nil {
			return shape, err
		}
	}
	c.defaults(col, a)
	if err := c.validate(col); err != nil {
		return shape, err
	}
	prog, err := a.build(c, col)
	if err != nil {
		return shape, err
	}
	shape.col, shape.prog = *col, prog
	shape.devs = make([]int, len(col.Ranks))
	for i, rk := range col.Ranks {
		shape.devs[i] = c.t.RankDevice(rk)
	}
	return shape, nil
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

func (c *Comms) describeStalls() []string {
	runs := slices.Clone(c.active)
	slices.SortFunc(runs, func(a, b *run) int { return cmp.Compare(a.id, b.id) })
	var out []string
	for _, r := range runs {
		id := r.id
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
	at   int // index in Comms.active while unfinished
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
	c := r.c
	last := c.active[len(c.active)-1]
	c.active[r.at], last.at = last, r.at
	c.active = c.active[:len(c.active)-1]
	if r.done != nil {
		k := c.f.Kernel()
		k.AtHandler(k.Now(), c, c.schedule(r, evDone))
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
