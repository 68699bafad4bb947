package workload

import (
	"fmt"
	"math"
	"sort"

	"github.com/eidolon-sim/eidolon/core/problem"

	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/rng"
)

// Expert parallelism, as Megatron-Core lays it out: the expert layers fold
// their own groups over a stage's TP·DP ranks, expert TP fastest, then EP,
// then expert data parallelism (expertGroups). Each EP rank holds
// experts/EP routed experts of every MoE block, and the dense weights as
// before. With expert TP = TP (Megatron-Core's default
// expert_tensor_parallel_size = tensor_model_parallel_size) the EP ranks of
// a group are EP consecutive replicas at one TP index, experts are split
// like a dense MLP over the TP group, whose ranks all-gather the tokens they
// received before the expert GEMMs and reduce-scatter after. With expert
// TP = 1 (--expert-tensor-parallel-size 1) every TP rank is its own EP rank
// holding whole experts and dispatching its own sequence shard: a group
// spans EP/TP replicas and no TP collective runs in the MoE layer. Dense
// gradients are reduced over the data-parallel group; expert gradients
// over the expert-data-parallel group (the ranks holding the same experts),
// and ZeRO shards expert optimizer state over it.
//
// The dispatch and combine are all-to-all-v collectives over the EP group
// (one per TP index, each carrying that rank's sequence shard) whose
// per-pair sizes come from the routing; they sit on the critical path
// between the router and the experts, as Megatron-Core's all-to-all token
// dispatcher runs them (no overlap of dispatch or combine with compute;
// shared experts not overlapped, moe_shared_expert_overlap = false).

// Routing distributions.
const (
	// RouteBalanced gives every expert exactly its share T·k/E of each
	// rank's tokens: the ideal an auxiliary-loss-free or auxiliary-loss
	// balancer approaches.
	RouteBalanced = "balanced"
	// RouteUniform draws each token's k distinct experts uniformly (seeded):
	// balanced in expectation, with multinomial noise.
	RouteUniform = "uniform"
	// RouteZipf draws each token's experts with popularity ∝ 1/(rank+1)^Skew
	// over a seeded permutation of the experts.
	RouteZipf = "zipf"
	// RouteTable draws with popularity ∝ Loads[e].
	RouteTable = "table"
)

// RouteDistributions lists them.
var RouteDistributions = []string{RouteBalanced, RouteUniform, RouteZipf, RouteTable}

// Routing is how tokens are assigned to experts in a step: one draw per
// step, used by every MoE block and micro-batch (the all-to-alls
// synchronize the EP group at every block, so each block's pace is its own
// draw's most loaded rank; reusing one draw keeps that expectation), and
// the same for every expert-parallel group.
type Routing struct {
	Distribution string
	// Skew is the Zipf exponent (RouteZipf).
	Skew float64
	// Loads is each expert's relative load (RouteTable), len = experts.
	Loads []float64
	// Seed of the draw.
	Seed uint64
	// CapacityFactor caps each expert at ceil(CapacityFactor·T·k/E) tokens
	// from each rank (Megatron-Core moe_expert_capacity_factor, computed on
	// the rank's local tokens); tokens over it are dropped. 0 is dropless.
	CapacityFactor float64
	// PadToCapacity pads every expert's tokens up to the capacity
	// (moe_pad_expert_input_to_capacity).
	PadToCapacity bool
	// HierarchicalA2A sends the dispatch and combine in two hops across
	// nodes (net.AllToAllV.Hierarchical), each token once per node.
	HierarchicalA2A bool
	// NodeLimit is the most nodes a token's experts lie on (DeepSeek-V3's
	// node-limited routing, M = 4; 0: no limit): with HierarchicalA2A it
	// sets how many nodes each token crosses the network to. It does not
	// change which experts the draw picks.
	NodeLimit int
}

