package seedflood

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The two-point estimate is a central difference, so for small ε it must
// match the directional derivative ⟨∇L, z⟩ computed by backpropagation,
// both for dense z and for SubCGE's z = U·C·Vᵀ (materialized by projecting
// C into a zero parameter vector). Softmax regression is smooth: 2%. The
// MLP's ReLU kinks, crossed by some rows at ε, allow 10%.
func TestEstimateMatchesDirectionalDerivative(t *testing.T) {
	for _, rank := range []int{0, 3} {
		for _, hidden := range [][]int{nil, {16}} {
			cfg := testConfig(t, must(RingGraph(4)), hidden, rank)
			cfg.ZO.Epsilon = 1e-3
			var cnt Counters
			z := newZO(cfg.Model, cfg.ZO, cfg.BatchSize, &cnt)
			rows := cfg.Shards[0][:cfg.BatchSize]
			d := cfg.Model.NumParams()
			grad := make([]float32, d)
			cfg.Model.gradient(cfg.Init, grad, cfg.Train, rows, cfg.Model.newWorkspace(cfg.BatchSize))
			key := PerturbKey(1, 2, 3, 0)
			client := &zoClient{theta: append([]float32(nil), cfg.Init...)}
			g := z.estimate(client, key, 3, cfg.Train, rows)

			// Rebuild z: apply the message with lr = −1 to a zero model (θ += g·z),
			// settle, divide by g.
			zero := &zoClient{theta: make([]float32, d)}
			z.apply(zero, key, 3, 1, -1)
			if rank > 0 {
				z.settle(zero, 3/cfg.ZO.RefreshEvery, false)
			}
			dot := 0.0
			for i := range grad {
				dot += float64(grad[i]) * float64(zero.theta[i])
			}
			t.Logf("rank=%d hidden=%v g=%.5f <grad,z>=%.5f", rank, hidden, g, dot)
			tol := 0.02
			if hidden != nil {
				tol = 0.10
			}
			require.InDelta(t, dot, float64(g), tol*math.Abs(dot)+1e-3)
		}
	}
}
