// Package parallelsearch is the "parallel_search" scenario kind: enumerate
// the parallel layouts of a model on a cluster for a global batch, say why
// each invalid or oversized one does not fit, simulate the others with the
// training scenario's executor, and rank them by step time.
//
// Two exact shortcuts keep it fast. A layout that fits with less
// recomputation (same tp, pp, ep, expert tp, micro-batch, ZeRO stage)
// dominates the same layout with more: recomputation only adds work. And
// with Keep = k, the layouts are simulated in order of a lower bound on the
// step (workload.Sizing.Bound: each stage's kernels and tensor-parallel
// collectives back to back with the pipeline's fill and drain, or its
// serial data-parallel stream; each collective at least what the executor
// gives it alone, ring.timeS: NCCL's latency beyond the hops' and the
// bytes over the protocol efficiency at the slowest hop); once k layouts
// have been simulated, one whose lower bound exceeds the k-th best step
// time cannot enter the top k and is reported as bounded. ZeRO-2 runs the
// same task graph as ZeRO-1 (only memory differs), so it takes ZeRO-1's
// time.
// Layouts are simulated on every core, ahead of these in-order decisions
// (see simulateAll); the table does not depend on the number of cores.
package parallelsearch

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Checked(scenario.Define("parallel_search",
		"enumerate (tp, pp, dp, cp, ep, expert_tp, micro-batch, recompute, zero) for a model, cluster and batch; rank by simulated step time, with why the others do not fit",
		run), func(s *spec.ParallelSearch) error {
		_, err := compile.Machine("", s.Cluster, s.GPU, spec.Faults{}, s.Seed) // the cluster and GPU compiled
		return err
	})
}

// Status of a layout.
const (
	Simulated  = "simulated"
	Bounded    = "bounded"
	Dominated  = "dominated"
	DoesNotFit = "does_not_fit"
	Invalid    = "invalid"
)

// ConfigRow is one layout ("configs" table), fastest first.
type ConfigRow struct {
	// Rank is 1 for the fastest simulated layout; null unless simulated.
	Rank *int `arrow:"rank"`
	TP   int  `arrow:"tp"`
	PP   int  `arrow:"pp"`
	DP   int  `arrow:"dp"`
	// CP is the context-parallel degree.
	CP         int `arrow:"cp"`
	MicroBatch int `arrow:"micro_batch"`
	// EP is the expert-parallel degree (1 for dense models).
	EP int `arrow:"ep"`
	// ExpertTP is the expert tensor-parallel degree: tp or 1 (tp for dense
	// models, which have no experts to split otherwise).
	ExpertTP         int    `arrow:"expert_tp"`
	Recompute        string `arrow:"recompute"`
	ZeRO             int    `arrow:"zero"`
	SequenceParallel bool   `arrow:"sequence_parallel"`
	// StepTimeS, TokensPerS, MFU of a simulated layout (null otherwise).
	StepTimeS  *float64 `arrow:"step_time_s"`
	TokensPerS *float64 `arrow:"tokens_per_s"`
	MFU        *float64 `arrow:"mfu"`
	// BoundS is a lower bound on the step (compute and tensor-parallel
	// collectives with the pipeline's fill and drain, or the data-parallel
	// stream; each collective at NCCL's latency and protocol efficiency at
	// the slowest hop), by which layouts are simulated in order (null where
	// not evaluated).
	BoundS *float64 `arrow:"bound_s"`
	// MemoryPeakBytes per GPU and whether it fits (null where not
	// evaluated: invalid and dominated layouts).
	MemoryPeakBytes *float64 `arrow:"memory_peak_bytes"`
	Fits            *bool    `arrow:"fits"`
	// Status: simulated, bounded, dominated, does_not_fit, invalid;
	// Reason explains every status but simulated.
	Status string `arrow:"status"`
	Reason string `arrow:"reason"`
}

type candidate struct {
	row ConfigRow
	tr  workload.Training
	lb  float64
}

