package workload

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// Memory is what one GPU holds, in bytes, by category.
type Memory struct {
	// Weights in the math type (ZeRO-3: this rank's shard plus the blocks
	// gathered at once).
	Weights float64
	// Gradients in the gradient type (ZeRO-2/3: this rank's shard).
	Gradients float64
	// Optimizer: fp32 master weights and Adam's two moments (ZeRO ≥ 1: shard).
	Optimizer float64
	// Activations kept from forward to backward at the schedule's peak
	// (training), or the live tensors of the largest operator (inference).
	Activations float64
	// KVCache and SSMState (inference).
	KVCache, SSMState float64
	// Workspace: the largest single operator's tensors, plus in training
	// the activations a recomputing block rebuilds during its backward.
	Workspace float64
}

// Total is the sum of every category.
func (m Memory) Total() float64 {
	return m.Weights + m.Gradients + m.Optimizer + m.Activations + m.KVCache + m.SSMState + m.Workspace
}

// TrainingPlan is a training step's plan with what scenarios report about it.
type TrainingPlan struct {
	*Plan
	// Memory per program (pipeline stage), per GPU.
	Memory []Memory
	// Params per GPU of each stage (this TP rank's share).
	StageParams []int64
	// ModelFLOPs is the matmul FLOPs of one step over all GPUs (the
	// Megatron formula's count), independent of the routing (matmulFLOPs).
	// HardwareFLOPs is the matmul FLOPs the simulated programs run,
	// recomputation included; under imbalanced routing each unit runs its
	// most loaded EP rank's expert tokens (unitLoad), and capacity drops and
	// padding change it.
	ModelFLOPs, HardwareFLOPs float64
	// Tokens per step.
	Tokens float64
	// Routing is the step's expert assignment (mixture-of-experts models).
	Routing *Assignment
	// ProgramsPerStage is EP when the routing makes EP ranks differ
	// (program s·EP + dp mod EP), else 1.
	ProgramsPerStage int
}

// BuildTraining lays out one training step. t must pass Check.
func BuildTraining(t Training) (*TrainingPlan, error) {
	if ps := t.Check(); len(ps) > 0 {
		return nil, fmt.Errorf("%s: %s", ps[0].Path, ps[0].Message)
	}
	if t.GradDType == "" {
		t.GradDType = hw.FP32
	}
	g, err := model.Build(t.Model, t.microRun())
	if err != nil {
		return nil, err
	}
	par := t.Par
	P, D, T := par.PP, par.DP, par.TP
	m := t.MicroBatches()
	chunks := par.chunks(g)
	tp := &TrainingPlan{Plan: &Plan{Ranks: par.Ranks()}, Tokens: float64(par.GlobalBatch * t.SeqLen)}

	// The same graph without recomputation sizes the activations a
	// recomputing block rebuilds during its backward.
	plain := g
	if par.Recompute != model.RecomputeNone && par.Recompute != "" {
		r := t.microRun()
		r.Recompute, r.RecomputeModules = model.RecomputeNone, nil
		if plain, err = model.Build(t.Model, r); err != nil {
			return nil, err
		}
	}

	// EP ranks are the members of an expert-parallel group; each unit (a
	// replica's TP group) holds f = TP/ExpertTP of them, each member
	// routing its ExpertTP ranks' sequence shards (MB·S/f tokens).
	EP, f := max(par.EP, 1), T/par.expertTP()
	tp.ProgramsPerStage = 1
	var cache *a2aCache
	var rings *ringCache
	if par.TPCommOverlap {
		rings = &ringCache{ids: map[[2]uint64]int32{}}
	}
	if t.Model.IsMoE() {
		tp.Routing = Route(t.Routing, t.Model, EP, int64(par.MicroBatch*t.localSeqLen()/f))
		if EP > 1 {
			cache = &a2aCache{a: tp.Routing, mats: map[[3]uint64]int32{}}
			if !tp.Routing.Balanced() {
				tp.ProgramsPerStage = par.epReplicas()
			}
		}
	}
	for s := 0; s < P; s++ {
		var stageMem Memory
		var stageParams int64
		for k := 0; k < tp.ProgramsPerStage; k++ {
			gk, pk := g, plain
			if tp.Routing != nil {
				r := t.microRun()
				r.ExpertTokens = tp.Routing.unitLoad(k, f)
				if gk, err = model.Build(t.Model, r); err != nil {
					return nil, err
				}
				pk = gk
				if par.Recompute != model.RecomputeNone && par.Recompute != "" {
					r.Recompute, r.RecomputeModules = model.RecomputeNone, nil
					if pk, err = model.Build(t.Model, r); err != nil {
						return nil, err
					}
				}
			}
			// The stages' programs differ little in length: the last one's
			// sizes the next one's tasks (growing a slice of thousands of
			// tasks copies each several times).
			hint := 0
			if n := len(tp.Programs); n > 0 {
				hint = len(tp.Programs[n-1].Tasks) * 9 / 8
			}
			prog, mem, params, err := t.stageProgram(gk, pk, chunks, s, m, cache, rings, hint)
			if err != nil {
				return nil, err
			}
			if tp.ProgramsPerStage > 1 {
				prog.Name = fmt.Sprintf("stage%d.ep%d", s, k)
			}
			tp.Programs = append(tp.Programs, prog)
			if mem.Total() > stageMem.Total() {
				stageMem = mem
			}
			stageParams = params
			n := float64(T*D) / float64(tp.ProgramsPerStage)
			for _, task := range prog.Tasks {
				tp.HardwareFLOPs += n * (task.MatmulFLOPs + task.RecomputeFLOPs)
			}
		}
		tp.Memory = append(tp.Memory, stageMem)
		tp.StageParams = append(tp.StageParams, stageParams)
	}
	tp.ModelFLOPs = float64(T*D*m) * matmulFLOPs(plain)
	t.layout(tp.Plan, tp.ProgramsPerStage)
	return tp, nil
}

