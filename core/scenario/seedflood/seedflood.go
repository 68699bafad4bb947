// Package seedflood drives the "seedflood" scenario: it trains a classifier
// with SeedFlood and its baselines on one client graph and data split, and
// reports accuracy against bytes sent, consensus, apply cost, and the
// traffic of the same methods for a 1.3B-parameter model.
package seedflood

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/scenario"
	sf "github.com/eidolon-sim/eidolon/core/seedflood"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// HistoryRow is one evaluation of one method (table "history").
type HistoryRow struct {
	Step     int    `arrow:"step"`     // steps completed (0 = before training)
	Method   string `arrow:"method"`   // seedflood, dsgd, choco, dzsgd, mezo
	Topology string `arrow:"topology"` // graph name, e.g. "ring(16)"
	Clients  int    `arrow:"clients"`
	// Loss is the held-out cross-entropy (nats) of the clients' average model.
	Loss float64 `arrow:"loss"`
	// Accuracy is the held-out accuracy of the clients' average model.
	Accuracy float64 `arrow:"accuracy"`
	// ConsensusDistance is mean_i ‖θ_i − θ̄‖₂ over clients (0 for mezo), over
	// the parameters the simulation keeps (simulated_params).
	ConsensusDistance float64 `arrow:"consensus_distance"`
	// CumulativeBytes sent over all links since step 0.
	CumulativeBytes int64 `arrow:"cumulative_bytes"`
}

// SummaryRow is one method's totals (table "summary"). Costs are operation
// counts, which do not depend on the machine; WallS is the method's
// simulation wall time.
type SummaryRow struct {
	Method   string `arrow:"method"`
	Topology string `arrow:"topology"`
	Clients  int    `arrow:"clients"`
	Params   int    `arrow:"params"` // parameters of the model trained
	// SimulatedParams are the parameters per copy the simulation keeps:
	// params, or with dataset.exact_subspace the first layer's weights the
	// data meet and the layers above (the operation counts below are theirs).
	SimulatedParams int     `arrow:"simulated_params"`
	Steps           int     `arrow:"steps"`
	FinalLoss       float64 `arrow:"final_loss"`
	FinalAccuracy   float64 `arrow:"final_accuracy"`
	TotalBytes      int64   `arrow:"total_bytes"`
	// BytesPerClient is TotalBytes / (replicas · steps).
	BytesPerClient float64 `arrow:"bytes_per_client_per_step"`
	// MessagesApplied counts (seed, scalar) updates applied over all clients.
	MessagesApplied int64 `arrow:"messages_applied"`
	// ApplyMadds: multiply-adds to apply updates (dense z, SubCGE
	// accumulation + projections + bases, or gossip averaging), all clients.
	ApplyMadds int64 `arrow:"apply_madds"`
	// ApplyMaddsPerClientPerStep is ApplyMadds / (model replicas · steps):
	// replicas are the clients, or 1 for centralized mezo.
	ApplyMaddsPerClientPerStep float64 `arrow:"apply_madds_per_client_per_step"`
	// ApplyRandomDraws: random numbers generated to rebuild received perturbations.
	ApplyRandomDraws int64 `arrow:"apply_random_draws"`
	// ForwardMadds: multiply-adds of forward and backward passes.
	ForwardMadds int64 `arrow:"forward_madds"`
	// SubspaceProjections: SubCGE W += U·S·Vᵀ projections (per matrix).
	SubspaceProjections int64 `arrow:"subspace_projections"`
	// WallS is the wall time this method's simulation took on this machine
	// (null when run without a clock, as in Go tests).
	WallS *float64 `arrow:"wall_s"`
	// InitialAccuracy is the held-out accuracy at step 0 (of the
	// pre-trained model in the fine-tuning regime).
	InitialAccuracy float64 `arrow:"initial_accuracy"`
	// Converged is false when the held-out loss still fell by more than
	// convergence_tolerance (relative) over the last quarter of the run
	// (see Converged), or the run diverged.
	Converged bool `arrow:"converged"`
	// Diverged: the loss or an estimate became non-finite and the method
	// stopped; final_* are then those of its last finite evaluation.
	Diverged bool `arrow:"diverged"`
	// Note says in words why a method has not converged or diverged ("" when
	// it has converged).
	Note string `arrow:"note"`
}

