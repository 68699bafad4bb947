package exec

import (
	"cmp"
	"slices"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// RankStats is how one rank spent the run.
type RankStats struct {
	Rank, Unit int
	// Simulated is false when the rank's unit mirrors unit MirrorOf.
	Simulated bool
	MirrorOf  int
	// End is when the rank's last task finished.
	End sim.Time
	// Compute is the time its GPU computed; Comm the time at least one of
	// its transfers or collectives was in flight; ExposedComm the part of
	// Comm during which it did not compute; Idle the rest of [0, End].
	Compute, Comm, ExposedComm, Idle sim.Time
	Slowdown                         float64
}

// Span is one task on one rank's timeline.
type Span struct {
	Rank       int
	Stream     string
	Name       string
	Start, End sim.Time
	// Bytes of a communication task's payload; FLOPs of a compute task.
	Bytes, FLOPs float64
	MicroBatch   int
}

// Ranks returns the statistics of every rank of the plan, in rank order.
func (r *Result) Ranks() []RankStats {
	pl := r.Plan
	perUnit := make([][]RankStats, len(pl.Units))
	var scratch [2][]interval // reused by every unit: a unit's tasks can number tens of thousands
	for u := range pl.Units {
		ur := &r.Units[u]
		if !ur.Simulated {
			continue
		}
		perUnit[u] = r.unitStats(u, &scratch)
	}
	var out []RankStats
	for u, unit := range pl.Units {
		src := u
		if !r.Units[u].Simulated {
			src = r.Units[u].Mirror
		}
		for i, rk := range unit.Ranks {
			s := perUnit[src][i]
			s.Rank, s.Unit = rk, u
			s.Simulated = src == u
			s.MirrorOf = src
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y RankStats) int { return cmp.Compare(x.Rank, y.Rank) })
	return out
}

type interval struct{ a, b sim.Time }

// pace is the unit's straggler factor: its slowest rank's, at which it
// computes.
func (ur *UnitResult) pace() float64 {
	p := 1.0
	for _, s := range ur.Slowdown {
		p = max(p, s)
	}
	return p
}

// busy is compute task i's device time on a rank of the unit that runs at
// slow (its straggler factor): its nominal time at that pace, stretched as
// interference stretched the unit's (which ran at pace, ur.pace()).
func (ur *UnitResult) busy(i int, slow, pace float64) sim.Time {
	if ur.Stretched != nil && ur.Stretched[i] > 0 {
		return sim.Time(float64(ur.Stretched[i]) * slow / pace)
	}
	return sim.Time(float64(ur.Nominal[i]) * slow)
}

// unitStats computes the statistics of each rank of a simulated unit.
func (r *Result) unitStats(u int, scratch *[2][]interval) []RankStats {
	pl := r.Plan
	ur := &r.Units[u]
	prog := &pl.Programs[pl.Units[u].Program]
	comp, comm := scratch[0][:0], scratch[1][:0]
	var end sim.Time
	for i, t := range prog.Tasks {
		a, b := ur.Start[i], ur.End[i]
		end = max(end, b)
		if t.Kind == workload.Compute {
			comp = append(comp, interval{a, b})
		} else if b > a {
			comm = append(comm, interval{a, b})
		}
	}
	comp = union(comp)
	comm = union(comm)
	commT := length(comm)
	exposed := commT - overlap(comm, comp)
	scratch[0], scratch[1] = comp, comm // their arrays, for the next unit
	out := make([]RankStats, len(ur.Slowdown))
	pace := ur.pace()
	// A unit's ranks mostly share one slowdown: sum each distinct one once.
	computeAt := map[float64]sim.Time{}
	for k, slow := range ur.Slowdown {
		c, ok := computeAt[slow]
		if !ok {
			for i, t := range prog.Tasks {
				if t.Kind == workload.Compute {
					c += ur.busy(i, slow, pace)
				}
			}
			computeAt[slow] = c
		}
		out[k] = RankStats{End: end, Compute: c, Comm: commT, ExposedComm: exposed,
			Idle: max(0, end-c-exposed), Slowdown: slow}
	}
	return out
}

// union merges overlapping intervals in place (iv is reused).
func union(iv []interval) []interval {
	if len(iv) == 0 {
		return iv
	}
	slices.SortFunc(iv, func(x, y interval) int { return cmp.Compare(x.a, y.a) })
	out := iv[:1] // writes never pass the interval being read
	for _, x := range iv[1:] {
		last := &out[len(out)-1]
		if x.a <= last.b {
			last.b = max(last.b, x.b)
		} else {
			out = append(out, x)
		}
	}
	return out
}

func length(iv []interval) sim.Time {
	var s sim.Time
	for _, x := range iv {
		s += x.b - x.a
	}
	return s
}

// overlap is the total length of the intersection of two sorted unions.
func overlap(a, b []interval) sim.Time {
	var s sim.Time
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].a, b[j].a), min(a[i].b, b[j].b)
		if hi > lo {
			s += hi - lo
		}
		if a[i].b < b[j].b {
			i++
		} else {
			j++
		}
	}
	return s
}

// EachSpan calls f with the spans of the given ranks (a mirrored rank
// shows its representative's times, which are its own by symmetry), in
// rank then task order, and stops at f's first error. Compute spans of a
// straggler rank end when its own share of the work ends.
func (r *Result) EachSpan(ranks []int, f func(Span) error) error {
	pl := r.Plan
	where := map[int][2]int{}
	for u, unit := range pl.Units {
		for k, rk := range unit.Ranks {
			where[rk] = [2]int{u, k}
		}
	}
	for _, rk := range ranks {
		w, ok := where[rk]
		if !ok {
			continue
		}
		u := w[0]
		src := u
		if !r.Units[u].Simulated {
			src = r.Units[u].Mirror
		}
		ur := &r.Units[src]
		slow, pace := r.Units[u].Slowdown[w[1]], ur.pace()
		prog := &pl.Programs[pl.Units[u].Program]
		for i, t := range prog.Tasks {
			s := Span{Rank: rk, Stream: t.Stream.String(), Name: t.Name, Start: ur.Start[i], End: ur.End[i],
				MicroBatch: int(t.MicroBatch)}
			if t.Kind == workload.Compute {
				s.FLOPs = t.FLOPs
				s.End = s.Start + ur.busy(i, slow, pace)
			} else {
				s.Bytes = t.Bytes
			}
			if err := f(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// Spans is the number of spans EachSpan gives for ranks.
func (r *Result) Spans(ranks []int) int {
	asked := make(map[int]int, len(ranks))
	for _, rk := range ranks {
		asked[rk]++
	}
	n := 0
	for _, unit := range r.Plan.Units {
		for _, rk := range unit.Ranks {
			n += asked[rk] * len(r.Plan.Programs[unit.Program].Tasks)
		}
	}
	return n
}

// MarkEnd is when the task a program marks with name ended on unit u
// (its representative's time for a mirrored unit), and whether it exists.
func (r *Result) MarkEnd(u int, name string) (sim.Time, bool) {
	pl := r.Plan
	i, ok := pl.Programs[pl.Units[u].Program].Marks[name]
	if !ok {
		return 0, false
	}
	src := u
	if !r.Units[u].Simulated {
		src = r.Units[u].Mirror
	}
	return r.Units[src].End[i], true
}
