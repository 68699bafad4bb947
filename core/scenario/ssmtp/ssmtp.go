// Package ssmtp is the "ssm_tp" scenario kind: inference of a Mamba,
// Mamba-2 or hybrid model split over GPUs by tensor parallelism, after
// "Scaling State-Space Models on Multiple GPUs with Tensor Parallelism"
// (Dutt et al. 2026, arXiv 2602.21144). Every configuration (TP degree,
// SSM strategy, all-reduce quantization, prompt length) is a real inference
// simulation: package workload lays out prefill and decode (the SSM state
// cache, split 1/t per rank, carried from prefill to decode; the KV cache of
// attention layers), package exec runs it on the compute model and the
// flow-level network, prefill issued eagerly and each decode step replayed
// from a CUDA graph (the paper's system captures decode), with quantized
// all-reduces sending fewer bytes: fused (the paper's design, the
// (de)quantization riding on the communication kernel) or unfused
// (separate quantize and dequantize kernels). The numerical error of the
// quantized all-reduce is computed by package quant on seeded activations,
// with the algorithm the run uses.
//
// Throughput is the paper's batch-request throughput: a batch of requests
// served together from the start of its prefill to its last generated
// token, tokens_per_s = batch × output tokens / e2e and requests_per_s =
// batch / e2e. The paper states the metric by name ("batch-request
// throughput", abstract); both rates are ∝ batch / e2e, so the speed-up
// over one GPU is the same whichever tokens are counted.
//
// Strategy "ssm_tp" on Mamba-1 keeps x_proj local: each rank computes Δ, B
// and C from its own channel shard, the paper's locality-preserving
// partition. The simulator prices that partition; it does not evaluate the
// model's accuracy under it.
package ssmtp

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/quant"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Checked(scenario.Define("ssm_tp",
		"SSM tensor parallelism (Mamba, Mamba-2, hybrids): speed-up, memory and communication by TP degree, strategy and all-reduce quantization",
		func(env scenario.Env, s *spec.SSMTP) (scenario.Result, error) {
			out, err := Simulate(env, s)
			if err != nil {
				return scenario.Result{}, err
			}
			return out.Result(), nil
		}), func(s *spec.SSMTP) error {
		_, err := check(s)
		return err
	})
}

// ConfigColumns name a configuration: the columns the throughput and comm
// tables start with.
type ConfigColumns struct {
	Model string `arrow:"model"`
	// TP degree (GPUs of the group), SSM strategy, all-reduce quantization.
	TP           int    `arrow:"tp"`
	Strategy     string `arrow:"strategy"`
	Quantization string `arrow:"quantization"`
	// AllReduceKernel: "nccl" (unquantized), "fused" or "unfused".
	AllReduceKernel string `arrow:"allreduce_kernel"`
}

// ThroughputRow is one configuration's inference times (table "throughput").
type ThroughputRow struct {
	// model, tp, strategy, quantization, allreduce_kernel.
	ConfigColumns
	// Batch of requests (spec batch, or with largest_batch the largest that
	// fits this TP degree), prompt and generated tokens per request.
	Batch        int `arrow:"batch"`
	PromptTokens int `arrow:"prompt_tokens"`
	OutputTokens int `arrow:"output_tokens"`
	// Fits is whether the configuration's memory fits one GPU; when it
	// does not (spec skip_unfit) the times below are null.
	Fits bool `arrow:"fits"`
	// TTFTS: prefill of the batch until the first token; TPOTS: mean time
	// per further token; E2ES: until the last token.
	TTFTS *float64 `arrow:"ttft_s"`
	TPOTS *float64 `arrow:"tpot_s"`
	E2ES  *float64 `arrow:"e2e_s"`
	// TokensPerS: generated tokens of the batch over E2ES; RequestsPerS:
	// the batch over E2ES (batch-request throughput).
	TokensPerS   *float64 `arrow:"tokens_per_s"`
	RequestsPerS *float64 `arrow:"requests_per_s"`
	// SpeedUp is TokensPerS over one GPU's at the same prompt and that
	// GPU's batch (the same batch, or its own largest; null when one GPU
	// cannot hold it); Efficiency is SpeedUp / TP.
	SpeedUp    *float64 `arrow:"speedup"`
	Efficiency *float64 `arrow:"efficiency"`
}

