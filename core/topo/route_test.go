package topo

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/stretchr/testify/require"
)

// shortestReference is the single-ended search the two-ended one replaces:
// breadth-first from src until dst is reached, then the same ECMP walk back.
func (t *Topology) shortestReference(src, dst int) []int32 {
	n := len(t.Devices)
	if t.down[src] || t.down[dst] {
		return nil
	}
	seen := make([]bool, n)
	dist := make([]int32, n)
	seen[src] = true
	queue := []int{src}
	found := false
	for head := 0; head < len(queue) && !found; head++ {
		u := queue[head]
		if u != src && !t.forwards(u) {
			continue
		}
		for _, l := range t.out[u] {
			if !t.Usable(int(l)) {
				continue
			}
			v := t.Links[l].Dst
			if seen[v] {
				continue
			}
			seen[v], dist[v] = true, dist[u]+1
			if v == dst {
				found = true
				break
			}
			queue = append(queue, v)
		}
	}
	if !found {
		return nil
	}
	path := make([]int32, dist[dst])
	v := dst
	for h := int(dist[dst]) - 1; h >= 0; h-- {
		var c []int32
		for _, l := range t.in[v] {
			u := t.Links[l].Src
			if seen[u] && int(dist[u]) == h && t.Usable(int(l)) && (u == src || t.forwards(u)) {
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

// The two-ended search returns exactly the reference's paths (ECMP picks
// included) on random graphs, with and without forwarding GPUs, failed
// links and failed devices, and on a DGX cluster with faults.
// Reproduce a failure with its seed: the message names it.
func TestShortestMatchesReference(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		var top *Topology
		var err error
		if seed%4 == 0 {
			top, err = Preset("dgx-a100", 2+int(seed%5))
			require.NoError(t, err)
		} else {
			gpus, switches := 2+r.IntN(20), r.IntN(8)
			var edges []Edge
			for i := 0; i < (gpus+switches)*2; i++ {
				a, b := r.IntN(gpus+switches), r.IntN(gpus+switches)
				if a != b {
					edges = append(edges, Edge{A: a, B: b, BandwidthBytesPerS: 1e9, Directed: r.IntN(4) == 0})
				}
			}
			top, err = EdgeList(gpus, switches, edges)
			require.NoError(t, err)
			top.GPUsForward = seed%3 != 0
		}
		for i := 0; i < len(top.Links)/10; i++ {
			top.SetHealth(r.IntN(len(top.Links)), 0)
		}
		if seed%5 == 0 {
			top.SetDeviceDown(r.IntN(len(top.Devices)), true)
		}
		n := len(top.Devices)
		for q := 0; q < 200; q++ {
			a, b := r.IntN(n), r.IntN(n)
			if a == b {
				continue
			}
			want := top.shortestReference(a, b)
			got := top.shortest(a, b)
			require.True(t, slices.Equal(want, got), "seed %d: %d -> %d: reference %v, two-ended %v", seed, a, b, want, got)
		}
	}
}
