package operators_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/operators"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runSpec(t *testing.T, js string) scenario.Result {
	t.Helper()
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err)
	return res
}

func tables(res scenario.Result) map[string]any {
	m := map[string]any{}
	for _, tb := range res.Tables {
		m[tb.Name] = tb.Rows
	}
	return m
}

func TestTablesAddUp(t *testing.T) {
	for _, js := range []string{
		`{"kind":"operators","gpu":"a100-80gb-sxm","model":"llama2-7b","batch":1,"seq_len":2048}`,
		`{"kind":"operators","gpu":"h100-sxm","model":"mamba-2.8b","phase":"prefill","batch":4,"seq_len":1024}`,
		`{"kind":"operators","gpu":"h100-sxm","model":"zamba-7b","phase":"decode","batch":8,"kv_len":4096,"tp":2}`,
		`{"kind":"operators","gpu":"h100-sxm","model":"mamba2-2.7b","phase":"training","tp":2,"sequence_parallel":true,"recompute":"full"}`,
		`{"kind":"operators","gpu":"mi300x","model":{"preset":"gpt3-175b","layers":2},"tp":8,"unfused_attention":true,"recompute":"selective"}`,
	} {
		tb := tables(runSpec(t, js))
		sum := tb["summary"].([]operators.SummaryRow)[0]
		ops := tb["operators"].([]operators.OperatorRow)
		layers := tb["layers"].([]operators.LayerRow)
		total, flops := 0.0, 0.0
		for _, o := range ops {
			require.Greater(t, o.TimeS, 0.0, o.Op)
			total += o.TotalTimeS
			flops += float64(o.Count) * o.FLOPs
		}
		assert.InEpsilon(t, sum.TimeS, total, 1e-9, js)
		assert.InEpsilon(t, sum.FLOPs, flops, 1e-9, js)
		lt := 0.0
		for _, l := range layers {
			lt += l.TotalTimeS
		}
		assert.InEpsilon(t, sum.TimeS, lt, 1e-9, js)
		assert.InEpsilon(t, sum.TimeS, sum.ComputeBoundTimeS+sum.MemoryBoundTimeS+sum.LaunchBoundTimeS, 1e-9)
		assert.LessOrEqual(t, sum.FLOPsUtilization, 1.0)
	}
}

func TestDecodeIsMemoryBoundTrainingComputeBound(t *testing.T) {
	tb := tables(runSpec(t, `{"kind":"operators","gpu":"a100-80gb-sxm","model":"llama2-7b","phase":"decode","batch":1,"kv_len":200}`))
	sum := tb["summary"].([]operators.SummaryRow)[0]
	// Batch-1 decode reads every weight once: at least weights / HBM bandwidth
	// (13.5 GB / 2.039 TB/s = 6.6 ms), and mostly memory-bound.
	assert.Greater(t, sum.TimeS, sum.WeightBytes/2.039e12)
	assert.Greater(t, sum.MemoryBoundTimeS, 0.5*sum.TimeS)
	t.Logf("llama2-7b decode step on A100, batch 1: %.2f ms", sum.TimeS*1e3)

	tb = tables(runSpec(t, `{"kind":"operators","gpu":"a100-80gb-sxm","model":"llama2-7b","batch":4,"seq_len":2048}`))
	sum = tb["summary"].([]operators.SummaryRow)[0]
	assert.Greater(t, sum.ComputeBoundTimeS, 0.5*sum.TimeS)
	t.Logf("llama2-7b training step (4×2048) on A100: %.0f ms, %.0f%% of peak", sum.TimeS*1e3, 100*sum.FLOPsUtilization)
}

// A what-if part changes what its figures bound: batch-1 decode is bound
// by HBM, so the H200's bandwidth on an H100 (4.8 against 3.35 TB/s) speeds
// it by less than their ratio (launches and L2-resident reads do not
// change) and a halved tensor rate barely moves it; training is bound by
// the tensor cores, so the same halving slows it by more than 1.3× but less
// than 2× (the optimizer and the streaming kernels do not change).
func TestWhatIfGPU(t *testing.T) {
	step := func(gpu, phase string) operators.SummaryRow {
		js := fmt.Sprintf(`{"kind":"operators","gpu":%s,"model":"llama2-7b","phase":%q,"batch":1,"kv_len":512,"seq_len":2048}`, gpu, phase)
		return tables(runSpec(t, js))["summary"].([]operators.SummaryRow)[0]
	}
	const (
		h100   = `"h100-sxm"`
		hbm3e  = `{"preset":"h100-sxm","hbm_bandwidth_bytes_per_s":4.8e12}`
		halved = `{"preset":"h100-sxm","name":"half-tensor","peak_bf16_flops_per_s":494.7e12,"peak_fp16_flops_per_s":494.7e12}`
	)
	base, faster := step(h100, "decode"), step(hbm3e, "decode")
	require.Equal(t, "h100-sxm*", faster.GPU)
	speedup := base.TimeS / faster.TimeS
	require.Greater(t, speedup, 1.2)
	require.Less(t, speedup, 4.8/3.35)
	require.InEpsilon(t, base.TimeS, step(halved, "decode").TimeS, 0.1)

	train, slow := step(h100, "training"), step(halved, "training")
	require.Equal(t, "half-tensor", slow.GPU)
	require.Greater(t, slow.TimeS/train.TimeS, 1.3)
	require.Less(t, slow.TimeS/train.TimeS, 2.0)
}

