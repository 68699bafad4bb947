package seedflood

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	sf "github.com/eidolon-sim/eidolon/core/seedflood"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/table"
	"github.com/stretchr/testify/require"
)

const smallFineTune = `{"kind":"seedflood","seed":2,"topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
	"dataset":{"samples":600,"n_features":16,"latent_dim":4,"classes":4,"class_separation":1},
	"methods":["seedflood","dsgd","mezo"],"steps":60,"eval_every_steps":5,"learning_rate":0.01,
	"pretrain":{"kind":"source","steps":100}}`

// bytes_to_accuracy is read off the history table: for every method the
// first row (in step order) at or above the target, and null columns with
// reached = false when there is none.
func TestBytesToAccuracyMatchesHistory(t *testing.T) {
	res := runDoc(t, smallFineTune)
	require.Equal(t, "bytes_to_accuracy", res.Tables[3].Name)
	hist := res.Tables[0].Rows.([]HistoryRow)
	rows := res.Tables[3].Rows.([]BytesToAccuracyRow)
	require.Len(t, rows, 3)
	best := 0.0
	for _, h := range hist {
		if h.Method == "dsgd" {
			best = math.Max(best, h.Accuracy)
		}
	}
	var seedBytes int64
	for _, r := range rows {
		require.InDelta(t, 0.95*best, r.TargetAccuracy, 1e-12, "default: 95 %% of the best first-order accuracy")
		var first *HistoryRow
		for i := range hist {
			if h := &hist[i]; h.Method == r.Method && h.Accuracy >= r.TargetAccuracy {
				first = h
				break
			}
		}
		if first == nil {
			require.False(t, r.Reached, r.Method)
			require.Nil(t, r.Step)
			require.Nil(t, r.CumulativeBytes)
			continue
		}
		require.True(t, r.Reached, r.Method)
		require.EqualValues(t, first.Step, *r.Step, r.Method)
		require.Equal(t, first.CumulativeBytes, *r.CumulativeBytes, r.Method)
		require.Equal(t, first.Accuracy, *r.Accuracy, r.Method)
		if r.Method == "seedflood" {
			seedBytes = *r.CumulativeBytes
		}
	}
	for _, r := range rows {
		if r.Reached && seedBytes > 0 {
			require.InDelta(t, float64(*r.CumulativeBytes)/float64(seedBytes), *r.BytesVsSeedFlood, 1e-12)
		}
	}
	// The projected bytes are the steps to the target times the projection's
	// bytes per round (defaults: 1.3e9 parameters, 128 clients of a ring).
	proj := res.Tables[2].Rows.([]ProjectionRow)
	for i, r := range rows {
		require.Equal(t, proj[i].Method, r.Method)
		require.Equal(t, 1.3e9, r.ProjectedParams)
		require.Equal(t, 128, r.ProjectedClients)
		if r.Reached {
			require.Equal(t, float64(*r.Step)*proj[i].BytesPerRound, *r.ProjectedBytes)
		} else {
			require.Nil(t, r.ProjectedBytes)
		}
	}
	rec, err := table.Record(rows, nil)
	require.NoError(t, err)
	rec.Release()

	// An unreachable target: every row says so, with nulls, never NaN.
	s, err := decode(t, smallFineTune)
	require.NoError(t, err)
	none := BytesToAccuracy(hist, s.Methods, 84, 1.01)
	for _, r := range none {
		require.False(t, r.Reached)
		require.Nil(t, r.CumulativeBytes)
		require.Nil(t, r.BytesVsSeedFlood)
	}
	// A settable absolute target.
	s.TargetAccuracy = 0.5
	require.Equal(t, 0.5, Target(hist, s))
}

