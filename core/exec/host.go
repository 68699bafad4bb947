package exec

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Execution modes: how the host issues a rank's kernels.
const (
	// Eager: the framework issues every kernel from the host, one after
	// another in program order (PyTorch eager, as Megatron-LM runs).
	Eager = "eager"
	// CUDAGraphs: captured work (a decode step) is replayed from a CUDA
	// graph: one host launch per graph, a smaller device gap per kernel.
	CUDAGraphs = "cuda_graphs"
)

// ExecutionModes lists the allowed modes.
func ExecutionModes() []string { return []string{Eager, CUDAGraphs} }

// Host costs, in seconds, of one kernel issued by an eager framework. The
// breakdown is J. Lin, "From PyTorch op to kernel launch" (GPU kernel
// serving lessons, 2025, the per-layer cost table of one PyTorch operator
// on a CUDA 12 driver): Python bytecode ~1 µs, the pybind11 boundary ~1 µs,
// autograd recording (VariableType) 1–3 µs, the ATen dispatcher 1–2 µs,
// the backend's algorithm choice 1–5 µs (cached after the first call),
// cudaLaunchKernel 1–3 µs; 5–25 µs in all. The constants take each layer's
// midpoint.
const (
	// HostForwardOpS is one operator without autograd (inference, the
	// optimizer, an NCCL call through c10d): 1 + 1 + 1.5 + 3 + 2 µs.
	HostForwardOpS = 8.5e-6
	// HostAutogradS is what recording the op for backward adds in training
	// (the forward and its recomputation): the autograd layer's 2 µs.
	HostAutogradS = 2e-6
	// HostBackwardOpS is one backward operator run by the autograd engine
	// (C++, no Python or binding): the engine's node dispatch (the
	// autograd layer, 2 µs) + ATen 1.5 + backend 3 + launch 2 µs.
	HostBackwardOpS = 8.5e-6
	// HostExtraKernelS is each further kernel of a multi-kernel operator
	// (the Mamba-2 SSD scan's Triton kernels): the launch call only.
	HostExtraKernelS = 2e-6
	// HostCollectiveS is an NCCL collective or send/receive issued through
	// torch.distributed (Python, binding, c10d's ProcessGroupNCCL,
	// ncclGroup and the kernel launch): one no-grad operator's path.
	HostCollectiveS = HostForwardOpS
	// HostMoELayerOpS is one operator of a mixture-of-experts layer in
	// eager training (model.Op.MoELayer: the router, the token
	// dispatcher's permutations, the grouped expert GEMMs and their
	// activation, forward and backward), each standing for the module code
	// Megatron-Core runs around it: the router's top-k and auxiliary-loss
	// bookkeeping, the dispatcher's split sizes and metadata, Transformer
	// Engine's grouped linear layers splitting their input and issuing one
	// cuBLAS call per expert. Fitted, as no single measurement states it,
	// on Megatron-LM's own CI: the iteration times its functional tests
	// record on a DGX H100 for small mixture-of-experts GPTs and for the
	// dense GPT of the same configuration, whose GPUs are nearly idle, so
	// that their difference is the MoE layers' host time (bench/fidelity
	// MoEHostPairs, FitMoELayerHost: the median of the pairs' own values;
	// MOE_FIDELITY.md). About 30 times a plain operator's 10.5 µs.
	HostMoELayerOpS = 320e-6
)

// LaunchQueueKernels is how many launched kernels may wait for the GPU
// before the next launch blocks the host: about 1,000 per stream, measured
// (NVIDIA developer forums, "CUDA stream are blocked when launch lots of
// kernels (>1000)", 2019: the first ~1,000 launches of a 190 µs kernel take
// 4–5 µs each, then each takes the kernel's 190 µs). CUDA documents no
// figure; 1,024 is the conventional size.
const LaunchQueueKernels = 1024

// Gaps between consecutive kernels on one stream, on the device, beyond
// each kernel's own duration (hw.GPU.KernelLaunchS is part of that
// duration: the profiler's kernel timer shows it, and neither a stream nor
// a graph shortens a kernel). NVIDIA's "Getting Started with CUDA Graphs"
// (A. Gray, 2019) runs 2.9 µs kernels back to back: 3.8 µs each launched
// on a stream, 3.4 µs each replayed from a graph: a 0.9 µs gap
// (StreamGapS) and a 0.5 µs gap (GraphGapS). GraphLaunchS is the host's
// cost of replaying one captured graph (one Python call into
// torch.cuda.CUDAGraph.replay and one cudaGraphLaunch): one no-grad
// operator's path.
const (
	StreamGapS   = 0.9e-6
	GraphGapS    = 0.5e-6
	GraphLaunchS = HostForwardOpS
)

