package all_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
)

// summaryValue is the first summary row's column tag of a run.
func summaryValue(t *testing.T, res scenario.Result, tag string) float64 {
	t.Helper()
	for _, tb := range res.Tables {
		if tb.Name != "summary" {
			continue
		}
		row := reflect.ValueOf(tb.Rows).Index(0)
		var v float64
		found := false
		columns(row.Type(), nil, nil, func(idx []int) {
			if f := row.Type().FieldByIndex(idx); f.Tag.Get("arrow") == tag {
				v, found = row.FieldByIndex(idx).Float(), true
			}
		})
		require.True(t, found, "no summary column %s", tag)
		return v
	}
	t.Fatal("no summary table")
	return 0
}

// A faster part never makes a run slower: the same spec on an A100 with
// half again its memory bandwidth, its tensor rates and its L2 bandwidth
// and half its kernel launch time takes no longer, in training (one node
// and two, pipelined and data-parallel), inference and serving (its mean
// latency; the batches a faster engine forms may differ).
func TestFasterGPUIsNeverSlower(t *testing.T) {
	a100, _ := hw.GPUByName("a100-80gb-sxm")
	faster := map[string]any{"preset": "a100-80gb-sxm", "hbm_bandwidth_bytes_per_s": 1.5 * a100.HBMBandwidthBytesPerS,
		"peak_bf16_flops_per_s": 1.5 * a100.PeakBF16FlopsPerS, "peak_fp16_flops_per_s": 1.5 * a100.PeakFP16FlopsPerS,
		"l2_bandwidth_bytes_per_s": 1.5 * a100.L2BandwidthBytesPerS, "kernel_launch_s": a100.KernelLaunchS / 2}
	for _, c := range []struct {
		name, doc, column string
		slack             float64
	}{
		{"training", minimal["training"], "step_time_s", 0},
		{"training, two nodes", trainingSpec(2, `"tp":4,"pp":2,"global_batch":16,"zero":1,"overlap_grad_reduce":true`, ""), "step_time_s", 0},
		{"inference", minimal["inference"], "e2e_s", 0},
		{"serving", minimal["serving"], "e2e_s_mean", 0.01},
	} {
		run := func(gpu any) float64 {
			var doc map[string]any
			require.NoError(t, json.Unmarshal([]byte(c.doc), &doc))
			doc["gpu"] = gpu
			js, err := json.Marshal(doc)
			require.NoError(t, err)
			_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, js)
			require.NoError(t, err, string(js))
			return summaryValue(t, res, c.column)
		}
		base, fast := run("a100-80gb-sxm"), run(faster)
		require.Positive(t, fast, c.name)
		require.LessOrEqual(t, fast, base*(1+c.slack), "%s: %s %g on the faster part, %g on the A100", c.name, c.column, fast, base)
		require.Less(t, fast, base, "%s: the faster part changed nothing", c.name)
	}
}
