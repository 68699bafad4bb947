package serving

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Shape is what one engine iteration computes: Tokens in all (prefill chunk
// tokens, one per decoding sequence, 1 + drafts per verifying one), Logits
// the positions whose logits are computed (a sampling sequence's last, a
// verification's every query token), Decode sequences decoding against
// DecodeKV cached tokens on average, Verify sequences verifying drafts
// (speculative decoding) with VerifyQuery query tokens each against
// VerifyKV cached tokens on average, and the prefill chunks.
type Shape struct {
	Tokens, Logits                int
	Decode, DecodeKV              int
	Verify, VerifyQuery, VerifyKV int
	Chunks                        []Chunk
}

// Chunk is Query prompt tokens of one sequence computed against Context
// tokens already cached.
type Chunk struct{ Query, Context int }

// Pricer prices iterations of one replica (TP·PP GPUs) from the same models
// the inference kind runs: the operators model.Build yields for the
// iteration's tokens, priced on the GPU by package compute as exec's
// Machine.Cost prices them, and every tensor-parallel collective and
// pipeline transfer simulated once per size on the replica's own ranks by
// exec.Run on the cluster's network (faults applied, NCCL launch latency and
// protocol efficiency included). Iterations are then sums of memoized terms:
//
//	t = Σ_stages [ dense(T) + layers·attention(shape) ]·slowdown + head(logits) + Σ pp transfers(T)
//
// dense(T) is every operator of a pass over T tokens except the attention
// core and the logits GEMM (exact per T up to 1,024 tokens; above, T is
// rounded up to a grid of 128 steps per octave, ≤ 0.8 % more tokens);
// attention is one varlen kernel per layer (vLLM's FlashAttention backend
// runs prefill chunks and decodes in one call): the device times of a
// FlashAttention op per chunk (queries against context + queries, causal)
// and one decode-attention op over the decoding sequences at their mean
// cache length (the convention of workload.BuildInference; exact for its
// HBM term, linear in the length), issued once; cache lengths are rounded
// up to 32 steps per octave above 256 tokens (≤ 3.2 %). Mixture-of-experts
// blocks run their router and experts in dense(T) (the dispatch and combine
// of a replica without expert parallelism move nothing); MLA decodes in its
// absorbed form against the latent cache (model.MLADecodeAttention) while
// dense(T) keeps its prefill-form projections.
//
// With PP > 1 an iteration passes through the stages one after another,
// each stage's kernels issued by its own worker's host (Stages gives each
// stage's time); the engine keeps up to PP iterations in flight, as vLLM
// V1's batch queue does (see Sim).
type Pricer struct {
	gpu    hw.GPU
	ev     *compute.Evaluator
	cfg    model.Config
	tp, pp int
	dtype  hw.DType
	// kvDType is the KV cache's element type (Engine.KVDType), kvBytes its
	// bytes.
	kvDType hw.DType
	kvBytes float64
	// weightDType stores the linear layers' weights (Engine.WeightDType).
	weightDType hw.DType
	// expertsInTP spreads the experts whole over the TP ranks (vLLM's
	// --enable-expert-parallel; workload.Inference.ExpertsInTP).
	expertsInTP bool
	// fusedAddNorm: model.Run.FusedAddNorm; xqaDecode: model.Run.XQADecode;
	// flash2: model.Run.FlashAttention2.
	fusedAddNorm, xqaDecode, flash2 bool
	// ep is Engine.EP (≥ 1); a2aBackend Engine.A2ABackend.
	ep         int
	a2aBackend string
	// probeA2A times one all-to-all among the data-parallel ranks, a2a
	// memoizes it.
	probeA2A func(k a2aKey) (float64, error)
	a2a      map[a2aKey]float64
	// stages[s] are the model positions (indices into a graph's Order) of stage s.
	stages [][]int
	// attnLayers[s] is the attention blocks on stage s; localLayers[s]
	// are those of them with local attention (a sliding window or chunks:
	// model.Config.Local), local its kind.
	attnLayers, localLayers []int
	local                   model.Local
	slow                    []float64 // per stage
	probe                   func(kind model.Kind, bytes float64, stage int, p2p bool) (float64, error)
	// The attention's heads, KV heads and head dimension on a rank (MLA
	// decodes in its absorbed form instead: model.MLADecodeAttention).
	hs, kvs, hd int64

	// exact turns the bucketing off (tests measure what it changes).
	exact bool

	// host issues the kernels: prefill iterations eagerly, decode-only
	// iterations from a captured CUDA graph when host.Mode is CUDAGraphs
	// (as the inference kind runs prefill and decode).
	host exec.Host

	// dense is each stage's share of Dense.
	dense map[denseKey][]exec.Issue
	// denseComm is the collectives' and transfers' share of dense's device time.
	denseComm map[denseKey]float64
	head      map[partKey]exec.Issue
	dec       map[decKey]compute.Cost
	pre       map[preKey]float64
	comm      map[commKey]float64
}

// partKey memoizes a part of an iteration by its token (or sequence) count
// and whether it replays from a CUDA graph.
type partKey struct {
	n     int
	graph bool
}

// denseKey memoizes Dense: its tokens, whether it replays from a CUDA
// graph, and, where the all-to-all backend depends on it (A2AAuto),
// whether the iteration is decode-only.
type denseKey struct {
	n             int
	graph, decode bool
}

func (p *Pricer) denseKey(t int, graph, decode bool) denseKey {
	return denseKey{t, graph, decode && p.a2aBackend == net.A2AAuto}
}

type commKey struct {
	kind  model.Kind
	bytes float64
	stage int
	p2p   bool
}

// ReplicaRanks is the global ranks of replica r, stage by stage, in TP
// order (workload.Inference.Rank's numbering).
func ReplicaRanks(tp, pp, r int) [][]int {
	out := make([][]int, pp)
	for s := 0; s < pp; s++ {
		for k := 0; k < tp; k++ {
			out[s] = append(out[s], k+tp*(s+pp*r))
		}
	}
	return out
}

// Engine is how a replica's engine runs the model.
type Engine struct {
	// TP and PP degrees of the replica.
	TP, PP int
	// DType is the math type; KVDType the KV cache's element type ("" the
	// activation type; model.Run.KVDType); WeightDType the linear layers'
	// weights' ("" DType; model.Run.WeightDType).
	DType, KVDType, WeightDType hw.DType
	// Host issues the kernels.
	Host exec.Host
	// TPAllReduce runs the tensor-parallel all-reduces ("" NCCL's tuner,
	// net.Custom the engine's custom all-reduce).
	TPAllReduce net.Algorithm
	// ExpertsInTP spreads the experts whole over the TP ranks (vLLM's
	// --enable-expert-parallel).
	ExpertsInTP bool
	// FusedAddNorm runs the residual adds inside the norms
	// (model.Run.FusedAddNorm).
	FusedAddNorm bool
	// XQADecode runs the decode attention as TensorRT-LLM's XQA kernel
	// (model.Run.XQADecode).
	XQADecode bool
	// FlashAttention2 runs the prefill attention as FlashAttention-2's
	// kernels (model.Run.FlashAttention2).
	FlashAttention2 bool
	// EP is the data-parallel attention ranks of a replica (1: none): EP
	// ranks of TP GPUs each, every rank attending to its own sequences,
	// the experts spread over the EP ranks (each TP-sharded over its
	// rank's GPUs, as the inference kind's wide expert parallelism), the
	// ranks stepping together (rankShape).
	EP int
	// A2ABackend is how those ranks exchange tokens (net.A2ABackends;
	// "" is net.A2ADirect).
	A2ABackend string
}

// NewPricer builds replica r's pricer on a topology (its link health
// already holds the time-0 faults) with the spec's faults and seed, its
// engine running as e says.
func NewPricer(m *exec.Machine, faults net.FaultPlan, seed uint64, cfg model.Config, r int, e Engine) (*Pricer, error) {
	t, gpu := m.Fabric.Topology(), m.GPU
	tp, pp := e.TP, e.PP
	p := &Pricer{gpu: gpu, ev: compute.NewEvaluator(gpu), cfg: cfg, tp: tp, pp: pp, dtype: e.DType,
		kvDType: e.KVDType, kvBytes: model.KVBytes(e.KVDType, e.DType), weightDType: e.WeightDType, host: e.Host, expertsInTP: e.ExpertsInTP, fusedAddNorm: e.FusedAddNorm, xqaDecode: e.XQADecode, flash2: e.FlashAttention2, ep: max(e.EP, 1), a2aBackend: e.A2ABackend, a2a: map[a2aKey]float64{},
		dense: map[denseKey][]exec.Issue{}, denseComm: map[denseKey]float64{}, head: map[partKey]exec.Issue{}, dec: map[decKey]compute.Cost{}, pre: map[preKey]float64{}, local: cfg.LocalKind(),
		comm: map[commKey]float64{}}
	g, err := model.Build(cfg, p.run(1, 1))
	if err != nil {
		return nil, err
	}
	p.stages = stagePositions(len(g.Order), pp)
	for _, pos := range p.stages {
		n, w := 0, 0
		for _, i := range pos {
			name := g.Blocks[g.Order[i]].Name
			switch {
			case model.IsAttentionBlock(name):
				n++
				if model.IsLocalBlock(name) {
					w++
				}
			case name == model.BlockMamba, name == model.BlockMamba2:
				return nil, fmt.Errorf("serving models attention blocks only; the model has %s blocks", name)
			}
		}
		p.attnLayers, p.localLayers = append(p.attnLayers, n), append(p.localLayers, w)
	}
	for _, b := range g.Blocks {
		for _, o := range b.Forward {
			if o.Kind == model.FlashAttention {
				p.hs, p.kvs, p.hd = o.Heads, o.KVHeads, o.HeadDim
			}
		}
	}
	if p.hd == 0 {
		return nil, fmt.Errorf("serving: model %q has no attention operator", cfg.Name)
	}
	// A replica of EP data-parallel ranks is EP consecutive TP groups; the
	// TP collectives are probed on its first.
	groups := make([][][]int, p.ep)
	for j := range groups {
		groups[j] = ReplicaRanks(tp, pp, r*p.ep+j)
	}
	ranks := groups[0]
	if last := groups[p.ep-1]; last[pp-1][tp-1]+1 > t.NumRanks() {
		return nil, fmt.Errorf("replica %d needs rank %d but the cluster has %d GPUs", r, last[pp-1][tp-1], t.NumRanks())
	}
	// Stragglers: a stage computes at its slowest rank's pace (as exec runs
	// a unit); data-parallel attention ranks step together, so the slowest
	// of them all.
	for s := range ranks {
		f := 1.0
		for _, g := range groups {
			for _, rk := range g[s] {
				f = max(f, m.Fabric.Slowdown(t.RankDevice(rk)))
			}
		}
		p.slow = append(p.slow, f)
	}
	p.probe = func(kind model.Kind, bytes float64, stage int, p2p bool) (float64, error) {
		return probe(m, faults, seed, ranks, kind, bytes, stage, p2p, e.TPAllReduce)
	}
	p.probeA2A = func(k a2aKey) (float64, error) {
		return probeAllToAll(m, faults, seed, groups, k, int32(cfg.ExpertsPerToken))
	}
	return p, nil
}

// run is the model run of a prefill pass of batch sequences of seqLen
// tokens on one rank of the replica.
func (p *Pricer) run(batch, seqLen int) model.Run {
	r := model.Run{Phase: model.Prefill, Batch: batch, SeqLen: seqLen, TP: p.tp, DType: p.dtype, KVDType: p.kvDType, WeightDType: p.weightDType,
		FusedAddNorm: p.fusedAddNorm, XQADecode: p.xqaDecode}
	if p.expertsInTP {
		r.EP, r.ExpertTP = p.tp, 1
	}
	if p.ep > 1 {
		r.EP = p.ep
	}
	return r
}

// stagePositions splits n model positions (embedding, blocks, head) over
// pp stages as workload's pipeline layout does: the blocks evenly (the
// first stages take one more when they do not divide), the embedding on
// the first stage, the head on the last.
func stagePositions(n, pp int) [][]int {
	body := n - 2
	out := make([][]int, pp)
	per, rem := body/pp, body%pp
	at := 1
	for c := 0; c < pp; c++ {
		k := per
		if c < rem {
			k++
		}
		for i := at; i < at+k; i++ {
			out[c] = append(out[c], i)
		}
		at += k
	}
	out[0] = append([]int{0}, out[0]...)
	out[pp-1] = append(out[pp-1], n-1)
	return out
}

// probe simulates one collective (or, p2p, one pipeline transfer from
// stage−1 to stage) on a fresh machine with exec.Run and returns its time.
func probe(shared *exec.Machine, faults net.FaultPlan, seed uint64, ranks [][]int,
	kind model.Kind, bytes float64, stage int, p2p bool, tpAllReduce net.Algorithm) (float64, error) {
	m, err := runMachine(shared, faults, seed)
	if err != nil {
		return 0, err
	}
	t := m.Fabric.Topology()
	pl := &workload.Plan{Ranks: t.NumRanks()}
	if !p2p {
		u := workload.NewUnit(ranks[stage], 0)
		u.Groups[workload.SlotTP] = 0
		pl.Units = []workload.Unit{u}
		pl.Groups = []workload.Group{{Units: []int{0}, Comms: [][]int{ranks[stage]}}}
		pl.Programs = []workload.Program{{Name: "probe", Tasks: []workload.Task{{Name: string(kind), Kind: workload.Collective,
			Stream: workload.StreamTP, Coll: kind, Bytes: bytes, Slot: workload.SlotTP}}}}
		pl.Replicas = [][]int{{0}}
	} else {
		a, b := workload.NewUnit(ranks[stage-1], 0), workload.NewUnit(ranks[stage], 1)
		a.Groups[workload.SlotFwdOut], b.Groups[workload.SlotFwdIn] = 0, 0
		g := workload.Group{Units: []int{0, 1}}
		for k := range ranks[stage] {
			g.Comms = append(g.Comms, []int{ranks[stage-1][k], ranks[stage][k]})
		}
		pl.Units = []workload.Unit{a, b}
		pl.Groups = []workload.Group{g}
		pl.Programs = []workload.Program{
			{Name: "send", Tasks: []workload.Task{{Name: "send", Kind: workload.Send, Stream: workload.StreamPP,
				Coll: workload.SendRecv, Bytes: bytes, Slot: workload.SlotFwdOut}}},
			{Name: "recv", Tasks: []workload.Task{{Name: "recv", Kind: workload.Recv, Stream: workload.StreamPP,
				Coll: workload.SendRecv, Bytes: bytes, Slot: workload.SlotFwdIn}}}}
		pl.Replicas = [][]int{{0, 1}}
	}
	opt := m.Options(true)
	opt.Host = exec.Host{} // the collective alone: the pricer adds the host's issue
	opt.TPAllReduce = tpAllReduce
	return timeRun(m, pl, opt)
}

// a2aKey is one all-to-all among a replica's data-parallel ranks: its
// bytes per rank and how it runs.
type a2aKey struct {
	bytes        float64
	hierarchical bool
	lowLatency   workload.LowLatencyKernel
}

// a2aTime is the time of a dispatch (combine: ret) of bytes per rank in an
// iteration that is decode-only or not, by the engine's backend.
func (p *Pricer) a2aTime(bytes float64, ret, decode bool) (float64, error) {
	k := a2aKey{bytes: bytes}
	ll := p.a2aBackend == net.A2ALowLatency || (p.a2aBackend == net.A2AAuto && decode)
	k.hierarchical = p.a2aBackend == net.A2AHighThroughput || (p.a2aBackend == net.A2AAuto && !decode)
	if ll {
		k.lowLatency = workload.LowLatencyFor(ret)
	}
	if v, ok := p.a2a[k]; ok {
		return v, nil
	}
	v, err := p.probeA2A(k)
	if err != nil {
		return 0, err
	}
	p.a2a[k] = v
	return v, nil
}

// probeAllToAll simulates one expert-parallel all-to-all of k.bytes per
// rank over a replica's data-parallel ranks, one communicator per TP
// index, as the inference kind's wide expert parallelism runs it between
// replicas under balanced routing: an all-to-all-v with bytes/n to every
// rank (top-k routed copies deduplicated per node when hierarchical).
func probeAllToAll(shared *exec.Machine, faults net.FaultPlan, seed uint64, groups [][][]int, k a2aKey, topK int32) (float64, error) {
	bytes := k.bytes
	m, err := runMachine(shared, faults, seed)
	if err != nil {
		return 0, err
	}
	pl := &workload.Plan{Ranks: m.Fabric.Topology().NumRanks()}
	grp := workload.Group{}
	for j, g := range groups {
		u := workload.NewUnit(g[0], 0)
		u.Groups[workload.SlotEP] = 0
		pl.Units = append(pl.Units, u)
		pl.Replicas = append(pl.Replicas, []int{j})
		grp.Units = append(grp.Units, j)
	}
	for k := range groups[0][0] {
		var comm []int
		for _, g := range groups {
			comm = append(comm, g[0][k])
		}
		grp.Comms = append(grp.Comms, comm)
	}
	pl.Groups = []workload.Group{grp}
	n := len(groups)
	pairs := make([]float64, n*n)
	for i := range pairs {
		pairs[i] = bytes / float64(n)
	}
	pl.Programs = []workload.Program{{Name: "probe", Tasks: []workload.Task{{Name: "moe.all_to_all", Kind: workload.Collective,
		Stream: workload.StreamEP, Coll: workload.AllToAllV, Bytes: bytes, Slot: workload.SlotEP, Pairs: pairs,
		Hierarchical: k.hierarchical, TopK: topK, LowLatency: k.lowLatency}}}}
	opt := m.Options(true)
	opt.Host = exec.Host{}
	return timeRun(m, pl, opt)
}

// rankShape is the busiest data-parallel rank's share of a replica's
// iteration: its sequences dealt to the EP ranks evenly (the scheduler
// hands each rank its share, as SGLang's and vLLM's data-parallel
// attention balance requests), each prefill chunk to the rank with the
// fewest tokens so far, largest first; the ranks step together, so the
// iteration lasts as long as the rank with the most tokens (its decode
// sequences at the replica's mean cache length).
func (p *Pricer) rankShape(sh *Shape) *Shape {
	if p.ep <= 1 {
		return sh
	}
	n := p.ep
	decode := make([]int, n)
	for i := 0; i < sh.Decode; i++ {
		decode[i%n]++
	}
	tokens := append([]int(nil), decode...)
	chunks := append([]Chunk(nil), sh.Chunks...)
	sort.SliceStable(chunks, func(i, j int) bool { return chunks[i].Query > chunks[j].Query })
	owner := make([]int, len(chunks))
	for i, c := range chunks {
		r := 0
		for k := 1; k < n; k++ {
			if tokens[k] < tokens[r] {
				r = k
			}
		}
		owner[i], tokens[r] = r, tokens[r]+c.Query
	}
	busy := 0
	for k := 1; k < n; k++ {
		if tokens[k] > tokens[busy] {
			busy = k
		}
	}
	out := &Shape{Tokens: tokens[busy], Decode: decode[busy], DecodeKV: sh.DecodeKV}
	for i, c := range chunks {
		if owner[i] == busy {
			out.Chunks = append(out.Chunks, c)
		}
	}
	// A rank samples for its decodes and for its chunks that end a prompt:
	// at most its sequences, the replica's logits dealt evenly.
	out.Logits = min(ceilDiv(sh.Logits, n), out.Decode+len(out.Chunks))
	return out
}

// runMachine is the machine a probe runs on: the run's shared one, whose
// clock goes on from run to run (its routes cached, its links idle again
// after each run), unless a fault strikes after time 0, which needs a
// fresh clock.
func runMachine(shared *exec.Machine, faults net.FaultPlan, seed uint64) (*exec.Machine, error) {
	if !shared.Timed {
		return shared, nil
	}
	return exec.NewMachine(shared.Fabric.Topology(), shared.GPU, faults, seed)
}

// timeRun runs a plan on m and returns its duration from the clock's time
// before it.
func timeRun(m *exec.Machine, pl *workload.Plan, opt exec.Options) (float64, error) {
	start := m.Fabric.Kernel().Now()
	res, err := exec.Run(context.Background(), pl, opt)
	if err != nil {
		return 0, err
	}
	return (res.End - start).Seconds(), nil
}

func (p *Pricer) commTime(kind model.Kind, bytes float64, stage int, p2p bool) (float64, error) {
	k := commKey{kind, bytes, stage, p2p}
	if v, ok := p.comm[k]; ok {
		return v, nil
	}
	v, err := p.probe(kind, bytes, stage, p2p)
	if err != nil {
		return 0, err
	}
	p.comm[k] = v
	return v, nil
}

// BucketTokens is the token count dense(T) is priced at: T itself up to
// 1,024, above it T rounded up to a multiple of 2^(⌊log2 T⌋−7) (128 steps
// per octave).
func BucketTokens(t int) int {
	if t <= 1024 {
		return t
	}
	step := 1 << (bitsLen(t) - 1 - 7)
	return (t + step - 1) / step * step
}

// BucketKV is the cache length attention is priced at: n itself up to 256,
// above it rounded up to a multiple of 2^(⌊log2 n⌋−5) (32 per octave).
func BucketKV(n int) int {
	if n <= 256 {
		return n
	}
	step := 1 << (bitsLen(n) - 1 - 5)
	return (n + step - 1) / step * step
}

func (p *Pricer) bucketKV(n int) int {
	if p.exact {
		return n
	}
	return BucketKV(n)
}

func bitsLen(x int) int {
	n := 0
	for x > 0 {
		n++
		x >>= 1
	}
	return n
}

// op is an operator's kernels as the host issues them on a stage computing
// at slow times a healthy GPU's pace.
func (p *Pricer) op(o model.Op, graph bool, slow float64) (exec.Issue, error) {
	c, err := p.ev.Op(o)
	if err != nil {
		return exec.Issue{}, err
	}
	k := exec.KernelOf(p.gpu, c)
	k.DeviceS *= slow
	return p.host.KernelIssue(o, k, graph, false), nil
}

// coll is a collective or transfer taking devS, as the host issues it.
func (p *Pricer) coll(devS float64, graph bool) exec.Issue {
	return p.host.CommIssue(devS, graph, false)
}

// Dense is every operator of a pass over t tokens but the attention core
// and the logits, stage by stage: each stage's receive of the previous
// stage's activations, its blocks and their TP collectives, one after
// another on one stream as the stage's host issues them (graph: replayed
// from a captured CUDA graph); a stage's kernels run at its straggler
// factor.
func (p *Pricer) Dense(t int, graph, decode bool) ([]exec.Issue, error) {
	if !p.exact {
		t = BucketTokens(t)
	}
	key := p.denseKey(t, graph, decode)
	if v, ok := p.dense[key]; ok {
		return v, nil
	}
	g, err := model.Build(p.cfg, p.run(1, t))
	if err != nil {
		return nil, err
	}
	blockTime := map[int]exec.Issue{}
	blockComm := map[int]float64{}
	stages := make([]exec.Issue, len(p.stages))
	comm := 0.0
	e := max(p.dtype.Bytes(), 2)
	act := float64(t*p.cfg.Hidden) * e
	for s, pos := range p.stages {
		total := &stages[s]
		if s > 0 {
			// The previous stage's activations: each TP rank sends its 1/t
			// share, the receivers all-gather them (workload's pipeline).
			msg := act
			if p.tp > 1 {
				msg = act / float64(p.tp)
			}
			c, err := p.commTime(workload.SendRecv, msg, s, true)
			if err != nil {
				return nil, err
			}
			*total = total.Then(p.coll(c, graph))
			comm += c
			if p.tp > 1 {
				c, err := p.commTime(model.AllGather, act, s, false)
				if err != nil {
					return nil, err
				}
				*total = total.Then(p.coll(c, graph))
				comm += c
			}
		}
		for _, i := range pos {
			bi := g.Order[i]
			if v, ok := blockTime[bi*p.pp+s]; ok {
				*total = total.Then(v)
				comm += blockComm[bi*p.pp+s]
				continue
			}
			var v exec.Issue
			vc := 0.0
			for _, o := range g.Blocks[bi].Forward {
				switch {
				case o.Kind == model.FlashAttention, o.Name == model.OpLogits, o.Name == model.OpLogitsGather:
					continue
				case o.Kind == model.AllToAll && p.ep <= 1:
					// A mixture-of-experts dispatch and combine over an
					// expert-parallel group of one replica: nothing moves
					// (as workload's plan leaves them out without EP).
					continue
				case o.Kind == model.AllToAll:
					c, err := p.a2aTime(o.Bytes, o.Return, decode)
					if err != nil {
						return nil, err
					}
					v = v.Then(p.coll(c, graph))
					vc += c
				case o.IsComm():
					c, err := p.commTime(o.Kind, o.Bytes, s, false)
					if err != nil {
						return nil, err
					}
					v = v.Then(p.coll(c, graph))
					vc += c
				default:
					c, err := p.op(o, graph, p.slow[s])
					if err != nil {
						return nil, err
					}
					v = v.Then(c)
				}
			}
			blockTime[bi*p.pp+s] = v
			blockComm[bi*p.pp+s] = vc
			*total = total.Then(v)
			comm += vc
		}
	}
	p.dense[key] = stages
	p.denseComm[key] = comm
	return stages, nil
}

// Head is the logits GEMM for n sequences (and its TP all-gather) on the
// last stage.
func (p *Pricer) Head(n int, graph bool) (exec.Issue, error) {
	key := partKey{n, graph}
	if v, ok := p.head[key]; ok {
		return v, nil
	}
	g, err := model.Build(p.cfg, p.run(n, 1))
	if err != nil {
		return exec.Issue{}, err
	}
	b, _ := g.Block(model.BlockLMHead)
	s := p.pp - 1
	var v exec.Issue
	for _, o := range b.Forward {
		switch o.Name {
		case "head.logits":
			c, err := p.op(o, graph, p.slow[s])
			if err != nil {
				return exec.Issue{}, err
			}
			v = v.Then(c)
		case "head.logits.all_gather":
			c, err := p.commTime(o.Kind, o.Bytes, s, false)
			if err != nil {
				return exec.Issue{}, err
			}
			v = v.Then(p.coll(c, graph))
		}
	}
	p.head[key] = v
	return v, nil
}

// preKey memoizes a prefill chunk's attention: its queries, its context
// (bucketed) and the layer's local attention.
type preKey struct {
	query, kv int
	local     model.Local
}

// decKey memoizes a decode attention: sequences, context (bucketed),
// queries a sequence and the layer's local attention.
type decKey struct {
	seqs, kv, queries int
	local             model.Local
}

// attention is one layer's attention kernel for the shape, with local
// attention l (zero: full): device time of each chunk's FlashAttention and
// of the decode attention, issued once, and the kernels that launches (two
// when the decode attention splits the cache and combines the pieces).
func (p *Pricer) attention(sh *Shape, l model.Local) (float64, int, error) {
	dev := 0.0
	for _, c := range sh.Chunks {
		kv := p.bucketKV(c.Context + c.Query)
		k := preKey{c.Query, kv, l}
		v, ok := p.pre[k]
		if !ok {
			o := model.NewLocalFlashAttention("attn.flash", p.dtype, 1, p.hs, p.kvs, int64(c.Query), int64(max(kv, c.Query)), p.hd, true, l)
			o.SyncMMA = p.flash2
			cost, err := p.ev.Op(o)
			if err != nil {
				return 0, 0, err
			}
			v = cost.TimeS
			p.pre[k] = v
		}
		dev += v
	}
	kernels := 1
	for _, d := range [...][3]int{{sh.Decode, sh.DecodeKV, 1}, {sh.Verify, sh.VerifyKV, sh.VerifyQuery}} {
		if d[0] == 0 {
			continue
		}
		c, err := p.decode(d[0], d[1], d[2], l)
		if err != nil {
			return 0, 0, err
		}
		dev += c.TimeS
		kernels = max(kernels, c.Kernels)
	}
	return dev, kernels, nil
}

// decode is the decode attention of seqs sequences of queries query tokens
// each against kv cached tokens on average. A verification's drafts (queries
// > 1) attend as further query heads sharing each KV head, as
// FlashAttention packs a GQA group's queries into the rows of one tile: the
// cache is read once a sequence, the math grows with the queries. With a
// sliding window each query reads the last window of the cache (the
// average context stands for every sequence's, as it does without one);
// with chunks, a context within the first chunk is read whole, and past it
// a query reads half a chunk, the mean over the positions in a chunk of
// sequences that each stand at their own.
func (p *Pricer) decode(seqs, kv, queries int, l model.Local) (compute.Cost, error) {
	k := decKey{seqs, p.bucketKV(kv), queries, l}
	if c, ok := p.dec[k]; ok {
		return c, nil
	}
	heads := p.hs * int64(queries)
	// The queries sit at positions kv … kv+queries−1 and read the keys
	// from the first one's first on.
	keys := l.Keys(int64(k.kv)) + int64(queries) - 1
	if l.Chunk > 0 && int64(k.kv+queries) > l.Chunk {
		keys = l.Chunk/2 + int64(queries)
	}
	o := model.NewDecodeAttention("attn.decode", p.dtype, p.kvBytes, int64(seqs), heads, p.kvs, keys, p.hd)
	o.XQA = p.xqaDecode
	if p.cfg.IsMLA() {
		o = model.MLADecodeAttention(p.cfg, p.dtype, p.kvBytes, int64(seqs), heads, int64(k.kv)+int64(queries))
	}
	c, err := p.ev.Op(o)
	if err != nil {
		return c, err
	}
	p.dec[k] = c
	return c, nil
}

// Iteration is the time of one engine iteration of the shape from its
// start on the first stage to its logits on the last: the sum of Stages.
func (p *Pricer) Iteration(sh *Shape) (float64, error) {
	st, err := p.Stages(sh, nil)
	total := 0.0
	for _, d := range st {
		total += d
	}
	return total, err
}

// Stages appends to out each stage's time for the shape: its dense
// operators, then its attention kernels (one per layer), then, on the last,
// the logits, as one stream its host issues; a decode-only iteration
// replays a captured CUDA graph on every stage when the host captures (one
// replay launch each), else every kernel is issued eagerly. The host reads
// the sampled tokens back before it schedules their sequences again.
func (p *Pricer) Stages(sh *Shape, out []float64) ([]float64, error) {
	out = out[:0]
	sh = p.rankShape(sh)
	if sh.Tokens <= 0 {
		return append(out, 0), nil
	}
	graph := p.graph(sh)
	dense, err := p.Dense(sh.Tokens, graph, len(sh.Chunks) == 0)
	if err != nil {
		return out, err
	}
	a, kernels, err := p.attention(sh, model.Local{})
	if err != nil {
		return out, err
	}
	aw, kernelsW, err := p.localAttention(sh, a, kernels)
	if err != nil {
		return out, err
	}
	attn := model.Op{Name: "attn", Kind: model.FlashAttention, Pass: model.Forward}
	for s, n := range p.attnLayers {
		var x exec.Issue
		if graph {
			x = exec.Issue{HostS: exec.GraphLaunchS, EndS: exec.GraphLaunchS}
		}
		x = x.Then(dense[s])
		one := p.host.KernelIssue(attn, exec.Kernel{DeviceS: a * p.slow[s], Kernels: kernels}, graph, false)
		oneW := p.host.KernelIssue(attn, exec.Kernel{DeviceS: aw * p.slow[s], Kernels: kernelsW}, graph, false)
		for i := 0; i < n; i++ {
			if i < p.localLayers[s] {
				x = x.Then(oneW)
			} else {
				x = x.Then(one)
			}
		}
		if s == p.pp-1 && sh.Logits > 0 {
			h, err := p.Head(sh.Logits, graph)
			if err != nil {
				return out, err
			}
			x = x.Then(h)
		}
		out = append(out, x.EndS)
	}
	return out, nil
}

// localAttention is attention's time and kernels for a layer with the
// model's local attention; a and kernels (the full layer's) without one.
func (p *Pricer) localAttention(sh *Shape, a float64, kernels int) (float64, int, error) {
	if !p.local.On() {
		return a, kernels, nil
	}
	return p.attention(sh, p.local)
}

func (p *Pricer) graph(sh *Shape) bool {
	return p.host.Mode == exec.CUDAGraphs && len(sh.Chunks) == 0
}

// Breakdown splits an iteration's time into the dense operators' compute
// (with the host's issue time it exposes), the TP collectives and pipeline
// transfers, the attention kernels and the logits (they sum to Iteration).
func (p *Pricer) Breakdown(sh *Shape) (compute, comm, attention, head float64, err error) {
	total, err := p.Iteration(sh)
	sh = p.rankShape(sh)
	if err != nil || sh.Tokens <= 0 {
		return 0, 0, 0, 0, err
	}
	t := sh.Tokens
	if !p.exact {
		t = BucketTokens(t)
	}
	graph := p.graph(sh)
	comm = p.denseComm[p.denseKey(t, graph, len(sh.Chunks) == 0)]
	a, kernels, err := p.attention(sh, model.Local{})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	aw, _, err := p.localAttention(sh, a, kernels)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	for s, n := range p.attnLayers {
		w := p.localLayers[s]
		attention += (float64(n-w)*a + float64(w)*aw) * p.slow[s]
	}
	if sh.Logits > 0 {
		head = p.head[partKey{sh.Logits, graph}].DeviceS
	}
	compute = total - comm - attention - head
	return compute, comm, attention, head, nil
}

// Transfer is the time to move bytes from every rank of replica a's stage
// to the same rank of replica b's (the KV cache of disaggregated serving:
// each GPU holds its share of the heads and layers), all ranks at once.
func Transfer(shared *exec.Machine, faults net.FaultPlan, seed uint64, tp, pp, a, b int, bytesPerRank float64) (float64, error) {
	m, err := runMachine(shared, faults, seed)
	if err != nil {
		return 0, err
	}
	t := m.Fabric.Topology()
	ra, rb := ReplicaRanks(tp, pp, a), ReplicaRanks(tp, pp, b)
	g := workload.Group{Units: []int{0, 1}}
	for s := range ra {
		for k := range ra[s] {
			g.Comms = append(g.Comms, []int{ra[s][k], rb[s][k]})
		}
	}
	flat := func(rs [][]int) []int {
		var o []int
		for _, x := range rs {
			o = append(o, x...)
		}
		return o
	}
	u := func(rs []int, prog int, slot workload.Slot) workload.Unit {
		x := workload.NewUnit(rs, prog)
		x.Groups[slot] = 0
		return x
	}
	pl := &workload.Plan{Ranks: t.NumRanks(),
		Units:  []workload.Unit{u(flat(ra), 0, workload.SlotFwdOut), u(flat(rb), 1, workload.SlotFwdIn)},
		Groups: []workload.Group{g},
		Programs: []workload.Program{
			{Name: "send", Tasks: []workload.Task{{Name: "kv.send", Kind: workload.Send, Stream: workload.StreamPP,
				Coll: workload.SendRecv, Bytes: bytesPerRank, Slot: workload.SlotFwdOut}}},
			{Name: "recv", Tasks: []workload.Task{{Name: "kv.recv", Kind: workload.Recv, Stream: workload.StreamPP,
				Coll: workload.SendRecv, Bytes: bytesPerRank, Slot: workload.SlotFwdIn}}}},
		Replicas: [][]int{{0, 1}}}
	return timeRun(m, pl, m.Options(true))
}

// KVBytesPerToken is the KV cache one token takes on one GPU of stage s
// (workload's memory model: 2 · kv heads per rank · head dim · bytes, per
// attention layer of the stage).
func (p *Pricer) KVBytesPerToken(s int) float64 {
	return float64(p.attnLayers[s]) * model.KVBytesPerTokenLayer(p.cfg, p.tp, p.kvBytes)
}

// LocalKVBytesPerToken is the part of KVBytesPerToken(s) held by the
// stage's local-attention layers, which keep only their window's or
// chunk's tokens.
func (p *Pricer) LocalKVBytesPerToken(s int) float64 {
	return float64(p.localLayers[s]) * model.KVBytesPerTokenLayer(p.cfg, p.tp, p.kvBytes)
}

// StageWeightsBytes is the weights one GPU of stage s holds, and
// ActivationBytes the largest operator's tensors of a pass over t tokens
// (workload's memory model).
func (p *Pricer) StageMemory(s, t int) (weights, activations float64, err error) {
	g, err := model.Build(p.cfg, p.run(1, t))
	if err != nil {
		return 0, 0, err
	}
	seen := map[int]bool{}
	for _, i := range p.stages[s] {
		b := g.Blocks[g.Order[i]]
		own, shared := model.WeightBytes(b, p.dtype, p.weightDType)
		weights += own
		if !seen[g.Order[i]] {
			seen[g.Order[i]] = true
			weights += shared
		}
		for _, o := range b.Forward {
			if !o.IsComm() {
				activations = math.Max(activations, o.Bytes)
			}
		}
	}
	return weights, activations, nil
}

// Signature identifies replicas that price alike: each stage's straggler
// factor and the time of a 1 MiB all-reduce on it (and of a 1 MiB pipeline
// transfer into it), which a degraded link on the replica's routes changes.
// Replicas of equal signature share one pricer, as exec mirrors healthy
// replicas.
func (p *Pricer) Signature() ([]float64, error) {
	var sig []float64
	for s := range p.stages {
		sig = append(sig, p.slow[s])
		if p.tp > 1 {
			c, err := p.commTime(model.AllReduce, 1<<20, s, false)
			if err != nil {
				return nil, err
			}
			sig = append(sig, c)
		}
		if s > 0 {
			c, err := p.commTime(workload.SendRecv, 1<<20, s, true)
			if err != nil {
				return nil, err
			}
			sig = append(sig, c)
		}
	}
	return sig, nil
}