// BytesToAccuracyRow is, per method, the first evaluation at which the
// clients' average model reaches the target accuracy (table
// "bytes_to_accuracy"): read off the history table.
type BytesToAccuracyRow struct {
	Method         string  `arrow:"method"`
	Topology       string  `arrow:"topology"`
	Clients        int     `arrow:"clients"`
	Params         int     `arrow:"params"`
	TargetAccuracy float64 `arrow:"target_accuracy"`
	// Reached is false when no evaluation of the method reached the target;
	// Step, CumulativeBytes and Accuracy are then null.
	Reached bool `arrow:"reached"`
	// Step of the first evaluation at or above the target.
	Step *int64 `arrow:"step"`
	// CumulativeBytes sent by then (the history row's).
	CumulativeBytes *int64 `arrow:"cumulative_bytes"`
	// Accuracy of that evaluation.
	Accuracy *float64 `arrow:"accuracy"`
	// BytesVsSeedFlood is CumulativeBytes over SeedFlood's (null when either
	// did not reach the target, SeedFlood was not run or sent nothing).
	BytesVsSeedFlood *float64 `arrow:"bytes_vs_seedflood"`
	// ProjectedParams and ProjectedClients are the projection table's size.
	ProjectedParams  float64 `arrow:"projected_params"`
	ProjectedClients int     `arrow:"projected_clients"`
	// ProjectedBytes is Step × the projection table's bytes_per_round: what
	// the same number of steps sends at projected_params parameters on
	// projected_clients clients. It assumes the steps to the target carry
	// over to the larger model (SeedFlood's bytes do not depend on the model
	// size; gossip's grow with it); null when not reached.
	ProjectedBytes *float64 `arrow:"projected_bytes"`
}

// ProjectionRow is one method's traffic for a large model (table
// "projection"), from the same byte-counting functions the training uses.
type ProjectionRow struct {
	Method   string  `arrow:"method"`
	Topology string  `arrow:"topology"` // the spec's graph kind rebuilt at projection.clients
	Clients  int     `arrow:"clients"`
	Params   float64 `arrow:"params"`
	// BytesPerRound sent over all links in one step (q messages per client
	// for SeedFlood; one message per neighbor for gossip; 0 for centralized mezo).
	BytesPerRound float64 `arrow:"bytes_per_round"`
	// BytesPerClientPerRound is BytesPerRound / clients.
	BytesPerClientPerRound float64 `arrow:"bytes_per_client_per_round"`
	// RatioToSeedFlood is BytesPerRound over SeedFlood's.
	RatioToSeedFlood float64 `arrow:"ratio_to_seedflood"`
}

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Define("seedflood",
		"decentralized ZO training by flooding (seed, scalar) messages, with SubCGE, against DSGD/ChocoSGD/DZSGD/MeZO",
		run)
}

// BuildGraph builds the spec's client graph with n clients.
func BuildGraph(seed uint64, t spec.SeedFloodTopology, n int) (*sf.Graph, error) {
	r := rng.Stream(seed, "seedflood/topology")
	switch t.Kind {
	case "ring":
		return sf.RingGraph(n)
	case "mesh", "torus":
		rows, cols := t.Rows, t.Cols
		if rows*cols != n {
			rows, cols = spec.SeedFloodGridShape(n)
		}
		if t.Kind == "mesh" {
			return sf.MeshGridGraph(rows, cols)
		}
		return sf.TorusGridGraph(rows, cols)
	case "random_regular":
		return sf.RandomRegularGraph(n, t.Degree, r)
	case "erdos_renyi":
		return sf.ErdosRenyiGraph(n, t.Probability, r)
	case "complete":
		return sf.CompleteGraph(n)
	}
	return nil, fmt.Errorf("unknown topology kind %q", t.Kind)
}

// disconnected is the spec problem of a random client graph that its seed
// draws disconnected (a ring, grid or complete graph never is): flooding and
// gossip need a path between every pair of clients. The field named is the
// one that makes the graph denser.
func disconnected(s *spec.SeedFlood, name string, pairs [][2]int) error {
	var p problem.Problems
	path, allowed := "topology", ""
	switch s.Topology.Kind {
	case "erdos_renyi":
		path, allowed = "topology.probability", "a larger probability, or another seed"
	case "random_regular":
		path, allowed = "topology.degree", "a larger degree, or another seed"
	}
	p.AddAllowed(path, allowed, "the client graph %s drawn from seed %d is disconnected (no path for pairs %v): every client must reach every other; use %s",
		name, s.Seed, pairs, allowed)
	return p.Err()
}

