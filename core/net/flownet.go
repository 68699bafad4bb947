package net

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// FlowNet is the flow-level model with congestion: every transfer is a flow
// on its routed path and flows share links by max-min fairness, computed by
// progressive filling. Rates are recomputed once per simulated instant in
// which flows started, finished or capacities changed, and only over the
// connected component (links ↔ flows sharing them) of what changed, so a
// flow on idle links costs O(path length).
//
// A flow's last byte leaves at TxEnd; it is delivered one path latency
// later (the sum of its links' latencies), i.e. latency is added once per
// transfer, as bytes stream through every hop at the same rate.
type FlowNet struct {
	counters
	flows []flow
	free  []int32
	links []linkState
	slow  []linkSlow

	dirty    []int32
	dirtyGen uint32
	// capVersion is the topology's CapacityVersion when the links'
	// capacities (linkSlow.capacity) were last read.
	capVersion uint64
	settling   bool
	gen        uint32 // visit stamp for component searches
	// walk is each link's visit stamp and ordinary flow count, dense
	// (eight bytes a link) so that a search along long paths stays in the
	// core's cache and reads a private link's linkSlow line not at all.
	walk []linkWalk
	// flowStamp is each flow's visit stamp (by slot), dense for the same
	// reason: a component search looks at every entry of a shared link,
	// and most of those flows were found already.
	flowStamp []uint32

	// scratch for the component search and the filling heap
	compLinks []int32
	compFlows []int32
	heap      shareHeap
	// memo holds the rates of large components already filled (fillmemo.go).
	memo fillMemo
	// rec is the last filling's order, to refill from where flows left,
	// and hist each link's capacity left after each of its fixes
	// (maxmin.go).
	rec  fillRecord
	hist [][]histEntry

	records []FlowRecord       // kept only if KeepRecords
	last    []lastRoute        // routeWays per source device, way-major (see route)
	rings   map[*Hop]*ringInfo // ring streams' routes, by their hops' storage
	// KeepRecords keeps every delivered flow's record (Records()).
	KeepRecords bool
	// noFast sends every flow through max-min (tests compare the fast path
	// against it).
	noFast bool
	// noRefill fills every component whole (tests compare refill against
	// it); refills counts the settles refill took.
	noRefill bool
	refills  int
	// onRefill, if set, sees the links and flows a refill is about to
	// fill, their links' state set from the histories (tests).
	onRefill func(links, flows []int32)
	// memoMinLinks is the least component (in links) whose filling is
	// memoized; 0 means memoMinLinks (tests set it to 1, or to -1 for none).
	memoMinLinks int
	// onComponent, if set, sees every component settle found (tests).
	onComponent func(dirty, links, flows []int32)
}

// flow is laid out by use, in three 64-byte lines (the allocator places
// the flows slice on a line boundary, so every flow starts a line): a fast
// flow's delivery reads only the first, its start writes the first (a
// point-to-point flow, lazy) or the first two (a ring stream, or when
// records are kept), and the third is for the max-min path. Most flows are fast, and at 8,192
// ranks the flows no longer fit in the core's cache, so each line skipped
// is a miss saved.
type flow struct {
	// line 1: delivery
	sink     Sink
	tag      int
	start    sim.Time
	finish   sim.Time // scheduled end of transmission; at delivery, TxEnd
	bytes    float64
	gen      uint32 // slot reuse guard for stale events
	src, dst int32
	active   bool // on links, transmitting
	fast     bool // delivery scheduled directly; links released lazily
	fixed    bool
	lazy     bool // a fast flow whose second line is unwritten (see materialize)
	// line 2: start
	path []int32
	rate float64
	lat  sim.Time  // path latency
	ring *ringInfo // a ring stream's route (nil for a point-to-point flow)
	// remaining is the bytes left at updated. A fast flow does not set
	// them: until touch makes it ordinary they are bytes and start.
	remaining float64
	updated   sim.Time
	// line 3: max-min only
	pos  []int32 // index of this flow in slow[path[h]].entries
	next float64 // rate computed by fill
	// id numbers flows in the order they were sent; set only when records
	// are kept or hooked (FlowRecord.ID), so a fast flow's start does not
	// write this line.
	id int64
	// memoID is the fill memo's id of path while memoEpoch is the memo's
	// epoch and the memo's refs[memoID] is path (fillmemo.go).
	memoEpoch uint64
	memoID    uint32
	// recGen and recPos place the flow in the last filling's record
	// (fillRecord: its gen, and the index of the flow there).
	recGen uint32
	recPos int32
	_      [4]byte // pads flow to 192 bytes (see above)
}