// MemoryRow is one GPU's memory at a TP degree and prompt (table "memory").
type MemoryRow struct {
	Model        string `arrow:"model"`
	TP           int    `arrow:"tp"`
	Batch        int    `arrow:"batch"`
	PromptTokens int    `arrow:"prompt_tokens"`
	// Per GPU: weights (1/t of the split matrices, replicated norms), SSM
	// state cache (conv and SSM state, 1/t of the whole), KV cache of the
	// attention layers (prompt + output tokens), the largest prefill
	// operator's live tensors; their total and the GPU's memory.
	WeightsBytes     float64 `arrow:"weights_bytes"`
	StateCacheBytes  float64 `arrow:"state_cache_bytes"`
	KVCacheBytes     float64 `arrow:"kv_cache_bytes"`
	ActivationsBytes float64 `arrow:"activations_bytes"`
	TotalBytes       float64 `arrow:"total_bytes"`
	HBMBytes         float64 `arrow:"hbm_bytes"`
	Fits             bool    `arrow:"fits"`
	// LongestPromptTokens fits with this batch; LargestBatch with this
	// prompt (0: none).
	LongestPromptTokens int `arrow:"longest_prompt_tokens"`
	LargestBatch        int `arrow:"largest_batch"`
}

// CommRow is a configuration's tensor-parallel communication (table "comm").
type CommRow struct {
	// model, tp, strategy, quantization, allreduce_kernel.
	ConfigColumns
	PromptTokens int `arrow:"prompt_tokens"`
	// Algorithm of the TP all-reduces: NCCL's ring (unquantized and fused),
	// or the two-shot (direct reduce-scatter + all-gather) the unfused
	// quantized all-reduce composes.
	Algorithm string `arrow:"algorithm"`
	// All-reduces per SSM block and per attention block (hybrids) in a
	// forward pass.
	AllReducesPerSSMLayer  int `arrow:"all_reduces_per_ssm_layer"`
	AllReducesPerAttnLayer int `arrow:"all_reduces_per_attn_layer"`
	// PayloadBytesPerToken: all-reduce payload of one decode step per
	// generated token (per sequence); WireBytesPerTokenPerGPU: what one GPU
	// sends for it, quantized (2(t−1)/t of the payload, with scales).
	PayloadBytesPerToken    float64 `arrow:"payload_bytes_per_token"`
	WireBytesPerTokenPerGPU float64 `arrow:"wire_bytes_per_token_per_gpu"`
	// CommS: time a TP collective was in flight; ExposedCommS: of it, the
	// time the GPU did not compute; CommShare = ExposedCommS / e2e.
	CommS        float64 `arrow:"comm_s"`
	ExposedCommS float64 `arrow:"exposed_comm_s"`
	CommShare    float64 `arrow:"comm_share"`
	// QuantRelError: ‖result − exact‖/‖exact‖ of the all-reduce computed on
	// seeded synthetic activations (0 without quantization).
	QuantRelError float64 `arrow:"quant_rel_error"`
}

// Outcome holds the tables.
type Outcome struct {
	Throughput []ThroughputRow
	Memory     []MemoryRow
	Comm       []CommRow
}

// Result packs the tables.
func (o *Outcome) Result() scenario.Result {
	var r scenario.Result
	r.Add("throughput", o.Throughput)
	r.Add("memory", o.Memory)
	r.Add("comm", o.Comm)
	return r
}

// All-reduce kernels (ThroughputRow.AllReduceKernel).
const (
	KernelNCCL    = "nccl"
	KernelFused   = "fused"
	KernelUnfused = "unfused"
)

// config is one simulated configuration.
type config struct {
	tp       int
	strategy string
	q        quant.Format
	kern     string
	prompt   int
}

// columns name the configuration in the tables.
func (cf config) columns(model string) ConfigColumns {
	return ConfigColumns{Model: model, TP: cf.tp, Strategy: cf.strategy, Quantization: string(cf.q), AllReduceKernel: cf.kern}
}

// run is a simulated configuration's outcome.
type run struct {
	ttft, e2e        float64
	comm, exposedCom float64
}

// sizing is what a spec's runs are sized by: the model, the GPU's memory,
// and the batch each TP degree runs at a prompt.
type sizing struct {
	s       *spec.SSMTP
	c       model.Config
	hbm     float64
	batches map[[2]int]int
}

// layoutB is the inference layout of a TP degree, prompt and batch.
func (z *sizing) layoutB(t, prompt, batch int, local bool) workload.Inference {
	return workload.Inference{Model: z.c, TP: t, PP: 1, Replicas: 1, Batch: batch, Prompt: prompt,
		Output: z.s.OutputLength, DType: hw.DType(z.s.DType), LocalSSMProjections: local}
}

