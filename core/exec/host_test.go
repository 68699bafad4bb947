package exec

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chainPlan is one unit of one rank running one compute task of the given
// inference (no-autograd) forward operators, priced by dev (seconds each).
func chainPlan(n int) *workload.Plan {
	ops := make([]model.Op, n)
	for i := range ops {
		ops[i] = model.Op{Name: "k", Kind: model.Elementwise, Pass: model.Forward}
	}
	prog := workload.Program{Tasks: []workload.Task{{Name: "chain", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: ops}}}
	u := workload.Unit{Ranks: []int{0}}
	for i := range u.Groups {
		u.Groups[i] = -1
	}
	return &workload.Plan{Programs: []workload.Program{prog}, Units: []workload.Unit{u}, Replicas: [][]int{{0}}, Ranks: 1}
}

func kernelOf(devS float64) func(model.Op) (Kernel, error) {
	return func(model.Op) (Kernel, error) { return Kernel{DeviceS: devS, Kernels: 1}, nil }
}

func runChain(t *testing.T, p *workload.Plan, k func(model.Op) (Kernel, error), h Host) float64 {
	res, err := Run(context.Background(), p, Options{Fabric: dgx(t, 1), Kernel: k, Host: h})
	require.NoError(t, err)
	return res.End.Seconds()
}

// N kernels of 1 µs, each issued by the host at HostForwardOpS = 8.5 µs:
// kernel j starts when the host has issued it, at j·h, and the last ends at
// N·h + 1 µs + its stream gap g (host-bound: Σ host ≫ Σ device).
func TestEagerTinyKernelsAreHostBound(t *testing.T) {
	const n, dev = 100, 1e-6
	got := runChain(t, chainPlan(n), kernelOf(dev), Host{Mode: Eager})
	assert.InEpsilon(t, n*HostForwardOpS+dev+StreamGapS, got, 1e-6)
}

// N kernels of 1 ms: the host issues kernel 1 at h and is then ahead, so
// the kernels run back to back, each followed by the stream's gap g:
// h + N·(1 ms + g) (Σ device + first issue).
func TestEagerLongKernelsAreDeviceBound(t *testing.T) {
	const n, dev = 50, 1e-3
	got := runChain(t, chainPlan(n), kernelOf(dev), Host{Mode: Eager})
	assert.InEpsilon(t, HostForwardOpS+n*(dev+StreamGapS), got, 1e-9)
	// Without a host model the kernels run back to back with no gap.
	assert.InEpsilon(t, n*dev, runChain(t, chainPlan(n), kernelOf(dev), Host{}), 1e-9)
}

// Mixed: one 1 ms kernel then N 1 µs kernels. The host issues the long one
// at h and the rest by (N+1)·h; the short ones follow the long one back to
// back if the host is ahead: end = max(h + 1 ms + N·1 µs, (N+1)·h + 1 µs),
// every kernel followed by the stream gap g.
// With N = 50 the device side wins (1.0585 ms > 0.4345 ms); with N = 200
// the host's (1.7085 ms > 1.2085 ms).
func TestEagerMixedChain(t *testing.T) {
	const long, short = 1e-3, 1e-6
	for _, n := range []int{50, 200} {
		p := chainPlan(n + 1)
		k := func(o model.Op) (Kernel, error) { return Kernel{DeviceS: short, Kernels: 1}, nil }
		first := &p.Programs[0].Tasks[0].Ops[0]
		kk := func(o model.Op) (Kernel, error) {
			if o.Name == "long" {
				return Kernel{DeviceS: long, Kernels: 1}, nil
			}
			return k(o)
		}
		first.Name = "long"
		h := HostForwardOpS
		g := StreamGapS
		want := max(h+long+g+float64(n)*(short+g), float64(n+1)*h+short+g)
		assert.InEpsilon(t, want, runChain(t, p, kk, Host{Mode: Eager}), 1e-6, "n=%d", n)
	}
}

// A replayed CUDA graph: one host launch, then every kernel's device time
// (its fixed device time included: a graph does not shorten a kernel) and
// the graph's gap: GraphLaunchS + N·(dev + GraphGapS).
func TestCUDAGraphReplay(t *testing.T) {
	const n, dev = 100, 5e-6
	got := runChain(t, chainPlan(n), kernelOf(dev), Host{Mode: CUDAGraphs})
	assert.InEpsilon(t, GraphLaunchS+n*(dev+GraphGapS), got, 1e-6)
	// The same kernels eager: host-bound at N·h + the last kernel and its gap.
	eager := runChain(t, chainPlan(n), kernelOf(dev), Host{Mode: Eager})
	assert.InEpsilon(t, n*HostForwardOpS+dev+StreamGapS, eager, 1e-6)
}

