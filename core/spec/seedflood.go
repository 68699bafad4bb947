package spec

import (
	"math"
	"slices"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/seedflood"
)

// SeedFlood is the "seedflood" kind: decentralized zeroth-order training by
// flooding (seed, scalar) messages (SeedFlood, arXiv 2602.18181), with the
// SubCGE subspace, against gossip baselines on the same data and graph.
type SeedFlood struct {
	Header
	Topology  SeedFloodTopology  `json:"topology"`
	Model     SeedFloodModel     `json:"model"`
	Dataset   SeedFloodDataset   `json:"dataset"`
	Partition SeedFloodPartition `json:"partition"`
	// Methods to run, each on the same data, graph, batches and seeds:
	// "seedflood", "dsgd", "choco", "dzsgd", "mezo". Default: all five.
	Methods []string `json:"methods,omitempty"`
	// Steps of training; default 300.
	Steps int `json:"steps,omitempty"`
	// LearningRate of the zeroth-order methods; default 0.01, in
	// (0, MaxSeedFloodLearningRate].
	LearningRate float64 `json:"learning_rate,omitempty"`
	// FirstOrderLearningRate of DSGD and ChocoSGD; default 0.1, in
	// (0, MaxSeedFloodLearningRate].
	FirstOrderLearningRate float64 `json:"first_order_learning_rate,omitempty"`
	// Pretrain is the fine-tuning regime's first phase; default none
	// (every method trains from a random initialization).
	Pretrain SeedFloodPretrain `json:"pretrain,omitempty"`
	// TargetAccuracy (a fraction in (0, 1]) is the accuracy the
	// bytes_to_accuracy table measures bytes up to; 0 (default) means
	// TargetFraction of the best first-order accuracy in the run.
	TargetAccuracy float64 `json:"target_accuracy,omitempty"`
	// TargetFraction of the best accuracy any first-order method (dsgd,
	// choco) reaches in the run, used when TargetAccuracy is 0 (of the best
	// of all methods when none is first-order); default 0.95, in (0, 1].
	TargetFraction float64 `json:"target_fraction,omitempty"`
	// ConvergenceTolerance is the relative fall of the held-out loss over
	// the last quarter of the run (at least the last two evaluations) above
	// which a method counts as not converged; default 0.01, in [0, 1].
	ConvergenceTolerance float64 `json:"convergence_tolerance,omitempty"`
	// Epsilon is the two-point perturbation scale ε; default 1e-3 (MeZO's).
	Epsilon float64 `json:"epsilon,omitempty"`
	// PerturbationsPerStep is q, estimates (and messages) per client per
	// step; default 1.
	PerturbationsPerStep int `json:"perturbations_per_step,omitempty"`
	// Perturbation distribution: "gaussian" (default) or "rademacher".
	Perturbation string `json:"perturbation,omitempty"`
	// SubspaceRank r of SubCGE per weight matrix (capped by the matrix's
	// sides); 0 means dense perturbations. Default 4. Applies to every
	// zeroth-order method so they share one estimator.
	SubspaceRank *int `json:"subspace_rank,omitempty"`
	// RefreshEverySteps is K, how often the subspace bases change; default 5.
	RefreshEverySteps int `json:"refresh_every_steps,omitempty"`
	// BatchSize of each client's minibatch; default 16.
	BatchSize int `json:"batch_size,omitempty"`
	// EvalEverySteps between history rows; default steps/20 (at least 1).
	EvalEverySteps int `json:"eval_every_steps,omitempty"`
	// StepsPerHop is SeedFlood's delay per hop; 0 delivers every message
	// within the step it is sent. Default 1.
	StepsPerHop *int `json:"steps_per_hop,omitempty"`
	// Link names a link preset (eidolon.presets.links()) whose latency and
	// bandwidth time each hop of a 20-byte message instead of steps_per_hop:
	// a message h hops away arrives ⌈h·(latency + bytes/bandwidth)/step_time_s⌉
	// steps after it is sent.
	Link string `json:"link,omitempty"`
	// StepTimeS is the wall time of one training step, needed with link.
	StepTimeS float64        `json:"step_time_s,omitempty"`
	Choco     SeedFloodChoco `json:"choco,omitempty"`
	// Projection sizes the communication table; defaults 1.3e9 parameters,
	// 128 clients.
	Projection SeedFloodProjection `json:"projection,omitempty"`
}