// linkWalk is what a component search reads of a link: its visit stamp
// and its number of ordinary flows (len of linkSlow.entries).
type linkWalk struct {
	stamp uint32
	flows int32
}

type linkEntry struct {
	flow int32
	hop  int32
}

// linkState is what a flow's hop touches on the fast path: the link's
// counters and the fast flow holding it, in 32 bytes, two links to a cache
// line. At 8,192 GPUs the links' state does not fit in the core's cache and
// this read is the main cost of a flow, so what only max-min needs lives
// in linkSlow.
type linkState struct {
	bytes float64
	busy  sim.Time
	since sim.Time // see owner
	// active counts the ordinary flows on the link (len of its entries).
	active int32
	// owner is the fast flow (index + 1; 0 when none) that started alone on
	// the link. Fast flows are not counted in active, so while one holds
	// the link active is 0 and since holds the owner's finish time: the
	// owner is live while since > now. A stale owner is ignored (its flow
	// is never looked at), so nothing needs releasing when a fast flow ends.
	owner int32
}

// live reports whether the link's fast owner is still transmitting.
func (ls *linkState) live(now sim.Time) bool {
	return ls.owner != 0 && ls.active == 0 && ls.since > now
}

// linkSlow is a link's state for max-min (ordinary flows, component
// searches, progressive filling) and its peak count, in one line, apart
// from linkState.
type linkSlow struct {
	entries  []linkEntry
	capacity float64
	rem      float64 // progressive filling: capacity not yet given out
	unfixed  int32
	dirty    uint32
	// private: every entry is one flow's (fill's scratch; see there).
	private bool
	// peak is the most ordinary flows at once. Fast flows do not write it
	// (a line less per hop): one alone makes the link's busy time positive,
	// or becomes ordinary at once, so peak is read as at least 1 when busy
	// > 0 (linkCounter).
	peak int32
	_    [8]byte // pads linkSlow to one 64-byte line
}

// enter records an ordinary flow joining link l at now.
func (n *FlowNet) enter(l int32, now sim.Time) {
	ls := &n.links[l]
	ls.active++
	if ls.active == 1 {
		ls.since = now
	}
	n.slow[l].peak = max(n.slow[l].peak, ls.active)
}

// leave records an ordinary flow leaving link l at t (<= now).
func (n *FlowNet) leave(l int32, t sim.Time) {
	ls := &n.links[l]
	ls.active--
	if ls.active == 0 {
		ls.busy += t - ls.since
	}
}

// linkCounter is link l's counters as LinkStats reports them.
func (n *FlowNet) linkCounter(l int) linkCounter {
	ls := &n.links[l]
	peak := n.slow[l].peak
	if ls.busy > 0 {
		peak = max(peak, 1)
	}
	return linkCounter{bytes: ls.bytes, busy: ls.busy, since: ls.since, active: ls.active, peak: peak}
}

// Event kinds, in the low bit of the handler argument.
const (
	evFinish  = 0
	evDeliver = 1
)

// NewFlowNet builds the max-min model over a topology on kernel k.
func NewFlowNet(k *sim.Kernel, t *topo.Topology) *FlowNet {
	n := &FlowNet{links: make([]linkState, len(t.Links)), slow: make([]linkSlow, len(t.Links)), walk: make([]linkWalk, len(t.Links)),
		hist: make([][]histEntry, len(t.Links))}
	n.counters = newCounters(k, t, n.linkCounter)
	for i := range n.slow {
		n.slow[i].capacity = t.Capacity(i)
	}
	n.capVersion = t.CapacityVersion()
	return n
}

// Records returns the delivered flows when KeepRecords is set.
func (n *FlowNet) Records() []FlowRecord { return n.records }

// ActiveFlows is the number of flows transmitting now.
func (n *FlowNet) ActiveFlows() int {
	c := 0
	for i := range n.flows {
		if n.transmitting(&n.flows[i]) {
			c++
		}
	}
	return c
}

