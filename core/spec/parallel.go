package spec

import "github.com/eidolon-sim/eidolon/core/model"

// Parallel is how a training step is laid out over GPUs (see
// workload.Parallel). Ranks are numbered TP fastest, then DP, then PP:
// rank = tp + TP·(dp + DP·pp), so a TP group sits inside a node.
type Parallel struct {
	// TP, PP, DP degrees; default 1, 1 and the cluster's GPUs/(TP·CP·PP).
	TP int `json:"tp,omitempty"`
	PP int `json:"pp,omitempty"`
	DP int `json:"dp,omitempty"`
	// CP is the context-parallel degree (Megatron-Core
	// --context-parallel-size; default 1): each sequence is split over cp
	// ranks, two chunks each so that the causal attention's work is equal,
	// and the attention passes keys and values around them as Transformer
	// Engine's ring attention does (cp_comm_type "p2p"), overlapped with
	// its compute. The weights are replicated over cp and their gradients
	// reduced over dp·cp. Ranks are numbered tp, cp, dp, pp (Megatron's
	// order): rank = tp + TP·(cp + CP·(dp + DP·pp)).
	CP int `json:"cp,omitempty"`
	// CPCommType is how the cp ranks exchange what attention needs
	// (Megatron-Core --cp-comm-type): "p2p" (default, the ring above),
	// "all_gather" (the keys and values gathered before the attention and
	// their gradients reduce-scattered after it, not overlapped: Llama 3's
	// context parallelism) or "a2a" (DeepSpeed-Ulysses: an all-to-all trades
	// each rank's share of the sequence for the whole sequence of heads/cp
	// heads before the attention, and back after it; needs the heads and
	// key/value heads of a tensor-parallel rank to be multiples of cp).
	CPCommType string `json:"cp_comm_type,omitempty"`
	// MicroBatch: sequences per micro-batch (default 1). GlobalBatch:
	// sequences per step over all replicas (default dp·micro_batch·pp, so
	// that a pipeline has pp micro-batches).
	MicroBatch  int `json:"micro_batch,omitempty"`
	GlobalBatch int `json:"global_batch,omitempty"`
	// Schedule: "1f1b" (default), "gpipe", or "interleaved" (default when
	// virtual_stages > 1) with VirtualStages model chunks per stage.
	Schedule      string `json:"schedule,omitempty"`
	VirtualStages int    `json:"virtual_stages,omitempty"`
	// SequenceParallel shards norms, dropout and residuals over the TP group.
	SequenceParallel bool `json:"sequence_parallel,omitempty"`
	// AccountForEmbedding and AccountForLoss count the embedding and the
	// LM head with its loss as one layer each when the layers are split over
	// the pipeline's chunks (Megatron-Core --account-for-embedding-in-
	// pipeline-split, --account-for-loss-in-pipeline-split): the first chunk
	// then holds one layer fewer, the last one fewer, and pp·virtual_stages
	// may reach the layers plus those two.
	AccountForEmbedding bool `json:"account_for_embedding_in_pipeline_split,omitempty"`
	AccountForLoss      bool `json:"account_for_loss_in_pipeline_split,omitempty"`
	// DecoderFirstStageLayers and DecoderLastStageLayers give the first and
	// the last pipeline stage that many layers (0: the even split), the
	// others an equal share of the rest, as Megatron-Core's
	// --decoder-first-pipeline-num-layers and
	// --decoder-last-pipeline-num-layers do: a large vocabulary's embedding
	// or LM head then shares its stage with fewer layers. With virtual
	// stages each stage's layers are split evenly over its chunks.
	DecoderFirstStageLayers int `json:"decoder_first_pipeline_num_layers,omitempty"`
	DecoderLastStageLayers  int `json:"decoder_last_pipeline_num_layers,omitempty"`
	// PipelineLayout places every layer: Megatron-Core's
	// --pipeline-model-parallel-layout, chunk by chunk separated by "|" in
	// the interleaved schedule's chunk order, "E" the embedding, "t" a
	// transformer layer, "m" an MTP layer, "L" the loss, "x*n" and "(...)*n"
	// repeating (e.g. DeepSeek-V3's "Et|(tt|)*30mL" on 16 stages of 2
	// chunks). virtual_stages defaults to its chunks per stage.
	PipelineLayout string `json:"pipeline_model_parallel_layout,omitempty"`
	// Recompute: "none" (default), "selective" or "full".
	Recompute string `json:"recompute,omitempty"`
	// RecomputeModules: what "selective" reruns, Megatron-Core's
	// --recompute-modules: "core_attn" (the default), "layernorm" (the
	// layer's two norms), "moe_act" (the routed experts' activation), "moe"
	// (the whole mixture-of-experts layer, its all-to-alls included).
	RecomputeModules []string `json:"recompute_modules,omitempty"`
	// ZeRO stage 0-3 (Megatron's distributed optimizer is stage 1).
	ZeRO int `json:"zero,omitempty"`
	// DistributedOptimizerInstances splits the data-parallel ranks (dp·cp)
	// into that many groups of consecutive replicas, at least 2 each
	// (default 1: one): ZeRO shards its state within a group, each group
	// reduce-scatters its gradients and gathers its weights among its own
	// replicas, and the groups all-reduce their shards across
	// (Megatron-Core's --num-distributed-optimizer-instances; with zero 3,
	// FSDP's hybrid sharding, HSDP). Needs zero >= 1 and a dense model;
	// every replica is simulated (full_simulation), the groups differing.
	DistributedOptimizerInstances int `json:"distributed_optimizer_instances,omitempty"`
	// OverlapGradReduce reduces gradients in buckets during the backward;
	// BucketParams is the bucket size in parameters (default max(40M, 1M·dp)).
	OverlapGradReduce bool  `json:"overlap_grad_reduce,omitempty"`
	BucketParams      int64 `json:"bucket_params,omitempty"`
	// OverlapParamGather runs the distributed optimizer's parameter
	// all-gather in the same buckets under the next step's forward, each
	// layer's first forward waiting for its bucket (Megatron's
	// --overlap-param-gather; needs zero 1 or 2 and overlap_grad_reduce).
	OverlapParamGather bool `json:"overlap_param_gather,omitempty"`
	// OverlapTPComm overlaps the backward's tensor-parallel collective with
	// the weight-gradient GEMM; default true, as Megatron-LM runs it (its
	// asynchronous tensor-parallel all-reduce is on unless
	// --no-async-tensor-model-parallel-allreduce; Korthikanti et al. 2022,
	// §6.2: "all-reduce is overlapped with the weight-gradient GEMM").
	OverlapTPComm *bool `json:"overlap_tp_comm,omitempty"`
	// TPCommOverlap splits each sequence-parallel all-gather and
	// reduce-scatter next to a GEMM into a ring of point-to-point steps
	// that run under the GEMM's chunks, as Transformer Engine's userbuffers
	// do (Megatron-Core --tp-comm-overlap, NeMo tp_comm_overlap): needs
	// sequence_parallel.
	TPCommOverlap bool `json:"tp_comm_overlap,omitempty"`
	// EP is the expert-parallel degree of a mixture-of-experts model
	// (default 1). It must divide the experts, and ep·expert_tp must
	// divide tp·dp (Megatron-Core folds the expert layers' TP, EP and
	// expert-data-parallel groups over the same tp·dp ranks).
	EP int `json:"ep,omitempty"`
	// ExpertTP is the expert tensor-parallel degree (Megatron-Core
	// --expert-tensor-parallel-size): 0 (default) is tp; 1 keeps every
	// expert whole on its rank, and the tp ranks of a replica then hold
	// different experts (ep must be a multiple of tp).
	ExpertTP int `json:"expert_tp,omitempty"`
	// OverlapEPComm overlaps the expert-parallel dispatch and combine with
	// the other micro-batch's compute in the steady state of the pipeline
	// schedule, where a forward and a backward alternate (Megatron-Core
	// --overlap-moe-expert-parallel-comm; DeepSeek-V3's DualPipe overlaps
	// its chunk pairs the same way).
	OverlapEPComm bool `json:"overlap_ep_comm,omitempty"`
}

