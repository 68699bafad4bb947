package seedflood

import (
	"github.com/eidolon-sim/eidolon/core/rng"
)

// Stream tags for rng.Mix: each counter-based draw is keyed by
// (seed, tag, indices...), so no stream shifts another.
const (
	tagPerturb uint64 = iota + 1
	tagBatch
	tagBasis
	tagQuantize
)

// PerturbKey is the seed of perturbation k of client origin at step: what a
// SeedFlood message carries, and all any client needs to rebuild z.
func PerturbKey(seed uint64, origin, step, k int) uint64 {
	return rng.Mix(seed, tagPerturb, uint64(origin), uint64(step), uint64(k))
}

// batchRows draws a minibatch (with replacement) from a shard, keyed by
// (seed, client, step) so every method sees the same batches.
func batchRows(seed uint64, client, step int, shard []int, batch int, dst []int) []int {
	src := counterSource{key: rng.Mix(seed, tagBatch, uint64(client), uint64(step))}
	dst = dst[:0]
	for i := 0; i < batch; i++ {
		dst = append(dst, shard[src.Uint64()%uint64(len(shard))])
	}
	return dst
}

// Counters are operation counts of one method's run (the core has no wall
// clock): multiply-adds and random draws, summed over all clients.
type Counters struct {
	// ForwardMadds: multiply-adds in forward (and backward) passes.
	ForwardMadds int64
	// ApplyMadds: multiply-adds spent applying updates to parameters:
	// z regeneration excluded (see ApplyDraws), projections and basis
	// construction included, gossip averaging included.
	ApplyMadds int64
	// ApplyDraws: normal or Rademacher numbers generated to rebuild received
	// perturbations.
	ApplyDraws int64
	// MessagesApplied: (seed, scalar) updates applied, over all clients.
	MessagesApplied int64
	// Projections: subspace projections W += U·S·Vᵀ (per matrix).
	Projections int64
}

// ZOConfig is the zeroth-order estimator shared by SeedFlood, DZSGD and
// centralized MeZO.
type ZOConfig struct {
	Seed    uint64
	Epsilon float32
	// Rank > 0 selects SubCGE with this subspace rank per weight matrix,
	// 0 dense perturbations over every parameter.
	Rank int
	// RefreshEvery is K: the subspace bases change every K steps.
	RefreshEvery int
	Rademacher   bool
}

// zo evaluates two-point estimates and applies (seed, scalar) updates.
type zo struct {
	m       *Model
	cfg     ZOConfig
	bases   *basisCache
	ws      *workspace
	cnt     *Counters
	store   *versionStore // SubCGE weights shared by clients; nil: each client owns theta
	private bool          // never share: every client projects into its own theta
	// dense mode scratch
	z, side []float32
	// subspace mode scratch: C per layer, terms per layer for ± sides
	coef        [][]float32
	plus, minus [][]term
	delta, tmp  []float32
	labels      []int
}

// zoClient is one client's parameters: dense weights plus, under SubCGE,
// accumulators of epochs whose messages are still arriving.
type zoClient struct {
	theta   []float32 // read-only when shared through a versionStore
	pending []pendingEpoch
	applied int64 // messages applied so far
	settled int   // last epoch projected into theta
}

type pendingEpoch struct {
	epoch int
	S     [][]float32 // per layer r×r, already scaled by −lr
}

func newZO(m *Model, cfg ZOConfig, batch int, cnt *Counters) *zo {
	z := &zo{m: m, cfg: cfg, ws: m.newWorkspace(batch), cnt: cnt}
	if cfg.Rank > 0 {
		z.bases = &basisCache{m: m, seed: cfg.Seed, rank: cfg.Rank, byEp: map[int]*basis{}}
		for l := range m.Layers {
			r := m.layerRank(l, cfg.Rank)
			z.coef = append(z.coef, make([]float32, r*r))
		}
		z.plus = make([][]term, len(m.Layers))
		z.minus = make([][]term, len(m.Layers))
		z.delta = make([]float32, batch*m.Layers[0].Out)
		z.tmp = make([]float32, cfg.Rank)
	} else {
		z.z = make([]float32, m.NumParams())
		z.side = make([]float32, m.NumParams())
	}
	return z
}