// Send implements Fabric.
func (n *FlowNet) Send(src, dst int, bytes float64, sink Sink, tag int) error {
	if n.k.Interrupted() { // canceled (sim.Kernel.Watch) or failed: Run returns why
		return nil
	}
	c, err := n.route(src, dst)
	if err != nil {
		return err
	}
	n.launch(int32(src), int32(dst), c.path, c.hops(), c.lat, c.rate, bytes, sink, tag, nil)
	return nil
}

// SendRing implements Fabric.
func (n *FlowNet) SendRing(hops []Hop, steps int, bytes float64, sink Sink, tag int) error {
	return n.sendRing(nil, hops, steps, bytes, sink, tag)
}

// sendRing is SendRing with the caller's copy of the ring's route (a ring
// program's channel segment keeps it): the same route as n.rings holds,
// without the map look-up while it is current.
func (n *FlowNet) sendRing(kept **ringInfo, hops []Hop, steps int, bytes float64, sink Sink, tag int) error {
	if len(hops) == 0 {
		return fmt.Errorf("a ring stream needs at least one hop")
	}
	// A ring's streams repeat with the same hops (a communicator's
	// channel): its route is computed once per topology version.
	v := n.t.CapacityVersion()
	var ring *ringInfo
	ok := false
	if kept != nil && *kept != nil && &(*kept).hops[0] == &hops[0] {
		ring, ok = *kept, true
	} else {
		ring, ok = n.rings[&hops[0]]
	}
	if !ok || ring.version != v || ring.steps != steps || len(ring.hops) != len(hops) {
		path, lat, rate, dup, err := ringRoute(n.k, n.t, hops, steps)
		if errors.Is(err, errInterrupted) {
			return nil // as Send: Run returns why
		}
		if err != nil {
			return err
		}
		ring = &ringInfo{hops: hops, steps: steps, dup: dup, path: path, lat: lat, rate: rate, version: v}
		if n.rings == nil {
			n.rings = map[*Hop]*ringInfo{}
		}
		n.rings[&hops[0]] = ring
	}
	if kept != nil {
		*kept = ring
	}
	n.launch(hops[0].Src, hops[len(hops)-1].Dst, ring.path, ring.path, ring.lat, ring.rate, bytes, sink, tag, ring)
	return nil
}

// ringInfo is a ring stream's route (shared by the streams of one ring
// while the topology is unchanged) and what a flow needs to reroute.
type ringInfo struct {
	hops    []Hop
	steps   int
	dup     bool // some link crossed twice: never fast (its share is not the bottleneck's)
	path    []int32
	lat     sim.Time
	rate    float64
	version uint64
	// memoID is path's id in the fill memo while its epoch is memoEpoch
	// (fillmemo.go).
	memoID    uint32
	memoEpoch uint64
}

// launch starts a flow on path (whose links, hops, may be a copy held in
// the route cache) with latency lat and bottleneck rate.
func (n *FlowNet) launch(src, dst int32, path, hops []int32, lat sim.Time, rate, bytes float64, sink Sink, tag int, ring *ringInfo) {
	i := n.alloc()
	f := &n.flows[i]
	now := n.k.Now()
	// Field by field rather than a composite literal: the max-min line
	// (pos, next) is left alone, so a fast flow's start does not
	// write it. pos is reset by attach; next is set by fill before use;
	// a stale flowStamp is from an earlier search generation.
	f.sink, f.tag, f.start, f.bytes = sink, tag, now, bytes
	f.gen++
	f.src, f.dst = src, dst
	f.active, f.fast, f.fixed, f.lazy = false, false, false, false
	recorded := n.KeepRecords || len(n.hooks) > 0
	if recorded {
		f.id = n.nextFlow
	}
	n.nextFlow++
	if len(path) == 0 || bytes <= 0 {
		f.path, f.rate, f.lat, f.ring = path, 0, lat, ring
		f.finish = now
		n.k.AtHandler(now+lat, n, n.arg(i, evDeliver))
		return
	}
	f.active = true
	alone := ring == nil || !ring.dup
	for _, l := range hops {
		// Checked here, not in touch: most links have no live owner, and
		// this loop is the hottest in the simulator. A stale owner can
		// stay (it is never live again).
		ls := &n.links[l]
		if ls.live(now) {
			n.touch(l)
		}
		alone = alone && ls.active == 0
	}
	if alone && !n.noFast {
		// Alone on every link: max-min gives it the bottleneck capacity and
		// changes nobody else's rate, so no recomputation is needed. Its
		// links' counters are charged now for the whole transfer (bytes,
		// busy until finish), so its end touches no link; if someone needs
		// a link before then, touch takes back the unsent part. It is
		// delivered by one event, with no end-of-transmission event.
		f.finish = sim.Add(now, max(1, sim.SecondsCeil(bytes/rate)))
		n.horizon(f.finish, bytes, rate)
		f.fast = true
		// A point-to-point flow leaves its route unwritten (lazy): the
		// second line stays out of the cache, and materialize finds the
		// route again if anyone asks.
		if ring == nil && !recorded {
			f.lazy = true
		} else {
			f.path, f.rate, f.lat, f.ring = path, rate, lat, ring
		}
		for _, l := range hops {
			ls := &n.links[l]
			ls.owner, ls.since = i+1, f.finish
			ls.bytes += bytes
			ls.busy += f.finish - now
		}
		n.k.AtHandler(sim.Add(f.finish, lat), n, n.arg(i, evDeliver))
		return
	}
	f.path, f.rate, f.lat, f.ring = path, 0, lat, ring
	f.remaining, f.updated = bytes, now
	n.attach(i)
	for _, l := range path {
		n.markDirty(l)
	}
}