// SeedFloodTopology is the client graph.
type SeedFloodTopology struct {
	// Kind: "ring", "mesh" (2D grid), "torus" (2D grid with wrap-around),
	// "random_regular", "erdos_renyi", "complete".
	Kind string `json:"kind"`
	// Clients is the number of clients (nodes).
	Clients int `json:"clients"`
	// Rows and Cols of a grid; default the most nearly square factorization.
	Rows int `json:"rows,omitempty"`
	Cols int `json:"cols,omitempty"`
	// Degree of a random regular graph; default 4.
	Degree int `json:"degree,omitempty"`
	// Probability of each edge of an Erdős–Rényi graph; default 0.2.
	Probability float64 `json:"probability,omitempty"`
}

// SeedFloodModel is the classifier trained.
type SeedFloodModel struct {
	// Kind: "softmax" (regression, the default) or "mlp" (ReLU hidden layers).
	Kind string `json:"kind,omitempty"`
	// Hidden widths of an MLP; default [64]. Must be empty for softmax.
	Hidden []int `json:"hidden,omitempty"`
}

// SeedFloodDataset is either a synthetic task drawn from the seed or a table
// passed in (e.g. scikit-learn's digits).
type SeedFloodDataset struct {
	// Kind: "synthetic" (default) or "inline".
	Kind string `json:"kind,omitempty"`
	// Synthetic: Samples (default 2000), NFeatures (default 32), Classes
	// (default 10), ClassSeparation (std of class means; default 0.5, in
	// [0, 1000]).
	Samples         int     `json:"samples,omitempty"`
	NFeatures       int     `json:"n_features,omitempty"`
	Classes         int     `json:"classes,omitempty"`
	ClassSeparation float64 `json:"class_separation,omitempty"`
	// LatentDim (synthetic) > 0 draws the mixture in a latent space of this
	// many dimensions and maps it linearly to n_features, plus
	// N(0, feature_noise²) per feature: data of low intrinsic dimension, as
	// pre-trained representations are. 0 (default) draws the features
	// directly. In [0, n_features].
	LatentDim int `json:"latent_dim,omitempty"`
	// FeatureNoise is the std of the noise added to each mapped feature
	// (with latent_dim); default 0.1, in [0, 100].
	FeatureNoise float64 `json:"feature_noise,omitempty"`
	// ExactSubspace (synthetic, with latent_dim) puts the data exactly in a
	// latent_dim-dimensional subspace of the n_features inputs, with no
	// feature noise and standardized within the subspace: the limit of a
	// pre-trained representation of exactly low intrinsic dimension. The
	// simulation then keeps only the first layer's weights that meet the
	// data (exact for every method it allows; seedflood.Model's
	// WithNominalInput), so n_features can be a real model's width (up to
	// 2^20) while bytes count every weight. Not with perturbation
	// "rademacher" or method "choco" (neither is rotation-equivariant).
	ExactSubspace bool `json:"exact_subspace,omitempty"`
	// Inline: Features as rows, or FeaturesFlat (row-major) with NFeatures;
	// Labels are integers from 0.
	Features     [][]float64 `json:"features,omitempty"`
	FeaturesFlat []float64   `json:"features_flat,omitempty"`
	Labels       []int       `json:"labels,omitempty"`
	// TestFraction held out for evaluation; default 0.25.
	TestFraction float64 `json:"test_fraction,omitempty"`
}

