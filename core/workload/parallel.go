package workload

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/problem"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// Schedule is a pipeline schedule.
type Schedule string

const (
	// GPipe runs every micro-batch's forward, then every backward (Huang et
	// al. 2019): every stage holds all m micro-batches' activations.
	GPipe Schedule = "gpipe"
	// OneFOneB is PipeDream-Flush (Narayanan et al. 2021): after p−s−1
	// warm-up forwards each stage alternates one forward and one backward.
	OneFOneB Schedule = "1f1b"
	// Interleaved is Megatron's interleaved 1F1B over v model chunks per
	// stage (Narayanan et al. 2021, §2.2), shrinking the bubble by v.
	Interleaved Schedule = "interleaved"
)

// Parallel is how a training step is laid out over GPUs.
type Parallel struct {
	// TP, PP and DP degrees; TP·PP·DP GPUs. Ranks are numbered TP fastest,
	// then DP, then PP (Megatron's default order): rank = tp + TP·(dp + DP·pp).
	// With context parallelism DP counts the data- and context-parallel
	// ranks together (the ranks that share the weights): index dp holds
	// chunk dp mod CP of the sequences of data-parallel replica dp / CP
	// (Megatron's order tp-cp-dp-pp).
	TP, PP, DP int
	// CP is the context-parallel degree (0 means 1; model.Run.CP): it
	// divides DP, and each of its ranks holds 1/CP of every sequence.
	// CPComm is model.Run.CPComm.
	CP     int
	CPComm string
	// MicroBatch is sequences per micro-batch; GlobalBatch sequences per
	// step over all replicas (GlobalBatch/(DP·MicroBatch) micro-batches).
	MicroBatch, GlobalBatch int
	Schedule                Schedule
	// VirtualStages is the model chunks per stage of the interleaved schedule.
	VirtualStages    int
	SequenceParallel bool

	// AccountForEmbedding and AccountForLoss count the embedding and the
	// model's tail (the LM head and its loss) as one layer each in the
	// split of the layers over the chunks (chunkPositions), as Megatron-Core
	// does with --account-for-embedding-in-pipeline-split and
	// --account-for-loss-in-pipeline-split.
	AccountForEmbedding, AccountForLoss bool
	// FirstStageLayers and LastStageLayers, when positive, are the layers
	// of the first and the last stage, the other stages sharing the rest
	// equally (Megatron-Core's uneven split, --decoder-first-pipeline-
	// num-layers and --decoder-last-pipeline-num-layers; stageLayers).
	FirstStageLayers, LastStageLayers int
	// Layout is Megatron-Core's pipeline layout string
	// (--pipeline-model-parallel-layout, model.ParsePipelineLayout): each
	// chunk's layers as given; "" splits evenly (or as the fields above).
	Layout string

	Recompute model.Recompute
	// RecomputeModules are what a selective recomputation reruns
	// (model.Run.RecomputeModules; nil: the attention core).
	RecomputeModules []string
	// ZeRO stage: 0 plain data parallel (all-reduce of gradients), 1
	// optimizer state sharded (reduce-scatter gradients, all-gather updated
	// weights), 2 gradients sharded too, 3 weights sharded too (all-gather
	// each block's weights before its forward and its backward).
	ZeRO int
	// OverlapGradReduce reduces gradients in buckets as the backward
	// produces them (Megatron --overlap-grad-reduce); otherwise one
	// reduction over the whole gradient buffer after the backward.
	OverlapGradReduce bool
	// BucketParams is the bucket size in parameters; 0 takes Megatron's
	// DDP default max(40M, 1M·DP).
	BucketParams int64
	// OptimizerInstances splits the data-parallel group into that many
	// groups of consecutive replicas (0 or 1: one): ZeRO shards its state
	// within each, each group reduce-scatters the gradients and gathers the
	// weights among its own replicas, and the groups all-reduce their
	// shards across (Megatron-Core's --num-distributed-optimizer-instances;
	// with ZeRO 3, FSDP's hybrid sharding). Dense models only.
	OptimizerInstances int
	// OverlapParamGather (ZeRO 1 and 2) all-gathers the updated weights in
	// buckets under the forward instead of after the optimizer (Megatron
	// --overlap-param-gather).
	OverlapParamGather bool
	// OverlapTPComm runs the backward's input-gradient all-reduce (or
	// reduce-scatter) while the weight-gradient GEMM computes.
	OverlapTPComm bool
	// TPCommOverlap runs each sequence-parallel all-gather that feeds a
	// GEMM, and each reduce-scatter of a forward GEMM's output, as a ring of
	// point-to-point steps under the GEMM split in TP chunks (Transformer
	// Engine's userbuffers, plan.go tpRing).
	TPCommOverlap bool
	// EP is the expert-parallel degree (moe.go): it divides the model's
	// experts, and EP·ExpertTP/TP (the replicas an expert-parallel group
	// spans) divides DP; 0 means 1.
	EP int
	// ExpertTP is the expert tensor-parallel degree (Megatron-Core
	// --expert-tensor-parallel-size): 0 means TP; 1 keeps each expert whole,
	// and the TP ranks of a replica then are TP/1 different EP ranks.
	ExpertTP int
	// OverlapEPComm runs each steady-state forward and backward pair of the
	// pipeline schedule interleaved, so one pass's dispatch and combine
	// overlap the other pass's compute (overlap.go).
	OverlapEPComm bool
}

