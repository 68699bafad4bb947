package seedflood

import (
	"errors"
	"fmt"
	"math"
)

// Method names accepted by Run.
const (
	MethodSeedFlood = "seedflood" // flood (seed, scalar) ZO updates to every client
	MethodDSGD      = "dsgd"      // gossip averaging of models + first-order SGD
	MethodChoco     = "choco"     // ChocoSGD: compressed gossip (top-k or quantized) + first-order SGD
	MethodDZSGD     = "dzsgd"     // gossip averaging of models + ZO SGD
	MethodMeZO      = "mezo"      // centralized ZO: one model, every client's perturbations
)

// Config is everything a training run needs; the scenario driver builds it
// from a spec.
type Config struct {
	Graph  *Graph
	Model  *Model
	Train  *Dataset
	Test   *Dataset
	Shards [][]int // rows of Train per client
	Init   []float32

	Steps, BatchSize, EvalEvery int
	// LearningRate is the ZO step size (SeedFlood, DZSGD, MeZO);
	// FirstOrderLearningRate that of DSGD and ChocoSGD.
	LearningRate, FirstOrderLearningRate float32
	ZO                                   ZOConfig
	// Perturbations is q, the two-point estimates each client makes per step.
	Perturbations int
	// StepsPerHop is the SeedFlood delay of one hop in steps (0: a message
	// reaches everyone within the step it is sent). When HopTimeS > 0 the
	// delay follows the link model instead: a message h hops away arrives
	// ⌈h·HopTimeS / StepTimeS⌉ steps after it is sent.
	StepsPerHop         int
	HopTimeS, StepTimeS float64
	// ChocoFraction is the share of coordinates top-k keeps; ChocoGamma the
	// consensus step size.
	ChocoFraction float64
	ChocoGamma    float32
	// ChocoBits > 0 replaces top-k by QSGD quantization with this many
	// level bits per entry.
	ChocoBits int

	// privateWeights makes every SubCGE client project into its own copy of
	// the weights (the reference the shared versionStore is tested against).
	privateWeights bool

	// Canceled and Progress connect to scenario.Env; both may be nil.
	Canceled func() error
	Progress func(fraction float64)
}

// Point is one evaluation of a method.
type Point struct {
	Step            int
	Loss, Accuracy  float64 // held-out, of the clients' average model
	Consensus       float64 // mean over clients of ‖θ_i − θ̄‖₂
	CumulativeBytes int64
}

// Outcome is one method's run.
type Outcome struct {
	Method string
	// Replicas is the number of model copies trained: clients, or 1 for MeZO.
	Replicas   int
	History    []Point
	Counters   Counters
	TotalBytes int64
	// Params are the final effective parameters of every client
	// (one entry for centralized MeZO).
	Params [][]float32
	// Diverged is set when a loss, estimate or gradient became non-finite;
	// training stopped at DivergedStep (steps completed) and History holds
	// only the finite evaluations before it.
	Diverged     bool
	DivergedStep int
}

// errDiverged is returned by a trainer's step when its numbers stop being
// finite (a step size far too large); Run turns it into Outcome.Diverged.
var errDiverged = errors.New("diverged")

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// stop reports cancellation; trainers check it before each client's work.
func (c *Config) stop() error {
	if c.Canceled == nil {
		return nil
	}
	return c.Canceled()
}

// DelaySteps is how many steps after it is sent a message arrives h hops away.
func (c *Config) DelaySteps(h int) int {
	if c.HopTimeS > 0 {
		return int(math.Ceil(float64(h) * c.HopTimeS / c.StepTimeS))
	}
	return h * c.StepsPerHop
}

// trainer advances one method by one step and exposes its clients' models.
type trainer interface {
	step(t int) (bytes int64, err error)
	clients() int
	params(i int, dst []float32)
}

