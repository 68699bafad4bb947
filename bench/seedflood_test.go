package bench

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	sfscen "github.com/eidolon-sim/eidolon/core/scenario/seedflood"
	sf "github.com/eidolon-sim/eidolon/core/seedflood"
)

// The benchmark: 128 clients, a model of at least 1M parameters,
// 500 steps of SeedFlood with SubCGE. Clients sit on an 8×16 torus
// (diameter 12); the model is an MLP on MNIST-sized synthetic inputs,
// 784→1300→10 (1,033,510 parameters), trained with batch 1.
const (
	sfClients  = 128
	sfFeatures = 784
	sfHidden   = 1300
	sfSteps    = 500
	sfRank     = 4
	sfRefresh  = 10
)

func seedfloodConfig(b *testing.B, steps int) *sf.Config {
	g, err := sf.TorusGridGraph(8, 16)
	if err != nil {
		b.Fatal(err)
	}
	data := sf.SyntheticDataset(rng.Stream(1, "data"), 4096, sfFeatures, 10, 0.1)
	train, test := data.Split(rng.Stream(1, "split"), 0.25)
	m, err := sf.NewModel(sfFeatures, 10, []int{sfHidden})
	if err != nil {
		b.Fatal(err)
	}
	return &sf.Config{
		Graph: g, Model: m, Train: train, Test: test,
		Shards: sf.PartitionIID(rng.Stream(1, "partition"), train, g.NumNodes()),
		Init:   m.Init(rng.Stream(1, "init")),
		Steps:  steps, BatchSize: 1, EvalEvery: steps,
		LearningRate: 1e-3, FirstOrderLearningRate: 0.1,
		ZO:            sf.ZOConfig{Seed: 1, Epsilon: 1e-3, Rank: sfRank, RefreshEvery: sfRefresh},
		Perturbations: 1, StepsPerHop: 1,
	}
}

// BenchmarkSeedfloodTrain128Clients1M runs the whole training (run it once:
// -benchtime 1x). Metrics are per run.
func BenchmarkSeedfloodTrain128Clients1M(b *testing.B) {
	cfg := seedfloodConfig(b, sfSteps)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := sf.Run(cfg, sf.MethodSeedFlood)
		if err != nil {
			b.Fatal(err)
		}
		clientSteps := float64(sfClients * sfSteps)
		b.ReportMetric(float64(cfg.Model.NumParams()), "params")
		b.ReportMetric(float64(out.Counters.ApplyMadds)/clientSteps, "apply-madds/client-step")
		b.ReportMetric(float64(out.Counters.ForwardMadds)/clientSteps, "forward-madds/client-step")
		b.ReportMetric(float64(out.TotalBytes)/clientSteps, "bytes/client-step")
		b.ReportMetric(out.History[len(out.History)-1].Accuracy, "accuracy")
	}
}

// BenchmarkSeedfloodApplyStep measures one client applying the 128 messages
// of one step to the 1M-parameter model, densely and with SubCGE (rank 4,
// projection every 10 steps, amortized here by running 10 steps per op).
func BenchmarkSeedfloodApplyStep(b *testing.B) {
	cfg := seedfloodConfig(b, 1)
	for _, c := range []struct {
		name string
		rank int
	}{{"dense", 0}, {"subcge_r4", sfRank}} {
		b.Run(c.name, func(b *testing.B) {
			zc := cfg.ZO
			zc.Rank = c.rank
			a := sf.NewApplier(cfg.Model, zc, cfg.Init)
			var madds int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for s := 0; s < sfRefresh; s++ {
					madds += a.ApplyStep(sfClients, 1e-3)
				}
			}
			b.ReportMetric(float64(madds)/float64(b.N*sfRefresh), "madds/step")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sfRefresh), "ns/step")
		})
	}
}

// sfFineTune is notebook 06's default (keep the two equal): fine-tuning a
// model pre-trained on a shifted source task, 128 clients of a ring.
const sfFineTune = `{"kind": "seedflood", "seed": 1,
	"topology": {"kind": "ring", "clients": 128}, "model": {"kind": "softmax"},
	"dataset": {"n_features": 256, "latent_dim": 8, "classes": 10, "class_separation": 1.0},
	"pretrain": {"kind": "source", "steps": 300, "shift": 0.5},
	"methods": ["seedflood", "dsgd"], "steps": 200, "eval_every_steps": 10,
	"learning_rate": 0.01, "first_order_learning_rate": 0.1, "link": "eth-100g", "step_time_s": 0.1}`

// BenchmarkSeedfloodFineTuneClaim runs the notebook's default claim once
// (-benchtime 1x) and reports SeedFlood's accuracy against DSGD's and the
// bytes ratios, in the run and projected to 1.3B parameters.
func BenchmarkSeedfloodFineTuneClaim(b *testing.B) {
	for b.Loop() {
		_, res, err := all.Run(scenario.Env{}, []byte(sfFineTune))
		if err != nil {
			b.Fatal(err)
		}
		sum := res.Tables[1].Rows.([]sfscen.SummaryRow)
		reach := res.Tables[3].Rows.([]sfscen.BytesToAccuracyRow)
		seed, dsgd := sum[0], sum[1]
		b.ReportMetric(seed.FinalAccuracy, "seedflood-accuracy")
		b.ReportMetric(dsgd.FinalAccuracy, "dsgd-accuracy")
		b.ReportMetric(seed.FinalAccuracy/dsgd.FinalAccuracy, "accuracy-ratio")
		b.ReportMetric(float64(seed.TotalBytes)/float64(dsgd.TotalBytes), "bytes-ratio")
		if reach[0].Reached && reach[1].Reached {
			b.ReportMetric(*reach[0].ProjectedBytes / *reach[1].ProjectedBytes, "bytes-to-target-ratio-1.3B")
		}
	}
}