// Config turns a validated spec into a training configuration, pre-training
// the initial model when the spec asks for it; env's cancellation is checked
// and its progress reported every pre-training step.
func Config(s *spec.SeedFlood, env scenario.Env) (*sf.Config, error) {
	g, err := BuildGraph(s.Seed, s.Topology, s.Topology.Clients)
	if err != nil {
		return nil, err
	}
	if un := g.Unreachable(5); len(un) > 0 {
		return nil, disconnected(s, g.Name, un)
	}
	var data, source *sf.Dataset
	d := s.Dataset
	if d.Kind == "inline" {
		if data, err = sf.NewDataset(d.Flat(), d.Labels, d.NFeatures); err != nil {
			return nil, err
		}
	} else {
		r := rng.Stream(s.Seed, "seedflood/data")
		k := d.NFeatures
		if d.LatentDim > 0 {
			k = d.LatentDim
		}
		means := sf.SyntheticMeans(r, k, d.Classes, d.ClassSeparation)
		data = sf.SampleMixture(r, means, d.Samples, k, d.Classes)
		var a []float64
		if d.LatentDim > 0 && !d.ExactSubspace {
			a = sf.RandomMap(rng.Stream(s.Seed, "seedflood/map"), d.NFeatures, k)
			data = sf.Embed(r, data, a, d.NFeatures, d.FeatureNoise)
		}
		if s.Pretrain.Kind == "source" {
			rs := rng.Stream(s.Seed, "seedflood/source")
			shifted := sf.ShiftMeans(rs, means, *s.Pretrain.Shift, d.ClassSeparation)
			source = sf.SampleMixture(rs, shifted, s.Pretrain.Samples, k, d.Classes)
			if a != nil {
				source = sf.Embed(rs, source, a, d.NFeatures, d.FeatureNoise)
			}
		}
	}
	train, test := data.Split(rng.Stream(s.Seed, "seedflood/split"), d.TestFraction)
	if s.Pretrain.Kind == "source" {
		if source == nil {
			source, train = train.Take(rng.Stream(s.Seed, "seedflood/source"), s.Pretrain.SourceFraction)
		} else {
			source = source.StandardizedLike(train)
		}
	}
	n := g.NumNodes()
	if train.Samples() < n {
		return nil, fmt.Errorf("%d training rows cannot give each of %d clients a shard", train.Samples(), n)
	}
	var shards [][]int
	if s.Partition.Kind == "dirichlet" {
		shards = sf.PartitionDirichlet(rng.Stream(s.Seed, "seedflood/partition"), train, n, s.Partition.Alpha)
	} else {
		shards = sf.PartitionIID(rng.Stream(s.Seed, "seedflood/partition"), train, n)
	}
	model, err := sf.NewModel(data.Features, data.Classes, s.Model.Hidden)
	if err != nil {
		return nil, err
	}
	if d.Kind == "synthetic" && d.ExactSubspace {
		// The data are drawn in the subspace's coordinates: the first
		// latent_dim of n_features inputs, up to a rotation.
		if err := model.WithNominalInput(d.NFeatures); err != nil {
			return nil, err
		}
	}
	init := model.Init(rng.Stream(s.Seed, "seedflood/init"))
	if s.Pretrain.Kind == "source" {
		if _, err := sf.Pretrain(model, init, sf.Pretraining{
			Source: source, Steps: s.Pretrain.Steps, BatchSize: s.Pretrain.BatchSize,
			LearningRate: float32(s.Pretrain.LearningRate), Seed: rng.Mix(s.Seed, 0x9e7a), Canceled: env.Canceled,
			Progress: func(f float64) { env.Report(f * workShares(s)[0]) },
		}); err != nil {
			return nil, err
		}
	}
	cfg := &sf.Config{
		Graph: g, Model: model, Train: train, Test: test, Shards: shards,
		Init:  init,
		Steps: s.Steps, BatchSize: s.BatchSize, EvalEvery: s.EvalEverySteps,
		LearningRate: float32(s.LearningRate), FirstOrderLearningRate: float32(s.FirstOrderLearningRate),
		ZO: sf.ZOConfig{
			Seed: rng.Mix(s.Seed, 0x5eedf100d), Epsilon: float32(s.Epsilon), Rank: *s.SubspaceRank,
			RefreshEvery: s.RefreshEverySteps, Rademacher: s.Perturbation == "rademacher",
		},
		Perturbations: s.PerturbationsPerStep, StepsPerHop: stepsPerHop(s),
		ChocoFraction: s.Choco.Fraction, ChocoGamma: float32(s.Choco.Gamma), ChocoBits: chocoBits(s),
	}
	if s.Link != "" {
		l, _ := hw.LinkByName(s.Link)
		cfg.HopTimeS = l.LatencyS + sf.SeedMessageBytes/l.BandwidthBytesPerS
		cfg.StepTimeS = s.StepTimeS
	}
	return cfg, nil
}