// matmulFLOPs is the matmul FLOPs (GEMMs and attention, forward and
// backward, no recomputation) of one micro-batch through every block of g,
// on one rank. Built with the balanced expert share, it is the model FLOPs'
// count, which does not depend on the routing: the matmuls of the active
// parameters and the attention of every token, whichever experts and ranks
// the tokens reach, and whether or not capacity drops or pads them (as
// Megatron-LM's num_floating_point_operations counts them from the
// config's top-k alone).
func matmulFLOPs(g model.Graph) float64 {
	var f float64
	for _, bi := range g.Order {
		for _, list := range [][]model.Op{g.Blocks[bi].Forward, g.Blocks[bi].Backward} {
			for _, o := range list {
				if o.IsMatmul() && o.Pass != model.Recomputed {
					f += o.ModelFLOPs()
				}
			}
		}
	}
	return f
}

// layout creates the units and groups: unit dp + D·pp is the TP group of
// replica dp at stage pp.
func (t Training) layout(pl *Plan, perStage int) {
	par := t.Par
	P, V, D, T := par.PP, par.VirtualStages, par.DP, par.TP
	EP, EPu := max(par.EP, 1), par.epReplicas()
	unit := func(dp, pp int) int { return dp + D*pp }
	for pp := 0; pp < P; pp++ {
		for dp := 0; dp < D; dp++ {
			u := NewUnit(nil, pp*perStage+dp%perStage)
			u.Replica, u.Stage = dp, pp
			for k := 0; k < T; k++ {
				u.Ranks = append(u.Ranks, par.Rank(k, dp, pp))
			}
			pl.Groups = append(pl.Groups, Group{Units: []int{len(pl.Units)}, Comms: [][]int{u.Ranks}})
			u.Groups[SlotTP] = len(pl.Groups) - 1
			pl.Units = append(pl.Units, u)
		}
	}
	// replicas groups stage pp's units of the replicas reps on slot.
	replicas := func(pp int, reps []int, slot Slot) {
		pl.replicaGroup(reps, T, slot, func(dp int) int { return unit(dp, pp) }, func(k, dp int) int { return par.Rank(k, dp, pp) })
	}
	// The data-parallel group, or its distributed-optimizer instances of
	// consecutive replicas and the groups across them.
	S := par.shardDP()
	for pp := 0; pp < P; pp++ {
		for r := 0; r < D; r += S {
			replicas(pp, span(r, r+S, 1), SlotDP)
		}
		for i := 0; i < S && S < D; i++ {
			replicas(pp, span(i, D, S), SlotDPInstances)
		}
	}
	if C := par.cp(); C > 1 {
		// Each replica's context-parallel ranks: indices C·r … C·r+C−1.
		for pp := 0; pp < P; pp++ {
			for r := 0; r < D; r += C {
				replicas(pp, span(r, r+C, 1), SlotCP)
			}
		}
	}
	if EP > 1 {
		t.expertGroups(pl, unit)
	}
	for dp := 0; dp < D; dp++ {
		if perStage == 1 {
			var rep []int
			for pp := 0; pp < P; pp++ {
				rep = append(rep, unit(dp, pp))
			}
			pl.Replicas = append(pl.Replicas, rep)
		} else if dp%EPu == 0 {
			// Unequal EP ranks: the grain of symmetry is an EP group.
			var rep []int
			for pp := 0; pp < P; pp++ {
				for k := 0; k < EPu; k++ {
					rep = append(rep, unit(dp+k, pp))
				}
			}
			pl.Replicas = append(pl.Replicas, rep)
		}
		if P == 1 {
			continue
		}
		for s := 0; s < P; s++ {
			next := (s + 1) % P
			if next == 0 && V == 1 {
				continue
			}
			pl.link(unit(dp, s), unit(dp, next), SlotFwdOut, SlotFwdIn)
			pl.link(unit(dp, next), unit(dp, s), SlotBwdOut, SlotBwdIn)
		}
		if t.tiedAcrossStages() {
			first, last := unit(dp, 0), unit(dp, P-1)
			grp := Group{Units: []int{first, last}}
			for k := 0; k < T; k++ {
				grp.Comms = append(grp.Comms, []int{pl.Units[first].Ranks[k], pl.Units[last].Ranks[k]})
			}
			pl.Groups = append(pl.Groups, grp)
			pl.Units[first].Groups[SlotEmbedding] = len(pl.Groups) - 1
			pl.Units[last].Groups[SlotEmbedding] = len(pl.Groups) - 1
		}
	}
}