// ring is what the bound needs of one communicator's ring, found once per
// communicator (layouts share them).
type ring struct {
	// perByte is the seconds per payload byte of one ring step sequence
	// (an all-gather's n-1 steps of bytes/n) at the slowest hop, on one of
	// the channels that each carry 1/channels of the bytes.
	perByte float64
	// hopS is the largest path latency between ring neighbours.
	hopS  float64
	n     int
	tuner *net.NCCLTuner
}

// rings memoizes ring by the communicator's ranks.
type rings struct {
	t     *topo.Topology
	byKey map[string]*ring
	key   []byte
}

func (rs *rings) get(ranks []int) (*ring, error) {
	rs.key = rs.key[:0]
	for _, r := range ranks {
		rs.key = binary.AppendUvarint(rs.key, uint64(r))
	}
	if r, ok := rs.byKey[string(rs.key)]; ok {
		return r, nil
	}
	t := rs.t
	r := &ring{n: len(ranks)}
	if r.n >= 2 {
		// The ring's bound is linear in the bytes, with twice the steps
		// for an all-reduce: find its slowest hop once per communicator.
		perByte, err := exec.RingTimeBound(t, model.AllGather, 1, ranks)
		if err != nil {
			return nil, err
		}
		// The executor's rings run as net's default channels (one per
		// rail across nodes), each carrying 1/channels of the bytes; the
		// bound holds per channel even if they share the slowest hop.
		r.perByte = perByte / float64(net.DefaultChannels(t, ranks))
		for i := range ranks {
			path, err := t.Route(t.RankDevice(ranks[i]), t.RankDevice(ranks[(i+1)%r.n]))
			if err != nil {
				return nil, err
			}
			lat := 0.0
			for _, l := range path {
				lat += t.Links[l].LatencyS
			}
			r.hopS = max(r.hopS, lat)
		}
		if r.tuner, err = net.NewNCCLTuner(t, ranks); err != nil {
			return nil, err
		}
	}
	if rs.byKey == nil {
		rs.byKey = map[string]*ring{}
	}
	rs.byKey[string(rs.key)] = r
	return r, nil
}

// timeS is a lower bound on the simulated time of collectives colls on
// the ring, as the executor runs them with NCCL's tuner on (exec.Options
// Protocol, the default algorithm): net's Comms.tune first waits for the
// part of the choice's latency that the ring's steps do not charge,
// max(0, LatencyS - steps·hop) with hop the slowest neighbour's path
// latency, then streams every step's bytes divided by the protocol
// efficiency min(1, BusBytesPerS/LinkBytesPerS), each channel at most at
// the slowest hop's capacity (and its steps' latencies, left out here).
func (r *ring) timeS(colls []workload.Coll) (float64, error) {
	if r.n < 2 {
		return 0, nil
	}
	var total float64
	for _, c := range colls {
		if !(c.Bytes > 0) {
			continue
		}
		steps := 1.0
		if c.Kind == model.AllReduce {
			steps = 2
		}
		ch, err := r.tuner.Choose(net.Op(c.Kind), c.Bytes)
		if err != nil {
			return 0, err
		}
		eff := 1.0
		if r.tuner.LinkBytesPerS > 0 {
			eff = min(1, ch.BusBytesPerS/r.tuner.LinkBytesPerS)
		}
		total += max(0, ch.LatencyS-steps*float64(r.n-1)*r.hopS) + steps*c.Bytes*r.perByte/eff
	}
	return total, nil
}

// bound is a lower bound on a layout's step time (workload.Sizing.Bound),
// each collective timed by ring.timeS.
func bound(tr workload.Training, sz *workload.Sizing, rs *rings) (float64, error) {
	par := tr.Par
	P := len(sz.Forward)
	tp, tail, dp := make([]float64, P), make([]float64, P), make([]float64, P)
	sum := func(colls []workload.Coll, ranks []int) (float64, error) {
		if len(colls) == 0 {
			return 0, nil
		}
		r, err := rs.get(ranks)
		if err != nil {
			return 0, err
		}
		return r.timeS(colls)
	}
	for s := 0; s < P; s++ {
		tpRanks := make([]int, par.TP)
		for k := range tpRanks {
			tpRanks[k] = par.Rank(k, 0, s)
		}
		dpRanks := make([]int, par.DP)
		for d := range dpRanks {
			dpRanks[d] = par.Rank(0, d, s)
		}
		var err error
		if tp[s], err = sum(sz.TP[s], tpRanks); err != nil {
			return 0, err
		}
		if tail[s], err = sum(sz.DPTail[s], dpRanks); err != nil {
			return 0, err
		}
		during, err := sum(sz.DPDuring[s], dpRanks)
		if err != nil {
			return 0, err
		}
		dp[s] = tail[s] + during
	}
	return sz.Bound(tp, tail, dp), nil
}

