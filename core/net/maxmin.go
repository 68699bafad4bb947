package net

import (
	"fmt"
	"math"
	"slices"
)

// fill computes max-min fair rates by progressive filling over one set of
// links and the flows on them: repeatedly take the link whose remaining
// capacity divided by its unfixed flows is smallest, fix those flows at that
// share, and take their rate off every link they cross. Each flow's result
// goes to flow.next. Ties between links break by link id (deterministic).
//
// When only flows that left changed these flows' links since the last
// filling of them (resumable), it replays that filling's fixes below the
// lowest share a departed flow had instead of popping them (fillRecord).
func (n *FlowNet) fill(links, flows []int32) {
	if len(flows) == 1 && n.flows[flows[0]].ring == nil {
		// One flow alone: its bottleneck link's capacity. (A ring stream
		// may cross a link twice and take the filling below.)
		f := &n.flows[flows[0]]
		r := n.t.Capacity(int(f.path[0]))
		for _, l := range f.path[1:] {
			r = min(r, n.t.Capacity(int(l)))
		}
		f.next = r
		return
	}
	resume := n.resumable(flows)
	h := &n.heap
	if len(h.pos) != len(n.slow) {
		h.pos = make([]int32, len(n.slow))
	}
	if v := n.t.CapacityVersion(); v != n.capVersion {
		// Capacities change only with faults: refreshed then, for all.
		for l := range n.slow {
			n.slow[l].capacity = n.t.Capacity(l)
		}
		n.capVersion = v
	}
	for _, l := range links {
		ls := &n.slow[l]
		ls.rem = ls.capacity
		ls.unfixed = int32(len(n.slow[l].entries))
		ls.private = ls.unfixed > 0
		for k := 1; k < len(ls.entries) && ls.private; k++ {
			ls.private = ls.entries[k].flow == ls.entries[0].flow
		}
	}
	for _, i := range flows {
		n.flows[i].fixed = false
	}
	rec := &n.rec
	old, oldShare, cut := rec.start()
	if resume {
		n.replays++
		for k, i := range old[:cut] {
			if n.flowStamp[i] == n.gen { // in this component
				n.fix(i, oldShare[k], -1)
			}
		}
	}
	// A link crossed by one flow only (a private link) is its bottleneck
	// at most, never another's: rather than one heap entry per private
	// link, each flow enters its tightest private link (ties to the lower
	// id, as the heap orders them). A ring stream's path is mostly
	// private (its NICs, its GPUs' ports), so this keeps the heap to the
	// shared links.
	for _, l := range links {
		if ls := &n.slow[l]; ls.unfixed > 0 && !ls.private {
			h.set(shareItem{share: ls.rem / float64(ls.unfixed), link: l})
		}
	}
	for _, i := range flows {
		f := &n.flows[i]
		if f.fixed {
			continue
		}
		best := shareItem{link: -1}
		for _, l := range f.path {
			ls := &n.slow[l]
			if !ls.private {
				continue
			}
			it := shareItem{share: ls.rem / float64(ls.unfixed), link: l}
			if best.link < 0 || it.less(best) {
				best = it
			}
		}
		if best.link >= 0 {
			h.set(best)
		}
	}
	for len(h.items) > 0 {
		it := h.pop()
		if n.slow[it.link].unfixed == 0 {
			continue // a private link whose flow was fixed elsewhere
		}
		for _, e := range n.slow[it.link].entries {
			if !n.flows[e.flow].fixed {
				n.fix(e.flow, it.share, it.link)
			}
		}
	}
	rec.finish(n)
}

// fix gives flow i the rate share, takes it off every link the flow
// crosses and moves those links in the heap (all but popped, the link
// being popped, if any), and records the fix.
func (n *FlowNet) fix(i int32, share float64, popped int32) {
	f := &n.flows[i]
	f.fixed = true
	f.next = share
	h := &n.heap
	for _, l2 := range f.path {
		m := &n.slow[l2]
		m.rem = max(0, m.rem-share)
		m.unfixed--
		if m.unfixed > 0 && l2 != popped && h.pos[l2] > 0 {
			h.set(shareItem{share: m.rem / float64(m.unfixed), link: l2})
		}
	}
	n.rec.order = append(n.rec.order, i)
	n.rec.share = append(n.rec.share, share)
}

// fillRecord is the order in which the last filling fixed its flows, and
// the share each took. Progressive filling pops links in rising share;
// when flows have only left since (no flow joined, no capacity changed), a
// new filling of what remains repeats every pop before the first at a
// share of at least low, the lowest share a flow that left had, bit for
// bit: until then the departed flows were unfixed, so each link's
// remaining capacity went down by the same shares in the same order, and a
// link a departed flow crossed has fewer unfixed flows now, so a share no
// lower and no earlier pop (a pop below low never held a departed flow,
// which it would have fixed below its share). The flows those pops fixed
// keep their rates: fill replays their fixes in order (the same
// subtractions from every link) and pops only from there; and when no
// flow is left past that point, nobody's rate changes (unchanged). A
// direct all-to-all's flows end in hundreds of distinct instants, the
// fastest first, at the top of the levels: 256 GPUs' 65,280 flows settled
// 515 times, each a whole filling of the rest before this, none of which
// changed a rate.
type fillRecord struct {
	valid      bool
	gen        uint32
	capVersion uint64
	order      []int32
	share      []float64
	// top[k] is the highest of share[:k+1] (shares rise but for rounding).
	top []float64
	// low is the lowest share of a recorded flow that left since (+Inf:
	// none); foreign is set when a flow not in the record left.
	low     float64
	foreign bool
	// clear: no recorded flow past top's first index at or above low is
	// transmitting, checked from clear onwards (low only falls).
	clear int
	// spare holds the previous order and share slices for reuse.
	spareOrder []int32
	spareShare []float64
}

