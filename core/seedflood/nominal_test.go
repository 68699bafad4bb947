package seedflood

import (
	"math"
	"testing"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/stretchr/testify/require"
)

// padded returns d with every row extended by zeros to width features: the
// explicit form of data that occupy the first d.Features of features axes.
func padded(d *Dataset, features int) *Dataset {
	out := &Dataset{Features: features, Classes: d.Classes, Y: append([]int(nil), d.Y...), X: make([]float32, d.Samples()*features)}
	for i := 0; i < d.Samples(); i++ {
		copy(out.X[i*features:], d.Row(i))
	}
	return out
}

// paddedParams widens a reduced parameter vector to the explicit model's:
// the first layer's kept rows and bias in place, the other rows filled.
func paddedParams(reduced, explicit *Model, theta []float32, fill float32) []float32 {
	out := make([]float32, explicit.NumParams())
	for l := range explicit.Layers {
		src, dst := reduced.Matrix(theta, l), explicit.Matrix(out, l)
		if l > 0 {
			copy(dst, src)
			continue
		}
		s, e := reduced.Layers[0], explicit.Layers[0]
		for i := range dst {
			dst[i] = fill
		}
		copy(dst, src[:s.In*s.Out])
		copy(dst[e.In*e.Out:], src[s.In*s.Out:])
	}
	return out
}

// A model kept on the rows its data meet (WithNominalInput) trains exactly
// as the explicit model whose extra inputs are zero in every row: the same
// held-out loss and accuracy at every evaluation, bit for bit, for every
// method it allows, softmax and MLP, SubCGE's and dense first-order updates.
// Bytes are the explicit model's. Fails if the first layer's SubCGE basis is
// drawn over the kept rows only, or the bytes count the kept parameters.
func TestNominalInputMatchesPaddedModel(t *testing.T) {
	// k is a multiple of 4 so dot's four partial sums take the kept inputs
	// in the same order for either width (the zeros add nothing).
	const k, wide = 8, 37
	latent := SyntheticDataset(rng.Stream(3, "data"), 600, k, 4, 1.0)
	train, test := latent.Split(rng.Stream(3, "split"), 0.25)
	g := must(RingGraph(8))
	shards := PartitionIID(rng.Stream(3, "partition"), train, g.NumNodes())
	for _, hidden := range [][]int{nil, {5}} {
		reduced := must(NewModel(k, 4, hidden))
		require.NoError(t, reduced.WithNominalInput(wide))
		explicit := must(NewModel(wide, 4, hidden))
		require.Equal(t, explicit.NumParams(), reduced.NominalParams())
		init := reduced.Init(rng.Stream(3, "init"))
		cfg := func(m *Model, tr, te *Dataset, init []float32) *Config {
			return &Config{
				Graph: g, Model: m, Train: tr, Test: te, Shards: shards, Init: init,
				Steps: 30, BatchSize: 8, EvalEvery: 5,
				LearningRate: 0.05, FirstOrderLearningRate: 0.1,
				ZO:            ZOConfig{Seed: 11, Epsilon: 1e-3, Rank: 3, RefreshEvery: 4},
				Perturbations: 2, StepsPerHop: 1,
			}
		}
		small := cfg(reduced, train, test, init)
		big := cfg(explicit, padded(train, wide), padded(test, wide), paddedParams(reduced, explicit, init, 0.25))
		for _, method := range []string{MethodSeedFlood, MethodDSGD, MethodDZSGD, MethodMeZO} {
			a, err := Run(small, method)
			require.NoError(t, err)
			b, err := Run(big, method)
			require.NoError(t, err)
			require.Len(t, a.History, len(b.History))
			for i := range a.History {
				require.Equal(t, b.History[i].Loss, a.History[i].Loss, "%s hidden %v eval %d", method, hidden, i)
				require.Equal(t, b.History[i].Accuracy, a.History[i].Accuracy, "%s hidden %v eval %d", method, hidden, i)
			}
			require.Equal(t, b.TotalBytes, a.TotalBytes, method)
			require.Less(t, a.History[len(a.History)-1].Loss, a.History[0].Loss, "%s must learn", method)
		}
	}
}