// Host describes how the host issues a run's kernels. The zero value
// (Mode "") models no host: every kernel runs as soon as its stream and
// dependencies allow.
type Host struct {
	// Mode is Eager or CUDAGraphs ("" = no host model).
	Mode string
	// Autograd is true in training: forward operators record for backward.
	Autograd bool
	// Captured, with CUDAGraphs, says which tasks run from a captured graph
	// (nil: all); the others are issued eagerly. Consecutive captured tasks
	// of the same micro-batch or decode step form one graph.
	Captured func(t *workload.Task) bool
	// Overrides of the per-kernel host costs (0 = the constants above).
	ForwardOpS, BackwardOpS, CollectiveS float64
	// MoEOpS overrides HostMoELayerOpS (0 keeps it).
	MoEOpS float64
}

// EagerHost is Megatron-LM training's host: PyTorch eager with autograd.
func EagerHost() Host { return Host{Mode: Eager, Autograd: true} }

func orDefault(x, d float64) float64 {
	if x > 0 {
		return x
	}
	return d
}

// opHostS is the host's time to issue one operator's kernels eagerly.
func (h *Host) opHostS(o model.Op, kernels int) float64 {
	extra := float64(max(kernels, 1)-1) * HostExtraKernelS
	if o.MoELayer && h.Autograd {
		return orDefault(h.MoEOpS, HostMoELayerOpS) + extra
	}
	var s float64
	switch o.Pass {
	case model.Backward:
		s = orDefault(h.BackwardOpS, HostBackwardOpS)
	case model.Optimizer:
		s = orDefault(h.ForwardOpS, HostForwardOpS)
	default:
		s = orDefault(h.ForwardOpS, HostForwardOpS)
		if h.Autograd {
			s += HostAutogradS
		}
	}
	return s + extra
}

func (h *Host) collectiveS() float64 { return orDefault(h.CollectiveS, HostCollectiveS) }

// Kernel is an operator's device cost as exec schedules it.
type Kernel struct {
	// DeviceS is the kernels' device time (each kernel's fixed device
	// time included, hw.GPU.KernelLaunchS).
	DeviceS float64
	// Kernels is the number of kernel launches (at least 1).
	Kernels int
	// MathS is the part of DeviceS bound by the SMs' math or shared memory
	// (the rest waits on L2 or HBM): interference slows the two apart.
	MathS float64
}

// kernelTimes are an operator's device time and the host's time to issue
// it. On the device each kernel is followed by the stream's gap to the
// next: GraphGapS from a captured graph (graph), StreamGapS issued eagerly
// (none without a host model). Only a graph's first kernel (launch) costs
// the host its replay; eagerly, the host pays the operator's dispatch.
func (h *Host) kernelTimes(o model.Op, c Kernel, graph, launch bool) (devS, hostS float64) {
	devS = c.DeviceS
	kernels := float64(max(c.Kernels, 1))
	switch {
	case h.Mode == "":
	case graph:
		devS += kernels * GraphGapS
		if launch {
			hostS = GraphLaunchS
		}
	default:
		devS += kernels * StreamGapS
		hostS = h.opHostS(o, c.Kernels)
	}
	return devS, hostS
}

// Issue summarizes kernels and collectives run one after another on a
// stream as the host issues them, both free at the start: HostS is the
// host's time to issue them all, DeviceS their device time and EndS when the
// last ends, max over j of (host time to issue items 1..j) + (device time
// of items j..n) — the closed form exec prices its compute tasks with.
// Sequences compose with Then, so callers can memoize their parts (the
// serving kind prices engine iterations this way).
type Issue struct{ HostS, DeviceS, EndS float64 }

// Then is a followed by b on the same stream and host.
func (a Issue) Then(b Issue) Issue {
	return Issue{HostS: a.HostS + b.HostS, DeviceS: a.DeviceS + b.DeviceS, EndS: max(a.EndS+b.DeviceS, a.HostS+b.EndS)}
}