// Schedules are the pipeline schedules.
var Schedules = []string{"1f1b", "gpipe", "interleaved"}

// Defaults fills optional fields (DP and GlobalBatch need the cluster: see
// Resolve).
func (p *Parallel) Defaults() {
	if p.PipelineLayout != "" && p.VirtualStages == 0 && p.PP > 0 {
		if chunks, err := model.ParsePipelineLayout(p.PipelineLayout); err == nil && len(chunks)%p.PP == 0 {
			p.VirtualStages = len(chunks) / p.PP
		}
	}
	for _, f := range []*int{&p.TP, &p.PP, &p.CP, &p.MicroBatch, &p.VirtualStages, &p.EP} {
		if *f == 0 {
			*f = 1
		}
	}
	if p.Schedule == "" {
		p.Schedule = "1f1b"
		if p.VirtualStages > 1 {
			p.Schedule = "interleaved"
		}
	}
	if p.Recompute == "" {
		p.Recompute = "none"
	}
	if p.CPCommType == "" {
		p.CPCommType = "p2p"
	}
	if p.OverlapTPComm == nil {
		on := true
		p.OverlapTPComm = &on
	}
}

// Resolve fills DP and GlobalBatch for a cluster of gpus GPUs and reports
// a layout that does not fit it.
func (p *Parallel) Resolve(gpus int, probs *Problems, path string) {
	if p.TP < 1 || p.PP < 1 || p.CP < 1 {
		return
	}
	if p.DP == 0 {
		p.DP = max(1, gpus/(p.TP*p.CP*p.PP))
	}
	if p.GlobalBatch == 0 {
		p.GlobalBatch = p.DP * p.MicroBatch * p.PP
	}
	if n := p.TP * p.CP * p.PP * p.DP; n > gpus {
		probs.Addf(Field(path, "dp"), "tp·cp·pp·dp = %d·%d·%d·%d = %d GPUs, but the cluster has %d", p.TP, p.CP, p.PP, p.DP, n, gpus)
	}
}

