// Package workload turns a model, a parallel layout and a batch into the
// execution graphs of a training step or an inference run: a Plan of
// programs (task graphs of compute and communication), the units that run
// them, and the communicator groups their collectives use. It knows shapes
// and dependencies, not time: package exec runs a Plan on compute and net.
//
// A unit is a tensor-parallel group: its ranks run the same operators in
// lockstep (every TP collective joins them), so one program serves the whole
// group, and ranks of different data-parallel replicas at the same pipeline
// stage share one program too. Per-rank differences (a straggler, a degraded
// link) are applied by exec when it runs the program on each unit, so
// sharing a graph never hides an asymmetry.
package workload

import (
	"fmt"
	"math"
	"strings"

	"github.com/eidolon-sim/eidolon/core/model"
)

// Stream is the queue a task runs on. Tasks on a serial stream run one at a
// time in program order (a CUDA stream); PP tasks are point-to-point
// transfers posted independently, as Megatron's batched isend/irecv are.
type Stream uint8

const (
	StreamCompute Stream = iota
	StreamTP
	StreamDP
	StreamPP
	// StreamEP runs the expert-parallel all-to-alls (dispatch, combine).
	StreamEP
	// StreamCP runs the context-parallel exchange of keys and values.
	StreamCP
	NumStreams
)

var streamNames = [NumStreams]string{"compute", "tp", "dp", "pp", "ep", "cp"}

func (s Stream) String() string { return streamNames[s] }

// Serial reports whether the stream runs its tasks one at a time in order.
func (s Stream) Serial() bool { return s != StreamPP }

// TaskKind is what a task does.
type TaskKind uint8

const (
	// Compute runs Ops back to back on the unit's GPUs.
	Compute TaskKind = iota
	// Collective runs Op over the unit's group in Slot once every member
	// unit has reached the task with the same Tag.
	Collective
	// Send and Recv are the two ends of a point-to-point transfer matched
	// by (Slot's group, Tag); the transfer starts when both are posted.
	Send
	Recv
)

// SendRecv is the collective kind of a point-to-point transfer.
const SendRecv model.Kind = "send_recv"

// Slot names a unit's communicator groups.
type Slot uint8

const (
	SlotTP Slot = iota
	SlotDP
	// SlotFwdOut sends activations to the next pipeline stage, SlotFwdIn
	// receives them from the previous; SlotBwdOut sends gradients to the
	// previous stage, SlotBwdIn receives them from the next.
	SlotFwdOut
	SlotFwdIn
	SlotBwdOut
	SlotBwdIn
	// SlotEmbedding joins the first and last pipeline stages, which both
	// hold the tied word embedding, to all-reduce its gradient.
	SlotEmbedding
	// SlotEP is the expert-parallel group (the dispatch and combine
	// all-to-alls); SlotEDP the expert-data-parallel group that reduces
	// expert gradients.
	SlotEP
	SlotEDP
	// SlotCP is the context-parallel group: the ranks holding the chunks
	// of one sequence (ring attention's keys and values).
	SlotCP
	// SlotDPInstances joins the replicas at the same place in each
	// distributed-optimizer instance (Parallel.OptimizerInstances), which
	// all-reduce their gradient shards; SlotDP is then one instance.
	SlotDPInstances
	NumSlots
)

// AllToAllV is the collective kind of an expert-parallel dispatch or
// combine: Task.Pairs holds its per-pair sizes.
const AllToAllV model.Kind = "all_to_all_v"