// attach puts flow i on its path's links as an ordinary flow.
func (n *FlowNet) attach(i int32) {
	f := &n.flows[i]
	now := n.k.Now()
	n.rec.valid = false // a flow joins: the record's levels no longer hold
	// pos in a local slice, sized once: a ring stream's path is
	// thousands of links, and f's fields need not be written back per hop.
	path := f.path
	pos := slices.Grow(f.pos[:0], len(path))[:len(path)]
	for h, l := range path {
		ls := &n.slow[l]
		pos[h] = int32(len(ls.entries))
		ls.entries = append(ls.entries, linkEntry{flow: i, hop: int32(h)})
		n.walk[l].flows = int32(len(ls.entries))
		n.enter(l, now)
	}
	f.pos = pos
}

// routeWays is how many destinations each source remembers: a ring
// sends to one peer again and again, but a rank in several communicators
// (tensor, data parallel, a ring's channels) alternates between a few.
const routeWays = 4

// route returns the path, its latency and bottleneck, remembering each
// source's last routeWays destinations: this skips the topology's route map
// (and the walk over the links' latencies and capacities) until routes or
// capacities change. The result is valid until the next call.
func (n *FlowNet) route(src, dst int) (*lastRoute, error) {
	// Way-major: every source's newest route is in one dense array, so the
	// routes a step of a large ring reads span a quarter of the memory.
	D := len(n.t.Devices)
	if len(n.last) == 0 {
		n.last = make([]lastRoute, routeWays*D)
	}
	v := n.t.CapacityVersion()
	for w := 0; w < routeWays; w++ {
		if c := &n.last[w*D+src]; c.dst == int32(dst)+1 && c.version == v {
			return c, nil
		}
	}
	path, err := n.t.Route(src, dst)
	if err != nil {
		return nil, err
	}
	// The newest route goes first; the oldest falls off the end.
	for w := routeWays - 1; w > 0; w-- {
		n.last[w*D+src] = n.last[(w-1)*D+src]
	}
	c := &n.last[src]
	*c = lastRoute{dst: int32(dst) + 1, version: v, path: path, lat: pathLatency(n.t, path)}
	if len(path) > 0 {
		c.rate = n.t.Capacity(int(path[0]))
		for _, l := range path[1:] {
			c.rate = min(c.rate, n.t.Capacity(int(l)))
		}
	}
	if len(path) <= len(c.in) {
		c.nIn = int32(copy(c.in[:], path))
	}
	return c, nil
}

// lastRoute is a source's cached route, in one 64-byte line. A short path
// (two links: GPU to NVSwitch to GPU) is also copied in, so a flow's start
// reads its links from here rather than following the path's pointer to
// another line.
type lastRoute struct {
	dst     int32  // destination + 1; 0: none
	nIn     int32  // links in `in` (0: read path)
	version uint64 // topology's CapacityVersion (routes and capacities)
	path    []int32
	lat     sim.Time
	rate    float64 // bottleneck capacity
	in      [2]int32
}

// hops is the route's links.
func (c *lastRoute) hops() []int32 {
	if c.nIn > 0 {
		return c.in[:c.nIn]
	}
	return c.path
}

