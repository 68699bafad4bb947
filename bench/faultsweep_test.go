package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/faultsweep"
)

// gpt3FaultSweep: random single-cable faults on a GPT-3 175B step (the
// layout of gpt3Step) over `nodes` DGX A100 nodes: `cables` cables drawn
// from all of them, each alone degraded to half and alone failed, so
// 2·cables single-fault samples, every one fully simulated.
func gpt3FaultSweep(b *testing.B, nodes, cables int) faultsweep.SummaryRow {
	js := fmt.Sprintf(`{"kind":"fault_sweep","seed":1,"mode":"single_link","cables":%d,"degraded_health":0.5,
		"training":{"model":"gpt3-175b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":%d},
		"parallel":{"tp":8,"pp":8,"micro_batch":1,"global_batch":%d,"sequence_parallel":true,"recompute":"selective"},
		"seq_len":2048,"timeline_ranks":[-1]}}`, cables, nodes, 12*nodes)
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	if err != nil {
		b.Fatal(err)
	}
	return res.Tables[2].Rows.([]faultsweep.SummaryRow)[0]
}

// BenchmarkFaultSweepGPT3: 300 single-fault samples of a 1,024-GPU step
// (global batch 1536, as gpt3Step), and a small 64-GPU sweep.
// Run: go test ./bench -run '^$' -bench FaultSweepGPT3 -benchtime 1x -timeout 30m
func BenchmarkFaultSweepGPT3(b *testing.B) {
	for _, tc := range []struct {
		name          string
		nodes, cables int
	}{
		{"gpus=64/samples=20", 8, 10},
		{"gpus=1024/samples=300", 128, 150},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var s faultsweep.SummaryRow
			for i := 0; i < b.N; i++ {
				s = gpt3FaultSweep(b, tc.nodes, tc.cables)
			}
			b.ReportMetric(float64(s.Samples), "samples")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N*s.Samples), "wall_s/sample")
			b.ReportMetric(s.FailedShare, "failed_share")
			b.ReportMetric(s.HealthyStepTimeS, "healthy_step_s")
			if s.SlowdownP50 != nil {
				b.ReportMetric(*s.SlowdownP50, "slowdown_p50")
				b.ReportMetric(*s.SlowdownP99, "slowdown_p99")
				b.ReportMetric(*s.SlowdownMax, "slowdown_max")
			}
		})
	}
}
