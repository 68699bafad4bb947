package seedflood

// Applier isolates one client's apply work, for measuring it: applying the
// m messages a SeedFlood client receives in a step, with dense z or with
// SubCGE (r² per matrix per message, plus one projection per epoch).
type Applier struct {
	zo     *zo
	client *zoClient
	step   int
	cnt    Counters
}

// NewApplier starts a client at theta (copied).
func NewApplier(m *Model, cfg ZOConfig, theta []float32) *Applier {
	a := &Applier{}
	a.zo = newZO(m, cfg, 1, &a.cnt)
	a.client = &zoClient{theta: append([]float32(nil), theta...)}
	return a
}

// ApplyStep applies m messages (origins 0..m−1 of the current step) and,
// under SubCGE, projects the epoch when the step ends it. It returns the
// multiply-adds spent.
func (a *Applier) ApplyStep(m int, lr float32) int64 {
	before := a.cnt.ApplyMadds
	for o := 0; o < m; o++ {
		a.zo.apply(a.client, PerturbKey(a.zo.cfg.Seed, o, a.step, 0), a.step, 1e-3, lr)
	}
	if a.zo.cfg.Rank > 0 && (a.step+1)%a.zo.cfg.RefreshEvery == 0 {
		a.zo.settle(a.client, a.zo.epoch(a.step), true)
		a.zo.bases.evictBefore(a.zo.epoch(a.step))
	}
	a.step++
	return a.cnt.ApplyMadds - before
}
