package serving

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
)

// Config is the engine configuration of every replica.
type Config struct {
	// MaxBatchedTokens is the token budget of one iteration (vLLM
	// max_num_batched_tokens); MaxSeqs the most sequences running at once
	// (max_num_seqs).
	MaxBatchedTokens, MaxSeqs int
	// Chunked splits prompts across iterations (Sarathi-Serve's chunked
	// prefill, vLLM V1's default); ChunkTokens caps one sequence's prefill
	// tokens per iteration (vLLM long_prefill_token_threshold; Sarathi's
	// chunk size). Without Chunked a prompt that does not fit the remaining
	// budget waits for a later iteration (vLLM with chunking disabled).
	Chunked     bool
	ChunkTokens int
	// BlockTokens is the KV cache block (page) size in tokens (vLLM block_size).
	BlockTokens int
	// Blocks is the KV blocks (of BlockTokens tokens of every attention
	// layer) a sequence of n cached tokens holds; nil: ⌈n / BlockTokens⌉.
	// A model with local-attention layers (sliding windows, chunks) holds
	// fewer: those layers keep only the blocks of their window or chunk
	// (WindowBlocks).
	Blocks func(n int) int
	// Preemption when blocks run out: "recompute" (vLLM V1, the only mode it
	// has: the victim's blocks are freed and its tokens recomputed) or
	// "swap" (vLLM V0: the victim's blocks are copied to host memory and
	// back, at SwapBytesPerS per GPU, blocking the iteration).
	Preemption    string
	SwapBytesPerS float64
	// PrefixCaching keeps the full blocks of a request's shared prefix
	// (Request.Prefix) cached after use, evicting least recently used ones
	// when blocks are needed (vLLM's automatic prefix caching);
	// PrefixHitRate instead takes that share of every prompt as cached.
	PrefixCaching bool
	PrefixHitRate float64
	// FrontendS is the API server's time per request before the scheduler
	// sees it (HTTP, chat template, tokenization), FrontendSPerToken its
	// time per prompt token on top (tokenizing the prompt): a request sent
	// at ArrivalS joins the waiting queue FrontendS +
	// FrontendSPerToken·Prompt after a server starts on it (one request at
	// a time, a server per replica: Sim.frontend). Client-side benchmark tools (genai-perf,
	// vLLM's benchmark_serving) time TTFT from the send, so it counts in
	// TTFT and end to end.
	FrontendS, FrontendSPerToken float64
	// StepS is the engine loop's CPU time per iteration that the GPU waits
	// for (scheduling, preparing the inputs, sampling and processing the
	// outputs, when the loop does them between iterations rather than
	// under the next one), StepSPerSeq its time per scheduled sequence on
	// top. Such an iteration starts its kernels StepS + StepSPerSeq·n after
	// it is scheduled.
	StepS, StepSPerSeq float64
	// SpecTokens is the draft tokens each decoding sequence proposes an
	// iteration (speculative decoding, vLLM's num_speculative_tokens; 0:
	// none), as many as its output has left. The iteration verifies them:
	// 1 + SpecTokens query tokens a sequence, each with its logits. Each
	// draft is kept with probability AcceptRate if the ones before it were,
	// and the target adds one token of its own, so a step yields 1 to
	// SpecTokens + 1 tokens, (1 − α^(k+1)) / (1 − α) on average (Leviathan
	// et al. 2023: rejection sampling keeps the target's distribution, so
	// the drafter sets only how many tokens a step yields). SpecRand draws
	// the acceptances.
	SpecTokens int
	AcceptRate float64
	SpecRand   *rand.Rand
}

// Coster prices an iteration of one replica: Stages appends each pipeline
// stage's time for the shape to out[:0] (one element without pipeline
// parallelism).
type Coster interface {
	Stages(sh *Shape, out []float64) ([]float64, error)
}

// Role of a replica.
type Role uint8

const (
	// Both prefill and decode (co-located).
	Both Role = iota
	// Prefill only: requests leave after their first token, their KV cache
	// is sent to a decode replica.
	Prefill
	// Decode only: requests arrive with their prompt's KV cache.
	Decode
)

// Replica is one engine instance.
type Replica struct {
	Cost   Coster
	Blocks int
	// BlockBytes is one KV block on one GPU (swap time).
	BlockBytes float64
	Role       Role
	// Draft is the drafter's time in an iteration of the shape: its pass
	// over the prefill chunks (its own cache of the prompts) and its
	// Config.SpecTokens passes proposing the verifying sequences' next
	// drafts, run after the target and before the iteration's tokens are
	// returned (vLLM V1's propose step); nil costs nothing (n-gram lookup
	// on the CPU).
	Draft func(sh *Shape) (float64, error)
}

