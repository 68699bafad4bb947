package faultsweep

import (
	"errors"
	"fmt"

	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/collective"
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
	// run simulates the base with extra faults on top of its own.
	run(env scenario.Env, extra spec.Faults) (outcome, error)
	// topology names devices and links (the state of its health is the
	// base's between runs).
	topology() *topo.Topology
}

// underBase moves a spec error's paths under the base's field
// ("parallel.tp" -> "training.parallel.tp"); other errors pass unchanged.
func underBase(kind string, err error) error {
	var se *spec.Error
	if !errors.As(err, &se) {
		return err
	}
	out := &spec.Error{}
	for _, p := range se.Problems {
		if p.Path == "" {
			p.Path = kind
		} else {
			p.Path = spec.Field(kind, p.Path)
		}
		out.Problems = append(out.Problems, p)
	}
	return out
}

func newBase(s *spec.FaultSweep) (base, error) {
	switch s.BaseKind() {
	case "training":
		return newPlanBase(sweepJob(job.Training(s.Training)), func(ranks int) (*workload.Plan, error) {
			_, p, err := job.TrainingPlan(s.Training, ranks)
			if err != nil {
				return nil, err
			}
			return p.Plan, nil
		})
	case "inference":
		return newPlanBase(sweepJob(job.Inference(s.Inference)), func(ranks int) (*workload.Plan, error) {
			_, p, err := job.InferencePlan(s.Inference, ranks, nil)
			if err != nil {
				return nil, err
			}
			return p.Plan, nil
		})
	case "collective":
		t, err := topo.FromSpec(s.Collective.Cluster)
		if err != nil {
			return nil, err
		}
		return &collectiveBase{s: s.Collective, t: t}, nil
	}
	return nil, fmt.Errorf("fault_sweep: no base run")
}

// sweepJob is the base kind's job as a sweep runs it: with ring streams
// (a sweep does not take the base's ring_steps).
func sweepJob(j job.Job) job.Job {
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
	m, err := exec.NewMachine(j.Cluster, j.GPU, spec.Faults{}, j.Seed)
	if err != nil {
		return nil, err
	}
	t := m.Fabric.Topology()
	plan, err := build(t.NumRanks())
	if err != nil {
		return nil, err
	}
	ref, err := topo.FromSpec(j.Cluster)
	if err != nil {
		return nil, err
	}
	b := &planBase{job: j, t: t, gpu: m.GPU, plan: plan, cost: m.Cost, kernel: m.Kernel, ref: ref}
	for _, l := range t.Links {
		b.health = append(b.health, l.Health)
	}
	return b, nil
}

func (b *planBase) topology() *topo.Topology { return b.t }

func (b *planBase) run(env scenario.Env, extra spec.Faults) (outcome, error) {
	defer b.restore()
	m, err := exec.NewMachineOn(b.t, b.gpu, mergeFaults(b.job.Faults, extra), b.job.Seed)
	if err != nil {
		return outcome{}, err
	}
	opt := b.job.Options(m)
	opt.Cost, opt.Kernel = b.cost, b.kernel
	opt.HealthyRoute = b.healthyRoute
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

func (b *planBase) healthyRoute(src, dst int) []int32 {
	p, _ := b.ref.Route(src, dst) // nil when unreachable even healthy
	return p
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

// collectiveBase reruns the collective scenario with the extra faults.
type collectiveBase struct {
	s *spec.Collective
	t *topo.Topology
}

func (b *collectiveBase) topology() *topo.Topology { return b.t }

func (b *collectiveBase) run(env scenario.Env, extra spec.Faults) (outcome, error) {
	cs := *b.s
	cs.Faults = mergeFaults(b.s.Faults, extra)
	res, err := collective.Kind().Run(scenario.Env{Ctx: env.Context()}, &cs)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{bytes: make([]float64, len(b.t.Links))}
	for _, tb := range res.Tables {
		switch rows := tb.Rows.(type) {
		case []collective.SummaryRow:
			out.timeS = rows[0].TimeS
		case []collective.LinkRow:
			for _, r := range rows {
				out.bytes[r.Link] += r.Bytes
			}
		}
	}
	return out, nil
}
