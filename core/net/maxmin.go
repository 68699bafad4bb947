package net

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// fill computes max-min fair rates by progressive filling over one set of
// links and the flows on them: repeatedly take the link whose remaining
// capacity divided by its unfixed flows is smallest, fix those flows at that
// share, and take their rate off every link they cross. Each flow's result
// goes to flow.next. Ties between links break by link id (deterministic).
// It records the order of its fixes (fillRecord) for refill.
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
		n.rec.valid = false
		return
	}
	if v := n.t.CapacityVersion(); v != n.capVersion {
		// Capacities change only with faults: refreshed then, for all.
		for l := range n.slow {
			n.slow[l].capacity = n.t.Capacity(l)
		}
		n.capVersion = v
	}
	n.rec.begin(0)
	for _, l := range links {
		n.slow[l].reset()
		n.hist[l] = n.hist[l][:0]
	}
	n.progressive(links, flows)
}

// reset readies link state for a filling: all its capacity left, every
// flow on it unfixed.
func (ls *linkSlow) reset() {
	ls.rem = ls.capacity
	ls.unfixed = int32(len(ls.entries))
	ls.setPrivate()
}

// setPrivate: every entry is one flow's.
func (ls *linkSlow) setPrivate() {
	ls.private = ls.unfixed > 0
	for k := 1; k < len(ls.entries) && ls.private; k++ {
		ls.private = ls.entries[k].flow == ls.entries[0].flow
	}
}

