package seedflood

import (
	"math"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// msg is one SeedFlood message's payload (origin, step and k are implied by
// where it is stored).
type msg struct {
	key uint64
	g   float32
}

// seedFlood: every step every client makes q two-point estimates at its own
// parameters, floods (origin, step, seed, scalar) messages, and applies each
// message once, when it arrives (Config.DelaySteps of its hop distance).
// Each update is scaled by lr/(n·q), so once every message has arrived
// every client has taken the same steps as centralized ZO-SGD averaging
// n·q estimates per step.
type seedFlood struct {
	cfg      *Config
	zo       *zo
	state    []*zoClient
	flood    *Flood
	maxDelay int
	ring     [][]msg // ring[t % (maxDelay+1)][origin*q + k]
	rows     []int
}

func newSeedFlood(cfg *Config, cnt *Counters) (*seedFlood, error) {
	n := cfg.Graph.NumNodes()
	flood, err := FloodGraphCanceled(cfg.Graph, cfg.Canceled)
	if err != nil {
		return nil, err
	}
	s := &seedFlood{cfg: cfg, zo: newZO(cfg.Model, cfg.ZO, cfg.BatchSize, cnt), flood: flood}
	s.zo.private = cfg.privateWeights
	for c := 0; c < n; c++ {
		s.state = append(s.state, s.zo.newClient(cfg.Init))
		s.maxDelay = max(s.maxDelay, cfg.DelaySteps(s.flood.Eccentricity[c]))
	}
	s.ring = make([][]msg, s.maxDelay+1)
	for i := range s.ring {
		s.ring[i] = make([]msg, n*cfg.Perturbations)
	}
	return s, nil
}

func (s *seedFlood) clients() int { return len(s.state) }

func (s *seedFlood) params(i int, dst []float32) { s.zo.effective(s.state[i], dst) }

func (s *seedFlood) step(t int) (int64, error) {
	cfg, q, n := s.cfg, s.cfg.Perturbations, len(s.state)
	slot := s.ring[t%len(s.ring)]
	for c, st := range s.state {
		if err := cfg.stop(); err != nil {
			return 0, err
		}
		s.rows = batchRows(cfg.ZO.Seed, c, t, cfg.Shards[c], cfg.BatchSize, s.rows)
		for k := 0; k < q; k++ {
			key := PerturbKey(cfg.ZO.Seed, c, t, k)
			g := s.zo.estimate(st, key, t, cfg.Train, s.rows)
			if !finite(float64(g)) {
				return 0, errDiverged
			}
			slot[c*q+k] = msg{key: key, g: g}
		}
	}
	lr := cfg.LearningRate / float32(n*q)
	if s.zo.store != nil {
		for _, m := range slot { // canonical order: origin, then k
			s.zo.store.record(s.zo.epoch(t), m.key, -lr*m.g)
		}
	}
	for c, st := range s.state {
		s.deliver(c, st, t, t, lr)
	}
	if cfg.ZO.Rank > 0 {
		for c, st := range s.state {
			// Epoch e is complete at c once its last step, (e+1)K−1, plus the
			// longest delay to c has passed.
			done := t - cfg.DelaySteps(s.flood.Eccentricity[c])
			s.zo.settle(st, (done+1)/cfg.ZO.RefreshEvery-1, true)
		}
		oldest := s.state[0].settled
		for _, st := range s.state {
			oldest = min(oldest, st.settled)
		}
		if s.zo.store != nil {
			s.zo.store.evictBelow(oldest)
		}
		s.zo.bases.evictBefore(min(oldest+1, s.zo.epoch(max(0, t-s.maxDelay))))
	}
	return FloodStepBytes(s.flood, q), nil
}

// deliver applies, in origin order, the messages that reach client c at the
// end of step t: from each origin o, those it emitted at t − delay(o, c),
// if that is no later than lastSent.
func (s *seedFlood) deliver(c int, st *zoClient, t, lastSent int, lr float32) {
	q := s.cfg.Perturbations
	for o := range s.state {
		sent := t - s.cfg.DelaySteps(s.flood.Arrival[o][c])
		if sent < 0 || sent > lastSent {
			continue
		}
		slot := s.ring[sent%len(s.ring)]
		for k := 0; k < q; k++ {
			m := slot[o*q+k]
			s.zo.apply(st, m.key, sent, m.g, lr)
		}
	}
}

// drain delivers every message still in flight after the last step (no new
// messages are emitted) and settles all SubCGE epochs, so every client has
// applied every update exactly once. lastStep is the last step run.
func (s *seedFlood) drain(lastStep int) {
	lr := s.cfg.LearningRate / float32(len(s.state)*s.cfg.Perturbations)
	for t := lastStep + 1; t <= lastStep+s.maxDelay; t++ {
		for c, st := range s.state {
			s.deliver(c, st, t, lastStep, lr)
		}
	}
	if s.cfg.ZO.Rank > 0 {
		for _, st := range s.state {
			s.zo.settle(st, lastStep/s.cfg.ZO.RefreshEvery, true)
		}
	}
}

// meZO is centralized ZO-SGD (MeZO, arXiv 2305.17333): one model; each step
// it makes the same n·q estimates the clients would (client o's batch and
// seeds) and applies their average. No network, so no bytes.
type meZO struct {
	cfg   *Config
	zo    *zo
	state *zoClient
	g     []msg
	rows  []int
}

func newMeZO(cfg *Config, cnt *Counters) *meZO {
	z := newZO(cfg.Model, cfg.ZO, cfg.BatchSize, cnt)
	return &meZO{cfg: cfg, zo: z, state: z.newClient(cfg.Init)}
}

func (m *meZO) clients() int { return 1 }

func (m *meZO) params(_ int, dst []float32) { m.zo.effective(m.state, dst) }

func (m *meZO) step(t int) (int64, error) {
	cfg, q, n := m.cfg, m.cfg.Perturbations, len(m.cfg.Shards)
	m.g = m.g[:0]
	for o := 0; o < n; o++ {
		if err := cfg.stop(); err != nil {
			return 0, err
		}
		m.rows = batchRows(cfg.ZO.Seed, o, t, cfg.Shards[o], cfg.BatchSize, m.rows)
		for k := 0; k < q; k++ {
			key := PerturbKey(cfg.ZO.Seed, o, t, k)
			g := m.zo.estimate(m.state, key, t, cfg.Train, m.rows)
			if !finite(float64(g)) {
				return 0, errDiverged
			}
			m.g = append(m.g, msg{key: key, g: g})
		}
	}
	lr := cfg.LearningRate / float32(n*q)
	for _, mg := range m.g {
		if m.zo.store != nil {
			m.zo.store.record(m.zo.epoch(t), mg.key, -lr*mg.g)
		}
		m.zo.apply(m.state, mg.key, t, mg.g, lr)
	}
	if cfg.ZO.Rank > 0 {
		m.zo.settle(m.state, (t+1)/cfg.ZO.RefreshEvery-1, true)
		m.zo.store.evictBelow(m.state.settled)
		m.zo.bases.evictBefore(min(m.state.settled+1, m.zo.epoch(t)))
	}
	return 0, nil
}

// gossip runs DSGD, DZSGD and ChocoSGD over Metropolis–Hastings weights
// w_ij = 1/(1+max(deg_i, deg_j)), w_ii = 1 − Σ_j w_ij (symmetric, doubly
// stochastic; Xiao & Boyd 2004).
type gossip struct {
	cfg       *Config
	method    string
	cnt       *Counters
	x, next   [][]float32
	xhat      [][]float32 // ChocoSGD: public copies every neighbor also holds
	nbr       [][]int
	w         [][]float64 // w[i][a] for nbr[i][a]; self weight last
	grad, tmp []float32
	absBuf    []float32
	selBuf    []float32
	ws        *workspace
	zo        *zo
	rows      []int
	topK      int
}

func newGossip(cfg *Config, method string, cnt *Counters) *gossip {
	g := cfg.Graph
	n, d := g.NumNodes(), cfg.Model.NumParams()
	gs := &gossip{cfg: cfg, method: method, cnt: cnt, ws: cfg.Model.newWorkspace(cfg.BatchSize), grad: make([]float32, d), tmp: make([]float32, d)}
	for i := 0; i < n; i++ {
		gs.x = append(gs.x, append([]float32(nil), cfg.Init...))
		gs.next = append(gs.next, make([]float32, d))
		nb := append(append([]int(nil), g.Neighbors(i)...), i)
		ws := make([]float64, len(nb))
		self := 1.0
		for a, j := range nb[:len(nb)-1] {
			ws[a] = 1 / float64(1+max(g.Degree(i), g.Degree(j)))
			self -= ws[a]
		}
		ws[len(nb)-1] = self
		gs.nbr, gs.w = append(gs.nbr, nb), append(gs.w, ws)
	}
	switch method {
	case MethodDZSGD:
		gs.zo = newZO(cfg.Model, cfg.ZO, cfg.BatchSize, cnt)
	case MethodChoco:
		gs.topK = ChocoK(cfg.ChocoFraction, d)
		gs.absBuf = make([]float32, d)
		gs.selBuf = make([]float32, d)
		for i := 0; i < n; i++ {
			gs.xhat = append(gs.xhat, make([]float32, d)) // x̂ starts at 0 (Koloskova et al. 2019, Alg. 2)
		}
	}
	return gs
}

func (g *gossip) clients() int { return len(g.x) }

func (g *gossip) params(i int, dst []float32) { copy(dst, g.x[i]) }

// mix writes Σ_j w_ij·src_j into dst.
func (g *gossip) mix(i int, src [][]float32, dst []float32) {
	clear(dst)
	for a, j := range g.nbr[i] {
		axpy(float32(g.w[i][a]), src[j], dst)
	}
	g.cnt.ApplyMadds += int64(len(g.nbr[i])) * int64(len(dst))
}

func (g *gossip) step(t int) (int64, error) {
	cfg := g.cfg
	lr := cfg.FirstOrderLearningRate
	switch g.method {
	case MethodDSGD:
		// x_i ← Σ_j w_ij x_j − lr·∇f_i(x_i) (Lian et al. 2017).
		for i := range g.x {
			if err := cfg.stop(); err != nil {
				return 0, err
			}
			if !g.gradient(i, t) {
				return 0, errDiverged
			}
			g.mix(i, g.x, g.next[i])
			axpy(-lr, g.grad, g.next[i])
			g.cnt.ApplyMadds += int64(len(g.grad))
		}
		g.x, g.next = g.next, g.x
		return GossipStepBytes(cfg.Graph, ModelMessageBytes(cfg.Model.NominalParams())), nil
	case MethodDZSGD:
		// As DSGD with the gradient replaced by the average of q two-point estimates.
		q := cfg.Perturbations
		for i := range g.x {
			if err := cfg.stop(); err != nil {
				return 0, err
			}
			g.mix(i, g.x, g.next[i])
			g.rows = batchRows(cfg.ZO.Seed, i, t, cfg.Shards[i], cfg.BatchSize, g.rows)
			own := &zoClient{theta: g.x[i]}
			dst := &zoClient{theta: g.next[i]}
			for k := 0; k < q; k++ {
				key := PerturbKey(cfg.ZO.Seed, i, t, k)
				gk := g.zo.estimate(own, key, t, cfg.Train, g.rows)
				if !finite(float64(gk)) {
					return 0, errDiverged
				}
				g.zo.apply(dst, key, t, gk, cfg.LearningRate/float32(q))
			}
			if cfg.ZO.Rank > 0 {
				// Each client builds an epoch's basis once, at its first step.
				g.zo.settle(dst, g.zo.epoch(t), t%cfg.ZO.RefreshEvery == 0)
			}
		}
		if cfg.ZO.Rank > 0 {
			g.zo.bases.evictBefore(g.zo.epoch(t))
		}
		g.x, g.next = g.next, g.x
		return GossipStepBytes(cfg.Graph, ModelMessageBytes(cfg.Model.NominalParams())), nil
	default:
		// ChocoSGD (Koloskova, Stich, Jaggi 2019, Alg. 1):
		//   x_i^{½} = x_i − lr·∇f_i(x_i)
		//   q_i = Q(x_i^{½} − x̂_i), sent to neighbors; x̂_i += q_i
		//   (Q: top-k, or QSGD quantization when ChocoBits > 0)
		//   x_i = x_i^{½} + γ Σ_j w_ij (x̂_j − x̂_i)
		// x̂ carries the compression error forward (error feedback).
		for i := range g.x {
			if err := cfg.stop(); err != nil {
				return 0, err
			}
			if !g.gradient(i, t) {
				return 0, errDiverged
			}
			half := g.next[i]
			for k, v := range g.x[i] {
				half[k] = v - lr*g.grad[k]
			}
			for k := range half {
				g.tmp[k] = half[k] - g.xhat[i][k]
			}
			if cfg.ChocoBits > 0 {
				g.addQuantized(g.xhat[i], g.tmp, i, t)
			} else {
				g.addTopK(g.xhat[i], g.tmp)
			}
		}
		for i := range g.x {
			g.mix(i, g.xhat, g.tmp)
			gamma := cfg.ChocoGamma
			for k := range g.tmp {
				g.next[i][k] += gamma * (g.tmp[k] - g.xhat[i][k])
			}
		}
		g.x, g.next = g.next, g.x
		return GossipStepBytes(cfg.Graph, g.chocoMessageBytes()), nil
	}
}

// gradient writes client i's minibatch gradient into g.grad; false when
// its loss is not finite (the run diverged).
func (g *gossip) gradient(i, t int) bool {
	cfg := g.cfg
	g.rows = batchRows(cfg.ZO.Seed, i, t, cfg.Shards[i], cfg.BatchSize, g.rows)
	loss, ops := cfg.Model.gradient(g.x[i], g.grad, cfg.Train, g.rows, g.ws)
	g.cnt.ForwardMadds += ops
	return finite(loss)
}

// addTopK adds to dst the k entries of v largest in magnitude (ties to the
// lower index), found by selection in O(d) rather than a full sort.
func (g *gossip) addTopK(dst, v []float32) {
	k := g.topK
	abs := g.absBuf
	for i, x := range v {
		abs[i] = absf(x)
	}
	thr := kthLargest(append(g.selBuf[:0], abs...), k)
	above := 0
	for _, a := range abs {
		if a > thr {
			above++
		}
	}
	ties := k - above
	for i, a := range abs {
		if a > thr || (a == thr && ties > 0) {
			if a == thr {
				ties--
			}
			dst[i] += v[i]
		}
	}
}

func absf(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// kthLargest returns the k-th largest value of xs (1-based), reordering xs.
func kthLargest(xs []float32, k int) float32 {
	lo, hi, target := 0, len(xs)-1, k-1
	for lo < hi {
		p := xs[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] > p {
				i++
			}
			for xs[j] < p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case target <= j:
			hi = j
		case target >= i:
			lo = i
		default:
			return xs[target]
		}
	}
	return xs[target]
}

func (g *gossip) chocoMessageBytes() int64 {
	if g.cfg.ChocoBits > 0 {
		return QuantizedMessageBytes(len(g.grad), g.cfg.ChocoBits)
	}
	return TopKMessageBytes(g.topK)
}

// addQuantized adds Q(v)/τ to dst, with Q the unbiased QSGD quantizer with
// s = 2^bits − 1 levels (Alistarh et al. 2017): Q(v)_i = ‖v‖·sign(v_i)·ξ_i/s,
// ξ_i = ⌊s|v_i|/‖v‖⌋ rounded up with probability equal to the remainder;
// τ = 1 + min(d/s², √d/s) makes Q/τ a contraction, as ChocoSGD requires
// (Koloskova et al. 2019, Sec. 3). The rounding draws are keyed by
// (seed, client, step).
func (g *gossip) addQuantized(dst, v []float32, client, step int) {
	norm := float64(0)
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		return
	}
	s := float64(int(1)<<g.cfg.ChocoBits - 1)
	d := float64(len(v))
	tau := 1 + min(d/(s*s), math.Sqrt(d)/s)
	src := counterSource{key: rng.Mix(g.cfg.ZO.Seed, tagQuantize, uint64(client), uint64(step))}
	unit := float32(norm / s / tau)
	for i, x := range v {
		level := s * math.Abs(float64(x)) / norm
		xi := math.Floor(level)
		if float64(src.Uint64()>>11)/(1<<53) < level-xi {
			xi++
		}
		if x < 0 {
			xi = -xi
		}
		dst[i] += unit * float32(xi)
	}
}

// ChocoK is how many coordinates top-k keeps: fraction·d, at least one.
func ChocoK(fraction float64, d int) int { return max(1, int(fraction*float64(d))) }
