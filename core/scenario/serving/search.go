package serving

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// ConfigRow is one configuration of a search ("configs" table). Rank
// orders the configurations that meet the SLOs by GPUs, then goodput
// (highest first), then TTFT p99; the rest follow with rank 0.
type ConfigRow struct {
	Rank int `arrow:"rank"`
	TP   int `arrow:"tp"`
	PP   int `arrow:"pp"`
	// EP is the data-parallel attention ranks of a replica (the spec's ep).
	EP                  int `arrow:"ep"`
	Replicas            int `arrow:"replicas"`
	PrefillReplicas     int `arrow:"prefill_replicas"`
	MaxNumBatchedTokens int `arrow:"max_num_batched_tokens"`
	ChunkTokens         int `arrow:"chunk_tokens"`
	// ExpertParallel is the engine's enable_expert_parallel; KVCacheDType
	// and WeightDType its kv_cache_dtype and weight_dtype.
	ExpertParallel bool   `arrow:"enable_expert_parallel"`
	KVCacheDType   string `arrow:"kv_cache_dtype"`
	WeightDType    string `arrow:"weight_dtype"`
	// NumSpeculativeTokens is the drafts a decoding sequence verifies an
	// iteration (engine.speculative; 0: none).
	NumSpeculativeTokens int     `arrow:"num_speculative_tokens"`
	GPUs                 int     `arrow:"gpus"`
	MeetsSLO             bool    `arrow:"meets_slo"`
	SLOAttainment        float64 `arrow:"slo_attainment"`
	GoodputRequestsPS    float64 `arrow:"goodput_requests_per_s"`
	RequestsPerS         float64 `arrow:"requests_per_s"`
	TTFTSP90             float64 `arrow:"ttft_s_p90"`
	TTFTSP99             float64 `arrow:"ttft_s_p99"`
	ITLSP90              float64 `arrow:"itl_s_p90"`
	ITLSP99              float64 `arrow:"itl_s_p99"`
	E2ESP99              float64 `arrow:"e2e_s_p99"`
	// Status: "simulated", "invalid" (the combination breaks a spec rule,
	// e.g. more GPUs than the cluster has) or "does_not_fit" (the weights
	// leave no KV cache); Reason says why.
	Status string `arrow:"status"`
	Reason string `arrow:"reason"`
}

// Configs are the spec's search combinations, in a fixed order: every
// value of each list in turn (an empty list keeps the spec's value), the
// earlier lists varying slowest.
func Configs(s *spec.Serving) []*spec.Serving {
	q := s.Search
	base := *s
	base.Search = nil
	pre := 0
	if s.Disaggregation != nil {
		pre = s.Disaggregation.PrefillReplicas
	}
	configs := []spec.Serving{base}
	// each combines every configuration so far with each of n values.
	each := func(n int, set func(c *spec.Serving, i int)) {
		next := make([]spec.Serving, 0, len(configs)*max(n, 1))
		for _, c := range configs {
			for i := range n {
				d := c
				set(&d, i)
				next = append(next, d)
			}
		}
		configs = next
	}
	ints := func(l []int, v int) []int {
		if len(l) == 0 {
			return []int{v}
		}
		return l
	}
	strs := func(l []string, v string) []string {
		if len(l) == 0 {
			return []string{v}
		}
		return l
	}
	tps, pps, reps := ints(q.TP, s.TP), ints(q.PP, s.PP), ints(q.Replicas, s.Replicas)
	each(len(tps), func(c *spec.Serving, i int) { c.TP = tps[i] })
	each(len(pps), func(c *spec.Serving, i int) { c.PP = pps[i] })
	eps := ints(q.EP, s.EP)
	each(len(eps), func(c *spec.Serving, i int) { c.EP = eps[i] })
	each(len(reps), func(c *spec.Serving, i int) { c.Replicas = reps[i] })
	prs := ints(q.PrefillReplicas, pre)
	each(len(prs), func(c *spec.Serving, i int) {
		c.Disaggregation = nil
		if prs[i] > 0 {
			c.Disaggregation = &spec.ServingDisaggSpec{PrefillReplicas: prs[i]}
		}
	})
	// A chunk equal to the spec's token budget follows the budget; none
	// exceeds it.
	mbts := ints(q.MaxNumBatchedTokens, s.Engine.MaxNumBatchedTokens)
	each(len(mbts), func(c *spec.Serving, i int) {
		if c.Engine.ChunkTokens == s.Engine.MaxNumBatchedTokens {
			c.Engine.ChunkTokens = mbts[i]
		}
		c.Engine.MaxNumBatchedTokens = mbts[i]
		c.Engine.ChunkTokens = min(c.Engine.ChunkTokens, mbts[i])
	})
	if len(q.ChunkTokens) > 0 {
		each(len(q.ChunkTokens), func(c *spec.Serving, i int) { c.Engine.ChunkTokens = q.ChunkTokens[i] })
	}
	whole := q.EnableExpertParallel
	if len(whole) == 0 {
		whole = []bool{s.Engine.EnableExpertParallel}
	}
	each(len(whole), func(c *spec.Serving, i int) { c.Engine.EnableExpertParallel = whole[i] })
	kvs, ws := strs(q.KVCacheDType, s.Engine.KVCacheDType), strs(q.WeightDType, s.Engine.WeightDType)
	each(len(kvs), func(c *spec.Serving, i int) { c.Engine.KVCacheDType = kvs[i] })
	each(len(ws), func(c *spec.Serving, i int) { c.Engine.WeightDType = ws[i] })
	if ks := q.NumSpeculativeTokens; len(ks) > 0 && s.Engine.Speculative != nil {
		// Each its own copy of the speculative config; 0 drafts is none.
		each(len(ks), func(c *spec.Serving, i int) {
			c.Engine.Speculative = nil
			if ks[i] > 0 {
				sp := *s.Engine.Speculative
				sp.NumSpeculativeTokens = ks[i]
				c.Engine.Speculative = &sp
			}
		})
	}
	out := make([]*spec.Serving, len(configs))
	for i := range configs {
		out[i] = &configs[i]
	}
	return out
}

