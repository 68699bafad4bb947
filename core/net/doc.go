// Package net moves bytes between GPUs: a flow-level network model and the
// collectives built on it.
//
// # Models
//
// A Fabric is the narrow interface every consumer uses. Two models sit
// behind it:
//
//   - FlowNet: every transfer is a flow on its routed path (package topo:
//     shortest paths, deterministic ECMP, dimension order on tori); flows
//     share links by max-min fairness, computed by progressive filling. Rates
//     are recomputed once per simulated instant in which something changed,
//     and only over the connected component (links ↔ flows) of what changed.
//     A flow's bytes take bytes/rate; its last byte arrives one path latency
//     (the sum of its links' latencies) later.
//   - Unaware: each transfer alone on its path (latency + bytes over the
//     bottleneck). Cheaper; comparing the two shows what contention costs.
//
// Both keep per-link counters (LinkStats: bytes, busy time, peak concurrent
// flows) and call OnDeliver hooks with a FlowRecord per delivered transfer.
//
// # Contract for the executor (training/inference)
//
// The executor owns a *sim.Kernel and schedules compute on it; the network
// shares it:
//
//	k := sim.New()
//	tp, _ := topo.Preset("dgx-h100", nodes)      // or topo.Build(a topo.Description)
//	fab, comms, faults, err := net.Build(k, tp, plan, seed, "flow")
//	// plan is a net.FaultPlan of tp's link and device ids (package compile
//	// resolves a spec's device names into one); by hand:
//	// fab := net.NewFlowNet(k, tp); net.ApplyFaults(fab, plan, seed); comms := net.NewComms(fab)
//	id, err := comms.Start(net.Collective{Op: net.AllReduce, Algorithm: net.Ring,
//		Bytes: 64 << 20, Ranks: tpGroup}, func(r net.Result) { /* r.End */ })
//	err = comms.Send(srcRank, dstRank, bytes, func() { /* delivered */ })
//	err = k.Run(ctx)                              // also reports stalls by name
//	stats := fab.LinkStats()
//
// Start and Send act at k.Now(); any number may be in flight and they
// contend for links. Start returns an error for an invalid request; a
// transfer that finds no route (partitioned network, see
// topo.UnreachableError) fails the run: k.Run returns the error, naming the
// pairs. Compute delays of stragglers: multiply by fab.Slowdown(device).
// Quantized payloads (Collective.Quant) shrink the wire bytes; the caller
// passes the quantize/dequantize kernel time as Quantization.KernelTime,
// because net does not know GPUs.
//
// # Contract for Eidola (arrival times at one device)
//
// Run a collective on a FlowNet and register a hook before k.Run:
//
//	fab.OnDeliver(func(r net.FlowRecord) {
//		if r.Dst == watched { arrivals = append(arrivals, r.Delivered) }
//	})
//
// FlowRecord holds src, dst (device ids; fab.Topology().Devices names them),
// bytes, start, end of transmission and delivery time of every transfer,
// in delivery order. FlowNet.KeepRecords keeps them all instead.
//
// # Collectives
//
// Collective sizes follow nccl-tests (see Op). Algorithms: ring, double
// binary tree, halving-doubling, direct, hierarchical (reduce-scatter in
// node, all-reduce across, all-gather in node), chains and trees for
// broadcast/reduce. Each algorithm is a lazy program (no per-step storage):
// rank r's op k waits for its messages, then sends. A (sender, receiver)
// connection carries one message at a time per pipeline; Chunks splits data
// into pipelined pieces. ProtocolEfficiency models the library's protocol
// overhead (NCCL on NVLink: 370 of 450 GB/s, as NVIDIA states).
//
// The files: collective.go is the vocabulary (Op, Algorithm, Collective,
// Result) with a request's defaults and validation; registry.go the table
// of (operation, algorithm) → program builder that Ops and Algorithms list;
// engine.go runs programs (Comms, connections, tags); algo_ring.go,
// algo_tree.go, algo_halving_doubling.go, algo_direct.go and
// algo_hierarchical.go build them, one family each; algo_nccl.go makes a
// request NCCL's choice; alltoallv.go sends an all-to-all with a size per
// pair.
//
// # NCCL
//
// Algorithm NCCL asks NCCLTuner (nccl.go) what NCCL does: its cost model
// (src/graph/tuning.cc) prices ring, tree and NVLS with the LL, LL128 and
// Simple protocols on the ring graph its topology search would build, and
// the fastest wins; the choice then pays what it achieves when timed (fewer
// channels for small messages, LL128 and Simple bounded by their kernels'
// memory traffic, measured Simple and NVLS latencies; NCCLGenerations cites
// and fits each figure). The data moves as a ring at the choice's bus
// bandwidth after the part of its latency the links do not charge, so alone
// it takes NCCLChoice.TimeS. The tuner runs once per communicator, the
// choice once per (communicator, size).
//
// # Faults
//
// Per-link health scales capacity (rates are recomputed at once); health 0
// or a failed device removes links from routing, and flows crossing them are
// rerouted for their remaining bytes. ApplyFaults schedules explicit and
// seeded (rng stream "faults") changes, with recovery times.
package net