func run(env scenario.Env, s *spec.ParallelSearch) (scenario.Result, error) {
	m, err := compile.MachineContext(env.Context(), "", s.Cluster, s.GPU, spec.Faults{}, s.Seed)
	if err != nil {
		return scenario.Result{}, err
	}
	rows, cands, err := enumerate(env, s, m)
	if err != nil {
		return scenario.Result{}, err
	}
	cost := m.Cost
	// Simulate in order of the lower bound.
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].lb < cands[j].lb })
	sims, err := simulateAll(env, s, cands, cost, m.Kernel)
	if err != nil {
		return scenario.Result{}, err
	}
	for _, c := range sims {
		rows = append(rows, c.row)
	}
	return rank(rows), nil
}

// enumerate lists every layout: the rows that need no simulation (invalid,
// dominated, too big) and the candidates, each with its lower bound.
func enumerate(env scenario.Env, s *spec.ParallelSearch, m *exec.Machine) ([]ConfigRow, []*candidate, error) {
	gpus := m.Fabric.Topology().NumRanks()
	cfg, _ := s.Model.Resolve()
	hbm := float64(m.GPU.HBMBytes)
	cost := m.Cost // one evaluator for every layout: GEMM plans are memoized

	pps := s.PP
	if len(pps) == 0 {
		for p := 1; p <= gpus && p <= len(cfg.Pattern); p *= 2 {
			pps = append(pps, p)
		}
	}
	// Recomputation from least to most work, so dominance is found in order.
	var recomputes []string
	for _, rc := range []string{"none", "selective", "full"} {
		for _, want := range s.Recompute {
			if want == rc {
				recomputes = append(recomputes, rc)
				break
			}
		}
	}
	eps := s.EP
	if len(eps) == 0 {
		eps = []int{1}
		for e := 2; cfg.IsMoE() && e <= cfg.Experts && e <= gpus; e *= 2 {
			eps = append(eps, e)
		}
	}
	// Every (tp, pp, ep, expert tp, micro-batch, zero), in this nesting
	// order; each is tried with recomputation from least to most work.
	type shape struct{ tp, pp, cp, ep, etp, mb, zero int }
	var shapes []shape
	for _, tp := range s.TP {
		etps := expertTPs(s.ExpertTP, tp, cfg.IsMoE())
		for _, pp := range pps {
			for _, cp := range s.CP {
				for _, ep := range eps {
					for _, etp := range etps {
						for _, mb := range s.MicroBatch {
							for _, zero := range s.ZeRO {
								shapes = append(shapes, shape{tp, pp, cp, ep, etp, mb, zero})
							}
						}
					}
				}
			}
		}
	}
	var rows []ConfigRow
	var cands []*candidate
	rs := &rings{t: m.Fabric.Topology()}
	for _, d := range shapes {
		tp, pp, zero := d.tp, d.pp, d.zero
		fits := "" // the least recomputation that fits: it dominates the others
		for _, rc := range recomputes {
			if err := env.Canceled(); err != nil {
				return nil, nil, err
			}
			row := ConfigRow{TP: tp, PP: pp, CP: d.cp, EP: d.ep, ExpertTP: d.etp, MicroBatch: d.mb, Recompute: rc, ZeRO: zero,
				SequenceParallel: tp > 1 && !s.NoSequenceParallel}
			if gpus%(tp*d.cp*pp) != 0 {
				row.Status, row.Reason = Invalid, fmt.Sprintf("tp·cp·pp = %d does not divide the %d GPUs", tp*d.cp*pp, gpus)
				rows = append(rows, row)
				continue
			}
			row.DP = gpus / (tp * d.cp * pp)
			if zero > 0 && row.DP*d.cp == 1 {
				row.Status, row.Reason = Invalid, "ZeRO shards over data- and context-parallel ranks; dp·cp is 1"
				rows = append(rows, row)
				continue
			}
			if fits != "" {
				row.Status, row.Reason = Dominated, fmt.Sprintf("recompute %q fits with the same layout and does less work", fits)
				rows = append(rows, row)
				continue
			}
			tr := job.TrainingStep(cfg, s.DType, s.Step, workload.Parallel{TP: tp, PP: pp, DP: row.DP * d.cp, CP: d.cp, MicroBatch: d.mb, GlobalBatch: s.GlobalBatch,
				Schedule: workload.Schedule(s.Schedule), VirtualStages: 1, SequenceParallel: row.SequenceParallel,
				Recompute: model.Recompute(rc), ZeRO: zero, EP: d.ep, ExpertTP: d.etp,
				OverlapTPComm: true}) // as Megatron-LM runs (spec.Parallel.OverlapTPComm)
			if ps := tr.Check(); len(ps) > 0 {
				row.Status, row.Reason = Invalid, ps[0].Path+": "+ps[0].Message
				rows = append(rows, row)
				continue
			}
			sz, err := tr.Size(cost)
			if err != nil {
				return nil, nil, err
			}
			peak, stage := 0.0, 0
			for i, mem := range sz.Memory {
				if mem.Total() > peak {
					peak, stage = mem.Total(), i
				}
			}
			fit := peak <= hbm
			row.MemoryPeakBytes, row.Fits = &peak, &fit
			if !fit {
				mem := sz.Memory[stage]
				row.Status, row.Reason = DoesNotFit, fmt.Sprintf(
					"stage %d needs %.1f GiB > %.1f GiB (weights %.1f, gradients %.1f, optimizer %.1f, activations %.1f, workspace %.1f)",
					stage, peak/gib, hbm/gib, mem.Weights/gib, mem.Gradients/gib, mem.Optimizer/gib, mem.Activations/gib, mem.Workspace/gib)
				rows = append(rows, row)
				continue
			}
			fits = rc
			lb, err := bound(tr, sz, rs)
			if err != nil {
				return nil, nil, err
			}
			c := &candidate{row: row, tr: tr, lb: lb}
			c.row.BoundS = &lb
			cands = append(cands, c)
		}
	}

	return rows, cands, nil
}