// expertTP is the expert tensor-parallel degree.
func (p Parallel) expertTP() int {
	if p.ExpertTP > 0 {
		return p.ExpertTP
	}
	return p.TP
}

// cp is the context-parallel degree.
func (p Parallel) cp() int { return max(p.CP, 1) }

// shardDP is the replicas ZeRO shards its state over: the data-parallel
// group, or one distributed-optimizer instance of it.
func (p Parallel) shardDP() int { return p.DP / max(p.OptimizerInstances, 1) }

// epReplicas is the data-parallel replicas one expert-parallel group spans:
// EP·ExpertTP/TP (each replica holds TP/ExpertTP of its EP ranks).
func (p Parallel) epReplicas() int { return max(p.EP, 1) * p.expertTP() / p.TP }

// Training is a training step to lay out.
type Training struct {
	Model  model.Config
	Par    Parallel
	SeqLen int
	// DType is the math type; weights are kept in it.
	DType hw.DType
	// GradDType is the type gradients are accumulated and reduced in:
	// Megatron keeps fp32 main gradients for 16-bit training.
	GradDType hw.DType
	// NoGradAccumulationFusion: the weight-gradient GEMMs write their
	// gradient once in the math's type rather than adding into the
	// GradDType buffer (model.Run.GradDType "").
	NoGradAccumulationFusion bool
	// FP8Recipe, CrossEntropyFusion, RouterDType, FP8Dispatch, TEOpFuser,
	// FP8Attention, FP8OutputProj and VocabMultiple are model.Run's.
	FP8Recipe, CrossEntropyFusion                       string
	VocabMultiple                                       int
	RouterDType                                         hw.DType
	FP8Dispatch, TEOpFuser, FP8Attention, FP8OutputProj bool
	// UnfusedAttention uses Megatron's unfused attention kernels (no
	// FlashAttention), as the 2022 Korthikanti et al. measurements did.
	UnfusedAttention bool
	// FlashAttention2: see model.Run.
	FlashAttention2 bool
	// Routing assigns tokens to experts (mixture-of-experts models).
	Routing Routing
	// Canceled, if set, is polled while the plan is built (thousands of
	// micro-batches' tasks take seconds); its error stops the build.
	Canceled func() error
}

// MicroBatches is the number of micro-batches per replica per step (the
// context-parallel ranks of a replica share its micro-batches).
func (t Training) MicroBatches() int {
	return t.Par.GlobalBatch / (t.Par.DP / t.Par.cp() * t.Par.MicroBatch)
}

// localSeqLen is the tokens of a sequence one rank holds.
func (t Training) localSeqLen() int { return t.SeqLen / t.Par.cp() }

// Ranks is the number of GPUs.
func (p Parallel) Ranks() int { return p.TP * p.PP * p.DP }

// Rank is the global rank at (tp, dp, pp).
func (p Parallel) Rank(tp, dp, pp int) int { return tp + p.TP*(dp+p.DP*pp) }

