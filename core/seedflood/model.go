package seedflood

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Model is a stack of fully connected layers: softmax regression is one
// layer, an MLP adds hidden ReLU layers. Parameters live in one flat float32
// vector; layer l is a row-major (In+1)×Out matrix whose last row is the bias,
// so every parameter belongs to exactly one weight matrix (which is what
// SubCGE's per-matrix subspaces need).
type Model struct {
	Layers []Shape
	offset []int
	// nominalIn is the first layer's input width in the model being
	// simulated when it is wider than Layers[0].In (0: the same). With data
	// that lie exactly in the span of the first Layers[0].In input axes
	// (dataset.exact_subspace), the weights of the other inputs never meet
	// the data, and the simulation keeps only the rows that do (see
	// WithNominalInput).
	nominalIn int
	// kept memoizes the first layer's kept SubCGE bases (rowBasis), which
	// hold keptFloats floats in all.
	kept       map[keptKey][]float32
	keptFloats int
}

// Shape is one layer's input and output width.
type Shape struct{ In, Out int }

// Rows is the matrix height including the bias row.
func (s Shape) Rows() int { return s.In + 1 }

// Size is the layer's parameter count.
func (s Shape) Size() int { return (s.In + 1) * s.Out }

// NewModel builds softmax regression (no hidden layers) or an MLP.
func NewModel(features, classes int, hidden []int) (*Model, error) {
	widths := append(append([]int{features}, hidden...), classes)
	m := &Model{}
	off := 0
	for i := 0; i+1 < len(widths); i++ {
		if widths[i] < 1 || widths[i+1] < 1 {
			return nil, fmt.Errorf("model: layer widths must be >= 1, got %v", widths)
		}
		s := Shape{In: widths[i], Out: widths[i+1]}
		m.Layers = append(m.Layers, s)
		m.offset = append(m.offset, off)
		off += s.Size()
	}
	m.offset = append(m.offset, off)
	return m, nil
}

// NumParams is the length of the parameter vector the simulation keeps.
func (m *Model) NumParams() int { return m.offset[len(m.offset)-1] }

// WithNominalInput makes the first layer stand for one of d inputs, of which
// the data occupy the first Layers[0].In (the rest are zero in every row).
// Every method here is then simulated exactly on the kept rows:
//   - a forward pass, a gradient or an average never reads or changes a
//     weight row whose input is zero (first-order and gossip updates of
//     those rows are zero, and no loss depends on them);
//   - a zeroth-order estimate depends only on the perturbation of the rows
//     the data meet, so a dense Gaussian z needs only those rows' entries
//     (each an independent N(0, 1), as in the d-input model);
//   - SubCGE's basis U of the first layer is built over all d + 1 rows
//     (draws, Gram–Schmidt and scale exactly as in the d-input model) and
//     its kept rows extracted, so estimates and updates are the d-input
//     model's, bit for bit (TestNominalInputMatchesPaddedModel);
//   - He initialization draws the kept rows with the fan-in d.
//
// Data in a k-dimensional subspace of d inputs are this case up to a
// rotation of the inputs, under which Gaussian perturbations and bases,
// gradients and averages are equivariant; Rademacher perturbations and
// ChocoSGD's coordinate-wise compression are not, and are refused.
// The weights of the other rows matter only for traffic: NominalParams.
func (m *Model) WithNominalInput(d int) error {
	if d < m.Layers[0].In {
		return fmt.Errorf("model: nominal input width %d is below the simulated %d", d, m.Layers[0].In)
	}
	m.nominalIn = d
	return nil
}

// Reduced reports whether the first layer stands for more inputs than it keeps.
func (m *Model) Reduced() bool { return m.nominalIn > m.Layers[0].In }

// nominalRows is layer l's height (inputs + bias) in the model simulated.
func (m *Model) nominalRows(l int) int {
	if l == 0 && m.Reduced() {
		return m.nominalIn + 1
	}
	return m.Layers[l].Rows()
}

// NominalParams is the parameter count of the model simulated: what every
// copy of it holds and what gossip sends.
func (m *Model) NominalParams() int {
	return m.NumParams() + (m.nominalRows(0)-m.Layers[0].Rows())*m.Layers[0].Out
}

// Matrix is layer l's slice of a parameter vector.
func (m *Model) Matrix(theta []float32, l int) []float32 { return theta[m.offset[l]:m.offset[l+1]] }