// evaluateGuarded is evaluate with a panic recovered into an error: a
// panic in a worker goroutine would abort the Python interpreter.
func evaluateGuarded(c *spec.Serving, attainment float64) (row ConfigRow, err error) {
	defer scenario.Recover(&err)
	return evaluate(c, attainment)
}

// Search simulates every configuration, on every core (each its own
// pricers and engines: the table is the same on any number of cores).
func Search(env scenario.Env, s *spec.Serving) ([]ConfigRow, error) {
	cands := Configs(s)
	rows := make([]ConfigRow, len(cands))
	var mu sync.Mutex
	next, done := 0, 0
	var wg sync.WaitGroup
	var firstErr error
	// One worker per core, up to the budget's count (spec.SearchWorkers).
	for range min(runtime.GOMAXPROCS(0), spec.SearchWorkers, len(cands)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(cands) || env.Canceled() != nil {
					return
				}
				row, err := evaluateGuarded(cands[i], s.Search.Attainment)
				mu.Lock()
				rows[i] = row
				done++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				env.Report(float64(done) / float64(len(cands)))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := env.Canceled(); err != nil {
		return nil, err
	}
	if firstErr != nil {
		return nil, firstErr
	}
	order := make([]int, 0, len(rows))
	for i := range rows {
		if rows[i].MeetsSLO {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := &rows[order[a]], &rows[order[b]]
		if x.GPUs != y.GPUs {
			return x.GPUs < y.GPUs
		}
		if x.GoodputRequestsPS != y.GoodputRequestsPS {
			return x.GoodputRequestsPS > y.GoodputRequestsPS
		}
		return x.TTFTSP99 < y.TTFTSP99
	})
	out := make([]ConfigRow, 0, len(rows))
	for k, i := range order {
		rows[i].Rank = k + 1
		out = append(out, rows[i])
	}
	for i := range rows {
		if !rows[i].MeetsSLO {
			out = append(out, rows[i])
		}
	}
	return out, nil
}

// evaluate simulates one configuration; a spec problem is a row, not an
// error (the search goes on).
func evaluate(c *spec.Serving, attainment float64) (row ConfigRow, err error) {
	row = ConfigRow{TP: c.TP, PP: c.PP, EP: c.EP, Replicas: c.Replicas, MaxNumBatchedTokens: c.Engine.MaxNumBatchedTokens,
		ChunkTokens: c.Engine.ChunkTokens, ExpertParallel: c.Engine.EnableExpertParallel, KVCacheDType: c.Engine.KVCacheDType,
		WeightDType: c.Engine.WeightDType, GPUs: c.TP * c.PP * c.EP * c.Replicas, Status: "simulated"}
	if c.Disaggregation != nil {
		row.PrefillReplicas = c.Disaggregation.PrefillReplicas
	}
	if sp := c.Engine.Speculative; sp != nil {
		row.NumSpeculativeTokens = sp.NumSpeculativeTokens
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("serving search: configuration %+v: panic: %v", row, r)
		}
	}()
	var p spec.Problems
	c.Validate(&p)
	if e := p.Err(); e != nil {
		row.Status, row.Reason = "invalid", e.Error()
		return row, nil
	}
	o, e := Simulate(scenario.Env{}, c)
	var se *spec.Error
	if errors.As(e, &se) {
		row.Status, row.Reason = "invalid", se.Error()
		return row, nil
	}
	if e != nil {
		row.Status, row.Reason = "does_not_fit", e.Error()
		return row, nil
	}
	s := o.Summary
	row.MeetsSLO = s.SLOAttainment >= attainment
	row.SLOAttainment, row.GoodputRequestsPS, row.RequestsPerS = s.SLOAttainment, s.GoodputRequestsPS, s.RequestsPerS
	row.TTFTSP90, row.TTFTSP99, row.ITLSP90, row.ITLSP99, row.E2ESP99 = s.TTFTSP90, s.TTFTSP99, s.ITLSP90, s.ITLSP99, s.E2ESP99
	return row, nil
}
