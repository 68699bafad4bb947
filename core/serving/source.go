package serving

import (
	"math"
	"math/rand/v2"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// Lengths draws token counts: "fixed" (Tokens), "uniform" on [Min, Max],
// or "lognormal" with median Tokens and log-standard deviation Sigma,
// clipped to [Min, Max].
type Lengths struct {
	Dist     string
	Tokens   int
	Min, Max int
	Sigma    float64
	// FromTable ("table") is a list of lengths, used in turn and cycled.
	FromTable []int
	tableAt   int
}

// Draw returns the next length.
func (l *Lengths) Draw(r *rand.Rand) int {
	switch l.Dist {
	case "uniform":
		return l.Min + r.IntN(l.Max-l.Min+1)
	case "lognormal":
		v := int(math.Round(float64(l.Tokens) * math.Exp(l.Sigma*r.NormFloat64())))
		return min(max(v, l.Min), l.Max)
	case "table":
		v := l.FromTable[l.tableAt%len(l.FromTable)]
		l.tableAt++
		return v
	}
	return l.Tokens
}

// Arrivals draws open-loop inter-arrival gaps: a gamma process with shape
// Burstiness at RatePerS (shape 1 is Poisson; below 1 burstier), as vLLM's
// benchmark_serving.py draws them (np.random.gamma(shape=burstiness,
// scale=1/(rate·burstiness))).
type Arrivals struct {
	RatePerS, Burstiness float64
}

// Gap draws one gap in seconds.
func (a Arrivals) Gap(r *rand.Rand) float64 {
	if a.Burstiness == 1 {
		return r.ExpFloat64() / a.RatePerS
	}
	return rng.Gamma(r, a.Burstiness) / (a.RatePerS * a.Burstiness)
}

// Shared prefixes: every request draws one of Groups prefixes of Tokens
// tokens (uniformly), or none when Groups is 0.
type Prefixes struct {
	Groups, Tokens int
}

// OpenLoop yields requests at drawn (or given) arrival times until Count
// requests or until DurationS of arrivals; the first arrives one gap after 0.
type OpenLoop struct {
	Arr            Arrivals
	Prompt, Output Lengths
	Prefix         Prefixes
	Count          int
	DurationS      float64
	// Trace, if set, replaces the draws.
	Trace []Request
	rArr  *rand.Rand
	rLen  *rand.Rand
	t     float64
	n     int
}

// NewOpenLoop seeds the source's streams.
func NewOpenLoop(o OpenLoop, arrivals, lengths *rand.Rand) *OpenLoop {
	o.rArr, o.rLen = arrivals, lengths
	return &o
}

// Next is the next arrival.
func (o *OpenLoop) Next() (Request, bool) {
	if o.Trace != nil {
		if o.n >= len(o.Trace) {
			return Request{}, false
		}
		o.n++
		return o.Trace[o.n-1], true
	}
	if (o.Count > 0 && o.n >= o.Count) || (o.Count == 0 && o.DurationS <= 0) {
		return Request{}, false
	}
	o.t += o.Arr.Gap(o.rArr)
	if o.Count == 0 && o.t > o.DurationS {
		return Request{}, false
	}
	o.n++
	return drawRequest(o.t, o.rLen, &o.Prompt, &o.Output, o.Prefix, -1), true
}

func drawRequest(t float64, r *rand.Rand, prompt, output *Lengths, pf Prefixes, client int32) Request {
	q := Request{ArrivalS: t, Prompt: prompt.Draw(r), Output: output.Draw(r), Prefix: -1, Client: client}
	if pf.Groups > 0 {
		q.Prefix = int32(r.IntN(pf.Groups))
		q.PrefixTokens = min(pf.Tokens, q.Prompt-1)
	}
	return q
}

// Done is a no-op for an open loop.
func (o *OpenLoop) Done(int32, float64) {}

// ClosedLoop has Clients clients, each sending its next request when its
// previous one finishes (as benchmark tools run at a fixed concurrency),
// until Count requests have been sent or DurationS has passed.
type ClosedLoop struct {
	Clients        int
	Prompt, Output Lengths
	Prefix         Prefixes
	Count          int
	DurationS      float64
	r              *rand.Rand
	sent           int
	due            []pending
	started        bool
}

type pending struct {
	client int32
	t      float64
}

// NewClosedLoop seeds the source.
func NewClosedLoop(c ClosedLoop, lengths *rand.Rand) *ClosedLoop {
	c.r = lengths
	return &c
}

// Next is a due request of some client.
func (c *ClosedLoop) Next() (Request, bool) {
	if !c.started {
		c.started = true
		for i := 0; i < c.Clients; i++ {
			c.due = append(c.due, pending{int32(i), 0})
		}
	}
	if len(c.due) == 0 {
		return Request{}, false
	}
	p := c.due[0]
	if (c.Count > 0 && c.sent >= c.Count) || (c.Count == 0 && p.t > c.DurationS) {
		c.due = c.due[:0]
		return Request{}, false
	}
	c.due = c.due[1:]
	c.sent++
	return drawRequest(p.t, c.r, &c.Prompt, &c.Output, c.Prefix, p.client), true
}

// Done makes the client's next request due at t.
func (c *ClosedLoop) Done(client int32, t float64) {
	c.due = append(c.due, pending{client, t})
}