// Init draws weights N(0, 2/In) (He initialization, suited to ReLU) and
// zero biases; In is the nominal fan-in of the first layer.
func (m *Model) Init(r *rand.Rand) []float32 {
	theta := make([]float32, m.NumParams())
	for l, s := range m.Layers {
		w := m.Matrix(theta, l)
		scale := math.Sqrt(2 / float64(m.nominalRows(l)-1))
		for i := 0; i < s.In*s.Out; i++ {
			w[i] = float32(r.NormFloat64() * scale)
		}
	}
	return theta
}

// term is a low-rank addition Scale·U·M·Vᵀ to one weight matrix, with the
// bases stored transposed for contiguous access: Ut is r×Rows, Vt is r×Out
// (row-major), M is r×r.
type term struct {
	Ut, Vt, M []float32
	R         int
	Scale     float32
}

// workspace holds the buffers of one forward/backward pass, reused across
// calls (a run is single-threaded).
type workspace struct {
	acts  [][]float32 // acts[l] is the input of layer l (B×In), acts[L] the logits
	alt   [][]float32 // second activations for the other side of a two-point pair
	grads [][]float32
	p, q  []float32
}

func (m *Model) newWorkspace(batch int) *workspace {
	w := &workspace{}
	for l, s := range m.Layers {
		if l == 0 {
			w.acts = append(w.acts, make([]float32, batch*s.In))
			w.alt = append(w.alt, nil)
			w.grads = append(w.grads, nil)
		}
		w.acts = append(w.acts, make([]float32, batch*s.Out))
		w.alt = append(w.alt, make([]float32, batch*s.Out))
		w.grads = append(w.grads, make([]float32, batch*s.Out))
	}
	return w
}

// affine computes out = [in, 1]·W + Σ terms, for B rows; it returns the
// multiply-adds spent.
func affine(out, in []float32, B int, s Shape, W []float32, terms []term, ws *workspace) int64 {
	for i := 0; i < B; i++ {
		o := out[i*s.Out : (i+1)*s.Out]
		copy(o, W[s.In*s.Out:]) // bias row
		x := in[i*s.In : (i+1)*s.In]
		for k, xk := range x {
			if xk != 0 { // ReLU outputs are often exactly zero
				axpy(xk, W[k*s.Out:(k+1)*s.Out], o)
			}
		}
	}
	ops := int64(B) * int64(s.In) * int64(s.Out)
	for _, t := range terms {
		ops += addLowRank(out, in, B, s, t, ws)
	}
	return ops
}

// addLowRank adds Scale·([in,1]·U)·M·Vᵀ to out: B·(Rows·r + r² + r·Out)
// multiply-adds instead of B·Rows·Out for the dense matrix.
func addLowRank(out, in []float32, B int, s Shape, t term, ws *workspace) int64 {
	r := t.R
	if cap(ws.p) < r {
		ws.p, ws.q = make([]float32, r), make([]float32, r)
	}
	p, q := ws.p[:r], ws.q[:r]
	rows := s.Rows()
	for i := 0; i < B; i++ {
		x := in[i*s.In : (i+1)*s.In]
		for a := range p {
			u := t.Ut[a*rows : (a+1)*rows]
			p[a] = dot(u, x) + u[s.In] // the bias row meets the constant input 1
		}
		for b := range q {
			q[b] = 0
		}
		for a, pa := range p {
			axpy(pa, t.M[a*r:(a+1)*r], q)
		}
		o := out[i*s.Out : (i+1)*s.Out]
		for b, qb := range q {
			axpy(t.Scale*qb, t.Vt[b*s.Out:(b+1)*s.Out], o)
		}
	}
	return int64(B) * int64(rows*r+r*r+r*s.Out)
}

func relu(x []float32) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

// crossEntropy is the mean softmax cross-entropy of B rows of logits, and
// the number of rows whose arg-max is the label. With grad non-nil it also
// writes dLoss/dlogits.
func crossEntropy(logits []float32, labels []int, classes int, grad []float32) (loss float64, correct int) {
	B := len(labels)
	for i, y := range labels {
		z := logits[i*classes : (i+1)*classes]
		mx, arg := z[0], 0
		for j, v := range z {
			if v > mx {
				mx, arg = v, j
			}
		}
		if arg == y {
			correct++
		}
		sum := 0.0
		for _, v := range z {
			sum += math.Exp(float64(v - mx))
		}
		loss += math.Log(sum) - float64(z[y]-mx)
		if grad != nil {
			g := grad[i*classes : (i+1)*classes]
			for j, v := range z {
				g[j] = float32(math.Exp(float64(v-mx)) / sum / float64(B))
			}
			g[y] -= float32(1 / float64(B))
		}
	}
	return loss / float64(B), correct
}