// Validate reports every problem under path.
func (p *Parallel) Validate(probs *Problems, path string) {
	f := func(n string) string { return Field(path, n) }
	probs.IntInRange(f("tp"), p.TP, 1, 1<<16)
	probs.IntInRange(f("pp"), p.PP, 1, 1<<16)
	probs.IntInRange(f("cp"), p.CP, 1, 1<<16)
	probs.OneOf(f("cp_comm_type"), p.CPCommType, []string{"p2p", "all_gather", "a2a"})
	probs.IntInRange(f("dp"), p.DP, 0, 1<<20)
	probs.IntInRange(f("micro_batch"), p.MicroBatch, 1, 1<<20)
	probs.IntInRange(f("global_batch"), p.GlobalBatch, 0, 1<<30)
	probs.IntInRange(f("virtual_stages"), p.VirtualStages, 1, 1<<10)
	probs.OneOf(f("schedule"), p.Schedule, Schedules)
	probs.OneOf(f("recompute"), p.Recompute, []string{"none", "selective", "full"})
	for _, m := range p.RecomputeModules {
		probs.OneOf(f("recompute_modules"), m, model.RecomputeModules())
	}
	if len(p.RecomputeModules) > 0 && p.Recompute != "selective" {
		probs.Addf(f("recompute_modules"), "apply to recompute \"selective\" only, got recompute %q", p.Recompute)
	}
	if len(p.PipelineLayout) > model.MaxLayoutInput {
		probs.Addf(f("pipeline_model_parallel_layout"), "is %d characters, at most %d", len(p.PipelineLayout), model.MaxLayoutInput)
	}
	probs.IntInRange(f("decoder_first_pipeline_num_layers"), p.DecoderFirstStageLayers, 0, 1<<16)
	probs.IntInRange(f("decoder_last_pipeline_num_layers"), p.DecoderLastStageLayers, 0, 1<<16)
	probs.IntInRange(f("zero"), p.ZeRO, 0, 3)
	probs.IntInRange(f("distributed_optimizer_instances"), p.DistributedOptimizerInstances, 0, 1<<20)
	probs.IntInRange(f("ep"), p.EP, 1, 1<<16)
	probs.IntInRange(f("expert_tp"), p.ExpertTP, 0, 1<<16)
	if p.BucketParams < 0 {
		probs.Addf(f("bucket_params"), "must be >= 0, got %d", p.BucketParams)
	}
	if p.TPCommOverlap && (!p.SequenceParallel || p.TP < 2) {
		probs.Addf(f("tp_comm_overlap"), "overlaps the sequence-parallel all-gathers and reduce-scatters, so it needs sequence_parallel and tp >= 2; got sequence_parallel %v, tp %d", p.SequenceParallel, p.TP)
	}
	if p.OverlapParamGather && (p.ZeRO < 1 || p.ZeRO > 2 || !p.OverlapGradReduce) {
		probs.Addf(f("overlap_param_gather"), "needs the distributed optimizer's gather (zero 1 or 2) and overlap_grad_reduce, as Megatron does; got zero %d, overlap_grad_reduce %v", p.ZeRO, p.OverlapGradReduce)
	}
}
