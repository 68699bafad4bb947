// Package serving is the "serving" scenario kind: requests arriving over
// time at engine replicas that batch them continuously (core/serving), with
// each iteration priced by the compute and network models for the batch it
// holds. Tables: requests, iterations, summary.
package serving

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/scenario"
	sv "github.com/eidolon-sim/eidolon/core/serving"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/stats"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Checked(scenario.Define("serving",
		"requests over time on continuously batching replicas (chunked prefill, paged KV cache, preemption, prefix caching, P/D disaggregation): TTFT, ITL, end to end percentiles, goodput",
		func(env scenario.Env, s *spec.Serving) (scenario.Result, error) {
			if s.Search != nil {
				rows, err := Search(env, s)
				if err != nil {
					return scenario.Result{}, err
				}
				var r scenario.Result
				r.Add("configs", rows)
				return r, nil
			}
			o, err := Simulate(env, s)
			if err != nil {
				return scenario.Result{}, noRoomIsTheSpecs(err)
			}
			return o.Result(), nil
		}), check)
}

// RequestRow is one request ("requests" table).
type RequestRow struct {
	Request      int     `arrow:"request"`
	ArrivalS     float64 `arrow:"arrival_s"`
	ScheduledS   float64 `arrow:"scheduled_s"`
	FirstTokenS  float64 `arrow:"first_token_s"`
	FinishS      float64 `arrow:"finish_s"`
	PromptTokens int     `arrow:"prompt_tokens"`
	OutputTokens int     `arrow:"output_tokens"`
	// CachedTokens of the prompt found in the prefix cache at admission.
	CachedTokens int `arrow:"cached_tokens"`
	// QueueS: scheduled − arrival; TTFTS: first token − arrival; ITLSMean:
	// (finish − first token)/(output − 1), 0 for one token; ITLSMax the
	// longest gap between two tokens; E2ES: finish − arrival.
	QueueS   float64 `arrow:"queue_s"`
	TTFTS    float64 `arrow:"ttft_s"`
	ITLSMean float64 `arrow:"itl_s_mean"`
	ITLSMax  float64 `arrow:"itl_s_max"`
	E2ES     float64 `arrow:"e2e_s"`
	// KVTransferS is the KV cache move (disaggregation), queueing included.
	KVTransferS float64 `arrow:"kv_transfer_s"`
	Preemptions int     `arrow:"preemptions"`
	// Replica served it (its prefill replica under disaggregation);
	// DecodeReplica its decode replica (−1 co-located).
	Replica       int  `arrow:"replica"`
	DecodeReplica int  `arrow:"decode_replica"`
	PrefixID      int  `arrow:"prefix_id"`
	Warmup        bool `arrow:"warmup"`
}

// IterationRow is one engine iteration ("iterations" table).
type IterationRow struct {
	Replica   int     `arrow:"replica"`
	StartS    float64 `arrow:"start_s"`
	DurationS float64 `arrow:"duration_s"`
	// Sequences in the batch; PrefillTokens (chunks) and DecodeTokens.
	Sequences     int `arrow:"sequences"`
	PrefillTokens int `arrow:"prefill_tokens"`
	DecodeTokens  int `arrow:"decode_tokens"`
	// Speculative decoding: VerifyingSequences of the decoding ones verify
	// DraftTokens drafts (counted in DecodeTokens) and keep AcceptedTokens.
	VerifyingSequences int `arrow:"verifying_sequences"`
	DraftTokens        int `arrow:"draft_tokens"`
	AcceptedTokens     int `arrow:"accepted_tokens"`
	// KVBlocksUsed after this iteration's allocation, of KVBlocks.
	KVBlocksUsed int `arrow:"kv_blocks_used"`
	KVBlocks     int `arrow:"kv_blocks"`
	// Preempted requests while scheduling it; Queued waiting after it was formed.
	Preempted int `arrow:"preempted"`
	Queued    int `arrow:"queued"`
}