// KernelIssue is one operator's kernels as h issues them (graph, launch as
// for a compute task of exec: replayed from a captured graph, launch for
// the graph's first).
func (h *Host) KernelIssue(o model.Op, k Kernel, graph, launch bool) Issue {
	d, hs := h.kernelTimes(o, k, graph, launch)
	return Issue{HostS: hs, DeviceS: d, EndS: hs + d}
}

// CommIssue is a collective taking devS once started, as h issues it: an
// eager host pays NCCL's call through c10d, a captured one nothing (but
// the replay, for the graph's first).
func (h *Host) CommIssue(devS float64, graph, launch bool) Issue {
	var hs float64
	switch {
	case h.Mode == "":
	case graph:
		if launch {
			hs = GraphLaunchS
		}
	default:
		hs = h.collectiveS()
	}
	return Issue{HostS: hs, DeviceS: devS, EndS: hs + devS}
}

// taskCost is a compute task's schedule on a unit, priced once per program:
// its stream free at S and the host reaching it at H0, its first kernel
// starts at F = max(S, H0 + First) and it ends at max(F + D, H0 + A).
type taskCost struct {
	// D is the device time; Math its math-bound part.
	D, Math sim.Time
	// A is the host-issue floor of the end: max over kernels j of (host
	// time to issue kernels 1..j) + (device time of kernels j..n).
	A sim.Time
	// Star is the device time after the kernel that sets A (a straggler's
	// slowdown stretches it).
	Star sim.Time
	// Host is the host's time to issue the whole task; First its first kernel.
	Host, First sim.Time
	// Kernels launched.
	Kernels int32
}

// priceTask computes a compute task's taskCost from its operators' costs
// and the host's issue cost of each (graph: the task is replayed from a
// captured graph; launch: it is the graph's first task, which pays the
// replay launch).
func (e *engine) priceTask(ops []model.Op, costs []Kernel, graph, launch bool) taskCost {
	h := &e.opt.Host
	var tc taskCost
	n := len(ops)
	dev := make([]float64, n)
	host := make([]float64, n)
	var math float64
	for j, o := range ops {
		c := costs[j]
		dev[j], host[j] = h.kernelTimes(o, c, graph, launch && j == 0)
		if c.DeviceS > 0 {
			math += c.MathS * dev[j] / c.DeviceS
		}
		tc.Kernels += int32(max(c.Kernels, 1))
	}
	var total float64
	for _, d := range dev {
		total += d
	}
	// A = max_j (Σ_{i≤j} host_i + Σ_{i≥j} dev_i): kernel j cannot start
	// before the host has issued it, and the kernels after it follow.
	var hostCum, best, star float64
	suffix := total
	for j := 0; j < n; j++ {
		hostCum += host[j]
		if v := hostCum + suffix; v > best || j == 0 {
			best, star = v, suffix
		}
		suffix -= dev[j]
	}
	tc.D = sim.SecondsCeil(total)
	tc.Math = sim.SecondsCeil(math)
	tc.A = sim.SecondsCeil(best)
	tc.Star = sim.SecondsCeil(star)
	tc.Host = sim.SecondsCeil(hostCum)
	if n > 0 {
		tc.First = sim.SecondsCeil(host[0])
	}
	return tc
}

// hostPlan is a program's host schedule, priced once per program.
type hostPlan struct {
	// cost is each compute task's schedule (zero for communication).
	cost []taskCost
	// issue is the host's time to issue each task.
	issue []sim.Time
	// queueWait is the task whose end frees the launch queue for task i
	// (−1: the queue has room).
	queueWait []int32
}

