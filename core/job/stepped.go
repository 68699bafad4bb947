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
	// SegmentFrom is the first step a range may start at after another:
	// from there on, a replica has nothing in flight between two ranges.
	// Each program of a range that the run does not end marks "resume":
	// the task whose end the next range's host waits for before its first
	// task.
	SegmentFrom() int
	// Range is the plan of steps [from, to); Release hands a plan back
	// once done with it (its storage may serve the next Range).
	Range(from, to int) (*workload.Plan, error)
	Release(pl *workload.Plan)
}

// SegmentSteps is how many steps a run in segments builds and runs at a
// time: its memory is that of SegmentSteps steps, whatever the run's length.
const SegmentSteps = spec.InferenceSegmentSteps

// RunStepped runs a stepped plan. When the run's boundaries between steps
// are quiescent — one simulated replica (the others mirror it: replicas
// simulated on their own drift apart, and with expert parallelism their
// all-to-alls couple them), no fault later than time 0 — and it has more
// than two segments' steps, it runs in segments of Job.SegmentSteps
// steps on one exec.Session: each segment is built, run from where the one
// before left the clock (each host's clock carried over: exec.Resume),
// folded into the ranks' statistics (times are integer picoseconds, so the
// sums are exact), the timeline rows and the marks asked for, and released.
// At such a boundary every task before it has ended and nothing is in
// flight, so the tables are those of the whole plan's run; a segment whose
// last event is not its last task's end makes the run start over with the
// whole plan. Otherwise the whole plan is built and run. marks are the
// program marks whose ends the caller reads (Finished.MarkEnd), known once
// build has run.
func (j Job) RunStepped(env scenario.Env, modify func(m *exec.Machine) error,
	build func(gpus int) (Stepped, error), marks func() []string) (*Finished, error) {
	m, err := j.machine(env, modify)
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
	if seg < 0 || m.Timed || st.Steps() <= max(2*seg, st.SegmentFrom()+seg) {
		return whole(m)
	}
	simulated, err := exec.Simulated(env.Context(), shape, opt)
	if err != nil {
		return nil, err
	}
	if !oneReplica(shape, simulated) {
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
	if m, err = j.machine(env, modify); err != nil {
		return nil, err
	}
	return whole(m)
}

// oneReplica reports whether the simulated units are those of one replica.
func oneReplica(pl *workload.Plan, simulated []bool) bool {
	n := 0
	for _, b := range simulated {
		if b {
			n++
		}
	}
	for _, rep := range pl.Replicas {
		all := len(rep) == n
		for _, u := range rep {
			all = all && simulated[u]
		}
		if all {
			return true
		}
	}
	return false
}

// runSegments runs st in segments of seg steps on m; ok is false if a
// boundary was not quiescent.
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
	var from *exec.Resume
	k := m.Fabric.Kernel()
	for lo := 0; lo < steps; {
		if err := env.Canceled(); err != nil {
			return nil, false, err
		}
		hi := min(max(lo+seg, st.SegmentFrom()), steps)
		pl, err := st.Range(lo, hi)
		if err != nil {
			return nil, false, err
		}
		if sess == nil {
			if sess, err = exec.NewSession(env.Context(), pl, opt); err != nil {
				return nil, false, err
			}
		}
		if env.Progress != nil {
			a, n := float64(lo), float64(hi-lo)
			sess.SetProgress(func(f float64) { env.Progress((a + f*n) / float64(steps)) })
		}
		res, err := sess.Run(env.Context(), pl, from)
		if err != nil {
			return nil, false, err
		}
		if k.Now() != res.End || k.Pending() != 0 {
			return nil, false, nil
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
		part := res.Ranks()
		if stats == nil {
			stats = part
		} else {
			for i, s := range part {
				a := &stats[i]
				a.End = max(a.End, s.End)
				a.Compute += s.Compute
				a.Comm += s.Comm
				a.ExposedComm += s.ExposedComm
			}
		}
		for i, rk := range ranks {
			rows, err := TimelineRows(res, []int{rk}, env.Canceled)
			if err != nil {
				return nil, false, err
			}
			timeline[i] = append(timeline[i], rows)
		}
		if hi < steps {
			from = resume(pl, res)
		}
		st.Release(pl)
		lo = hi
		env.Report(float64(lo) / float64(steps))
	}
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

// resume is where the next segment continues after plan pl's run res:
// each simulated unit's host at its clock or, if later, the end of the
// task its program marks "resume" (the host waits for it as the whole
// plan's host synchronises on it); each program's last task.
func resume(pl *workload.Plan, res *exec.Result) *exec.Resume {
	from := &exec.Resume{Host: make([]sim.Time, len(pl.Units)), Last: make([]*workload.Task, len(pl.Programs))}
	for u := range pl.Units {
		if !res.Units[u].Simulated {
			continue
		}
		from.Host[u] = res.Units[u].Host
		if t, ok := res.MarkEnd(u, "resume"); ok {
			from.Host[u] = max(from.Host[u], t)
		}
	}
	for p, prog := range pl.Programs {
		if n := len(prog.Tasks); n > 0 {
			last := prog.Tasks[n-1]
			last.Ops, last.Deps, last.HostWait = nil, nil, nil
			from.Last[p] = &last
		}
	}
	return from
}