// tiedAcrossStages: the input embedding (first stage) and the LM head (last
// stage) share the word embedding, whose gradients Megatron all-reduces
// between the two stages after the data-parallel reduction.
func (t Training) tiedAcrossStages() bool { return t.Model.TiedEmbeddings && t.Par.PP > 1 }

// replicaGroup adds a group over the units of replicas reps (one stage's
// unit of each), with one communicator per TP index (k = 0..tp-1: the
// replicas' ranks of that index), and points each unit's slot at it.
func (pl *Plan) replicaGroup(reps []int, tp int, slot Slot, unit func(r int) int, rank func(k, r int) int) {
	grp := Group{}
	for _, r := range reps {
		grp.Units = append(grp.Units, unit(r))
	}
	for k := 0; k < tp; k++ {
		var ranks []int
		for _, r := range reps {
			ranks = append(ranks, rank(k, r))
		}
		grp.Comms = append(grp.Comms, ranks)
	}
	pl.Groups = append(pl.Groups, grp)
	for _, u := range grp.Units {
		pl.Units[u].Groups[slot] = len(pl.Groups) - 1
	}
}

// link adds a point-to-point group from unit a (sending on slot out) to unit
// b (receiving on slot in): one transfer per TP index.
func (pl *Plan) link(a, b int, out, in Slot) {
	grp := Group{Units: []int{a, b}}
	for k := range pl.Units[a].Ranks {
		grp.Comms = append(grp.Comms, []int{pl.Units[a].Ranks[k], pl.Units[b].Ranks[k]})
	}
	pl.Groups = append(pl.Groups, grp)
	pl.Units[a].Groups[out] = len(pl.Groups) - 1
	pl.Units[b].Groups[in] = len(pl.Groups) - 1
}