// Request is one request of the workload.
type Request struct {
	ArrivalS       float64
	Prompt, Output int
	// Prefix identifies a shared prefix of PrefixTokens tokens (−1: none).
	Prefix       int32
	PrefixTokens int
	// Client is the closed-loop client that sent it (−1: open loop).
	Client int32
}

// Routing policies.
const (
	RoundRobin       = "round_robin"
	LeastOutstanding = "least_outstanding"
	KVAware          = "kv_aware"
)

// Source yields the requests in arrival order. Next returns false when no
// more arrive; closed-loop sources learn of completions through Done.
type Source interface {
	// Next is the next request to arrive at or after now, if any is due
	// (ok false: none now; more may come after a Done).
	Next() (Request, bool)
	// Done tells a closed-loop source that request i (of client c) finished at t.
	Done(c int32, t float64)
}

// Transfer times a KV cache move of tokens from prefill replica a to decode replica b.
type TransferFunc func(a, b, tokens int) (float64, error)

// Outcome is a finished simulation.
type Outcome struct {
	Requests   []RequestOut
	Iterations []Iteration
	// Progress: simulated time of the last event.
	EndS float64
}

// RequestOut is one request's history.
type RequestOut struct {
	Request
	ScheduledS, FirstTokenS, FinishS float64
	ITLMaxS                          float64
	Preemptions                      int
	Replica, DecodeReplica           int
	CachedTokens                     int
	TransferS                        float64
}

// Iteration is one engine iteration. DecodeTokens counts every token of
// the decoding sequences, their drafts included; with speculative decoding
// Verifying of them verify DraftTokens drafts and keep AcceptedTokens.
type Iteration struct {
	Replica                                   int
	StartS, DurationS                         float64
	Sequences, PrefillTokens, DecodeTokens    int
	Verifying, DraftTokens, AcceptedTokens    int
	KVBlocksUsed, KVBlocks, Preempted, Queued int
}

type rq struct {
	// inflight: scheduled in an iteration that has not ended.
	inflight            bool
	computed, generated int
	blocks, shared      int
	preempt             int
	swapped             bool
	lastTok             float64
	started             bool
}

type prefixEntry struct {
	// blocks it holds (Sim.blocks of its tokens); tokenBlocks of
	// BlockTokens tokens it covers.
	blocks, tokenBlocks, refs int
	lastUse                   float64
	seq                       uint64
}

type rep struct {
	Replica
	idx       int
	waiting   []int32 // deque: waiting[head:]
	head      int
	running   []int32
	free      int
	evictable int
	// inflight are the iterations started and not ended, oldest first (at
	// most one a pipeline stage); stageFree is when each stage ends its
	// last one, stageTimes the scratch Stages fills.
	inflight        []batch
	stageFree       []float64
	stageTimes      []float64
	outstanding     int
	routedBlocks    int
	prefixes        map[int32]*prefixEntry
	sched           []sched // the iteration being formed
	spare           [][]sched
	ingressFreeS    float64
	iterations      int
	pendingPreempts int
}

// sched is a request's share of an iteration: n tokens, of which spec are
// drafts to verify, gain the tokens it yields (drafts kept and the
// target's own) when spec > 0.
type sched struct {
	r    int32
	n    int
	spec int
	gain int
}

// batch is an iteration in flight: its requests and their tokens.
type batch struct{ sched []sched }

type event struct {
	t    float64
	seq  uint64
	kind uint8
	id   int32
}

const (
	// evSend: an open-loop request is sent (the next one is drawn); it
	// reaches the scheduler after its frontend time (evArrival), which
	// varies with the prompt, so a later send can arrive first.
	evSend uint8 = iota
	evArrival
	evIteration
	evKV
	// evStage: a replica's first pipeline stage is free for its next
	// iteration (pipeline parallelism).
	evStage
)

// Sim runs the engines.
type Sim struct {
	cfg      Config
	reps     []*rep
	src      Source
	transfer TransferFunc
	route    string
	rr, rrD  int
	reqs     []RequestOut
	st       []rq
	evs      []event
	seq      uint64
	now      float64
	out      Outcome
	shape    Shape
	dirty    []*rep
	// api holds each API server's free time: one a replica that takes
	// arrivals (Sim.frontend).
	api    []float64
	pools  [3][]*rep
	useSeq uint64
	// Progress, if set, receives the number of finished requests and the
	// simulated time every few thousand events (the context is checked as often).
	Progress func(done int, nowS float64)
	done     int
}