// Check returns every problem of a training layout with the spec field it
// concerns (relative to the parallelism spec, or "model" / "seq_len").
func (t Training) Check() []problem.Problem {
	var ps []problem.Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, problem.Problem{Path: field, Message: fmt.Sprintf(format, args...)})
	}
	p := t.Par
	for _, f := range []struct {
		name string
		v    int
	}{{"tp", p.TP}, {"pp", p.PP}, {"dp", p.DP}, {"micro_batch", p.MicroBatch}, {"global_batch", p.GlobalBatch}, {"virtual_stages", p.VirtualStages}} {
		if f.v < 1 {
			bad(f.name, "must be >= 1, got %d", f.v)
		}
	}
	if len(ps) > 0 {
		return ps
	}
	cp := p.cp()
	if p.CP < 0 || p.DP%cp != 0 {
		bad("cp", "must be >= 1 and divide the data- and context-parallel ranks (%d), got %d", p.DP, p.CP)
		return ps
	}
	if cp > 1 && t.SeqLen%(2*cp) != 0 {
		bad("cp", "needs seq_len (%d) to split into 2·cp = %d equal chunks (each rank holds two, for balance under the causal mask)", t.SeqLen, 2*cp)
	}
	if dp := p.DP / cp; p.GlobalBatch%(dp*p.MicroBatch) != 0 {
		bad("global_batch", "must be a multiple of dp·micro_batch = %d, got %d", dp*p.MicroBatch, p.GlobalBatch)
	}
	switch p.Schedule {
	case GPipe, OneFOneB:
		if p.VirtualStages != 1 {
			bad("virtual_stages", "must be 1 for schedule %q, got %d (use \"interleaved\")", p.Schedule, p.VirtualStages)
		}
	case Interleaved:
		if p.PP == 1 && p.VirtualStages > 1 {
			// Megatron-LM: "pipeline-model-parallel size should be greater
			// than 1 with interleaved schedule" (arguments.py).
			bad("virtual_stages", "must be 1 with pp 1: the interleaved schedule passes chunks between stages, got %d", p.VirtualStages)
		}
		m := t.MicroBatches()
		if p.PP > 1 && m%p.PP != 0 {
			bad("global_batch", "the interleaved schedule needs micro-batches per replica (%d) to be a multiple of pp (%d)", m, p.PP)
		}
	default:
		bad("schedule", "must be one of gpipe, 1f1b, interleaved, got %q", p.Schedule)
	}
	if p.ZeRO < 0 || p.ZeRO > 3 {
		bad("zero", "must be 0, 1, 2 or 3, got %d", p.ZeRO)
	}
	if n := p.OptimizerInstances; n > 1 {
		switch {
		case p.ZeRO < 1:
			bad("distributed_optimizer_instances", "split the ZeRO state's sharding group: needs zero >= 1, got zero %d", p.ZeRO)
		case p.DP%n != 0 || p.DP/n < 2:
			bad("distributed_optimizer_instances", "must divide the data-parallel ranks (dp·cp = %d) into instances of at least 2, got %d", p.DP, n)
		case t.Model.IsMoE():
			bad("distributed_optimizer_instances", "applies to dense models (the experts' own data-parallel group is not split), got %d", n)
		}
	}
	if p.Layout != "" {
		if msg := p.checkPipelineLayout(len(t.Model.Pattern), t.Model.MTPLayers); msg[0] != "" {
			bad(msg[0], "%s", msg[1])
		}
	} else if p.FirstStageLayers != 0 || p.LastStageLayers != 0 {
		for _, msg := range p.checkUnevenSplit(len(t.Model.Pattern)) {
			bad(msg[0], "%s", msg[1])
		}
	} else if n := len(t.Model.Pattern) + p.splitSlots(); n < p.PP*p.VirtualStages {
		bad("pp", "pp·virtual_stages (%d) must not exceed the model's blocks (%d, the embedding and the loss included where the split accounts for them)", p.PP*p.VirtualStages, n)
	}
	if p.BucketParams < 0 {
		bad("bucket_params", "must be >= 0, got %d", p.BucketParams)
	}
	ep, etp := max(p.EP, 1), p.expertTP()
	if p.ExpertTP < 0 || (etp != 1 && etp != p.TP) {
		// An expert TP between 1 and TP would need a sub-group of the TP
		// group for the experts' gather and scatter: not modelled.
		bad("expert_tp", "must be 1 or tp (%d), got %d", p.TP, p.ExpertTP)
		return ps
	}
	if etp != p.TP && !t.Model.IsMoE() {
		bad("expert_tp", "expert tensor parallelism needs a mixture-of-experts model: must be tp (%d), got %d", p.TP, etp)
		return ps
	}
	if f := p.TP / etp; p.EP < 0 || ep%f != 0 {
		bad("ep", "must be a multiple of tp/expert_tp = %d (each TP rank holds its own experts), got %d", f, p.EP)
		return ps
	}
	if p.DP%p.epReplicas() != 0 {
		if etp == p.TP {
			bad("ep", "must be >= 1 and divide dp (%d), got %d", p.DP, p.EP)
		} else {
			bad("ep", "ep·expert_tp/tp = %d replicas must divide dp (%d), got ep %d", p.epReplicas(), p.DP, p.EP)
		}
		return ps
	}
	// Megatron-Core asserts expert parallelism for the overlap too.
	ps = append(ps, needWideEP(t.Model.IsMoE(), ep, epFlag{"overlap_ep_comm", p.OverlapEPComm}, epFlag{"fp8_dispatch", t.FP8Dispatch})...)
	if t.TEOpFuser && !t.Model.IsMoE() {
		ps = append(ps, problem.Problem{Path: "te_op_fuser", Message: "fuses a mixture-of-experts layer's expert MLP; the model has no experts (leave te_op_fuser out)"})
	}
	if t.Model.IsMoE() {
		for _, fp := range CheckRouting(t.Routing, t.Model) {
			ps = append(ps, problem.Problem{Path: "routing." + fp.Path, Message: fp.Message})
		}
	}
	run := t.microRun()
	for _, fp := range t.Model.CheckRun(run) {
		field := fp.Path
		switch field {
		case "batch":
			field = "micro_batch"
		case "recompute", "recompute_modules", "tp", "sequence_parallel", "ep", "expert_tp", "cp", "cp_comm_type":
		default:
			field = "model." + field
		}
		ps = append(ps, problem.Problem{Path: field, Message: fp.Message})
	}
	return ps
}