// stageProgram builds stage s's program, its memory and its parameters;
// tasks is the capacity its task list starts with. It stops with
// t.Canceled's error.
func (t Training) stageProgram(g, plain model.Graph, chunks [][]int, s, m int, a2a *a2aCache, rings *ringCache, tasks int) (Program, Memory, int64, error) {
	par := t.Par
	P, V, D, T := par.PP, par.VirtualStages, par.DP, par.TP
	b := &progBuilder{p: &Program{Name: fmt.Sprintf("stage%d", s), Tasks: make([]Task, 0, tasks)}, a2a: a2a, dispatchSync: !t.Routing.PadToCapacity, hierarchical: t.Routing.HierarchicalA2A,
		topK: int32(t.Model.ExpertsPerToken), limit: int32(t.Routing.NodeLimit), rings: rings, tp: T}
	e := hw.DType(t.DType).Bytes()
	if e < 2 {
		e = 2
	}
	// Pipeline messages: the micro-batch's activations [tokens × hidden].
	// Each TP rank sends its 1/t share; without sequence parallelism the
	// receiver all-gathers them over its TP group (Megatron's scatter-gather
	// optimization).
	act := float64(par.MicroBatch*t.localSeqLen()*t.Model.Hidden) * e
	msg := act
	gather := false
	if T > 1 {
		msg = act / float64(T)
		gather = !par.SequenceParallel
	}

	// Parameters of each chunk's blocks on this rank; shared weights once.
	var params int64
	chunkParams := make([]int64, V)
	seenShared := map[int]bool{}
	blockParams := func(bi int) int64 {
		n := g.Blocks[bi].Params
		if !seenShared[bi] && g.Blocks[bi].SharedParams > 0 {
			seenShared[bi] = true
			n += g.Blocks[bi].SharedParams
		}
		return n
	}
	posParams := make([][]int64, V)
	posExpert := make([][]int64, V)
	// expert: routed-expert parameters, reduced over the expert-data-
	// parallel group instead of the data-parallel one (EP > 1).
	EP := max(par.EP, 1)
	EDP := D / par.epReplicas()
	var expert int64
	for c := 0; c < V; c++ {
		for _, bi := range chunks[c*P+s] {
			n := blockParams(bi)
			x := int64(0)
			if EP > 1 {
				x = g.Blocks[bi].ExpertParams
			}
			posParams[c] = append(posParams[c], n-x)
			posExpert[c] = append(posExpert[c], x)
			chunkParams[c] += n
			params += n
			expert += x
		}
	}
	dense := params - expert

	order := t.stageOrder(s, m)
	lastBwd := map[int]int{} // chunk -> index in order of its last backward
	for i, ps := range order {
		if !ps.Forward {
			lastBwd[ps.Chunk] = i
		}
	}
	bucket := par.BucketParams
	if bucket == 0 {
		// Megatron-LM DistributedDataParallel: bucket_size = max(40M, 1M·dp).
		bucket = max(40_000_000, 1_000_000*int64(D))
	}
	gradBytes := t.GradDType.Bytes()
	reduce := model.AllReduce
	if par.ZeRO >= 1 {
		reduce = model.ReduceScatter
	}
	// Gradient parameters not yet in a bucket: dense ones (reduced over
	// the DP group) and routed-expert ones (over the expert-DP group, in
	// buckets of their own: Megatron-Core's DistributedDataParallel keeps
	// expert_parallel_buffers beside its buffers, with the same bucket
	// size, and launches both as their gradients become ready).
	var pending, pendingExpert int64
	// gradReduce reduces dense gradients over the data-parallel group;
	// with distributed-optimizer instances each reduce-scatters them among
	// its replicas, then the instances all-reduce their shards.
	S := par.shardDP()
	gradReduce := func(name string, bytes float64, after int32) {
		id := b.collective(name, StreamDP, SlotDP, reduce, bytes, -1, after)
		if S < D {
			b.collective(name+".across_instances", StreamDP, SlotDPInstances, model.AllReduce, bytes/float64(S), -1, id)
		}
	}
	// ZeRO-3 gathers a block's weights before each of its passes: the
	// dense ones over the DP group, the routed experts' over the
	// expert-DP group that shards them (Megatron-Core's FSDP keeps expert
	// parameters in buffers of their own, sharded over expert DP).
	zeroGather := func(bi int, mb int32, after int32) []int32 {
		blk := g.Blocks[bi]
		x := int64(0)
		if EP > 1 {
			x = blk.ExpertParams
		}
		out := []int32{b.collective(blk.Name+".zero3_all_gather", StreamDP, SlotDP, model.AllGather, float64(blk.Params+blk.SharedParams-x)*e, mb, after)}
		if x > 0 && EDP > 1 {
			out = append(out, b.collective(blk.Name+".zero3_expert_all_gather", StreamDP, SlotEDP, model.AllGather, float64(x)*e, mb, after))
		}
		return out
	}

	gathered := t.paramGatherBuckets(b, chunks, s, posParams, posExpert, bucket, e)

	// recvFor posts the receive pass i waits for: its activations from
	// the stage before (forward) or its gradients from the stage after
	// (backward); -1 if it has none.
	recvFor := func(i int) int32 {
		ps := order[i]
		vs, tag, mb := ps.Chunk*P+s, int32(ps.MB*V+ps.Chunk), int32(ps.MB)
		switch {
		case ps.Forward && vs > 0:
			return b.p2p("recv_activations", Recv, SlotFwdIn, tag, msg, mb, V == 1)
		case !ps.Forward && vs < P*V-1:
			return b.p2p("recv_gradients", Recv, SlotBwdIn, tag, msg, mb, V == 1)
		}
		return -1
	}
	// The interleaved schedule overlaps its transfers with compute
	// (Megatron-LM's overlap_p2p_comm, on whenever virtual stages are;
	// Megatron-Bridge sets it so too): after each pass it posts, with the
	// pass's send, the receive of the next pass of the same direction,
	// which arrives while the passes between run, and waits for it on the
	// device only (no batched transfers, so no device synchronisation).
	// early[d] is the receive posted so for the next forward (d = 0) or
	// backward (1) pass.
	early := [2]int32{-1, -1}
	nextOfKind := func(i int) int {
		for j := i + 1; j < len(order); j++ {
			if order[j].Forward == order[i].Forward {
				return j
			}
		}
		return -1
	}
	direction := func(ps Pass) int {
		if ps.Forward {
			return 0
		}
		return 1
	}
	lastCompute := int32(-1)
	merge := par.OverlapEPComm && a2a != nil
	var passStart, mergeFrom int32 = 0, -1
	var reserve taskReserve
	for i, ps := range order {
		if err := poll(t.Canceled, i); err != nil {
			return Program{}, Memory{}, 0, err
		}
		if i > 0 {
			reserve.observe(b.p, order, order[i-1].Forward, len(b.p.Tasks)-int(passStart))
		}
		passStart = int32(len(b.p.Tasks))
		if merge && overlapPair(order, i) {
			mergeFrom = passStart
		}
		vs := ps.Chunk*P + s
		mb := int32(ps.MB)
		blocks := chunks[vs]
		pre := fmt.Sprintf("mb%d.", ps.MB)
		if V > 1 {
			pre = fmt.Sprintf("mb%d.c%d.", ps.MB, ps.Chunk)
		}
		last := int32(-1)
		recv := early[direction(ps)]
		early[direction(ps)] = -1
		if recv < 0 {
			recv = recvFor(i)
		}
		if ps.Forward {
			if vs > 0 {
				last = recv
				if gather {
					last = b.collective(pre+"pp.all_gather", StreamTP, SlotTP, model.AllGather, act, mb, last)
				}
			}
			prevEnd := []int32{-1, -1}
			for k, bi := range blocks {
				after := []int32{last}
				if par.ZeRO == 3 && D > 1 {
					after = append(after, zeroGather(bi, mb, prevEnd[0])...)
				}
				if ps.MB == 0 && gathered != nil {
					after = append(after, gathered[ps.Chunk][k]...)
				}
				if r := b.ops(pre+"fwd.", g.Blocks[bi].Forward, mb, deps(after...), false); r >= 0 {
					last = r
				}
				prevEnd = []int32{prevEnd[1], last}
			}
			if vs < P*V-1 {
				b.p2pAfter("send_activations", Send, SlotFwdOut, int32(ps.MB*V+(vs+1)/P), msg, mb, last)
			}
		} else {
			if vs < P*V-1 {
				last = recv
				if gather {
					last = b.collective(pre+"pp.all_gather", StreamTP, SlotTP, model.AllGather, act, mb, last)
				}
			}
			prevEnd := []int32{-1, -1}
			for k := len(blocks) - 1; k >= 0; k-- {
				bi := blocks[k]
				after := []int32{last}
				if par.ZeRO == 3 && D > 1 {
					after = append(after, zeroGather(bi, mb, prevEnd[0])...)
				}
				if r := b.ops(pre+"bwd.", g.Blocks[bi].Backward, mb, deps(after...), par.OverlapTPComm); r >= 0 {
					last = r
				}
				prevEnd = []int32{prevEnd[1], last}
				if par.OverlapGradReduce && D > 1 && lastBwd[ps.Chunk] == i {
					pending += posParams[ps.Chunk][k]
					if pending >= bucket {
						gradReduce(fmt.Sprintf("grad_%s.bucket", reduce), float64(pending)*gradBytes, last)
						pending = 0
					}
				}
				if par.OverlapGradReduce && EDP > 1 && lastBwd[ps.Chunk] == i {
					pendingExpert += posExpert[ps.Chunk][k]
					if pendingExpert >= bucket {
						b.collective(fmt.Sprintf("expert_grad_%s.bucket", reduce), StreamDP, SlotEDP, reduce, float64(pendingExpert)*gradBytes, -1, last)
						pendingExpert = 0
					}
				}
			}
			if vs > 0 {
				b.p2pAfter("send_gradients", Send, SlotBwdOut, int32(ps.MB*V+(vs-1)/P), msg, mb, last)
			}
		}
		lastCompute = last
		if mergeFrom >= 0 && ps.Forward {
			remap := b.interleave(mergeFrom, passStart)
			lastCompute = remap(lastCompute)
			for d, r := range early {
				if r >= 0 {
					early[d] = remap(r)
				}
			}
			mergeFrom = -1
		}
		if V > 1 {
			if j := nextOfKind(i); j >= 0 {
				early[direction(ps)] = recvFor(j)
			}
		}
	}
	if D > 1 && par.OverlapGradReduce && pending > 0 {
		gradReduce(fmt.Sprintf("grad_%s.bucket", reduce), float64(pending)*gradBytes, lastCompute)
	}
	if D > 1 && !par.OverlapGradReduce {
		gradReduce(fmt.Sprintf("grad_%s", reduce), float64(dense)*gradBytes, lastCompute)
	}
	if EDP > 1 && par.OverlapGradReduce && pendingExpert > 0 {
		b.collective(fmt.Sprintf("expert_grad_%s.bucket", reduce), StreamDP, SlotEDP, reduce, float64(pendingExpert)*gradBytes, -1, lastCompute)
	}
	if EDP > 1 && expert > 0 && !par.OverlapGradReduce {
		b.collective(fmt.Sprintf("expert_grad_%s", reduce), StreamDP, SlotEDP, reduce, float64(expert)*gradBytes, -1, lastCompute)
	}
	if t.tiedAcrossStages() && (s == 0 || s == P-1) {
		// Megatron's embedding-group all-reduce of the word embedding's
		// gradient (this rank's vocabulary shard), after the DP reduction.
		words := float64(model.VocabShard(t.Model.Vocab, T, t.VocabMultiple)) * float64(t.Model.Hidden)
		b.collective("embedding_grad_all_reduce", StreamDP, SlotEmbedding, model.AllReduce, words*gradBytes, -1, lastCompute)
	}
	// The optimizer waits for every gradient reduction (the DP stream is
	// serial, so its last task) and the backward.
	optAfter := []int32{lastCompute}
	for i := len(b.p.Tasks) - 1; i >= 0; i-- {
		if b.p.Tasks[i].Stream == StreamDP {
			optAfter = append(optAfter, int32(i))
			break
		}
	}
	shard := params
	if par.ZeRO >= 1 {
		shard = (dense+int64(S)-1)/int64(S) + (expert+int64(EDP)-1)/int64(EDP)
	}
	opt := model.OptimizerStep("optimizer", shard, t.DType, gradBytes)
	// The host waits for the backward and the gradient reductions before
	// it issues the optimizer: Megatron's mixed-precision optimizer reads
	// the found-inf flag and the gradient norm on the host (.item()).
	b.hostSync(optAfter...)
	last := b.compute("optimizer", opt, -1, optAfter...)
	if par.ZeRO >= 1 && par.ZeRO < 3 && D > 1 && gathered == nil {
		b.collective("param_all_gather", StreamDP, SlotDP, model.AllGather, float64(dense)*e, -1, last)
	}
	if par.ZeRO >= 1 && par.ZeRO < 3 && EDP > 1 && expert > 0 && gathered == nil {
		b.collective("expert_param_all_gather", StreamDP, SlotEDP, model.AllGather, float64(expert)*e, -1, last)
	}
	b.p.Marks = map[string]int32{"optimizer": last}

	mem := t.stageMemory(g, plain, chunks, s, order, params, e, gradBytes)
	t.expertMemory(&mem, dense, expert, gradBytes, e)
	return *b.p, mem, params, nil
}