// newClient starts a client at init. Under SubCGE the first client creates
// the shared version store and every client starts on its initial version.
func (z *zo) newClient(init []float32) *zoClient {
	if z.cfg.Rank == 0 || z.private {
		return &zoClient{theta: append([]float32(nil), init...), settled: -1}
	}
	if z.store == nil {
		z.store = newVersionStore(init)
	}
	return &zoClient{theta: z.store.versions[0].theta, settled: -1}
}

func (z *zo) epoch(step int) int { return step / z.cfg.RefreshEvery }

// fillCoef regenerates the r×r coefficients of every layer from a key.
func (z *zo) fillCoef(key uint64) {
	n := newNoise(key)
	for _, c := range z.coef {
		n.fill(c, z.cfg.Rademacher)
	}
}

func (z *zo) coefDraws() int64 {
	s := 0
	for _, c := range z.coef {
		s += len(c)
	}
	return int64(s)
}

// Estimate returns g = (L(θ+εz) − L(θ−εz)) / 2ε on the minibatch rows, with
// z rebuilt from key (the two-point estimator of MeZO, arXiv 2305.17333).
// The scalar is rounded to float32 because that is what a message carries.
func (z *zo) estimate(c *zoClient, key uint64, step int, d *Dataset, rows []int) float32 {
	B := len(rows)
	z.labels = z.labels[:0]
	for _, r := range rows {
		z.labels = append(z.labels, d.Y[r])
	}
	loadBatch(z.ws, d, rows)
	eps := z.cfg.Epsilon
	var lp, lm float64
	if z.cfg.Rank == 0 {
		newNoise(key).fill(z.z, z.cfg.Rademacher)
		for i, t := range c.theta {
			z.side[i] = t + eps*z.z[i]
		}
		var ops int64
		lp, _, ops = z.m.forward(z.side, nil, z.ws.acts, 0, B, z.labels, z.ws)
		z.cnt.ForwardMadds += ops
		for i, t := range c.theta {
			z.side[i] = t - eps*z.z[i]
		}
		lm, _, ops = z.m.forward(z.side, nil, z.ws.acts, 0, B, z.labels, z.ws)
		z.cnt.ForwardMadds += ops
	} else {
		z.fillCoef(key)
		cur := z.bases.get(z.epoch(step))
		for l := range z.m.Layers {
			z.plus[l] = z.pendingTerms(c, l, z.plus[l][:0])
		}
		// Layer 0 is shared by both sides: [x,1]·W + pending, then ± ε·([x,1]·U)·C·Vᵀ.
		s0 := z.m.Layers[0]
		ops := affine(z.ws.acts[1], z.ws.acts[0], B, s0, z.m.Matrix(c.theta, 0), z.plus[0], z.ws)
		delta := z.delta[:B*s0.Out]
		clear(delta)
		ops += addLowRank(delta, z.ws.acts[0], B, s0, term{Ut: cur.Ut[0], Vt: cur.Vt[0], M: z.coef[0], R: cur.R[0], Scale: 1}, z.ws)
		base, alt := z.ws.acts[1][:B*s0.Out], z.ws.alt[1][:B*s0.Out]
		for i, dv := range delta {
			alt[i] = base[i] - eps*dv
			base[i] += eps * dv
		}
		if len(z.m.Layers) > 1 {
			relu(base)
			relu(alt)
		}
		for l := 1; l < len(z.m.Layers); l++ {
			z.minus[l] = append(z.minus[l][:0], z.plus[l]...)
			z.plus[l] = append(z.plus[l], term{Ut: cur.Ut[l], Vt: cur.Vt[l], M: z.coef[l], R: cur.R[l], Scale: eps})
			z.minus[l] = append(z.minus[l], term{Ut: cur.Ut[l], Vt: cur.Vt[l], M: z.coef[l], R: cur.R[l], Scale: -eps})
		}
		var o1, o2 int64
		lp, _, o1 = z.m.forward(c.theta, z.plus, z.ws.acts, 1, B, z.labels, z.ws)
		lm, _, o2 = z.m.forward(c.theta, z.minus, z.ws.alt, 1, B, z.labels, z.ws)
		z.cnt.ForwardMadds += ops + o1 + o2
	}
	return float32((lp - lm) / (2 * float64(eps)))
}

