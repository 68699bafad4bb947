package spec

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// SSMTP is the "ssm_tp" kind: inference of a Mamba, Mamba-2 or hybrid
// model split over GPUs by tensor parallelism (Dutt et al. 2026, arXiv
// 2602.21144), for every combination of TP degree, SSM partitioning
// strategy, all-reduce quantization and prompt length. Tables: throughput,
// memory, comm.
type SSMTP struct {
	Header
	// Target: the model, the GPU preset of every device (e.g.
	// "a100-80gb-sxm" or "rtx-a6000") and the cluster the TP group runs
	// in, e.g. {"topology": "switch", "gpus": 4, "link": "nvlink3"} or the
	// same with "link": "pcie4-x16"; rank i of a TP group is GPU i.
	Target
	// TPDegrees to compare; default [1, 2, 4]. Each must fit the cluster
	// and divide the model's split dimensions (Mamba-2: nheads and
	// n_groups; attention: heads).
	TPDegrees []int `json:"tp_degrees,omitempty"`
	// Strategies for the SSM blocks: "ssm_tp" (the paper's partition, one
	// all-reduce per block; default) and/or "naive" (Megatron's split as
	// is: Mamba-1 pays a second all-reduce after x_proj).
	Strategies []string `json:"strategies,omitempty"`
	// Quantization of the tensor-parallel all-reduces: "none" (default),
	// "int8", "fp8" (e4m3); QuantBlockElems elements share one fp32 absmax
	// scale (default 128).
	Quantization    []string `json:"quantization,omitempty"`
	QuantBlockElems int      `json:"quant_block_elems,omitempty"`
	// QuantizedAllReduce is how a quantized all-reduce runs: "fused"
	// (default: the paper's design, quantize and dequantize inside the
	// communication kernel, one kernel per all-reduce, on NCCL's ring as the
	// unquantized all-reduce) and/or "unfused" (separate quantize and
	// dequantize kernels around a direct two-shot exchange of int8/fp8
	// shards, as a framework without a fused kernel composes it).
	QuantizedAllReduce []string `json:"quantized_allreduce,omitempty"`
	// Batch of requests served together (default 8), each with a prompt of
	// one of PromptLengths tokens (default [512, 2048, 8192]) and
	// OutputLength generated tokens (default 32). LargestBatch instead runs,
	// at each TP degree and prompt, the largest batch whose memory fits one
	// GPU (more GPUs hold larger batches), Batch then being ignored.
	Batch         int   `json:"batch,omitempty"`
	LargestBatch  bool  `json:"largest_batch,omitempty"`
	PromptLengths []int `json:"prompt_lengths,omitempty"`
	OutputLength  int   `json:"output_length,omitempty"`
	// SkipUnfit reports a configuration whose memory exceeds a GPU as a
	// row with fits = false and no times; otherwise it is a spec error.
	SkipUnfit bool `json:"skip_unfit,omitempty"`
	// FullSimulation as in Inference.
	FullSimulation bool `json:"full_simulation,omitempty"`
	// Execution: "cuda_graphs" (default: each decode step replayed from a
	// CUDA graph, prefill eager, as the paper's system and vLLM, SGLang and
	// TensorRT-LLM run decode) or "eager" (every kernel issued by the host).
	// Host overrides the per-kernel CPU costs.
	Execution string    `json:"execution,omitempty"`
	Host      HostCosts `json:"host,omitempty"`
}

// QuantizedAllReduces are the kernels of a quantized all-reduce.
func QuantizedAllReduces() []string { return []string{"fused", "unfused"} }

// SSMTPStrategies are the SSM partitioning strategies.
func SSMTPStrategies() []string { return []string{"ssm_tp", "naive"} }

// QuantFormats are the all-reduce quantization formats.
func QuantFormats() []string { return []string{"none", "int8", "fp8"} }

