package net

import (
	"math"
	"slices"
)

// The tree family: NCCL's double binary tree for all_reduce, and one
// binary tree at the root for broadcast and reduce; both pipelined in
// chunks. The tree program also runs chains (buildChain) and send_recv.

// buildDoubleTree: two in-order binary trees, the second shifted by one
// rank, each reducing then broadcasting half the data.
func buildDoubleTree(_ *Comms, col *Collective) (program, error) {
	n := len(col.Ranks)
	full, last := col.pieces()
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	shifted := make([]int, n)
	for i := range shifted {
		shifted[i] = (i + 1) % n
	}
	trees := []tree{inorder(order, n), inorder(shifted, n)}
	if n == 1 {
		trees = trees[:1]
	}
	k := float64(len(trees))
	return &treeProg{chunks: col.Chunks, bytes: full / k, last: last / k, trees: trees, up: true, down: true}, nil
}

// buildRootedTree: broadcast down (reduce up) a binary heap rooted at the
// root, in communicator order from it.
func buildRootedTree(_ *Comms, col *Collective) (program, error) {
	order := make([]int, len(col.Ranks))
	for i := range order {
		order[i] = i
	}
	return rootedTrees(col, heapTree, [][]int{order}), nil
}

// rootedTrees is the broadcast or reduce program over the trees shape
// builds from each order (communicator indices) turned to start at the
// root, the data split evenly among them.
func rootedTrees(col *Collective, shape func(order []int, n int) tree, orders [][]int) program {
	n := len(col.Ranks)
	full, last := col.pieces()
	k := float64(len(orders))
	p := &treeProg{chunks: col.Chunks, bytes: full / k, last: last / k, up: col.Op == Reduce, down: col.Op == Broadcast}
	for _, order := range orders {
		at := slices.Index(order, col.Root)
		p.trees = append(p.trees, shape(append(order[at:], order[:at]...), n))
	}
	return p
}

// PipelineChunks is the default pipelining of trees and chains (the piece
// count, and the size of every piece but the last): pieces of one
// MiB, the last carrying what remains, as NCCL's loops cut a channel's data
// (realChunkSize = min(chunkSize, what is left), src/device/broadcast.h);
// above 64 MiB, 64 equal pieces. A fixed piece keeps the time growing with
// the payload: equal pieces of ⌊MiB count⌋ made 1.5 MiB one unpipelined
// piece, slower than 2 MiB in two.
func PipelineChunks(bytes float64) (int, float64) {
	const mib, most = 1 << 20, 64
	if bytes > most*mib {
		return most, 0
	}
	if n := int(math.Ceil(bytes / mib)); n > 1 {
		return n, mib
	}
	return 1, 0
}

// tree is a rooted tree over communicator indices.
type tree struct {
	root     int
	parent   []int32 // -1 at the root
	children [][]int32
}

func newTree(n int) tree {
	t := tree{parent: make([]int32, n), children: make([][]int32, n)}
	for i := range t.parent {
		t.parent[i] = -1
	}
	return t
}

func (t *tree) link(parent, child int) {
	t.parent[child] = int32(parent)
	t.children[parent] = append(t.children[parent], int32(child))
}

// chain: order[0] -> order[1] -> ... (a pipelined ring broadcast).
func chain(order []int, n int) tree {
	t := newTree(n)
	t.root = order[0]
	for i := 1; i < len(order); i++ {
		t.link(order[i-1], order[i])
	}
	return t
}

// heapTree: order[0] is the root, order[i]'s parent is order[(i-1)/2].
func heapTree(order []int, n int) tree {
	t := newTree(n)
	t.root = order[0]
	for i := 1; i < len(order); i++ {
		t.link(order[(i-1)/2], order[i])
	}
	return t
}

// inorder: a balanced binary tree whose in-order traversal is `order`
// (NCCL's double binary tree builds two such trees).
func inorder(order []int, n int) tree {
	t := newTree(n)
	var build func(lo, hi int) int
	build = func(lo, hi int) int {
		if lo >= hi {
			return -1
		}
		mid := (lo + hi) / 2
		for _, c := range []int{build(lo, mid), build(mid+1, hi)} {
			if c >= 0 {
				t.link(order[mid], c)
			}
		}
		return order[mid]
	}
	t.root = build(0, len(order))
	return t
}

// treeProg: reduce up the tree (a node sends to its parent after hearing
// from all children), then broadcast down (a node forwards what its parent
// sent to each child). Instances are trees × chunks.
type treeProg struct {
	chunks   int
	bytes    float64 // per tree per chunk
	last     float64 // per tree in the last chunk
	trees    []tree
	up, down bool
}

func (p *treeProg) instances() int      { return len(p.trees) * p.chunks }
func (p *treeProg) groupSize() int      { return p.chunks }
func (p *treeProg) pipelined() bool     { return true }
func (p *treeProg) tree(inst int) *tree { return &p.trees[inst/p.chunks] }
func (p *treeProg) ops(int, int) int {
	n := 0
	if p.up {
		n++
	}
	if p.down {
		n++
	}
	return n
}

// phase maps op k to "up" (0) or "down" (1).
func (p *treeProg) phase(k int) int {
	if p.up && k == 0 {
		return 0
	}
	return 1
}

func (p *treeProg) wait(inst, rank, k int) int {
	t := p.tree(inst)
	if p.phase(k) == 0 {
		return len(t.children[rank])
	}
	if rank == t.root {
		return 0
	}
	return 1
}

func (p *treeProg) sends(inst, rank, k int, buf []msg) []msg {
	t := p.tree(inst)
	bytes := p.bytes
	if inst%p.chunks == p.chunks-1 {
		bytes = p.last
	}
	if p.phase(k) == 0 {
		if par := t.parent[rank]; par >= 0 {
			buf = append(buf, msg{to: par, op: 0, bytes: bytes})
		}
		return buf
	}
	down := int32(0)
	if p.up {
		down = 1
	}
	for _, ch := range t.children[rank] {
		buf = append(buf, msg{to: ch, op: down, bytes: bytes})
	}
	return buf
}
