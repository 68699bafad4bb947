// Package operators is the "operators" scenario: every operator of one model
// pass (a training step, a prefill or a decode step) on one GPU, for one
// tensor-parallel rank, priced by package compute: FLOPs, bytes at each
// memory level, what bounds it, and its time; then where the time goes.
package operators

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// OperatorRow is one operator of one layer type ("operators" table). Costs
// are per occurrence; Count is how many times the pass runs it.
type OperatorRow struct {
	// Layer is the block type: embedding, transformer, mamba, mamba2,
	// shared_attention, lm_head.
	Layer string `arrow:"layer"`
	// Op is "<part>.<op>[.dgrad|.wgrad|.bwd]"; Kind its model.Kind; Pass
	// forward, backward, recompute or optimizer.
	Op   string `arrow:"op"`
	Kind string `arrow:"kind"`
	Pass string `arrow:"pass"`
	// Count is occurrences per pass (the layer type's count; 1 for shared weights' optimizer).
	Count int `arrow:"count"`
	// Shape: GEMMs "MxNxK" (with "batch*" in front when batched); attention
	// "b,heads,kv_heads,q_len,kv_len,head_dim"; empty for one-pass kernels.
	Shape string `arrow:"shape"`
	// FLOPs of the operator (the model's count); FLOPsExecuted what the
	// kernel performs, padding of GEMM tiles and attention blocks included.
	FLOPs         float64 `arrow:"flops"`
	FLOPsExecuted float64 `arrow:"flops_executed"`
	// Bytes read and written at each memory level.
	BytesSMEM float64 `arrow:"bytes_smem"`
	BytesL2   float64 `arrow:"bytes_l2"`
	BytesHBM  float64 `arrow:"bytes_hbm"`
	// IntensityFLOPsPerByte is flops / bytes_hbm.
	IntensityFLOPsPerByte float64 `arrow:"intensity_flops_per_byte"`
	// Bound: compute, smem, l2, hbm or launch.
	Bound string `arrow:"bound"`
	// TimeS per occurrence (launch included); TotalTimeS = count × time_s.
	TimeS      float64 `arrow:"time_s"`
	TotalTimeS float64 `arrow:"total_time_s"`
	// AchievedFLOPsPerS is the op's useful FLOPs over time_s.
	AchievedFLOPsPerS float64 `arrow:"achieved_flops_per_s"`
	// GEMMs: the chosen tile "MxNxK" (and "/splitK" when split), waves of
	// tiles over the SMs, and the useful fraction of the launched tile work.
	Tile           string   `arrow:"tile"`
	Waves          int      `arrow:"waves"`
	TileEfficiency *float64 `arrow:"tile_efficiency"`
}

// CollectiveRow is one tensor-parallel collective the pass needs
// ("collectives" table; priced by the network scenarios, not here).
type CollectiveRow struct {
	Layer string `arrow:"layer"`
	Op    string `arrow:"op"`
	// Kind: all_reduce, all_gather or reduce_scatter; Pass forward, backward or recompute.
	Kind  string `arrow:"kind"`
	Pass  string `arrow:"pass"`
	Count int    `arrow:"count"`
	// PayloadBytes is the full tensor (nccl-tests size convention).
	PayloadBytes float64 `arrow:"payload_bytes"`
}

// LayerRow is one layer type ("layers" table): times per occurrence and in total.
type LayerRow struct {
	Layer string `arrow:"layer"`
	Count int    `arrow:"count"`
	// Params of one occurrence on this rank (shared weights: SharedParams, once).
	Params       int64 `arrow:"params"`
	SharedParams int64 `arrow:"shared_params"`
	// Times of one occurrence: forward, backward (recompute included), optimizer.
	ForwardTimeS   float64 `arrow:"forward_time_s"`
	BackwardTimeS  float64 `arrow:"backward_time_s"`
	OptimizerTimeS float64 `arrow:"optimizer_time_s"`
	// TotalTimeS is count × (forward + backward + optimizer), plus the shared optimizer once.
	TotalTimeS float64 `arrow:"total_time_s"`
	// FLOPs of one occurrence (all passes).
	FLOPs float64 `arrow:"flops"`
	// ActivationBytes one occurrence keeps for the backward (training).
	ActivationBytes float64 `arrow:"activation_bytes"`
	// TimeFraction is this layer type's share of the pass's compute time.
	TimeFraction float64 `arrow:"time_fraction"`
}

