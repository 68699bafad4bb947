package seedflood

// versionStore lets SeedFlood clients share SubCGE weight matrices. Every
// client eventually applies the same updates of an epoch, and projects them
// in epoch order; if each client sums an epoch's updates in one canonical
// order (step, origin, k) before its projection, then the dense weights of
// every client that has settled epochs ≤ e are bit-identical. A real client
// may sum in any order; the simulation picks the canonical one and keeps a
// single copy per settled epoch instead of one per client (128 clients of a
// 1M-parameter model would otherwise stream 128 copies through memory every
// step). Every client is still charged its own projection (see Counters).
type versionStore struct {
	versions []version        // ascending epoch, consecutive
	log      map[int][]logged // messages of epochs not yet projected, canonical order
	coef, S  [][]float32      // scratch
}

type version struct {
	epoch int // epochs <= epoch are projected in
	theta []float32
}

type logged struct {
	key uint64
	a   float32 // −lr·g
}

func newVersionStore(init []float32) *versionStore {
	return &versionStore{versions: []version{{epoch: -1, theta: append([]float32(nil), init...)}}, log: map[int][]logged{}}
}

// record appends a message to its epoch's log; callers record in canonical order.
func (vs *versionStore) record(epoch int, key uint64, a float32) {
	vs.log[epoch] = append(vs.log[epoch], logged{key: key, a: a})
}

// get returns the weights with epochs <= e projected, building them from
// the previous version on first request.
func (vs *versionStore) get(e int, z *zo) []float32 {
	first := vs.versions[0].epoch
	if e-first < len(vs.versions) {
		return vs.versions[e-first].theta
	}
	prev := vs.versions[len(vs.versions)-1]
	if prev.epoch != e-1 {
		panic("seedflood: SubCGE epochs must be settled in order")
	}
	theta := append([]float32(nil), prev.theta...)
	if vs.S == nil {
		for _, c := range z.coef {
			vs.S = append(vs.S, make([]float32, len(c)))
			vs.coef = append(vs.coef, make([]float32, len(c)))
		}
	}
	for _, s := range vs.S {
		clear(s)
	}
	for _, m := range vs.log[e] {
		n := newNoise(m.key)
		for l, c := range vs.coef {
			n.fill(c, z.cfg.Rademacher)
			axpy(m.a, c, vs.S[l])
		}
	}
	delete(vs.log, e)
	b := z.bases.get(e)
	for l, s := range z.m.Layers {
		project(z.m.Matrix(theta, l), s, b.Ut[l], b.Vt[l], vs.S[l], b.R[l], z.tmp)
	}
	vs.versions = append(vs.versions, version{epoch: e, theta: theta})
	return theta
}

// evictBelow drops versions older than e (no client holds them any more).
func (vs *versionStore) evictBelow(e int) {
	i := 0
	for i < len(vs.versions)-1 && vs.versions[i].epoch < e {
		i++
	}
	vs.versions = vs.versions[i:]
}
