// Package sim is Eidolon's discrete-event kernel: an integer clock in
// picoseconds and an event queue ordered by (time, sequence number), so
// events at the same instant always run in the order they were scheduled.
//
// A Kernel is a plain value: no globals, no goroutines, no wall clock. Models
// (package net, the executor) schedule callbacks on a shared *Kernel and the
// caller drives it with Run. Hot models schedule through AtHandler (an
// interface and an int) so that millions of events allocate nothing.
//
// Settle registers work to run once the current instant has no events left,
// before the clock moves on: a model that must recompute something after a
// batch of same-time changes (max-min rates) does it once per instant.
//
// No-progress detection: models register describers with OnStall; when the
// queue runs dry, Run asks each describer for work that is still waiting
// (e.g. "collective 3: rank 5 waits for step 2 from rank 4"). Any answer
// turns the end of the run into an error naming the blocked work.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Time is simulated time in picoseconds. An int64 spans about 106 days.
type Time int64

// Units of Time.
const (
	Picosecond  Time = 1
	Nanosecond  Time = 1000 * Picosecond
	Microsecond Time = 1000 * Nanosecond
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Never is a time after every event.
const Never Time = math.MaxInt64

// Horizon is the last representable instant, about 106.75 days
// (2^63-1 ps); an event at or after it cannot be scheduled.
const Horizon = Never

// HorizonError is a run that would pass the representable horizon of
// simulated time: an event scheduled (or a quantity computed) at or past
// Never. Quantity names what overflowed, for the user.
type HorizonError struct {
	Quantity string
}

func (e *HorizonError) Error() string {
	return fmt.Sprintf("simulated time passes its horizon of %.6g days (int64 picoseconds): %s", Never.Seconds()/86400, e.Quantity)
}

// Add is a + b saturating at Never and -Never: time arithmetic never wraps.
func Add(a, b Time) Time {
	switch {
	case b > 0 && a > Never-b:
		return Never
	case b < 0 && a < -Never-b:
		return -Never
	}
	return a + b
}

// Mul is t·n saturating at ±Never.
func Mul(t Time, n int64) Time {
	if t == 0 || n == 0 {
		return 0
	}
	p := t * Time(n)
	if p/Time(n) != t || (t == -1 && n == math.MinInt64) || (n == -1 && t == math.MinInt64) {
		if (t > 0) == (n > 0) {
			return Never
		}
		return -Never
	}
	return p
}

// Seconds converts seconds to Time, rounding to the nearest picosecond and
// saturating at Never.
func Seconds(s float64) Time {
	ps := math.Round(s * 1e12)
	if ps >= float64(math.MaxInt64) {
		return Never
	}
	if ps <= float64(math.MinInt64) {
		return -Never
	}
	return Time(ps)
}

// SecondsCeil converts seconds to Time rounding up, so an interval never ends early.
func SecondsCeil(s float64) Time {
	ps := math.Ceil(s*1e12 - 1e-6)
	if ps >= float64(math.MaxInt64) {
		return Never
	}
	return Time(ps)
}

// Seconds converts Time to seconds.
func (t Time) Seconds() float64 { return float64(t) * 1e-12 }

func (t Time) String() string { return fmt.Sprintf("%.9gs", t.Seconds()) }

// Handler receives an event without the allocation of a closure: models that
// schedule millions of events pass themselves and an integer argument.
type Handler interface {
	Handle(arg int)
}

type event struct {
	fn  func()
	h   Handler
	arg int
}

func (e *event) run() {
	if e.fn != nil {
		e.fn()
		return
	}
	e.h.Handle(e.arg)
}

// slotBits of an entry's key say what to run: a closure's slot in the slab,
// or (with handlerBit set) a registered handler, whose argument travels in
// the entry so the hot path never touches the slab. The bits above hold the
// sequence number, so ordering by (t, key) is ordering by (time, sequence).
const (
	slotBits   = 28
	handlerBit = 1 << (slotBits - 1)
)

// entry is what the heap and runs move.
type entry struct {
	t   Time
	key uint64 // seq<<slotBits | slot, or seq<<slotBits | handlerBit | handler
	arg int
}

func (e entry) before(o entry) bool {
	return e.t < o.t || (e.t == o.t && e.key < o.key)
}

// Kernel is the event loop. The zero value is not usable; call New.
type Kernel struct {
	now    Time
	events uint64
	seq    uint64
	queue  []entry // 4-ary min-heap by (t, seq)
	// runs are sorted FIFO runs beside the heap. Models schedule most events
	// a fixed delay after now (a transfer's time plus its path latency), so
	// successive events of one kind come in time order: such an event is
	// appended to a run in O(1) instead of sifting through the heap, and the
	// earliest event is the least of the heap top and the run heads. Order
	// is still exactly (time, sequence). The last run holds the events
	// scheduled at now.
	runs      [numRuns + 1]run // the last holds events at now (see push)
	slab      []func()         // closures, by slot
	free      []uint32
	handlers  []Handler // registered by AtHandler, by id
	handlerID map[Handler]int
	lastH     int // id of the last handler scheduled
	settle    []func()
	stalls    []stallDescriber
	failure   error
	watch     context.Context // see Watch
	polls     uint32

	// CheckEvery is how many events pass between cancellation checks and
	// progress reports (default 4096).
	CheckEvery uint64
	// Progress, if set, is called every CheckEvery events with the current
	// time and the number of events run so far.
	Progress func(now Time, events uint64)
}

// numRuns is small: a pop compares every run head.
const numRuns = 8

// run is a FIFO of entries in (time, seq) order.
type run struct {
	items []entry
	head  int
}

func (r *run) len() int { return len(r.items) - r.head }

// add appends x, which is not before the run's tail.
func (r *run) add(x entry) {
	if r.head > 0 && r.head >= len(r.items)/2 {
		// Reclaim the consumed prefix (amortized O(1) per entry).
		n := copy(r.items, r.items[r.head:])
		r.items, r.head = r.items[:n], 0
	}
	r.items = append(r.items, x)
}

// New returns a kernel at time 0 with an empty queue.
func New() *Kernel {
	return &Kernel{CheckEvery: 4096}
}

// Now is the current simulated time.
func (k *Kernel) Now() Time { return k.now }

// Events is the number of events run so far.
func (k *Kernel) Events() uint64 { return k.events }

// Pending is the number of events scheduled and not yet run.
func (k *Kernel) Pending() int {
	n := len(k.queue)
	for i := range k.runs {
		n += k.runs[i].len()
	}
	return n
}

// At schedules f at absolute time t. Scheduling in the past is a bug in the
// caller and panics.
func (k *Kernel) At(t Time, f func()) {
	var slot uint32
	if n := len(k.free); n > 0 {
		slot = k.free[n-1]
		k.free = k.free[:n-1]
		k.slab[slot] = f
	} else {
		slot = uint32(len(k.slab))
		if slot >= handlerBit {
			panic("sim: more than 2^27 closures pending")
		}
		k.slab = append(k.slab, f)
	}
	k.push(t, uint64(slot), 0)
}

// After schedules f d after now.
func (k *Kernel) After(d Time, f func()) { k.At(Add(k.now, d), f) }

// AtHandler schedules h.Handle(arg) at time t, without allocating. h must
// be comparable (typically a pointer): the kernel registers each handler
// once and keeps it for the kernel's life.
func (k *Kernel) AtHandler(t Time, h Handler, arg int) {
	id := k.lastH
	if id >= len(k.handlers) || k.handlers[id] != h {
		if k.handlerID == nil {
			k.handlerID = map[Handler]int{}
		}
		var ok bool
		if id, ok = k.handlerID[h]; !ok {
			id = len(k.handlers)
			if id >= handlerBit {
				panic("sim: too many handlers")
			}
			k.handlers = append(k.handlers, h)
			k.handlerID[h] = id
		}
		k.lastH = id
	}
	k.push(t, handlerBit|uint64(id), arg)
}

func (k *Kernel) push(t Time, slot uint64, arg int) {
	if t >= Never {
		// Saturated arithmetic reached the horizon: the run cannot go on.
		// A model that knows what overflowed has already called Fail with
		// a HorizonError naming it (the first failure is kept).
		k.Fail(&HorizonError{Quantity: fmt.Sprintf("an event scheduled at t=%v", k.now)})
		if slot&handlerBit == 0 {
			k.slab[slot] = nil
			k.free = append(k.free, uint32(slot))
		}
		return
	}
	if t < 0 && k.now >= 0 {
		// Time starts at 0: a negative time is a sum that wrapped past the
		// horizon in a model that did not saturate (sim.Add).
		k.Fail(&HorizonError{Quantity: fmt.Sprintf("an event scheduled after t=%v wrapped around", k.now)})
		if slot&handlerBit == 0 {
			k.slab[slot] = nil
			k.free = append(k.free, uint32(slot))
		}
		return
	}
	if t < k.now {
		panic(fmt.Sprintf("sim: event scheduled at %v, before now %v", t, k.now))
	}
	x := entry{t: t, key: k.seq<<slotBits | slot, arg: arg}
	k.seq++
	if t == k.now {
		// An event at now (a callback's follow-up in the same instant)
		// goes to the last run, which holds only such events: every
		// pending event is at now or later and x's sequence number is the
		// largest yet, so x is its tail in (time, sequence) order. It
		// empties before the clock moves (its events are the earliest).
		k.runs[numRuns].add(x)
		return
	}
	// Its sequence number is the largest yet, so x goes after a run's tail
	// whenever its time is not earlier. Take the run with the latest such
	// tail (an empty run if none), which keeps runs apart by delay.
	best, bestT, empty := -1, Time(-1), -1
	for i := range k.runs[:numRuns] {
		r := &k.runs[i]
		if r.len() == 0 {
			if empty < 0 {
				empty = i
			}
			continue
		}
		if tail := r.items[len(r.items)-1].t; tail <= t && tail > bestT {
			best, bestT = i, tail
		}
	}
	if best < 0 {
		best = empty
	}
	if best >= 0 {
		k.runs[best].add(x)
		return
	}
	k.queue = append(k.queue, x)
	q := k.queue
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !x.before(q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = x
}

// next returns the earliest pending entry and where it is: a run index, or
// -1 for the heap; ok is false when nothing is pending.
func (k *Kernel) next() (e entry, from int, ok bool) {
	from = -2
	if len(k.queue) > 0 {
		e, from = k.queue[0], -1
	}
	for i := range k.runs {
		r := &k.runs[i]
		if r.head < len(r.items) {
			if h := r.items[r.head]; from == -2 || h.before(e) {
				e, from = h, i
			}
		}
	}
	return e, from, from != -2
}

// pop removes the earliest entry (from next) and returns its event body.
func (k *Kernel) pop(top entry, from int) event {
	if from >= 0 {
		r := &k.runs[from]
		r.head++
		if r.head == len(r.items) {
			r.items, r.head = r.items[:0], 0
		}
	} else {
		k.popHeap()
	}
	slot := uint32(top.key & (1<<slotBits - 1))
	if slot&handlerBit != 0 {
		return event{h: k.handlers[slot&^handlerBit], arg: top.arg}
	}
	f := k.slab[slot]
	k.slab[slot] = nil
	k.free = append(k.free, slot)
	return event{fn: f}
}

// popHeap removes the heap's top entry.
func (k *Kernel) popHeap() {
	q := k.queue
	n := len(q) - 1
	x := q[n]
	q = q[:n]
	if n > 0 {
		i := 0
		for { // 4-ary heap: shallower than binary, children share a cache line
			c := 4*i + 1
			if c >= n {
				break
			}
			m := c
			for j := c + 1; j < c+4 && j < n; j++ {
				if q[j].before(q[m]) {
					m = j
				}
			}
			if !q[m].before(x) {
				break
			}
			q[i] = q[m]
			i = m
		}
		q[i] = x
	}
	k.queue = q
}

// Settle runs f once the current instant has no events left, before time
// advances. Work registered while settling runs in the same instant too.
func (k *Kernel) Settle(f func()) { k.settle = append(k.settle, f) }

// stallDescriber is a registered describer of blocked work and its owner.
type stallDescriber struct {
	owner    string
	describe func() []string
}

// OnStall registers a describer of blocked work, asked when the queue runs
// dry; it returns one line per blocked item, or nothing when all is done.
// One describer per owner: a later registration of the same owner (the
// next run's engine on a kernel that outlives it) replaces the earlier,
// which the kernel then no longer keeps alive.
func (k *Kernel) OnStall(owner string, describe func() []string) {
	for i := range k.stalls {
		if k.stalls[i].owner == owner {
			k.stalls[i].describe = describe
			return
		}
	}
	k.stalls = append(k.stalls, stallDescriber{owner, describe})
}

// Fail stops the run at the end of the current event; Run returns err.
func (k *Kernel) Fail(err error) {
	if k.failure == nil {
		k.failure = err
	}
}

// Watch gives the kernel the run's context before Run is called, for
// Interrupted: models that do much work outside events (setting up a
// collective over a million ranks) poll it.
func (k *Kernel) Watch(ctx context.Context) { k.watch = ctx }

// Interrupted reports whether the run has failed or the watched context is
// canceled (checked once every 256 calls, so it is cheap in a hot loop); a
// cancellation fails the run, so Run then returns it at once.
func (k *Kernel) Interrupted() bool {
	if k.failure != nil {
		return true
	}
	if k.polls++; k.polls&255 != 0 || k.watch == nil {
		return false
	}
	if err := k.watch.Err(); err != nil {
		k.Fail(err)
		return true
	}
	return false
}

// ErrStalled is wrapped by the error Run returns when work is blocked with
// no event left that could unblock it.
var ErrStalled = errors.New("simulation made no progress")

// Run processes events until the queue is empty, the context is canceled, or
// a model calls Fail.
func (k *Kernel) Run(ctx context.Context) error { return k.RunUntil(ctx, Never) }

// RunUntil processes events with time <= end. The clock stays at the last
// event run (or end, if events remain beyond it).
func (k *Kernel) RunUntil(ctx context.Context, end Time) error {
	every := k.CheckEvery
	if every == 0 {
		every = 4096
	}
	var sinceCheck uint64
	// A settle can take milliseconds (a fabric's max-min fill over a
	// quarter of a million flows), so the context is also looked at after
	// each one: a receive from its Done channel costs nanoseconds.
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	for {
		if k.failure != nil {
			return k.failure
		}
		top, from, ok := k.next()
		if !ok || top.t != k.now {
			// The current instant has no events left: settle before moving
			// on (settling may schedule more events now).
			if len(k.settle) > 0 {
				k.runSettle()
				select {
				case <-done:
					return ctx.Err()
				default:
				}
				continue
			}
			if !ok {
				return k.stalled()
			}
			if top.t > end {
				k.now = end
				return nil
			}
			// Nothing was scheduled since next, so top is still the
			// earliest: run it without looking again.
			k.now = top.t
		}
		e := k.pop(top, from)
		k.events++
		e.run()
		if sinceCheck++; sinceCheck >= every {
			sinceCheck = 0
			if ctx != nil {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if k.Progress != nil {
				k.Progress(k.now, k.events)
			}
		}
	}
}

func (k *Kernel) runSettle() {
	fs := k.settle
	k.settle = nil
	for _, f := range fs {
		f()
	}
	if k.settle == nil {
		k.settle = fs[:0]
	}
}

func (k *Kernel) stalled() error {
	var lines []string
	for _, d := range k.stalls {
		lines = append(lines, d.describe()...)
	}
	if len(lines) == 0 {
		return nil
	}
	const show = 10
	more := ""
	if len(lines) > show {
		more = fmt.Sprintf("\n  ... and %d more", len(lines)-show)
		lines = lines[:show]
	}
	return fmt.Errorf("%w at t=%v: no events left but work is blocked:\n  %s%s",
		ErrStalled, k.now, strings.Join(lines, "\n  "), more)
}