// Task is one node of a program.
type Task struct {
	Name   string
	Kind   TaskKind
	Stream Stream
	// Ops are the operators of a compute task, run back to back; the slice
	// is shared with the model graph and must not be modified.
	Ops []model.Op
	// Coll is the collective of a communication task (model.AllReduce,
	// AllGather, ReduceScatter, or SendRecv), Bytes its payload by the
	// nccl-tests convention (all-gather: the gathered output; reduce-scatter:
	// the input; send: the message).
	Coll  model.Kind
	Bytes float64
	Slot  Slot
	// Tag matches the tasks of different units that form one collective or
	// one transfer on a group.
	Tag int32
	// Deps are tasks of the same program that must finish first.
	Deps []int32
	// HostWait are earlier tasks the host thread waits for before it
	// issues this one: the framework's synchronisation points (a `.item()`
	// or torch.cuda.synchronize), where it cannot run ahead of the GPU.
	HostWait []int32
	// FLOPs of all ops; MatmulFLOPs of the matmuls (GEMMs, attention) as
	// the kernels run them (FlashAttention's backward with its recomputed
	// scores: hardware FLOPs; the model count is Op.ModelFLOPs), excluding
	// recomputed layers; RecomputeFLOPs the matmul FLOPs of recomputed
	// forward ops.
	FLOPs, MatmulFLOPs, RecomputeFLOPs float64
	// MicroBatch is the micro-batch (training) or decode step (inference)
	// the task belongs to; -1 for per-step work.
	MicroBatch int32
	// Pairs (AllToAllV) is the bytes each member of a communicator sends
	// to each other, n×n row-major in communicator order; shared by every
	// task with the same routing and size, identified by PairsID.
	// Hierarchical sends it in two hops across nodes.
	Pairs        []float64
	PairsID      int32
	Hierarchical bool
	// LowLatency (AllToAllV) runs it as DeepEP's low-latency kernel of
	// that direction, whose fixed time exec adds (net.AllToAllV.FixedS).
	LowLatency LowLatencyKernel
	// TopK and NodeLimit deduplicate a hierarchical all-to-all's network
	// hop (net.AllToAllV).
	TopK, NodeLimit int32
	// CopyEngine marks a transfer the GPUs' copy engines run (tpRing's
	// steps): it draws on HBM but holds no SMs (exec's interference).
	CopyEngine bool
	// BesideComm (compute) runs the task on the SMs a communication kernel
	// leaves for its whole duration, as if one collective were always in
	// flight (exec's interference): the framework sizes its kernels for
	// the SMs it keeps free for the communication beside them.
	BesideComm bool
}

// LowLatencyKernel is which of DeepEP's low-latency kernels an
// all-to-all-v runs as (none, the dispatch or the combine).
type LowLatencyKernel uint8

const (
	NoLowLatency LowLatencyKernel = iota
	LowLatencyDispatch
	LowLatencyCombine
)

// LowLatencyFor is the low-latency kernel of an all-to-all's direction:
// the dispatch sends tokens to the experts, the combine (ret,
// model.Op.Return) returns them.
func LowLatencyFor(ret bool) LowLatencyKernel {
	if ret {
		return LowLatencyCombine
	}
	return LowLatencyDispatch
}

// Program is the task graph one unit runs; Marks name tasks whose end times
// a scenario reads (e.g. "prefill_end").
type Program struct {
	Name  string
	Tasks []Task
	Marks map[string]int32
}

// Unit is a tensor-parallel group running one program.
type Unit struct {
	// Ranks are global ranks, in TP order.
	Ranks   []int
	Program int
	// Replica is the data-parallel replica, Stage the pipeline stage.
	Replica, Stage int
	// Groups maps each slot to a group index, -1 where the unit has none.
	Groups [NumSlots]int
}

// NewUnit is a unit of ranks running program, in no group yet.
func NewUnit(ranks []int, program int) Unit {
	u := Unit{Ranks: ranks, Program: program}
	for i := range u.Groups {
		u.Groups[i] = -1
	}
	return u
}

// Group is a communicator shared by member units. A collective on it runs
// one net collective per rank list in Comms, concurrently (a DP group of
// tensor-parallel units is TP parallel collectives, one per TP index).
type Group struct {
	Units []int
	Comms [][]int
}

// Plan is everything exec needs to run a workload.
type Plan struct {
	Programs []Program
	Units    []Unit
	Groups   []Group
	// Replicas lists the units of each data-parallel replica (or inference
	// replica) in stage order: replicas are the grain of symmetry.
	Replicas [][]int
	// Ranks is the number of global ranks the plan uses.
	Ranks int
}