// SummaryRow is the run ("summary" table): latencies over the requests
// after the warm-up; rates (requests, tokens, goodput) over the window from
// the first of them to arrive to the last to finish, counting every request
// that finishes in it (see Summarize).
type SummaryRow struct {
	Requests         int     `arrow:"requests"`
	WindowS          float64 `arrow:"window_s"`
	RequestsPerS     float64 `arrow:"requests_per_s"`
	OutputTokensPerS float64 `arrow:"output_tokens_per_s"`
	TotalTokensPerS  float64 `arrow:"total_tokens_per_s"`
	TTFTSMean        float64 `arrow:"ttft_s_mean"`
	TTFTSP50         float64 `arrow:"ttft_s_p50"`
	TTFTSP90         float64 `arrow:"ttft_s_p90"`
	TTFTSP99         float64 `arrow:"ttft_s_p99"`
	// ITL statistics are over each request's mean inter-token latency
	// (what vLLM's benchmark calls TPOT), for requests of two or more tokens.
	ITLSMean          float64 `arrow:"itl_s_mean"`
	ITLSP50           float64 `arrow:"itl_s_p50"`
	ITLSP90           float64 `arrow:"itl_s_p90"`
	ITLSP99           float64 `arrow:"itl_s_p99"`
	E2ESMean          float64 `arrow:"e2e_s_mean"`
	E2ESP50           float64 `arrow:"e2e_s_p50"`
	E2ESP90           float64 `arrow:"e2e_s_p90"`
	E2ESP99           float64 `arrow:"e2e_s_p99"`
	QueueSMean        float64 `arrow:"queue_s_mean"`
	GoodputRequestsPS float64 `arrow:"goodput_requests_per_s"`
	SLOAttainment     float64 `arrow:"slo_attainment"`
	// KVUtilizationMean is the busy-time mean of used/total blocks over
	// iterations, KVUtilizationMax its largest value.
	KVUtilizationMean float64 `arrow:"kv_utilization_mean"`
	KVUtilizationMax  float64 `arrow:"kv_utilization_max"`
	Preemptions       int     `arrow:"preemptions"`
	// Speculative decoding, over every iteration, as vLLM's metrics count
	// them (0 without): DraftAcceptanceRate the share of the verified
	// drafts kept, MeanAcceptanceLength the tokens a verification yields
	// (the drafts kept and the target's own).
	DraftAcceptanceRate  float64 `arrow:"draft_acceptance_rate"`
	MeanAcceptanceLength float64 `arrow:"mean_acceptance_length"`
	Iterations           int     `arrow:"iterations"`
	MeanBatchSeqs        float64 `arrow:"mean_batch_sequences"`
	GPUs                 int     `arrow:"gpus"`
	Replicas             int     `arrow:"replicas"`
	PrefillReplicas      int     `arrow:"prefill_replicas"`
	KVBlocksReplica      int     `arrow:"kv_blocks_per_replica"`
	SimulatedS           float64 `arrow:"simulated_s"`
}

// Outcome is a simulated serving run.
type Outcome struct {
	Summary    SummaryRow
	Requests   []RequestRow
	Iterations []IterationRow
	// Pricers per replica (shared by replicas of the same class).
	Pricers []*sv.Pricer
}

// Result packs the tables.
func (o *Outcome) Result() scenario.Result {
	var r scenario.Result
	r.Add("summary", []SummaryRow{o.Summary})
	r.Add("requests", o.Requests)
	r.Add("iterations", o.Iterations)
	return r
}

// Setup is the replicas of a spec with their pricers and KV capacity.
type Setup struct {
	Replicas []sv.Replica
	Pricers  []*sv.Pricer
	Config   sv.Config
	Transfer sv.TransferFunc
	Topo     *topo.Topology
	GPU      hw.GPU
}

// errNoKVCache: a replica's weights and activations leave its GPUs no
// memory for a KV cache.
var errNoKVCache = errors.New("the model does not fit")

// noRoomIsTheSpecs turns a run's errNoKVCache into the spec's problem at tp,
// naming what leaves room for a cache; other errors pass unchanged.
func noRoomIsTheSpecs(err error) error {
	if !errors.Is(err, errNoKVCache) {
		return err
	}
	var p spec.Problems
	p.Addf("tp", "%v: a larger tp or pp, a GPU with more memory, engine.weight_dtype or engine.gpu_memory_utilization leaves room for one", err)
	return p.Err()
}

