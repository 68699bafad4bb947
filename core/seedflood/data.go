package seedflood

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// Dataset is a classification table: X is row-major Samples×Features,
// Y holds labels in [0, Classes).
type Dataset struct {
	X        []float32
	Y        []int
	Features int
	Classes  int
	// mean and std are the moments Split standardized with (training side).
	mean, std []float64
}

// Samples is the number of rows.
func (d *Dataset) Samples() int { return len(d.Y) }

// Row is sample i's features (shared, do not modify).
func (d *Dataset) Row(i int) []float32 { return d.X[i*d.Features : (i+1)*d.Features] }

// MaxFeatureMagnitude bounds inline feature values: they are stored as
// float32 (largest 3.4e38) and squared in float64 when standardized.
const MaxFeatureMagnitude = 1e30

// FeatureOK reports whether v can be a feature value: finite, at most
// MaxFeatureMagnitude in magnitude.
func FeatureOK(v float64) bool { return math.Abs(v) <= MaxFeatureMagnitude }

// NewDataset checks a table passed in from outside (e.g. scikit-learn's digits).
func NewDataset(x []float64, labels []int, features int) (*Dataset, error) {
	if features < 1 || len(x) != features*len(labels) || len(labels) == 0 {
		return nil, fmt.Errorf("dataset: %d values do not form %d rows of %d features", len(x), len(labels), features)
	}
	d := &Dataset{X: make([]float32, len(x)), Y: append([]int(nil), labels...), Features: features}
	for i, v := range x {
		if !FeatureOK(v) {
			return nil, fmt.Errorf("dataset: feature value %d is %v; values must be finite with magnitude <= %g", i, v, MaxFeatureMagnitude)
		}
		d.X[i] = float32(v)
	}
	for i, y := range labels {
		if y < 0 {
			return nil, fmt.Errorf("dataset: label %d is %d, labels must be >= 0", i, y)
		}
		d.Classes = max(d.Classes, y+1)
	}
	if d.Classes < 2 {
		return nil, fmt.Errorf("dataset: need at least 2 classes, got %d", d.Classes)
	}
	return d, nil
}

// SyntheticDataset draws a Gaussian-mixture task: class c has mean μ_c with
// entries N(0, separation²) and samples are μ_y + N(0, I). Larger separation
// makes the classes easier to tell apart; labels are uniform.
func SyntheticDataset(r *rand.Rand, samples, features, classes int, separation float64) *Dataset {
	return SampleMixture(r, SyntheticMeans(r, features, classes, separation), samples, features, classes)
}

// SyntheticMeans draws the class means of a Gaussian-mixture task
// (classes×features, row-major), entries N(0, separation²).
func SyntheticMeans(r *rand.Rand, features, classes int, separation float64) []float64 {
	means := make([]float64, classes*features)
	for i := range means {
		means[i] = r.NormFloat64() * separation
	}
	return means
}

// ShiftMeans is a related task for pre-training: every class mean moves by
// N(0, (shift·separation)²) per entry, so shift = 0 is the same task and
// shift = 1 moves each mean about as far as two classes lie apart.
func ShiftMeans(r *rand.Rand, means []float64, shift, separation float64) []float64 {
	out := make([]float64, len(means))
	for i, m := range means {
		out[i] = m + r.NormFloat64()*shift*separation
	}
	return out
}

// RandomMap draws a features×latent matrix with entries N(0, 1/latent):
// the linear map from a low-dimensional latent space to observed features.
func RandomMap(r *rand.Rand, features, latent int) []float64 {
	a := make([]float64, features*latent)
	s := 1 / math.Sqrt(float64(latent))
	for i := range a {
		a[i] = r.NormFloat64() * s
	}
	return a
}

// Embed maps a latent data set (k features) to features = A·z + N(0, noise²·I):
// data of low intrinsic dimension, as pre-trained representations are,
// where the loss is flat in all but about k·classes directions. That is
// the structure zeroth-order fine-tuning relies on (MeZO, arXiv 2305.17333,
// Sec. 4: ZO-SGD slows with the Hessian's effective rank, not with d).
func Embed(r *rand.Rand, latent *Dataset, a []float64, features int, noise float64) *Dataset {
	k := latent.Features
	d := &Dataset{X: make([]float32, latent.Samples()*features), Y: append([]int(nil), latent.Y...), Features: features, Classes: latent.Classes}
	for i := 0; i < latent.Samples(); i++ {
		z := latent.Row(i)
		x := d.X[i*features : (i+1)*features]
		for j := range x {
			v := noise * r.NormFloat64()
			for c, zc := range z {
				v += a[j*k+c] * float64(zc)
			}
			x[j] = float32(v)
		}
	}
	return d
}

// SampleMixture draws samples μ_y + N(0, I) with uniform labels y.
func SampleMixture(r *rand.Rand, means []float64, samples, features, classes int) *Dataset {
	d := &Dataset{X: make([]float32, samples*features), Y: make([]int, samples), Features: features, Classes: classes}
	for i := 0; i < samples; i++ {
		y := r.IntN(classes)
		d.Y[i] = y
		for j := 0; j < features; j++ {
			d.X[i*features+j] = float32(means[y*features+j] + r.NormFloat64())
		}
	}
	return d
}