// Autograd adds its recording cost to each forward op; backward ops cost
// the engine's dispatch.
func TestHostCostByPass(t *testing.T) {
	h := Host{Mode: Eager, Autograd: true}
	assert.InDelta(t, HostForwardOpS+HostAutogradS, h.opHostS(model.Op{Pass: model.Forward}, 1), 1e-12)
	assert.InDelta(t, HostBackwardOpS, h.opHostS(model.Op{Pass: model.Backward}, 1), 1e-12)
	assert.InDelta(t, HostForwardOpS+4*HostExtraKernelS, h.opHostS(model.Op{Pass: model.Optimizer}, 5), 1e-12)
}

// A mixture-of-experts layer's operators cost training's host the MoE
// layer's figure, forward and backward alike (or the override); inference
// engines' (no autograd) pay a plain operator's.
func TestMoELayerHostCost(t *testing.T) {
	train := Host{Mode: Eager, Autograd: true}
	for _, p := range []model.Pass{model.Forward, model.Backward} {
		assert.InDelta(t, HostMoELayerOpS, train.opHostS(model.Op{Pass: p, MoELayer: true}, 1), 1e-12)
	}
	assert.InDelta(t, HostMoELayerOpS+2*HostExtraKernelS, train.opHostS(model.Op{Pass: model.Forward, MoELayer: true}, 3), 1e-12)
	train.MoEOpS = 50e-6
	assert.InDelta(t, 50e-6, train.opHostS(model.Op{Pass: model.Backward, MoELayer: true}, 1), 1e-12)
	infer := Host{Mode: Eager}
	assert.InDelta(t, HostForwardOpS, infer.opHostS(model.Op{Pass: model.Forward, MoELayer: true}, 1), 1e-12)
	assert.Greater(t, HostMoELayerOpS, HostForwardOpS+HostAutogradS)
}

// The launch queue: 3,000 kernels of 10 µs issued at 8.5 µs each in tasks
// of 10 kernels. The host gets ahead by 2.4 µs per kernel (each kernel
// and its stream gap take 10.9 µs) and never fills the 1,024-entry queue
// in 3,000 kernels (it would need ~4,300), so the run is device-bound:
// h + 3,000 · 10.9 µs. With 1 µs kernels, host-bound as ever.
func TestLaunchQueueBoundsRunAhead(t *testing.T) {
	const tasks, per = 300, 10
	ops := make([]model.Op, per)
	for i := range ops {
		ops[i] = model.Op{Name: "k", Kind: model.Elementwise, Pass: model.Forward}
	}
	var prog workload.Program
	for i := 0; i < tasks; i++ {
		var d []int32
		if i > 0 {
			d = []int32{int32(i - 1)}
		}
		prog.Tasks = append(prog.Tasks, workload.Task{Name: "t", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: ops, Deps: d})
	}
	p := chainPlan(1)
	p.Programs[0] = prog
	got := runChain(t, p, kernelOf(10e-6), Host{Mode: Eager})
	assert.InEpsilon(t, HostForwardOpS+tasks*per*(10e-6+StreamGapS), got, 1e-6)
	// Where the host waits for the queue: the same program's plan.
	e := &engine{opt: Options{Host: Host{Mode: Eager}}, plan: p}
	hp, err := e.planHost(&p.Programs[0], kernelOf(1e-6), map[opsKey]taskCost{}, nil)
	require.NoError(t, err)
	// Task i ends after 10(i+1) kernels; it waits for the last task whose
	// end leaves ≤ 1,024 kernels pending: task i − 103 (10·103 = 1,030).
	assert.Equal(t, int32(-1), hp.queueWait[101])
	assert.Equal(t, int32(0), hp.queueWait[103])
	assert.Equal(t, int32(100), hp.queueWait[203])
}

