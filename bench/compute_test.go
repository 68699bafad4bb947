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
