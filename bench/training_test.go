package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/parallelsearch"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
)

// gpt3Step is one GPT-3 175B training step (Narayanan et al. 2021, Table 1:
// TP 8, PP 8, global batch 1536, micro-batch 1) on `nodes` DGX A100 nodes
// with congestion, data parallel over the rest; faults is a JSON fragment.
func gpt3Step(b *testing.B, nodes int, extra string) training.SummaryRow {
	js := fmt.Sprintf(`{"kind":"training","model":"gpt3-175b","gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":%d},
		"parallel":{"tp":8,"pp":8,"micro_batch":1,"global_batch":1536,"sequence_parallel":true,"recompute":"selective"},
		"seq_len":2048%s}`, nodes, extra)
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	if err != nil {
		b.Fatal(err)
	}
	return res.Tables[0].Rows.([]training.SummaryRow)[0]
}

// BenchmarkTrainingGPT3: one step on 1,024 and 8,192 A100s, healthy and
// with one degraded NIC link (health 0.5) that breaks the symmetry.
// Run: go test ./bench -run '^$' -bench TrainingGPT3 -benchtime 1x
func BenchmarkTrainingGPT3(b *testing.B) {
	for _, tc := range []struct {
		name   string
		nodes  int
		faults string
	}{
		{"gpus=1024", 128, ""},
		{"gpus=1024/degraded_link", 128, `,"faults":{"links":[{"src":"n37.nic3","dst":"rail3.leaf1","health":0.5}]}`},
		{"gpus=1024/degraded_link/full_simulation", 128, `,"faults":{"links":[{"src":"n37.nic3","dst":"rail3.leaf1","health":0.5}]},"full_simulation":true`},
		{"gpus=8192", 1024, ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var s training.SummaryRow
			for i := 0; i < b.N; i++ {
				s = gpt3Step(b, tc.nodes, tc.faults)
			}
			b.ReportMetric(s.StepTimeS, "sim_step_s")
			b.ReportMetric(s.MFU, "mfu")
			b.ReportMetric(float64(s.SimulatedRanks), "simulated_ranks")
			b.ReportMetric(float64(s.NetCollectives), "net_collectives")
		})
	}
}

// scaleStep runs one training step spec and reports its simulated step
// time, simulated ranks and the process's memory from the OS (MemStats.Sys:
// the most the Go runtime has held, so run one sub-benchmark per process
// for its own peak).
func scaleStep(b *testing.B, js string) {
	var s training.SummaryRow
	for i := 0; i < b.N; i++ {
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		if err != nil {
			b.Fatal(err)
		}
		s = res.Tables[0].Rows.([]training.SummaryRow)[0]
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(s.StepTimeS, "sim_step_s")
	b.ReportMetric(float64(s.SimulatedRanks), "simulated_ranks")
	b.ReportMetric(float64(ms.Sys)/(1<<30), "sys_GiB")
}

// BenchmarkTrainingScale: the largest clusters built. GPT-3 175B (TP 8,
// PP 8, micro-batch 1, 1,536 sequences per 1,024 GPUs) from 1,024 to 65,536
// A100s; Llama 3.1 405B as Meta trained it on 16,384 H100s (Dubey et al.
// 2024, Table 4: TP 8, PP 16, DP 128, sequence 8,192, 16 sequences per
// data-parallel rank, i.e. 2,048 per step), healthy and with one degraded
// cable, which breaks the replicas' symmetry; and a small model's many
// replicas: Llama 2 7B at TP 4, PP 2 on 131,072 A100s (16,384 nodes, one
// replica a node), whose set-up routes every replica's rings through the
// fabric.
// Run one per process: go test ./bench -run '^$' -bench 'TrainingScale/gpt3/gpus=65536$' -benchtime 1x
func BenchmarkTrainingScale(b *testing.B) {
	gpt3 := func(nodes int) string {
		return fmt.Sprintf(`{"kind":"training","model":"gpt3-175b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":%d},
			"parallel":{"tp":8,"pp":8,"micro_batch":1,"global_batch":%d,"sequence_parallel":true,"recompute":"selective"},"seq_len":2048}`,
			nodes, 12*nodes)
	}
	for _, nodes := range []int{128, 1024, 2048, 8192} {
		b.Run(fmt.Sprintf("gpt3/gpus=%d", 8*nodes), func(b *testing.B) { scaleStep(b, gpt3(nodes)) })
	}
	llama := func(faults string) string {
		return `{"kind":"training","model":"llama3-405b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":2048},
			"parallel":{"tp":8,"pp":16,"micro_batch":1,"global_batch":2048,"sequence_parallel":true},"seq_len":8192,"dtype":"bf16"` + faults + `}`
	}
	b.Run("llama3-405b/gpus=16384", func(b *testing.B) { scaleStep(b, llama("")) })
	b.Run("llama2-7b/gpus=131072", func(b *testing.B) {
		scaleStep(b, `{"kind":"training","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":16384},
			"parallel":{"tp":4,"pp":2,"micro_batch":1,"global_batch":131072},"seq_len":2048}`)
	})
	b.Run("llama3-405b/gpus=16384/degraded_cable", func(b *testing.B) {
		scaleStep(b, llama(`,"faults":{"links":[{"src":"n1000.nic3","dst":"rail3.leaf31","health":0.25}]}`))
	})
}

// searchBench runs one layout search per iteration and reports its layouts,
// how many were simulated (and did not fit) and the best step.
func searchBench(b *testing.B, js string) {
	var rows []parallelsearch.ConfigRow
	for i := 0; i < b.N; i++ {
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		if err != nil {
			b.Fatal(err)
		}
		rows = res.Tables[0].Rows.([]parallelsearch.ConfigRow)
	}
	count := map[string]int{}
	for _, r := range rows {
		count[r.Status]++
	}
	b.ReportMetric(float64(len(rows)), "layouts")
	b.ReportMetric(float64(count[parallelsearch.Simulated]), "simulated")
	b.ReportMetric(float64(count[parallelsearch.DoesNotFit]), "do_not_fit")
	if len(rows) > 0 && rows[0].StepTimeS != nil {
		b.ReportMetric(*rows[0].StepTimeS, "best_step_s")
	}
}

// BenchmarkParallelSearch: every layout of GPT-3 175B on 1,024 A100s for a
// global batch of 1,536 (the top 10 simulated exactly).
// Run: go test ./bench -run '^$' -bench ParallelSearch -benchtime 1x
func BenchmarkParallelSearch(b *testing.B) {
	searchBench(b, `{"kind":"parallel_search","model":"gpt3-175b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":128},
		"global_batch":1536,"seq_len":2048}`)
}

// BenchmarkParallelSearchScale: the layout search on 8,192 GPUs for GPT-3
// 175B (A100, 12,288 sequences of 2,048) and Llama 3.1 405B (H100, 1,024
// sequences of 8,192).
// Run: go test ./bench -run '^$' -bench ParallelSearchScale -benchtime 1x
func BenchmarkParallelSearchScale(b *testing.B) {
	b.Run("gpt3/gpus=8192", func(b *testing.B) {
		searchBench(b, `{"kind":"parallel_search","model":"gpt3-175b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1024},
			"global_batch":12288,"seq_len":2048}`)
	})
	b.Run("llama3-405b/gpus=8192", func(b *testing.B) {
		searchBench(b, `{"kind":"parallel_search","model":"llama3-405b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1024},
			"global_batch":1024,"seq_len":8192,"dtype":"bf16"}`)
	})
}