// check makes a run's checks before it simulates: the cluster, GPU and
// faults compiled and, without a search (which varies the layout), the
// layout against them.
func check(s *spec.Serving) error {
	if s.Search != nil {
		if _, err := compile.GPU("", s.GPU); err != nil {
			return err
		}
		t, err := compile.Topology("", s.Cluster)
		if err != nil {
			return err
		}
		_, err = compile.Faults("", s.Faults, t)
		return err
	}
	// The layout built as the run builds it, so that a request no replica
	// can hold, or a model that leaves its GPUs no room for a cache, is
	// refused here too, naming what to change (the search, which varies the
	// layout, counts the latter as layouts that do not fit). Build's other
	// errors are the run's outcome, which the run reports.
	st, err := Build(context.Background(), s)
	var se *spec.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, errNoKVCache) {
		return noRoomIsTheSpecs(err)
	}
	if err != nil {
		return nil
	}
	return requestsFit(s, st)
}

// requestsFit checks that the longest request the workload can make fits
// every replica's KV cache on its own.
func requestsFit(s *spec.Serving, st *Setup) error {
	w := s.Workload
	longest := w.PromptTokens.Largest() + w.OutputTokens.Largest()
	if w.Arrival == "trace" {
		longest = 0
		for i := range w.Trace.ArrivalS {
			longest = max(longest, w.Trace.PromptTokens[i]+w.Trace.OutputTokens[i])
		}
	}
	for i, r := range st.Replicas {
		if need := st.Config.BlocksFor(longest); need > r.Blocks {
			var p spec.Problems
			p.Addf("workload", "a request of up to %d tokens needs %d KV blocks of %d tokens, but replica %d has %d (engine.kv_blocks, gpu_memory_utilization or kv_cache_free_memory_fraction, tp)",
				longest, need, s.Engine.BlockTokens, i, r.Blocks)
			return p.Err()
		}
	}
	return nil
}

// servedModel is a validated spec's model with its redundant expert slots.
func servedModel(s *spec.Serving) model.Config {
	cfg, _ := s.Model.Resolve()
	if cfg.IsMoE() {
		cfg.Experts += s.RedundantExperts
	}
	return cfg
}

// hasSSM says whether a resolved model (its pattern filled) has SSM blocks.
func hasSSM(c model.Config) bool { return strings.ContainsRune(c.Pattern, model.PatSSM) }

// draftModel is a validated spec's draft model, if its speculative
// decoding has one.
func draftModel(s *spec.Serving) (model.Config, bool) {
	sp := s.Engine.Speculative
	if sp == nil || sp.DraftModel == nil {
		return model.Config{}, false
	}
	return sp.DraftModel.Resolve()
}

// compileSpec compiles a validated spec's cluster, GPU and faults and
// checks its layout against them.
func compileSpec(s *spec.Serving) (*topo.Topology, hw.GPU, net.FaultPlan, error) {
	cfg := servedModel(s)
	g, err := compile.GPU("", s.GPU)
	if err != nil {
		return nil, g, net.FaultPlan{}, err
	}
	t, err := compile.Topology("", s.Cluster)
	if err != nil {
		return nil, g, net.FaultPlan{}, err
	}
	var p spec.Problems
	if n := s.TP * s.PP * s.EP * s.Replicas; n > t.NumRanks() {
		p.Addf("replicas", "tp·pp·ep·replicas = %d·%d·%d·%d = %d GPUs, but the cluster has %d", s.TP, s.PP, s.EP, s.Replicas, n, t.NumRanks())
	}
	in := workload.Inference{Model: cfg, TP: s.TP, PP: s.PP, Replicas: 1, Batch: 1, Prompt: s.Engine.MaxNumBatchedTokens, Output: 1, DType: hw.DType(s.DType),
		KVDType: spec.StorageDType(s.Engine.KVCacheDType), WeightDType: spec.StorageDType(s.Engine.WeightDType),
		ExpertsInTP: s.Engine.EnableExpertParallel}
	for _, fp := range in.Check() {
		field := fp.Path
		switch field {
		case "prompt_tokens":
			field = "engine.max_num_batched_tokens"
		case "enable_expert_parallel":
			field = "engine.enable_expert_parallel"
		}
		p.Addf(field, "%s", fp.Message)
	}
	if hasSSM(cfg) {
		p.Addf("model", "serving models attention blocks only (a KV cache per token); %q has SSM blocks", cfg.Name)
	}
	if d, ok := draftModel(s); ok && hasSSM(d) {
		p.Addf("engine.speculative.draft_model", "serving models attention blocks only (a KV cache per token); %q has SSM blocks", d.Name)
	}
	if err := p.Err(); err != nil {
		return nil, g, net.FaultPlan{}, err
	}
	faults, err := compile.Faults("", s.Faults, t)
	return t, g, faults, err
}