// SeedFloodPretrain is centralized first-order pre-training on a source
// split, after which every method fine-tunes on the target task from the
// same pre-trained model (the regime of SeedFlood's experiments, arXiv
// 2602.18181: zeroth-order fine-tuning of a pre-trained LLM).
type SeedFloodPretrain struct {
	// Kind: "none" (default) or "source" (pre-train on a source split).
	Kind string `json:"kind,omitempty"`
	// Steps of centralized minibatch SGD; default 300, in [1, 10^6].
	Steps int `json:"steps,omitempty"`
	// LearningRate of the pre-training SGD; default 0.1, in
	// (0, MaxSeedFloodLearningRate].
	LearningRate float64 `json:"learning_rate,omitempty"`
	// BatchSize of the pre-training minibatches; default 32, in [1, 10^6].
	BatchSize int `json:"batch_size,omitempty"`
	// Shift (synthetic data): the source task's class means are the target's
	// moved by N(0, (shift·class_separation)²) per entry: 0 is the same task,
	// 1 moves each mean about as far as two classes lie apart. Default 0.5,
	// in [0, 10].
	Shift *float64 `json:"shift,omitempty"`
	// Samples (synthetic data) drawn for the source task; default
	// dataset.samples, in [1, 10^7].
	Samples int `json:"samples,omitempty"`
	// SourceFraction (inline data): the share of the training rows moved
	// to the source split (the clients never see them); default 0.5, in
	// [0.05, 0.95].
	SourceFraction float64 `json:"source_fraction,omitempty"`
}

// validateExactSubspace checks what dataset.exact_subspace needs: a latent
// space, no feature noise, and only rotation-equivariant methods.
func (s *SeedFlood) validateExactSubspace(p *Problems) {
	d := s.Dataset
	if d.LatentDim == 0 {
		p.Addf("dataset.latent_dim", "exact_subspace needs latent_dim > 0 (the subspace's dimension)")
	}
	if d.FeatureNoise != 0 {
		p.Addf("dataset.feature_noise", "must be 0 or absent with exact_subspace (the data lie exactly in the subspace), got %v", d.FeatureNoise)
	}
	if s.Perturbation == "rademacher" {
		p.Addf("perturbation", "must be \"gaussian\" with dataset.exact_subspace: Rademacher signs are not rotation-invariant, so the weights the data never meet would matter")
	}
	if s.SubspaceRank != nil && *s.SubspaceRank*d.NFeatures > MaxExactSubspaceBasis {
		p.Addf("subspace_rank", "times dataset.n_features must be <= %d with exact_subspace (SubCGE builds the first layer's basis over every input: n_features × rank floats, rank² × n_features multiply-adds per refresh), got %d × %d",
			MaxExactSubspaceBasis, *s.SubspaceRank, d.NFeatures)
	}
	for i, m := range s.Methods {
		if m == "choco" {
			p.Addf(Index("methods", i), "\"choco\" cannot run with dataset.exact_subspace: its top-k or quantized compression acts on every input's weights coordinate by coordinate")
		}
	}
}

// MaxExactSubspaceBasis bounds subspace_rank × n_features with
// exact_subspace: the first layer's SubCGE basis is built over all inputs
// (12 bytes per entry while orthogonalized, 200 MB at the bound).
const MaxExactSubspaceBasis = 1 << 24

// MaxSeedFloodLearningRate bounds every step size: beyond it a float32 step
// overflows or diverges at once on standardized features.
const MaxSeedFloodLearningRate = 100.0

// SeedFloodPartition splits the training rows over clients.
type SeedFloodPartition struct {
	// Kind: "iid" (default) or "dirichlet".
	Kind string `json:"kind,omitempty"`
	// Alpha of the Dirichlet split; smaller is more skewed. Default 0.5.
	Alpha float64 `json:"alpha,omitempty"`
}

// SeedFloodChoco configures ChocoSGD.
type SeedFloodChoco struct {
	// Compression: "top_k" (default) or "quantize" (QSGD).
	Compression string `json:"compression,omitempty"`
	// Fraction of coordinates top-k keeps; default 0.05.
	Fraction float64 `json:"fraction,omitempty"`
	// Bits per entry of the QSGD levels (plus a sign bit); default 4.
	Bits int `json:"bits,omitempty"`
	// Gamma is the consensus step size; default 0.2.
	Gamma float64 `json:"gamma,omitempty"`
}

// SeedFloodProjection sizes the bytes-per-round table.
type SeedFloodProjection struct {
	Params  float64 `json:"params,omitempty"`
	Clients int     `json:"clients,omitempty"`
}