// CheckRouting returns the problems of a routing for a model (fields
// relative to the routing spec).
func CheckRouting(r Routing, c model.Config) []problem.Problem {
	var ps []problem.Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, problem.Problem{Path: field, Message: fmt.Sprintf(format, args...)})
	}
	switch r.Distribution {
	case "", RouteBalanced, RouteUniform:
	case RouteZipf:
		if !(r.Skew >= 0) {
			bad("skew", "must be >= 0, got %v", r.Skew)
		}
	case RouteTable:
		if len(r.Loads) != c.Experts {
			bad("loads", "must list one load per expert (%d), got %d", c.Experts, len(r.Loads))
		}
		sum := 0.0
		for i, l := range r.Loads {
			if !(l >= 0) {
				bad("loads", "entry %d must be >= 0, got %v", i, l)
			}
			sum += l
		}
		if len(r.Loads) > 0 && !(sum > 0) {
			bad("loads", "must not be all zero")
		}
	default:
		bad("distribution", "must be one of balanced, uniform, zipf, table, got %q", r.Distribution)
	}
	if !(r.CapacityFactor >= 0) {
		bad("capacity_factor", "must be >= 0 (0 = dropless), got %v", r.CapacityFactor)
	}
	if r.NodeLimit < 0 {
		bad("node_limit", "must be >= 0 (0 = no limit), got %d", r.NodeLimit)
	}
	if r.PadToCapacity && r.CapacityFactor == 0 {
		bad("pad_to_capacity", "needs a capacity_factor > 0")
	}
	return ps
}

// Assignment is one step's routing over an expert-parallel group.
type Assignment struct {
	EP, Experts int
	// Tokens[s·EP+d] is the routed (token, expert) slots EP rank s sends to
	// EP rank d per micro-batch (unit level: all of its TP ranks together),
	// after capacity drops and padding.
	Tokens []float64
	// ExpertTokens[d] is the tokens each local expert of rank d processes.
	ExpertTokens [][]int64
	// Dropped is the fraction of routed slots dropped over capacity;
	// Padded the fraction of processed slots that are padding.
	Dropped, Padded float64
	// Slots is the routed slots each rank drew (tokens·k).
	Slots float64
}

// Balanced reports whether every rank has the same work.
func (a *Assignment) Balanced() bool {
	for d := 1; d < a.EP; d++ {
		for i, n := range a.ExpertTokens[d] {
			if n != a.ExpertTokens[0][i] {
				return false
			}
		}
	}
	for i := range a.Tokens {
		s, d := i/a.EP, i%a.EP
		if a.Tokens[i] != a.Tokens[((s+1)%a.EP)*a.EP+(d+1)%a.EP] {
			return false
		}
	}
	return true
}

// MaxLoad is the most loaded rank's expert tokens over the mean.
func (a *Assignment) MaxLoad() float64 {
	var worst, sum float64
	for _, ex := range a.ExpertTokens {
		var n float64
		for _, v := range ex {
			n += float64(v)
		}
		worst = max(worst, n)
		sum += n
	}
	if sum == 0 {
		return 1
	}
	return worst / (sum / float64(len(a.ExpertTokens)))
}

// unitLoad is the expert tokens of unit k, which holds EP ranks k·f …
// k·f+f−1 (f = TP/ExpertTP): its TP ranks run in lockstep, so the unit
// runs at the pace of its most loaded EP rank.
func (a *Assignment) unitLoad(k, f int) []int64 {
	best, most := k*f, int64(-1)
	for d := k * f; d < (k+1)*f; d++ {
		var n int64
		for _, v := range a.ExpertTokens[d] {
			n += v
		}
		if n > most {
			best, most = d, n
		}
	}
	return a.ExpertTokens[best]
}