// Build prepares a validated spec's replicas.
func Build(ctx context.Context, s *spec.Serving) (*Setup, error) {
	cfg := servedModel(s)
	t, g, faults, err := compileSpec(s)
	if err != nil {
		return nil, err
	}
	// One machine for every pricer and probe of the run (the time-0 faults
	// applied, the routes cached): a machine of a large cluster is costly.
	m, err := exec.NewMachine(t, g, faults, s.Seed)
	if err != nil {
		return nil, err
	}
	st := &Setup{Topo: t, GPU: g}
	// Replicas whose pricers time alike share one pricer, and one drafter.
	type class struct {
		sig []float64
		p   *sv.Pricer
		d   draft
	}
	var classes []class
	e := s.Engine
	// localShare is the least share of a stage's KV cache bytes per token
	// in local-attention layers (0 without them).
	localShare := 1.0
	// The host issues kernels as the inference kind's (no autograd).
	host := exec.Host{Mode: s.Execution, ForwardOpS: s.Host.ForwardOpS, BackwardOpS: s.Host.BackwardOpS, CollectiveS: s.Host.CollectiveS}
	for r := 0; r < s.Replicas; r++ {
		// Every replica's pricer probes its links: stop on Ctrl-C.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		eng := sv.Engine{TP: s.TP, PP: s.PP, DType: hw.DType(s.DType),
			KVDType: spec.StorageDType(e.KVCacheDType), WeightDType: spec.StorageDType(e.WeightDType), Host: host, TPAllReduce: spec.TPAllReduce(e.CustomAllReduce, e.CustomAllReduceEngine), ExpertsInTP: e.EnableExpertParallel,
			FusedAddNorm: e.FusedAddNorm, FlashAttention2: e.FlashAttention2, XQADecode: e.DecodeAttention == spec.DecodeXQA, EP: s.EP, A2ABackend: e.All2AllBackend}
		pr, err := sv.NewPricer(m, faults, s.Seed, cfg, r, eng)
		if err != nil {
			return nil, err
		}
		sig, err := pr.Signature()
		if err != nil {
			return nil, err
		}
		var drafts draft
		found := false
		for _, c := range classes {
			if equal(c.sig, sig) {
				pr, drafts, found = c.p, c.d, true
				break
			}
		}
		if !found {
			if drafts, err = drafter(m, faults, s, r, eng); err != nil {
				return nil, err
			}
			classes = append(classes, class{sig, pr, drafts})
		}
		st.Pricers = append(st.Pricers, pr)
		kvPerToken := func(stg int) float64 {
			if drafts.p != nil {
				// The drafter keeps a cache of its own, block for block
				// with the target's (one pipeline stage).
				return pr.KVBytesPerToken(stg) + drafts.p.KVBytesPerToken(0)
			}
			return pr.KVBytesPerToken(stg)
		}
		for stg := 0; stg < s.PP; stg++ {
			if kv := kvPerToken(stg); kv > 0 {
				localShare = min(localShare, pr.LocalKVBytesPerToken(stg)/kv)
			}
		}
		blocks := e.KVBlocks
		if blocks == 0 {
			blocks = math.MaxInt
			for stg := 0; stg < s.PP; stg++ {
				w, a, err := pr.StageMemory(stg, e.MaxNumBatchedTokens)
				if err != nil {
					return nil, err
				}
				if drafts.p != nil {
					dw, da, err := drafts.p.StageMemory(0, e.MaxNumBatchedTokens)
					if err != nil {
						return nil, err
					}
					w, a = w+dw, max(a, da)
				}
				left, rule := e.GPUMemoryUtilization*float64(g.HBMBytes)-w-a, fmt.Sprintf("in %.0f %% of %.3g GB", 100*e.GPUMemoryUtilization, float64(g.HBMBytes)/1e9)
				if f := e.KVCacheFreeMemoryFraction; f > 0 {
					left, rule = f*(float64(g.HBMBytes)-w-a), fmt.Sprintf("of %.3g GB", float64(g.HBMBytes)/1e9)
				}
				b := int(left / (kvPerToken(stg) * float64(e.BlockTokens)))
				if b <= 0 {
					return nil, fmt.Errorf("%w: %.3g GB of weights and %.3g GB of activations per GPU of stage %d leave no KV cache %s",
						errNoKVCache, w/1e9, a/1e9, stg, rule)
				}
				blocks = min(blocks, b)
			}
			// Each data-parallel rank caches its own sequences.
			blocks *= s.EP
		}
		role := sv.Both
		if d := s.Disaggregation; d != nil {
			role = sv.Decode
			if r < d.PrefillReplicas {
				role = sv.Prefill
			}
		}
		st.Replicas = append(st.Replicas, sv.Replica{Cost: pr, Blocks: blocks,
			BlockBytes: kvPerToken(0) * float64(e.BlockTokens), Role: role, Draft: drafts.cost})
	}
	// The engine limits are each data-parallel rank's (vLLM and SGLang set
	// them per rank): a replica of ep ranks schedules ep times as much.
	st.Config = sv.Config{MaxBatchedTokens: s.EP * e.MaxNumBatchedTokens, MaxSeqs: s.EP * e.MaxNumSeqs, Chunked: *e.ChunkedPrefill,
		ChunkTokens: e.ChunkTokens, BlockTokens: e.BlockTokens, Preemption: e.Preemption,
		SwapBytesPerS: e.SwapBandwidthBytesPerS, PrefixCaching: *e.PrefixCaching, PrefixHitRate: e.PrefixHitRate,
		FrontendS: e.FrontendS, FrontendSPerToken: *e.FrontendSPerToken, StepS: e.StepOverheadS, StepSPerSeq: e.StepOverheadSPerSeq}
	if sp := e.Speculative; sp != nil {
		st.Config.SpecTokens, st.Config.AcceptRate = sp.NumSpeculativeTokens, sp.PerTokenAcceptance
		st.Config.SpecRand = rng.Stream(s.Seed, "serving.speculative")
	}
	if !st.Config.Chunked {
		st.Config.ChunkTokens = e.MaxNumBatchedTokens
	}
	if localShare > 0 {
		// Local-attention layers keep only their window's or chunk's
		// blocks (vLLM's hybrid KV cache manager); the stage where they
		// hold the least of the cache fills first.
		st.Config.Blocks = sv.WindowBlocks(e.BlockTokens, int(cfg.LocalKind().Span()), localShare)
	}
	// KV transfers: affine in size on a path (latency + size / bandwidth),
	// so two probes per replica pair give every size.
	type fit struct{ t1, slope float64 }
	fits := map[[2]int]fit{}
	kvPerToken := 0.0
	for stg := 0; stg < s.PP; stg++ {
		kvPerToken = max(kvPerToken, st.Pricers[0].KVBytesPerToken(stg))
	}
	const b1, b2 = 1 << 20, 64 << 20
	st.Transfer = func(a, b, tokens int) (float64, error) {
		f, ok := fits[[2]int{a, b}]
		if !ok {
			// A request's cache lives on one data-parallel rank of each
			// replica: the first ranks' path stands for every rank's.
			t1, err := sv.Transfer(m, faults, s.Seed, s.TP, s.PP, a*s.EP, b*s.EP, b1)
			if err != nil {
				return 0, err
			}
			t2, err := sv.Transfer(m, faults, s.Seed, s.TP, s.PP, a*s.EP, b*s.EP, b2)
			if err != nil {
				return 0, err
			}
			f = fit{t1, (t2 - t1) / (b2 - b1)}
			fits[[2]int{a, b}] = f
		}
		return f.t1 + (float64(tokens)*kvPerToken-b1)*f.slope, nil
	}
	return st, nil
}