func TestCollectivesListed(t *testing.T) {
	tb := tables(runSpec(t, `{"kind":"operators","gpu":"h100-sxm","model":"llama2-7b","tp":4,"batch":1,"seq_len":1024}`))
	colls := tb["collectives"].([]operators.CollectiveRow)
	sum := tb["summary"].([]operators.SummaryRow)[0]
	require.NotEmpty(t, colls)
	total := 0.0
	for _, c := range colls {
		total += float64(c.Count) * c.PayloadBytes
	}
	assert.Equal(t, sum.TPCommBytes, total)
}

func TestSpecProblems(t *testing.T) {
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()},
		[]byte(`{"kind":"operators","gpu":"a100","model":"llama2-7x","phase":"train"}`))
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{"gpu:", "model:", `did you mean "llama2-7b"`} {
		assert.Contains(t, msg, want)
	}
	_, _, err = all.Run(scenario.Env{Ctx: context.Background()},
		[]byte(`{"kind":"operators","gpu":"a100-80gb-sxm","model":"llama2-7b","dtype":"fp8","tp":3,"phase":"train"}`))
	require.Error(t, err)
	msg = err.Error()
	for _, want := range []string{"dtype: a100-80gb-sxm has no fp8", "tp: must divide heads", "phase: must be one of"} {
		assert.Contains(t, msg, want)
	}
	_, _, err = all.Run(scenario.Env{Ctx: context.Background()},
		[]byte(`{"kind":"operators","gpu":"h100-sxm","model":{"family":"llama","layerz":2}}`))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "model.layerz"), err.Error())
	_, _, err = all.Run(scenario.Env{Ctx: context.Background()},
		[]byte(`{"kind":"operators","gpu":"h100-sxm","model":"mixtral-8x7b","moe_router_dtype":"bf8"}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `moe_router_dtype: must be one of ["fp32"], got "bf8"`)
}

func TestModelSpecRoundTrip(t *testing.T) {
	var s spec.Operators
	require.NoError(t, spec.Decode([]byte(`{"kind":"operators","gpu":"h100-sxm","model":{"preset":"llama2-7b","layers":2}}`), &s))
	c, ok := s.Model.Resolve()
	require.True(t, ok)
	assert.Equal(t, 2, c.Layers)
	assert.Equal(t, "AA", c.Pattern)
	assert.Equal(t, model.LLaMA, c.Family)
}

// Every preset on every GPU, phase, dtype the GPU has and TP degree it
// admits gives finite, positive times.
func TestSweepFinite(t *testing.T) {
	for _, gpu := range []string{"a100-40gb", "h100-pcie", "b200", "mi300x", "rtx-a6000", "l40s"} {
		for _, m := range model.Names() {
			for _, phase := range []string{"training", "prefill", "decode"} {
				for _, tp := range []int{1, 2, 16} {
					for _, dt := range []string{"bf16", "fp8", "fp32"} {
						js := fmt.Sprintf(`{"kind":"operators","gpu":%q,"model":%q,"phase":%q,"tp":%d,"dtype":%q,"batch":2,"seq_len":64,"kv_len":0}`,
							gpu, m, phase, tp, dt)
						_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
						if err != nil {
							var se *spec.Error
							require.ErrorAs(t, err, &se, js) // only spec problems (tp, dtype) may stop a run
							continue
						}
						sum := tables(res)["summary"].([]operators.SummaryRow)[0]
						require.True(t, sum.TimeS > 0 && !math.IsInf(sum.TimeS, 0), js)
						require.False(t, math.IsNaN(sum.FLOPsUtilization), js)
					}
				}
			}
		}
	}
}

// flash_attention_2 reprices only the attention's kernels: on an H100 they
// take longer, forward and backward, and a what-if part whose mma.sync runs
// at the full rate (sync_mma_fraction 1) prices them as the fused kernels;
// every other operator is unchanged.
func TestFlashAttention2Operators(t *testing.T) {
	ops := func(gpu, extra string) map[string]float64 {
		js := fmt.Sprintf(`{"kind":"operators","gpu":%s,"model":"llama2-7b","phase":"training","batch":1,"seq_len":4096%s}`, gpu, extra)
		m := map[string]float64{}
		for _, o := range tables(runSpec(t, js))["operators"].([]operators.OperatorRow) {
			m[o.Layer+" "+o.Op+" "+o.Pass] += o.TotalTimeS
		}
		return m
	}
	const fa2 = `,"flash_attention_2":true`
	fused, slow := ops(`"h100-sxm"`, ""), ops(`"h100-sxm"`, fa2)
	same := ops(`{"preset":"h100-sxm","sync_mma_fraction":1}`, fa2)
	require.Equal(t, len(fused), len(slow))
	attention := 0
	for op, s := range fused {
		if strings.Contains(op, "attn.flash") {
			attention++
			assert.Greater(t, slow[op], 1.2*s, op)
		} else {
			assert.Equal(t, s, slow[op], op)
		}
		assert.InEpsilon(t, s, same[op], 1e-12, op)
	}
	assert.GreaterOrEqual(t, attention, 2, "forward and backward attention")
}