// builder appends tasks to one program.
type progBuilder struct {
	p    *Program
	tags [NumSlots]int32
	// sync are tasks the host waits for before it issues the next task.
	sync []int32
	// a2a sizes the expert-parallel all-to-alls (nil without EP).
	a2a *a2aCache
	// dispatchSync: the host waits for the router before it issues each
	// forward dispatch all-to-all (training; see ops). Drop-and-pad
	// routing has static sizes, so Megatron-Core's dispatcher never copies
	// counts to the host (MoEAlltoAllTokenDispatcher.preprocess under
	// drop_and_pad fills them with the capacity): no wait.
	dispatchSync bool
	hierarchical bool
	// lowLatency: DeepEP's low-latency kernels (Task.LowLatency).
	lowLatency  bool
	topK, limit int32
	// rings numbers tpRing's step matrices (nil: no comm-GEMM overlap);
	// tp is the tensor-parallel degree.
	rings *ringCache
	tp    int
}

func (b *progBuilder) add(t Task) int32 {
	if len(b.sync) > 0 {
		t.HostWait = append(t.HostWait, b.sync...)
		b.sync = b.sync[:0]
	}
	b.p.Tasks = append(b.p.Tasks, t)
	return int32(len(b.p.Tasks) - 1)
}

// hostSync makes the host wait for tasks before it issues the next task.
func (b *progBuilder) hostSync(tasks ...int32) {
	for _, t := range tasks {
		if t >= 0 {
			b.sync = append(b.sync, t)
		}
	}
}

func deps(ids ...int32) []int32 {
	var out []int32
	for _, d := range ids {
		if d >= 0 {
			out = append(out, d)
		}
	}
	return out
}

// collective appends a collective on a slot with the next tag of that slot.
func (b *progBuilder) collective(name string, stream Stream, slot Slot, kind model.Kind, bytes float64, mb int32, after ...int32) int32 {
	tag := b.tags[slot]
	b.tags[slot]++
	return b.add(Task{Name: name, Kind: Collective, Stream: stream, Coll: kind, Bytes: bytes, Slot: slot,
		Tag: tag, Deps: deps(after...), MicroBatch: mb})
}

// compute appends a compute task over ops, split before each operator
// whose issue waits for the GPU (Op.HostSync): the host issues it once the
// work before it has run.
func (b *progBuilder) compute(name string, ops []model.Op, mb int32, after ...int32) int32 {
	for j := len(ops) - 1; j > 0; j-- {
		if ops[j].HostSync {
			// Each part named for its own operators, after the caller's prefix.
			prefix := strings.TrimSuffix(name, segName(ops))
			head := b.compute(prefix+segName(ops[:j]), ops[:j], mb, after...)
			return b.compute(prefix+segName(ops[j:]), ops[j:], mb, head)
		}
	}
	if len(ops) > 0 && ops[0].HostSync {
		b.hostSync(after...)
	}
	t := Task{Name: name, Kind: Compute, Stream: StreamCompute, Ops: ops, Deps: deps(after...), MicroBatch: mb}
	for _, o := range ops {
		t.FLOPs += o.FLOPs
		if o.IsMatmul() {
			if o.Pass == model.Recomputed {
				t.RecomputeFLOPs += o.FLOPs
			} else {
				t.MatmulFLOPs += o.FLOPs
			}
		}
	}
	return b.add(t)
}

