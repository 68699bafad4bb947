package seedflood

import (
	"math"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// SubCGE (SeedFlood, arXiv 2602.18181) restricts every perturbation of a
// weight matrix W (Rows×Out) to a shared low-rank subspace: Z = U·C·Vᵀ with
// U (Rows×r) and V (Out×r) orthonormal bases that every client regenerates
// from (seed, epoch), refreshed every K steps, and C an r×r Gaussian matrix
// drawn from the message's seed. A received update then only adds g·C to an
// r×r accumulator S (r² multiply-adds per matrix instead of Rows·Out), and
// the accumulator is projected into W once, W += U·S·Vᵀ, when every message
// of the epoch has arrived. Until then forward passes add the pending
// ([x,1]·U)·S·Vᵀ terms, which costs O((Rows+Out)·r) per row, not O(Rows·Out).

// basis is one epoch's subspace for every layer.
type basis struct {
	Ut, Vt [][]float32 // per layer: r×Rows and r×Out, row-major
	R      []int
}

// layerRank is the subspace rank of layer l: the requested rank, capped by
// the smaller side of the matrix simulated (nominal rows).
func (m *Model) layerRank(l, rank int) int { return min(rank, m.nominalRows(l), m.Layers[l].Out) }

// newBasis draws Gaussian matrices from (seed, epoch, layer) and
// orthogonalizes their columns (modified Gram–Schmidt in float64), scaled to
// norm sqrt(Rows/r) for U and sqrt(Out/r) for V. Then every entry of
// Z = U·C·Vᵀ has unit variance, as a dense Gaussian z does, so the same
// learning rate and ε mean the same step size with or without SubCGE.
// It returns the basis and the multiply-adds spent.
func newBasis(m *Model, seed uint64, epoch, rank int) (*basis, int64) {
	b := &basis{}
	var ops int64
	for l, s := range m.Layers {
		r := m.layerRank(l, rank)
		u, ou := m.rowBasis(rng.Mix(seed, tagBasis, uint64(epoch), uint64(l), 0), l, r)
		v, ov := orthogonal(rng.Mix(seed, tagBasis, uint64(epoch), uint64(l), 1), s.Out, r)
		b.Ut, b.Vt, b.R = append(b.Ut, u), append(b.Vt, v), append(b.R, r)
		ops += ou + ov
	}
	return b, ops
}

// rowBasis is layer l's basis U (r×Rows, the kept rows) and the
// multiply-adds a client spends building it over the nominal rows. A kept
// first layer's U is memoized on the model: built over all nominal rows
// (a million for a wide model) it is the costly part, and every method of a
// run draws the same bases (keys depend on seed, epoch and layer only).
func (m *Model) rowBasis(key uint64, l, r int) ([]float32, int64) {
	rows := m.nominalRows(l)
	if rows == m.Layers[l].Rows() {
		return orthogonal(key, rows, r)
	}
	ops := int64(rows) * int64(r) * int64(r)
	if u, ok := m.kept[keptKey{key, r}]; ok {
		return u, ops
	}
	full, _ := orthogonal(key, rows, r)
	u := keptRows(full, rows, m.Layers[l], r)
	if m.kept == nil {
		m.kept = map[keptKey][]float32{}
	}
	if m.keptFloats+len(u) <= maxKeptFloats {
		m.kept[keptKey{key, r}] = u
		m.keptFloats += len(u)
	}
	return u, ops
}

// keptKey names a memoized first-layer basis: its draw's key and rank.
type keptKey struct {
	key uint64
	r   int
}

// maxKeptFloats bounds the memo (each basis is r·(k+1) floats) to 64 MB:
// 2^24 floats, 466,000 epochs' bases of rank 4 over 8 latent dimensions.
// Bases past it are rebuilt by every method that needs them.
const maxKeptFloats = 1 << 24

// keptRows extracts, from an r×rows basis of the nominal matrix, the rows the
// simulation keeps (Model.WithNominalInput): the first s.In inputs and the
// bias, which is the nominal matrix's last row.
func keptRows(u []float32, rows int, s Shape, r int) []float32 {
	out := make([]float32, r*s.Rows())
	for a := 0; a < r; a++ {
		copy(out[a*s.Rows():a*s.Rows()+s.In], u[a*rows:a*rows+s.In])
		out[a*s.Rows()+s.In] = u[a*rows+rows-1]
	}
	return out
}

// orthogonal returns r orthogonal vectors of length rows, each of norm
// sqrt(rows/r), as an r×rows row-major matrix, and the multiply-adds spent
// (rows·r², as rowBasis charges a memoized one).
func orthogonal(key uint64, rows, r int) ([]float32, int64) {
	colNorm := math.Sqrt(float64(rows) / float64(r))
	g := make([]float32, rows*r)
	newNoise(key).fill(g, false)
	out := make([]float32, rows*r) // not g: later columns still read their draws from it
	cols := make([][]float64, r)
	// Modified Gram–Schmidt, one pass over a column per earlier column: the
	// pass that subtracts column b's projection also sums the dot product
	// with column b+1 (or the squared norm after the last), entry by entry
	// in row order, so every sum adds the same terms in the same order as
	// separate passes would.
	for a := range cols {
		ca := make([]float64, rows)
		next := 0.0 // dot with column 0, or the squared norm of column 0
		for i := range ca {
			ca[i] = float64(g[i*r+a])
			if a == 0 {
				next += ca[i] * ca[i]
			} else {
				next += ca[i] * cols[0][i]
			}
		}
		for b := 0; b < a; b++ {
			dot, cb := next, cols[b]
			next = 0
			if b+1 < a {
				cn := cols[b+1]
				for i := range ca {
					ca[i] -= dot * cb[i]
					next += ca[i] * cn[i]
				}
			} else {
				for i := range ca {
					ca[i] -= dot * cb[i]
					next += ca[i] * ca[i]
				}
			}
		}
		norm := math.Sqrt(next)
		for i := range ca {
			ca[i] /= norm
			out[a*rows+i] = float32(ca[i] * colNorm)
		}
		cols[a] = ca
	}
	return out, int64(rows) * int64(r) * int64(r) // ≈ 2·rows·r²/2 for the projections
}

// project adds U·S·Vᵀ to one weight matrix and returns the multiply-adds:
// Rows·r² for T = U·S, then Rows·Out·r for T·Vᵀ.
func project(W []float32, s Shape, ut, vt, S []float32, r int, tmp []float32) int64 {
	rows := s.Rows()
	t := tmp[:r]
	for i := 0; i < rows; i++ {
		for b := range t {
			t[b] = 0
		}
		for a := 0; a < r; a++ {
			axpy(ut[a*rows+i], S[a*r:(a+1)*r], t)
		}
		w := W[i*s.Out : (i+1)*s.Out]
		for b, tb := range t {
			axpy(tb, vt[b*s.Out:(b+1)*s.Out], w)
		}
	}
	return int64(rows) * int64(r) * int64(r+s.Out)
}

// basisCache holds the bases still needed by some client. Every real client
// regenerates each basis itself; the simulation builds it once and charges
// its cost to every client that uses it (see Counters).
type basisCache struct {
	m    *Model
	seed uint64
	rank int
	byEp map[int]*basis
	ops  int64 // multiply-adds to build one epoch's basis
}

func (c *basisCache) get(epoch int) *basis {
	if b, ok := c.byEp[epoch]; ok {
		return b
	}
	b, ops := newBasis(c.m, c.seed, epoch, c.rank)
	c.byEp[epoch] = b
	c.ops = ops
	return b
}

// evictBefore drops bases of epochs every client has settled.
func (c *basisCache) evictBefore(epoch int) {
	for e := range c.byEp {
		if e < epoch {
			delete(c.byEp, e)
		}
	}
}