// SeedFloodMethods lists the method names.
func SeedFloodMethods() []string { return []string{"seedflood", "dsgd", "choco", "dzsgd", "mezo"} }

// SeedFloodGridShape returns the most nearly square rows×cols = n.
func SeedFloodGridShape(n int) (rows, cols int) {
	rows = int(math.Sqrt(float64(n)))
	for rows > 1 && n%rows != 0 {
		rows--
	}
	return max(rows, 1), n / max(rows, 1)
}

func (s *SeedFlood) Defaults() {
	t := &s.Topology
	if (t.Kind == "mesh" || t.Kind == "torus") && t.Rows == 0 && t.Cols == 0 && t.Clients > 0 {
		t.Rows, t.Cols = SeedFloodGridShape(t.Clients)
	}
	if t.Degree == 0 && t.Kind == "random_regular" {
		t.Degree = 4
	}
	if t.Probability == 0 && t.Kind == "erdos_renyi" {
		t.Probability = 0.2
	}
	if s.Model.Kind == "" {
		s.Model.Kind = "softmax"
	}
	if s.Model.Kind == "mlp" && s.Model.Hidden == nil {
		s.Model.Hidden = []int{64}
	}
	d := &s.Dataset
	if d.Kind == "" {
		d.Kind = "synthetic"
	}
	if d.Kind == "synthetic" {
		if d.Samples == 0 {
			d.Samples = 2000
		}
		if d.NFeatures == 0 {
			d.NFeatures = 32
		}
		if d.Classes == 0 {
			d.Classes = 10
		}
		if d.ClassSeparation == 0 {
			d.ClassSeparation = 0.5
		}
		if d.LatentDim > 0 && d.FeatureNoise == 0 && !d.ExactSubspace {
			d.FeatureNoise = 0.1
		}
	}
	if d.Kind == "inline" && d.NFeatures == 0 && len(d.Features) > 0 {
		d.NFeatures = len(d.Features[0])
	}
	if d.TestFraction == 0 {
		d.TestFraction = 0.25
	}
	if s.Partition.Kind == "" {
		s.Partition.Kind = "iid"
	}
	if s.Partition.Alpha == 0 {
		s.Partition.Alpha = 0.5
	}
	if s.Methods == nil {
		s.Methods = SeedFloodMethods()
	}
	if s.Steps == 0 {
		s.Steps = 300
	}
	if s.LearningRate == 0 {
		s.LearningRate = 0.01
	}
	if s.FirstOrderLearningRate == 0 {
		s.FirstOrderLearningRate = 0.1
	}
	pt := &s.Pretrain
	if pt.Kind == "" {
		pt.Kind = "none"
	}
	if pt.Kind == "source" {
		if pt.Steps == 0 {
			pt.Steps = 300
		}
		if pt.LearningRate == 0 {
			pt.LearningRate = 0.1
		}
		if pt.BatchSize == 0 {
			pt.BatchSize = 32
		}
		if pt.Shift == nil {
			v := 0.5
			pt.Shift = &v
		}
		if pt.Samples == 0 {
			pt.Samples = d.Samples
		}
		if pt.SourceFraction == 0 {
			pt.SourceFraction = 0.5
		}
	}
	if s.TargetFraction == 0 {
		s.TargetFraction = 0.95
	}
	if s.ConvergenceTolerance == 0 {
		s.ConvergenceTolerance = 0.01
	}
	if s.Epsilon == 0 {
		s.Epsilon = 1e-3
	}
	if s.PerturbationsPerStep == 0 {
		s.PerturbationsPerStep = 1
	}
	if s.Perturbation == "" {
		s.Perturbation = "gaussian"
	}
	if s.SubspaceRank == nil {
		r := 4
		s.SubspaceRank = &r
	}
	if s.RefreshEverySteps == 0 {
		s.RefreshEverySteps = 5
	}
	if s.BatchSize == 0 {
		s.BatchSize = 16
	}
	if s.EvalEverySteps == 0 {
		s.EvalEverySteps = max(1, s.Steps/20)
	}
	if s.StepsPerHop == nil && s.Link == "" {
		h := 1
		s.StepsPerHop = &h
	}
	if s.Choco.Compression == "" {
		s.Choco.Compression = "top_k"
	}
	if s.Choco.Bits == 0 {
		s.Choco.Bits = 4
	}
	if s.Choco.Fraction == 0 {
		s.Choco.Fraction = 0.05
	}
	if s.Choco.Gamma == 0 {
		s.Choco.Gamma = 0.2
	}
	if s.Projection.Params == 0 {
		s.Projection.Params = 1.3e9
	}
	if s.Projection.Clients == 0 {
		s.Projection.Clients = 128
	}
}

