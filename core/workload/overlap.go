package workload

// Expert-parallel communication overlap (Parallel.OverlapEPComm), as
// Megatron-Core's --overlap-moe-expert-parallel-comm runs it (its
// "combined 1F1B", megatron/core/pipeline_parallel/combined_1f1b.py): in
// the steady state a backward pass and the next forward pass of another
// micro-batch are merged into one, and their layers are interleaved so
// that one pass's dispatch or combine all-to-all is in flight while the
// other pass computes, the pairing of DeepSeek-V3's DualPipe (arXiv
// 2412.19437 §3.2.1): the forward's attention hides the backward's
// combine, the backward's MLP the forward's dispatch, the forward's MLP
// the backward's dispatch, the backward's attention the forward's combine. The pipeline schedule itself
// (its order of passes, its bubble) is unchanged; DualPipe's bidirectional
// schedule, which also shrinks the bubble, is not modelled.
//
// The merge reorders the two passes' tasks in program order: each pass is
// cut after each of its expert-parallel all-to-alls into segments, and the
// segments alternate, backward first. Streams run in program order, so
// while a pass waits on its all-to-all the compute stream runs the other
// pass's segment: a segment's all-to-all is exposed only for
// max(0, all-to-all − the other pass's next segment). A forward never
// depends on another micro-batch's backward, so the merge adds no wait.

// stageOrder is stage s's order of passes. A merged pair sends the
// backward's gradient to the previous stage and the forward's activations
// to the next only at its end: with 1F1B's warm-up (neighbours one forward
// apart) a stage's pair would wait for its neighbour's pair and the two
// would alternate. Merged schedules warm up further (more activations in
// flight, which the memory model counts). Megatron-Core runs the merge
// only without pipelining or with the interleaved schedule, whose warm-up
// already spaces neighbours two forwards apart, and adds one warm-up
// forward (megatron/core/pipeline_parallel/schedules.py:
// num_warmup_microbatches += 1 under overlap_moe_expert_parallel_comm).
// Under plain 1F1B, which Megatron-Core rejects with pipelining, the merge
// stands for DualPipe's chunk pairs: the warm-up takes the interleaved
// spacing, 2(p−s−1) forwards, plus one.
func (t Training) stageOrder(s, m int) []Pass {
	par := t.Par
	merge := par.OverlapEPComm && max(par.EP, 1) > 1 && t.Model.IsMoE()
	return stageOrder(par.Schedule, par.PP, s, m, par.VirtualStages, merge)
}

// overlapPair reports whether passes i (a backward) and i+1 (a forward of
// another micro-batch) of a stage's order are merged.
func overlapPair(order []Pass, i int) bool {
	return i+1 < len(order) && !order[i].Forward && order[i+1].Forward && order[i].MB != order[i+1].MB
}

// interleave merges the builder's last two passes ([from, mid) and
// [mid, end)), renumbering its pending host waits too.
func (b *progBuilder) interleave(from, mid int32) func(int32) int32 {
	remap := Interleave(b.p, from, mid)
	for i, s := range b.sync {
		b.sync[i] = remap(s)
	}
	return remap
}

// Interleave reorders a program's tasks [from, mid) (one pass) and
// [mid, end) (the next, the program's last tasks) by alternating their
// segments, each ending after a task on the expert-parallel stream, and
// returns where each old index in [from, end) went. Dependencies and host
// waits are renumbered. Tasks before from are not moved.
func Interleave(p *Program, from, mid int32) func(int32) int32 {
	tasks := p.Tasks
	end := int32(len(tasks))
	segments := func(lo, hi int32) [][2]int32 {
		var out [][2]int32
		start := lo
		for i := lo; i < hi; i++ {
			if tasks[i].Stream == StreamEP {
				out = append(out, [2]int32{start, i + 1})
				start = i + 1
			}
		}
		if start < hi {
			out = append(out, [2]int32{start, hi})
		}
		return out
	}
	a, c := segments(from, mid), segments(mid, end)
	order := make([]int32, 0, end-from)
	for k := 0; k < max(len(a), len(c)); k++ {
		for _, segs := range [][][2]int32{a, c} {
			if k < len(segs) {
				for i := segs[k][0]; i < segs[k][1]; i++ {
					order = append(order, i)
				}
			}
		}
	}
	pos := make([]int32, end-from)
	for n, old := range order {
		pos[old-from] = from + int32(n)
	}
	remap := func(i int32) int32 {
		if i < from || i >= end {
			return i
		}
		return pos[i-from]
	}
	moved := make([]Task, end-from)
	for n, old := range order {
		t := tasks[old]
		t.Deps = remapAll(t.Deps, remap)
		t.HostWait = remapAll(t.HostWait, remap)
		moved[n] = t
	}
	copy(tasks[from:], moved)
	return remap
}

// remapAll renumbers a list of task indices into a new slice.
func remapAll(ids []int32, remap func(int32) int32) []int32 {
	if len(ids) == 0 {
		return ids
	}
	out := make([]int32, len(ids))
	for i, d := range ids {
		out[i] = remap(d)
	}
	return out
}