// ops appends a block's operator list as compute segments split at its
// tensor-parallel collectives, chained after `last`; it returns the last
// task. With overlap, a collective that follows weight-gradient GEMMs starts
// after the GEMMs before them, so the weight gradients run while it is in
// flight (Megatron's async tensor-parallel backward).
func (b *progBuilder) ops(prefix string, list []model.Op, mb int32, after []int32, overlap bool) int32 {
	start := 0
	last := int32(-1)
	// first is the dependency list of the next task.
	var first func() []int32
	// join are collectives the next task waits for besides last.
	var join []int32
	first = func() []int32 {
		deps := after
		if last >= 0 {
			deps = []int32{last}
		}
		if len(join) > 0 {
			deps = append(append([]int32(nil), deps...), join...)
			join = nil
		}
		return deps
	}
	for i := 0; i < len(list); i++ {
		o := list[i]
		if !o.IsComm() || i < start {
			continue
		}
		seg := list[start:i]
		if o.CP {
			if len(seg) > 0 {
				last = b.compute(prefix+segName(seg), seg, mb, first()...)
			}
			if !o.Alongside {
				// Ulysses' all-to-all, or the gathered keys and values:
				// what follows needs its data.
				last = b.collective(prefix+o.Name, StreamCP, SlotCP, o.Kind, o.Bytes, mb, first()...)
				start = i + 1
				continue
			}
			last, join, start = b.ringExchange(prefix, list, i, mb, first())
			continue
		}
		if o.Kind == model.AllToAll {
			// The dropless dispatch's sizes are known on the device only:
			// Megatron-Core's all-to-all dispatcher copies the token counts
			// to the host before the permutation and waits for that copy
			// before it calls the all-to-all (MoEAlltoAllTokenDispatcher:
			// cuda_dtoh_point "before_permutation_1", cuda_sync_point
			// "before_ep_alltoall", d2h_event.synchronize(); again when a
			// full recomputation reruns the forward), and DeepEP's normal
			// dispatch has the host poll the received-token counter its
			// notify kernel writes to host-mapped memory before it sizes the
			// receive buffer. So the host issues nothing after the router
			// until the GPU has run it: only the permutation, issued before
			// the wait, is queued behind it. The backward reuses the sizes.
			sync := b.dispatchSync && b.a2a != nil && !o.Return && o.Pass != model.Backward && len(seg) > 0
			if len(seg) > 0 {
				w := len(seg)
				if sync && w > 1 && seg[w-1].Name == model.OpPermute {
					w--
				}
				router := b.compute(prefix+segName(seg[:w]), seg[:w], mb, first()...)
				last = router
				if w < len(seg) {
					last = b.compute(prefix+segName(seg[w:]), seg[w:], mb, router)
				}
				if sync {
					b.hostSync(router)
				}
			}
			if b.a2a != nil {
				last = b.allToAll(prefix+o.Name, o, mb, first()...)
			}
			start = i + 1
			continue
		}
		if b.rings != nil && o.Kind == model.ReduceScatter && endsWithChunkable(seg) {
			// The forward's row-parallel GEMM and its reduce-scatter.
			if w := len(seg) - 1; w > 0 {
				last = b.compute(prefix+segName(seg[:w]), seg[:w], mb, first()...)
			}
			var chunk int32
			last, chunk = b.tpPipeline(prefix, seg[len(seg)-1], o, mb, first())
			join = append(join, chunk)
			start = i + 1
			continue
		}
		if b.rings != nil && o.Kind == model.AllGather && i+1 < len(list) && chunkable(list[i+1]) {
			// A column-parallel GEMM (or the backward's input-gradient
			// GEMM of a row-parallel one) and the all-gather it reads;
			// weight gradients before it run beside the ring, as beside
			// the collective (overlap).
			if len(seg) > 0 {
				last = b.leadIn(prefix, seg, mb, overlap, first())
			}
			last = b.tpRing(prefix, list[i+1], o, mb, first())
			start = i + 2
			continue
		}
		if d := wgradStart(seg) - 1; overlap && d >= 0 && seg[d].Kind == model.GEMM && hidesBehindWgrad(seg) &&
			o.Kind == model.AllGather && i+1 < len(list) && list[i+1].Kind == model.ReduceScatter {
			// Sequence parallelism's backward of a column-parallel GEMM:
			// the input's all-gather runs under the input-gradient GEMM,
			// the weight gradient waits for it, and the input gradient's
			// reduce-scatter runs under the weight gradient (Megatron's
			// async all-gather and reduce-scatter in
			// LinearWithGradAccumulationAndAsyncCommunication; Transformer
			// Engine's bulk overlaps).
			w := d + 1
			pre := first()
			if d > 0 {
				pre = []int32{b.compute(prefix+segName(seg[:d]), seg[:d], mb, pre...)}
			}
			ag := b.collective(prefix+o.Name, StreamTP, SlotTP, o.Kind, o.Bytes, mb, pre...)
			dg := b.compute(prefix+segName(seg[d:w]), seg[d:w], mb, pre...)
			b.compute(prefix+segName(seg[w:]), seg[w:], mb, dg, ag)
			rs := list[i+1]
			last = b.collective(prefix+rs.Name, StreamTP, SlotTP, rs.Kind, rs.Bytes, mb, dg, ag)
			start = i + 2
			continue
		}
		if len(seg) > 0 {
			last = b.leadIn(prefix, seg, mb, overlap, first())
		}
		last = b.collective(prefix+o.Name, StreamTP, SlotTP, o.Kind, o.Bytes, mb, first()...)
		start = i + 1
	}
	if seg := list[start:]; len(seg) > 0 {
		last = b.compute(prefix+segName(seg), seg, mb, first()...)
	}
	if len(join) > 0 {
		// A block that ends with the attention the exchange fed: the next
		// block's first task waits for the exchange through an empty one.
		last = b.compute(prefix+"cp.join", nil, mb, first()...)
	}
	if last < 0 && len(after) == 1 {
		return after[0]
	}
	return last
}