// paramGatherBuckets issues, under --overlap-param-gather, the previous
// step's weight all-gathers at the start of this one, in buckets of the
// gradient buckets' size in forward order (Megatron-Core dispatches each
// bucket's gather ahead of the forward that uses it, and a layer's first
// forward waits for it: DistributedDataParallel's forward pre-hooks). It
// returns, per chunk and block, the gathers that block waits for; nil
// when the weights are gathered after the optimizer instead.
// taskReserve grows a program's task list once to what its whole pass
// order will need, estimated from its first forward and backward passes:
// growing a list of millions of tasks by doubling holds the old and new
// lists at once, and copies gigabytes in copies a Ctrl-C must wait for.
type taskReserve struct {
	passes, tasks [2]int // seen: forward [0] and backward [1]
	done          bool
}

// observe records a built pass of n tasks.
func (r *taskReserve) observe(p *Program, order []Pass, forward bool, n int) {
	k := 1
	if forward {
		k = 0
	}
	r.passes[k]++
	r.tasks[k] += n
	if r.done || r.passes[0] == 0 || r.passes[1] == 0 {
		return
	}
	r.done = true
	var count [2]int
	for _, ps := range order {
		if ps.Forward {
			count[0]++
		} else {
			count[1]++
		}
	}
	want := len(p.Tasks)
	for k := range count {
		want += (count[k] - r.passes[k]) * r.tasks[k] / r.passes[k]
	}
	if want = want * 17 / 16; want > cap(p.Tasks) {
		p.Tasks = append(make([]Task, 0, want), p.Tasks...)
	}
}