// planHost prices a program's host schedule from its operators' kernels;
// prev, if set, is the task before the program's first (a session's plan
// continuing the one before: Resume).
func (e *engine) planHost(p *workload.Program, kernel func(model.Op) (Kernel, error), cache map[opsKey]taskCost, prev *workload.Task) (hostPlan, error) {
	h := &e.opt.Host
	hp := hostPlan{cost: make([]taskCost, len(p.Tasks)), issue: make([]sim.Time, len(p.Tasks)), queueWait: make([]int32, len(p.Tasks))}
	// Graph boundaries: a captured task starts a new graph unless the task
	// before it in program order is captured and of the same step.
	capturedTask := func(t *workload.Task) bool {
		if h.Mode != CUDAGraphs {
			return false
		}
		return h.Captured == nil || h.Captured(t)
	}
	captured := func(i int) bool { return capturedTask(&p.Tasks[i]) }
	var costs []Kernel
	// cum[i] is the number of kernels issued before task i.
	cum := make([]int64, len(p.Tasks)+1)
	for i := range p.Tasks {
		if err := e.canceled(i); err != nil {
			return hostPlan{}, err
		}
		task := &p.Tasks[i]
		graph := captured(i)
		var launch bool
		switch {
		case !graph:
		case i > 0:
			launch = !captured(i-1) || p.Tasks[i-1].MicroBatch != task.MicroBatch
		default:
			launch = prev == nil || !capturedTask(prev) || prev.MicroBatch != task.MicroBatch
		}
		switch {
		case task.Kind == workload.Compute && len(task.Ops) > 0:
			key := opsKey{&task.Ops[0], len(task.Ops)<<2 | b2i(graph)<<1 | b2i(launch)}
			tc, ok := cache[key]
			if !ok {
				costs = costs[:0]
				for _, o := range task.Ops {
					c, err := kernel(o)
					if err != nil {
						return hp, fmt.Errorf("pricing %s: %w", o.Name, err)
					}
					costs = append(costs, c)
				}
				tc = e.priceTask(task.Ops, costs, graph, launch)
				cache[key] = tc
			}
			hp.cost[i] = tc
			hp.issue[i] = tc.Host
			cum[i+1] = cum[i] + int64(tc.Kernels)
		case task.Kind != workload.Compute:
			if h.Mode != "" && !graph {
				hp.issue[i] = sim.SecondsCeil(h.collectiveS())
			} else if launch && h.Mode != "" {
				hp.issue[i] = sim.SecondsCeil(GraphLaunchS)
			}
			cum[i+1] = cum[i] + 1
		default:
			cum[i+1] = cum[i]
		}
	}
	// The host may not issue task i while more than LaunchQueueKernels of
	// the kernels before its end are unfinished: it waits for the last
	// task j whose kernels must have left the queue.
	j := -1
	for i := range p.Tasks {
		hp.queueWait[i] = -1
		if h.Mode == "" {
			continue
		}
		for j+1 < i && cum[j+2] <= cum[i+1]-LaunchQueueKernels {
			j++
		}
		if j >= 0 && cum[j+1] <= cum[i+1]-LaunchQueueKernels {
			hp.queueWait[i] = int32(j)
		}
	}
	return hp, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hostState is a simulated unit's host thread.
type hostState struct {
	// next is the next task to issue; at the host's time when it is free.
	next int32
	at   sim.Time
	// issued[i] is when the host reached task i (valid for i < next).
	issued []sim.Time
	// waitFor is the task the host is blocked on (−1: running).
	waitFor int32
	// resumed: at is the host's clock carried from the plan before
	// (Resume), not to be moved to the first advance's time.
	resumed bool
}

// advance runs unit u's host thread as far as it can: it issues tasks in
// program order, each after the host's cost of the one before, and stops at
// a task whose synchronisation (Task.HostWait) or launch-queue slot waits
// on a task that has not finished; finish resumes it. Every task the host
// reaches is offered to tryStart.
func (e *engine) advance(u int) {
	st := &e.units[u]
	hs := &st.host
	prog := e.plan.Units[u].Program
	p := &e.plan.Programs[prog]
	hp := &e.progs[prog].host
	now := e.k.Now()
	hs.waitFor = -1
	if hs.at < now && !hs.resumed {
		hs.at = now
	}
	hs.resumed = false
	for int(hs.next) < len(p.Tasks) {
		i := hs.next
		if w := hp.queueWait[i]; w >= 0 && !e.done(u, w) {
			hs.waitFor = w
			return
		}
		for _, w := range p.Tasks[i].HostWait {
			if !e.done(u, w) {
				hs.waitFor = w
				return
			}
			hs.at = max(hs.at, e.res.Units[u].End[w])
		}
		hs.issued[i] = hs.at
		hs.at += hp.issue[i]
		hs.next++
		e.tryStart(u, i)
	}
	e.res.Units[u].Host = hs.at
}

// done reports whether task i of unit u has finished.
func (e *engine) done(u int, i int32) bool {
	st := &e.units[u]
	return st.started[i] && st.finished[i]
}