// Defaults fills optional fields.
func (s *SSMTP) Defaults() {
	if len(s.TPDegrees) == 0 {
		s.TPDegrees = []int{1, 2, 4}
	}
	if len(s.Strategies) == 0 {
		s.Strategies = []string{"ssm_tp"}
	}
	if len(s.Quantization) == 0 {
		s.Quantization = []string{"none"}
	}
	if len(s.QuantizedAllReduce) == 0 {
		s.QuantizedAllReduce = []string{"fused"}
	}
	if s.Execution == "" {
		s.Execution = "cuda_graphs"
	}
	if s.QuantBlockElems == 0 {
		s.QuantBlockElems = 128
	}
	if s.Batch == 0 {
		s.Batch = 8
	}
	if len(s.PromptLengths) == 0 {
		s.PromptLengths = []int{512, 2048, 8192}
	}
	if s.OutputLength == 0 {
		s.OutputLength = 32
	}
	s.Target.defaults()
	s.Cluster.Defaults()
}

// Validate reports every problem; what needs the cluster's size or the
// memory model (more TP than GPUs, a prompt that cannot fit) is reported
// by the driver as a spec error too.
func (s *SSMTP) Validate(p *Problems) {
	var none Faults
	s.Target.validate(p, &none)
	for i, t := range s.TPDegrees {
		p.IntInRange(Index("tp_degrees", i), t, 1, 1024)
	}
	for i, v := range s.Strategies {
		p.OneOf(Index("strategies", i), v, SSMTPStrategies())
	}
	for i, v := range s.Quantization {
		p.OneOf(Index("quantization", i), v, QuantFormats())
	}
	for i, v := range s.QuantizedAllReduce {
		p.OneOf(Index("quantized_allreduce", i), v, QuantizedAllReduces())
	}
	p.OneOf("execution", s.Execution, ExecutionModes())
	s.Host.validate(p, "host", false, s.Execution)
	p.IntInRange("quant_block_elems", s.QuantBlockElems, 1, 1<<20)
	p.IntInRange("batch", s.Batch, 1, 1<<20)
	for i, v := range s.PromptLengths {
		p.IntInRange(Index("prompt_lengths", i), v, 1, 1<<24)
	}
	p.IntInRange("output_length", s.OutputLength, 1, 1<<16)
	c, ok := s.Model.Resolve()
	if !ok || len(c.Check()) > 0 {
		return
	}
	if c.SSM == "" {
		p.Addf("model", "needs SSM blocks (family mamba, mamba2 or a hybrid with M blocks), got family %q", c.Family)
		return
	}
	for i, t := range s.TPDegrees {
		if t >= 1 {
			s.checkSplit(p, c, Index("tp_degrees", i), t)
		}
	}
}

// checkSplit reports a TP degree that does not divide what the model
// splits. Mamba-2 keeps heads and groups whole on a rank (the grouped
// norm and B, C are per group), so t must divide both nheads and n_groups.
func (s *SSMTP) checkSplit(p *Problems, c model.Config, path string, t int) {
	if c.SSM == model.Mamba2 {
		bad := false
		if h := c.SSMHeads(); h%t != 0 {
			p.Addf(path, "must divide the Mamba-2 heads (nheads = d_inner/ssm_head_dim = %d), got %d", h, t)
			bad = true
		}
		if c.NGroups%t != 0 {
			p.Addf(path, "must divide the Mamba-2 groups (n_groups = %d), got %d; set model.n_groups to a multiple of %d", c.NGroups, t, t)
			bad = true
		}
		if bad {
			return
		}
	}
	r := model.Run{Phase: model.Decode, Batch: 1, TP: t, DType: hw.DType(s.DType)}
	for _, fp := range c.CheckRun(r) {
		msg := fp.Message
		if fp.Path != "tp" {
			msg = fmt.Sprintf("%s: %s", fp.Path, fp.Message)
		}
		p.Addf(path, "%s", msg)
	}
}