func (t Training) microRun() model.Run {
	accum := t.GradDType
	if t.NoGradAccumulationFusion {
		accum = ""
	}
	return model.Run{Phase: model.Training, Batch: t.Par.MicroBatch, SeqLen: t.localSeqLen(), CP: t.Par.CP, CPComm: t.Par.CPComm, TP: t.Par.TP, GradDType: accum, FP8Recipe: t.FP8Recipe,
		CrossEntropyFusion: t.CrossEntropyFusion, VocabMultiple: t.VocabMultiple, RouterDType: t.RouterDType, FP8Dispatch: t.FP8Dispatch, TEOpFuser: t.TEOpFuser, FP8Attention: t.FP8Attention, FP8OutputProj: t.FP8OutputProj,
		SequenceParallel: t.Par.SequenceParallel, Recompute: t.Par.Recompute, RecomputeModules: t.Par.RecomputeModules, DType: t.DType,
		UnfusedAttention: t.UnfusedAttention, FlashAttention2: t.FlashAttention2, EP: t.Par.EP, ExpertTP: t.Par.ExpertTP}
}

// chunks are a training layout's P·V chunks of the model's positions.
func (p Parallel) chunks(g model.Graph) [][]int {
	return chunkPositions(g, p.PP*p.VirtualStages, p.AccountForEmbedding, p.AccountForLoss, p.chunkLayers(len(g.Order)-1-g.Tail()))
}

// chunkLayers is each chunk's layers where they are given (a pipeline
// layout, or the uneven split's stages spread over their virtual stages);
// nil for the even split.
func (p Parallel) chunkLayers(layers int) []int {
	if p.Layout != "" {
		chunks, err := model.ParsePipelineLayout(p.Layout)
		if err != nil {
			return nil // Check reports it
		}
		out := make([]int, len(chunks))
		for c, ch := range chunks {
			out[c] = ch.Layers
		}
		return out
	}
	st := p.stageLayers(layers)
	if st == nil {
		return nil
	}
	out := make([]int, p.PP*p.VirtualStages)
	for c := range out {
		out[c] = st[c%p.PP] / p.VirtualStages
	}
	return out
}

// checkPipelineLayout reports, as a (field, message) pair, a layout
// Megatron-Core refuses or that does not fit the parallelism: combined
// with the other split fields, malformed, not matching the model's layers,
// or implying other virtual stages than the layout's.
func (p Parallel) checkPipelineLayout(layers, mtp int) [2]string {
	const field = "pipeline_model_parallel_layout"
	if p.AccountForEmbedding || p.AccountForLoss || p.FirstStageLayers != 0 || p.LastStageLayers != 0 {
		return [2]string{field, "cannot be set with account_for_embedding/loss_in_pipeline_split or decoder_first/last_pipeline_num_layers (Megatron-Core refuses both at once)"}
	}
	chunks, err := model.ParsePipelineLayout(p.Layout)
	if err == nil {
		var vpp int
		if vpp, err = checkLayout(chunks, p.PP, layers, mtp); err == nil && vpp != p.VirtualStages {
			return [2]string{"virtual_stages", fmt.Sprintf("must be %d, the layout's chunks per stage, got %d", vpp, p.VirtualStages)}
		}
	}
	if err != nil {
		return [2]string{field, err.Error()}
	}
	return [2]string{}
}

