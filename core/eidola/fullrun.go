package eidola

import (
	"context"
	"fmt"

	"github.com/eidolon-sim/eidolon/core/net"
)

// FullRunResult is a full simulation of the whole group: every GPU detailed,
// every write a flow on the network.
type FullRunResult struct {
	// Script is every write that landed in GPU 0, sorted by time: the ghost
	// script the set-up run records.
	Script []Arrival
	// GPU0 is the detailed GPU's kernel in the full run.
	GPU0 *Result
	// KernelTimesS is each GPU's kernel time.
	KernelTimesS []float64
	// Flows is the number of network transfers.
	Flows int
}

// FullRun simulates all GPUs of the group, each with the detailed model and
// the same kernel in its own view, on fab (a flow-level network whose
// topology maps rank g to GPU g of the group). A GPU's writes leave when its
// kernel issues them (at launch, or when the CTA producing the data
// finishes) and set the receiver's flag when the flow is delivered. The
// writes delivered to GPU 0 are recorded as its ghost script, so replaying
// that script reproduces GPU 0's kernel without simulating the others.
func FullRun(ctx context.Context, k *Kernel, c Config, fab net.Fabric) (*FullRunResult, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	p := k.Config.GPUs
	t := fab.Topology()
	if t.NumRanks() != p {
		return nil, fmt.Errorf("eidola: the network has %d ranks, the kernel runs on %d GPUs", t.NumRanks(), p)
	}
	sk := fab.Kernel()
	sendsAfter := map[int][]int{}
	for i, s := range k.Sends {
		sendsAfter[s.After] = append(sendsAfter[s.After], i)
	}
	r := &runAll{k: k, fab: fab, gpus: make([]*GPU, p)}
	for g := range r.gpus {
		r.gpus[g] = NewGPU(sk, k, c)
	}
	for g, gpu := range r.gpus {
		gpu.OnDone = func(cta int) { r.send(g, sendsAfter[cta]) }
	}
	for g, gpu := range r.gpus {
		// Launch sends every GPU's first writes: P·(P-1) routed flows for
		// the all-gather, minutes at 2,048 GPUs, so cancellation is checked
		// per GPU here, not only between events.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		gpu.Launch()
		r.send(g, sendsAfter[-1])
	}
	if r.err != nil {
		return nil, r.err
	}
	// An event can send a GPU's writes to every peer (P routes), so check
	// cancellation more often than the kernel's default of every 4,096.
	sk.CheckEvery = min(sk.CheckEvery, 64)
	if err := sk.Run(ctx); err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	out := &FullRunResult{Script: r.script, KernelTimesS: make([]float64, p), Flows: len(r.flights)}
	for g, gpu := range r.gpus {
		res, err := gpu.Result()
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", g, err)
		}
		if g == 0 {
			out.GPU0 = res
		}
		out.KernelTimesS[g] = res.KernelTimeS
	}
	SortArrivals(out.Script)
	return out, nil
}

type flight struct {
	dst   int
	sig   Signal
	bytes float64
}

type runAll struct {
	k       *Kernel
	fab     net.Fabric
	gpus    []*GPU
	flights []flight
	script  []Arrival
	err     error
}

func (r *runAll) send(g int, sends []int) {
	p := len(r.gpus)
	t := r.fab.Topology()
	for _, i := range sends {
		s := r.k.Sends[i]
		dst := (g + s.Dest) % p
		r.flights = append(r.flights, flight{dst: dst, sig: Signal{Source: p - s.Dest, Chunk: s.Chunk}, bytes: s.Bytes})
		if err := r.fab.Send(t.RankDevice(g), t.RankDevice(dst), s.Bytes, r, len(r.flights)-1); err != nil && r.err == nil {
			r.err = err
			r.fab.Kernel().Fail(err)
		}
	}
}

// Delivered sets the receiver's flag; writes into GPU 0 go into the script.
func (r *runAll) Delivered(tag int) {
	f := r.flights[tag]
	r.gpus[f.dst].Deliver(f.sig)
	if f.dst == 0 {
		r.script = append(r.script, Arrival{TimeS: r.fab.Kernel().Now().Seconds(),
			SourceGPU: f.sig.Source, Chunk: f.sig.Chunk, Bytes: f.bytes})
	}
}
