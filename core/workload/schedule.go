package workload

// Pass is one forward or backward of one micro-batch through one model
// chunk on a stage.
type Pass struct {
	Forward bool
	MB      int
	Chunk   int
}

// StageOrder is the order in which stage s (of p) runs its passes over m
// micro-batches and v model chunks.
func StageOrder(kind Schedule, p, s, m, v int) []Pass {
	return stageOrder(kind, p, s, m, v, false)
}

// stageOrder is StageOrder with extra warm-up forwards: with merge set, 1F1B
// warms up with 2(p−s−1)+1 forwards (the interleaved schedule's 2(p−s−1)
// spacing between neighbours, plus one) and the interleaved schedule with
// one more than its own.
func stageOrder(kind Schedule, p, s, m, v int, merge bool) []Pass {
	extra := 0
	if merge {
		extra = 1
		if kind == OneFOneB {
			extra += p - s - 1
		}
	}
	var out []Pass
	f := func(mb, c int) { out = append(out, Pass{true, mb, c}) }
	b := func(mb, c int) { out = append(out, Pass{false, mb, c}) }
	switch kind {
	case GPipe:
		for i := 0; i < m; i++ {
			f(i, 0)
		}
		for i := 0; i < m; i++ {
			b(i, 0)
		}
	case OneFOneB:
		warm := min(p-s-1+extra, m)
		for i := 0; i < warm; i++ {
			f(i, 0)
		}
		for i := 0; i < m-warm; i++ {
			f(warm+i, 0)
			b(i, 0)
		}
		for i := m - warm; i < m; i++ {
			b(i, 0)
		}
	case Interleaved:
		// Megatron-LM forward_backward_pipelining_with_interleaving: virtual
		// micro-batch k runs chunk (k mod p·v)/p (reversed for backward) on
		// micro-batch (k / p·v)·p + k mod p; warm-up (p−s−1)·2 + (v−1)·p.
		total := m * v
		at := func(k int, fwd bool) (int, int) {
			c := (k % (p * v)) / p
			if !fwd {
				c = v - 1 - c
			}
			return (k/(p*v))*p + k%p, c
		}
		warm := min((p-s-1)*2+(v-1)*p+extra, total)
		for k := 0; k < warm; k++ {
			f(at(k, true))
		}
		for k := 0; k < total-warm; k++ {
			f(at(warm+k, true))
			b(at(k, false))
		}
		for k := total - warm; k < total; k++ {
			b(at(k, false))
		}
	}
	return out
}

// PeakInFlight is the largest sum of per-chunk sizes over passes whose
// forward has run and backward has not: the activations a stage holds.
func PeakInFlight(order []Pass, chunkBytes []float64) float64 {
	var cur, peak float64
	for _, ps := range order {
		if ps.Forward {
			cur += chunkBytes[ps.Chunk]
			peak = max(peak, cur)
		} else {
			cur -= chunkBytes[ps.Chunk]
		}
	}
	return peak
}
