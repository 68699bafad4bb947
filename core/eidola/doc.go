// Package eidola simulates one GPU in detail running a fused
// compute-communication kernel, while every other GPU of its group is a
// ghost: a script of the writes it makes into the detailed GPU (Eidola,
// Selagamsetty et al., arXiv 2606.12638: "our GPU model serves as a succinct
// eidolon ... uses annotated timing profiles ... to emulate peer-to-peer GPU
// writes with cycle-level precision").
//
// # The detailed GPU
//
// A Kernel (Build) is a list of CTAs in launch order. Each CTA waits for
// the flags it needs (remote: written by a peer; local: set when another
// CTA of the same kernel finishes), then does its work, priced by a
// CostModel (core/compute in the scenario). The GPU has SMs × CTAsPerSM
// slots; the first wave fills them and each finished CTA's slot takes the
// next CTA. Times are whole GPU clock cycles; events are CTA-level (launch,
// last flag seen, compute done, flag delivered), so a run costs O(CTAs +
// flags), not O(polls). A computing CTA takes
//
//	max(ComputeS, (ReadBytes+WriteBytes) / L2 share, HBMBytes / HBM share)
//
// where the shares divide the L2 bandwidth left after polling traffic, and
// the HBM bandwidth, evenly over the CTAs computing at that moment; the
// shares are recomputed whenever that set or the polling changes, and
// progress is integrated between changes.
//
// # Synchronization modes
//
// A waiting CTA reads all its unseen flags in rounds (one read, one 32-byte
// L2 sector, per flag per round; a round's result returns one read latency
// later):
//
//   - spin_wait: rounds every PollIntervalS. A flag written at a, waited for
//     since w, is seen in round ceil((a-w)/p): reads ≈ wait / poll interval.
//   - spin_yield: rounds after back-offs of p, 2p, 4p, ... capped at
//     BackoffMaxS (sleeping in between): reads grow with log(wait), the flag
//     is seen up to one back-off late.
//   - syncmon: one round reads every flag and registers the unset ones with
//     the monitor; the CTA sleeps; each write wakes it WakeLatencyS later and
//     it reads that flag once more: reads = flags + late flags, constant in
//     the wait.
//
// Polls are resolved in closed form once all of a CTA's flag times are
// known; their bandwidth (unseen flags × 32 B / current interval, per
// waiter) is subtracted from L2 while they poll.
//
// # Ghost scripts
//
// A script is a table of Arrival rows (time_s, source_gpu, chunk, bytes):
// ghost source_gpu's write of `bytes` for chunk `chunk` is visible in the
// detailed GPU from time_s seconds after the kernel's launch (the flag is
// written after its data). Ghosts are 1..P-1, the detailed GPU is 0. Chunk
// ids per kernel:
//
//   - allgather_gemm: chunk g is GPU g's shard of A (one row per ghost).
//   - gemm_reducescatter: chunk t is tile t of the detailed GPU's row block;
//     every ghost writes its partial of every chunk.
//   - allreduce (two-shot): chunk t < C is a ghost's partial of the detailed
//     GPU's chunk t (phase one); chunk g·C+t is ghost g's reduced chunk t
//     (phase two), C chunks per GPU.
//
// Kernel.Expected lists every (source, chunk) a script must provide; rows
// naming anything else are an error, so a script made for another group
// size or kernel is rejected rather than silently replayed. Scripts come
// from a set-up run (FullRun: every GPU detailed on a core/net flow network,
// recording what lands in GPU 0), from a table the user passes, or from a
// Generator; a Perturbation adds injected delays, per-ghost skew,
// stragglers and per-row jitter from a seed. A script out is a script in:
// replaying the rows of the scenario's "script" table reproduces the run.
package eidola
