package job

import (
	"strings"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Training is the job of a validated training spec (its host autograd,
// cuda_graphs replaying every task).
func Training(s *spec.Training) Job {
	return Job{Cluster: s.Cluster, GPU: s.GPU, Faults: s.Faults, Seed: s.Seed,
		FullSimulation: s.SimulatesEveryReplica(), RingSteps: s.RingSteps, TimelineRanks: s.TimelineRanks,
		Host: HostOf(s.Execution, s.Host, true)}
}

// Inference is the job of a validated inference spec (InferenceHost,
// spec.TPAllReduce).
func Inference(s *spec.Inference) Job {
	return Job{Cluster: s.Cluster, GPU: s.GPU, Faults: s.Faults, Seed: s.Seed,
		FullSimulation: s.FullSimulation, RingSteps: s.RingSteps, TimelineRanks: s.TimelineRanks, Host: InferenceHost(s),
		TPAllReduce: spec.TPAllReduce(s.CustomAllReduce, s.CustomAllReduceEngine)}
}

// TrainingPlan lays out a validated training spec on gpus GPUs and builds
// its plan, polling canceled (if set) as it goes.
func TrainingPlan(s *spec.Training, gpus int, canceled func() error) (workload.Training, *workload.TrainingPlan, error) {
	t, err := TrainingLayout(s, gpus)
	if err != nil {
		return t, nil, err
	}
	t.Canceled = canceled
	plan, err := workload.BuildTraining(t)
	return t, plan, err
}

// InferencePlan lays out a validated inference spec on gpus GPUs and
// builds its plan.
func InferencePlan(s *spec.Inference, gpus int, canceled func() error) (workload.Inference, *workload.InferencePlan, error) {
	in, err := InferenceLayout(s, gpus)
	if err != nil {
		return in, nil, err
	}
	in.Canceled = canceled
	plan, err := workload.BuildInference(in)
	return in, plan, err
}

// InferenceBuilder lays out a validated inference spec on gpus GPUs and
// prepares its plan's builder (workload.InferenceBuilder: a range of steps
// at a time).
func InferenceBuilder(s *spec.Inference, gpus int, canceled func() error) (workload.Inference, *workload.InferenceBuilder, error) {
	in, err := InferenceLayout(s, gpus)
	if err != nil {
		return in, nil, err
	}
	in.Canceled = canceled
	ib, err := workload.NewInferenceBuilder(in)
	return in, ib, err
}

// TrainingStep is one training step of model m in dtype under par, with a
// spec's step options (the training and parallel_search kinds').
func TrainingStep(m model.Config, dtype string, st spec.Step, par workload.Parallel) workload.Training {
	return workload.Training{Model: m, SeqLen: st.SeqLen, DType: hw.DType(dtype), GradDType: hw.DType(st.GradDType),
		FP8Recipe: st.FP8Recipe, CrossEntropyFusion: st.CrossEntropyFusion, VocabMultiple: st.MakeVocabSizeDivisibleBy, UnfusedAttention: st.UnfusedAttention, FlashAttention2: st.FlashAttention2,
		NoGradAccumulationFusion: st.NoGradAccumulationFusion, RouterDType: hw.DType(st.MoERouterDType), FP8Dispatch: st.FP8Dispatch, TEOpFuser: st.TEOpFuser, FP8Attention: st.FP8Attention, FP8OutputProj: st.FP8OutputProj, Par: par}
}

// TrainingLayout converts a validated training spec to the workload's layout; gpus
// is the cluster's GPU count (DP and the global batch default from it).
func TrainingLayout(s *spec.Training, gpus int) (workload.Training, error) {
	m, _ := s.Model.Resolve()
	par := s.Parallel
	var p spec.Problems
	par.Resolve(gpus, &p, "parallel")
	if err := p.Err(); err != nil {
		return workload.Training{}, err
	}
	t := TrainingStep(m, s.DType, s.Step, workload.Parallel{TP: par.TP, PP: par.PP, DP: par.DP * par.CP, CP: par.CP, CPComm: par.CPCommType, MicroBatch: par.MicroBatch, GlobalBatch: par.GlobalBatch,
		Schedule: workload.Schedule(par.Schedule), VirtualStages: par.VirtualStages, SequenceParallel: par.SequenceParallel,
		AccountForEmbedding: par.AccountForEmbedding, AccountForLoss: par.AccountForLoss,
		FirstStageLayers: par.DecoderFirstStageLayers, LastStageLayers: par.DecoderLastStageLayers, Layout: par.PipelineLayout,
		Recompute: model.Recompute(par.Recompute), RecomputeModules: par.RecomputeModules, ZeRO: par.ZeRO,
		OptimizerInstances: par.DistributedOptimizerInstances, OverlapGradReduce: par.OverlapGradReduce,
		OverlapParamGather: par.OverlapParamGather,
		BucketParams:       par.BucketParams, OverlapTPComm: *par.OverlapTPComm, TPCommOverlap: par.TPCommOverlap, EP: par.EP,
		ExpertTP: par.ExpertTP, OverlapEPComm: par.OverlapEPComm})
	t.Routing = workload.Routing{Distribution: s.Routing.Distribution, Skew: s.Routing.Skew, Loads: s.Routing.Loads, Seed: s.Routing.Seed,
		CapacityFactor: s.Routing.CapacityFactor, PadToCapacity: s.Routing.PadToCapacity, HierarchicalA2A: s.Routing.HierarchicalA2A,
		NodeLimit: s.Routing.NodeLimit}
	for _, fp := range t.Check() {
		path := fp.Path
		switch {
		case path == "seq_len", path == "fp8_dispatch", path == "te_op_fuser", strings.HasPrefix(path, "routing."):
		default:
			if len(path) < 6 || path[:6] != "model." {
				path = spec.Field("parallel", path)
			}
		}
		p.Addf(path, "%s", fp.Message)
	}
	return t, p.Err()
}

// InferenceLayout converts a validated inference spec to the workload's layout.
func InferenceLayout(s *spec.Inference, gpus int) (workload.Inference, error) {
	m, _ := s.Model.Resolve()
	in := workload.Inference{Model: m, TP: s.TP, PP: s.PP, Replicas: s.Replicas, Batch: s.Batch,
		Prompt: s.PromptTokens, Output: s.OutputTokens, DType: hw.DType(s.DType), KVDType: spec.StorageDType(s.KVCacheDType),
		WeightDType:      spec.StorageDType(s.WeightDType),
		UnfusedAttention: s.UnfusedAttention, FlashAttention2: s.FlashAttention2, FusedAddNorm: s.FusedAddNorm, XQADecode: s.DecodeAttention == spec.DecodeXQA,
		EP: s.EP, HierarchicalA2A: s.HierarchicalA2A, LowLatencyA2A: s.LowLatencyA2A, ExpertsInTP: s.EnableExpertParallel, TwoBatchOverlap: s.TwoBatchOverlap,
		DecodeOnly: s.DecodeOnly}
	var p spec.Problems
	in.Model.Experts = spec.ExpertSlots(&p, m, s.RedundantExperts, s.EP)
	if n := in.Ranks(); n > gpus {
		p.Addf("replicas", "tp·pp·replicas = %d·%d·%d = %d GPUs, but the cluster has %d", s.TP, s.PP, s.Replicas, n, gpus)
	}
	for _, r := range s.Requests {
		in.Requests = append(in.Requests, workload.Request{Count: r.Count, Prompt: r.PromptTokens, Output: r.OutputTokens})
	}
	for _, fp := range in.Check() {
		p.Addf(fp.Path, "%s", fp.Message)
	}
	return in, p.Err()
}

// InferenceHost is the exec host model of a validated inference spec: with cuda_graphs,
// decode steps replay from graphs and prefill runs eagerly (its shapes vary
// with the prompts), as vLLM and TensorRT-LLM do.
func InferenceHost(s *spec.Inference) exec.Host {
	host := HostOf(s.Execution, s.Host, false)
	if host.Mode == exec.CUDAGraphs {
		groups := max(len(s.Requests), 1)
		host.Captured = func(t *workload.Task) bool { return int(t.MicroBatch) >= groups }
	}
	return host
}

// Check makes a plan-based run's checks before it simulates, for a
// validated spec at the job's Path: the machine compiled (cluster, GPU,
// fault device names), the layout on its GPU count (layout returns the
// layout's rank count) and, with timeline, the timeline ranks against it.
func (j Job) Check(layout func(gpus int) (int, error), timeline bool) error {
	m, err := compile.Machine(j.Path, j.Cluster, j.GPU, j.Faults, j.Seed)
	if err != nil {
		return err
	}
	ranks, err := layout(m.Fabric.Topology().NumRanks())
	if err == nil && timeline {
		err = CheckTimelineRanks(j.TimelineRanks, ranks)
	}
	return problem.Under(j.Path, err)
}

// CheckTraining is Job.Check for a validated training spec at prefix.
func CheckTraining(prefix string, s *spec.Training, timeline bool) error {
	j := Training(s)
	j.Path = prefix
	return j.Check(func(gpus int) (int, error) {
		t, err := TrainingLayout(s, gpus)
		return t.Par.TP * t.Par.PP * t.Par.DP, err
	}, timeline)
}

// CheckInference is Job.Check for a validated inference spec at prefix.
func CheckInference(prefix string, s *spec.Inference, timeline bool) error {
	j := Inference(s)
	j.Path = prefix
	return j.Check(func(gpus int) (int, error) {
		in, err := InferenceLayout(s, gpus)
		return in.Ranks(), err
	}, timeline)
}