// Pre-training on the shifted source task raises the initial (step 0)
// accuracy on the target task above a random initialization's.
func TestPretrainingImprovesInitialAccuracy(t *testing.T) {
	initial := func(doc string) float64 {
		s, err := decode(t, doc)
		require.NoError(t, err)
		cfg, err := Config(s, scenario.Env{})
		require.NoError(t, err)
		_, acc := cfg.Model.Evaluate(cfg.Init, cfg.Test)
		return acc
	}
	base := `{"kind":"seedflood","seed":2,"topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
		"dataset":{"samples":600,"n_features":16,"classes":4,"class_separation":0.5},"steps":1`
	random := initial(base + `}`)
	pre := initial(base + `,"pretrain":{"kind":"source","steps":200,"shift":0.3}}`)
	same := initial(base + `,"pretrain":{"kind":"source","steps":200,"shift":0}}`)
	// 4 classes: a random model is near chance (0.25).
	require.Less(t, random, 0.45)
	require.Greater(t, pre, random+0.2)
	require.GreaterOrEqual(t, same, pre-0.02, "the unshifted source is at least as good a start")

	// Inline data gives up a source split of its training rows.
	var feats [][]float64
	var labels []int
	for i := 0; i < 400; i++ {
		y := i % 2
		feats = append(feats, []float64{float64(2*y-1) + 0.3*float64(i%7-3), float64(i%5) - 2})
		labels = append(labels, y)
	}
	s := &spec.SeedFlood{}
	s.Kind, s.Topology = "seedflood", spec.SeedFloodTopology{Kind: "ring", Clients: 4}
	s.Dataset = spec.SeedFloodDataset{Kind: "inline", Features: feats, Labels: labels}
	s.Pretrain = spec.SeedFloodPretrain{Kind: "source", SourceFraction: 0.25}
	s.Defaults()
	var p spec.Problems
	s.Validate(&p)
	require.NoError(t, p.Err())
	cfg, err := Config(s, scenario.Env{})
	require.NoError(t, err)
	// 400 rows, 25 % test → 300 train, 25 % of them (75) go to the source.
	total := 0
	for _, sh := range cfg.Shards {
		total += len(sh)
	}
	require.Equal(t, 225, total)
	_, acc := cfg.Model.Evaluate(cfg.Init, cfg.Test)
	require.Greater(t, acc, 0.9)
}

// SeedFlood's traffic in closed form: on a ring of n clients each origin's
// message crosses n directed edges (2 from the origin, one forward per
// client, none back from the antipode for even n), so a step sends
// n·n·q messages of 20 bytes (origin 4 + step 4 + seed 8 + scalar 4),
// whatever the model size.
func TestSeedFloodBytesClosedForm(t *testing.T) {
	for _, c := range []struct{ n, q int }{{8, 1}, {16, 2}, {128, 1}} {
		g, err := BuildGraph(1, spec.SeedFloodTopology{Kind: "ring"}, c.n)
		require.NoError(t, err)
		f := sf.FloodGraph(g)
		require.Equal(t, int64(c.n*c.n*c.q*20), sf.FloodStepBytes(f, c.q), "ring(%d), q=%d", c.n, c.q)
		// DSGD on the same ring: 2n model messages of 4·d bytes per step.
		d := 1000
		require.Equal(t, int64(2*c.n*4*d), sf.GossipStepBytes(g, sf.ModelMessageBytes(d)))
	}
	res := runDoc(t, smallFineTune)
	for _, h := range res.Tables[0].Rows.([]HistoryRow) {
		switch h.Method {
		case "seedflood":
			require.Equal(t, int64(h.Step*8*8*20), h.CumulativeBytes, "step %d", h.Step)
		case "dsgd": // d = (16+1)·4 = 68 parameters
			require.Equal(t, int64(h.Step*2*8*4*68), h.CumulativeBytes, "step %d", h.Step)
		case "mezo":
			require.Zero(t, h.CumulativeBytes)
		}
	}
}

// converged is false while the loss still falls by more than the tolerance
// over the last quarter of the evaluations.
func TestConvergedColumn(t *testing.T) {
	pts := func(losses ...float64) []sf.Point {
		var p []sf.Point
		for i, l := range losses {
			p = append(p, sf.Point{Step: 10 * i, Loss: l})
		}
		return p
	}
	// 8 intervals: window = max(2, ⌈8/4⌉) = 2; fall (1.00 − 0.90)/1.00 = 10 % > 1 %.
	ok, note := Converged(pts(2, 1.8, 1.6, 1.4, 1.2, 1.1, 1.0, 0.95, 0.90), 0.01)
	require.False(t, ok)
	require.Contains(t, note, "10.0%")
	require.Contains(t, note, "last 20 steps")
	// Flat over the window (fall 0.5 % ≤ 1 %): converged; a rise too.
	ok, note = Converged(pts(2, 1.5, 1.2, 1.0, 1.0, 1.0, 1.0, 0.998, 0.995), 0.01)
	require.True(t, ok)
	require.Empty(t, note)
	ok, _ = Converged(pts(2, 1, 0.9, 1.1), 0.01)
	require.True(t, ok)
	// 12 intervals: window 3: (1.0 − 0.985)/1.0 = 1.5 % > 1 %.
	ok, _ = Converged(pts(3, 2, 1.5, 1.2, 1.1, 1.05, 1.02, 1.01, 1.0, 1.0, 0.995, 0.99, 0.985), 0.01)
	require.False(t, ok)
	ok, _ = Converged(pts(1, 0.5), 0.01)
	require.False(t, ok, "one interval shows no plateau")

	// In a run: a 10-step zeroth-order run from scratch is far from done.
	res := runDoc(t, `{"kind":"seedflood","seed":1,"topology":{"kind":"ring","clients":4},"model":{"kind":"softmax"},
		"dataset":{"samples":300,"n_features":8,"classes":3,"class_separation":1},"methods":["seedflood"],
		"steps":40,"eval_every_steps":4,"learning_rate":0.02}`)
	row := res.Tables[1].Rows.([]SummaryRow)[0]
	require.False(t, row.Converged)
	require.Contains(t, row.Note, "not converged")
}