// Run trains one method and evaluates it every EvalEvery steps (and at the
// start and end).
func Run(cfg *Config, method string) (*Outcome, error) {
	if len(cfg.Shards) != cfg.Graph.NumNodes() {
		return nil, fmt.Errorf("%d shards for %d clients", len(cfg.Shards), cfg.Graph.NumNodes())
	}
	zeroth := method == MethodSeedFlood || method == MethodDZSGD || method == MethodMeZO
	if cfg.Model.Reduced() && (method == MethodChoco || zeroth && cfg.ZO.Rademacher) {
		return nil, fmt.Errorf("%s with Rademacher perturbations or ChocoSGD's compression needs every input's weights: "+
			"neither is rotation-equivariant, so a model of data in a subspace cannot keep only the rows the data meet", method)
	}
	out := &Outcome{Method: method}
	var tr trainer
	switch method {
	case MethodSeedFlood:
		s, err := newSeedFlood(cfg, &out.Counters)
		if err != nil {
			return nil, err
		}
		tr = s
	case MethodMeZO:
		tr = newMeZO(cfg, &out.Counters)
	case MethodDSGD, MethodChoco, MethodDZSGD:
		tr = newGossip(cfg, method, &out.Counters)
	default:
		return nil, fmt.Errorf("unknown method %q", method)
	}
	ev := newEvaluator(cfg)
	p0, err := ev.point(tr, 0, 0)
	if err != nil {
		return nil, err
	}
	if !finite(p0.Loss) {
		return nil, fmt.Errorf("the initial model's loss is %v", p0.Loss)
	}
	out.History = append(out.History, p0)
	for t := 0; t < cfg.Steps; t++ {
		bytes, err := tr.step(t)
		if errors.Is(err, errDiverged) {
			out.Diverged, out.DivergedStep = true, t
			break
		}
		if err != nil {
			return nil, err
		}
		out.TotalBytes += bytes
		if done := t + 1; done%cfg.EvalEvery == 0 || done == cfg.Steps {
			p, err := ev.point(tr, done, out.TotalBytes)
			if err != nil {
				return nil, err
			}
			if !finite(p.Loss) || !finite(p.Consensus) {
				out.Diverged, out.DivergedStep = true, done
				break
			}
			out.History = append(out.History, p)
		}
		if cfg.Progress != nil {
			cfg.Progress(float64(t+1) / float64(cfg.Steps))
		}
	}
	out.Replicas = tr.clients()
	for i := 0; i < tr.clients(); i++ {
		p := make([]float32, cfg.Model.NumParams())
		tr.params(i, p)
		out.Params = append(out.Params, p)
	}
	return out, nil
}

type evaluator struct {
	cfg       *Config
	ws        *workspace
	mean, buf []float32
	all       [][]float32
	evalBatch int
}

func newEvaluator(cfg *Config) *evaluator {
	const evalBatch = 256
	d := cfg.Model.NumParams()
	return &evaluator{cfg: cfg, ws: cfg.Model.newWorkspace(evalBatch), mean: make([]float32, d), buf: make([]float32, d), evalBatch: evalBatch}
}

// point evaluates the clients' average model on the held-out set and the
// consensus distance mean_i ‖θ_i − θ̄‖₂ (accumulated in float64).
func (e *evaluator) point(tr trainer, step int, bytes int64) (Point, error) {
	n := tr.clients()
	d := len(e.mean)
	sum := make([]float64, d)
	for i := 0; i < n; i++ {
		tr.params(i, e.buf)
		for j, v := range e.buf {
			sum[j] += float64(v)
		}
	}
	for j := range sum {
		sum[j] /= float64(n)
		e.mean[j] = float32(sum[j])
	}
	cons := 0.0
	if n > 1 {
		for i := 0; i < n; i++ {
			tr.params(i, e.buf)
			sq := 0.0
			for j, v := range e.buf {
				dv := float64(v) - sum[j]
				sq += dv * dv
			}
			cons += math.Sqrt(sq) / float64(n)
		}
	}
	loss, acc, err := e.cfg.Model.evaluate(e.mean, nil, e.cfg.Test, e.ws, e.evalBatch, e.cfg.stop)
	return Point{Step: step, Loss: loss, Accuracy: acc, Consensus: cons, CumulativeBytes: bytes}, err
}