func (s *SeedFlood) Validate(p *Problems) {
	t := s.Topology
	if p.OneOf("topology.kind", t.Kind, []string{"ring", "mesh", "torus", "random_regular", "erdos_renyi", "complete"}) {
		switch t.Kind {
		case "mesh", "torus":
			p.IntInRange("topology.rows", t.Rows, 1, 1<<20)
			p.IntInRange("topology.cols", t.Cols, 1, 1<<20)
			if t.Rows*t.Cols != t.Clients {
				p.Addf("topology.rows", "rows × cols must equal clients (%d), got %d × %d", t.Clients, t.Rows, t.Cols)
			}
		case "random_regular":
			p.IntInRange("topology.degree", t.Degree, 1, max(1, t.Clients-1))
			if t.Clients*t.Degree%2 != 0 {
				p.Addf("topology.degree", "clients × degree must be even, got %d × %d", t.Clients, t.Degree)
			}
		case "erdos_renyi":
			p.InRange("topology.probability", t.Probability, 1e-9, 1)
		}
		// A field of another kind's graph would be ignored silently.
		if t.Kind != "mesh" && t.Kind != "torus" {
			for _, f := range []struct {
				name string
				v    int
			}{{"topology.rows", t.Rows}, {"topology.cols", t.Cols}} {
				if f.v != 0 {
					p.Addf(f.name, "applies to topology kind \"mesh\" or \"torus\", not %q", t.Kind)
				}
			}
		}
		if t.Kind != "random_regular" && t.Degree != 0 {
			p.Addf("topology.degree", "applies to topology kind \"random_regular\", not %q", t.Kind)
		}
		if t.Kind != "erdos_renyi" && t.Probability != 0 {
			p.Addf("topology.probability", "applies to topology kind \"erdos_renyi\", not %q", t.Kind)
		}
	}
	p.IntInRange("topology.clients", t.Clients, 1, 4096)

	if p.OneOf("model.kind", s.Model.Kind, []string{"softmax", "mlp"}) {
		if s.Model.Kind == "softmax" && len(s.Model.Hidden) > 0 {
			p.Addf("model.hidden", "must be empty for softmax, got %v", s.Model.Hidden)
		}
		if s.Model.Kind == "mlp" && len(s.Model.Hidden) == 0 {
			p.Addf("model.hidden", "an mlp needs at least one hidden width")
		}
	}
	for i, h := range s.Model.Hidden {
		p.IntInRange(Index("model.hidden", i), h, 1, 1<<20)
	}

	d := s.Dataset
	if p.OneOf("dataset.kind", d.Kind, []string{"synthetic", "inline"}) {
		if d.Kind == "synthetic" {
			p.IntInRange("dataset.samples", d.Samples, 2, 10_000_000)
			p.IntInRange("dataset.n_features", d.NFeatures, 1, 1<<20)
			p.IntInRange("dataset.classes", d.Classes, 2, 1<<16)
			p.InRange("dataset.class_separation", d.ClassSeparation, 0, 1000)
			p.IntInRange("dataset.latent_dim", d.LatentDim, 0, max(d.NFeatures, 0))
			p.InRange("dataset.feature_noise", d.FeatureNoise, 0, 100)
			if d.ExactSubspace {
				s.validateExactSubspace(p)
			}
			if len(d.Features) > 0 || len(d.FeaturesFlat) > 0 || len(d.Labels) > 0 {
				p.Addf("dataset.kind", "synthetic data takes no features or labels; use kind \"inline\"")
			}
		} else {
			s.validateInline(p)
			if d.ExactSubspace {
				p.Addf("dataset.exact_subspace", "applies to synthetic data only (kind \"synthetic\" with latent_dim)")
			}
		}
	}
	before := p.Len()
	p.InRange("dataset.test_fraction", d.TestFraction, 0.01, 0.9)
	if p.Len() == before {
		s.validateShards(p) // its split is only sized for a fraction in range
	}

	if p.OneOf("partition.kind", s.Partition.Kind, []string{"iid", "dirichlet"}) && s.Partition.Kind == "dirichlet" {
		p.Positive("partition.alpha", s.Partition.Alpha)
	}
	if len(s.Methods) == 0 {
		p.Addf("methods", "must list at least one of %v", SeedFloodMethods())
	}
	seen := map[string]bool{}
	for i, m := range s.Methods {
		if p.OneOf(Index("methods", i), m, SeedFloodMethods()) && seen[m] {
			p.Addf(Index("methods", i), "%q listed twice", m)
		}
		seen[m] = true
	}
	p.IntInRange("steps", s.Steps, 1, 10_000_000)
	learningRate(p, "learning_rate", s.LearningRate)
	learningRate(p, "first_order_learning_rate", s.FirstOrderLearningRate)
	if p.OneOf("pretrain.kind", s.Pretrain.Kind, []string{"none", "source"}) && s.Pretrain.Kind == "source" {
		pt := s.Pretrain
		p.IntInRange("pretrain.steps", pt.Steps, 1, 1_000_000)
		learningRate(p, "pretrain.learning_rate", pt.LearningRate)
		p.IntInRange("pretrain.batch_size", pt.BatchSize, 1, 1_000_000)
		if d.Kind == "synthetic" {
			p.InRange("pretrain.shift", *pt.Shift, 0, 10)
			p.IntInRange("pretrain.samples", pt.Samples, 1, 10_000_000)
		} else {
			p.InRange("pretrain.source_fraction", pt.SourceFraction, 0.05, 0.95)
		}
	}
	if s.TargetAccuracy != 0 {
		p.InRange("target_accuracy", s.TargetAccuracy, 1e-9, 1)
	}
	p.InRange("target_fraction", s.TargetFraction, 1e-9, 1)
	p.InRange("convergence_tolerance", s.ConvergenceTolerance, 0, 1)
	p.InRange("epsilon", s.Epsilon, 1e-7, 1)
	p.IntInRange("perturbations_per_step", s.PerturbationsPerStep, 1, 1024)
	p.OneOf("perturbation", s.Perturbation, []string{"gaussian", "rademacher"})
	p.IntInRange("subspace_rank", *s.SubspaceRank, 0, 1024)
	p.IntInRange("refresh_every_steps", s.RefreshEverySteps, 1, 1_000_000)
	p.IntInRange("batch_size", s.BatchSize, 1, 1_000_000)
	p.IntInRange("eval_every_steps", s.EvalEverySteps, 1, 10_000_000)
	if s.Link == "" {
		p.IntInRange("steps_per_hop", *s.StepsPerHop, 0, 1000)
		if s.StepTimeS != 0 {
			p.Addf("step_time_s", "applies with link (it times each hop against a step), got no link")
		}
	} else {
		if s.StepsPerHop != nil {
			p.Addf("steps_per_hop", "give steps_per_hop or link, not both")
		}
		if _, ok := hw.LinkByName(s.Link); !ok {
			p.OneOf("link", s.Link, hw.LinkNames())
		}
		p.Positive("step_time_s", s.StepTimeS)
	}
	p.OneOf("choco.compression", s.Choco.Compression, []string{"top_k", "quantize"})
	p.InRange("choco.fraction", s.Choco.Fraction, 1e-9, 1)
	p.IntInRange("choco.bits", s.Choco.Bits, 1, 16)
	p.InRange("choco.gamma", s.Choco.Gamma, 1e-9, 1)
	p.InRange("projection.params", s.Projection.Params, 1, 1e15)
	// One client has no links: every method would send nothing, and each
	// one's ratio to SeedFlood's bytes would be 0/0.
	p.IntInRange("projection.clients", s.Projection.Clients, 2, 4096)
}