// expertTPs lists the expert tensor-parallel degrees of the layouts with
// tensor-parallel degree tp: the spec's list (0 standing for tp), or tp and
// then 1 for a mixture-of-experts model (Megatron-Core allows no other;
// the training check judges each), each value once.
func expertTPs(list []int, tp int, moe bool) []int {
	if len(list) == 0 {
		list = []int{0}
		if moe {
			list = append(list, 1)
		}
	}
	var etps []int
	for _, v := range list {
		if v == 0 {
			v = tp
		}
		if !slices.Contains(etps, v) {
			etps = append(etps, v)
		}
	}
	return etps
}

// rank sorts the rows (simulated fastest first, then bounded by their bound,
// then the others) and numbers the simulated ones.
func rank(rows []ConfigRow) scenario.Result {
	order := map[string]int{Simulated: 0, Bounded: 1, Dominated: 2, DoesNotFit: 3, Invalid: 4}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if order[a.Status] != order[b.Status] {
			return order[a.Status] < order[b.Status]
		}
		if a.StepTimeS != nil && b.StepTimeS != nil {
			return *a.StepTimeS < *b.StepTimeS
		}
		if a.BoundS != nil && b.BoundS != nil {
			return *a.BoundS < *b.BoundS
		}
		return false
	})
	n := 0
	for i := range rows {
		if rows[i].Status == Simulated {
			n++
			r := n
			rows[i].Rank = &r
		}
	}
	var r scenario.Result
	r.Add("configs", rows)
	return r
}

const gib = 1 << 30

