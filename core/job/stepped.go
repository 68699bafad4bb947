package job

import (
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Stepped is a run whose plan is built a range of steps at a time
// (workload.InferenceBuilder: a decode step per output token).
type Stepped interface {
	// Steps is the number of steps; Shape the units, groups and replicas
	// every range shares; Stages each stage's memory.
	Steps() int
	Shape() *workload.Plan
	Stages() []workload.Memory
	// Segmentable reports whether every step ends with all its work done
	// on every stage and begins with the host's synchronisation on it.
	Segmentable() bool
	// Range is the plan of steps [from, to).
	Range(from, to int) (*workload.Plan, error)
}

// SegmentSteps is how many steps a run in segments builds and runs at a
// time: its memory is that of SegmentSteps steps, whatever the run's length.
const SegmentSteps = spec.InferenceSegmentSteps

// RunStepped runs a stepped plan. When the run's boundaries between steps
// are quiescent — a segmentable plan (one stage, no expert parallelism)
// with one simulated replica (and more than two segments' steps) (the others mirror it) and no fault later
// than time 0 — it runs in segments of SegmentSteps steps on one
// exec.Session: each segment is built, run from where the one before left
// the clock, folded into the ranks' statistics (times are integer
// picoseconds, so the sums are exact), the timeline rows and the marks
// asked for, and released. At such a boundary the step before has ended
// with every task done and nothing in flight, and the host resumes at its
// end as the synchronisation on it makes it, so the tables are those of
// the whole plan's run; a segment that ends otherwise (its last event not
// its last task's end) makes the run start over with the whole plan.
// Otherwise the whole plan is built and run. marks are the program marks
// whose ends the caller reads (Finished.MarkEnd), known once build has run.
func (j Job) RunStepped(env scenario.Env, modify func(m *exec.Machine) error,
	build func(gpus int) (Stepped, error), marks func() []string) (*Finished, error) {
	m, err := j.machine(modify)
	if err != nil {
		return nil, err
	}
	st, err := build(m.Fabric.Topology().NumRanks())
	if err != nil {
		return nil, err
	}
	whole := func(m *exec.Machine) (*Finished, error) {
		pl, err := st.Range(0, st.Steps())
		if err != nil {
			return nil, err
		}
		return j.runWhole(env, m, pl, st.Stages())
	}
	shape := st.Shape()
	opt := j.Options(m)
	seg := j.SegmentSteps
	if seg == 0 {
		seg = SegmentSteps
	}
	if seg < 0 || !st.Segmentable() || m.Timed || st.Steps() <= 2*seg || count(exec.Simulated(shape, opt)) != 1 {
		return whole(m)
	}
	if err := CheckTimelineRanks(j.TimelineRanks, shape.Ranks); err != nil {
		return nil, err
	}
	if err := env.Canceled(); err != nil {
		return nil, err
	}
	r, ok, err := j.runSegments(env, m, st, seg, marks())
	if err != nil || ok {
		return r, err
	}
	if m, err = j.machine(modify); err != nil {
		return nil, err
	}
	return whole(m)
}

// runSegments runs st in segments on m; ok is false if a boundary was not
// quiescent.
func (j Job) runSegments(env scenario.Env, m *exec.Machine, st Stepped, seg int, marks []string) (r *Finished, ok bool, err error) {
	shape := st.Shape()
	steps := st.Steps()
	opt := j.Options(m)
	ranks := TimelineRanks(j.TimelineRanks, shape, m)
	r = j.finished(m, st.Stages())
	r.marks = map[markKey]sim.Time{}
	// timeline[i] is rank ranks[i]'s rows, a slice per segment.
	timeline := make([][][]TimelineRow, len(ranks))
	var stats []exec.RankStats
	var sess *exec.Session
	k := m.Fabric.Kernel()
	for from := 0; from < steps; from += seg {
		to := min(from+seg, steps)
		pl, err := st.Range(from, to)
		if err != nil {
			return nil, false, err
		}
		if sess == nil {
			if sess, err = exec.NewSession(pl, opt); err != nil {
				return nil, false, err
			}
		}
		if env.Progress != nil {
			lo, n := float64(from), float64(to-from)
			sess.SetProgress(func(f float64) { env.Progress((lo + f*n) / float64(steps)) })
		}
		res, err := sess.Run(env.Context(), pl)
		if err != nil {
			return nil, false, err
		}
		for u, ur := range res.Units {
			if ur.Simulated {
				if end, _ := res.MarkEnd(u, "end"); end != res.End || k.Now() != res.End || k.Pending() != 0 {
					return nil, false, nil
				}
			}
		}
		r.End = res.End
		r.Segments++
		r.Collectives += res.Collectives
		r.Reused += res.Reused
		for u := range shape.Units {
			for _, name := range marks {
				if t, ok := res.MarkEnd(u, name); ok {
					r.marks[markKey{u, name}] = t
				}
			}
		}
		seg := res.Ranks()
		if stats == nil {
			stats = seg
		} else {
			for i, s := range seg {
				a := &stats[i]
				a.End = max(a.End, s.End)
				a.Compute += s.Compute
				a.Comm += s.Comm
				a.ExposedComm += s.ExposedComm
			}
		}
		for i, rk := range ranks {
			timeline[i] = append(timeline[i], TimelineRows(res, []int{rk}))
		}
	}
	env.Report(1)
	for i := range stats {
		s := &stats[i]
		s.Idle = max(0, s.End-s.Compute-s.ExposedComm)
	}
	r.setRanks(shape, stats)
	n := 0
	for _, segs := range timeline {
		for _, rows := range segs {
			n += len(rows)
		}
	}
	r.Timeline = make([]TimelineRow, 0, n)
	for _, segs := range timeline {
		for _, rows := range segs {
			r.Timeline = append(r.Timeline, rows...)
		}
	}
	return r, true, nil
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