// Route draws an assignment: each of ep ranks routes tokens tokens
// (unit level) to k of the model's experts.
func Route(r Routing, c model.Config, ep int, tokens int64) *Assignment {
	E, k := c.Experts, c.ExpertsPerToken
	loc := E / ep
	counts := make([][]int64, ep) // source rank -> expert -> slots
	mean := float64(tokens) * float64(k) / float64(E)
	switch r.Distribution {
	case "", RouteBalanced:
		total := tokens * int64(k)
		for s := range counts {
			counts[s] = make([]int64, E)
			for e := range counts[s] {
				// Spread the remainder evenly over the experts, rotated by rank.
				counts[s][e] = total / int64(E)
				if int64((e+s)%E) < total%int64(E) {
					counts[s][e]++
				}
			}
		}
	default:
		p := popularity(r, E)
		cum := make([]float64, E)
		acc := 0.0
		for e, v := range p {
			acc += v
			cum[e] = acc
		}
		g := rng.Stream(r.Seed, "moe.routing")
		picked := make([]bool, E)
		chosen := make([]int, 0, k)
		for s := range counts {
			counts[s] = make([]int64, E)
			for t := int64(0); t < tokens; t++ {
				chosen = chosen[:0]
				for len(chosen) < k {
					e := sort.SearchFloat64s(cum, g.Float64()*acc)
					if e >= E {
						e = E - 1
					}
					if picked[e] {
						continue
					}
					picked[e] = true
					chosen = append(chosen, e)
				}
				for _, e := range chosen {
					picked[e] = false
					counts[s][e]++
				}
			}
		}
	}
	a := &Assignment{EP: ep, Experts: E, Tokens: make([]float64, ep*ep), ExpertTokens: make([][]int64, ep), Slots: float64(tokens) * float64(k)}
	for d := range a.ExpertTokens {
		a.ExpertTokens[d] = make([]int64, loc)
	}
	var routed, dropped, processed, padded float64
	capacity := int64(math.Ceil(r.CapacityFactor * mean))
	for s := range counts {
		for e, n := range counts[s] {
			routed += float64(n)
			if r.CapacityFactor > 0 {
				if n > capacity {
					dropped += float64(n - capacity)
					n = capacity
				}
				if r.PadToCapacity {
					padded += float64(capacity - n)
					n = capacity
				}
			}
			processed += float64(n)
			d := e / loc
			a.Tokens[s*ep+d] += float64(n)
			a.ExpertTokens[d][e%loc] += n
		}
	}
	if routed > 0 {
		a.Dropped = dropped / routed
	}
	if processed > 0 {
		a.Padded = padded / processed
	}
	return a
}

// popularity is the routing's per-expert probability (normalized).
func popularity(r Routing, E int) []float64 {
	p := make([]float64, E)
	switch r.Distribution {
	case RouteZipf:
		perm := rng.Stream(r.Seed, "moe.popularity").Perm(E)
		for i, e := range perm {
			p[e] = math.Pow(float64(i+1), -r.Skew)
		}
	case RouteTable:
		copy(p, r.Loads)
	default:
		for e := range p {
			p[e] = 1
		}
	}
	var s float64
	for _, v := range p {
		s += v
	}
	for e := range p {
		p[e] /= s
	}
	return p
}

// a2aCache sizes one TP index's all-to-all for an op: the op's routed
// slots (o.M, this TP rank's) times the share of the draw's slots each
// pair carries (after drops and padding), times the op's bytes per slot;
// Return transposes (experts' ranks send back to the tokens' ranks).
// Matrices are shared by every task with the same direction and size.
type a2aCache struct {
	a     *Assignment
	mats  map[[3]uint64]int32
	pairs [][]float64
}

func (c *a2aCache) matrix(o model.Op) ([]float64, int32) {
	per := 0.0
	if o.M > 0 {
		per = o.Bytes / float64(o.M)
	}
	key := [3]uint64{math.Float64bits(per), 0, uint64(o.M)}
	if o.Return {
		key[1] = 1
	}
	if id, ok := c.mats[key]; ok {
		return c.pairs[id], id
	}
	n := c.a.EP
	m := make([]float64, n*n)
	for s := 0; s < n; s++ {
		for d := 0; d < n; d++ {
			v := c.a.Tokens[s*n+d] / c.a.Slots * float64(o.M) * per
			if o.Return {
				m[d*n+s] = v
			} else {
				m[s*n+d] = v
			}
		}
	}
	id := int32(len(c.pairs))
	c.pairs = append(c.pairs, m)
	c.mats[key] = id
	return m, id
}

// allToAll appends an expert-parallel all-to-all-v for a model op.
func (b *progBuilder) allToAll(name string, o model.Op, mb int32, after ...int32) int32 {
	pairs, id := b.a2a.matrix(o)
	tag := b.tags[SlotEP]
	b.tags[SlotEP]++
	var total float64
	for _, v := range pairs {
		total += v
	}
	ll := NoLowLatency
	if b.lowLatency {
		ll = LowLatencyFor(o.Return)
	}
	return b.add(Task{Name: name, Kind: Collective, Stream: StreamEP, Coll: AllToAllV, Bytes: total, Slot: SlotEP,
		Tag: tag, Deps: deps(after...), MicroBatch: mb, Pairs: pairs, PairsID: id, Hierarchical: b.hierarchical,
		TopK: b.topK, NodeLimit: b.limit, LowLatency: ll})
}

