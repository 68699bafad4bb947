package seedflood

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/stretchr/testify/require"
)

// testConfig is a small synthetic task: 10 classes, 20 features, IID shards.
func testConfig(t *testing.T, g *Graph, hidden []int, rank int) *Config {
	t.Helper()
	data := SyntheticDataset(rng.Stream(7, "data"), 2000, 20, 10, 0.5)
	train, test := data.Split(rng.Stream(7, "split"), 0.25)
	m, err := NewModel(20, 10, hidden)
	require.NoError(t, err)
	return &Config{
		Graph: g, Model: m, Train: train, Test: test,
		Shards: PartitionIID(rng.Stream(7, "partition"), train, g.NumNodes()),
		Init:   m.Init(rng.Stream(7, "init")),
		Steps:  200, BatchSize: 16, EvalEvery: 50,
		LearningRate: 0.01, FirstOrderLearningRate: 0.1,
		ZO:            ZOConfig{Seed: 7, Epsilon: 1e-3, Rank: rank, RefreshEvery: 10},
		Perturbations: 1, StepsPerHop: 1,
		ChocoFraction: 0.1, ChocoGamma: 0.2,
	}
}

// must unwraps a builder's result in tests; an error is a test bug.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
