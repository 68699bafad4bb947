package faultsweep

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// outcome is one simulated run: its time and the bytes each link carried.
type outcome struct {
	timeS float64
	bytes []float64
}

// base is the run a sweep repeats under faults.
type base interface {
	// run simulates the base with extra faults (of the topology's ids) on
	// top of its own.
	run(env scenario.Env, extra net.FaultPlan) (outcome, error)
	// topology names devices and links (the state of its health is the
	// base's between runs).
	topology() *topo.Topology
}

// newBase compiles the sweep's base run with its path prefix ("training",
// "inference", "collective"): its cluster, faults and layout are checked
// here, so every problem carries the path the user wrote. canceled (if set)
// is polled while a plan is built.
func newBase(s *spec.FaultSweep, canceled func() error) (base, error) {
	kind := s.BaseKind()
	switch kind {
	case "training":
		return newPlanBase(sweepJob(kind, job.Training(s.Training)), func(ranks int) (*workload.Plan, error) {
			_, p, err := job.TrainingPlan(s.Training, ranks, canceled)
			if err != nil {
				return nil, problem.Under(kind, err)
			}
			return p.Plan, nil
		})
	case "inference":
		return newPlanBase(sweepJob(kind, job.Inference(s.Inference)), func(ranks int) (*workload.Plan, error) {
			_, p, err := job.InferencePlan(s.Inference, ranks, canceled)
			if err != nil {
				return nil, problem.Under(kind, err)
			}
			return p.Plan, nil
		})
	case "collective":
		if err := job.CheckCollective(kind, s.Collective); err != nil {
			return nil, err
		}
		t, err := compile.Topology(kind, s.Collective.Cluster)
		if err != nil {
			return nil, err
		}
		return &collectiveBase{s: s.Collective, t: t}, nil
	}
	return nil, fmt.Errorf("fault_sweep: no base run")
}

// sweepJob is the base kind's job as a sweep runs it: under the base's
// path, with ring streams (a sweep does not take the base's ring_steps).
func sweepJob(kind string, j job.Job) job.Job {
	j.Path = kind
	j.RingSteps = false
	return j
}

// planBase runs a training or inference plan. The plan, the topology (with
// its route cache) and the operator costs are built once; each run gets a
// fresh kernel and fabric, and the topology's health is restored after it.
type planBase struct {
	job    job.Job
	t      *topo.Topology
	gpu    hw.GPU
	faults net.FaultPlan // the base's own, compiled on t
	plan   *workload.Plan
	cost   func(model.Op) (float64, error)
	kernel func(model.Op) (exec.Kernel, error)
	health []float64 // the built topology's link health
	// ref is the same cluster never faulted: its routes tell exec which
	// replicas a failure rerouted, so the others are still mirrored.
	ref *topo.Topology
}

func newPlanBase(j job.Job, build func(ranks int) (*workload.Plan, error)) (*planBase, error) {
	// The machine without the base's faults: its topology is the one every
	// run faults and restores, and its operator costs serve every run (they
	// do not depend on faults; stragglers scale them inside exec).
	m, err := compile.Machine(j.Path, j.Cluster, j.GPU, spec.Faults{}, j.Seed)
	if err != nil {
		return nil, err
	}
	t := m.Fabric.Topology()
	faults, err := compile.Faults(j.Path, j.Faults, t)
	if err != nil {
		return nil, err
	}
	plan, err := build(t.NumRanks())
	if err != nil {
		return nil, err
	}
	ref, err := compile.Topology(j.Path, j.Cluster)
	if err != nil {
		return nil, err
	}
	b := &planBase{job: j, t: t, gpu: m.GPU, faults: faults, plan: plan, cost: m.Cost, kernel: m.Kernel, ref: ref}
	for _, l := range t.Links {
		b.health = append(b.health, l.Health)
	}
	return b, nil
}

func (b *planBase) topology() *topo.Topology { return b.t }

func (b *planBase) run(env scenario.Env, extra net.FaultPlan) (outcome, error) {
	defer b.restore()
	m, err := exec.NewMachine(b.t, b.gpu, b.faults.With(extra), b.job.Seed)
	if err != nil {
		return outcome{}, err
	}
	opt := b.job.Options(m)
	opt.Cost, opt.Kernel = b.cost, b.kernel
	opt.HealthyRoute = job.HealthyRoute(b.ref)
	res, err := exec.Run(env.Context(), b.plan, opt)
	if err != nil {
		return outcome{}, err
	}
	stats := m.Fabric.LinkStats()
	bytes := make([]float64, len(stats))
	for i, st := range stats {
		bytes[i] = st.Bytes
	}
	return outcome{timeS: res.End.Seconds(), bytes: bytes}, nil
}

// restore brings the shared topology back to its built state; routes stay
// cached unless a link or device changed usability.
func (b *planBase) restore() {
	for l, h := range b.health {
		b.t.SetHealth(l, h)
	}
	for d := range b.t.Devices {
		b.t.SetDeviceDown(d, false)
	}
}

// collectiveBase reruns the collective spec's one (algorithm, size) with
// the extra faults, on a fresh cluster each time (job.RunCollective).
type collectiveBase struct {
	s *spec.Collective
	t *topo.Topology
}

func (b *collectiveBase) topology() *topo.Topology { return b.t }

func (b *collectiveBase) run(env scenario.Env, extra net.FaultPlan) (outcome, error) {
	run, err := job.RunCollective(env.Context(), "collective", b.s, b.s.Algorithms[0], b.s.SizesBytes[0], extra, false)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{timeS: max(run.End().Seconds(), run.HostFloor(b.s)), bytes: make([]float64, len(b.t.Links))}
	for _, st := range run.Fabric.LinkStats() {
		out.bytes[st.Link] += st.Bytes
	}
	return out, nil
}