// NewSim sets up replicas under a routing policy; transfer is needed when
// some replica has the Prefill role.
func NewSim(cfg Config, reps []Replica, route string, src Source, transfer TransferFunc) *Sim {
	s := &Sim{cfg: cfg, src: src, transfer: transfer, route: route}
	for i, r := range reps {
		s.reps = append(s.reps, &rep{Replica: r, idx: i, free: r.Blocks, prefixes: map[int32]*prefixEntry{}})
		if r.Role != Decode {
			s.api = append(s.api, 0)
		}
	}
	if len(s.api) == 0 {
		s.api = []float64{0}
	}
	return s
}

func (s *Sim) push(t float64, kind uint8, id int32) {
	s.seq++
	s.evs = append(s.evs, event{t, s.seq, kind, id})
	i := len(s.evs) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(s.evs[i], s.evs[p]) {
			break
		}
		s.evs[i], s.evs[p] = s.evs[p], s.evs[i]
		i = p
	}
}

func less(a, b event) bool { return a.t < b.t || (a.t == b.t && a.seq < b.seq) }

func (s *Sim) pop() event {
	e := s.evs[0]
	n := len(s.evs) - 1
	s.evs[0] = s.evs[n]
	s.evs = s.evs[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && less(s.evs[l], s.evs[m]) {
			m = l
		}
		if r < n && less(s.evs[r], s.evs[m]) {
			m = r
		}
		if m == i {
			break
		}
		s.evs[i], s.evs[m] = s.evs[m], s.evs[i]
		i = m
	}
	return e
}

// pull queues every request the source has due now.
func (s *Sim) pull() {
	for {
		r, ok := s.src.Next()
		if !ok {
			return
		}
		id := int32(len(s.reqs))
		s.reqs = append(s.reqs, RequestOut{Request: r, Replica: -1, DecodeReplica: -1})
		s.st = append(s.st, rq{})
		s.push(r.ArrivalS, evSend, id)
		if r.Client < 0 {
			// Open loop: one send ahead is enough (the next is pulled
			// when this one is sent).
			return
		}
	}
}

// frontend is when request q, sent now, reaches the scheduler: the API
// server takes requests one at a time, each for Config.FrontendS +
// Config.FrontendSPerToken·Prompt. vLLM's OpenAI server tokenizes on one
// worker thread (OpenAIServing's ThreadPoolExecutor(max_workers=1),
// vllm/entrypoints/openai/serving_engine.py; before vLLM PR #10635,
// November 2024, on its event loop: "synchronously and sequentially"), so
// requests sent together reach the engine one tokenizing time apart. Each
// replica has its own server: a request takes the first one free.
func (s *Sim) frontend(q *Request) float64 {
	first := 0
	for i, free := range s.api {
		if free < s.api[first] {
			first = i
		}
	}
	s.api[first] = max(s.now, s.api[first]) + s.cfg.FrontendS + s.cfg.FrontendSPerToken*float64(q.Prompt)
	return s.api[first]
}

// Run simulates until every request has finished.
func (s *Sim) Run(ctx context.Context) (*Outcome, error) {
	s.pull()
	n := 0
	for len(s.evs) > 0 {
		n++
		// An event can batch a thousand sequences: poll often enough that
		// Ctrl-C stops a large run within a second (4,096 events took over
		// one on 4,096 replicas at 10,000 requests/s).
		if n&255 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if n&4095 == 0 && s.Progress != nil {
			s.Progress(s.done, s.now)
		}
		e := s.pop()
		s.now = e.t
		switch e.kind {
		case evSend:
			s.push(s.frontend(&s.reqs[e.id].Request), evArrival, e.id)
			s.pull()
		case evArrival:
			s.arrive(e.id)
		case evIteration:
			s.dirty = append(s.dirty, s.reps[e.id])
			if err := s.finishIteration(s.reps[e.id]); err != nil {
				return nil, err
			}
		case evKV:
			s.kvArrived(e.id)
		case evStage:
			s.dirty = append(s.dirty, s.reps[e.id])
		}
		if len(s.evs) > 0 && s.evs[0].t == s.now {
			// More happens at this instant (requests reaching the
			// scheduler together, an iteration ending as one arrives):
			// an engine forming its next batch sees all of it.
			continue
		}
		if err := s.wake(); err != nil {
			return nil, err
		}
	}
	s.out.Requests = s.reqs
	s.out.EndS = s.now
	for i, st := range s.st {
		if s.reqs[i].FinishS == 0 && st.generated < s.reqs[i].Output {
			return nil, fmt.Errorf("serving: request %d never finished (replica %d)", i, s.reqs[i].Replica)
		}
	}
	return &s.out, nil
}

