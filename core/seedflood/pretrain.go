package seedflood

import (
	"fmt"
	"math"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// tagPretrain keys the pre-training minibatches (after the estimator's tags).
const tagPretrain uint64 = 0x9e7a

// Pretraining is the first phase of the fine-tuning regime (SeedFlood's
// setting, arXiv 2602.18181: zeroth-order fine-tuning of a pre-trained
// model): centralized first-order minibatch SGD on a source data set, whose
// result becomes every method's initial model.
type Pretraining struct {
	Source       *Dataset
	Steps        int
	BatchSize    int
	LearningRate float32
	Seed         uint64
	// Canceled is checked every step and Progress told the fraction done
	// after it; either may be nil.
	Canceled func() error
	Progress func(fraction float64)
}

// Pretrain runs p from theta (modified in place) and returns the last
// minibatch loss. A non-finite loss or parameter is an error: a
// pre-training step size that diverges leaves nothing to fine-tune.
func Pretrain(m *Model, theta []float32, p Pretraining) (float64, error) {
	if p.Source == nil || p.Source.Samples() == 0 {
		return 0, fmt.Errorf("pretraining needs a source data set")
	}
	if p.Source.Features != m.Layers[0].In || p.Source.Classes > m.Layers[len(m.Layers)-1].Out {
		return 0, fmt.Errorf("source data (%d features, %d classes) does not fit the model (%d inputs, %d outputs)",
			p.Source.Features, p.Source.Classes, m.Layers[0].In, m.Layers[len(m.Layers)-1].Out)
	}
	ws := m.newWorkspace(p.BatchSize)
	grad := make([]float32, m.NumParams())
	rows := make([]int, p.BatchSize)
	loss := 0.0
	for t := 0; t < p.Steps; t++ {
		if p.Canceled != nil {
			if err := p.Canceled(); err != nil {
				return 0, err
			}
		}
		src := counterSource{key: rng.Mix(p.Seed, tagPretrain, uint64(t))}
		for i := range rows {
			rows[i] = int(src.Uint64() % uint64(p.Source.Samples()))
		}
		loss, _ = m.gradient(theta, grad, p.Source, rows, ws)
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return 0, fmt.Errorf("pre-training diverged at step %d (loss %v): lower pretrain.learning_rate", t, loss)
		}
		axpy(-p.LearningRate, grad, theta)
		if p.Progress != nil {
			p.Progress(float64(t+1) / float64(p.Steps))
		}
	}
	return loss, nil
}

// Evaluate returns the held-out loss and accuracy of theta on d.
func (m *Model) Evaluate(theta []float32, d *Dataset) (loss, accuracy float64) {
	const batch = 256
	loss, accuracy, _ = m.evaluate(theta, nil, d, m.newWorkspace(batch), batch, nil)
	return loss, accuracy
}