// pendingTerms lists the low-rank terms of a client's unsettled epochs for layer l.
func (z *zo) pendingTerms(c *zoClient, l int, dst []term) []term {
	for _, p := range c.pending {
		b := z.bases.get(p.epoch)
		dst = append(dst, term{Ut: b.Ut[l], Vt: b.Vt[l], M: p.S[l], R: b.R[l], Scale: 1})
	}
	return dst
}

// apply adds −lr·g·z (z rebuilt from key) to a client: densely over every
// parameter, or under SubCGE into the r×r accumulator of the message's epoch.
func (z *zo) apply(c *zoClient, key uint64, step int, g, lr float32) {
	z.cnt.MessagesApplied++
	c.applied++
	a := -lr * g
	if z.cfg.Rank == 0 {
		newNoise(key).fill(z.z, z.cfg.Rademacher)
		axpy(a, z.z, c.theta)
		z.cnt.ApplyDraws += int64(len(z.z))
		z.cnt.ApplyMadds += int64(len(z.z))
		return
	}
	z.fillCoef(key)
	z.cnt.ApplyDraws += z.coefDraws()
	z.cnt.ApplyMadds += z.coefDraws()
	e := z.epoch(step)
	var p *pendingEpoch
	for i := range c.pending {
		if c.pending[i].epoch == e {
			p = &c.pending[i]
		}
	}
	if p == nil {
		c.pending = append(c.pending, pendingEpoch{epoch: e})
		p = &c.pending[len(c.pending)-1]
		for _, cl := range z.coef {
			p.S = append(p.S, make([]float32, len(cl)))
		}
	}
	for l, cl := range z.coef {
		axpy(a, cl, p.S[l])
	}
}

// settle projects every pending epoch <= upTo into the dense weights of c,
// in epoch order. Each epoch costs one projection per matrix, plus its
// basis (which every real client rebuilds once) when chargeBasis is set.
func (z *zo) settle(c *zoClient, upTo int, chargeBasis bool) {
	if z.store != nil {
		for e := c.settled + 1; e <= upTo; e++ {
			c.theta = z.store.get(e, z)
			c.settled = e
			if chargeBasis {
				z.cnt.ApplyMadds += z.bases.ops
			}
			for l, s := range z.m.Layers {
				r := z.m.layerRank(l, z.cfg.Rank)
				z.cnt.ApplyMadds += int64(s.Rows()) * int64(r) * int64(r+s.Out)
				z.cnt.Projections++
			}
		}
		kept := c.pending[:0]
		for _, p := range c.pending {
			if p.epoch > upTo {
				kept = append(kept, p)
			}
		}
		c.pending = kept
		return
	}
	kept := c.pending[:0]
	for _, p := range c.pending {
		if p.epoch > upTo {
			kept = append(kept, p)
			continue
		}
		b := z.bases.get(p.epoch)
		if chargeBasis {
			z.cnt.ApplyMadds += z.bases.ops
		}
		for l, s := range z.m.Layers {
			z.cnt.ApplyMadds += project(z.m.Matrix(c.theta, l), s, b.Ut[l], b.Vt[l], p.S[l], b.R[l], z.tmp)
			z.cnt.Projections++
		}
	}
	c.pending = kept
	c.settled = max(c.settled, upTo)
}

// effective writes a client's parameters with pending epochs projected in,
// without changing the client (used for evaluation, not counted).
func (z *zo) effective(c *zoClient, dst []float32) {
	copy(dst, c.theta)
	for _, p := range c.pending {
		b := z.bases.get(p.epoch)
		for l, s := range z.m.Layers {
			project(z.m.Matrix(dst, l), s, b.Ut[l], b.Vt[l], p.S[l], b.R[l], z.tmp)
		}
	}
}