// stageLayers is each stage's layers under Megatron-Core's uneven split
// (transformer_block.py get_num_layers_to_build): the first and the last
// stage as given, the middle stages the rest in equal shares; nil for the
// even split.
func (p Parallel) stageLayers(layers int) []int {
	if p.FirstStageLayers == 0 && p.LastStageLayers == 0 {
		return nil
	}
	out := make([]int, p.PP)
	first, last, middle := 0, p.PP, p.PP
	rest := layers
	if p.FirstStageLayers > 0 {
		out[0], rest, first, middle = p.FirstStageLayers, rest-p.FirstStageLayers, 1, middle-1
	}
	if p.LastStageLayers > 0 {
		out[p.PP-1], rest, last, middle = p.LastStageLayers, rest-p.LastStageLayers, p.PP-1, middle-1
	}
	for s := first; s < last; s++ {
		out[s] = rest / max(middle, 1)
	}
	return out
}

// checkUnevenSplit reports, as (field, message) pairs, what Megatron-Core
// refuses in an uneven split of layers over the stages (TransformerConfig's
// checks): a pipeline of one stage, the embedding or the loss also
// accounted, a stage's layers not divisible by its virtual stages, middle
// layers without middle stages (or the reverse) or not divisible by them.
func (p Parallel) checkUnevenSplit(layers int) [][2]string {
	var out [][2]string
	bad := func(field, format string, args ...any) {
		out = append(out, [2]string{field, fmt.Sprintf(format, args...)})
	}
	const firstF, lastF = "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"
	v := p.VirtualStages
	rest, middle := layers, p.PP
	for _, f := range []struct {
		name string
		n    int
	}{{firstF, p.FirstStageLayers}, {lastF, p.LastStageLayers}} {
		switch {
		case f.n < 0:
			bad(f.name, "must be >= 0 (0: the even split), got %d", f.n)
		case f.n > 0 && f.n%v != 0:
			bad(f.name, "must be a multiple of virtual_stages (%d: each stage's layers split evenly over its chunks), got %d", v, f.n)
		case f.n > 0:
			rest, middle = rest-f.n, middle-1
		}
	}
	set := firstF
	if p.FirstStageLayers == 0 {
		set = lastF
	}
	switch {
	case len(out) > 0:
	case p.PP < 2:
		bad("pp", "an uneven pipeline split needs pp >= 2, got %d", p.PP)
	case p.AccountForEmbedding || p.AccountForLoss:
		bad(set, "cannot be set with account_for_embedding_in_pipeline_split or account_for_loss_in_pipeline_split (Megatron-Core refuses both at once)")
	case rest < 0 || (rest > 0) != (middle > 0):
		bad(set, "the stages given take %d of the model's %d layers, leaving %d for the %d other stages: each other stage needs layers, and every layer a stage", layers-rest, layers, rest, middle)
	case middle > 0 && (rest%middle != 0 || (rest/middle)%v != 0):
		bad(set, "the %d layers left for the %d other stages must split into equal shares that are multiples of virtual_stages (%d)", rest, middle, v)
	}
	return out
}

// splitSlots is how many layer slots the embedding and the loss take in
// the pipeline split.
func (p Parallel) splitSlots() (n int) {
	for _, accounted := range []bool{p.AccountForEmbedding, p.AccountForLoss} {
		if accounted {
			n++
		}
	}
	return n
}

// chunkPositions splits the model's positions (model.Graph.Order) into n
// contiguous chunks: the embedding joins the first, the LM head and what
// follows it (Graph.Tail) the last, and the pattern's blocks are spread as
// evenly as possible (earlier chunks take the remainder), or as many to
// each chunk as chunkLayers gives (Parallel.chunkLayers; chunk c is
// virtual stage c/pp of stage c mod pp, the interleaved schedule's order). Where the split accounts for the embedding or the loss
// (Megatron-Core), each takes one layer's slot in its chunk.
func chunkPositions(g model.Graph, n int, accountEmbedding, accountLoss bool, chunkLayers []int) [][]int {
	order, tail := g.Order, g.Tail()
	body := order[1 : len(order)-tail]
	// slots: the body's layers, with the accounted embedding first and
	// the accounted loss last (-1 and -2 mark them).
	slots := make([]int, 0, len(body)+2)
	if accountEmbedding {
		slots = append(slots, -1)
	}
	slots = append(slots, body...)
	if accountLoss {
		slots = append(slots, -2)
	}
	out := make([][]int, n)
	per, rem := len(slots)/n, len(slots)%n
	at := 0
	for c := 0; c < n; c++ {
		k := per
		if c < rem {
			k++
		}
		if chunkLayers != nil {
			k = chunkLayers[c]
		}
		for _, i := range slots[at : at+k] {
			if i >= 0 {
				out[c] = append(out[c], i)
			}
		}
		at += k
	}
	out[0] = append([]int{order[0]}, out[0]...)
	out[n-1] = append(out[n-1], order[len(order)-tail:]...)
	return out
}
