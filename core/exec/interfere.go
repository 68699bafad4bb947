package exec

import (
	"math"

	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Interference is how a collective in flight slows the compute of the same
// GPU: NCCL runs its collectives as kernels whose thread blocks (one per
// channel) hold SMs for the collective's whole duration, and its reads and
// writes of the buffers draw on the same HBM. A compute kernel meanwhile
// runs its math on the SMs left, and its memory traffic in the bandwidth
// left: the math-bound part of its time stretches by SMs / (SMs − CTAs),
// CTAs the blocks of the collectives in flight (each as many as the
// channels NCCL's tuner runs it with: heldSMs), the memory-bound part by
// B / (B − r), r the collectives' HBM traffic.
// Nothing changes when no collective overlaps compute (collectives between
// dependent compute tasks, as Megatron's un-overlapped tensor-parallel
// ones are). A transfer on the copy engines (workload.Task.CopyEngine:
// Transformer Engine's ring exchange) holds no SMs: only its HBM traffic
// slows the compute beside it. A compute task marked
// workload.Task.BesideComm runs on one collective's SMs less throughout,
// whether one is in flight or not: its framework sized its kernels for the
// SMs it keeps free for communication (two-batch overlap's prefill).
//
// Measured: Lee et al., "Characterizing Compute-Communication Overlap in
// GPU-Accelerated Distributed Deep Learning" (arXiv 2507.03114, 2025), on
// 4× A100/H100/MI250/MI210 with GPT and LLaMA models, find overlapped
// compute 18.9% slower on average and up to 40% slower than alone; a GEMM
// sized to one wave on an H100 (132 SMs) doubles beside a 24-block NCCL
// all-gather, its last tiles forced into a second wave (NVIDIA developer
// forums, "Compute-communication overlap causes severe GEMM performance
// degradation because of tail effect", 2025). The mechanism gives 29% on
// an A100's math-bound kernels beside a 24-channel ring (108 SMs) and 22%
// on an H100's (132), 14% beside the H100's 16-channel NVLS all-reduce,
// 2% beside a 2-channel ring across nodes (one GPU a node).
// Pricing each kernel again on the SMs left (its tiles in more waves, the
// tail effect) instead of this linear stretch moved every bench/fidelity
// row by at most 1.4 points, either way: not built.
type Interference struct {
	// SMs of the GPU; CTAs the thread blocks a collective holds where
	// NCCL's tuner does not say (heldSMs).
	SMs, CTAs int
	// HBMBytesPerS is the GPU's sustained HBM bandwidth.
	HBMBytesPerS float64
	// TrafficPerWireByte is the HBM bytes a collective moves per byte it
	// sends (NCCLHBMTrafficPerWireByte).
	TrafficPerWireByte float64
}

// NCCLCTAs is the thread blocks a collective occupies where NCCL's tuner
// does not say (point-to-point transfers, all-to-all, other algorithms):
// one per channel, and NCCL opens 24 channels for an 8-GPU ring on an HGX
// A100's NVSwitch (NCCL INFO "Channel 23/24", nccl-tests issue #100); an
// all-gather on an H100 was profiled with 24 blocks (forum thread above).
const NCCLCTAs = 24

// DeepEPSMs is the SMs a hierarchical all-to-all (DeepEP's normal
// kernels, workload.Task.Hierarchical) holds: DeepEP's Buffer.num_sms,
// 20 by default, as Megatron-Core's flex dispatcher passes it
// (moe_deepep_num_sms = 20); DeepSeek-V3's report (§3.2.2) finds 20 SMs
// enough to drive IB and NVLink at full bandwidth.
const DeepEPSMs = 20

// NCCLHBMTrafficPerWireByte is the HBM traffic of a ring step per byte on
// the wire: the peer's write of the chunk into this GPU's buffer, then the
// reduction's reads of the received and the local chunk (the write of the
// sum is the next step's send, which the peer's HBM receives): 3 bytes.
const NCCLHBMTrafficPerWireByte = 3

// busyState is a simulated unit's running compute task, when interference
// can move its end.
type busyState struct {
	task int32
	// end is the scheduled end; floor the host's issue floor of it.
	end, floor sim.Time
	// rem is the device time left at full speed as of since; factor the
	// current stretch.
	rem    float64
	since  sim.Time
	factor float64
	math   float64 // math-bound fraction of the device time
	// held is the SMs the unit's collectives in flight hold (heldSMs),
	// copies the count of those on the copy engines
	// (workload.Task.CopyEngine); hbm is their HBM traffic.
	held, copies int
	hbm          float64
	// besideComm: the running task leaves one collective's SMs free
	// throughout (workload.Task.BesideComm).
	besideComm bool
	// start is when the task's device time began; slowed whether a stretch
	// other than 1 ever applied to it.
	start  sim.Time
	slowed bool
}

// startCompute schedules compute task i of unit u whose first kernel
// starts at start (the host may issue it after the stream is free) with
// device time d and end no earlier than end (the host's floor). Its device
// time runs from start, so a collective slows it only while it really runs.
func (e *engine) startCompute(u int, i int32, start, d, end sim.Time) {
	in := e.opt.Interference
	if in == nil {
		e.k.AtHandler(end, e, u<<32|int(i))
		return
	}
	b := &e.units[u].busy
	tc := &e.progs[e.plan.Units[u].Program].host.cost[i]
	b.task, b.since, b.rem, b.start = i, start, float64(d), start
	b.floor = 0 // the host's floor, when it binds
	if end > sim.Add(start, d) {
		b.floor = end
	}
	b.besideComm = e.plan.Programs[e.plan.Units[u].Program].Tasks[i].BesideComm
	b.math = 1
	if tc.D > 0 {
		b.math = float64(tc.Math) / float64(tc.D)
	}
	b.factor = e.stretch(b)
	b.slowed = b.factor != 1
	b.end = max(b.floor, sim.Add(start, stretched(b)))
	e.k.AtHandler(b.end, e, u<<32|int(i))
}

// recordStretch keeps, for the unit's running task as it ends, the device
// time it took when interference slowed it (UnitResult.Stretched).
func (e *engine) recordStretch(u int, b *busyState) {
	if !b.slowed {
		return
	}
	r := &e.res.Units[u]
	if r.Stretched == nil {
		r.Stretched = make([]sim.Time, len(r.End))
	}
	r.Stretched[b.task] = max(sim.Add(b.since, stretched(b))-b.start, 1)
}

// stretched is the running task's device time left at its current
// stretch, rounded up, saturating at the horizon (a task of a huge spec can
// pass it: the kernel then reports a HorizonError).
func stretched(b *busyState) sim.Time {
	x := math.Ceil(b.rem * b.factor)
	if x >= float64(sim.Never) {
		return sim.Never
	}
	return sim.Time(x)
}

// stretch is the factor by which the unit's collectives in flight slow its
// running compute task.
func (e *engine) stretch(b *busyState) float64 {
	in := e.opt.Interference
	if in == nil {
		return 1
	}
	holding := b.held
	if b.besideComm {
		holding = max(holding, in.CTAs)
	}
	if holding+b.copies == 0 {
		return 1
	}
	free := float64(in.SMs - min(holding, in.SMs-1))
	fSM := float64(in.SMs) / free
	fHBM := 1.0
	if in.HBMBytesPerS > 0 {
		fHBM = in.HBMBytesPerS / (in.HBMBytesPerS - min(b.hbm, 0.9*in.HBMBytesPerS))
	}
	return b.math*fSM + (1-b.math)*fHBM
}

// retime moves the running compute task's end after the unit's collectives
// in flight changed.
func (e *engine) retime(u int) {
	b := &e.units[u].busy
	if b.task < 0 {
		return
	}
	// Before its first kernel starts (b.since ahead of now) no device time
	// has passed; from then on the time left shrinks at the old stretch.
	if now := e.k.Now(); now > b.since {
		b.rem = max(0, b.rem-float64(now-b.since)/b.factor)
		b.since = now
	}
	b.factor = e.stretch(b)
	b.slowed = b.slowed || b.factor != 1
	end := max(b.floor, sim.Add(b.since, stretched(b)))
	if end != b.end {
		b.end = end
		e.k.AtHandler(end, e, u<<32|int(b.task))
	}
}

// commBegin and commEnd track a unit's collectives in flight.
func (e *engine) commBegin(u int, task *workload.Task) {
	if e.opt.Interference == nil || task.Kind != workload.Collective || !e.simul[u] {
		return
	}
	b := &e.units[u].busy
	if task.CopyEngine {
		b.copies++
	} else {
		b.held += e.heldSMs(u, task)
	}
	b.hbm += e.wireRate(e.plan.Units[u].Groups[task.Slot]) * e.opt.Interference.TrafficPerWireByte
	e.retime(u)
}

func (e *engine) commEnd(u int, task *workload.Task) {
	if e.opt.Interference == nil || task.Kind != workload.Collective {
		return
	}
	b := &e.units[u].busy
	if task.CopyEngine {
		b.copies--
	} else {
		b.held -= e.heldSMs(u, task)
	}
	b.hbm -= e.wireRate(e.plan.Units[u].Groups[task.Slot]) * e.opt.Interference.TrafficPerWireByte
	if b.held+b.copies == 0 {
		b.hbm = 0
	}
	e.retime(u)
}

// heldSMs is the SMs a collective task of unit u holds while in flight:
// one thread block per channel NCCL's tuner runs it with where the tuner
// prices it (fewer channels for a small message; NVLS its own count, 16
// on Hopper), DeepEPSMs for a hierarchical all-to-all, Interference.CTAs
// for the rest (NCCL's all-to-all, other algorithms). Found once per
// request.
func (e *engine) heldSMs(u int, task *workload.Task) int {
	if task.Hierarchical {
		return DeepEPSMs
	}
	g := e.plan.Units[u].Groups[task.Slot]
	k := heldKey{int32(g), uint16(task.Slot), e.name(string(task.Coll)), math.Float64bits(task.Bytes)}
	if n, ok := e.held[k]; ok {
		return n
	}
	n := e.opt.Interference.CTAs
	if alg, _, _ := e.request(task); alg == net.NCCL && g >= 0 && len(e.plan.Groups[g].Comms) > 0 {
		if c, err := e.comms.NCCLChannels(net.Op(task.Coll), e.plan.Groups[g].Comms[0], task.Bytes); err == nil && c > 0 {
			n = c // an error is issue's to report
		}
	}
	if e.held == nil {
		e.held = map[heldKey]int{}
	}
	e.held[k] = n
	return n
}

// heldKey is what heldSMs depends on: the group, and the task's slot (the
// algorithm, through engine.request), operation (engine.name) and payload.
type heldKey struct {
	g          int32
	slot, coll uint16
	bytes      uint64 // 16 bytes, no padding: hashed as plain memory
}

// wireRate is the per-GPU send rate of group g's collectives: the slowest
// link capacity on its first communicator's ring.
func (e *engine) wireRate(g int) float64 {
	if e.wire == nil {
		e.wire = make([]float64, len(e.plan.Groups))
		for i := range e.wire {
			e.wire[i] = -1
		}
	}
	if g < 0 || g >= len(e.wire) {
		return 0
	}
	if e.wire[g] >= 0 {
		return e.wire[g]
	}
	rate := 0.0
	if comms := e.plan.Groups[g].Comms; len(comms) > 0 {
		rate = math.Inf(1)
		for _, p := range e.routes(comms[0]) {
			for _, l := range p {
				rate = min(rate, e.topo.Capacity(int(l)))
			}
		}
		if math.IsInf(rate, 1) {
			rate = 0
		}
	}
	e.wire[g] = rate
	return rate
}