// He initialization of a kept first layer uses the nominal fan-in, and the
// model refuses what is not rotation-equivariant.
func TestNominalInputInitAndRefusals(t *testing.T) {
	m := must(NewModel(8, 10, nil))
	require.Error(t, m.WithNominalInput(7))
	require.NoError(t, m.WithNominalInput(80_000))
	require.Equal(t, 80_001*10, m.NominalParams())
	require.Equal(t, 9*10, m.NumParams())
	w := m.Init(rng.Stream(1, "init"))
	sq := 0.0
	for _, v := range w[:80] {
		sq += float64(v) * float64(v)
	}
	require.InDelta(t, 2.0/80_000, sq/80, 1.0/80_000, "variance of N(0, 2/fan-in)")
	cfg := testConfig(t, must(RingGraph(4)), nil, 2)
	latent := SyntheticDataset(rng.Stream(7, "data"), 200, 8, 10, 0.5)
	cfg.Train, cfg.Test = latent.Split(rng.Stream(7, "split"), 0.25)
	cfg.Shards = PartitionIID(rng.Stream(7, "partition"), cfg.Train, 4)
	cfg.Model, cfg.Init, cfg.Steps = m, w, 2
	_, err := Run(cfg, MethodChoco)
	require.ErrorContains(t, err, "rotation")
	cfg.ZO.Rademacher = true
	_, err = Run(cfg, MethodSeedFlood)
	require.ErrorContains(t, err, "rotation")
	_, err = Run(cfg, MethodDSGD)
	require.NoError(t, err, "first-order gossip ignores the perturbation kind")
}

// orthogonal is Gram–Schmidt of the key's Gaussian draws, column by column,
// each column from its own draws: the columns are orthogonal with norm
// sqrt(rows/r), and the first a+1 of them span the first a+1 draw columns.
// (An earlier version read later columns' draws from the buffer it was
// writing the output into, so most of the last columns were copies of the
// first: still orthonormal, no longer a uniformly random subspace.)
func TestOrthogonalIsGramSchmidtOfTheDraws(t *testing.T) {
	for _, c := range []struct{ rows, r int }{{9, 4}, {37, 3}, {100, 8}} {
		got, _ := orthogonal(5, c.rows, c.r)
		g := make([]float32, c.rows*c.r)
		newNoise(5).fill(g, false)
		col := func(a int) []float64 {
			v := make([]float64, c.rows)
			for i := range v {
				v[i] = float64(got[a*c.rows+i]) / math.Sqrt(float64(c.rows)/float64(c.r))
			}
			return v
		}
		for a := 0; a < c.r; a++ {
			draw := make([]float64, c.rows)
			sq := 0.0
			for i := range draw {
				draw[i] = float64(g[i*c.r+a])
				sq += draw[i] * draw[i]
			}
			for b := 0; b < c.r; b++ {
				u, dot := col(b), 0.0
				for i := range u {
					dot += u[i] * col(a)[i]
				}
				want := 0.0
				if a == b {
					want = 1
				}
				require.InDelta(t, want, dot, 1e-5, "rows %d r %d columns %d·%d", c.rows, c.r, a, b)
			}
			for b := 0; b <= a; b++ { // remove draw a's part in span(columns 0..a)
				u, dot := col(b), 0.0
				for i := range u {
					dot += u[i] * draw[i]
				}
				for i := range u {
					draw[i] -= dot * u[i]
				}
			}
			rest := 0.0
			for _, v := range draw {
				rest += v * v
			}
			require.Less(t, rest, 1e-9*sq, "rows %d r %d: draw column %d is not in the span of output columns 0..%d", c.rows, c.r, a, a)
		}
	}
}