func (t Training) paramGatherBuckets(b *progBuilder, chunks [][]int, s int, dense, expert [][]int64, bucket int64, e float64) [][][]int32 {
	par := t.Par
	P, V, D := par.PP, par.VirtualStages, par.DP
	EDP := D / par.epReplicas()
	if !par.OverlapParamGather || par.ZeRO < 1 || par.ZeRO > 2 || D == 1 {
		return nil
	}
	waits := make([][][]int32, V)
	type filling struct {
		params  int64
		waiting [][2]int
	}
	// Dense weights gather over the DP group, routed experts' over the
	// expert-DP group, each in its own buckets.
	var fills [2]filling
	names := [2]string{"param_all_gather.bucket", "expert_param_all_gather.bucket"}
	slots := [2]Slot{SlotDP, SlotEDP}
	flush := func(i int) {
		f := &fills[i]
		if f.params == 0 {
			return
		}
		g := b.collective(names[i], StreamDP, slots[i], model.AllGather, float64(f.params)*e, -1)
		for _, w := range f.waiting {
			waits[w[0]][w[1]] = append(waits[w[0]][w[1]], g)
		}
		*f = filling{}
	}
	for c := 0; c < V; c++ {
		waits[c] = make([][]int32, len(chunks[c*P+s]))
		for k := range chunks[c*P+s] {
			for i, n := range []int64{dense[c][k], expert[c][k]} {
				if n == 0 || (i == 1 && EDP == 1) {
					continue
				}
				fills[i].params += n
				fills[i].waiting = append(fills[i].waiting, [2]int{c, k})
				if fills[i].params >= bucket {
					flush(i)
				}
			}
		}
	}
	flush(0)
	flush(1)
	return waits
}