// graphKey names a layout's task graph: ZeRO-1 and ZeRO-2 run the same one
// (only memory differs), so they share a simulation.
func graphKey(r ConfigRow) string {
	z := r.ZeRO
	if z == 2 {
		z = 1
	}
	return fmt.Sprintf("%d/%d/%d/%d/%s/%d/%d/%d", r.TP, r.PP, r.CP, r.MicroBatch, r.Recompute, z, r.EP, r.ExpertTP)
}

// outcome is one candidate's simulation, run ahead of the decision.
type outcome struct {
	done      chan struct{}
	simulated bool
	step, mfu float64
	err       error
}

// simulateAll decides each candidate, in order of its lower bound, exactly
// as one pass would: with Keep = k, a candidate whose bound exceeds the
// k-th best step time of those before it is bounded; otherwise it is
// simulated (or takes the time of an earlier one with the same task
// graph). Simulations run on every core ahead of the decisions: a worker
// skips a candidate that the decisions so far already bound (more
// decisions only lower the k-th best) or whose graph an earlier one
// claimed, and a simulation whose candidate turns out bounded is dropped,
// so the table does not depend on the number of cores or on timing.
func simulateAll(env scenario.Env, s *spec.ParallelSearch, cands []*candidate, cost func(model.Op) (float64, error),
	kernel func(model.Op) (exec.Kernel, error)) ([]*candidate, error) {
	keep := *s.Keep
	ctx, cancel := context.WithCancel(env.Context())
	defer cancel()
	var mu sync.Mutex  // guards best, claimed, next and the evaluator behind cost
	var best []float64 // step times decided so far, sorted
	bounded := func(lb float64) bool { return keep > 0 && len(best) >= keep && lb > best[keep-1] }
	claimed := map[string]bool{}
	next := 0
	lockedCost := func(o model.Op) (float64, error) {
		mu.Lock()
		defer mu.Unlock()
		return cost(o)
	}
	lockedKernel := func(o model.Op) (exec.Kernel, error) {
		mu.Lock()
		defer mu.Unlock()
		return kernel(o)
	}
	outs := make([]outcome, len(cands))
	for i := range outs {
		outs[i].done = make(chan struct{})
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs first: workers stop simulating
	// A worker whose bookkeeping panics (simulations are guarded on their
	// own) reports it here, so the decisions below never wait for it.
	failed := make(chan struct{})
	var failOnce sync.Once
	var failErr error
	// One worker per core, up to the budget's count (spec.SearchWorkers).
	for range min(runtime.GOMAXPROCS(0), spec.SearchWorkers, len(cands)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var werr error
			defer func() {
				if werr != nil {
					failOnce.Do(func() { failErr = werr; close(failed) })
				}
			}()
			defer scenario.Recover(&werr)
			w := &worker{}
			for {
				mu.Lock()
				i := next
				next++
				if i >= len(cands) {
					mu.Unlock()
					return
				}
				c, o := cands[i], &outs[i]
				g := graphKey(c.row)
				skip := ctx.Err() != nil || bounded(c.lb) || claimed[g]
				claimed[g] = true
				mu.Unlock()
				if !skip {
					o.step, o.mfu, o.err = simulateGuarded(ctx, s, w, c, lockedCost, lockedKernel)
					o.simulated = true
				}
				close(o.done)
			}
		}()
	}

	same := map[string]*ConfigRow{}
	for i, c := range cands {
		select {
		case <-outs[i].done:
		case <-failed:
			return nil, failErr
		}
		if err := env.Canceled(); err != nil {
			return nil, err
		}
		mu.Lock()
		kth := math.Inf(1) // the k-th best step time decided so far
		if keep > 0 && len(best) >= keep {
			kth = best[keep-1]
		}
		mu.Unlock()
		cut := c.lb > kth // bounded(c.lb)
		env.Report(searchProgress(cands, i, kth))
		if cut {
			c.row.Status = Bounded
			c.row.Reason = fmt.Sprintf("its lower bound (%.3g s: compute with pipeline fill and drain, or data-parallel traffic at the slowest hop) exceeds the %d-th best step time (%.3g s)", c.lb, keep, kth)
			continue
		}
		g := graphKey(c.row)
		var step, mfu float64
		if prev, ok := same[g]; ok {
			step, mfu = *prev.StepTimeS, *prev.MFU
		} else {
			o := &outs[i]
			if o.err != nil {
				return nil, o.err
			}
			if !o.simulated {
				// A skipped candidate is bounded, or an earlier one with
				// its graph was simulated (see above).
				return nil, fmt.Errorf("parallel_search: layout %s was neither simulated nor bounded", g)
			}
			step, mfu = o.step, o.mfu
		}
		tps := float64(c.tr.Par.GlobalBatch*c.tr.SeqLen) / step
		c.row.StepTimeS, c.row.MFU, c.row.TokensPerS = &step, &mfu, &tps
		c.row.Status = Simulated
		row := c.row
		same[g] = &row
		mu.Lock()
		at := sort.SearchFloat64s(best, step)
		best = append(best, 0)
		copy(best[at+1:], best[at:])
		best[at] = step
		mu.Unlock()
	}
	env.Report(1)
	return cands, nil
}

