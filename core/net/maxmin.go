package net

import "fmt"

// fill computes max-min fair rates by progressive filling over one set of
// links and the flows on them: repeatedly take the link whose remaining
// capacity divided by its unfixed flows is smallest, fix those flows at that
// share, and take their rate off every link they cross. Each flow's result
// goes to flow.next. Ties between links break by link id (deterministic).
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
	h := &n.heap
	if len(h.pos) != len(n.slow) {
		h.pos = make([]int32, len(n.slow))
	}
	// A link crossed by one flow only (a private link) is its bottleneck
	// at most, never another's: rather than one heap entry per private
	// link, each flow enters its tightest private link (ties to the lower
	// id, as the heap orders them). A ring stream's path is mostly
	// private (its NICs, its GPUs' ports), so this keeps the heap to the
	// shared links.
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
		if ls.unfixed > 0 && !ls.private {
			h.set(shareItem{share: ls.rem / float64(ls.unfixed), link: l})
		}
	}
	for _, i := range flows {
		f := &n.flows[i]
		f.fixed = false
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
		share := it.share
		for _, e := range n.slow[it.link].entries {
			f := &n.flows[e.flow]
			if f.fixed {
				continue
			}
			f.fixed = true
			f.next = share
			for _, l2 := range f.path {
				m := &n.slow[l2]
				m.rem = max(0, m.rem-share)
				m.unfixed--
				if m.unfixed > 0 && l2 != it.link && h.pos[l2] > 0 {
					h.set(shareItem{share: m.rem / float64(m.unfixed), link: l2})
				}
			}
		}
	}
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