// expertGroups adds, per stage, the expert-parallel groups and the
// expert-data-parallel groups. Megatron-Core folds the expert layers'
// groups over the stage's ranks in (tp, dp) order, expert TP fastest, then
// EP, then expert DP: an EP group is EP·ExpertTP/TP consecutive replicas,
// with one communicator per expert-TP index holding, replica by replica,
// the TP ranks of that index (with ExpertTP = TP: one communicator per TP
// index over the replicas; with ExpertTP = 1: one over all their ranks).
// The expert-data-parallel groups are the replicas with the same position
// in their EP group, one communicator per TP index.
func (t Training) expertGroups(pl *Plan, unit func(dp, pp int) int) {
	par := t.Par
	P, D, T, etp, EPu := par.PP, par.DP, par.TP, par.expertTP(), par.epReplicas()
	for pp := 0; pp < P; pp++ {
		for g0 := 0; g0 < D; g0 += EPu {
			grp := Group{}
			for dp := g0; dp < g0+EPu; dp++ {
				grp.Units = append(grp.Units, unit(dp, pp))
			}
			for j := 0; j < etp; j++ {
				var ranks []int
				for dp := g0; dp < g0+EPu; dp++ {
					for k := j; k < T; k += etp {
						ranks = append(ranks, par.Rank(k, dp, pp))
					}
				}
				grp.Comms = append(grp.Comms, ranks)
			}
			pl.Groups = append(pl.Groups, grp)
			for _, u := range grp.Units {
				pl.Units[u].Groups[SlotEP] = len(pl.Groups) - 1
			}
		}
		if D/EPu < 2 {
			continue
		}
		for k0 := 0; k0 < EPu; k0++ {
			pl.replicaGroup(span(k0, D, EPu), T, SlotEDP, func(dp int) int { return unit(dp, pp) },
				func(k, dp int) int { return par.Rank(k, dp, pp) })
		}
	}
}

// span is from, from+step, ... below to.
func span(from, to, step int) []int {
	var out []int
	for i := from; i < to; i += step {
		out = append(out, i)
	}
	return out
}

// expertMemory shards expert optimizer state (ZeRO ≥ 1), gradients
// (ZeRO ≥ 2) and weights (ZeRO 3) over the expert-data-parallel group
// instead of the DP group.
func (t Training) expertMemory(mem *Memory, dense, expert int64, gradBytes, e float64) {
	if expert == 0 {
		return
	}
	D := float64(t.Par.DP)
	EDP := D / float64(t.Par.epReplicas())
	shard := float64(dense)/D + float64(expert)/EDP
	if t.Par.ZeRO >= 1 {
		mem.Optimizer = shard * optimizerBytes(t.DType)
	}
	if t.Par.ZeRO >= 2 {
		mem.Gradients = shard * gradBytes
	}
	if t.Par.ZeRO == 3 {
		mem.Weights += float64(expert) * e * (1/EDP - 1/D)
	}
}

// opTensors is an operator's bytes for the workspace: its compulsory
// traffic, except that a grouped GEMM's expert weights and a decode
// attention's cache (already counted as weights and KV cache) are left
// out: their token tensors only (a decode attention's queries and output).
func opTensors(o model.Op) float64 {
	e := max(o.DType.Bytes(), 2)
	switch o.Kind {
	case model.GroupedGEMM:
		return float64(o.M) * float64(o.K+o.N) * e
	case model.DecodeAttention:
		return 2 * float64(o.Batch*o.Heads*o.HeadDim) * e
	}
	return o.Bytes
}

// epFlag is a run option that acts on the expert-parallel all-to-alls.
type epFlag struct {
	name string
	on   bool
}

// needWideEP is a problem for each flag set where there are no
// expert-parallel all-to-alls to act on (no mixture-of-experts model, or
// ep below 2): it would be ignored silently.
func needWideEP(moe bool, ep int, flags ...epFlag) []problem.Problem {
	var ps []problem.Problem
	for _, f := range flags {
		if f.on && (!moe || ep < 2) {
			ps = append(ps, problem.Problem{Path: f.name, Message: fmt.Sprintf(
				"acts on the expert-parallel all-to-alls: needs a mixture-of-experts model and ep >= 2, got ep %d", max(ep, 1))})
		}
	}
	return ps
}