func (n *FlowNet) alloc() int32 {
	if k := len(n.free); k > 0 {
		i := n.free[k-1]
		n.free = n.free[:k-1]
		return i
	}
	n.flows = append(n.flows, flow{})
	n.flowStamp = append(n.flowStamp, 0)
	return int32(len(n.flows) - 1)
}

func (n *FlowNet) arg(i int32, kind int) int {
	return (int(n.flows[i].gen)<<32|int(i))<<1 | kind
}

// Handle implements sim.Handler for flow events.
func (n *FlowNet) Handle(arg int) {
	kind := arg & 1
	i := int32((arg >> 1) & 0xffffffff)
	gen := uint32(arg >> 33)
	f := &n.flows[i]
	if f.gen != gen {
		return
	}
	now := n.k.Now()
	switch kind {
	case evFinish:
		if !f.active || f.finish != now {
			return // rate changed since this event was scheduled
		}
		n.credit(f, now)
		f.active = false
		n.rec.left(f)
		for h, l := range f.path {
			n.detach(l, f.pos[h])
			n.leave(l, now)
			if n.links[l].active > 0 {
				n.markDirty(l) // the flows left behind may speed up
			}
		}
		n.k.AtHandler(now+f.lat, n, n.arg(i, evDeliver))
	case evDeliver:
		f.fast, f.active = false, false
		sink, tag := f.sink, f.tag
		// The record is built only for someone who reads it: it needs the
		// flow's id and path, off the first line.
		if n.KeepRecords || len(n.hooks) > 0 {
			n.materialize(f)
			rec := FlowRecord{ID: f.id, Src: int(f.src), Dst: int(f.dst), Bytes: f.bytes, Start: f.start,
				TxEnd: f.finish, Delivered: now, Hops: len(f.path), Tag: tag}
			if n.KeepRecords {
				n.records = append(n.records, rec)
			}
			n.deliver(rec)
		}
		f.sink = nil
		f.gen++
		n.free = append(n.free, i)
		sink.Delivered(tag)
	}
}

// A fast flow was alone on its links when it started; it is delivered by a
// single event at finish + latency and holds its links (as their owner)
// until its finish. touch restores exact semantics before anyone else uses a
// link: the owner, if still transmitting, becomes an ordinary flow: its
// delivery event is cancelled, the unsent bytes and busy time are taken back
// from its links, and max-min reschedules it.
func (n *FlowNet) touch(l int32) {
	ls := &n.links[l]
	now := n.k.Now()
	if !ls.live(now) {
		ls.owner = 0
		return
	}
	i := ls.owner - 1
	f := &n.flows[i]
	n.materialize(f)
	f.remaining = f.bytes - min(f.bytes, f.rate*(now-f.start).Seconds())
	f.updated = now
	for _, l2 := range f.path {
		ls := &n.links[l2]
		ls.owner = 0
		ls.bytes -= f.remaining
		ls.busy -= f.finish - now
	}
	f.fast = false
	f.gen++ // cancels the pending delivery event
	f.finish = 0
	n.attach(i)
	for _, l2 := range f.path {
		n.markDirty(l2)
	}
}

// materialize writes a lazy fast flow's route, rate and latency: its
// route is the topology's route from src to dst, as when it started,
// because the topology changes only through SetLinkHealth and
// SetDeviceDown, which materialize every lazy flow first.
func (n *FlowNet) materialize(f *flow) {
	if !f.lazy {
		return
	}
	// The route cache has it (the same path, latency and bottleneck as
	// at the start) unless its source has sent elsewhere since.
	c, err := n.route(int(f.src), int(f.dst))
	if err != nil {
		panic(fmt.Sprintf("net: the route of a started flow (%s to %s) is gone: %v", n.t.Devices[f.src].Name, n.t.Devices[f.dst].Name, err))
	}
	f.path, f.lat, f.ring, f.rate = c.path, c.lat, nil, c.rate
	f.lazy = false
}

// materializeAll materializes every lazy flow, before the topology changes.
func (n *FlowNet) materializeAll() {
	for i := range n.flows {
		if f := &n.flows[i]; f.lazy && f.sink != nil {
			n.materialize(f)
		}
	}
}