// left notes that flow f stops transmitting.
func (r *fillRecord) left(f *flow) {
	if !r.valid {
		return
	}
	if f.recGen != r.gen {
		r.foreign = true
		return
	}
	r.low = min(r.low, r.share[f.recPos])
	f.recGen = 0
}

// cut is the index of the first recorded fix at a share of at least low.
func (r *fillRecord) cut() int {
	k, _ := slices.BinarySearch(r.top, r.low)
	return k
}

// start begins a new record and returns the previous one's order, shares
// and cut.
func (r *fillRecord) start() (order []int32, share []float64, cut int) {
	order, share, cut = r.order, r.share, r.cut()
	r.order, r.share = r.spareOrder[:0], r.spareShare[:0]
	r.spareOrder, r.spareShare = order, share
	r.gen++
	if r.gen == 0 {
		r.gen = 1
	}
	return order, share, cut
}

// finish makes the record the filling just done: its flows' places, the
// capacities it used, no departures yet.
func (r *fillRecord) finish(n *FlowNet) {
	r.top = slices.Grow(r.top[:0], len(r.share))
	for k, i := range r.order {
		n.flows[i].recGen, n.flows[i].recPos = r.gen, int32(k)
		t := r.share[k]
		if k > 0 {
			t = max(t, r.top[k-1])
		}
		r.top = append(r.top, t)
	}
	r.valid, r.capVersion, r.low, r.foreign, r.clear = true, n.t.CapacityVersion(), math.Inf(1), false, len(r.order)
}

// current reports whether the record still describes the links' flows
// but for recorded flows that left.
func (r *fillRecord) current(n *FlowNet) bool {
	return !n.noResume && r.valid && !r.foreign && r.capVersion == n.t.CapacityVersion() && !math.IsInf(r.low, 1)
}

// resumable reports whether fill may replay the record for these flows:
// it is current and every flow was in it.
func (n *FlowNet) resumable(flows []int32) bool {
	if !n.rec.current(n) {
		return false
	}
	for _, i := range flows {
		if n.flows[i].recGen != n.rec.gen {
			return false
		}
	}
	return true
}

// unchanged reports whether a filling now would give every flow the rate
// it has: the record is current and each recorded flow still transmitting
// was fixed before the cut.
func (r *fillRecord) unchanged(n *FlowNet) bool {
	if !r.current(n) {
		return false
	}
	k := r.cut()
	for j := k; j < r.clear; j++ {
		if f := &n.flows[r.order[j]]; f.recGen == r.gen && f.active {
			return false
		}
	}
	r.clear = min(r.clear, k)
	return true
}

// CheckCapacity returns an error naming the first link whose flows' rates
// sum above its capacity (beyond rounding). Tests call it as an invariant.
func (n *FlowNet) CheckCapacity() error {
	for l := range n.links {
		sum := 0.0
		for _, e := range n.slow[l].entries {
			sum += n.flows[e.flow].rate
		}
		if i, ok := n.liveOwner(int32(l)); ok {
			n.materialize(&n.flows[i])
			sum += n.flows[i].rate
		}
		c := n.t.Capacity(l)
		if sum > c*(1+1e-9)+1e-6 {
			return fmt.Errorf("link %s carries %.6g B/s over capacity %.6g B/s", n.t.LinkName(l), sum, c)
		}
	}
	return nil
}

type shareItem struct {
	share float64
	link  int32
}

func (a shareItem) less(b shareItem) bool {
	if a.share != b.share {
		return a.share < b.share
	}
	return a.link < b.link
}

// shareHeap is a binary min-heap of link shares with one entry per link
// (pos: index + 1 by link, 0 when absent), so a link whose share changes
// moves in place rather than leaving a stale entry to pop.
type shareHeap struct {
	items []shareItem
	pos   []int32
}

// set puts link x.link in the heap with share x.share, or moves it there.
func (h *shareHeap) set(x shareItem) {
	if p := h.pos[x.link]; p > 0 {
		h.items[p-1] = x
		h.down(h.up(int(p - 1)))
		return
	}
	h.items = append(h.items, x)
	i := len(h.items) - 1
	h.pos[x.link] = int32(i + 1)
	h.up(i)
}

func (h *shareHeap) pop() shareItem {
	s := h.items
	top := s[0]
	last := len(s) - 1
	h.pos[top.link] = 0
	if last > 0 {
		s[0] = s[last]
		h.pos[s[0].link] = 1
	}
	h.items = s[:last]
	h.down(0)
	return top
}

// up moves item i towards the root while it is less than its parent and
// returns where it ends.
func (h *shareHeap) up(i int) int {
	s := h.items
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		h.swap(i, p)
		i = p
	}
	return i
}

func (h *shareHeap) down(i int) {
	s := h.items
	n := len(s)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s[r].less(s[l]) {
			m = r
		}
		if !s[m].less(s[i]) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *shareHeap) swap(i, j int) {
	s := h.items
	s[i], s[j] = s[j], s[i]
	h.pos[s[i].link] = int32(i + 1)
	h.pos[s[j].link] = int32(j + 1)
}