// SummaryRow is the pass as a whole on one rank ("summary" table).
type SummaryRow struct {
	GPU    string `arrow:"gpu"`
	Model  string `arrow:"model"`
	Family string `arrow:"family"`
	Phase  string `arrow:"phase"`
	DType  string `arrow:"dtype"`
	Batch  int    `arrow:"batch"`
	// SeqLen (training, prefill) and KVLen (decode) are 0 where they do not apply.
	SeqLen int `arrow:"seq_len"`
	KVLen  int `arrow:"kv_len"`
	TP     int `arrow:"tp"`
	// Params of the whole model and on this rank.
	Params     int64 `arrow:"params"`
	RankParams int64 `arrow:"rank_params"`
	// Tokens processed by the pass (decode: one per sequence).
	Tokens int64 `arrow:"tokens"`
	// Compute time of the pass on one rank by part, and in all
	// (collectives excluded: see the collectives table).
	ForwardTimeS   float64 `arrow:"forward_time_s"`
	BackwardTimeS  float64 `arrow:"backward_time_s"`
	OptimizerTimeS float64 `arrow:"optimizer_time_s"`
	TimeS          float64 `arrow:"time_s"`
	// The same time split by what bounds each operator.
	ComputeBoundTimeS float64 `arrow:"compute_bound_time_s"`
	MemoryBoundTimeS  float64 `arrow:"memory_bound_time_s"`
	LaunchBoundTimeS  float64 `arrow:"launch_bound_time_s"`
	// FLOPs of the pass on this rank (model counts, no padding), the matmul
	// share, and the rate.
	FLOPs             float64 `arrow:"flops"`
	MatmulFLOPs       float64 `arrow:"matmul_flops"`
	AchievedFLOPsPerS float64 `arrow:"achieved_flops_per_s"`
	// FLOPsUtilization is achieved_flops_per_s over the dtype's dense peak.
	FLOPsUtilization float64 `arrow:"flops_utilization"`
	TokensPerS       float64 `arrow:"tokens_per_s"`
	Kernels          int64   `arrow:"kernels"`
	// Memory on this rank: weights (in the math type), KV cache and SSM
	// state of the batch, activations kept for the backward (training).
	WeightBytes     float64 `arrow:"weight_bytes"`
	KVCacheBytes    float64 `arrow:"kv_cache_bytes"`
	SSMStateBytes   float64 `arrow:"ssm_state_bytes"`
	ActivationBytes float64 `arrow:"activation_bytes"`
	// TPCommBytes is the payload of the pass's tensor-parallel collectives.
	TPCommBytes float64 `arrow:"tp_comm_bytes"`
}

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Define("operators",
		"every operator of a model pass on one GPU: FLOPs, bytes per memory level, bound, time",
		run)
}

func run(env scenario.Env, sp *spec.Operators) (scenario.Result, error) {
	gpu, err := compile.GPU("", sp.GPU)
	if err != nil {
		return scenario.Result{}, err
	}
	cfg, ok := sp.Model.Resolve()
	if !ok {
		return scenario.Result{}, fmt.Errorf("operators: unknown model preset %q", sp.Model.Preset)
	}
	g, err := model.Build(cfg, sp.Run())
	if err != nil {
		return scenario.Result{}, err
	}
	e := compute.NewEvaluator(gpu)

	var ops []OperatorRow
	var colls []CollectiveRow
	var layers []LayerRow
	sum := SummaryRow{
		GPU: gpu.Name, Model: cfg.Name, Family: string(cfg.Family), Phase: sp.Phase, DType: sp.DType,
		Batch: sp.Batch, TP: sp.TP,
		Params: model.Params(cfg), RankParams: g.Params(),
	}
	for i, blk := range g.Blocks {
		if err := env.Canceled(); err != nil {
			return scenario.Result{}, err
		}
		lr := LayerRow{Layer: blk.Name, Count: blk.Count, Params: blk.Params, SharedParams: blk.SharedParams,
			ActivationBytes: blk.ActivationBytes}
		for _, part := range []struct {
			ops   []model.Op
			count int
			time  *float64
			total *float64
		}{
			{blk.Forward, blk.Count, &lr.ForwardTimeS, &sum.ForwardTimeS},
			{blk.Backward, blk.Count, &lr.BackwardTimeS, &sum.BackwardTimeS},
			{blk.Optimizer, blk.Count, &lr.OptimizerTimeS, &sum.OptimizerTimeS},
			{blk.SharedOptimizer, 1, nil, &sum.OptimizerTimeS},
		} {
			for _, o := range part.ops {
				if err := env.Canceled(); err != nil { // a large operator's tile search can take a while
					return scenario.Result{}, err
				}
				n := float64(part.count)
				if o.IsComm() {
					colls = append(colls, CollectiveRow{Layer: blk.Name, Op: o.Name, Kind: string(o.Kind),
						Pass: string(o.Pass), Count: part.count, PayloadBytes: o.Bytes})
					sum.TPCommBytes += n * o.Bytes
					continue
				}
				c, err := e.Op(o)
				if err != nil {
					return scenario.Result{}, err
				}
				ops = append(ops, operatorRow(blk.Name, part.count, o, c))
				if part.time != nil {
					*part.time += c.TimeS
					lr.FLOPs += c.FLOPs
				} else {
					lr.TotalTimeS += c.TimeS // shared weights' optimizer, once
				}
				*part.total += n * c.TimeS
				sum.FLOPs += n * c.FLOPs
				if o.IsMatmul() {
					sum.MatmulFLOPs += n * c.FLOPs
				}
				sum.Kernels += int64(part.count * c.Kernels)
				switch c.Bound {
				case compute.BoundCompute:
					sum.ComputeBoundTimeS += n * c.TimeS
				case compute.BoundLaunch:
					sum.LaunchBoundTimeS += n * c.TimeS
				default:
					sum.MemoryBoundTimeS += n * c.TimeS
				}
			}
		}
		lr.TotalTimeS += float64(blk.Count) * (lr.ForwardTimeS + lr.BackwardTimeS + lr.OptimizerTimeS)
		sum.ActivationBytes += float64(blk.Count) * blk.ActivationBytes
		layers = append(layers, lr)
		env.Report(float64(i+1) / float64(len(g.Blocks)))
	}
	sum.TimeS = sum.ForwardTimeS + sum.BackwardTimeS + sum.OptimizerTimeS
	for i := range layers {
		layers[i].TimeFraction = layers[i].TotalTimeS / sum.TimeS
	}
	fillSummary(&sum, cfg, g, gpu)

	var r scenario.Result
	r.Add("summary", []SummaryRow{sum})
	r.Add("layers", layers)
	r.Add("operators", ops)
	r.Add("collectives", colls)
	return r, nil
}