// liveOwner returns the fast flow transmitting alone on link l, if any.
func (n *FlowNet) liveOwner(l int32) (int32, bool) {
	ls := &n.links[l]
	if !ls.live(n.k.Now()) {
		return 0, false
	}
	return ls.owner - 1, true
}

// transmitting reports whether a flow is still sending (a fast flow past its
// finish is done, though not yet delivered).
func (n *FlowNet) transmitting(f *flow) bool {
	return f.active && !(f.fast && f.finish <= n.k.Now())
}

// LinkStats implements Fabric. Fast flows still transmitting have been
// charged for their whole transfer; the part after now is taken off.
func (n *FlowNet) LinkStats() []LinkStat {
	out := n.counters.LinkStats()
	now := n.k.Now()
	for l := range out {
		i, ok := n.liveOwner(int32(l))
		if !ok {
			continue
		}
		if f := &n.flows[i]; f.finish > now {
			n.materialize(f)
			sent := min(f.bytes, f.rate*(now-f.start).Seconds()) // a fast flow: see remaining
			out[l].Bytes -= f.bytes - sent
			out[l].Busy -= f.finish - now
		}
	}
	return out
}

// detach removes entry p of link l by swapping the last entry into its place.
func (n *FlowNet) detach(l int32, p int32) {
	ls := &n.slow[l]
	last := int32(len(ls.entries) - 1)
	if p != last {
		e := ls.entries[last]
		ls.entries[p] = e
		n.flows[e.flow].pos[e.hop] = p
	}
	ls.entries = ls.entries[:last]
	n.walk[l].flows = last
}

// credit moves a flow's progress up to now into its remaining bytes and
// its links' byte counters.
func (n *FlowNet) credit(f *flow, now sim.Time) {
	if now == f.updated {
		return
	}
	sent := f.rate * (now - f.updated).Seconds()
	if sent > f.remaining || now == f.finish {
		sent = f.remaining
	}
	f.remaining -= sent
	f.updated = now
	for _, l := range f.path {
		n.links[l].bytes += sent
	}
}

func (n *FlowNet) markDirty(l int32) {
	ls := &n.slow[l]
	if !n.settling {
		n.settling = true
		n.dirtyGen++
		n.dirty = n.dirty[:0]
		n.k.Settle(n.settle)
	}
	if ls.dirty != n.dirtyGen {
		ls.dirty = n.dirtyGen
		n.dirty = append(n.dirty, l)
	}
}

// settle recomputes max-min rates over the component of the dirty links and
// reschedules the flows whose rate changed.
func (n *FlowNet) settle() {
	n.settling = false
	if n.refill() {
		return // only recorded flows left (fillRecord)
	}
	n.nextGen()
	links, flows := n.compLinks[:0], n.compFlows[:0]
	walk := n.walk
	for _, l := range n.dirty {
		if walk[l].stamp != n.gen {
			walk[l].stamp = n.gen
			links = append(links, l)
		}
	}
	// Breadth-first over links and the flows on them. A link reached
	// through a flow's path and carrying one flow carries only that one,
	// found already: its entries need no look (a ring stream's path is
	// thousands of links, mostly its own).
	// The count is the dense walk's (linkWalk.flows), beside the stamp:
	// a private link costs no read of its linkSlow or linkState line.
	seeded := len(links)
	for h := 0; h < len(links); h++ {
		l := links[h]
		if h >= seeded && walk[l].flows == 1 {
			continue
		}
		for _, e := range n.slow[l].entries {
			if st := &n.flowStamp[e.flow]; *st != n.gen {
				*st = n.gen
			} else {
				continue
			}
			flows = append(flows, e.flow)
			for _, l2 := range n.flows[e.flow].path {
				if w := &walk[l2]; w.stamp != n.gen {
					w.stamp = n.gen
					links = append(links, l2)
				}
			}
		}
	}
	n.compLinks, n.compFlows = links, flows
	if n.onComponent != nil {
		n.onComponent(n.dirty, links, flows)
	}
	if len(flows) == 0 {
		return
	}
	if least := cmp.Or(n.memoMinLinks, memoMinLinks); least > 0 && len(links) >= least {
		n.fillMemoized(links, flows)
	} else {
		n.fill(links, flows)
	}
	n.reschedule(flows)
}

// nextGen starts a search generation (the stamps of links and flows seen).
func (n *FlowNet) nextGen() {
	n.gen++
	if n.gen == 0 {
		for l := range n.walk {
			n.walk[l].stamp = 0
		}
		clear(n.flowStamp)
		n.gen = 1
	}
}