// leadIn issues the compute segment before a tensor-parallel collective,
// after deps, and returns the task the collective waits for: the whole
// segment, or with overlap its part before trailing weight-gradient GEMMs,
// which then run beside the collective (Megatron's async backward).
func (b *progBuilder) leadIn(prefix string, seg []model.Op, mb int32, overlap bool, deps []int32) int32 {
	if !overlap || !hidesBehindWgrad(seg) {
		return b.compute(prefix+segName(seg), seg, mb, deps...)
	}
	w := wgradStart(seg)
	a := b.compute(prefix+segName(seg[:w]), seg[:w], mb, deps...)
	b.compute(prefix+segName(seg[w:]), seg[w:], mb, a)
	return a
}

// ringExchange issues the context-parallel exchange at list[i] (and any
// right behind it) on the cp stream, and the op after it, the attention it
// feeds, alongside on the compute stream, both after deps: it returns the
// attention's task, the exchange's tasks (which the next task must also
// wait for) and where the list goes on.
func (b *progBuilder) ringExchange(prefix string, list []model.Op, i int, mb int32, deps []int32) (attn int32, comms []int32, next int) {
	attn = -1
	if len(deps) > 0 {
		attn = deps[len(deps)-1]
	}
	j := i
	for ; j < len(list) && list[j].CP && list[j].Alongside; j++ {
		comms = append(comms, b.collective(prefix+list[j].Name, StreamCP, SlotCP, list[j].Kind, list[j].Bytes, mb, deps...))
	}
	if j < len(list) && !list[j].IsComm() {
		attn = b.compute(prefix+list[j].Name, list[j:j+1], mb, deps...)
		j++
	}
	return attn, comms, j
}

// Transformer Engine's comm-GEMM overlap (userbuffers, Megatron-Core
// --tp-comm-overlap, NeMo tp_comm_overlap) as its default configuration
// runs the forward (transformer_engine/pytorch/module/base.py
// initialize_ub): the all-gather before a column-parallel GEMM (and, in
// the backward, the output-gradient gather before a row-parallel GEMM's
// input gradient) as a ring exchange, the reduce-scatter after a
// row-parallel GEMM as a pipeline of splits. The backward's input gather
// and input-gradient reduce-scatter around a column-parallel GEMM run as
// the async overlap does (ops: beside the weight gradient).

// tpRing is the ring exchange of all-gather c feeding GEMM g, after before:
// the GEMM runs as TP chunks of its rows and the gather as TP−1 steps in
// which every rank passes one shard (c's payload over TP) to its neighbour
// on the copy engines (TE's ring_exchange, use_ce). Chunk 0 computes on
// the rank's own shard while the first step brings the next; chunk k waits
// for step k−1. The steps move what a ring all-gather moves; what changes
// is that they move under the GEMM, whose chunks are smaller GEMMs. It
// returns the last chunk.
func (b *progBuilder) tpRing(prefix string, g, c model.Op, mb int32, before []int32) int32 {
	n := b.tp
	pairs, id := b.rings.matrix(n, c.Bytes/float64(n))
	last, arrived := int32(-1), int32(-1) // arrived: the step that brought chunk k's shard
	for k := 0; k < n; k++ {
		next := int32(-1)
		if k+1 < n {
			after := before
			if arrived >= 0 {
				after = []int32{arrived}
			}
			tag := b.tags[SlotTP]
			b.tags[SlotTP]++
			next = b.add(Task{Name: fmt.Sprintf("%s%s.ring%d", prefix, c.Name, k), Kind: Collective, Stream: StreamTP,
				Coll: AllToAllV, Bytes: c.Bytes, Slot: SlotTP, Tag: tag, Deps: deps(after...),
				MicroBatch: mb, Pairs: pairs, PairsID: id, CopyEngine: true})
		}
		after := before
		if k > 0 {
			after = []int32{last, arrived}
		}
		last, arrived = b.gemmChunk(prefix, g, k, n, mb, after...), next
	}
	return last
}