func stepsPerHop(s *spec.SeedFlood) int {
	if s.StepsPerHop == nil {
		return 0 // the link model times hops instead
	}
	return *s.StepsPerHop
}

func chocoBits(s *spec.SeedFlood) int {
	if s.Choco.Compression == "quantize" {
		return s.Choco.Bits
	}
	return 0
}

func run(env scenario.Env, s *spec.SeedFlood) (scenario.Result, error) {
	cfg, err := Config(s, env)
	if err != nil {
		return scenario.Result{}, err
	}
	cfg.Canceled = env.Canceled
	var history []HistoryRow
	var summary []SummaryRow
	n := cfg.Graph.NumNodes()
	pre, per := workShares(s)[0], workShares(s)[1]
	for i, m := range s.Methods {
		cfg.Progress = func(f float64) { env.Report(pre + (float64(i)+f)*per) }
		elapsed := env.Elapsed()
		out, err := sf.Run(cfg, m)
		if err != nil {
			return scenario.Result{}, err
		}
		for _, p := range out.History {
			history = append(history, HistoryRow{
				Step: p.Step, Method: m, Topology: cfg.Graph.Name, Clients: n,
				Loss: p.Loss, Accuracy: p.Accuracy, ConsensusDistance: p.Consensus, CumulativeBytes: p.CumulativeBytes,
			})
		}
		last := out.History[len(out.History)-1]
		c := out.Counters
		steps := s.Steps
		if out.Diverged {
			steps = out.DivergedStep
		}
		clientSteps := float64(out.Replicas) * float64(max(steps, 1))
		converged, note := Converged(out.History, s.ConvergenceTolerance)
		if out.Diverged {
			converged = false
			note = fmt.Sprintf("diverged at step %d (a non-finite loss or estimate): lower the learning rate; final values are from step %d", out.DivergedStep, last.Step)
		}
		summary = append(summary, SummaryRow{
			Method: m, Topology: cfg.Graph.Name, Clients: n, Params: cfg.Model.NominalParams(), SimulatedParams: cfg.Model.NumParams(), Steps: steps,
			FinalLoss: last.Loss, FinalAccuracy: last.Accuracy,
			TotalBytes: out.TotalBytes, BytesPerClient: float64(out.TotalBytes) / clientSteps,
			MessagesApplied: c.MessagesApplied, ApplyMadds: c.ApplyMadds,
			ApplyMaddsPerClientPerStep: float64(c.ApplyMadds) / clientSteps,
			ApplyRandomDraws:           c.ApplyDraws, ForwardMadds: c.ForwardMadds, SubspaceProjections: c.Projections,
			WallS:           elapsed(),
			InitialAccuracy: out.History[0].Accuracy,
			Converged:       converged, Diverged: out.Diverged, Note: note,
		})
	}
	proj, err := Projection(s, env.Canceled)
	if err != nil {
		return scenario.Result{}, err
	}
	env.Report(1)
	var r scenario.Result
	r.Add("history", history)
	r.Add("summary", summary)
	r.Add("projection", proj)
	r.Add("bytes_to_accuracy", WithProjection(BytesToAccuracy(history, s.Methods, cfg.Model.NominalParams(), Target(history, s)), proj))
	return r, nil
}

// workShares splits progress between pre-training and each method in
// proportion to their steps: [pre-training share, share of one method].
func workShares(s *spec.SeedFlood) [2]float64 {
	pre := 0.0
	if s.Pretrain.Kind == "source" {
		pre = float64(s.Pretrain.Steps)
	}
	total := pre + float64(len(s.Methods)*s.Steps)
	return [2]float64{pre / total, float64(s.Steps) / total}
}

// firstOrder are the methods whose best accuracy sets the default target.
var firstOrder = map[string]bool{sf.MethodDSGD: true, sf.MethodChoco: true}

// Target is the accuracy bytes_to_accuracy measures up to: the spec's
// target_accuracy, or target_fraction of the best accuracy a first-order
// method reaches in history (of any method when none ran).
func Target(history []HistoryRow, s *spec.SeedFlood) float64 {
	if s.TargetAccuracy > 0 {
		return s.TargetAccuracy
	}
	best, bestAny := -1.0, 0.0
	for _, h := range history {
		bestAny = max(bestAny, h.Accuracy)
		if firstOrder[h.Method] {
			best = max(best, h.Accuracy)
		}
	}
	if best < 0 {
		best = bestAny
	}
	return s.TargetFraction * best
}