// batchOf is the batch a TP degree runs at a prompt: the spec's, or the
// largest whose memory fits one GPU (0: none).
func (z *sizing) batchOf(t, prompt int) (int, error) {
	if !z.s.LargestBatch {
		return z.s.Batch, nil
	}
	k := [2]int{t, prompt}
	if b, ok := z.batches[k]; ok {
		return b, nil
	}
	b, err := z.layoutB(t, prompt, 1, true).LargestBatch(z.hbm)
	z.batches[k] = b
	return b, err
}

// layout is the layout a TP degree runs a prompt in.
func (z *sizing) layout(t, prompt int, local bool) (workload.Inference, error) {
	b, err := z.batchOf(t, prompt)
	return z.layoutB(t, prompt, max(b, 1), local), err
}

// checked is a spec that passed check: its sizing and memory rows, and
// whether each (TP degree, prompt) fits.
type checked struct {
	size   *sizing
	memory []MemoryRow
	fits   map[[2]int]bool
}

// check makes a run's checks before it simulates (validate makes the same):
// the machine compiled (cluster, GPU), every TP degree against its GPUs,
// and every prompt's memory at every TP degree against the GPU's unless
// skip_unfit reports it as a row.
func check(s *spec.SSMTP) (*checked, error) {
	m, err := compile.Machine("", s.Cluster, s.GPU, spec.Faults{}, s.Seed)
	if err != nil {
		return nil, err
	}
	gpus := m.Fabric.Topology().NumRanks()
	var p spec.Problems
	for i, t := range s.TPDegrees {
		if t > gpus {
			p.Addf(spec.Index("tp_degrees", i), "a TP degree of %d needs %d GPUs, but the cluster has %d", t, t, gpus)
		}
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	c, ok := s.Model.Resolve()
	if !ok {
		return nil, &spec.Error{Problems: []spec.Problem{{Path: "model", Message: "does not resolve to a model"}}}
	}
	z := &sizing{s: s, c: c, hbm: float64(m.GPU.HBMBytes), batches: map[[2]int]int{}}
	ck := &checked{size: z, fits: map[[2]int]bool{}}
	for _, t := range s.TPDegrees {
		for pi, prompt := range s.PromptLengths {
			in, err := z.layout(t, prompt, true)
			if err != nil {
				return nil, err
			}
			row, err := memoryRow(in, z.hbm)
			if err != nil {
				return nil, err
			}
			if s.LargestBatch && z.batches[[2]int{t, prompt}] == 0 {
				row.Batch, row.Fits = 0, false
			}
			row.Model = c.Name
			ck.memory = append(ck.memory, row)
			ck.fits[[2]int{t, prompt}] = row.Fits
			if !row.Fits && !s.SkipUnfit {
				p.Addf(spec.Index("prompt_lengths", pi),
					"a prompt of %d tokens with batch %d needs %.1f GB per GPU at tp %d, but the %s has %.1f GB; the longest that fits is %d tokens (skip_unfit reports it as a row instead)",
					prompt, in.Batch, row.TotalBytes/1e9, t, s.GPU, z.hbm/1e9, row.LongestPromptTokens)
			}
		}
	}
	return ck, p.Err()
}

// Simulate runs every configuration of a validated spec.
func Simulate(env scenario.Env, s *spec.SSMTP) (*Outcome, error) {
	ck, err := check(s)
	if err != nil {
		return nil, err
	}
	z, fits := ck.size, ck.fits
	c, hbm := z.c, z.hbm
	out := &Outcome{Memory: ck.memory}
	var configs []config
	for _, prompt := range s.PromptLengths {
		for _, t := range s.TPDegrees {
			for _, st := range s.Strategies {
				for _, qn := range s.Quantization {
					if qn == string(quant.None) {
						configs = append(configs, config{t, st, quant.None, KernelNCCL, prompt})
						continue
					}
					for _, k := range s.QuantizedAllReduce {
						configs = append(configs, config{t, st, quant.Format(qn), k, prompt})
					}
				}
			}
		}
	}
	runs := map[config]run{}
	// key: one GPU has no all-reduce, so strategy and quantization do not
	// matter there and it is simulated once per prompt (also as the
	// speed-up's baseline when tp 1 is not asked for).
	key := func(cf config) config {
		if cf.tp == 1 {
			return config{tp: 1, q: quant.None, kern: KernelNCCL, prompt: cf.prompt}
		}
		return cf
	}
	simulate := func(cf config) (run, error) {
		k := key(cf)
		if r, ok := runs[k]; ok {
			return r, nil
		}
		if err := env.Canceled(); err != nil {
			return run{}, err
		}
		in, err := z.layout(k.tp, k.prompt, k.strategy == "ssm_tp")
		if err != nil {
			return run{}, err
		}
		r, err := simulateOne(env, s, in, k.q, k.kern)
		if err != nil {
			return run{}, fmt.Errorf("tp %d, strategy %s, quantization %s (%s), prompt %d: %w", cf.tp, cf.strategy, cf.q, cf.kern, cf.prompt, err)
		}
		runs[k] = r
		return r, nil
	}
	type qkey struct {
		tp   int
		q    quant.Format
		kern string
	}
	qerr := map[qkey]float64{}
	for i, cf := range configs {
		env.Report(float64(i) / float64(len(configs)))
		batch, err := z.batchOf(cf.tp, cf.prompt)
		if err != nil {
			return nil, err
		}
		tr := ThroughputRow{ConfigColumns: cf.columns(c.Name),
			Batch: batch, PromptTokens: cf.prompt, OutputTokens: s.OutputLength, Fits: fits[[2]int{cf.tp, cf.prompt}]}
		cr, err := commRow(c, s, cf, max(batch, 1))
		if err != nil {
			return nil, err
		}
		cr.Model = c.Name
		if cf.q != quant.None && cf.tp > 1 {
			k := qkey{cf.tp, cf.q, cf.kern}
			if _, ok := qerr[k]; !ok {
				tokens := min(max(batch, 1), 64)
				if cf.kern == KernelUnfused {
					qerr[k] = quant.Error(cf.q, s.Seed, cf.tp, tokens, c.Hidden, s.QuantBlockElems)
				} else {
					qerr[k] = quant.RingError(cf.q, s.Seed, cf.tp, tokens, c.Hidden, s.QuantBlockElems)
				}
			}
			cr.QuantRelError = qerr[k]
		}
		if tr.Fits {
			r, err := simulate(cf)
			if err != nil {
				return nil, err
			}
			tps := float64(batch*s.OutputLength) / r.e2e
			tr.TTFTS, tr.E2ES, tr.TokensPerS, tr.RequestsPerS = ptr(r.ttft), ptr(r.e2e), ptr(tps), ptr(float64(batch)/r.e2e)
			tpot := 0.0
			if s.OutputLength > 1 {
				tpot = (r.e2e - r.ttft) / float64(s.OutputLength-1)
			}
			tr.TPOTS = ptr(tpot)
			baseIn, err := z.layout(1, cf.prompt, true)
			if err != nil {
				return nil, err
			}
			b1, _ := z.batchOf(1, cf.prompt)
			if b1 > 0 && (fits[[2]int{1, cf.prompt}] || isFit(baseIn, hbm)) {
				base, err := simulate(config{tp: 1, q: quant.None, kern: KernelNCCL, prompt: cf.prompt})
				if err != nil {
					return nil, err
				}
				sp := tps / (float64(b1*s.OutputLength) / base.e2e)
				tr.SpeedUp, tr.Efficiency = ptr(sp), ptr(sp/float64(cf.tp))
			}
			cr.CommS, cr.ExposedCommS, cr.CommShare = r.comm, r.exposedCom, r.exposedCom/r.e2e
		}
		out.Throughput = append(out.Throughput, tr)
		out.Comm = append(out.Comm, cr)
	}
	env.Report(1)
	return out, nil
}

func ptr(v float64) *float64 { return &v }

// isFit reports whether a layout's peak memory fits a GPU.
func isFit(in workload.Inference, hbm float64) bool {
	m, err := in.PeakMemory(in.Prompt)
	return err == nil && m <= hbm
}

// Host is the host model of a spec's execution mode: with cuda_graphs
// each decode step (every task after the one prefill, micro-batch ≥ 1)
// is replayed from a captured graph and prefill is issued eagerly, as the
// paper's system serves decode with CUDA graphs and as the Mamba reference
// implementation generates (state-spaces/mamba, mamba_ssm/utils/
// generation.py: decode(cg=True) runs the prompt through the model eagerly
// and replays one captured graph per decode step, under torch.distributed
// tensor parallelism too); the inference kind's HostOf does the same.
func Host(s *spec.SSMTP) exec.Host {
	h := exec.Host{Mode: s.Execution, ForwardOpS: s.Host.ForwardOpS, BackwardOpS: s.Host.BackwardOpS,
		CollectiveS: s.Host.CollectiveS}
	if h.Mode == "" {
		h.Mode = exec.CUDAGraphs
	}
	if h.Mode == exec.CUDAGraphs {
		h.Captured = func(t *workload.Task) bool { return t.MicroBatch >= 1 }
	}
	return h
}

// simulateOne runs one configuration on a fresh machine.
func simulateOne(env scenario.Env, s *spec.SSMTP, in workload.Inference, q quant.Format, kern string) (run, error) {
	m, err := compile.MachineContext(env.Context(), "", s.Cluster, s.GPU, spec.Faults{}, s.Seed)
	if err != nil {
		return run{}, err
	}
	plan, err := workload.BuildInference(in)
	if err != nil {
		return run{}, err
	}
	opt := m.Options(s.FullSimulation)
	opt.Host = Host(s)
	if q != quant.None && in.TP > 1 {
		opt.TPQuant, opt.TPQuantAlgorithm = Quantization(m, q, in.DType, s.QuantBlockElems, kern)
	}
	res, err := exec.Run(env.Context(), plan.Plan, opt)
	if err != nil {
		return run{}, err
	}
	r := run{e2e: res.End.Seconds()}
	if t, ok := res.MarkEnd(0, "prefill_end"); ok {
		r.ttft = t.Seconds()
	}
	st := res.Ranks()[0]
	r.comm, r.exposedCom = st.Comm.Seconds(), st.ExposedComm.Seconds()
	return r, nil
}

// FusedQuantFLOPsPerElem is the arithmetic a fused quantizing all-reduce
// adds per element and hop: the sender's absmax compare, scale and
// round-and-convert (model.QuantizeOp's 3 per element) and the receiver's
// rescale (model.DequantizeOp's 1); the add is the unquantized
// reduction's own.
const FusedQuantFLOPsPerElem = 4

// Quantization is the wire format and kernel cost of a quantized
// all-reduce on machine m, with the algorithm it runs (net.Algorithm ""
// keeps the unquantized all-reduce's): 1-byte elements plus one fp32
// scale per block either way.
//
// Fused (kern "fused", the paper's design): one NCCL-style ring kernel
// whose every step quantizes what it sends and dequantizes what it
// receives in registers, on the memory passes the ring makes anyway (read
// the received chunk, read the local one, write the sum for the next
// hop), which move fewer bytes for 1-byte codes. What it adds is math on
// the communication kernel's thread blocks (exec.NCCLCTAs of the GPU's
// SMs, at the vector fp32 rate); NCCL pipelines each step in slices, so
// the math of a slice overlaps the wire of the next and only math beyond
// the step's wire time shows. On the GPU presets it never does: a fused
// int8 all-reduce then takes the wire-byte ratio of the bf16 one, 1.94×
// faster in the bandwidth-bound limit with 128-element blocks; a fused
// int8 all-reduce measured 1.8× faster than bf16 (EQuARX, Ahmed et al.
// 2025, arXiv 2506.17615, on TPUs; TestFusedQuantizedAllReduceBandwidth).
//
// Unfused: a quantize kernel before each send and a dequantize kernel
// after each receive, priced by the compute model as streaming passes
// over the message (model.QuantizeOp / DequantizeOp, launch included),
// around a direct two-shot exchange (an int8 payload with per-block
// scales cannot go through NCCL's reduction, which sums the wire type, so
// the shards are exchanged and reduced by the kernels).
func Quantization(m *exec.Machine, f quant.Format, d hw.DType, block int, kern string) (*net.Quantization, net.Algorithm) {
	e := max(d.Bytes(), 2)
	act := d
	if d.Bytes() < 2 {
		act = hw.BF16
	}
	wire := hw.INT8
	if f == quant.FP8 {
		wire = hw.FP8
	}
	q := &net.Quantization{ElemBytes: e, WireElemBytes: f.WireElemBytes(), BlockElems: block, ScaleBytes: 4}
	memo := map[float64]sim.Time{}
	if kern != KernelUnfused {
		// The ring's hop: rank i to rank i+1 (every hop of the presets'
		// switches has the same bottleneck).
		t := m.Fabric.Topology()
		linkBW := 0.0
		if t.NumRanks() > 1 {
			if route, err := t.Route(t.RankDevice(0), t.RankDevice(1)); err == nil {
				for _, l := range route {
					if c := t.Capacity(int(l)); linkBW == 0 || c < linkBW {
						linkBW = c
					}
				}
			}
		}
		rate := m.GPU.VectorFP32FlopsPerS * float64(exec.NCCLCTAs) / float64(max(m.GPU.SMCount, exec.NCCLCTAs))
		q.KernelTime = func(_ int, elems float64) sim.Time {
			if d, ok := memo[elems]; ok {
				return d
			}
			mathS := FusedQuantFLOPsPerElem * elems / rate
			wireS := 0.0
			if linkBW > 0 {
				wireS = q.WireBytes(elems*e) / linkBW
			}
			// Charged once before a send and once after a receive: half
			// of the step's exposed math each time.
			d := sim.SecondsCeil(max(mathS-wireS, 0) / 2)
			memo[elems] = d
			return d
		}
		return q, ""
	}
	q.KernelTime = func(_ int, elems float64) sim.Time {
		if d, ok := memo[elems]; ok {
			return d
		}
		n := int64(elems)
		qs, err1 := m.Cost(model.QuantizeOp("allreduce.quantize", n, act, wire, int64(block)))
		ds, err2 := m.Cost(model.DequantizeOp("allreduce.dequantize", n, wire, act, int64(block)))
		if err1 != nil || err2 != nil {
			qs, ds = 0, 0
		}
		// Charged once before a send and once after a receive: half the
		// cost of quantizing plus dequantizing the message each time.
		t := sim.SecondsCeil((qs + ds) / 2)
		memo[elems] = t
		return t
	}
	return q, net.Direct
}

// memoryRow is the per-GPU memory of a layout, with the longest prompt and
// the largest batch that fit.
func memoryRow(in workload.Inference, hbm float64) (MemoryRow, error) {
	mem, err := in.MemoryAt(in.Prompt)
	if err != nil {
		return MemoryRow{}, err
	}
	total := mem.Total()
	row := MemoryRow{TP: in.TP, Batch: in.Batch, PromptTokens: in.Prompt,
		WeightsBytes: mem.Weights, StateCacheBytes: mem.SSMState, KVCacheBytes: mem.KVCache,
		ActivationsBytes: mem.Activations + mem.Workspace, TotalBytes: total, HBMBytes: hbm, Fits: total <= hbm}
	if row.LongestPromptTokens, err = in.LongestPrompt(hbm); err != nil {
		return MemoryRow{}, err
	}
	row.LargestBatch, err = in.LargestBatch(hbm)
	return row, err
}

// commRow counts a configuration's all-reduces from the model's decode
// graph on one rank and sizes their payload on the wire.
func commRow(c model.Config, s *spec.SSMTP, cf config, batch int) (CommRow, error) {
	row := CommRow{ConfigColumns: cf.columns(""),
		PromptTokens: cf.prompt, Algorithm: string(net.Ring)}
	if cf.q != quant.None && cf.tp > 1 && cf.kern == KernelUnfused {
		row.Algorithm = string(net.Direct)
	}
	g, err := model.Build(c, model.Run{Phase: model.Decode, Batch: batch, KVLen: cf.prompt, TP: cf.tp,
		DType: hw.DType(s.DType), LocalSSMProjections: cf.strategy == "ssm_tp"})
	if err != nil {
		return row, err
	}
	e := max(hw.DType(s.DType).Bytes(), 2)
	wire := &net.Quantization{ElemBytes: e, WireElemBytes: e, BlockElems: 1}
	if cf.q != quant.None {
		wire = &net.Quantization{ElemBytes: e, WireElemBytes: cf.q.WireElemBytes(), BlockElems: s.QuantBlockElems, ScaleBytes: 4}
	}
	t := float64(cf.tp)
	for _, b := range g.Blocks {
		n := 0
		for _, o := range b.Forward {
			if o.Kind == model.AllReduce {
				n++
				row.PayloadBytesPerToken += float64(b.Count) * o.Bytes / float64(batch)
				row.WireBytesPerTokenPerGPU += float64(b.Count) * 2 * (t - 1) / t * wire.WireBytes(o.Bytes) / float64(batch)
			}
		}
		switch b.Name {
		case model.BlockMamba, model.BlockMamba2:
			row.AllReducesPerSSMLayer = n
		case model.BlockTransformer, model.BlockTransformerSWA, model.BlockTransformerChunked, model.BlockShared:
			row.AllReducesPerAttnLayer = n
		}
	}
	return row, nil
}
