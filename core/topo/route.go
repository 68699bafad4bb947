package topo

import "github.com/eidolon-sim/eidolon/core/rng"

// torusInfo remembers the shape of a torus or mesh built by Torus/Mesh:
// GPU device id = row-major index of its coordinates.
type torusInfo struct {
	dims []int
	wrap bool
}

// bfsScratch is reused across route computations; stamps avoid clearing.
type bfsScratch struct {
	stamp []uint32
	dist  []int32
	queue []int32
	gen   uint32
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
		return nil, &UnreachableError{Pairs: [][2]string{{t.Devices[src].Name, t.Devices[dst].Name}}, Total: 1}
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

// shortest finds a minimum-hop path by breadth-first search from src, stopping
// as soon as dst is reached, then walks back choosing among equal-cost
// predecessors by a hash of (src, dst, hop): deterministic ECMP.
func (t *Topology) shortest(src, dst int) []int32 {
	s := &t.scratch
	n := len(t.Devices)
	if len(s.stamp) < n {
		s.stamp = make([]uint32, n)
		s.dist = make([]int32, n)
	}
	s.gen++
	if s.gen == 0 { // wrapped: clear stamps once
		clear(s.stamp)
		s.gen = 1
	}
	if t.down[src] || t.down[dst] {
		return nil
	}
	s.stamp[src], s.dist[src] = s.gen, 0
	s.queue = append(s.queue[:0], int32(src))
	found := false
	for head := 0; head < len(s.queue) && !found; head++ {
		u := int(s.queue[head])
		if u != src && !t.forwards(u) {
			continue
		}
		for _, l := range t.out[u] {
			if !t.Usable(int(l)) {
				continue
			}
			v := t.Links[l].Dst
			if s.stamp[v] == s.gen {
				continue
			}
			s.stamp[v], s.dist[v] = s.gen, s.dist[u]+1
			if v == dst {
				found = true
				break
			}
			s.queue = append(s.queue, int32(v))
		}
	}
	if !found {
		return nil
	}
	hops := int(s.dist[dst])
	path := make([]int32, hops)
	v := dst
	for h := hops - 1; h >= 0; h-- {
		// Candidates: usable links into v from a forwarding device one hop closer.
		var cands [8]int32
		c := cands[:0]
		for _, l := range t.in[v] {
			u := t.Links[l].Src
			if s.stamp[u] == s.gen && int(s.dist[u]) == h && t.Usable(int(l)) && (u == src || t.forwards(u)) {
				c = append(c, l)
			}
		}
		pick := c[0]
		if len(c) > 1 {
			pick = c[rng.Mix(uint64(src), uint64(dst), uint64(h))%uint64(len(c))]
		}
		path[h] = pick
		v = t.Links[pick].Src
	}
	return path
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
