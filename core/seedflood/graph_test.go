package seedflood

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGraphBuilders(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name         string
		build        func() (*Graph, error)
		nodes, edges int
		diameter     int
		degree       int // -1 when degrees differ
	}{
		// Ring of n: n edges, diameter ⌊n/2⌋, degree 2.
		{"ring8", func() (*Graph, error) { return RingGraph(8) }, 8, 8, 4, 2},
		{"ring7", func() (*Graph, error) { return RingGraph(7) }, 7, 7, 3, 2},
		// Mesh r×c: r(c−1) + c(r−1) edges, diameter (r−1)+(c−1).
		{"mesh3x4", func() (*Graph, error) { return MeshGridGraph(3, 4) }, 12, 17, 5, -1},
		// Torus r×c (r, c > 2): 2rc edges, diameter ⌊r/2⌋+⌊c/2⌋, degree 4.
		{"torus4x5", func() (*Graph, error) { return TorusGridGraph(4, 5) }, 20, 40, 4, 4},
		// Complete K_n: n(n−1)/2 edges, diameter 1.
		{"complete6", func() (*Graph, error) { return CompleteGraph(6) }, 6, 15, 1, 5},
		// d-regular on n nodes: nd/2 edges.
		{"regular", func() (*Graph, error) { return RandomRegularGraph(20, 4, r) }, 20, 40, -1, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := c.build()
			require.NoError(t, err)
			require.Equal(t, c.nodes, g.NumNodes())
			require.Equal(t, c.edges, g.NumEdges())
			if c.diameter >= 0 {
				require.Equal(t, c.diameter, g.Diameter())
			}
			for i := 0; i < g.NumNodes(); i++ {
				if c.degree >= 0 {
					require.Equal(t, c.degree, g.Degree(i))
				}
				for _, j := range g.Neighbors(i) {
					require.Contains(t, g.Neighbors(j), i, "symmetric")
					require.NotEqual(t, i, j)
				}
			}
		})
	}
}

func TestGraphHopDistances(t *testing.T) {
	g, err := MeshGridGraph(3, 3)
	require.NoError(t, err)
	// From the corner (0,0) the hop distance to (r,c) is r+c.
	require.Equal(t, []int{0, 1, 2, 1, 2, 3, 2, 3, 4}, g.HopDistances(0))
	er, err := ErdosRenyiGraph(10, 0, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	require.Len(t, er.Unreachable(100), 9)
	require.Equal(t, -1, er.Diameter())
}

func TestGraphRejectsBadInput(t *testing.T) {
	_, err := NewGraph("x", 3, [][2]int{{0, 0}})
	require.Error(t, err)
	_, err = NewGraph("x", 3, [][2]int{{0, 1}, {1, 0}})
	require.Error(t, err)
	_, err = RandomRegularGraph(5, 3, rand.New(rand.NewPCG(1, 1)))
	require.Error(t, err, "n·d odd")
	_, err = ErdosRenyiGraph(5, 1.5, rand.New(rand.NewPCG(1, 1)))
	require.Error(t, err)
}