func fillSummary(sum *SummaryRow, cfg model.Config, g model.Graph, gpu hw.GPU) {
	run := g.Run
	d := run.DType
	sum.AchievedFLOPsPerS = sum.FLOPs / sum.TimeS
	sum.FLOPsUtilization = sum.AchievedFLOPsPerS / gpu.Peak(d)
	sum.Tokens = int64(run.Batch)
	context := 0
	switch run.Phase {
	case model.Decode:
		context = run.KVLen + 1
		sum.KVLen = run.KVLen
	case model.Prefill:
		context = run.SeqLen
		sum.Tokens *= int64(run.SeqLen)
		sum.SeqLen = run.SeqLen
	default:
		sum.Tokens *= int64(run.SeqLen)
		sum.SeqLen = run.SeqLen
	}
	sum.TokensPerS = float64(sum.Tokens) / sum.TimeS
	sum.WeightBytes = float64(sum.RankParams) * d.Bytes()
	if cfg.KVHeads > 0 {
		// Each rank caches its share of the KV heads (replicated below one per rank).
		share := float64(max(cfg.KVHeads/run.TP, 1)) / float64(cfg.KVHeads)
		sum.KVCacheBytes = float64(run.Batch) * model.KVCacheBytesPerSeq(cfg, d, context) * share
	}
	if run.Phase != model.Training {
		sum.SSMStateBytes = float64(run.Batch) * model.SSMStateBytesPerSeq(cfg, d) / float64(run.TP)
	}
}

func operatorRow(layer string, count int, o model.Op, c compute.Cost) OperatorRow {
	r := OperatorRow{
		Layer: layer, Op: o.Name, Kind: string(o.Kind), Pass: string(o.Pass), Count: count,
		Shape: shape(o), FLOPs: c.FLOPs, FLOPsExecuted: c.ExecutedFLOPs, BytesSMEM: c.BytesSMEM, BytesL2: c.BytesL2, BytesHBM: c.BytesHBM,
		IntensityFLOPsPerByte: c.Intensity, Bound: string(c.Bound), TimeS: c.TimeS,
		TotalTimeS: float64(count) * c.TimeS, AchievedFLOPsPerS: c.AchievedFLOPsPerS,
	}
	if o.Kind == model.GEMM {
		r.Tile = fmt.Sprintf("%dx%dx%d", c.TileM, c.TileN, c.TileK)
		if c.SplitK > 1 {
			r.Tile += fmt.Sprintf("/%d", c.SplitK)
		}
		r.Waves = c.Waves
		eff := c.TileEfficiency
		r.TileEfficiency = &eff
	}
	return r
}

func shape(o model.Op) string {
	switch o.Kind {
	case model.GEMM:
		s := fmt.Sprintf("%dx%dx%d", o.M, o.N, o.K)
		if o.Batch > 1 {
			s = fmt.Sprintf("%d*%s", o.Batch, s)
		}
		return s
	case model.FlashAttention, model.FlashAttentionBwd, model.DecodeAttention:
		return fmt.Sprintf("%d,%d,%d,%d,%d,%d", o.Batch, o.Heads, o.KVHeads, o.SeqQ, o.SeqKV, o.HeadDim)
	}
	return ""
}