// p2p appends a transfer (posted at once) on a pipeline slot. With
// batched, the host waits for a receive to complete before it issues
// anything after it: Megatron-LM synchronises the device after every
// batched send/receive (p2p_communication.py: torch.cuda.synchronize() "to
// protect against race condition when using batch_isend_irecv()",
// batch_p2p_sync on by default; batch_p2p_comm is on unless the
// interleaved schedule overlaps its transfers).
func (b *progBuilder) p2p(name string, kind TaskKind, slot Slot, tag int32, bytes float64, mb int32, batched bool) int32 {
	i := b.add(Task{Name: fmt.Sprintf("mb%d.%s", mb, name), Kind: kind, Stream: StreamPP, Coll: SendRecv,
		Bytes: bytes, Slot: slot, Tag: tag, MicroBatch: mb})
	if kind == Recv && batched {
		b.hostSync(i)
	}
	return i
}

// p2pAfter appends a send after task `after`.
func (b *progBuilder) p2pAfter(name string, kind TaskKind, slot Slot, tag int32, bytes float64, mb int32, after int32) int32 {
	i := b.p2p(name, kind, slot, tag, bytes, mb, false)
	b.p.Tasks[i].Deps = deps(after)
	return i
}

// stageMemory is the per-GPU memory of stage s.
func (t Training) stageMemory(g, plain model.Graph, chunks [][]int, s int, order []Pass, params int64, e, gradBytes float64) Memory {
	par := t.Par
	// ZeRO shards over the data-parallel group, or one instance of it.
	P, V, S := par.PP, par.VirtualStages, float64(par.shardDP())
	p := float64(params)
	mem := Memory{Weights: p * e, Gradients: p * gradBytes, Optimizer: p * optimizerBytes(t.DType)}
	if par.ZeRO >= 1 {
		mem.Optimizer /= S
	}
	if par.ZeRO >= 2 {
		mem.Gradients /= S
	}
	chunkAct := make([]float64, V)
	var rebuild, widest, biggest float64
	for c := 0; c < V; c++ {
		for _, bi := range chunks[c*P+s] {
			blk := g.Blocks[bi]
			chunkAct[c] += blk.ActivationBytes
			if pb, ok := plain.Block(blk.Name); ok {
				rebuild = max(rebuild, pb.ActivationBytes-blk.ActivationBytes)
			}
			widest = max(widest, float64(blk.Params+blk.SharedParams))
			for _, list := range [][]model.Op{blk.Forward, blk.Backward} {
				for _, o := range list {
					if !o.IsComm() {
						biggest = max(biggest, opTensors(o))
					}
				}
			}
		}
	}
	if par.ZeRO == 3 {
		// Shards, plus two gathered blocks (the one computing and the one
		// being prefetched).
		mem.Weights = p*e/S + 2*widest*e
	}
	mem.Activations = PeakInFlight(order, chunkAct)
	mem.Workspace = biggest + rebuild
	return mem
}

// optimizerBytes per parameter: Adam's two fp32 moments, plus an fp32
// master copy when the weights are kept in a narrower type (mixed precision).
func optimizerBytes(d hw.DType) float64 {
	if d.Bytes() >= 4 {
		return 8
	}
	return 12
}

// Sizing is what a training layout needs, found without laying out its
// tasks: searches use it to reject layouts that do not fit and to bound
// the step time of the others before simulating them.
type Sizing struct {
	// Memory per stage, per GPU.
	Memory []Memory
	// Forward and Backward are one micro-batch through all of a stage's
	// chunks on a healthy GPU, in seconds (compute only); Optimizer the
	// stage's optimizer step.
	Forward, Backward, Optimizer []float64
	// TP lists each stage's tensor-parallel collectives of one micro-batch
	// (they run between its compute tasks, not beside them).
	TP [][]Coll
	// DPTail lists each stage's data-parallel collectives after its last
	// backward (gradient reduction; ZeRO-1/2's weight all-gather after the
	// optimizer); DPDuring those during the passes (ZeRO-3's gathers).
	DPTail, DPDuring [][]Coll
	MicroBatches     int
}

// Coll is a collective and its payload (nccl-tests convention).
type Coll struct {
	Kind  model.Kind
	Bytes float64
}