// Split shuffles rows and holds out testFraction of them (at least one row
// on each side), then standardizes every feature with the training rows'
// mean and standard deviation.
func (d *Dataset) Split(r *rand.Rand, testFraction float64) (train, test *Dataset) {
	n := d.Samples()
	perm := r.Perm(n)
	nTest := Portion(n, testFraction)
	test = d.subset(perm[:nTest])
	train = d.subset(perm[nTest:])
	train.mean, train.std = train.moments()
	train.standardize(train.mean, train.std)
	test.standardize(train.mean, train.std)
	return train, test
}

// Portion is how many of n rows a fraction takes (Split's test rows,
// Take's source rows): rounded, at least one and leaving at least one.
func Portion(n int, fraction float64) int {
	return min(max(1, int(math.Round(fraction*float64(n)))), n-1)
}

// StandardizedLike returns d standardized with the moments ref was
// standardized with (ref must come from Split): a pre-training set then
// lives in the same feature coordinates as the task it prepares for.
func (d *Dataset) StandardizedLike(ref *Dataset) *Dataset {
	out := d.subset(nil)
	out.X = append(out.X, d.X...)
	out.Y = append(out.Y, d.Y...)
	out.standardize(ref.mean, ref.std)
	return out
}

// Take moves a random fraction of d's rows (at least one, leaving at least
// one) into a new set and keeps the rest: how an inline table gives up a
// source split for pre-training.
func (d *Dataset) Take(r *rand.Rand, fraction float64) (taken, rest *Dataset) {
	n := d.Samples()
	perm := r.Perm(n)
	k := Portion(n, fraction)
	taken, rest = d.subset(perm[:k]), d.subset(perm[k:])
	taken.mean, taken.std, rest.mean, rest.std = d.mean, d.std, d.mean, d.std
	return taken, rest
}

func (d *Dataset) subset(rows []int) *Dataset {
	s := &Dataset{Features: d.Features, Classes: d.Classes, X: make([]float32, 0, len(rows)*d.Features), Y: make([]int, 0, len(rows))}
	for _, i := range rows {
		s.X = append(s.X, d.Row(i)...)
		s.Y = append(s.Y, d.Y[i])
	}
	return s
}

func (d *Dataset) moments() (mean, std []float64) {
	mean = make([]float64, d.Features)
	std = make([]float64, d.Features)
	n := float64(d.Samples())
	for i := 0; i < d.Samples(); i++ {
		for j, v := range d.Row(i) {
			mean[j] += float64(v) / n
		}
	}
	for i := 0; i < d.Samples(); i++ {
		for j, v := range d.Row(i) {
			dv := float64(v) - mean[j]
			std[j] += dv * dv / n
		}
	}
	for j := range std {
		std[j] = math.Sqrt(std[j])
		if std[j] < 1e-8 {
			std[j] = 1 // a constant feature (e.g. a blank pixel) stays at 0
		}
	}
	return mean, std
}

func (d *Dataset) standardize(mean, std []float64) {
	for i := range d.X {
		j := i % d.Features
		d.X[i] = float32((float64(d.X[i]) - mean[j]) / std[j])
	}
}

// PartitionIID deals shuffled rows round-robin to n clients.
func PartitionIID(r *rand.Rand, d *Dataset, n int) [][]int {
	shards := make([][]int, n)
	for k, i := range r.Perm(d.Samples()) {
		shards[k%n] = append(shards[k%n], i)
	}
	return shards
}

// PartitionDirichlet gives each class's rows to clients in proportions drawn
// from Dirichlet(α, ..., α): small α puts most of a class on few clients
// (non-IID), large α approaches IID. A client left empty receives one row
// from the largest shard so every client can draw a minibatch.
func PartitionDirichlet(r *rand.Rand, d *Dataset, n int, alpha float64) [][]int {
	byClass := make([][]int, d.Classes)
	for _, i := range r.Perm(d.Samples()) {
		byClass[d.Y[i]] = append(byClass[d.Y[i]], i)
	}
	shards := make([][]int, n)
	p := make([]float64, n)
	for _, rows := range byClass {
		sum := 0.0
		for k := range p {
			p[k] = rng.Gamma(r, alpha)
			sum += p[k]
		}
		start, cum := 0, 0.0
		for k := range p {
			cum += p[k] / sum
			end := int(math.Round(cum * float64(len(rows))))
			if k == n-1 {
				end = len(rows)
			}
			shards[k] = append(shards[k], rows[start:end]...)
			start = end
		}
	}
	for k := range shards {
		if len(shards[k]) > 0 {
			continue
		}
		big := 0
		for j := range shards {
			if len(shards[j]) > len(shards[big]) {
				big = j
			}
		}
		last := len(shards[big]) - 1
		shards[k] = append(shards[k], shards[big][last])
		shards[big] = shards[big][:last]
	}
	for _, s := range shards {
		sort.Ints(s)
	}
	return shards
}
