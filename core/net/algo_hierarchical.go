package net

import "fmt"

// The hierarchical all_reduce: ring reduce-scatter inside each node, ring
// all-reduce across nodes among ranks of equal local index (the GPUs'
// order on a node: the same rail), ring all-gather
// inside each node; one ring program of three segments (algo_ring.go).
// Needs equal ranks per node.
func buildHierarchical(c *Comms, col *Collective) (program, error) {
	n := len(col.Ranks)
	per := col.Bytes / float64(col.Chunks)
	groups := c.nodesByGPU(col.Ranks)
	// groups hold global ranks; convert to communicator indices.
	idx := map[int]int{}
	for i, rk := range col.Ranks {
		idx[rk] = i
	}
	L := len(groups[0])
	for _, g := range groups {
		if len(g) != L {
			return nil, fmt.Errorf("hierarchical all_reduce needs the same number of ranks on every node, got %d and %d", L, len(g))
		}
	}
	G := len(groups)
	intra := make([]int32, n)
	cross := make([]int32, n)
	for gi, g := range groups {
		for li, rk := range g {
			intra[idx[rk]] = int32(idx[g[(li+1)%L]])
			cross[idx[rk]] = int32(idx[groups[(gi+1)%G][li]])
		}
	}
	return &ringProg{chunks: col.Chunks, channels: [][]segment{{
		{L - 1, per / float64(L), intra},
		{2 * (G - 1), per / float64(L*G), cross},
		{L - 1, per / float64(L), intra},
	}}}, nil
}