// searchProgress is the share of the search done before candidate i is
// decided: i over i and the candidates from i on whose lower bound is still
// under the k-th best step time kth (cands run in order of their bound, and
// the rest will be bounded without a simulation). It never falls (kth only
// falls) and reaches 1 with the last simulation, where the share of all
// candidates would sit at a fifth and jump to the end.
func searchProgress(cands []*candidate, i int, kth float64) float64 {
	left := sort.Search(len(cands)-i, func(j int) bool { return cands[i+j].lb > kth })
	if i+left == 0 {
		return 1
	}
	return float64(i) / float64(i+left)
}

// simulateLayout is the simulation a worker runs; tests replace it to make
// a layout's simulation panic.
var simulateLayout = simulate

// simulateGuarded runs simulateLayout, recovering a panic into a
// *scenario.PanicError: a worker goroutine's panic would otherwise abort the
// host process (the Python interpreter) instead of failing the search.
func simulateGuarded(ctx context.Context, s *spec.ParallelSearch, w *worker, c *candidate, cost func(model.Op) (float64, error),
	kernel func(model.Op) (exec.Kernel, error)) (step, mfu float64, err error) {
	defer scenario.Recover(&err)
	return simulateLayout(ctx, s, w, c, cost, kernel)
}

// worker is what a worker's simulations share: the cluster's topology,
// built once per worker rather than per layout. The search sets no
// faults, so a simulation changes nothing in it but its route cache, whose
// routes are a function of the topology alone.
type worker struct {
	t *topo.Topology
}

// machine is a fresh machine (kernel, fabric, evaluator) on the worker's
// topology.
func (w *worker) machine(s *spec.ParallelSearch) (*exec.Machine, error) {
	if w.t == nil {
		t, err := compile.Topology("", s.Cluster)
		if err != nil {
			return nil, err
		}
		w.t = t
	}
	return compile.MachineOn("", w.t, s.GPU, spec.Faults{}, s.Seed)
}

// simulate runs one layout's training step on a fresh machine (on the
// worker's topology).
func simulate(ctx context.Context, s *spec.ParallelSearch, w *worker, c *candidate, cost func(model.Op) (float64, error),
	kernel func(model.Op) (exec.Kernel, error)) (step, mfu float64, err error) {
	mm, err := w.machine(s)
	if err != nil {
		return 0, 0, err
	}
	opt := mm.Options(false)
	opt.Cost, opt.Kernel = cost, kernel
	tr := c.tr
	tr.Canceled = ctx.Err
	plan, err := workload.BuildTraining(tr)
	if err != nil {
		return 0, 0, err
	}
	res, err := exec.Run(ctx, plan.Plan, opt)
	if err != nil {
		return 0, 0, fmt.Errorf("tp %d pp %d dp %d mb %d: %w", c.row.TP, c.row.PP, c.row.DP, c.row.MicroBatch, err)
	}
	step = res.End.Seconds()
	mfu = plan.ModelFLOPs / step / (mm.GPU.Peak(c.tr.DType) * float64(plan.Ranks))
	return step, mfu, nil
}
