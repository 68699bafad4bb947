// Scheduling: a simulated unit's tasks start when their dependencies are
// done, their serial stream is free and (with a host model) the host has
// issued them; a finished task releases its dependents and its stream.

package exec

import (
	"fmt"
	"sort"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/workload"
)

type progInfo struct {
	dependents [][]int32
	streams    [workload.NumStreams][]int32
	nominal    []sim.Time
	host       hostPlan
}

type unitState struct {
	remaining []int32
	started   []bool
	finished  []bool
	head      [workload.NumStreams]int32
	slow      float64
	done      int
	host      hostState
	busy      busyState
}

func (e *engine) startUnit(u int) {
	st := &e.units[u]
	if e.opt.Host.Mode != "" {
		e.advance(u)
		return
	}
	for i := range st.remaining {
		if st.remaining[i] == 0 {
			e.tryStart(u, int32(i))
		}
	}
}

func (e *engine) tryStart(u int, i int32) {
	st := &e.units[u]
	if st.started[i] || st.remaining[i] > 0 {
		return
	}
	hostOn := e.opt.Host.Mode != ""
	if hostOn && i >= st.host.next {
		return // the host has not issued it yet
	}
	prog := e.plan.Units[u].Program
	p := &e.plan.Programs[prog]
	task := &p.Tasks[i]
	if task.Stream.Serial() && e.progs[prog].streams[task.Stream][st.head[task.Stream]] != i {
		return
	}
	st.started[i] = true
	now := e.k.Now()
	hp := &e.progs[prog].host
	if task.Kind == workload.Compute {
		tc := &hp.cost[i]
		d, a := tc.D, tc.A
		if st.slow != 1 {
			d = sim.Time(float64(d) * st.slow)
			a += sim.Time(float64(tc.Star) * (st.slow - 1))
		}
		start, end := now, now+d
		if hostOn {
			h0 := st.host.issued[i]
			start = max(now, h0+tc.First)
			end = max(start+d, h0+a)
		}
		e.res.Units[u].Start[i] = start
		e.startCompute(u, i, start, d, end)
		return
	}
	if hostOn {
		// The NCCL kernel is enqueued when the host's call returns.
		if t := st.host.issued[i] + hp.issue[i]; t > now {
			e.k.At(t, func() { e.arrive(u, i, task) })
			return
		}
	}
	e.arrive(u, i, task)
}

// Handle completes a compute task (the kernel's handler argument is
// unit<<32|task); a task whose end was moved (interference) ignores its
// stale events.
func (e *engine) Handle(arg int) {
	u, i := arg>>32, int32(arg&0xffffffff)
	if e.units[u].finished[i] {
		return // a stale end of a task whose end moved earlier
	}
	if b := &e.units[u].busy; b.task == i {
		if e.k.Now() != b.end {
			return
		}
		e.recordStretch(u, b)
		b.task = -1
	}
	e.finish(u, i)
}

func (e *engine) finish(u int, i int32) {
	st := &e.units[u]
	now := e.k.Now()
	e.res.Units[u].End[i] = now
	if now > e.res.End {
		e.res.End = now
	}
	st.done++
	st.finished[i] = true
	prog := e.plan.Units[u].Program
	task := &e.plan.Programs[prog].Tasks[i]
	if task.Kind != workload.Compute {
		e.commEnd(u, task)
	}
	if task.Stream.Serial() {
		st.head[task.Stream]++
		list := e.progs[prog].streams[task.Stream]
		if h := st.head[task.Stream]; int(h) < len(list) {
			e.tryStart(u, list[h])
		}
	}
	for _, d := range e.progs[prog].dependents[i] {
		st.remaining[d]--
		if st.remaining[d] == 0 {
			e.tryStart(u, d)
		}
	}
	if st.host.waitFor == i {
		e.advance(u)
	}
}

// describeStalls names blocked tasks when the event queue runs dry.
func (e *engine) describeStalls() []string {
	var out []string
	keys := make([]uint64, 0, len(e.rv))
	for k := range e.rv {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		r := e.rv[k]
		a := r.arrived[0]
		u, i := int(a>>32), int(a&0xffffffff)
		task := e.plan.Programs[e.plan.Units[u].Program].Tasks[i]
		out = append(out, fmt.Sprintf("%s (tag %d) waits for %d of %d units (unit %d arrived)",
			task.Name, task.Tag, e.driven[int(k>>32)]-len(r.arrived), e.driven[int(k>>32)], u))
		if len(out) >= 5 {
			break
		}
	}
	return out
}
