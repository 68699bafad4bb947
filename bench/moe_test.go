package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
)

// deepseekV3Step is one DeepSeek-V3 training step as its report lays it out
// (DeepSeek-AI 2024, arXiv 2412.19437, §3.2-3.3): 2,048 H800s (256 nodes),
// PP 16, EP 64 over 8 nodes, ZeRO-1 data parallelism, no TP, FP8 GEMMs,
// sequence 4,096, batch 15,360 sequences (the batch after its ramp-up,
// §4.2). DualPipe is not modelled: the schedule is 1F1B, and the
// dispatch/combine are not overlapped with compute (Megatron-Core).
func deepseekV3Step(tb testing.TB, extra string) training.SummaryRow {
	js := fmt.Sprintf(`{"kind":"training","model":"deepseek-v3","gpu":"h800",
		"cluster":{"preset":"dgx-h800","nodes":256},
		"parallel":{"tp":1,"pp":16,"dp":128,"ep":64,"micro_batch":1,"global_batch":15360,"zero":1,"recompute":"full"},
		"seq_len":4096,"dtype":"fp8","timeline_ranks":[-1]%s}`, extra)
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	if err != nil {
		tb.Fatal(err)
	}
	return res.Tables[0].Rows.([]training.SummaryRow)[0]
}

// mixtralStep is one Mixtral-8x7B step on 1,024 H100s (128 DGX H100
// nodes): EP 8 inside a node, PP 4, data parallel 256, sequence 4,096,
// global batch 1,024 sequences, bf16, ZeRO-1.
func mixtralStep(tb testing.TB, extra string) training.SummaryRow {
	js := fmt.Sprintf(`{"kind":"training","model":"mixtral-8x7b","gpu":"h100-sxm",
		"cluster":{"preset":"dgx-h100","nodes":128},
		"parallel":{"tp":1,"pp":4,"dp":256,"ep":8,"micro_batch":1,"global_batch":1024,"zero":1,"recompute":"full"},
		"seq_len":4096,"timeline_ranks":[-1]%s}`, extra)
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	if err != nil {
		tb.Fatal(err)
	}
	return res.Tables[0].Rows.([]training.SummaryRow)[0]
}

// BenchmarkMoETraining: the two MoE training steps with balanced routing
// (one pipeline simulated, the EP groups' all-to-alls as flows over every
// member). A seeded uniform draw makes every EP rank differ and simulates
// all 64·16 ranks of an EP group: about 30 s for DeepSeek-V3.
// Run: go test ./bench -run '^$' -bench MoETraining -benchtime 1x
func BenchmarkMoETraining(b *testing.B) {
	for _, tc := range []struct {
		name string
		step func(testing.TB, string) training.SummaryRow
		ext  string
	}{
		{"deepseek-v3/gpus=2048", deepseekV3Step, ""},
		{"mixtral-8x7b/gpus=1024", mixtralStep, ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var s training.SummaryRow
			for i := 0; i < b.N; i++ {
				s = tc.step(b, tc.ext)
			}
			b.ReportMetric(s.StepTimeS, "sim_step_s")
			b.ReportMetric(s.MFU, "mfu")
			b.ReportMetric(float64(s.SimulatedRanks), "simulated_ranks")
			b.ReportMetric(s.MemoryPeakBytes/1e9, "mem_peak_gb")
		})
	}
}
