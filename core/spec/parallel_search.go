package spec

import (
	"slices"
)

// ParallelSearch is the "parallel_search" kind: enumerate the parallel
// layouts (tp, pp, dp, cp, ep, expert tp, micro-batch, recompute, zero) of a
// model on a cluster for a global batch, check which are valid and fit in
// memory, simulate the promising ones and rank them by step time. Table:
// configs.
type ParallelSearch struct {
	Header
	// Target: the model, the GPU preset and the cluster (see Target).
	Target
	// Step: every candidate's sequence length, gradient type, FP8 recipe,
	// loss and attention implementations, as in Training.
	Step
	// GlobalBatch is sequences per step (required).
	GlobalBatch int `json:"global_batch"`
	// Candidate values; defaults: tp [1, 2, 4, 8], pp every power of two
	// up to the GPUs, micro_batch [1, 2, 4, 8], recompute [none, selective,
	// full], zero [0, 1, 2, 3]. dp is the GPUs / (tp·pp): every GPU is used.
	TP         []int    `json:"tp,omitempty"`
	PP         []int    `json:"pp,omitempty"`
	MicroBatch []int    `json:"micro_batch,omitempty"`
	Recompute  []string `json:"recompute,omitempty"`
	ZeRO       []int    `json:"zero,omitempty"`
	// CP: context-parallel degrees (Parallel.CP; default [1]): dp is then
	// the GPUs / (tp·cp·pp).
	CP []int `json:"cp,omitempty"`
	// EP: expert-parallel degrees of a mixture-of-experts model (default
	// every power of two up to the experts; [1] for dense models). Routing
	// is balanced.
	EP []int `json:"ep,omitempty"`
	// ExpertTP: expert tensor-parallel degrees (Parallel.ExpertTP), 0
	// standing for each layout's tp as in a training spec; every layout
	// takes each value, a value equal to another at its tp once. Default
	// [0, 1] for a mixture-of-experts model (expert TP = tp, then 1: what
	// Megatron-Core allows), [0] for a dense one. Values other than 0 and
	// 1 must be one of the tp searched.
	ExpertTP []int `json:"expert_tp,omitempty"`
	// Schedule of every candidate (default "1f1b"). Sequence parallelism is
	// on whenever tp > 1 unless NoSequenceParallel.
	Schedule           string `json:"schedule,omitempty"`
	NoSequenceParallel bool   `json:"no_sequence_parallel,omitempty"`
	// Keep is how many of the fastest layouts are guaranteed exact: a
	// layout whose compute alone already exceeds the keep-th best step time
	// found is reported as bounded instead of simulated (default 10; 0
	// simulates every layout that fits).
	Keep *int `json:"keep,omitempty"`
}

// Defaults fills optional fields.
func (s *ParallelSearch) Defaults() {
	s.Target.defaults()
	s.Step.defaults()
	if len(s.TP) == 0 {
		s.TP = []int{1, 2, 4, 8}
	}
	if len(s.MicroBatch) == 0 {
		s.MicroBatch = []int{1, 2, 4, 8}
	}
	if len(s.Recompute) == 0 {
		s.Recompute = []string{"none", "selective", "full"}
	}
	if len(s.ZeRO) == 0 {
		s.ZeRO = []int{0, 1, 2, 3}
	}
	if len(s.CP) == 0 {
		s.CP = []int{1}
	}
	if s.Schedule == "" {
		s.Schedule = "1f1b"
	}
	if s.Keep == nil {
		k := 10
		s.Keep = &k
	}
	s.Cluster.Defaults()
}

// Validate reports every problem.
func (s *ParallelSearch) Validate(p *Problems) {
	var none Faults
	g, ok := s.Target.validate(p, &none)
	s.Step.validate(p, s.DType, g, ok)
	p.IntInRange("global_batch", s.GlobalBatch, 1, 1<<30)
	for _, f := range []struct {
		name string
		list []int
	}{{"tp", s.TP}, {"pp", s.PP}, {"cp", s.CP}, {"micro_batch", s.MicroBatch}, {"ep", s.EP}} {
		for i, v := range f.list {
			p.IntInRange(Index(f.name, i), v, 1, 1<<20)
		}
	}
	for i, v := range s.ExpertTP {
		if v < 0 || v > 1<<16 {
			p.IntInRange(Index("expert_tp", i), v, 0, 1<<16)
		} else if v > 1 && !slices.Contains(s.TP, v) {
			p.Addf(Index("expert_tp", i), "must be 0 (each layout's tp), 1 or one of the tp searched %v, got %d", s.TP, v)
		}
	}
	for i, v := range s.ZeRO {
		p.IntInRange(Index("zero", i), v, 0, 3)
	}
	for i, v := range s.Recompute {
		p.OneOf(Index("recompute", i), v, []string{"none", "selective", "full"})
	}
	p.OneOf("schedule", s.Schedule, []string{"1f1b", "gpipe"})
	if s.Keep != nil && *s.Keep < 0 {
		p.Addf("keep", "must be >= 0, got %d", *s.Keep)
	}
}