// wake starts an iteration on every replica an event touched that has work
// and room for it: no iteration in flight, or, with pipeline parallelism,
// fewer than its stages and the first stage free (vLLM V1 keeps as many
// scheduled batches in flight as pipeline stages: EngineCore's batch queue,
// vllm/v1/engine/core.py, sized by the executor's max_concurrent_batches).
func (s *Sim) wake() error {
	for _, r := range s.dirty {
		if s.room(r) && (len(r.running) > 0 || r.head < len(r.waiting)) {
			if err := s.startIteration(r); err != nil {
				return err
			}
		}
	}
	s.dirty = s.dirty[:0]
	return nil
}

func (s *Sim) pick(pool Role, id int32) *rep {
	if s.pools[pool] == nil {
		for _, r := range s.reps {
			if r.Role == pool || (pool == Prefill && r.Role == Both) {
				s.pools[pool] = append(s.pools[pool], r)
			}
		}
	}
	cands := s.pools[pool]
	switch s.route {
	case RoundRobin:
		if pool == Decode {
			s.rrD++
			return cands[(s.rrD-1)%len(cands)]
		}
		s.rr++
		return cands[(s.rr-1)%len(cands)]
	case KVAware:
		// NVIDIA Dynamo's KV router (docs.nvidia.com/dynamo, "Router
		// Design", overlap weight 1): the lowest potential prefill blocks
		// (the prompt less its cached prefix) plus potential active blocks
		// (those of the requests routed there and not done, plus this one).
		q := &s.reqs[id]
		bt := s.cfg.BlockTokens
		best, bestCost := (*rep)(nil), 0
		for _, r := range cands {
			cached := 0
			if e := r.prefixes[q.Prefix]; q.Prefix >= 0 && e != nil && s.cfg.PrefixCaching {
				cached = min(e.tokenBlocks, (q.Prompt-1)/bt)
			}
			cost := ceilDiv(q.Prompt, bt) - cached + r.routedBlocks + ceilDiv(q.Prompt, bt)
			if best == nil || cost < bestCost || (cost == bestCost && r.outstanding < best.outstanding) {
				best, bestCost = r, cost
			}
		}
		return best
	}
	best := cands[0]
	for _, r := range cands[1:] {
		if r.outstanding < best.outstanding {
			best = r
		}
	}
	return best
}

func (s *Sim) arrive(id int32) {
	r := s.pick(Prefill, id)
	s.reqs[id].Replica = r.idx
	r.outstanding++
	r.routedBlocks += ceilDiv(s.reqs[id].Prompt, s.cfg.BlockTokens)
	r.waiting = append(r.waiting, id)
	s.dirty = append(s.dirty, r)
}