// progressive fills flows, unfixed, over links whose rem and unfixed are
// set (the other flows on them fixed), and ends the record.
func (n *FlowNet) progressive(links, flows []int32) {
	h := &n.heap
	if len(h.pos) != len(n.slow) {
		h.pos = make([]int32, len(n.slow))
	}
	for _, i := range flows {
		n.flows[i].fixed = false
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
	n.rec.end(n)
}

// fix gives flow i the rate share, takes it off every link the flow
// crosses and moves those links in the heap (but popped, the link being
// popped), and records the fix and each link's capacity left after it.
func (n *FlowNet) fix(i int32, share float64, popped int32) {
	f := &n.flows[i]
	f.fixed = true
	f.next = share
	h := &n.heap
	seq := n.rec.add(i, share)
	for _, l2 := range f.path {
		m := &n.slow[l2]
		m.rem = max(0, m.rem-share)
		m.unfixed--
		n.hist[l2] = append(n.hist[l2], histEntry{seq, m.rem})
		if m.unfixed > 0 && l2 != popped && h.pos[l2] > 0 {
			h.set(shareItem{share: m.rem / float64(m.unfixed), link: l2})
		}
	}
}

// histEntry is one fix's subtraction from a link: the fix's sequence
// number and the capacity it left.
type histEntry struct {
	seq int64
	rem float64
}

// fillRecord is the order in which the filling of the flows now on the
// links fixed them, and the share each took. Progressive filling pops
// links in rising share; when flows have only left since (no flow joined,
// no capacity changed), a new filling of what remains repeats every pop
// before the first at a share of at least low, the lowest share a flow
// that left had, bit for bit: until then the departed flows were unfixed,
// so each link's remaining capacity went down by the same shares in the
// same order, and a link a departed flow crossed has fewer unfixed flows
// now, so a share no lower and no earlier pop (a pop below low never held
// a departed flow, which it would have fixed below its share). The flows
// those pops fixed keep their rates. So refill takes each link's capacity
// left after the last of those fixes from its history (n.hist) and fills
// only the flows fixed from the cut on, and when none of those is still
// sending nobody's rate changes. A direct all-to-all's flows end in
// hundreds of distinct instants, the fastest first, at the top of the
// levels: 256 GPUs' 65,280 flows settled 515 times, each a whole filling
// of the rest before this, none of which changed a rate.
type fillRecord struct {
	valid      bool
	gen        uint32
	capVersion uint64
	order      []int32
	share      []float64
	// seqs[k] is fix k's sequence number (rising; n.hist keys on it).
	seqs []int64
	// top[k] is the highest of share[:k+1] (shares rise but for rounding).
	top []float64
	// low is the lowest share of a recorded flow that left since (+Inf:
	// none); foreign is set when a flow not in the record left.
	low     float64
	foreign bool
	// clear: no recorded flow from this index on is still sending (low
	// only falls, so each refill looks only below it).
	clear int
	// kept is how many fixes, from the first, the filling in progress
	// took over from the record (begin).
	kept int
	seq  int64
}

// add records flow i's fix at share and returns the fix's sequence number.
func (r *fillRecord) add(i int32, share float64) int64 {
	r.order = append(r.order, i)
	r.share = append(r.share, share)
	r.seqs = append(r.seqs, r.seq)
	r.seq++
	return r.seq - 1
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

// begin starts a filling that keeps the record's first kept fixes (a
// whole filling keeps none and starts a new generation: the flows of the
// record's other components leave it).
func (r *fillRecord) begin(kept int) {
	r.order, r.share, r.seqs, r.top = r.order[:kept], r.share[:kept], r.seqs[:kept], r.top[:kept]
	r.kept = kept
	if kept == 0 {
		r.gen++
		if r.gen == 0 {
			r.gen = 1
		}
	}
}

// end makes the record the filling just done: its flows' places, the
// capacities it used, no departures yet.
func (r *fillRecord) end(n *FlowNet) {
	for k := r.kept; k < len(r.order); k++ {
		t := r.share[k]
		if k > 0 {
			t = max(t, r.top[k-1])
		}
		r.top = append(r.top, t)
	}
	for k := r.kept; k < len(r.order); k++ {
		f := &n.flows[r.order[k]]
		f.recGen, f.recPos = r.gen, int32(k)
	}
	r.valid, r.capVersion, r.low, r.foreign, r.clear = true, n.t.CapacityVersion(), math.Inf(1), false, len(r.order)
}

// refill recomputes the rates after recorded flows only left (fillRecord)
// and reports whether it could: it fills again only the flows the record
// fixed from the cut on, over their links as the fixes before the cut
// left them.
func (n *FlowNet) refill() bool {
	r := &n.rec
	if n.noRefill || !r.valid || r.foreign || r.capVersion != n.t.CapacityVersion() || math.IsInf(r.low, 1) {
		return false
	}
	c := r.cut()
	flows := n.compFlows[:0]
	for _, i := range r.order[c:max(c, r.clear)] {
		if f := &n.flows[i]; f.recGen == r.gen && f.active {
			flows = append(flows, i)
		}
	}
	n.compFlows = flows
	n.refills++
	if len(flows) == 0 {
		r.clear = min(r.clear, c) // nobody's rate changes
		return true
	}
	// A link's history is cut where the refill's fixes start. The fixes
	// of a flow that left are never below a cut that reaches its links:
	// it left at or above low, and a later cut is lower still, or falls
	// among fixes made after it, whose links' histories that refill cut.
	cutSeq := r.seqs[c]
	n.nextGen()
	links := n.compLinks[:0]
	for _, i := range flows {
		for _, l := range n.flows[i].path {
			if w := &n.walk[l]; w.stamp != n.gen {
				w.stamp = n.gen
				links = append(links, l)
				n.truncate(l, cutSeq)
				ls := &n.slow[l]
				ls.rem = ls.capacity
				if hs := n.hist[l]; len(hs) > 0 {
					ls.rem = hs[len(hs)-1].rem
				}
				ls.unfixed = int32(len(ls.entries) - len(n.hist[l]))
				ls.setPrivate()
			}
		}
	}
	n.compLinks = links
	if n.onRefill != nil {
		n.onRefill(links, flows)
	}
	r.begin(c)
	n.progressive(links, flows)
	n.reschedule(flows)
	return true
}

// truncate drops link l's history from sequence number seq on.
func (n *FlowNet) truncate(l int32, seq int64) {
	hs := n.hist[l]
	k, _ := slices.BinarySearchFunc(hs, seq, func(e histEntry, s int64) int { return cmp.Compare(e.seq, s) })
	n.hist[l] = hs[:k]
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
