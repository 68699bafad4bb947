package topo

import (
	"slices"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// torusInfo remembers the shape of a torus or mesh built by Torus/Mesh:
// GPU device id = row-major index of its coordinates.
type torusInfo struct {
	dims []int
	wrap bool
}

// bfsScratch is reused across route computations; stamps avoid clearing.
// The s side labels distances from the source, the t side distances to
// the destination.
type bfsScratch struct {
	stampS, stampT []uint32
	distS, distT   []int32
	next, orderT   []int32
	orderS         []int32 // every device given a source distance
	cands          []int32
	gen            uint32
}

// Route returns the links of the path from device src to device dst, or an
// *UnreachableError. The returned slice is shared: do not modify it.
func (t *Topology) Route(src, dst int) ([]int32, error) {
	k := key(src, dst)
	if p, ok := t.routes[k]; ok {
		return p, nil
	}
	if src == dst {
		t.routes[k] = nil
		return nil, nil
	}
	var p []int32
	if t.torus != nil {
		p = t.dimensionOrder(src, dst)
	}
	if p == nil {
		p = t.shortest(src, dst)
	}
	if p == nil {
		return nil, t.unreachable([][2]int{{src, dst}}, 1)
	}
	t.routes[k] = p
	return p, nil
}

// forwards reports whether traffic may pass through device d.
func (t *Topology) forwards(d int) bool {
	switch t.Devices[d].Kind {
	case GPU:
		return t.GPUsForward
	case CPU:
		return false
	}
	return true
}

// shortest finds a minimum-hop path and walks it back from dst, choosing
// among equal-cost predecessors by a hash of (src, dst, hop): deterministic
// ECMP. The distances come from a breadth-first search grown from both ends
// one level at a time until the two balls meet, so a route costs the
// devices near its ends, not the whole fabric (a single-ended search from a
// GPU reaches every device of a two-tier fabric before a GPU in another
// leaf). It picks the same path as shortestReference.
func (t *Topology) shortest(src, dst int) []int32 {
	s := &t.scratch
	n := len(t.Devices)
	if len(s.stampS) < n {
		s.stampS, s.stampT = make([]uint32, n), make([]uint32, n)
		s.distS, s.distT = make([]int32, n), make([]int32, n)
	}
	s.gen++
	if s.gen == 0 { // wrapped: clear stamps once
		clear(s.stampS)
		clear(s.stampT)
		s.gen = 1
	}
	if t.down[src] || t.down[dst] {
		return nil
	}
	gen := s.gen
	// A device may sit inside a path if it forwards; src and dst always may.
	inner := func(u int) bool { return u == src || u == dst || t.forwards(u) }
	s.stampS[src], s.distS[src] = gen, 0
	s.stampT[dst], s.distT[dst] = gen, 0
	frontS := []int32{int32(src)}
	frontT := []int32{int32(dst)}
	s.orderT = append(s.orderT[:0], int32(dst)) // the t ball in breadth-first order
	s.orderS = append(s.orderS[:0], int32(src))
	radiusS := int32(0)
	// Grow the smaller ball by one full level until a device lies in both
	// balls and may carry the path; then d = ds + dt there (every path
	// shorter than the two radii would have put one of its devices in both
	// balls a level earlier).
	d := int32(-1)
	for d < 0 && len(frontS) > 0 && len(frontT) > 0 {
		fromS := len(frontS) <= len(frontT)
		front := frontS
		if !fromS {
			front = frontT
		}
		s.next = s.next[:0]
		for _, u32 := range front {
			u := int(u32)
			var links []int32
			if fromS {
				if u != src && !t.forwards(u) {
					continue
				}
				links = t.out[u]
			} else {
				if u != dst && !t.forwards(u) {
					continue
				}
				links = t.in[u]
			}
			for _, l := range links {
				if !t.Usable(int(l)) {
					continue
				}
				var v int
				if fromS {
					v = t.Links[l].Dst
					if s.stampS[v] == gen {
						continue
					}
					s.stampS[v], s.distS[v] = gen, s.distS[u]+1
					s.orderS = append(s.orderS, int32(v))
				} else {
					v = t.Links[l].Src
					if s.stampT[v] == gen {
						continue
					}
					s.stampT[v], s.distT[v] = gen, s.distT[u]+1
					s.orderT = append(s.orderT, int32(v))
				}
				s.next = append(s.next, int32(v))
				if s.stampS[v] == gen && s.stampT[v] == gen && inner(v) {
					if sum := s.distS[v] + s.distT[v]; d < 0 || sum < d {
						d = sum
					}
				}
			}
		}
		if fromS {
			frontS = append(frontS[:0:0], s.next...)
			radiusS++
		} else {
			frontT = append(frontT[:0:0], s.next...)
		}
	}
	if d < 0 {
		return nil
	}
	// Distances from src are exact inside the s ball. A device on a
	// shortest path outside it lies in the t ball nearer dst than
	// d − radiusS; taking those from the farthest to the nearest, the
	// shortest in-link from a device already placed gives the exact source
	// distance of every device on a shortest path and a larger one (or
	// none) to any other, so the walk back below sees the candidates a
	// single-ended search sees.
	for i := len(s.orderT) - 1; i >= 0; i-- {
		v := int(s.orderT[i])
		if s.stampS[v] == gen || s.distT[v] >= d-radiusS {
			continue
		}
		best := int32(-1)
		for _, l := range t.in[v] {
			u := t.Links[l].Src
			if s.stampS[u] == gen && (u == src || t.forwards(u)) && t.Usable(int(l)) && (best < 0 || s.distS[u]+1 < best) {
				best = s.distS[u] + 1
			}
		}
		if best >= 0 {
			s.stampS[v], s.distS[v] = gen, best
			s.orderS = append(s.orderS, int32(v))
		}
	}
	hops := int(d)
	path := make([]int32, hops)
	v := dst
	for h := hops - 1; h >= 0; h-- {
		c := s.predecessors(t, src, v, int32(h), gen)
		pick := c[0]
		if len(c) > 1 {
			pick = c[rng.Mix(uint64(src), uint64(dst), uint64(h))%uint64(len(c))]
		}
		path[h] = pick
		v = t.Links[pick].Src
	}
	return path
}

// predecessors are the usable links into v from a device that may carry
// the path at source distance h, in link order (t.in's). A spine's
// in-links are every leaf's, so where the devices placed from the source
// are fewer than v's in-links, their out-links are searched instead.
func (s *bfsScratch) predecessors(t *Topology, src, v int, h int32, gen uint32) []int32 {
	c := s.cands[:0]
	carries := func(u int, l int32) bool {
		return s.stampS[u] == gen && s.distS[u] == h && t.Usable(int(l)) && (u == src || t.forwards(u))
	}
	if len(t.in[v]) <= len(s.orderS) {
		for _, l := range t.in[v] {
			if carries(t.Links[l].Src, l) {
				c = append(c, l)
			}
		}
	} else {
		for _, u32 := range s.orderS {
			u := int(u32)
			if s.distS[u] != h {
				continue
			}
			for _, l := range t.out[u] {
				if t.Links[l].Dst == v && carries(u, l) {
					c = append(c, l)
				}
			}
		}
		slices.Sort(c)
	}
	s.cands = c
	return c
}

// dimensionOrder routes on a torus or mesh one dimension at a time, in the
// shorter direction (ties go up). It returns nil when a link on that path is
// unusable, so the caller falls back to shortest paths around the failure.
func (t *Topology) dimensionOrder(src, dst int) []int32 {
	ti := t.torus
	nd := len(ti.dims)
	if src >= gridSize(ti.dims) || dst >= gridSize(ti.dims) {
		return nil
	}
	cur := coords(src, ti.dims)
	want := coords(dst, ti.dims)
	var path []int32
	at := src
	for d := 0; d < nd; d++ {
		n := ti.dims[d]
		for cur[d] != want[d] {
			up := (want[d] - cur[d] + n) % n
			step := 1
			if ti.wrap {
				if up > n-up {
					step = -1
				}
			} else if want[d] < cur[d] {
				step = -1
			}
			cur[d] = (cur[d] + step + n) % n
			next := index(cur, ti.dims)
			l, ok := t.pair[key(at, next)]
			if !ok || !t.Usable(int(l)) {
				return nil
			}
			path = append(path, l)
			at = next
		}
	}
	return path
}

func gridSize(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

func coords(i int, dims []int) []int {
	c := make([]int, len(dims))
	for d := len(dims) - 1; d >= 0; d-- {
		c[d] = i % dims[d]
		i /= dims[d]
	}
	return c
}

func index(c []int, dims []int) int {
	i := 0
	for d := range dims {
		i = i*dims[d] + c[d]
	}
	return i
}
