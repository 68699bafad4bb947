package workload

import (
	"fmt"
	"slices"

	"github.com/eidolon-sim/eidolon/core/problem"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// Inference is a batch of requests served by identical replicas, each a
// TP×PP group of GPUs: prefill of every prompt, then OutputTokens−1 decode
// steps (the prefill produces the first token).
type Inference struct {
	Model model.Config
	// TP and PP of a replica; Replicas serve independent batches.
	TP, PP, Replicas int
	// Batch is sequences per replica; Prompt and Output tokens per sequence.
	Batch, Prompt, Output int
	DType                 hw.DType
	// KVDType is the KV cache's element type ("" the activation type;
	// model.Run.KVDType); WeightDType the linear layers' weights' (""
	// DType; model.Run.WeightDType).
	KVDType, WeightDType hw.DType
	UnfusedAttention     bool
	// FlashAttention2: see model.Run.
	FlashAttention2 bool
	// FusedAddNorm: see model.Run.
	FusedAddNorm bool
	// XQADecode: see model.Run.
	XQADecode bool
	// LocalSSMProjections: see model.Run (false: Megatron split as is).
	LocalSSMProjections bool
	// Requests, if set, replaces Batch, Prompt and Output with groups of
	// requests of different lengths (see BuildInference).
	Requests []Request
	// EP is the expert-parallel degree of a mixture-of-experts model: EP
	// consecutive replicas (each serving its own batch: attention data
	// parallel) hold experts/EP experts each and exchange tokens by
	// all-to-all, as wide-EP deployments serve DeepSeek-V3. Balanced
	// routing; HierarchicalA2A as in Routing. 0 means 1.
	EP              int
	HierarchicalA2A bool
	// LowLatencyA2A runs the dispatch and combine as DeepEP's low-latency
	// kernels: sent directly, each paying the kernels' fixed time
	// (Task.LowLatency).
	LowLatencyA2A bool
	// ExpertsInTP is expert parallelism inside each replica's TP group
	// (vLLM's --enable-expert-parallel without data-parallel attention):
	// every TP rank holds experts/TP whole experts instead of a TP share of
	// each (model.Run EP = TP, ExpertTP = 1).
	ExpertsInTP bool
	// TwoBatchOverlap splits each pass's sequences into two micro-batches
	// whose layers interleave, so that one's expert-parallel all-to-all is
	// in flight while the other computes (SGLang's --enable-two-batch-
	// overlap, DeepSeek's inference system: arXiv 2412.19437 §3.4). Needs
	// EP > 1 and one stage; a pass of one sequence runs whole.
	TwoBatchOverlap bool
	// DecodeOnly is a disaggregated decode instance: every prompt's cache
	// arrives filled, no prefill runs, each group's prefill step is a mark
	// at time 0 and the first decode step waits for no tokens.
	DecodeOnly bool
	// Canceled, if set, is polled while the plan is built (a pass per
	// output token: seconds for thousands); its error stops the build.
	Canceled func() error
}

// canceled polls in.Canceled every 64th call index i.
func (in Inference) canceled(i int) error { return poll(in.Canceled, i) }

// poll calls canceled (if set) on every 64th call index i: a plan's
// builder stops within a fraction of a second of a Ctrl-C.
func poll(canceled func() error, i int) error {
	if canceled == nil || i%64 != 0 {
		return nil
	}
	return canceled()
}

// Rank is the global rank of TP index tp at stage pp of replica r: replicas
// are contiguous blocks of TP·PP ranks.
func (in Inference) Rank(tp, pp, r int) int { return tp + in.TP*(pp+in.PP*r) }

// Ranks is the number of GPUs.
func (in Inference) Ranks() int { return in.TP * in.PP * in.Replicas }

// InferencePlan is an inference run's plan with its memory per stage.
type InferencePlan struct {
	*Plan
	Memory []Memory
	// Marks on every program: "prefill_end" (the stage's last prefill task)
	// and "end".
}

// Check returns every problem with the spec field it concerns.
func (in Inference) Check() []problem.Problem {
	var ps []problem.Problem
	for i, g := range in.Groups() {
		if g.Count < 1 || g.Prompt < 1 || g.Output < 1 {
			ps = append(ps, problem.Problem{Path: fmt.Sprintf("requests[%d]", i),
				Message: fmt.Sprintf("count, prompt_tokens and output_tokens must be >= 1, got %d, %d, %d", g.Count, g.Prompt, g.Output)})
		}
	}
	if len(ps) > 0 {
		return ps
	}
	if in.DecodeOnly {
		for i, g := range in.Groups() {
			if g.Output < 2 {
				path := "output_tokens"
				if len(in.Requests) > 0 {
					path = fmt.Sprintf("requests[%d].output_tokens", i)
				}
				return []problem.Problem{{Path: path, Message: fmt.Sprintf("must be >= 2 with decode_only (the first token comes with the prefilled cache), got %d", g.Output)}}
			}
		}
	}
	if in.ExpertsInTP {
		switch {
		case !in.Model.IsMoE():
			ps = append(ps, problem.Problem{Path: "enable_expert_parallel", Message: "needs a mixture-of-experts model"})
		case in.EP > 1:
			ps = append(ps, problem.Problem{Path: "enable_expert_parallel", Message: fmt.Sprintf("spreads the experts over a replica's TP ranks; ep (%d) spreads them over replicas: use one of the two", in.EP)})
		case in.Model.Experts%max(in.TP, 1) != 0:
			ps = append(ps, problem.Problem{Path: "tp", Message: fmt.Sprintf("must divide the experts (%d) with enable_expert_parallel, got %d", in.Model.Experts, in.TP)})
		}
		if len(ps) > 0 {
			return ps
		}
	}
	var runs []model.Run
	for _, g := range in.Groups() {
		pre, dec := in.run(model.Prefill, 0), in.run(model.Decode, g.Prompt)
		pre.Batch, pre.SeqLen, dec.Batch = g.Count, g.Prompt, g.Count
		runs = append(runs, pre, dec)
	}
	for _, r := range runs {
		for _, fp := range in.Model.CheckRun(r) {
			field := fp.Path
			switch field {
			case "tp", "batch", "ep":
			case "seq_len":
				field = "prompt_tokens"
			default:
				field = "model." + field
			}
			ps = append(ps, problem.Problem{Path: field, Message: fp.Message})
		}
		if len(ps) > 0 {
			break
		}
	}
	wideEP := in.Model.IsMoE() && in.EP >= 2
	ps = append(ps, needWideEP(in.Model.IsMoE(), in.EP, epFlag{"two_batch_overlap", in.TwoBatchOverlap},
		epFlag{"low_latency_a2a", in.LowLatencyA2A}, epFlag{"hierarchical_a2a", in.HierarchicalA2A})...)
	if in.TwoBatchOverlap && wideEP && in.PP > 1 {
		ps = append(ps, problem.Problem{Path: "two_batch_overlap", Message: fmt.Sprintf("needs pp 1, got %d", in.PP)})
	}
	if in.LowLatencyA2A && wideEP && in.HierarchicalA2A {
		ps = append(ps, problem.Problem{Path: "low_latency_a2a", Message: "sends every pair directly (DeepEP's low-latency kernels); hierarchical_a2a is its normal kernels: choose one"})
	}
	if ep := max(in.EP, 1); in.EP < 0 || in.Replicas%ep != 0 {
		msg := fmt.Sprintf("must be >= 1 and divide replicas (%d), got %d: ep replicas share their experts", in.Replicas, in.EP)
		if in.TP > 1 {
			msg += "; experts spread over one replica's TP ranks are enable_expert_parallel"
		}
		ps = append(ps, problem.Problem{Path: "ep", Message: msg})
	}
	if n := len(in.Model.Pattern); in.PP > n {
		ps = append(ps, problem.Problem{Path: "pp", Message: fmt.Sprintf("must not exceed the model's blocks (%d), got %d", n, in.PP)})
	}
	return ps
}

func (in Inference) run(phase model.Phase, kv int) model.Run {
	r := model.Run{Phase: phase, Batch: in.Batch, SeqLen: in.Prompt, KVLen: kv, TP: in.TP,
		DType: in.DType, KVDType: in.KVDType, WeightDType: in.WeightDType, UnfusedAttention: in.UnfusedAttention, FlashAttention2: in.FlashAttention2, FusedAddNorm: in.FusedAddNorm, XQADecode: in.XQADecode, LocalSSMProjections: in.LocalSSMProjections, EP: in.EP}
	if in.ExpertsInTP {
		r.EP, r.ExpertTP = max(in.TP, 1), 1
	}
	return r
}

// Request is Count requests with the same prompt and output lengths.
type Request struct {
	Count, Prompt, Output int
}

// Groups are the request groups: Requests, or Batch requests of Prompt and
// Output tokens.
func (in Inference) Groups() []Request {
	if len(in.Requests) > 0 {
		return in.Requests
	}
	return []Request{{in.Batch, in.Prompt, in.Output}}
}

// Steps is the number of passes a stage runs: one prefill per request
// group, then a decode step per further token of the longest output.
// Step i < len(Groups()) is group i's prefill; step len(Groups())−1+k is
// decode step k ≥ 1. Every program marks the end of each step as "step.i".
func (in Inference) Steps() int {
	out := 0
	for _, g := range in.Groups() {
		out = max(out, g.Output)
	}
	return len(in.Groups()) + out - 1
}

// BuildInference lays out an inference run. in must pass Check.
//
// Static batching: each request group's prompts are prefilled together, one
// pass per group; then every decode step generates one token for each
// request whose output is not complete, as one batch whose attention reads
// each sequence's cache (the decode graph's cache length is the mean over
// the active sequences, exact for attention's cost, linear in it).
func BuildInference(in Inference) (*InferencePlan, error) {
	ib, err := NewInferenceBuilder(in)
	if err != nil {
		return nil, err
	}
	pl, err := ib.Range(0, in.Steps())
	if err != nil {
		return nil, err
	}
	return &InferencePlan{Plan: pl, Memory: ib.Memory}, nil
}

// InferenceBuilder builds an inference run's plan whole or a range of
// steps at a time (a long decode run in segments holds one segment's
// tasks at a time): every range has the same units and groups.
type InferenceBuilder struct {
	in     Inference
	groups []Request
	// prefill is each request group's prefill pass.
	prefill []inferencePass
	chunks  [][]int
	a2a     *a2aCache
	shape   Plan
	// spare is each stage's task storage handed back by Release.
	spare [][]Task
	// Memory is each stage's memory.
	Memory []Memory
}

type inferencePass struct {
	g             model.Graph
	batch, tokens int
	name          string
	// halves are the pass's two micro-batches under TwoBatchOverlap (nil:
	// it runs whole).
	halves []model.Graph
	// received: a decode instance's prefill step, the cache received
	// (Inference.DecodeOnly): no graph, no work.
	received bool
}

// NewInferenceBuilder prepares the prefill passes, the stages' blocks,
// their memory and the layout. in must pass Check.
func NewInferenceBuilder(in Inference) (*InferenceBuilder, error) {
	if ps := in.Check(); len(ps) > 0 {
		return nil, fmt.Errorf("%s: %s", ps[0].Path, ps[0].Message)
	}
	ib := &InferenceBuilder{in: in, groups: in.Groups()}
	G := len(ib.groups)
	for i, r := range ib.groups {
		name := "prefill."
		if G > 1 {
			name = fmt.Sprintf("prefill%d.", i)
		}
		if in.DecodeOnly {
			// The cache arrives from the prefill instance: a mark, no pass.
			ib.prefill = append(ib.prefill, inferencePass{batch: r.Count, tokens: r.Prompt, name: name, received: true})
			continue
		}
		run := in.run(model.Prefill, 0)
		run.Batch, run.SeqLen = r.Count, r.Prompt
		g, err := model.Build(in.Model, run)
		if err != nil {
			return nil, err
		}
		halves, err := in.halves(run)
		if err != nil {
			return nil, err
		}
		ib.prefill = append(ib.prefill, inferencePass{g: g, batch: r.Count, tokens: r.Prompt, name: name, halves: halves})
	}
	// The passes that size a stage's memory: the prefills, or on a decode
	// instance its first decode step (every sequence, the prompts cached).
	sizing := ib.prefill
	if in.DecodeOnly {
		first, err := ib.decodePass(1)
		if err != nil {
			return nil, err
		}
		sizing = []inferencePass{first}
	}
	ib.chunks = chunkPositions(sizing[0].g, in.PP, false, false, nil)
	if in.Model.IsMoE() && in.EP > 1 {
		// Balanced: each expert receives k slots per E drawn tokens.
		ib.a2a = &a2aCache{a: Route(Routing{}, in.Model, in.EP, int64(in.Model.Experts)), mats: map[[3]uint64]int32{}}
	}
	for s := range ib.chunks {
		var mem Memory
		for _, ps := range sizing {
			g := ps.g
			if h := ps.halves; h != nil {
				g = h[0] // as memoryRun
			}
			if m := in.memory(g, ib.chunks[s], in.kvTokens(0, 0), in.kvTokens(0, in.localSpan()), in.sequences()); m.Total() > mem.Total() {
				mem = m
			}
		}
		ib.Memory = append(ib.Memory, mem)
	}
	ib.shape.Ranks = in.Ranks()
	in.layout(&ib.shape)
	return ib, nil
}

// decodeShape is decode step k's batch and mean cache length.
func (ib *InferenceBuilder) decodeShape(k int) (batch, kv int) {
	for _, r := range ib.groups {
		if r.Output > k {
			batch += r.Count
			kv += r.Count * (r.Prompt + k - 1)
		}
	}
	return batch, (kv + batch/2) / batch
}

// decodePass is decode step k's pass: one token for each unfinished
// sequence against its cache.
func (ib *InferenceBuilder) decodePass(k int) (inferencePass, error) {
	batch, kv := ib.decodeShape(k)
	run := ib.in.run(model.Decode, kv)
	run.Batch = batch
	g, err := model.Build(ib.in.Model, run)
	if err != nil {
		return inferencePass{}, err
	}
	halves, err := ib.in.halves(run)
	if err != nil {
		return inferencePass{}, err
	}
	return inferencePass{g: g, batch: batch, tokens: 1, name: fmt.Sprintf("decode%d.", k), halves: halves}, nil
}

// Steps is the run's number of steps (Inference.Steps).
func (ib *InferenceBuilder) Steps() int { return ib.in.Steps() }

// Shape is the run's units, groups and replicas (no programs).
func (ib *InferenceBuilder) Shape() *Plan { return &ib.shape }

// Stages is the memory of each stage.
func (ib *InferenceBuilder) Stages() []Memory { return ib.Memory }

// SegmentFrom is the first step a range may start at after another: the
// first decode step (prefills of request groups pipeline across stages).
// Every decode step waits for the one before on every stage — a host
// synchronisation on it and, with pipeline stages, the last stage's
// tokens, which the range before receives on stage 0 — so a replica has
// nothing in flight between two ranges from there on.
func (ib *InferenceBuilder) SegmentFrom() int { return len(ib.groups) }

// Range is the plan of steps [from, to) (Inference.Steps numbers them);
// marks "step.i" keep the run's step numbers. A range that does not start
// at 0 begins without the host's synchronisation on the step before (and
// on stage 0 of a pipeline without receiving its tokens: the range before
// does); it is for a run that starts it when every earlier task has
// finished (from ≥ SegmentFrom), its hosts' clocks at the end of the task
// each program's mark "resume" of the range before names.
func (ib *InferenceBuilder) Range(from, to int) (*Plan, error) {
	in := ib.in
	G := len(ib.groups)
	total := in.Steps()
	var passes []inferencePass
	for step := from; step < to; step++ {
		if step < G {
			passes = append(passes, ib.prefill[step])
			continue
		}
		k := step - G + 1
		if err := in.canceled(k); err != nil {
			return nil, err
		}
		ps, err := ib.decodePass(k)
		if err != nil {
			return nil, err
		}
		passes = append(passes, ps)
	}
	P, T := in.PP, in.TP
	pl := ib.shape
	pl.Programs = nil
	e := max(in.DType.Bytes(), 2)
	for s := 0; s < P; s++ {
		var tasks []Task
		if s < len(ib.spare) {
			tasks = ib.spare[s]
		}
		b := &progBuilder{p: &Program{Name: fmt.Sprintf("stage%d", s), Marks: map[string]int32{}, Tasks: tasks}, a2a: ib.a2a, hierarchical: in.HierarchicalA2A,
			lowLatency: in.LowLatencyA2A, topK: int32(in.Model.ExpertsPerToken)}
		for j, ps := range passes {
			step := from + j
			if err := in.canceled(step); err != nil {
				return nil, err
			}
			pre := ps.name
			if ps.received {
				// The prompts' caches are here at time 0: a mark, so that
				// the request's first token and the step numbers stand.
				last := b.compute(pre+"kv_received", nil, int32(step))
				b.p.Marks[fmt.Sprintf("step.%d", step)] = last
				if step == G-1 {
					b.p.Marks["prefill_end"] = last
				}
				b.p.Marks["end"] = last
				continue
			}
			act := float64(ps.batch*ps.tokens*in.Model.Hidden) * e
			msg, gather := act, false
			if T > 1 {
				msg, gather = act/float64(T), true
			}
			last := int32(-1)
			if j > 0 {
				// The host reads the previous step's sampled tokens back
				// (to schedule the next step) before it issues this one.
				b.hostSync(b.p.Marks[fmt.Sprintf("step.%d", step-1)])
			}
			if s > 0 {
				last = b.p2p(pre+"recv_activations", Recv, SlotFwdIn, int32(step), msg, int32(step), true)
				if gather {
					last = b.collective(pre+"pp.all_gather", StreamTP, SlotTP, model.AllGather, act, int32(step), last)
				}
			} else if step >= G && P > 1 && j > 0 && !(in.DecodeOnly && step == G) {
				// The last stage's sampled token ids come back to stage 0
				// (a range's first step received them in the range before).
				last = b.recvTokens(pre, step, ps.batch)
			}
			last = b.inferencePass(pre, ps, ib.chunks[s], int32(step), last)
			if s < P-1 {
				b.p2pAfter(pre+"send_activations", Send, SlotFwdOut, int32(step), msg, int32(step), last)
			} else if P > 1 && step >= G-1 && step+1 < total {
				batch, _ := ib.decodeShape(step + 1 - G + 1)
				b.p2pAfter(pre+"send_tokens", Send, SlotFwdOut, int32(step+1), float64(4*batch), int32(step), last)
			}
			b.p.Marks[fmt.Sprintf("step.%d", step)] = last
			if step == G || (j == 0 && step > G) {
				// Every decode step has the first one's tasks: reserve
				// them once rather than regrow (and copy) the slice.
				perStep := len(b.p.Tasks)
				if j > 0 {
					perStep -= int(b.p.Marks[fmt.Sprintf("step.%d", step-1)]) + 1
				}
				b.p.Tasks = slices.Grow(b.p.Tasks, perStep*(len(passes)-j-1))
			}
			if step == G-1 {
				b.p.Marks["prefill_end"] = last
			}
			b.p.Marks["end"] = last
		}
		if to < total {
			// "resume" is the task the next range's host waits for first;
			// stage 0 of a pipeline receives the next step's tokens here,
			// so that the range ends with nothing in flight.
			b.p.Marks["resume"] = b.p.Marks[fmt.Sprintf("step.%d", to-1)]
			if s == 0 && P > 1 && !(in.DecodeOnly && to == G) {
				b.hostSync(b.p.Marks["resume"])
				batch, _ := ib.decodeShape(to - G + 1)
				b.p.Marks["resume"] = b.recvTokens(fmt.Sprintf("decode%d.", to-G+1), to, batch)
			}
		}
		pl.Programs = append(pl.Programs, *b.p)
	}
	return &pl, nil
}

// halves builds run's two micro-batches under TwoBatchOverlap: its
// sequences split as evenly as they go (nil when it is off or the run has
// one sequence).
func (in Inference) halves(run model.Run) ([]model.Graph, error) {
	if !in.TwoBatchOverlap || run.Batch < 2 {
		return nil, nil
	}
	var out []model.Graph
	for _, n := range []int{(run.Batch + 1) / 2, run.Batch / 2} {
		r := run
		r.Batch = n
		g, err := model.Build(in.Model, r)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// inferencePass appends a pass's blocks (chunk) after task after and
// returns its last task. Under TwoBatchOverlap its two micro-batches are
// issued one after the other and interleaved at their all-to-alls
// (Interleave: while one waits on its dispatch or combine, the compute
// stream runs the other's attention or experts), then joined.
func (b *progBuilder) inferencePass(pre string, ps inferencePass, chunk []int, step, after int32) int32 {
	// SGLang runs a two-batch-overlapped prefill's MoE layers with their
	// DeepGEMM kernels sized for the SMs DeepEP's normal kernels leave
	// (two_batch_overlap.py: configure_deep_gemm_num_sms with the device's
	// SMs less DeepEPConfig's; DeepSeek's prefill profile shows 108 of an
	// H800's 132 computing beside 24 communicating, deepseek-ai/
	// profile-data): their compute runs beside communication throughout.
	// Decode's low-latency kernels hold no SMs while they wait (its
	// DeepGEMM keeps them all).
	beside := ps.halves != nil && ps.g.Run.Phase == model.Prefill
	one := func(pre string, g model.Graph) int32 {
		last := after
		for _, bi := range chunk {
			from := len(b.p.Tasks)
			if r := b.ops(pre, g.Blocks[bi].Forward, step, deps(last), false); r >= 0 {
				last = r
			}
			if beside && model.IsMoEBlock(g.Blocks[bi].Name) {
				for i := from; i < len(b.p.Tasks); i++ {
					b.p.Tasks[i].BesideComm = b.p.Tasks[i].Kind == Compute
				}
			}
		}
		return last
	}
	if ps.halves == nil {
		return one(pre, ps.g)
	}
	from := int32(len(b.p.Tasks))
	first := one(pre+"mb0.", ps.halves[0])
	mid := int32(len(b.p.Tasks))
	second := one(pre+"mb1.", ps.halves[1])
	remap := b.interleave(from, mid)
	return b.compute(pre+"tbo.join", nil, step, remap(first), remap(second))
}

// Release hands a plan from Range back: its task storage serves the next
// Range (a run in segments allocates it once). The caller must be done
// with the plan.
func (ib *InferenceBuilder) Release(pl *Plan) {
	ib.spare = ib.spare[:0]
	for _, p := range pl.Programs {
		clear(p.Tasks) // drop the operators and dependencies they hold
		ib.spare = append(ib.spare, p.Tasks[:0])
	}
}

// recvTokens appends stage 0's receipt of the sampled token ids of batch
// sequences for step (prefix pre).
func (b *progBuilder) recvTokens(pre string, step, batch int) int32 {
	return b.p2p(pre+"recv_tokens", Recv, SlotFwdIn, int32(step), float64(4*batch), int32(step), true)
}

// localSpan is the tokens a local-attention layer of the model caches of a
// sequence at most (its window or chunk; 0 without one).
func (in Inference) localSpan() int { return int(in.Model.LocalKind().Span()) }

// kvTokens is the tokens every request caches at most in a layer that
// keeps at most window of them (0: all); with prompt > 0 every prompt is
// taken to be that long.
func (in Inference) kvTokens(prompt, window int) float64 {
	var n float64
	for _, r := range in.Groups() {
		p := r.Prompt
		if prompt > 0 {
			p = prompt
		}
		t := p + r.Output
		if window > 0 {
			// A local layer keeps only its window's or chunk's keys and
			// values (vLLM's and TensorRT-LLM's sliding-window and
			// chunked-local caches).
			t = min(t, window)
		}
		n += float64(r.Count * t)
	}
	return n
}

func (in Inference) sequences() float64 {
	var n float64
	for _, r := range in.Groups() {
		n += float64(r.Count)
	}
	return n
}

// stageMemory is the per-GPU memory of a stage holding blocks when every
// prompt is `prompt` tokens long (g is that prefill's graph).
func (in Inference) stageMemory(g model.Graph, blocks []int, prompt int) Memory {
	return in.memory(g, blocks, in.kvTokens(prompt, 0), in.kvTokens(prompt, in.localSpan()), in.sequences())
}

// memory is the per-GPU memory of a stage holding blocks: weights (in the
// math type: an 8-bit run's weights are 8-bit, as vLLM's FP8 and INT8
// checkpoints are), the KV cache of kvTokens tokens (windowTokens in its
// local-attention layers), the SSM state of seqs
// sequences (16-bit at least), and the largest operator's tensors of the
// prefill graph g.
func (in Inference) memory(g model.Graph, blocks []int, kvTokens, windowTokens, seqs float64) Memory {
	c := in.Model
	e := max(in.DType.Bytes(), 2)
	t := float64(in.TP)
	var m Memory
	attn, windowed, ssm, ssmTotal := 0, 0, 0, 0
	for _, p := range c.Pattern {
		if p == model.PatSSM {
			ssmTotal++
		}
	}
	seen := map[int]bool{}
	for _, bi := range blocks {
		blk := g.Blocks[bi]
		own, shared := model.WeightBytes(blk, in.DType, in.WeightDType)
		m.Weights += own
		if !seen[bi] {
			seen[bi] = true
			m.Weights += shared
		}
		switch {
		case model.IsLocalBlock(blk.Name):
			windowed++
		case model.IsAttentionBlock(blk.Name):
			attn++
		case blk.Name == model.BlockMamba, blk.Name == model.BlockMamba2:
			ssm++
		}
		for _, o := range blk.Forward {
			if !o.IsComm() {
				m.Activations = max(m.Activations, opTensors(o))
			}
		}
	}
	perLayer := model.KVBytesPerTokenLayer(c, in.TP, model.KVBytes(in.KVDType, in.DType))
	m.KVCache = perLayer * (float64(attn)*kvTokens + float64(windowed)*windowTokens)
	if ssmTotal > 0 {
		m.SSMState = model.SSMStateBytesPerSeq(c, hw.DType(dtypeOfBytes(e))) / float64(ssmTotal) * float64(ssm) / t * seqs
	}
	return m
}

func dtypeOfBytes(e float64) hw.DType {
	if e >= 4 {
		return hw.FP32
	}
	return hw.BF16
}

// memoryRun is the run whose largest operator sets a pass's activation
// memory: under TwoBatchOverlap one micro-batch's, the larger half (SGLang
// finds two-batch overlap halves the prefill's peak: 16,384 tokens a GPU
// fit where 8,192 was the most without it, lmsys.org/blog/2025-05-05-
// large-scale-ep). The KV cache still holds every sequence.
func (in Inference) memoryRun(r model.Run) model.Run {
	if in.TwoBatchOverlap && r.Batch > 1 {
		r.Batch = (r.Batch + 1) / 2
	}
	return r
}

// PeakMemory is the largest per-GPU memory over stages for a prompt length.
func (in Inference) PeakMemory(prompt int) (float64, error) {
	r := in.run(model.Prefill, 0)
	r.SeqLen = prompt
	for _, g := range in.Groups() {
		r.Batch = max(r.Batch, g.Count) // the largest prefill pass
	}
	if in.DecodeOnly {
		// A decode instance's largest pass is its first decode step.
		r = in.run(model.Decode, prompt)
		r.Batch = int(in.sequences())
	}
	g, err := model.Build(in.Model, in.memoryRun(r))
	if err != nil {
		return 0, err
	}
	chunks := chunkPositions(g, in.PP, false, false, nil)
	peak := 0.0
	for s := range chunks {
		peak = max(peak, in.stageMemory(g, chunks[s], prompt).Total())
	}
	return peak, nil
}

// LongestPrompt is the longest prompt (tokens per sequence, with Output
// tokens generated) whose peak memory fits in capacity bytes per GPU, 0 if
// none does.
func (in Inference) LongestPrompt(capacity float64) (int, error) {
	return Largest(1<<26, func(p int) (bool, error) {
		m, err := in.PeakMemory(p)
		return m <= capacity, err
	})
}

// LargestBatch is the largest batch (requests of Prompt tokens) whose peak
// memory fits in capacity bytes per GPU, 0 if none does.
func (in Inference) LargestBatch(capacity float64) (int, error) {
	return Largest(1<<20, func(b int) (bool, error) {
		x := in
		x.Batch = b
		m, err := x.PeakMemory(x.Prompt)
		return m <= capacity, err
	})
}

// Largest is the largest n in [1, limit] with fits(n), 0 if fits(1) is
// false. fits must be monotone (true up to some n, false after), as memory
// growing with a prompt or a batch is: doubling brackets it, bisection finds it.
func Largest(limit int, fits func(int) (bool, error)) (int, error) {
	if ok, err := fits(1); err != nil || !ok {
		return 0, err
	}
	lo, hi := 1, 2
	for {
		if hi >= limit {
			ok, err := fits(limit)
			if err != nil || ok {
				return limit, err
			}
			hi = limit
			break
		}
		ok, err := fits(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo = hi
		hi *= 2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// layout creates units (unit r·PP + s) and their groups.
func (in Inference) layout(pl *Plan) {
	P, T, R := in.PP, in.TP, in.Replicas
	for r := 0; r < R; r++ {
		var rep []int
		for s := 0; s < P; s++ {
			u := NewUnit(nil, s)
			u.Replica, u.Stage = r, s
			for k := 0; k < T; k++ {
				u.Ranks = append(u.Ranks, in.Rank(k, s, r))
			}
			pl.Groups = append(pl.Groups, Group{Units: []int{len(pl.Units)}, Comms: [][]int{u.Ranks}})
			u.Groups[SlotTP] = len(pl.Groups) - 1
			rep = append(rep, len(pl.Units))
			pl.Units = append(pl.Units, u)
		}
		pl.Replicas = append(pl.Replicas, rep)
		if P > 1 {
			for s := 0; s < P; s++ {
				pl.link(rep[s], rep[(s+1)%P], SlotFwdOut, SlotFwdIn)
			}
		}
	}
	if ep := max(in.EP, 1); ep > 1 {
		// Expert-parallel groups: EP consecutive replicas at each stage,
		// one communicator per TP index.
		for s := 0; s < P; s++ {
			for r0 := 0; r0 < R; r0 += ep {
				pl.replicaGroup(span(r0, r0+ep, 1), T, SlotEP, func(r int) int { return r*P + s },
					func(k, r int) int { return in.Rank(k, s, r) })
			}
		}
	}
}
