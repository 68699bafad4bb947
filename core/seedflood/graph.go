package seedflood

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// Graph is an undirected, unweighted graph of clients (nodes 0..N-1), as used
// by decentralized training: who may send a message to whom in one hop.
// Adjacency lists are sorted, so every traversal is deterministic.
type Graph struct {
	// Name describes how the graph was built, e.g. "ring(16)".
	Name string
	adj  [][]int
}

// NewGraph builds a graph of n nodes from an edge list. Self-loops and
// duplicate edges are rejected, as are endpoints outside [0, n).
func NewGraph(name string, n int, edges [][2]int) (*Graph, error) {
	if n < 1 {
		return nil, fmt.Errorf("graph needs at least 1 node, got %d", n)
	}
	g := &Graph{Name: name, adj: make([][]int, n)}
	seen := make(map[[2]int]bool, len(edges))
	for _, e := range edges {
		u, v := e[0], e[1]
		if u < 0 || v < 0 || u >= n || v >= n {
			return nil, fmt.Errorf("edge (%d, %d) outside nodes [0, %d)", u, v, n)
		}
		if u == v {
			return nil, fmt.Errorf("self-loop at node %d", u)
		}
		key := [2]int{min(u, v), max(u, v)}
		if seen[key] {
			return nil, fmt.Errorf("duplicate edge (%d, %d)", u, v)
		}
		seen[key] = true
		g.adj[u] = append(g.adj[u], v)
		g.adj[v] = append(g.adj[v], u)
	}
	for _, a := range g.adj {
		sort.Ints(a)
	}
	return g, nil
}

// NumNodes is the number of nodes.
func (g *Graph) NumNodes() int { return len(g.adj) }

// Neighbors lists the neighbors of node i in increasing order. The slice is
// shared: do not modify it.
func (g *Graph) Neighbors(i int) []int { return g.adj[i] }

// Degree is the number of neighbors of node i.
func (g *Graph) Degree(i int) int { return len(g.adj[i]) }

// NumEdges counts undirected edges.
func (g *Graph) NumEdges() int {
	s := 0
	for _, a := range g.adj {
		s += len(a)
	}
	return s / 2
}

// HopDistances returns the BFS hop count from src to every node, -1 where
// a node is unreachable.
func (g *Graph) HopDistances(src int) []int {
	dist := make([]int, len(g.adj))
	for i := range dist {
		dist[i] = -1
	}
	dist[src] = 0
	queue := []int{src}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range g.adj[u] {
			if dist[v] < 0 {
				dist[v] = dist[u] + 1
				queue = append(queue, v)
			}
		}
	}
	return dist
}

// Unreachable returns up to limit pairs (0, j) with no path, empty when the
// graph is connected (reachability from node 0 decides connectivity).
func (g *Graph) Unreachable(limit int) [][2]int {
	var out [][2]int
	for j, d := range g.HopDistances(0) {
		if d < 0 && len(out) < limit {
			out = append(out, [2]int{0, j})
		}
	}
	return out
}

// Diameter is the largest hop distance between two nodes, -1 if disconnected.
func (g *Graph) Diameter() int {
	diam := 0
	for s := range g.adj {
		for _, d := range g.HopDistances(s) {
			if d < 0 {
				return -1
			}
			diam = max(diam, d)
		}
	}
	return diam
}

// RingGraph connects node i to i±1 (mod n). n = 2 gives one edge.
func RingGraph(n int) (*Graph, error) {
	var edges [][2]int
	switch {
	case n == 2:
		edges = [][2]int{{0, 1}}
	case n > 2:
		for i := 0; i < n; i++ {
			edges = append(edges, [2]int{i, (i + 1) % n})
		}
	}
	return NewGraph(fmt.Sprintf("ring(%d)", n), n, edges)
}

// MeshGridGraph is a rows×cols grid without wrap-around; node (r, c) is r*cols+c.
func MeshGridGraph(rows, cols int) (*Graph, error) {
	return gridGraph(rows, cols, false)
}

// TorusGridGraph is a rows×cols grid with wrap-around in both dimensions.
// A dimension of size 1 or 2 adds no wrap edge (it would duplicate one).
func TorusGridGraph(rows, cols int) (*Graph, error) {
	return gridGraph(rows, cols, true)
}

func gridGraph(rows, cols int, wrap bool) (*Graph, error) {
	if rows < 1 || cols < 1 {
		return nil, fmt.Errorf("grid needs rows, cols >= 1, got %d×%d", rows, cols)
	}
	var edges [][2]int
	id := func(r, c int) int { return r*cols + c }
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			if c+1 < cols {
				edges = append(edges, [2]int{id(r, c), id(r, c+1)})
			} else if wrap && cols > 2 {
				edges = append(edges, [2]int{id(r, c), id(r, 0)})
			}
			if r+1 < rows {
				edges = append(edges, [2]int{id(r, c), id(r+1, c)})
			} else if wrap && rows > 2 {
				edges = append(edges, [2]int{id(r, c), id(0, c)})
			}
		}
	}
	kind := "mesh"
	if wrap {
		kind = "torus"
	}
	return NewGraph(fmt.Sprintf("%s(%dx%d)", kind, rows, cols), rows*cols, edges)
}

// CompleteGraph connects every pair of nodes.
func CompleteGraph(n int) (*Graph, error) {
	var edges [][2]int
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			edges = append(edges, [2]int{i, j})
		}
	}
	return NewGraph(fmt.Sprintf("complete(%d)", n), n, edges)
}

// ErdosRenyiGraph includes each pair independently with probability p.
// The result may be disconnected; check Unreachable.
func ErdosRenyiGraph(n int, p float64, r *rand.Rand) (*Graph, error) {
	if !(p >= 0 && p <= 1) {
		return nil, fmt.Errorf("edge probability must be in [0, 1], got %v", p)
	}
	var edges [][2]int
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if r.Float64() < p {
				edges = append(edges, [2]int{i, j})
			}
		}
	}
	return NewGraph(fmt.Sprintf("erdos_renyi(%d,%g)", n, p), n, edges)
}

// RandomRegularGraph draws a simple d-regular graph on n nodes by the
// pairing (configuration) model, redrawing until the pairing has no loops or
// multi-edges. n·d must be even and d < n.
func RandomRegularGraph(n, d int, r *rand.Rand) (*Graph, error) {
	if d < 0 || d >= n || n*d%2 != 0 {
		return nil, fmt.Errorf("random regular graph needs 0 <= degree < n and n·degree even, got n=%d degree=%d", n, d)
	}
	name := fmt.Sprintf("random_regular(%d,%d)", n, d)
	const attempts = 1000
	stubs := make([]int, 0, n*d)
	for a := 0; a < attempts; a++ {
		stubs = stubs[:0]
		for i := 0; i < n; i++ {
			for k := 0; k < d; k++ {
				stubs = append(stubs, i)
			}
		}
		r.Shuffle(len(stubs), func(i, j int) { stubs[i], stubs[j] = stubs[j], stubs[i] })
		edges := make([][2]int, 0, len(stubs)/2)
		for i := 0; i+1 < len(stubs); i += 2 {
			edges = append(edges, [2]int{stubs[i], stubs[i+1]})
		}
		if g, err := NewGraph(name, n, edges); err == nil {
			return g, nil
		}
	}
	return nil, fmt.Errorf("no simple %d-regular graph on %d nodes found in %d pairings", d, n, attempts)
}