// tpPipelineSplits is how many parts TE's pipeline overlap cuts a
// row-parallel GEMM into (initialize_ub's default num_splits).
const tpPipelineSplits = 4

// tpPipeline is the pipelined reduce-scatter c of GEMM g's output, after
// before: the GEMM runs as tpPipelineSplits chunks of its rows, each
// chunk's partial sums reduce-scattered (userbuffers' kernels, on SMs the
// GEMM leaves them) while the next chunk computes. It returns the last
// reduce-scatter and the last chunk, which what follows waits for too.
func (b *progBuilder) tpPipeline(prefix string, g, c model.Op, mb int32, before []int32) (scatter, chunk int32) {
	n := tpPipelineSplits
	scatter, chunk = -1, -1
	for k := 0; k < n; k++ {
		after := before
		if k > 0 {
			after = []int32{chunk}
		}
		chunk = b.gemmChunk(prefix, g, k, n, mb, after...)
		scatter = b.collective(fmt.Sprintf("%s%s.split%d", prefix, c.Name, k), StreamTP, SlotTP, c.Kind, c.Bytes/float64(n), mb, chunk, scatter)
	}
	return scatter, chunk
}

// gemmChunk adds part k of n of GEMM g split along its rows.
func (b *progBuilder) gemmChunk(prefix string, g model.Op, k, n int, mb int32, after ...int32) int32 {
	rows := (g.M + int64(n) - 1) / int64(n)
	part := g.RowChunk(max(min(rows, g.M-int64(k)*rows), 1))
	part.Name = fmt.Sprintf("%s.chunk%d", g.Name, k)
	return b.compute(prefix+part.Name, []model.Op{part}, mb, after...)
}

// chunkable reports whether o is a GEMM Transformer Engine overlaps with
// its collective, split along its rows: a forward GEMM or an input
// gradient, not a weight gradient (whose rows are a weight's), and not the
// output layer's (Megatron-Core's output layer is a plain
// ColumnParallelLinear, without userbuffers).
func chunkable(o model.Op) bool {
	return o.Kind == model.GEMM && !isWgrad(o) && o.M > 1 && o.Name != model.OpLogits
}

// endsWithChunkable reports whether seg ends with a chunkable GEMM.
func endsWithChunkable(seg []model.Op) bool { return len(seg) > 0 && chunkable(seg[len(seg)-1]) }

// ringCache numbers tpRing's step matrices (Task.Pairs: every rank sends a
// shard to the next), shared by a plan's programs so that one matrix keeps
// one PairsID; the IDs start above any all-to-all's (a2aCache's).
type ringCache struct {
	ids   map[[2]uint64]int32
	pairs [][]float64
}

// ringPairsBase is the first PairsID of a ring step.
const ringPairsBase = 1 << 28

func (c *ringCache) matrix(n int, shard float64) ([]float64, int32) {
	key := [2]uint64{uint64(n), math.Float64bits(shard)}
	if id, ok := c.ids[key]; ok {
		return c.pairs[id-ringPairsBase], id
	}
	m := make([]float64, n*n)
	for s := 0; s < n; s++ {
		m[s*n+(s+1)%n] = shard
	}
	id := int32(ringPairsBase + len(c.pairs))
	c.pairs = append(c.pairs, m)
	c.ids[key] = id
	return m, id
}

// wgradStart is where a compute segment's trailing weight-gradient GEMMs
// begin; hidesBehindWgrad reports whether the collective after the segment
// overlaps them (there are some, after some other work that produces its
// payload), as OverlapTPComm runs it.
func wgradStart(seg []model.Op) int {
	w := len(seg)
	for w > 0 && isWgrad(seg[w-1]) {
		w--
	}
	return w
}

func hidesBehindWgrad(seg []model.Op) bool {
	w := wgradStart(seg)
	return w < len(seg) && w > 0
}

func isWgrad(o model.Op) bool {
	n := o.Name
	return len(n) > 6 && n[len(n)-6:] == ".wgrad"
}

// segName names a compute segment by its first and last operators.
func segName(ops []model.Op) string {
	if len(ops) == 1 {
		return ops[0].Name
	}
	return ops[0].Name + ".." + ops[len(ops)-1].Name
}