// A step size that blows up stops the method and says so: no NaN or Inf in
// any table.
func TestDivergedRunReportsDiverged(t *testing.T) {
	// A ReLU MLP's gradient grows with its weights, so step 100 overflows
	// float32 within a few steps (softmax regression's stays bounded).
	res := runDoc(t, `{"kind":"seedflood","seed":1,"topology":{"kind":"ring","clients":4},"model":{"kind":"mlp","hidden":[16,16]},
		"dataset":{"samples":300,"n_features":8,"classes":3},"methods":["seedflood","dsgd","dzsgd","mezo","choco"],
		"steps":200,"eval_every_steps":5,"learning_rate":100,"first_order_learning_rate":100,"epsilon":1}`)
	diverged := 0
	for _, r := range res.Tables[1].Rows.([]SummaryRow) {
		for _, v := range []float64{r.FinalLoss, r.FinalAccuracy, r.BytesPerClient, r.ApplyMaddsPerClientPerStep} {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%s: %v", r.Method, v)
		}
		if r.Diverged {
			diverged++
			require.False(t, r.Converged)
			require.Contains(t, r.Note, "diverged at step")
		}
	}
	require.Equal(t, 5, diverged)
	for _, h := range res.Tables[0].Rows.([]HistoryRow) {
		require.False(t, math.IsNaN(h.Loss) || math.IsInf(h.Loss, 0) || math.IsNaN(h.ConsensusDistance), "%s step %d", h.Method, h.Step)
	}
	// 1e308 is refused up front, naming the field and the bound.
	_, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},"learning_rate":1e308,
		"first_order_learning_rate":1e308,"pretrain":{"kind":"source","learning_rate":1e308}}`)
	require.ErrorContains(t, err, "learning_rate: must be <= 100")
	require.ErrorContains(t, err, "first_order_learning_rate: must be <= 100")
	require.ErrorContains(t, err, "pretrain.learning_rate: must be <= 100")
}

// Cancellation is checked inside a method, every step (and every client's
// work), and progress is reported after every step.
func TestCancellationWithinAMethod(t *testing.T) {
	s, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
		"dataset":{"samples":200,"n_features":4,"classes":3},"methods":["seedflood","dsgd"],"steps":100000}`)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	reports := 0
	env := scenario.Env{Ctx: ctx, Progress: func(f float64) {
		reports++
		if reports == 5 {
			cancel()
		}
	}}
	_, err = Kind().Run(env, s)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 5, reports, "stopped at the step after the one that saw the cancel")

	// And while the flood protocol is being set up (minutes on a dense
	// graph of thousands of clients).
	g, err := BuildGraph(1, spec.SeedFloodTopology{Kind: "complete"}, 64)
	require.NoError(t, err)
	origins := 0
	_, err = sf.FloodGraphCanceled(g, func() error {
		if origins++; origins > 3 {
			return context.Canceled
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 4, origins, "checked before each origin")

	// And during pre-training, which reports its share of the progress:
	// 10^6 pre-training steps against 5 methods × 1 step.
	s, err = decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
		"dataset":{"samples":200,"n_features":4,"classes":3},"steps":1,"pretrain":{"kind":"source","steps":1000000}}`)
	require.NoError(t, err)
	ctx, cancel = context.WithCancel(context.Background())
	var last float64
	calls := 0
	_, err = Kind().Run(scenario.Env{Ctx: ctx, Progress: func(f float64) {
		last, calls = f, calls+1
		if calls == 1000 {
			cancel()
		}
	}}, s)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1000, calls)
	require.InDelta(t, 1000.0/(1e6+5), last, 1e-12)

	// And while a model is evaluated on the held-out set, between its
	// batches: 2.5 million rows of 65,535 classes take minutes to score
	// (grown-spec test, seed 736, ran past its bound).
	s, err = decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},"steps":3,
		"dataset":{"samples":9999999,"n_features":3,"classes":65535}}`)
	require.NoError(t, err)
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = Kind().Run(scenario.Env{Ctx: ctx}, s)
	require.ErrorIs(t, err, context.Canceled)
}