// draft is a replica's drafter: its pricer (nil for n-gram lookup) and
// what it costs an iteration (sv.Replica.Draft).
type draft struct {
	p    *sv.Pricer
	cost func(sh *sv.Shape) (float64, error)
}

// drafter is replica r's drafter under the spec's speculative decoding: a
// draft model on the replica's GPUs, run as the target is (its TP, types
// and host), or nothing.
func drafter(m *exec.Machine, faults net.FaultPlan, s *spec.Serving, r int, e sv.Engine) (draft, error) {
	cfg, ok := draftModel(s)
	if !ok {
		return draft{}, nil
	}
	e.ExpertsInTP = e.ExpertsInTP && cfg.IsMoE()
	p, err := sv.NewPricer(m, faults, s.Seed, cfg, r, e)
	if err != nil {
		return draft{}, fmt.Errorf("engine.speculative.draft_model: %w", err)
	}
	k := s.Engine.Speculative.NumSpeculativeTokens
	var prefill, propose sv.Shape
	return draft{p, func(sh *sv.Shape) (float64, error) {
		// Its pass over the prefill chunks, for its own cache of the
		// prompts (the last token of each finished prompt sampled).
		t := 0.0
		if len(sh.Chunks) > 0 {
			prefill.Chunks = append(prefill.Chunks[:0], sh.Chunks...)
			prefill.Tokens, prefill.Logits = 0, 0
			for _, c := range sh.Chunks {
				prefill.Tokens += c.Query
			}
			d, err := p.Iteration(&prefill)
			if err != nil {
				return 0, err
			}
			t += d
		}
		// k passes proposing the next drafts of the verifying sequences.
		if sh.Verify > 0 {
			propose = sv.Shape{Tokens: sh.Verify, Logits: sh.Verify, Decode: sh.Verify, DecodeKV: sh.VerifyKV}
			d, err := p.Iteration(&propose)
			if err != nil {
				return 0, err
			}
			t += float64(k) * d
		}
		return t, nil
	}}, nil
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func lengths(l spec.Lengths) sv.Lengths {
	return sv.Lengths{Dist: l.Dist, Tokens: l.Tokens, Min: l.MinTokens, Max: l.MaxTokens, Sigma: l.Sigma, FromTable: l.Values}
}

// Source builds the spec's request source.
func Source(s *spec.Serving) sv.Source {
	w := s.Workload
	pf := sv.Prefixes{Groups: w.PrefixGroups, Tokens: w.PrefixTokens}
	switch w.Arrival {
	case "closed_loop":
		return sv.NewClosedLoop(sv.ClosedLoop{Clients: w.Concurrency, Prompt: lengths(w.PromptTokens), Output: lengths(w.OutputTokens),
			Prefix: pf, Count: w.Requests, DurationS: w.DurationS}, rng.Stream(s.Seed, "serving.lengths"))
	case "trace":
		tr := w.Trace
		var reqs []sv.Request
		for i := range tr.ArrivalS {
			q := sv.Request{ArrivalS: tr.ArrivalS[i], Prompt: tr.PromptTokens[i], Output: tr.OutputTokens[i], Prefix: -1, Client: -1}
			if len(tr.PrefixID) > 0 && tr.PrefixID[i] >= 0 {
				q.Prefix, q.PrefixTokens = int32(tr.PrefixID[i]), min(tr.PrefixTokens[i], q.Prompt-1)
			}
			reqs = append(reqs, q)
		}
		return sv.NewOpenLoop(sv.OpenLoop{Trace: reqs}, nil, nil)
	}
	return sv.NewOpenLoop(sv.OpenLoop{Arr: sv.Arrivals{RatePerS: w.RatePerS, Burstiness: w.Burstiness},
		Prompt: lengths(w.PromptTokens), Output: lengths(w.OutputTokens), Prefix: pf, Count: w.Requests, DurationS: w.DurationS},
		rng.Stream(s.Seed, "serving.arrivals"), rng.Stream(s.Seed, "serving.lengths"))
}

// Simulate runs a validated spec.
func Simulate(env scenario.Env, s *spec.Serving) (*Outcome, error) {
	st, err := Build(env.Context(), s)
	if err != nil {
		return nil, err
	}
	// Every request must fit one replica's cache on its own.
	if err := requestsFit(s, st); err != nil {
		return nil, err
	}
	w := s.Workload
	sim := sv.NewSim(st.Config, st.Replicas, s.Routing, Source(s), st.Transfer)
	total := w.Requests
	sim.Progress = func(done int, nowS float64) {
		switch {
		case total > 0:
			env.Report(float64(done) / float64(total))
		case w.DurationS > 0:
			env.Report(math.Min(nowS/w.DurationS, 1))
		}
	}
	out, err := sim.Run(env.Context())
	if err != nil {
		if cerr := env.Canceled(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	env.Report(1)
	o := &Outcome{Pricers: st.Pricers}
	o.Requests = RequestRows(out.Requests, w.WarmupRequests)
	// Millions of iterations take a second or more to convert: poll Ctrl-C.
	o.Iterations = make([]IterationRow, len(out.Iterations))
	for i, it := range out.Iterations {
		if i&65535 == 0 {
			if err := env.Canceled(); err != nil {
				return nil, err
			}
		}
		o.Iterations[i] = IterationRow{Replica: it.Replica, StartS: it.StartS, DurationS: it.DurationS,
			Sequences: it.Sequences, PrefillTokens: it.PrefillTokens, DecodeTokens: it.DecodeTokens,
			VerifyingSequences: it.Verifying, DraftTokens: it.DraftTokens, AcceptedTokens: it.AcceptedTokens,
			KVBlocksUsed: it.KVBlocksUsed, KVBlocks: it.KVBlocks, Preempted: it.Preempted, Queued: it.Queued}
	}
	o.Summary = Summarize(o.Requests, o.Iterations, s.SLO)
	o.Summary.GPUs = s.TP * s.PP * s.Replicas
	o.Summary.Replicas = s.Replicas
	if d := s.Disaggregation; d != nil {
		o.Summary.PrefillReplicas = d.PrefillReplicas
	}
	o.Summary.KVBlocksReplica = st.Replicas[0].Blocks
	o.Summary.SimulatedS = out.EndS
	return o, nil
}

// RequestRows turns the engine's requests into rows; the first warmup are
// marked.
func RequestRows(rs []sv.RequestOut, warmup int) []RequestRow {
	rows := make([]RequestRow, len(rs))
	for i, q := range rs {
		row := RequestRow{Request: i, ArrivalS: q.ArrivalS, ScheduledS: q.ScheduledS, FirstTokenS: q.FirstTokenS, FinishS: q.FinishS,
			PromptTokens: q.Prompt, OutputTokens: q.Output, CachedTokens: q.CachedTokens,
			QueueS: q.ScheduledS - q.ArrivalS, TTFTS: q.FirstTokenS - q.ArrivalS, ITLSMax: q.ITLMaxS, E2ES: q.FinishS - q.ArrivalS,
			KVTransferS: q.TransferS, Preemptions: q.Preemptions, Replica: q.Replica, DecodeReplica: q.DecodeReplica,
			PrefixID: int(q.Prefix), Warmup: i < warmup}
		if q.Output > 1 {
			row.ITLSMean = (q.FinishS - q.FirstTokenS) / float64(q.Output-1)
		}
		rows[i] = row
	}
	return rows
}

// lifeShare is the share of a request's life, arrival a to finish f, that
// falls in the window [lo, hi] (an instant request: 1 inside, 0 outside).
func lifeShare(a, f, lo, hi float64) float64 {
	if f <= a {
		if a >= lo && a <= hi {
			return 1
		}
		return 0
	}
	return math.Max(0, math.Min(f, hi)-math.Max(a, lo)) / (f - a)
}

// Summarize computes the summary: latency statistics over the requests
// after the warm-up; rates over the window from the first of them to arrive
// to the last of them to finish, each request (warm-up ones too) counted by
// the share of its life, arrival to finish, inside the window, its tokens
// with it. Counting the requests that finish inside the window instead
// charged closed-loop clients' warm-up round to it whole: its finishes, all
// in the window's first cycle, came on top of a cycle's worth of measured
// ones, so 4 rounds of 25 clients read 26 % above c / mean e2e (Little's
// law; 49 % at 3 rounds of 5). Shares of life summed over any partition of
// time count each request once, so the rate is the steady one up to the
// window's ends (within 3 % of c / mean e2e at 3 to 8 rounds; a stable
// Poisson stream of 300 requests reads 3.4 % under its rate, its last
// finishes draining the window's end, and of 3,000 within 2.3 % of it).
func Summarize(rows []RequestRow, its []IterationRow, slo spec.ServingSLO) SummaryRow {
	var sum SummaryRow
	var ttft, itl, e2e []float64
	first, last := math.Inf(1), 0.0
	meets := func(r RequestRow) bool {
		return (slo.TTFTS == 0 || r.TTFTS <= slo.TTFTS) && (slo.ITLS == 0 || r.ITLSMean <= slo.ITLS) && (slo.E2ES == 0 || r.E2ES <= slo.E2ES)
	}
	good := 0
	for _, r := range rows {
		if r.Warmup {
			continue
		}
		sum.Requests++
		first = math.Min(first, r.ArrivalS)
		last = math.Max(last, r.FinishS)
		ttft = append(ttft, r.TTFTS)
		e2e = append(e2e, r.E2ES)
		if r.OutputTokens > 1 {
			itl = append(itl, r.ITLSMean)
		}
		sum.QueueSMean += r.QueueS
		sum.Preemptions += r.Preemptions
		if meets(r) {
			good++
		}
	}
	if sum.Requests == 0 {
		return sum
	}
	n := float64(sum.Requests)
	sum.WindowS = last - first
	if sum.WindowS > 0 {
		var done, goodDone, outTok, allTok float64
		for _, r := range rows {
			share := lifeShare(r.ArrivalS, r.FinishS, first, last)
			done += share
			outTok += share * float64(r.OutputTokens)
			allTok += share * float64(r.OutputTokens+r.PromptTokens)
			if meets(r) {
				goodDone += share
			}
		}
		sum.RequestsPerS = done / sum.WindowS
		sum.OutputTokensPerS = outTok / sum.WindowS
		sum.TotalTokensPerS = allTok / sum.WindowS
		sum.GoodputRequestsPS = goodDone / sum.WindowS
	}
	sum.SLOAttainment = float64(good) / n
	sum.QueueSMean /= n
	stats := func(xs []float64, mean, p50, p90, p99 *float64) {
		if len(xs) == 0 {
			return
		}
		sort.Float64s(xs)
		s := 0.0
		for _, x := range xs {
			s += x
		}
		*mean = s / float64(len(xs))
		*p50, *p90, *p99 = stats.Quantile(xs, 0.5), stats.Quantile(xs, 0.9), stats.Quantile(xs, 0.99)
	}
	stats(ttft, &sum.TTFTSMean, &sum.TTFTSP50, &sum.TTFTSP90, &sum.TTFTSP99)
	stats(itl, &sum.ITLSMean, &sum.ITLSP50, &sum.ITLSP90, &sum.ITLSP99)
	stats(e2e, &sum.E2ESMean, &sum.E2ESP50, &sum.E2ESP90, &sum.E2ESP99)
	busy, kv, seqs := 0.0, 0.0, 0.0
	verifies, drafts, kept := 0, 0, 0
	for _, it := range its {
		verifies += it.VerifyingSequences
		drafts += it.DraftTokens
		kept += it.AcceptedTokens
		u := float64(it.KVBlocksUsed) / float64(max(it.KVBlocks, 1))
		busy += it.DurationS
		kv += u * it.DurationS
		seqs += float64(it.Sequences)
		sum.KVUtilizationMax = math.Max(sum.KVUtilizationMax, u)
	}
	if busy > 0 {
		sum.KVUtilizationMean = kv / busy
	}
	if drafts > 0 {
		sum.DraftAcceptanceRate = float64(kept) / float64(drafts)
		sum.MeanAcceptanceLength = float64(verifies+kept) / float64(verifies)
	}
	sum.Iterations = len(its)
	if len(its) > 0 {
		sum.MeanBatchSeqs = seqs / float64(len(its))
	}
	return sum
}