// reschedule gives the flows the rates fill computed (flow.next), and a
// new end of transmission to those whose rate changed.
func (n *FlowNet) reschedule(flows []int32) {
	now := n.k.Now()
	for _, i := range flows {
		f := &n.flows[i]
		newRate := f.next
		if f.finish != 0 && math.Abs(newRate-f.rate) <= 1e-9*f.rate {
			continue // unchanged up to rounding: keep the scheduled finish
		}
		n.credit(f, now)
		f.rate = newRate
		if newRate <= 0 {
			panic(fmt.Sprintf("net: flow %d (%s to %s) got rate %v", i, n.t.Devices[f.src].Name, n.t.Devices[f.dst].Name, newRate))
		}
		f.finish = sim.Add(now, max(1, sim.SecondsCeil(f.remaining/newRate)))
		n.horizon(f.finish, f.remaining, newRate)
		n.k.AtHandler(f.finish, n, n.arg(i, evFinish))
	}
}

// SetLinkHealth implements Fabric. Only a link that fails can break a
// route: a degraded or restored one changes rates, not routes (a sampled
// degradation of half a 16,384-GPU cluster's cables scanned every flow's
// route once per cable, 109 s for one all-reduce).
func (n *FlowNet) SetLinkHealth(link int, health float64) {
	n.materializeAll()
	n.touch(int32(link))
	n.t.SetHealth(link, health)
	n.markDirty(int32(link))
	if !n.t.Usable(link) {
		n.rerouteBroken()
	}
}

// SetDeviceDown implements Fabric.
func (n *FlowNet) SetDeviceDown(device int, down bool) {
	n.materializeAll()
	for _, l := range n.t.Out(device) {
		n.touch(l)
	}
	for l := range n.t.Links {
		if n.t.Links[l].Dst == device {
			n.touch(int32(l))
		}
	}
	n.t.SetDeviceDown(device, down)
	for _, l := range n.t.Out(device) {
		n.markDirty(l)
	}
	n.rerouteBroken()
}

// rerouteBroken moves every active flow that crosses an unusable link onto a
// new route for its remaining bytes. A flow with no route left fails the run.
func (n *FlowNet) rerouteBroken() {
	now := n.k.Now()
	for i := range n.flows {
		f := &n.flows[i]
		if !n.transmitting(f) {
			continue
		}
		if f.fast {
			n.touch(f.path[0]) // make it ordinary before rerouting
		}
		broken := false
		for _, l := range f.path {
			if !n.t.Usable(int(l)) {
				broken = true
				break
			}
		}
		if !broken {
			continue
		}
		var path []int32
		var lat sim.Time
		var err error
		if f.ring != nil {
			// The shared route stays with the streams that keep it.
			r := *f.ring
			path, lat, r.rate, r.dup, err = ringRoute(n.k, n.t, r.hops, r.steps)
			r.path, r.lat, r.version, r.memoEpoch = path, lat, 0, 0
			f.ring = &r
		} else if path, err = n.t.Route(int(f.src), int(f.dst)); err == nil {
			lat = pathLatency(n.t, path)
		}
		if err != nil {
			n.k.Fail(fmt.Errorf("at t=%v a fault cut the flow from %s to %s mid-transfer: %w", now, n.t.Devices[f.src].Name, n.t.Devices[f.dst].Name, err))
			return
		}
		n.credit(f, now)
		for h, l := range f.path {
			n.detach(l, f.pos[h])
			n.leave(l, now)
			n.markDirty(l)
		}
		f.path, f.lat = path, lat
		f.rate, f.finish = 0, 0 // forces a new finish event in settle
		for _, l := range path {
			n.touch(l)
		}
		n.attach(int32(i))
		for _, l := range path {
			n.markDirty(l)
		}
	}
}

// horizon fails the run, naming the transfer, when a flow's finish
// saturated at the end of representable time (sim.Add).
func (n *FlowNet) horizon(finish sim.Time, bytes, rate float64) {
	if finish == sim.Never {
		n.k.Fail(&sim.HorizonError{Quantity: fmt.Sprintf("a flow of %.6g bytes at %.6g bytes/s would end after it (check the links' bandwidth_bytes_per_s)", bytes, rate)})
	}
}