func TestPretrainSpecProblems(t *testing.T) {
	_, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},
		"pretrain":{"kind":"sourse"},"target_accuracy":2,"target_fraction":-1,"convergence_tolerance":3,
		"dataset":{"latent_dim":64,"n_features":8}}`)
	msg := err.Error()
	for _, want := range []string{`pretrain.kind: must be one of`, `(did you mean "source"?)`,
		"target_accuracy: must be in", "target_fraction: must be in", "convergence_tolerance: must be in [0, 1], got 3",
		"dataset.latent_dim: must be in [0, 8], got 64"} {
		require.Contains(t, msg, want)
	}
	_, err = decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},
		"pretrain":{"kind":"source","steps":-2,"shift":20,"batch_size":0}}`)
	require.ErrorContains(t, err, "pretrain.steps: must be in [1, 1000000], got -2")
	require.ErrorContains(t, err, "pretrain.shift: must be in [0, 10], got 20")

	// Values that would overflow float32 into Inf (and NaN losses) are refused.
	_, err = decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},"dataset":{"class_separation":1e300}}`)
	require.ErrorContains(t, err, "dataset.class_separation: must be in [0, 1000], got 1e+300")
	_, err = sf.NewDataset([]float64{1, 1e300, 0, 1}, []int{0, 1}, 2)
	require.ErrorContains(t, err, "feature value 1 is 1e+300")
}

// dataset.exact_subspace: a million-input softmax model trains on the rows
// its data meet; params and bytes are the full model's, simulated_params the
// kept ones, and what is not rotation-equivariant is a SpecError by field.
func TestExactSubspaceRun(t *testing.T) {
	js := `{"kind":"seedflood","topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
		"dataset":{"samples":400,"n_features":1000000,"latent_dim":4,"exact_subspace":true,"classes":3,"class_separation":1},
		"methods":["seedflood","dsgd"],"steps":10,"eval_every_steps":5}`
	res := runDoc(t, js)
	s := res.Tables[1].Rows.([]SummaryRow)
	for _, row := range s {
		require.Equal(t, 1_000_001*3, row.Params, row.Method)
		require.Equal(t, 5*3, row.SimulatedParams, row.Method)
	}
	// DSGD sends 2n models of 4·d bytes a step on ring(8); SeedFlood n² messages of 20 bytes.
	require.Equal(t, int64(10*2*8*4*3_000_003), s[1].TotalBytes)
	require.Equal(t, int64(10*8*8*20), s[0].TotalBytes)
	for _, c := range []struct{ edit, problem string }{
		{`"feature_noise":0.1,`, "dataset.feature_noise: must be 0 or absent with exact_subspace"},
		{`"latent_dim":0,`, "dataset.latent_dim: exact_subspace needs latent_dim > 0"},
	} {
		_, err := decode(t, strings.Replace(js, `"latent_dim":4,`, c.edit, 1))
		require.ErrorContains(t, err, c.problem)
	}
	_, err := decode(t, strings.Replace(js, `"steps":10`, `"steps":10,"perturbation":"rademacher"`, 1))
	require.ErrorContains(t, err, "perturbation: must be \"gaussian\" with dataset.exact_subspace")
	_, err = decode(t, strings.Replace(js, `"steps":10`, `"steps":10,"subspace_rank":17`, 1))
	require.ErrorContains(t, err, "subspace_rank: times dataset.n_features must be <= 16777216 with exact_subspace")
	_, err = decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},
		"dataset":{"kind":"inline","features":[[1],[2],[3],[4],[5],[6],[7],[8]],"labels":[0,1,0,1,0,1,0,1],"exact_subspace":true}}`)
	require.ErrorContains(t, err, "dataset.exact_subspace: applies to synthetic data only")
	_, err = decode(t, strings.Replace(js, `["seedflood","dsgd"]`, `["seedflood","choco"]`, 1))
	require.ErrorContains(t, err, "methods[1]: \"choco\" cannot run with dataset.exact_subspace")
}