// Size computes a layout's Sizing with cost pricing an operator in seconds.
// t must pass Check.
func (t Training) Size(cost func(model.Op) (float64, error)) (*Sizing, error) {
	if t.GradDType == "" {
		t.GradDType = hw.FP32
	}
	g, err := model.Build(t.Model, t.microRun())
	if err != nil {
		return nil, err
	}
	plain := g
	if t.Par.Recompute != model.RecomputeNone && t.Par.Recompute != "" {
		r := t.microRun()
		r.Recompute, r.RecomputeModules = model.RecomputeNone, nil
		if plain, err = model.Build(t.Model, r); err != nil {
			return nil, err
		}
	}
	par := t.Par
	P, V, D := par.PP, par.VirtualStages, par.DP
	m := t.MicroBatches()
	e := max(t.DType.Bytes(), 2)
	gradBytes := t.GradDType.Bytes()
	chunks := par.chunks(g)
	priced := map[int][2]float64{}
	price := func(bi int) ([2]float64, error) {
		if p, ok := priced[bi]; ok {
			return p, nil
		}
		var p [2]float64
		for k, list := range [][]model.Op{g.Blocks[bi].Forward, g.Blocks[bi].Backward} {
			for _, o := range list {
				if o.IsComm() {
					continue
				}
				c, err := cost(o)
				if err != nil {
					return p, err
				}
				p[k] += c
			}
		}
		priced[bi] = p
		return p, nil
	}
	sz := &Sizing{MicroBatches: m}
	for s := 0; s < P; s++ {
		var fwd, bwd float64
		var params, expert int64
		var colls, during, tp []Coll
		seen := map[int]bool{}
		for c := 0; c < V; c++ {
			for _, bi := range chunks[c*P+s] {
				p, err := price(bi)
				if err != nil {
					return nil, err
				}
				fwd, bwd = fwd+p[0], bwd+p[1]
				if par.EP > 1 {
					expert += g.Blocks[bi].ExpertParams
				}
				for k, list := range [][]model.Op{g.Blocks[bi].Forward, g.Blocks[bi].Backward} {
					start, hiding := 0, false
					for i, o := range list {
						if !o.IsComm() {
							continue
						}
						// The all-to-alls are left out, and so are the backward's
						// collectives that overlap the weight-gradient GEMMs
						// (OverlapTPComm, as the program builder runs them: the
						// one after the GEMMs' segment and those queued right
						// behind it on the TP stream): the bound stays a lower bound.
						if seg := list[start:i]; len(seg) > 0 {
							hiding = k == 1 && par.OverlapTPComm && hidesBehindWgrad(seg)
						}
						if o.Kind != model.AllToAll && !o.CP && !hiding {
							tp = append(tp, Coll{o.Kind, o.Bytes})
						}
						start = i + 1
					}
				}
				n := g.Blocks[bi].Params
				if !seen[bi] {
					seen[bi] = true
					n += g.Blocks[bi].SharedParams
				}
				params += n
				if par.ZeRO == 3 && D > 1 {
					// The dense part, over the DP ring (the experts' go
					// over their own group: left out of the bound).
					w := float64(g.Blocks[bi].Params+g.Blocks[bi].SharedParams-g.Blocks[bi].ExpertParams) * e
					for k := 0; k < 2*m; k++ {
						during = append(during, Coll{model.AllGather, w})
					}
				}
			}
		}
		dense := params - expert // expert gradients: the EDP group's (left out of the bound)
		if D > 1 {
			switch par.ZeRO {
			case 0:
				colls = append(colls, Coll{model.AllReduce, float64(dense) * gradBytes})
			case 1, 2:
				colls = append(colls, Coll{model.ReduceScatter, float64(dense) * gradBytes}, Coll{model.AllGather, float64(dense) * e})
			case 3:
				colls = append(colls, Coll{model.ReduceScatter, float64(dense) * gradBytes})
			}
		}
		EDP := D / par.epReplicas()
		shard := params
		if par.ZeRO >= 1 {
			shard = (dense+int64(D)-1)/int64(D) + (expert+int64(EDP)-1)/int64(EDP)
		}
		var opt float64
		for _, o := range model.OptimizerStep("optimizer", shard, t.DType, gradBytes) {
			c, err := cost(o)
			if err != nil {
				return nil, err
			}
			opt += c
		}
		order := t.stageOrder(s, m)
		mem := t.stageMemory(g, plain, chunks, s, order, params, e, gradBytes)
		t.expertMemory(&mem, dense, expert, gradBytes, e)
		sz.Memory = append(sz.Memory, mem)
		sz.Forward = append(sz.Forward, fwd)
		sz.Backward = append(sz.Backward, bwd)
		sz.Optimizer = append(sz.Optimizer, opt)
		sz.TP = append(sz.TP, tp)
		sz.DPTail = append(sz.DPTail, colls)
		sz.DPDuring = append(sz.DPDuring, during)
	}
	return sz, nil
}

// Bound is a lower bound on the step time of a GPipe or 1F1B layout
// without gradient-reduction overlap, given per stage the least time of
// one micro-batch's tensor-parallel collectives (tp), of the data-parallel
// collectives after the backward (tail) and of all data-parallel
// collectives (dp; the DP stream is serial). Stage s cannot start before
// the first micro-batch's forward has passed the stages before it; it then
// runs m forwards and backwards with their TP collectives; after its last
// backward the gradient must pass back through the earlier stages, while
// it reduces gradients and steps its optimizer.
func (sz *Sizing) Bound(tp, tail, dp []float64) float64 {
	var best, prefF, prefB float64
	m := float64(sz.MicroBatches)
	for s := range sz.Forward {
		best = max(best, prefF+m*(sz.Forward[s]+sz.Backward[s]+tp[s])+max(prefB, tail[s]+sz.Optimizer[s]), dp[s])
		prefF += sz.Forward[s]
		prefB += sz.Backward[s]
	}
	return best
}
