package seedflood

import (
	"errors"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sameLevelEdges counts edges whose ends are equally far from src.
func sameLevelEdges(g *Graph, src int) int {
	d := g.HopDistances(src)
	n := 0
	for u := 0; u < g.NumNodes(); u++ {
		for _, v := range g.Neighbors(u) {
			if u < v && d[u] == d[v] {
				n++
			}
		}
	}
	return n
}

func TestFloodReachesEveryClientOnceAfterHopDistance(t *testing.T) {
	graphs := []*Graph{
		must(RingGraph(8)), must(RingGraph(7)), must(MeshGridGraph(3, 5)),
		must(TorusGridGraph(4, 4)), must(CompleteGraph(5)), must(MeshGridGraph(1, 6)),
		must(RandomRegularGraph(16, 3, rng.Stream(3, "graph"))),
	}
	for _, g := range graphs {
		t.Run(g.Name, func(t *testing.T) {
			f := FloodGraph(g)
			for o := 0; o < g.NumNodes(); o++ {
				hops := g.HopDistances(o)
				require.Equal(t, hops, f.Arrival[o], "arrival round = hop distance")
				for c, r := range f.Receipts[o] {
					want := 1
					if c == o {
						want = 0
					}
					require.Equal(t, want, r, "client %d receives origin %d's message once", c, o)
				}
				// A node forwards to every neighbor that did not send it the
				// message: each edge between hop levels carries one copy, each
				// edge within a level two (one each way, both dropped).
				same := sameLevelEdges(g, o)
				require.Equal(t, g.NumEdges()+same, f.Transmissions[o])
				// Every send but the n−1 first receipts is a dropped duplicate.
				require.Equal(t, f.Transmissions[o]-(g.NumNodes()-1), f.Duplicates[o])
			}
		})
	}
	// Closed forms: even ring, n transmissions (one per edge); odd ring, n+1
	// (the edge opposite the origin joins two nodes at distance (n−1)/2);
	// a path of n nodes (1×n mesh), n−1; complete K_n, (n−1) + C(n−1, 2)·2.
	assert.Equal(t, 8, FloodGraph(must(RingGraph(8))).Transmissions[0])
	assert.Equal(t, 8, FloodGraph(must(RingGraph(7))).Transmissions[0])
	assert.Equal(t, 5, FloodGraph(must(MeshGridGraph(1, 6))).Transmissions[2])
	assert.Equal(t, 4+6*2, FloodGraph(must(CompleteGraph(5))).Transmissions[0])
}

func TestMessageBytesDoNotDependOnModelSize(t *testing.T) {
	g := must(RingGraph(6))
	var totals []int64
	for _, hidden := range [][]int{nil, {8}, {128, 64}} {
		cfg := testConfig(t, g, hidden, 0)
		cfg.Steps = 5
		out, err := Run(cfg, MethodSeedFlood)
		require.NoError(t, err)
		totals = append(totals, out.TotalBytes)
	}
	// 6 origins × 6 transmissions (even ring) × 20 bytes × 5 steps.
	require.Equal(t, []int64{3600, 3600, 3600}, totals)
}

// With no delay on a complete graph every client applies all n·q updates of
// a step at its end, in origin order, exactly as centralized ZO-SGD with n·q
// perturbations per step does: the parameters must be bit-identical.
func TestCompleteGraphWithoutDelayEqualsCentralizedZO(t *testing.T) {
	for _, rank := range []int{0, 3} {
		for _, hidden := range [][]int{nil, {12}} {
			t.Run(fmt.Sprintf("rank%d_hidden%v", rank, hidden), func(t *testing.T) {
				cfg := testConfig(t, must(CompleteGraph(5)), hidden, rank)
				cfg.Steps, cfg.Perturbations, cfg.StepsPerHop, cfg.ZO.RefreshEvery = 25, 2, 0, 4
				flood, err := Run(cfg, MethodSeedFlood)
				require.NoError(t, err)
				central, err := Run(cfg, MethodMeZO)
				require.NoError(t, err)
				require.NotEqual(t, cfg.Init, central.Params[0], "training moved the parameters")
				for c, p := range flood.Params {
					require.Equal(t, central.Params[0], p, "client %d", c)
				}
				// With one step per hop the updates of others arrive a step late.
				cfg.StepsPerHop = 1
				delayed, err := Run(cfg, MethodSeedFlood)
				require.NoError(t, err)
				require.NotEqual(t, central.Params[0], delayed.Params[0])
			})
		}
	}
}

// After the last step, delivering the messages still in flight leaves every
// client having applied every update exactly once, and (up to float32
// summation order) all clients agree.
func TestEveryClientAppliesEveryUpdateOnce(t *testing.T) {
	for _, c := range []struct {
		rank     int
		hopTimeS float64 // 0: one step per hop; else 2.5 hops per step-time 1
	}{{0, 0}, {2, 0}, {2, 2.5}} {
		cfg := testConfig(t, must(MeshGridGraph(2, 4)), nil, c.rank)
		cfg.Steps, cfg.Perturbations = 30, 2
		cfg.HopTimeS, cfg.StepTimeS = c.hopTimeS, 1
		var cnt Counters
		s, err := newSeedFlood(cfg, &cnt)
		require.NoError(t, err)
		for step := 0; step < cfg.Steps; step++ {
			_, err := s.step(step)
			require.NoError(t, err)
		}
		s.drain(cfg.Steps - 1)
		n := int64(cfg.Graph.NumNodes())
		for c, st := range s.state {
			require.Equal(t, n*int64(cfg.Perturbations*cfg.Steps), st.applied, "client %d", c)
			require.Empty(t, st.pending, "every SubCGE epoch projected")
			for i := range st.theta {
				require.InDelta(t, s.state[0].theta[i], st.theta[i], 1e-5)
			}
		}
	}
}

func TestTrainingLearns(t *testing.T) {
	cfg := testConfig(t, must(RingGraph(8)), nil, 4)
	cfg.Steps, cfg.LearningRate, cfg.ZO.RefreshEvery = 300, 0.05, 1
	out, err := Run(cfg, MethodSeedFlood)
	require.NoError(t, err)
	first, last := out.History[0], out.History[len(out.History)-1]
	t.Logf("accuracy %.3f -> %.3f, loss %.3f -> %.3f", first.Accuracy, last.Accuracy, first.Loss, last.Loss)
	// Chance is 1/10 for ten balanced classes.
	require.Greater(t, last.Accuracy, 0.5)
	require.Less(t, last.Loss, first.Loss)
}

// SeedFlood and DZSGD use the same estimator, so they learn alike; SeedFlood
// sends 20-byte messages where DZSGD sends whole models. On a ring of n with
// d parameters per-step bytes are n·n·20 against 2n·4d: a ratio of 0.4·d/n.
func TestSeedFloodMatchesDZSGDWithFarFewerBytes(t *testing.T) {
	cfg := testConfig(t, must(RingGraph(8)), []int{128}, 0)
	cfg.Steps, cfg.LearningRate = 300, 0.02
	sf, err := Run(cfg, MethodSeedFlood)
	require.NoError(t, err)
	dz, err := Run(cfg, MethodDZSGD)
	require.NoError(t, err)
	a, b := sf.History[len(sf.History)-1], dz.History[len(dz.History)-1]
	t.Logf("seedflood acc %.3f bytes %d; dzsgd acc %.3f bytes %d", a.Accuracy, sf.TotalBytes, b.Accuracy, dz.TotalBytes)
	require.GreaterOrEqual(t, a.Accuracy, b.Accuracy-0.03)
	require.Greater(t, a.Accuracy, 0.3)
	ratio := float64(dz.TotalBytes) / float64(sf.TotalBytes)
	require.InDelta(t, 0.4*float64(cfg.Model.NumParams())/8, ratio, 1e-6)
	require.Greater(t, ratio, 100.0)
}

func TestFirstOrderBaselinesLearn(t *testing.T) {
	cfg := testConfig(t, must(RingGraph(8)), []int{32}, 0)
	cfg.Steps = 150
	d := int64(cfg.Model.NumParams())
	for _, c := range []struct {
		method string
		bits   int
		bytes  int64 // per step: 2·|E| messages on a ring of 8 (8 edges)
	}{
		{MethodDSGD, 0, 16 * 4 * d},
		{MethodChoco, 0, 16 * 8 * int64(ChocoK(0.1, int(d)))},
		// 4-bit QSGD: 4-byte norm + 5 bits per entry.
		{MethodChoco, 4, 16 * (4 + (5*d+7)/8)},
	} {
		cfg.ChocoBits = c.bits
		out, err := Run(cfg, c.method)
		require.NoError(t, err)
		last := out.History[len(out.History)-1]
		t.Logf("%s bits=%d acc %.3f consensus %.4f bytes %d", c.method, c.bits, last.Accuracy, last.Consensus, out.TotalBytes)
		require.Greater(t, last.Accuracy, 0.6, c.method)
		require.Equal(t, c.bytes*int64(cfg.Steps), out.TotalBytes)
	}
}

// SubCGE applies a message with L·r² multiply-adds and projects once per
// epoch; dense ZO applies each with d. Same run, same messages.
func TestSubCGEApplyCostIsLower(t *testing.T) {
	var madds [2]int64
	for i, rank := range []int{0, 4} {
		cfg := testConfig(t, must(TorusGridGraph(4, 4)), []int{256}, rank)
		cfg.Steps = 20
		out, err := Run(cfg, MethodSeedFlood)
		require.NoError(t, err)
		madds[i] = out.Counters.ApplyMadds
		n := int64(16)
		require.Equal(t, n*n*int64(cfg.Steps)-n*sumArrivalsLate(cfg), out.Counters.MessagesApplied)
	}
	t.Logf("apply multiply-adds: dense %d, SubCGE %d", madds[0], madds[1])
	require.Less(t, madds[1]*5, madds[0])
}

// sumArrivalsLate counts, over destinations, messages of the run still in
// flight at its end: from origin o at hop h, the last h steps' messages.
func sumArrivalsLate(cfg *Config) int64 {
	f := FloodGraph(cfg.Graph)
	var late int64
	for o := range f.Arrival {
		for c := range f.Arrival[o] {
			late += int64(cfg.DelaySteps(f.Arrival[o][c]))
		}
	}
	return late / int64(cfg.Graph.NumNodes())
}

func TestDirichletPartition(t *testing.T) {
	data := SyntheticDataset(rng.Stream(1, "d"), 3000, 4, 10, 1)
	classesPerClient := func(shards [][]int) float64 {
		total := 0
		for _, s := range shards {
			seen := map[int]bool{}
			for _, i := range s {
				seen[data.Y[i]] = true
			}
			total += len(seen)
		}
		return float64(total) / float64(len(shards))
	}
	for _, alpha := range []float64{0.05, 100} {
		shards := PartitionDirichlet(rng.Stream(1, "p"), data, 20, alpha)
		count := make([]int, data.Samples())
		for _, s := range shards {
			require.NotEmpty(t, s)
			for _, i := range s {
				count[i]++
			}
		}
		for i, c := range count {
			require.Equal(t, 1, c, "row %d in exactly one shard", i)
		}
		t.Logf("alpha %g: %.1f classes per client", alpha, classesPerClient(shards))
	}
	require.Less(t, classesPerClient(PartitionDirichlet(rng.Stream(1, "p"), data, 20, 0.05)), 5.0)
	require.Greater(t, classesPerClient(PartitionDirichlet(rng.Stream(1, "p"), data, 20, 100)), 9.5)
}

// The shared versionStore (one copy of the SubCGE weights per settled
// epoch, updates summed in canonical order) must match the reference where
// every client projects its own updates into its own weights, up to float32
// summation order; and cost the same operations.
func TestSharedSubCGEWeightsMatchPrivateReference(t *testing.T) {
	cfg := testConfig(t, must(RingGraph(7)), []int{16}, 3)
	cfg.Steps, cfg.ZO.RefreshEvery = 40, 3
	shared, err := Run(cfg, MethodSeedFlood)
	require.NoError(t, err)
	cfg.privateWeights = true
	private, err := Run(cfg, MethodSeedFlood)
	require.NoError(t, err)
	require.Equal(t, private.Counters, shared.Counters)
	for c := range shared.Params {
		for i, v := range shared.Params[c] {
			require.InDelta(t, private.Params[c][i], v, 1e-4, "client %d param %d", c, i)
		}
	}
}

// A canceled run stops evaluating between the held-out set's batches: the
// set can be millions of rows of thousands of classes, minutes to score
// (the grown-spec test at seed 736 ran past its bound in one evaluation).
func TestEvaluationStopsBetweenBatches(t *testing.T) {
	data := SyntheticDataset(rng.Stream(7, "data"), 2000, 20, 10, 0.5)
	m, err := NewModel(20, 10, nil)
	require.NoError(t, err)
	theta := m.Init(rng.Stream(7, "init"))
	const batch = 256
	calls := 0
	stopped := errors.New("canceled")
	_, _, err = m.evaluate(theta, nil, data, m.newWorkspace(batch), batch, func() error {
		if calls++; calls == 3 {
			return stopped
		}
		return nil
	})
	require.ErrorIs(t, err, stopped)
	require.Equal(t, 3, calls, "checked before each batch, stopped at the third")
	// Not canceled, it scores every batch: ⌈2000/256⌉ checks.
	calls = 0
	_, acc, err := m.evaluate(theta, nil, data, m.newWorkspace(batch), batch, func() error { calls++; return nil })
	require.NoError(t, err)
	require.Equal(t, 8, calls)
	require.InDelta(t, 0.1, acc, 0.1, "an untrained model scores about chance on 10 classes")
}