// learningRate requires a step size in (0, MaxSeedFloodLearningRate].
func learningRate(p *Problems, path string, v float64) {
	switch {
	case !(v > 0) || math.IsInf(v, 0):
		p.Addf(path, "must be > 0, got %v", v)
	case v > MaxSeedFloodLearningRate:
		p.Addf(path, "must be <= %v (a larger step overflows float32 parameters or diverges at once), got %v", MaxSeedFloodLearningRate, v)
	}
}

// validateShards: the training rows (the samples less the test split and,
// for inline data pre-trained on a source split, that split) must give
// every client at least one.
func (s *SeedFlood) validateShards(p *Problems) {
	d, clients := s.Dataset, s.Topology.Clients
	n := d.Samples
	if d.Kind == "inline" {
		n = len(d.Labels)
	}
	if n < 2 || clients < 1 {
		return // reported where they are checked
	}
	train := n - seedflood.Portion(n, d.TestFraction)
	if d.Kind == "inline" && s.Pretrain.Kind == "source" && train >= 2 {
		train -= seedflood.Portion(train, s.Pretrain.SourceFraction)
	}
	if train < clients {
		field := "dataset.samples"
		if d.Kind == "inline" {
			field = "dataset.labels"
		}
		p.Addf(field, "the training split (%d of %d rows, after the test split and any source split) must give each of the %d clients (topology.clients) a row", train, n, clients)
	}
}