// The interference stretch in closed form: on 108 SMs with 24 held by a
// collective, math-bound time stretches by 108/84; memory-bound time by
// B/(B − r) with r = 3 × 25 GB/s (a ring over a 200 Gb/s NIC); none when
// no collective is in flight.
func TestInterferenceStretch(t *testing.T) {
	e := &engine{opt: Options{Interference: &Interference{SMs: 108, CTAs: 24, HBMBytesPerS: 2e12, TrafficPerWireByte: 3}}}
	b := &busyState{math: 1, held: 24, hbm: 3 * 25e9}
	assert.InDelta(t, 108.0/84, e.stretch(b), 1e-12)
	b.math = 0
	assert.InDelta(t, 2e12/(2e12-75e9), e.stretch(b), 1e-12)
	b.held = 0
	assert.Equal(t, 1.0, e.stretch(b))
	// A task run beside communication leaves one collective's SMs free
	// with none in flight, and no more with one.
	b.math, b.besideComm = 1, true
	assert.InDelta(t, 108.0/84, e.stretch(b), 1e-12)
	b.held = 24
	assert.InDelta(t, 108.0/84, e.stretch(b), 1e-12)
}

// A collective overlapping compute on the same unit slows it while in
// flight: a 1 ms task, then a ring all-reduce of S = 256 MiB (C = 2(n−1)/n ·
// S/B + 2(n−1) · 1 µs on a DGX A100's NVSwitch) beside a 10 ms math-bound
// task. The task runs at 1/f of its speed for C (f = 108/84), then at full
// speed: it ends at 1 ms + C + (10 ms − C/f). Without the collective, or
// without interference, at 11 ms.
func TestInterferenceSlowsOverlappedCompute(t *testing.T) {
	const S, B, n = 256 << 20, 300e9, 8.0
	ops := []model.Op{{Name: "gemm", Kind: model.GEMM}}
	long := []model.Op{{Name: "long", Kind: model.GEMM}}
	prog := workload.Program{Tasks: []workload.Task{
		{Name: "c0", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: ops},
		{Name: "ar", Kind: workload.Collective, Stream: workload.StreamDP, Coll: model.AllReduce, Bytes: S, Slot: workload.SlotTP, Deps: []int32{0}},
		{Name: "c1", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: long, Deps: []int32{0}},
	}}
	p := onePlan(S, 1)
	p.Programs[0] = prog
	cost := func(o model.Op) (float64, error) {
		if o.Name == "long" {
			return 10e-3, nil
		}
		return 1e-3, nil
	}
	in := &Interference{SMs: 108, CTAs: 24, HBMBytesPerS: 2e12, TrafficPerWireByte: 3}
	res, err := Run(context.Background(), p, Options{Fabric: dgx(t, 1), Cost: cost, Interference: in})
	require.NoError(t, err)
	C := 2*(n-1)/n*S/B + 2*(n-1)*1e-6
	f := 108.0 / 84
	assert.InEpsilon(t, 1e-3+C+(10e-3-C/f), res.End.Seconds(), 1e-6)
	// The slowed task's span and the rank's compute carry the time it took,
	// so none of it is counted idle.
	rk := res.Ranks()[0]
	assert.InEpsilon(t, res.End.Seconds(), rk.Compute.Seconds(), 1e-6)
	assert.Less(t, rk.Idle.Seconds(), 1e-8)
	require.NoError(t, res.EachSpan([]int{0}, func(s Span) error {
		if s.Name == "c1" {
			assert.InEpsilon(t, C+(10e-3-C/f), (s.End - s.Start).Seconds(), 1e-6)
		}
		return nil
	}))
	res, err = Run(context.Background(), p, Options{Fabric: dgx(t, 1), Cost: cost})
	require.NoError(t, err)
	assert.InEpsilon(t, 11e-3, res.End.Seconds(), 1e-9)
	// Run beside communication (workload.Task.BesideComm: two-batch
	// overlap's prefill), the task keeps the collective's SMs free before,
	// while and after it is in flight: 1 ms + 10 ms · f.
	p.Programs[0].Tasks[2].BesideComm = true
	res, err = Run(context.Background(), p, Options{Fabric: dgx(t, 1), Cost: cost, Interference: in})
	require.NoError(t, err)
	assert.InEpsilon(t, 1e-3+10e-3*f, res.End.Seconds(), 1e-6)
}