// forward runs layers from `from` on, starting from acts[from] (or alt),
// with per-layer low-rank terms; it returns the loss, correct count and
// multiply-adds.
func (m *Model) forward(theta []float32, terms [][]term, acts [][]float32, from, B int, labels []int, ws *workspace) (float64, int, int64) {
	var ops int64
	L := len(m.Layers)
	for l := from; l < L; l++ {
		var tl []term
		if terms != nil {
			tl = terms[l]
		}
		ops += affine(acts[l+1], acts[l], B, m.Layers[l], m.Matrix(theta, l), tl, ws)
		if l < L-1 {
			relu(acts[l+1])
		}
	}
	loss, correct := crossEntropy(acts[L], labels, m.Layers[L-1].Out, nil)
	return loss, correct, ops
}

// loadBatch copies rows into the first layer's input buffer.
func loadBatch(ws *workspace, d *Dataset, rows []int) {
	for i, r := range rows {
		copy(ws.acts[0][i*d.Features:(i+1)*d.Features], d.Row(r))
	}
}

// Gradient writes the exact minibatch gradient of the cross-entropy into
// grad (hand-written backpropagation) and returns the loss and the
// multiply-adds spent (forward plus backward).
func (m *Model) gradient(theta, grad []float32, d *Dataset, rows []int, ws *workspace) (float64, int64) {
	B := len(rows)
	loadBatch(ws, d, rows)
	L := len(m.Layers)
	var ops int64
	for l := 0; l < L; l++ {
		ops += affine(ws.acts[l+1], ws.acts[l], B, m.Layers[l], m.Matrix(theta, l), nil, ws)
		if l < L-1 {
			relu(ws.acts[l+1])
		}
	}
	labels := batchLabels(d, rows)
	loss, _ := crossEntropy(ws.acts[L], labels, m.Layers[L-1].Out, ws.grads[L])
	for i := range grad {
		grad[i] = 0
	}
	for l := L - 1; l >= 0; l-- {
		s := m.Layers[l]
		gOut := ws.grads[l+1]
		in := ws.acts[l]
		gW := m.Matrix(grad, l)
		W := m.Matrix(theta, l)
		for i := 0; i < B; i++ {
			go_ := gOut[i*s.Out : (i+1)*s.Out]
			bias := gW[s.In*s.Out:]
			for j, g := range go_ {
				bias[j] += g
			}
			x := in[i*s.In : (i+1)*s.In]
			for k, xk := range x {
				if xk == 0 {
					continue
				}
				axpy(xk, go_, gW[k*s.Out:(k+1)*s.Out])
			}
		}
		ops += int64(B) * int64(s.In) * int64(s.Out)
		if l == 0 {
			break
		}
		gIn := ws.grads[l]
		for i := 0; i < B; i++ {
			go_ := gOut[i*s.Out : (i+1)*s.Out]
			for k := 0; k < s.In; k++ {
				if in[i*s.In+k] <= 0 { // ReLU'(x) = 0 where the activation was clipped
					gIn[i*s.In+k] = 0
					continue
				}
				gIn[i*s.In+k] = dot(W[k*s.Out:(k+1)*s.Out], go_)
			}
		}
		ops += int64(B) * int64(s.In) * int64(s.Out)
	}
	return loss, ops
}

func batchLabels(d *Dataset, rows []int) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = d.Y[r]
	}
	return out
}

// evaluate returns the mean loss and accuracy of theta (plus terms) on a
// whole data set, in chunks of the workspace's batch size.
func (m *Model) evaluate(theta []float32, terms [][]term, d *Dataset, ws *workspace, batch int, stop func() error) (loss, accuracy float64, err error) {
	rows := make([]int, 0, batch)
	correct := 0
	for start := 0; start < d.Samples(); start += batch {
		// A held-out set can be large (millions of rows, thousands of
		// classes): a canceled run stops between its batches.
		if stop != nil {
			if err := stop(); err != nil {
				return 0, 0, err
			}
		}
		rows = rows[:0]
		for i := start; i < min(start+batch, d.Samples()); i++ {
			rows = append(rows, i)
		}
		loadBatch(ws, d, rows)
		l, c, _ := m.forward(theta, terms, ws.acts, 0, len(rows), batchLabels(d, rows), ws)
		loss += l * float64(len(rows))
		correct += c
	}
	n := float64(d.Samples())
	return loss / n, float64(correct) / n, nil
}
