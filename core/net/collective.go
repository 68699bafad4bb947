package net

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/sim"
)

// Op is a collective operation. Sizes follow the nccl-tests convention: for
// all_reduce, broadcast, reduce and send_recv the buffer size; for
// all_gather the total output (each rank contributes Bytes/n); for
// reduce_scatter the total input (each rank keeps Bytes/n); for all_to_all
// each rank's send buffer (Bytes/n to every peer).
type Op string

const (
	AllReduce     Op = "all_reduce"
	AllGather     Op = "all_gather"
	ReduceScatter Op = "reduce_scatter"
	AllToAll      Op = "all_to_all"
	Broadcast     Op = "broadcast"
	Reduce        Op = "reduce"
	SendRecv      Op = "send_recv"
)

// Algorithm is how an operation is decomposed into transfers.
type Algorithm string

const (
	// Ring: n−1 (or 2(n−1) for all_reduce) steps to the ring neighbour;
	// for broadcast/reduce a pipelined chain from/to the root.
	Ring Algorithm = "ring"
	// Tree: for all_reduce NCCL's double binary tree (two in-order binary
	// trees, the second shifted by one rank so most leaves of one are inner
	// nodes of the other; each reduces then broadcasts half the data,
	// pipelined in chunks); for broadcast/reduce one binary tree at the root.
	Tree Algorithm = "tree"
	// HalvingDoubling: Rabenseifner's recursive halving reduce-scatter then
	// recursive doubling all-gather; needs a power-of-two rank count.
	HalvingDoubling Algorithm = "halving_doubling"
	// Direct: every rank sends its share to every other rank at once
	// (all_reduce: a direct reduce-scatter, then a direct all-gather).
	Direct Algorithm = "direct"
	// Hierarchical all_reduce: ring reduce-scatter inside each node, ring
	// all-reduce across nodes among ranks of equal local index, ring
	// all-gather inside each node. Needs equal ranks per node.
	Hierarchical Algorithm = "hierarchical"
)