func (s *SeedFlood) validateInline(p *Problems) {
	d := s.Dataset
	switch {
	case len(d.Features) > 0 && len(d.FeaturesFlat) > 0:
		p.Addf("dataset.features", "give features or features_flat, not both")
	case len(d.Features) > 0:
		for i, row := range d.Features {
			if len(row) != d.NFeatures {
				p.Addf(Index("dataset.features", i), "must have %d values like row 0, got %d", d.NFeatures, len(row))
				break
			}
		}
		if len(d.Features) != len(d.Labels) {
			p.Addf("dataset.labels", "must have one label per feature row (%d), got %d", len(d.Features), len(d.Labels))
		}
	case len(d.FeaturesFlat) > 0:
		if d.NFeatures < 1 || len(d.FeaturesFlat) != d.NFeatures*len(d.Labels) {
			p.Addf("dataset.features_flat", "must hold n_features (%d) × labels (%d) values, got %d", d.NFeatures, len(d.Labels), len(d.FeaturesFlat))
		}
	default:
		p.Addf("dataset.features", "inline data needs features (rows) or features_flat with n_features")
	}
	if len(d.Labels) < 4 {
		p.Addf("dataset.labels", "need at least 4 labelled rows, got %d", len(d.Labels))
	}
	rows, field := d.Features, func(r, c int) string { return Index(Index("dataset.features", r), c) }
	if len(d.FeaturesFlat) > 0 {
		rows, field = [][]float64{d.FeaturesFlat}, func(_, c int) string { return Index("dataset.features_flat", c) }
	}
huge:
	for r, row := range rows {
		for c, v := range row {
			if !seedflood.FeatureOK(v) {
				p.Addf(field(r, c), "magnitude must be <= %g, got %g", seedflood.MaxFeatureMagnitude, v)
				break huge
			}
		}
	}
	for i, y := range d.Labels {
		if y < 0 {
			p.Addf(Index("dataset.labels", i), "must be >= 0, got %d", y)
			break
		}
	}
	// Classes are 0..max label: a model needs two.
	if len(d.Labels) > 0 && slices.Max(d.Labels) < 1 {
		p.Addf("dataset.labels", "need at least 2 classes (labels 0..k-1), got only label %d", slices.Max(d.Labels))
	}
}

// Flat returns the inline features row-major.
func (d *SeedFloodDataset) Flat() []float64 {
	if len(d.FeaturesFlat) > 0 {
		return d.FeaturesFlat
	}
	out := make([]float64, 0, len(d.Features)*d.NFeatures)
	for _, row := range d.Features {
		out = append(out, row...)
	}
	return out
}