// A collective NCCL's tuner prices holds the SMs of the channels it runs
// with: a 64 KiB all-reduce on 8 A100s runs ring LL on 2 channels, so the
// 10 ms math-bound task beside it runs at 106/108 of its speed while it is
// in flight (not 84/108, the 24 CTAs of a collective the tuner does not
// price); on 8 H100s a 256 MiB all-reduce runs NVLS on its own 16.
func TestInterferenceHoldsTheTunersChannels(t *testing.T) {
	cost := func(o model.Op) (float64, error) {
		if o.Name == "long" {
			return 10e-3, nil
		}
		return 1e-3, nil
	}
	for _, c := range []struct {
		preset   string
		bytes    float64
		sms, cta int
	}{{"dgx-a100", 64 << 10, 108, 2}, {"dgx-h100", 256 << 20, 132, 16}} {
		p := onePlan(c.bytes, 1)
		p.Programs[0].Tasks[1].Stream = workload.StreamDP
		p.Programs[0].Tasks = append(p.Programs[0].Tasks, workload.Task{Name: "c1", Kind: workload.Compute,
			Stream: workload.StreamCompute, Ops: []model.Op{{Name: "long", Kind: model.GEMM}}, Deps: []int32{0}})
		tp, err := topo.Preset(c.preset, 1)
		require.NoError(t, err)
		in := &Interference{SMs: c.sms, CTAs: 24}
		res, err := Run(context.Background(), p, Options{Fabric: net.NewFlowNet(sim.New(), tp), Cost: cost, Interference: in, Protocol: true})
		require.NoError(t, err)
		var ar, c1 float64
		require.NoError(t, res.EachSpan([]int{0}, func(s Span) error {
			switch s.Name {
			case "ar":
				ar = (s.End - s.Start).Seconds()
			case "c1":
				c1 = (s.End - s.Start).Seconds()
			}
			return nil
		}))
		require.Less(t, ar, 10e-3, c.preset)
		f := float64(c.sms) / float64(c.sms-c.cta)
		assert.InEpsilon(t, ar+(10e-3-ar/f), c1, 1e-6, c.preset)
	}
}

// A synchronisation point: the host waits for a 1 ms task before issuing
// the next one, N kernels of 1 µs, so it cannot issue them while the long
// one runs: 1 ms + h (the long one's issue) + N·h + 1 µs, each kernel
// followed by its stream gap. Without the
// wait the host is ahead: h + 1 ms + N · 1 µs.
func TestHostWaitExposesIssue(t *testing.T) {
	const n, h = 20, HostForwardOpS
	build := func(wait bool) *workload.Plan {
		p := chainPlan(1)
		p.Programs[0].Tasks[0].Ops[0].Name = "long"
		tiny := make([]model.Op, n)
		for i := range tiny {
			tiny[i] = model.Op{Name: "k", Kind: model.Elementwise, Pass: model.Forward}
		}
		next := workload.Task{Name: "after", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: tiny, Deps: []int32{0}}
		if wait {
			next.HostWait = []int32{0}
		}
		p.Programs[0].Tasks = append(p.Programs[0].Tasks, next)
		return p
	}
	k := func(o model.Op) (Kernel, error) {
		if o.Name == "long" {
			return Kernel{DeviceS: 1e-3, Kernels: 1}, nil
		}
		return Kernel{DeviceS: 1e-6, Kernels: 1}, nil
	}
	g := StreamGapS
	assert.InEpsilon(t, 1e-3+g+h+n*h+1e-6+g, runChain(t, build(true), k, Host{Mode: Eager}), 1e-6)
	assert.InEpsilon(t, h+1e-3+g+n*(1e-6+g), runChain(t, build(false), k, Host{Mode: Eager}), 1e-6)
}

// The host's cost of issuing one operator exceeds every preset's device
// launch cost, so a tiny kernel issued eagerly waits on the host: it ends
// after the host's cost plus its own device time (moved here from compute
// and hw, which no longer hold a host dispatch interval).
func TestTinyKernelWaitsOnTheHost(t *testing.T) {
	for _, g := range hw.GPUPresets() {
		require.Greater(t, HostForwardOpS, g.KernelLaunchS, g.Name)
	}
	g, ok := hw.GPUByName("h100-sxm")
	require.True(t, ok)
	o := model.NewGEMM("tiny", hw.BF16, 1, 16, 16, 16)
	c, err := compute.NewEvaluator(g).Op(o)
	require.NoError(t, err)
	h := Host{Mode: Eager}
	x := h.KernelIssue(o, KernelOf(g, c), false, false)
	assert.InDelta(t, HostForwardOpS, x.HostS, 1e-12)
	assert.InDelta(t, HostForwardOpS+c.TimeS+StreamGapS, x.EndS, 1e-12)
	assert.Greater(t, x.EndS, 2*c.TimeS, "host-bound")
	// Replayed from a graph: the kernel's own time and the graph's gap.
	gx := h.KernelIssue(o, KernelOf(g, c), true, false)
	assert.InDelta(t, c.TimeS+GraphGapS, gx.EndS, 1e-12)
}
