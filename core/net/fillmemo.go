package net

import (
	"cmp"
	"slices"
)

// Memoized progressive filling. A training step repeats the same traffic
// many times: with ZeRO-3 on 8,192 GPUs, every layer's tensor-parallel
// collectives (a ring stream per replica) start and end while the same
// data-parallel ring streams (thousands of links each) are in flight, so
// settle refills the same component of about 11,000 links some 16,000
// times per step, with about 500 distinct compositions.
//
// fill's rates are a function of the multiset of the component's flows'
// paths and of the links' capacities alone, not of the order in which the
// flows or links are listed: a pop takes the least (share, link) in the
// heap, a strict order; every flow fixed by one pop takes the same share
// off each link it crosses (so the order of those subtractions does not
// change a bit); and a flow's tightest private link is its own. Flows with
// the same path take the same rate (they cross the same links, so the same
// pop fixes both). So a component whose paths (by identity: a path slice
// is never written once a flow uses it) and capacities were filled before
// takes the rates computed then, bit for bit (TestFillMemoMatchesFill).
type fillMemo struct {
	// version is the topology's CapacityVersion the entries were filled at;
	// another version empties the memo.
	version uint64
	// epoch counts the memo's fresh starts (ringInfo.memoEpoch).
	epoch uint64
	// ids numbers the paths seen (holding them: a path's storage is not
	// reused while it is a key).
	ids map[pathRef]uint32
	// refs is ids inverted (by id): a flow's cached id (flow.memoID) is
	// its path's while refs[id] is still that path.
	refs   []pathRef
	byHash map[uint64][]*fillEntry
	stored int // path ids held by the entries
	hits   int // look-ups answered (tests)
	// byEnds caches a point-to-point path's id by its ends, before ids:
	// a flow slot is reused by other transfers, so its own cached id
	// (flow.memoID) rarely holds, while a pipeline's mirrored sends go
	// between the same devices again and again. It holds endsWays
	// destinations per source device (a pipeline rank sends forward and
	// back), the newest first. An entry counts only for its epoch and its
	// path's identity (ref), so a rerouted pair falls through to ids.
	byEnds []endsID
	// scratch
	order []memoFlow
	key   []uint32
}

// pathRef is a path slice's identity: its first element and length.
type pathRef struct {
	first *int32
	n     int
}

type endsID struct {
	dst   int32
	id    uint32
	ref   pathRef
	epoch uint64
}

// endsWays is how many destinations byEnds keeps per source.
const endsWays = 2

type memoFlow struct {
	id   uint32
	flow int32
}

// fillEntry is one filled component: its flows' path ids, sorted, and their
// rates in that order.
type fillEntry struct {
	key   []uint32
	rates []float64
}

const (
	// memoMinLinks: smaller components are filled directly (cheaper than
	// the look-up).
	memoMinLinks = 256
	// memoMaxStored bounds the memo (path ids held by entries, 12 bytes
	// each with the rates); past it the memo starts again empty.
	memoMaxStored = 1 << 20
)

// fillMemoized sets flow.next for the component's flows as fill does,
// from the memo when the same paths were filled before at the same
// capacities.
func (n *FlowNet) fillMemoized(links, flows []int32) {
	m := &n.memo
	if v := n.t.CapacityVersion(); m.ids == nil || v != m.version || m.stored > memoMaxStored || len(m.ids) > memoMaxStored {
		*m = fillMemo{version: v, epoch: m.epoch + 1, hits: m.hits, ids: map[pathRef]uint32{}, refs: m.refs[:0], byHash: map[uint64][]*fillEntry{}, order: m.order[:0], key: m.key[:0], byEnds: m.byEnds}
	}
	m.order = m.order[:0]
	for _, i := range flows {
		p := n.flows[i].path
		if len(p) == 0 {
			n.fill(links, flows) // not an ordinary flow's path (never the case)
			return
		}
		id := n.pathID(&n.flows[i], p)
		m.order = append(m.order, memoFlow{id, i})
	}
	slices.SortFunc(m.order, func(a, b memoFlow) int { return cmp.Compare(a.id, b.id) })
	// FNV-1a over the sorted ids; entries are compared in full.
	h := uint64(14695981039346656037)
	m.key = m.key[:0]
	for _, o := range m.order {
		m.key = append(m.key, o.id)
		h = (h ^ uint64(o.id)) * 1099511628211
	}
	for _, e := range m.byHash[h] {
		if slices.Equal(e.key, m.key) {
			for j, o := range m.order {
				n.flows[o.flow].next = e.rates[j]
			}
			m.hits++
			n.rec.valid = false // rates from the memo, no filling order
			return
		}
	}
	n.fill(links, flows)
	e := &fillEntry{key: slices.Clone(m.key), rates: make([]float64, len(m.order))}
	for j, o := range m.order {
		e.rates[j] = n.flows[o.flow].next
	}
	m.byHash[h] = append(m.byHash[h], e)
	m.stored += len(e.key)
}

// pathID is the memo's id of flow f's path p (non-empty) in the memo's
// epoch. A ring stream's path is its ring's (shared by its streams): its
// id is kept there. Any other flow keeps its path's id itself, checked
// against refs (its path may have been set anew since: a reroute, a lazy
// flow's route written); failing that, byEnds, then ids.
func (n *FlowNet) pathID(f *flow, p []int32) uint32 {
	m := &n.memo
	var id uint32
	r := pathRef{&p[0], len(p)}
	if ri := f.ring; ri != nil && ri.memoEpoch == m.epoch {
		id = ri.memoID
	} else if f.memoEpoch == m.epoch && m.refs[f.memoID] == r {
		id = f.memoID
	} else {
		var ends *endsID
		if m.byEnds == nil {
			m.byEnds = make([]endsID, endsWays*len(n.t.Devices))
		}
		if ri == nil && endsWays*int(f.src) < len(m.byEnds) {
			ways := m.byEnds[endsWays*int(f.src):][:endsWays]
			ends = &ways[0]
			for w := range ways {
				if e := &ways[w]; e.epoch == m.epoch && e.dst == f.dst && e.ref == r {
					ends = e
					break
				}
			}
			if ends == &ways[0] && ends.dst != f.dst {
				// A new destination: the oldest falls off.
				copy(ways[1:], ways[:endsWays-1])
				ways[0] = endsID{}
			}
		}
		if ends != nil && ends.epoch == m.epoch && ends.dst == f.dst && ends.ref == r {
			id = ends.id
		} else {
			var ok bool
			if id, ok = m.ids[r]; !ok {
				id = uint32(len(m.ids))
				m.ids[r] = id
				m.refs = append(m.refs, r)
			}
			if ends != nil {
				*ends = endsID{dst: f.dst, id: id, ref: r, epoch: m.epoch}
			}
		}
		if ri != nil && &ri.path[0] == &p[0] && len(ri.path) == len(p) {
			ri.memoEpoch, ri.memoID = m.epoch, id
		}
		f.memoEpoch, f.memoID = m.epoch, id
	}
	return id
}
