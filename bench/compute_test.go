package bench

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// stepOps is every compute operator of one training step of a model on one
// rank, as the workload builder would hand them over.
func stepOps(b *testing.B, name string, tp int) []model.Op {
	c, ok := model.ByName(name)
	if !ok {
		b.Fatalf("no model %s", name)
	}
	g, err := model.Build(c, model.Run{Phase: model.Training, Batch: 1, SeqLen: 4096, TP: tp, DType: hw.BF16})
	if err != nil {
		b.Fatal(err)
	}
	var ops []model.Op
	for _, blk := range g.Blocks {
		for _, list := range [][]model.Op{blk.Forward, blk.Backward, blk.Optimizer} {
			for _, o := range list {
				if !o.IsComm() {
					ops = append(ops, o)
				}
			}
		}
	}
	return ops
}

// BenchmarkComputeOperatorsCold prices distinct GEMM shapes with a fresh
// evaluator each time, so every op runs the full tile search; reports ops/s.
func BenchmarkComputeOperatorsCold(b *testing.B) {
	h100, _ := hw.GPUByName("h100-sxm")
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := compute.NewEvaluator(h100)
		m := int64(64 + 64*(i%256))
		if _, err := e.Op(model.NewGEMM("g", hw.BF16, 1, m, 8192, 8192)); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkComputeLlama70BTrainingStep prices a whole LLaMA-2-70B training
// step's operators (TP 8, micro-batch 1 × 4,096 tokens: all distinct block
// ops with their counts) with a fresh evaluator (tile searches included),
// and the model's op generation.
func BenchmarkComputeLlama70BTrainingStep(b *testing.B) {
	h100, _ := hw.GPUByName("h100-sxm")
	c, _ := model.ByName("llama2-70b")
	run := model.Run{Phase: model.Training, Batch: 1, SeqLen: 4096, TP: 8, DType: hw.BF16}
	ops := len(stepOps(b, "llama2-70b", 8))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := model.Build(c, run)
		if err != nil {
			b.Fatal(err)
		}
		e := compute.NewEvaluator(h100)
		total := 0.0
		for _, blk := range g.Blocks {
			for _, list := range [][]model.Op{blk.Forward, blk.Backward, blk.Optimizer} {
				t, err := e.Time(list)
				if err != nil {
					b.Fatal(err)
				}
				total += float64(blk.Count) * t
			}
		}
		if total <= 0 {
			b.Fatal("no time")
		}
	}
	b.ReportMetric(float64(ops), "distinct_ops")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
}

// passTime is the compute time of one pass of a model on one rank: every
// block's forward, backward and optimizer operators times its count
// (collectives excluded).
func passTime(t testing.TB, e *compute.Evaluator, c model.Config, r model.Run) float64 {
	g, err := model.Build(c, r)
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, blk := range g.Blocks {
		for _, list := range [][]model.Op{blk.Forward, blk.Backward, blk.Optimizer} {
			s, err := e.Time(list)
			if err != nil {
				t.Fatal(err)
			}
			total += float64(blk.Count) * s
		}
		s, err := e.Time(blk.SharedOptimizer)
		if err != nil {
			t.Fatal(err)
		}
		total += s
	}
	return total
}

// TestFidelityCompute logs the compute model against published figures
// (shared/reference/README.md and the FlashAttention-2 paper). It asserts
// nothing about closeness: it is a report (make bench).
func TestFidelityCompute(t *testing.T) {
	a100, _ := hw.GPUByName("a100-80gb-sxm")
	e := compute.NewEvaluator(a100)
	t.Logf("%-58s %12s %12s %8s", "case", "published", "model", "error")
	row := func(name string, published, got float64) {
		t.Logf("%-58s %12.4g %12.4g %+7.1f%%", name, published, got, 100*(got/published-1))
		if !(got > 0) {
			t.Errorf("%s: model gives %v", name, got)
		}
	}

	// Llama-2-7B on one A100, batch 1: 200-token prompt, then 200 generated
	// tokens (RAPID-LLM validation set, TP1: 2.19 s end to end).
	llama, _ := model.ByName("llama2-7b")
	total := passTime(t, e, llama, model.Run{Phase: model.Prefill, Batch: 1, SeqLen: 200, DType: hw.BF16})
	for kv := 200; kv < 400; kv++ {
		total += passTime(t, e, llama, model.Run{Phase: model.Decode, Batch: 1, KVLen: kv, DType: hw.BF16})
	}
	row("llama2-7b A100 TP1 200+200 tokens, s", 2.19, total)

	// FlashAttention-2 forward on A100 (Dao 2023, arXiv 2307.08691): 50–73%
	// of the peak, the upper end at long sequences; head dim 128, 16k tokens, 16 heads.
	fa := model.NewFlashAttention("fa", hw.BF16, 1, 16, 16, 16384, 16384, 128, false)
	c, _ := e.Op(fa)
	row("FlashAttention-2 fwd A100 d=128 s=16k, fraction of peak", 0.73, c.AchievedFLOPsPerS/a100.PeakBF16FlopsPerS)

	// Korthikanti et al. 2022 Table 5, 22B, TP 8, batch 4 × 2048, full
	// recompute: 1.42 s per iteration (compute here; TP all-reduces excluded).
	gpt22, _ := model.ByName("gpt-22b")
	row("gpt-22b TP8 full recompute, compute only, s", 1.42,
		passTime(t, e, gpt22, model.Run{Phase: model.Training, Batch: 4, SeqLen: 2048, TP: 8, DType: hw.FP16,
			Recompute: model.RecomputeFull, UnfusedAttention: true}))
	row("gpt-22b TP8 SP + selective recompute, compute only, s", 1.10,
		passTime(t, e, gpt22, model.Run{Phase: model.Training, Batch: 4, SeqLen: 2048, TP: 8, DType: hw.FP16,
			SequenceParallel: true, Recompute: model.RecomputeSelective, UnfusedAttention: true}))
}