// BytesToAccuracy reads, for each method, the first history row (in step
// order) whose accuracy is at least target.
func BytesToAccuracy(history []HistoryRow, methods []string, params int, target float64) []BytesToAccuracyRow {
	var rows []BytesToAccuracyRow
	var seed *int64
	for _, m := range methods {
		row := BytesToAccuracyRow{Method: m, Params: params, TargetAccuracy: target}
		for _, h := range history {
			if h.Method != m {
				continue
			}
			row.Topology, row.Clients = h.Topology, h.Clients
			if h.Accuracy >= target && !row.Reached {
				step, bytes, acc := int64(h.Step), h.CumulativeBytes, h.Accuracy
				row.Reached, row.Step, row.CumulativeBytes, row.Accuracy = true, &step, &bytes, &acc
			}
		}
		if m == sf.MethodSeedFlood && row.Reached {
			seed = row.CumulativeBytes
		}
		rows = append(rows, row)
	}
	for i := range rows {
		if rows[i].Reached && seed != nil && *seed > 0 {
			v := float64(*rows[i].CumulativeBytes) / float64(*seed)
			rows[i].BytesVsSeedFlood = &v
		}
	}
	return rows
}

// WithProjection fills the projected columns of bytes_to_accuracy rows from
// the projection table's bytes per round of the same method.
func WithProjection(rows []BytesToAccuracyRow, proj []ProjectionRow) []BytesToAccuracyRow {
	for i := range rows {
		for _, p := range proj {
			if p.Method != rows[i].Method {
				continue
			}
			rows[i].ProjectedParams, rows[i].ProjectedClients = p.Params, p.Clients
			if rows[i].Reached {
				v := float64(*rows[i].Step) * p.BytesPerRound
				rows[i].ProjectedBytes = &v
			}
		}
	}
	return rows
}

// Converged tests whether a method's held-out loss has stopped falling: over
// the window of the last max(2, ⌈m/4⌉) of its m evaluation intervals (the
// last quarter of the run, at least two intervals), the loss must not have
// fallen by more than tol relative to its value at the window's start:
//
//	converged ⇔ L_start − L_end ≤ tol·L_start.
//
// A run with fewer than two intervals cannot show a plateau and counts as
// not converged.
func Converged(h []sf.Point, tol float64) (bool, string) {
	m := len(h) - 1
	if m < 2 {
		return false, fmt.Sprintf("only %d evaluation interval(s): too few to tell whether the loss has stopped falling; evaluate more often", max(m, 0))
	}
	w := max(2, (m+3)/4)
	start, end := h[m-w], h[m]
	fall := (start.Loss - end.Loss) / start.Loss
	if fall > tol {
		return false, fmt.Sprintf("not converged: held-out loss still fell %.1f%% over the last %d steps (%.4g → %.4g); run more steps",
			100*fall, end.Step-start.Step, start.Loss, end.Loss)
	}
	return true, ""
}

// Projection computes bytes per round of every method for a model of
// s.Projection.Params parameters on s.Projection.Clients clients of the same
// graph kind, with the functions the simulation counts its own traffic with.
func Projection(s *spec.SeedFlood, canceled func() error) ([]ProjectionRow, error) {
	g, err := BuildGraph(s.Seed, s.Topology, s.Projection.Clients)
	if err != nil {
		return nil, err
	}
	d := int(s.Projection.Params)
	n := g.NumNodes()
	flood, err := sf.FloodGraphCanceled(g, canceled)
	if err != nil {
		return nil, err
	}
	seedBytes := float64(sf.FloodStepBytes(flood, s.PerturbationsPerStep))
	var rows []ProjectionRow
	for _, m := range s.Methods {
		var b float64
		switch m {
		case sf.MethodSeedFlood:
			b = seedBytes
		case sf.MethodDSGD, sf.MethodDZSGD:
			b = float64(sf.GossipStepBytes(g, sf.ModelMessageBytes(d)))
		case sf.MethodChoco:
			msg := sf.TopKMessageBytes(sf.ChocoK(s.Choco.Fraction, d))
			if bits := chocoBits(s); bits > 0 {
				msg = sf.QuantizedMessageBytes(d, bits)
			}
			b = float64(sf.GossipStepBytes(g, msg))
		case sf.MethodMeZO:
			b = 0 // one model, no network
		}
		rows = append(rows, ProjectionRow{
			Method: m, Topology: g.Name, Clients: n, Params: float64(d),
			BytesPerRound: b, BytesPerClientPerRound: b / float64(n), RatioToSeedFlood: b / seedBytes,
		})
	}
	return rows, nil
}