// BusBandwidthFactor converts algorithm bandwidth to bus bandwidth
// (nccl-tests, doc/PERFORMANCE.md): all_reduce 2(n−1)/n; all_gather,
// reduce_scatter, all_to_all (n−1)/n; broadcast, reduce, send_recv 1.
func BusBandwidthFactor(op Op, n int) float64 {
	switch op {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case AllGather, ReduceScatter, AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// Quantization sends a reduced-precision payload: each element goes on the
// wire as WireElemBytes plus one ScaleBytes scale per BlockElems elements.
type Quantization struct {
	// ElemBytes is the size of an unquantized element (2 for bf16).
	ElemBytes float64
	// WireElemBytes is the quantized element size (1 for int8 and fp8).
	WireElemBytes float64
	// BlockElems elements share one scale.
	BlockElems int
	// ScaleBytes is the size of one scale (4 for an fp32 scale).
	ScaleBytes float64
	// KernelTime, if set, is the time to quantize or dequantize `elems`
	// elements on a device (from the compute model; net does not know
	// GPUs). It is charged before every send (quantize, on the sender) and
	// after every receive (dequantize, on the receiver), scaled by the
	// device's straggler slowdown.
	KernelTime func(device int, elems float64) sim.Time
}

// WireBytes is the size on the wire of a payload of unquantized bytes.
func (q *Quantization) WireBytes(payload float64) float64 {
	elems := payload / q.ElemBytes
	blocks := float64(int64((elems + float64(q.BlockElems) - 1) / float64(q.BlockElems)))
	return elems*q.WireElemBytes + blocks*q.ScaleBytes
}

// Collective is one operation on a communicator.
type Collective struct {
	Op        Op
	Algorithm Algorithm // "" = the operation's default
	// Bytes by the nccl-tests convention (see Op).
	Bytes float64
	// Ranks of the communicator in order (ring order, tree positions).
	// send_recv: Ranks[0] sends to Ranks[1].
	Ranks []int
	// Root is the index in Ranks of the broadcast/reduce root.
	Root int
	// Chunks splits the data into pipelined pieces of equal size; 0 picks 1
	// for ring, halving-doubling and direct, and for trees and chains, whose
	// pipelining needs it, pieces of one MiB, the last carrying the rest (at
	// most 64 pieces; PipelineChunks).
	Chunks int
	// chunkBytes is the default pipelining's piece size, all pieces but the
	// last; 0 cuts Chunks equal pieces.
	chunkBytes float64
	// Channels splits a ring algorithm over parallel rings, each carrying
	// Bytes/Channels; channel c rotates every node's ranks by c (and
	// reverses every other node) so the rings cross between nodes on the
	// same rail, each channel through different NICs (NCCL's channels).
	// 0 picks what NCCL does (DefaultChannels): one ring per rail when the
	// communicator spans nodes, one ring inside a node.
	Channels int
	// Stream runs each ring channel's segments (a flat ring has one) as
	// ring streams (Fabric.SendRing): one flow over all the ring's hops at
	// its bottleneck rate, instead of a flow per rank per step. NCCL
	// pipelines every step in slices, so a ring does stream; the two agree
	// on uncontended rings and streams cost O(channels), not O(n² ·
	// channels), which is what a training step with large data-parallel
	// rings needs. Ring algorithms only (others, and quantized payloads,
	// whose kernels run per step, keep their steps).
	Stream bool
	// Quant, if set, quantizes the payload on the wire.
	Quant *Quantization
	// ProtocolEfficiency in (0, 1] is the fraction of link time that carries
	// payload under the collective library's protocol (flags, headers,
	// synchronization); every message occupies its links for bytes /
	// efficiency. 0 means 1 (an ideal protocol). NVIDIA's NCCL maintainers
	// state ~20% protocol overhead on NVLink: 370 of 450 GB/s on H100
	// (github.com/NVIDIA/nccl-tests/issues/212).
	ProtocolEfficiency float64
	// Label is carried into results.
	Label string
}

// Result reports a finished collective.
type Result struct {
	ID         int
	Collective Collective
	Start, End sim.Time
	// Flows is the number of transfers; WireBytes their total size.
	Flows     int
	WireBytes float64
	// NCCL is what NCCL's tuner chose (Algorithm "nccl"), else nil.
	NCCL *NCCLChoice
}

// defaults fills what a request leaves to the engine, before it is
// validated: the algorithm's default chunk count, NCCL's channel count for
// the communicator (DefaultChannels) and the protocol efficiency. a is the
// request's registry entry (lookup resolved an empty Algorithm to the
// operation's default). What an invalid request does not allow filling
// (channels over ranks out of range) is left for validate to refuse.
func (c *Comms) defaults(col *Collective, a *algorithm) {
	col.Algorithm = a.alg
	if col.Channels == 0 && c.ranksInRange(col.Ranks) == nil {
		col.Channels = DefaultChannels(c.t, col.Ranks)
	}
	if col.Chunks == 0 {
		col.Chunks = 1
		if a.chunks != nil {
			col.Chunks, col.chunkBytes = a.chunks(col.Bytes)
		}
	}
	payloadDefaults(col)
}

// pieces is the size of each pipelined piece but the last, and of the last.
func (col *Collective) pieces() (full, last float64) {
	if col.chunkBytes > 0 && col.Chunks > 1 {
		return col.chunkBytes, col.Bytes - float64(col.Chunks-1)*col.chunkBytes
	}
	s := col.Bytes / float64(col.Chunks)
	return s, s
}

// payloadDefaults fills what a collective's program does not depend on.
func payloadDefaults(col *Collective) {
	if col.ProtocolEfficiency == 0 {
		col.ProtocolEfficiency = 1
	}
}

// ranksInRange checks that every rank exists on the topology.
func (c *Comms) ranksInRange(ranks []int) error {
	for _, r := range ranks {
		if r < 0 || r >= c.t.NumRanks() {
			return fmt.Errorf("rank %d out of range [0, %d)", r, c.t.NumRanks())
		}
	}
	return nil
}

// validate refuses a request (its defaults filled) that no program can
// serve; it changes nothing. What only one algorithm needs (a power-of-two
// rank count, equal nodes) its builder checks.
func (c *Comms) validate(col *Collective) error {
	n := len(col.Ranks)
	if n < 1 || (col.Op == SendRecv && n != 2) {
		return fmt.Errorf("%s needs %s ranks, got %d", col.Op, map[bool]string{true: "exactly 2", false: "at least 1"}[col.Op == SendRecv], n)
	}
	seen := map[int]bool{}
	for _, r := range col.Ranks {
		if r < 0 || r >= c.t.NumRanks() {
			return fmt.Errorf("rank %d out of range [0, %d)", r, c.t.NumRanks())
		}
		if seen[r] {
			return fmt.Errorf("rank %d appears twice in the communicator", r)
		}
		seen[r] = true
	}
	if col.Root < 0 || col.Root >= n {
		return fmt.Errorf("root index %d out of range [0, %d)", col.Root, n)
	}
	if !(col.Bytes >= 0) {
		return fmt.Errorf("bytes must be >= 0, got %v", col.Bytes)
	}
	if col.Chunks < 0 {
		return fmt.Errorf("chunks must be >= 0, got %d", col.Chunks)
	}
	if col.Channels < 0 {
		return fmt.Errorf("channels must be >= 0, got %d", col.Channels)
	}
	return validatePayload(col)
}

// validatePayload checks what a collective's program does not depend on
// (also for a request whose shape is cached).
func validatePayload(col *Collective) error {
	if !(col.ProtocolEfficiency > 0 && col.ProtocolEfficiency <= 1) {
		return fmt.Errorf("protocol efficiency must be in (0, 1], got %v", col.ProtocolEfficiency)
	}
	if q := col.Quant; q != nil && (q.ElemBytes <= 0 || q.WireElemBytes <= 0 || q.BlockElems < 1 || q.ScaleBytes < 0) {
		return fmt.Errorf("quantization needs elem_bytes > 0, wire_elem_bytes > 0, block_elems >= 1, scale_bytes >= 0")
	}
	return nil
}