func (s *Sim) kvArrived(id int32) {
	q := &s.reqs[id]
	pre := s.reps[q.Replica]
	s.release(pre, id)
	pre.outstanding--
	pre.routedBlocks -= ceilDiv(q.Prompt, s.cfg.BlockTokens)
	q.FirstTokenS = s.now
	s.st[id].lastTok = s.now
	d := s.reps[q.DecodeReplica]
	s.dirty = append(s.dirty, pre, d)
	if q.Output <= 1 {
		d.outstanding--
		d.routedBlocks -= ceilDiv(q.Prompt, s.cfg.BlockTokens)
		s.finish(id)
		return
	}
	d.waiting = append(d.waiting, id)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// evict frees least recently used unreferenced prefixes until need blocks are free.
func (s *Sim) evict(r *rep, need int) {
	for r.free < need && r.evictable > 0 {
		var vid int32 = -1
		var v *prefixEntry
		for id, e := range r.prefixes {
			if e.refs == 0 && (v == nil || e.lastUse < v.lastUse || (e.lastUse == v.lastUse && e.seq < v.seq)) {
				vid, v = id, e
			}
		}
		if v == nil {
			return
		}
		r.free += v.blocks
		r.evictable -= v.blocks
		delete(r.prefixes, vid)
	}
}

// BlocksFor is the KV blocks a sequence of n cached tokens holds (Blocks,
// or ⌈n / BlockTokens⌉).
func (c Config) BlocksFor(n int) int {
	if c.Blocks != nil {
		return c.Blocks(n)
	}
	return ceilDiv(n, c.BlockTokens)
}

func (s *Sim) blocks(n int) int { return s.cfg.BlocksFor(n) }

// WindowBlocks is Config.Blocks for a model whose KV cache bytes per token
// are a share in local-attention layers that see at most window tokens (a
// sliding window, or a chunk), which keep only the blocks that hold them
// (vLLM's hybrid KV cache manager: a sliding-window layer group frees the
// blocks that fall out of the window, SlidingWindowManager.
// remove_skipped_blocks, a chunked-local group those of past chunks), the
// rest in layers that keep every token: ⌈(1 − share)·⌈n/B⌉ + share·min(⌈n/B⌉,
// ⌈(window−1)/B⌉ + 1)⌉ blocks of B tokens of every layer.
func WindowBlocks(blockTokens, window int, share float64) func(n int) int {
	span := ceilDiv(window-1, blockTokens) + 1
	return func(n int) int {
		b := ceilDiv(n, blockTokens)
		return int(math.Ceil((1-share)*float64(b) + share*float64(min(b, span)) - 1e-9))
	}
}

// allocate gives request id blocks for its first tokens tokens.
func (s *Sim) allocate(r *rep, id int32, tokens int) bool {
	st := &s.st[id]
	need := s.blocks(tokens) - st.blocks - st.shared
	if need <= 0 {
		return true
	}
	if r.free < need {
		s.evict(r, need)
		if r.free < need {
			return false
		}
	}
	r.free -= need
	st.blocks += need
	return true
}

// release frees a request's blocks and its prefix reference.
func (s *Sim) release(r *rep, id int32) {
	st := &s.st[id]
	r.free += st.blocks
	st.blocks = 0
	if st.shared > 0 {
		if e := r.prefixes[s.reqs[id].Prefix]; e != nil {
			e.refs--
			e.lastUse = s.now
			s.useSeq++
			e.seq = s.useSeq
			if e.refs == 0 {
				r.evictable += e.blocks
			}
		}
		st.shared = 0
	}
}

// numTokens is the request's tokens so far (vLLM num_tokens): its prompt
// and every generated token; all but the last sampled one are in the cache
// once the request is up to date.
func (s *Sim) numTokens(id int32) int { return s.reqs[id].Prompt + s.st[id].generated }

// preempt evicts the running request id (vLLM: the lowest-priority, i.e.
// the last in FCFS order) and returns the swap time it costs.
func (s *Sim) preempt(r *rep, id int32) float64 {
	st := &s.st[id]
	st.preempt++
	s.reqs[id].Preemptions++
	r.pendingPreempts++
	swap := 0.0
	if s.cfg.Preemption == "swap" {
		// Its whole cache goes to host memory (a shared prefix too: it
		// comes back as the request's own blocks).
		swap = float64(st.blocks+st.shared) * r.BlockBytes / s.cfg.SwapBytesPerS
		st.swapped = true
	} else {
		s.keepOwn(r, id)
		st.computed = 0
	}
	s.release(r, id)
	// Front of the waiting queue.
	if r.head > 0 {
		r.head--
		r.waiting[r.head] = id
	} else {
		r.waiting = append([]int32{id}, r.waiting...)
	}
	return swap
}

// ownKey is the prefixes key under which a preempted request's own
// computed blocks stay cached: negative, apart from the shared prefixes'.
func ownKey(id int32) int32 { return -1 - id }

// keepOwn keeps a request preempted by recompute's full computed blocks in
// the prefix cache, evictable, as vLLM's automatic prefix caching does: its
// blocks go back to the free queue with their hashes, so a request
// rescheduled before they are reused finds them (KVCacheManager.free,
// BlockPool.free_blocks). Requests on a shared prefix, and the hit-rate
// mode, keep the plain recompute.
func (s *Sim) keepOwn(r *rep, id int32) {
	st := &s.st[id]
	if !s.ownCaching(id) {
		return
	}
	full := st.computed / s.cfg.BlockTokens
	held := min(st.blocks, s.blocks(full*s.cfg.BlockTokens))
	if full <= 0 || held <= 0 {
		return
	}
	st.blocks -= held
	r.evictable += held
	s.useSeq++
	r.prefixes[ownKey(id)] = &prefixEntry{blocks: held, tokenBlocks: full, lastUse: s.now, seq: s.useSeq}
}

// ownCaching says whether request id's own blocks stay cached when it
// leaves them (keepOwn).
func (s *Sim) ownCaching(id int32) bool {
	return s.cfg.PrefixCaching && s.cfg.PrefixHitRate == 0 && s.reqs[id].Prefix < 0 && s.st[id].shared == 0
}

// room says whether replica r can start an iteration now.
func (s *Sim) room(r *rep) bool {
	if len(r.inflight) == 0 {
		return true
	}
	return len(r.inflight) < len(r.stageFree) && s.now >= r.stageFree[0]
}

// victim is the index in r.running of the request a preemption takes: the
// last one not in flight (vLLM V1 pops the last running request; one whose
// iteration is still in the pipeline is not its to take), −1 if none.
func (s *Sim) victim(r *rep) int {
	for i := len(r.running) - 1; i >= 0; i-- {
		if !s.st[r.running[i]].inflight {
			return i
		}
	}
	return -1
}

// maxPreemptions is how many times one request may be preempted: a
// scheduler that keeps preempting the same request makes no progress, and
// the run stops with an error instead of growing without end.
const maxPreemptions = 1000

func (s *Sim) startIteration(r *rep) error {
	cfg := &s.cfg
	budget := cfg.MaxBatchedTokens
	r.sched = r.sched[:0]
	extra := 0.0
	preempted, blocked := false, false
	// Running requests first, in order (vLLM V1 Scheduler.schedule), but
	// those of an iteration still in flight (its scheduled_req_ids).
	for i := 0; i < len(r.running) && budget > 0; i++ {
		id := r.running[i]
		if s.st[id].inflight {
			continue
		}
		n := min(s.numTokens(id)-s.st[id].computed, cfg.ChunkTokens, budget)
		spec := s.drafts(id, n, budget)
		n += spec
		ok := true
		for !s.allocate(r, id, s.st[id].computed+n) {
			v := s.victim(r)
			if v < 0 || (r.running[v] == id && len(r.inflight) > 0) {
				// The blocks it needs are held by iterations in flight:
				// it waits for them to end rather than preempting itself
				// (and losing its progress to a request admitted in its
				// place), and nothing new is admitted meanwhile.
				blocked, ok = true, false
				break
			}
			last := r.running[v]
			r.running = append(r.running[:v], r.running[v+1:]...)
			extra += s.preempt(r, last)
			preempted = true
			if s.st[last].preempt > maxPreemptions {
				return fmt.Errorf("serving: request %d was preempted %d times on replica %d without finishing: its KV cache (%d blocks of %d tokens) cannot hold the load; give more memory (engine.kv_blocks, engine.gpu_memory_utilization, tp, pp) or less load",
					last, s.st[last].preempt, r.idx, r.Blocks, cfg.BlockTokens)
			}
			if last == id {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		x := sched{r: id, n: n, spec: spec}
		if spec > 0 {
			x.gain = s.accept(spec)
		}
		r.sched = append(r.sched, x)
		budget -= n
	}
	// Then waiting requests, if nothing was preempted (or the preemptions
	// left nothing to run: vLLM would admit them at its next step).
	for (!preempted || len(r.sched) == 0) && !blocked && r.head < len(r.waiting) && budget > 0 && len(r.running) < cfg.MaxSeqs {
		id := r.waiting[r.head]
		st := &s.st[id]
		q := &s.reqs[id]
		if st.computed == 0 && !st.swapped {
			s.prefixHit(r, id)
		}
		need := s.numTokens(id) - st.computed
		if !cfg.Chunked && need > budget {
			break
		}
		n := min(need, cfg.ChunkTokens, budget)
		if !s.allocate(r, id, st.computed+n) {
			// A request that found its own blocks cached and cannot go on
			// leaves them to the cache, evictable, rather than holding
			// them while it waits.
			if !st.swapped && st.blocks > 0 && s.ownCaching(id) {
				s.keepOwn(r, id)
				s.release(r, id)
				st.computed = 0
			}
			break
		}
		if st.swapped {
			extra += float64(s.blocks(st.computed)) * r.BlockBytes / cfg.SwapBytesPerS
			st.swapped = false
		}
		r.head++
		r.running = append(r.running, id)
		if !st.started {
			st.started = true
			q.ScheduledS = s.now
		}
		r.sched = append(r.sched, sched{r: id, n: n})
		budget -= n
	}
	if r.head > 4096 && r.head*2 > len(r.waiting) {
		r.waiting = append(r.waiting[:0], r.waiting[r.head:]...)
		r.head = 0
	}
	if len(r.sched) == 0 {
		// Nothing to run: blocks held by iterations in flight or by prompts
		// waiting for their KV transfer (disaggregation) come back at those
		// events; with every block free, the request can never fit.
		if held := r.Blocks - r.free - r.evictable; len(r.running) == 0 && r.head < len(r.waiting) && held == 0 {
			id := r.waiting[r.head]
			return fmt.Errorf("serving: request %d needs %d KV blocks of %d tokens but replica %d has %d",
				id, s.blocks(s.reqs[id].Prompt+s.reqs[id].Output), cfg.BlockTokens, r.idx, r.Blocks)
		}
		return nil
	}
	sh := &s.shape
	sh.Tokens, sh.Logits, sh.Decode, sh.DecodeKV = 0, 0, 0, 0
	sh.Verify, sh.VerifyQuery, sh.VerifyKV = 0, 0, 0
	sh.Chunks = sh.Chunks[:0]
	pre, dec, kv := 0, 0, 0
	ver, verQ, verKV, drafts, kept := 0, 0, 0, 0, 0
	for _, x := range r.sched {
		st := &s.st[x.r]
		sh.Tokens += x.n
		switch {
		case x.spec > 0:
			// A verification: every query token's logits are computed.
			ver++
			verQ += x.n
			verKV += st.computed
			drafts += x.spec
			kept += x.gain - 1
			sh.Logits += x.n
			continue
		case x.n == 1 && st.computed > 0:
			dec++
			kv += st.computed
		default:
			pre += x.n
			sh.Chunks = append(sh.Chunks, Chunk{Query: x.n, Context: st.computed})
		}
		if st.computed+x.n >= s.numTokens(x.r) {
			sh.Logits++
		}
	}
	sh.Decode = dec
	if dec > 0 {
		sh.DecodeKV = (kv + dec/2) / dec
	}
	if ver > 0 {
		sh.Verify, sh.VerifyQuery, sh.VerifyKV = ver, ceilDiv(verQ, ver), (verKV+ver/2)/ver
	}
	st, err := r.Cost.Stages(sh, r.stageTimes)
	if err != nil {
		return err
	}
	r.stageTimes = st
	if r.Draft != nil && (ver > 0 || pre > 0) {
		d, err := r.Draft(sh)
		if err != nil {
			return err
		}
		st[len(st)-1] += d
	}
	if len(r.stageFree) != len(st) {
		r.stageFree = make([]float64, len(st))
	}
	// The swaps and the engine loop's own time block the first stage; each
	// stage takes the iteration when it has left the previous stage and the
	// stage is done with the last.
	st[0] += extra + s.cfg.StepS + s.cfg.StepSPerSeq*float64(len(r.sched))
	end := s.now
	for k, d := range st {
		end = math.Max(end, r.stageFree[k]) + d
		r.stageFree[k] = end
	}
	d := end - s.now
	b := batch{}
	if n := len(r.spare); n > 0 {
		b.sched, r.spare = r.spare[n-1][:0], r.spare[:n-1]
	}
	b.sched = append(b.sched, r.sched...)
	for _, x := range b.sched {
		s.st[x.r].inflight = true
	}
	r.inflight = append(r.inflight, b)
	r.iterations++
	s.out.Iterations = append(s.out.Iterations, Iteration{Replica: r.idx, StartS: s.now, DurationS: d,
		Sequences: len(r.sched), PrefillTokens: pre, DecodeTokens: dec + verQ,
		Verifying: ver, DraftTokens: drafts, AcceptedTokens: kept,
		KVBlocksUsed: r.Blocks - r.free - r.evictable, KVBlocks: r.Blocks, Preempted: r.pendingPreempts, Queued: len(r.waiting) - r.head})
	r.pendingPreempts = 0
	s.push(end, evIteration, int32(r.idx))
	if len(st) > 1 {
		s.push(r.stageFree[0], evStage, int32(r.idx))
	}
	return nil
}

// prefixHit sets a newly admitted request's cached tokens.
func (s *Sim) prefixHit(r *rep, id int32) {
	q := &s.reqs[id]
	st := &s.st[id]
	bt := s.cfg.BlockTokens
	if s.cfg.PrefixHitRate > 0 {
		hit := int(s.cfg.PrefixHitRate*float64(q.Prompt)) / bt * bt
		st.computed = min(hit, (q.Prompt-1)/bt*bt)
		q.CachedTokens = st.computed
		return
	}
	if e := r.prefixes[ownKey(id)]; e != nil {
		// Its own blocks from before a preemption, not yet evicted.
		delete(r.prefixes, ownKey(id))
		r.evictable -= e.blocks
		st.blocks += e.blocks
		st.computed = min(e.tokenBlocks*bt, s.numTokens(id)-1)
		return
	}
	if !s.cfg.PrefixCaching || q.Prefix < 0 {
		return
	}
	e := r.prefixes[q.Prefix]
	if e == nil {
		return
	}
	nb := min(e.tokenBlocks, (q.Prompt-1)/bt)
	if nb <= 0 {
		return
	}
	if e.refs == 0 {
		r.evictable -= e.blocks
	}
	e.refs++
	st.shared = e.blocks
	st.computed = nb * bt
	q.CachedTokens = st.computed
}

func (s *Sim) finishIteration(r *rep) error {
	// Iterations end in the order they started (each stage takes them in
	// turn).
	b := r.inflight[0]
	r.inflight = append(r.inflight[:0], r.inflight[1:]...)
	defer func() { r.spare = append(r.spare, b.sched) }()
	bt := s.cfg.BlockTokens
	keep := r.running[:0]
	for _, x := range b.sched {
		st := &s.st[x.r]
		st.inflight = false
		q := &s.reqs[x.r]
		complete := s.numTokens(x.r)
		// A verification keeps the drafts accepted and the target's own
		// token: the rejected drafts' cache slots are written again.
		adv, gen := x.n, 1
		if x.spec > 0 {
			adv, gen = x.gain, x.gain
		}
		st.computed += adv
		// Register a computed shared prefix (its full blocks move to the cache).
		if s.cfg.PrefixCaching && q.Prefix >= 0 && st.shared == 0 && q.PrefixTokens >= bt && st.computed >= q.PrefixTokens {
			if _, ok := r.prefixes[q.Prefix]; !ok {
				nb := q.PrefixTokens / bt
				held := s.blocks(nb * bt)
				st.blocks -= held
				st.shared = held
				s.useSeq++
				r.prefixes[q.Prefix] = &prefixEntry{blocks: held, tokenBlocks: nb, refs: 1, lastUse: s.now, seq: s.useSeq}
			}
		}
		if st.computed < complete {
			continue
		}
		st.generated += gen
		if st.generated == 1 {
			st.lastTok = s.now
			if r.Role == Prefill {
				if err := s.send(r, x.r); err != nil {
					return err
				}
				continue
			}
			q.FirstTokenS = s.now
		} else {
			q.ITLMaxS = math.Max(q.ITLMaxS, s.now-st.lastTok)
			st.lastTok = s.now
		}
		if st.generated >= q.Output {
			s.release(r, x.r)
			r.outstanding--
			r.routedBlocks -= ceilDiv(q.Prompt, s.cfg.BlockTokens)
			s.finish(x.r)
		}
	}
	for _, id := range r.running {
		st := &s.st[id]
		if st.generated < s.reqs[id].Output && !(r.Role == Prefill && st.generated > 0) {
			keep = append(keep, id)
		}
	}
	r.running = keep
	return nil
}

// drafts is the draft tokens running request id verifies this iteration
// when it would compute n tokens: with speculative decoding a decoding
// request (one token to compute) proposes Config.SpecTokens, no more than
// its output has left and the budget allows.
func (s *Sim) drafts(id int32, n, budget int) int {
	st := &s.st[id]
	if s.cfg.SpecTokens == 0 || n != 1 || st.generated == 0 {
		return 0
	}
	return max(0, min(s.cfg.SpecTokens, s.reqs[id].Output-st.generated-1, budget-1))
}

// accept draws the tokens a verification of spec drafts yields: the drafts
// kept in order, each with probability Config.AcceptRate, and the target's
// own.
func (s *Sim) accept(spec int) int {
	a := 0
	for a < spec && s.cfg.SpecRand.Float64() < s.cfg.AcceptRate {
		a++
	}
	return a + 1
}

func (s *Sim) finish(id int32) {
	q := &s.reqs[id]
	q.FinishS = s.now
	s.done++
	if q.Client >= 0 {
		s.src.Done(q.Client, s.now)
		s.pull()
	}
}

// send moves a prefilled request's KV cache to a decode replica.
func (s *Sim) send(r *rep, id int32) error {
	d := s.pick(Decode, id)
	q := &s.reqs[id]
	q.DecodeReplica = d.idx
	d.outstanding++
	d.routedBlocks += ceilDiv(q.Prompt, s.cfg.BlockTokens)
	t, err := s.transfer(r.idx, d.idx, q.Prompt)
	if err != nil {
		return err
	}
	start := math.Max(s.now, d.ingressFreeS)
	d.ingressFreeS = start + t
	q.TransferS = start + t - s.now
	s.push(start+t, evKV, id)
	return nil
}
