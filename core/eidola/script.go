package eidola

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// Arrival is one row of a ghost script: a write by ghost GPU SourceGPU into
// the detailed GPU, whose flag for Chunk is visible there from TimeS on
// (seconds after the detailed GPU launched the kernel). Bytes is the payload
// the write carried (the flag is written after its data).
//
// A script is the complete behaviour of every ghost as seen by the detailed
// GPU. Chunk ids are kernel-specific (see KernelKind): all-gather + GEMM
// uses the shard index g (= SourceGPU); GEMM + reduce-scatter uses the tile
// index t within the detailed GPU's block; the all-reduce uses the global
// chunk index of the buffer (t for phase-one partials, g·C+t for phase-two
// reduced chunks of GPU g, C chunks per GPU). When several rows name the same
// (source, chunk), the flag counts as set at the latest of them.
type Arrival struct {
	TimeS     float64 `json:"time_s" arrow:"time_s"`
	SourceGPU int     `json:"source_gpu" arrow:"source_gpu"`
	Chunk     int     `json:"chunk" arrow:"chunk"`
	Bytes     float64 `json:"bytes" arrow:"bytes"`
}

// SortArrivals orders a script by (time, source, chunk), the replay order.
func SortArrivals(s []Arrival) {
	slices.SortFunc(s, func(a, b Arrival) int {
		if c := cmp.Compare(a.TimeS, b.TimeS); c != 0 {
			return c
		}
		if c := cmp.Compare(a.SourceGPU, b.SourceGPU); c != 0 {
			return c
		}
		return cmp.Compare(a.Chunk, b.Chunk)
	})
}

// ScriptError lists the rows of a script that do not fit the kernel and the
// signals it lacks; the kernel would otherwise wait forever or for nothing.
type ScriptError struct {
	Unknown []string
	Missing []Signal
	Total   int // expected signals
}

func (e *ScriptError) Error() string {
	var parts []string
	if n := len(e.Unknown); n > 0 {
		parts = append(parts, fmt.Sprintf("%d rows name no signal this kernel waits for: %s", n, firstFew(e.Unknown)))
	}
	if n := len(e.Missing); n > 0 {
		ms := make([]string, len(e.Missing))
		for i, m := range e.Missing {
			ms[i] = fmt.Sprintf("(source %d, chunk %d)", m.Source, m.Chunk)
		}
		parts = append(parts, fmt.Sprintf("%d of %d expected signals never arrive, the kernel would wait forever: %s", n, e.Total, firstFew(ms)))
	}
	return "ghost script does not fit the kernel: " + strings.Join(parts, "; ")
}

func firstFew(xs []string) string {
	const show = 5
	if len(xs) <= show {
		return strings.Join(xs, ", ")
	}
	return strings.Join(xs[:show], ", ") + fmt.Sprintf(", ... (%d more)", len(xs)-show)
}

// signalIndex finds a signal's position in Expected.
func (k *Kernel) signalIndex(s Signal) (int, bool) {
	i := sort.Search(len(k.Expected), func(i int) bool {
		e := k.Expected[i]
		return e.Source > s.Source || (e.Source == s.Source && e.Chunk >= s.Chunk)
	})
	return i, i < len(k.Expected) && k.Expected[i] == s
}

// ArrivalTimes maps a script onto the kernel's expected signals: the arrival
// time of Expected[i] in seconds. Rows naming other signals, negative or
// non-finite times, and signals without a row make a *ScriptError.
func (k *Kernel) ArrivalTimes(script []Arrival) ([]float64, error) {
	times := make([]float64, len(k.Expected))
	for i := range times {
		times[i] = math.NaN()
	}
	var e ScriptError
	for r, a := range script {
		i, ok := k.signalIndex(Signal{Source: a.SourceGPU, Chunk: a.Chunk})
		switch {
		case !ok:
			e.Unknown = append(e.Unknown, fmt.Sprintf("row %d (source %d, chunk %d)", r, a.SourceGPU, a.Chunk))
		case !(a.TimeS >= 0) || math.IsInf(a.TimeS, 0):
			e.Unknown = append(e.Unknown, fmt.Sprintf("row %d (time_s %v)", r, a.TimeS))
		case math.IsNaN(times[i]) || a.TimeS > times[i]:
			times[i] = a.TimeS
		}
	}
	for i, t := range times {
		if math.IsNaN(t) {
			e.Missing = append(e.Missing, k.Expected[i])
		}
	}
	if len(e.Unknown) > 0 || len(e.Missing) > 0 {
		e.Total = len(k.Expected)
		return nil, &e
	}
	return times, nil
}

// Generator makes a script without a network run: source g's n-th write to
// the detailed GPU (its SendOrder) lands at StartS + n·IntervalS. Delays,
// skew, jitter and stragglers come from a Perturbation applied afterwards.
type Generator struct {
	StartS    float64
	IntervalS float64
}

// Script returns one row per expected signal, sorted by time.
func (g Generator) Script(k *Kernel) []Arrival {
	out := make([]Arrival, len(k.Expected))
	for i, s := range k.Expected {
		out[i] = Arrival{
			TimeS:     g.StartS + float64(k.SendOrder[i])*g.IntervalS,
			SourceGPU: s.Source, Chunk: s.Chunk, Bytes: k.ExpectedBytes[i],
		}
	}
	SortArrivals(out)
	return out
}

// Perturbation turns a base script into one replica of a perturbed run.
// Every row of ghost g is shifted by
//
//	DelayS (if g is delayed) + skew_g + straggler_g + jitter_row
//
// where skew_g ~ U[0, SkewS) and straggler_g = StragglerDelayS with
// probability StragglerProbability are drawn once per ghost from the stream
// "eidola/ghosts" of Seed, and jitter_row ~ U[0, JitterS) is drawn per
// (source, chunk) from a counter-based hash of Seed, so it does not depend on
// row order.
type Perturbation struct {
	DelayS float64
	// Delayed picks the ghosts the delay applies to; nil means all.
	Delayed              func(ghost int) bool
	SkewS                float64
	JitterS              float64
	StragglerProbability float64
	StragglerDelayS      float64
	Seed                 uint64
}

// Apply returns the perturbed copy of script, sorted by time. gpus is the
// group size (ghosts are 1..gpus-1).
func (p Perturbation) Apply(script []Arrival, gpus int) []Arrival {
	shift := make([]float64, gpus)
	r := rng.Stream(p.Seed, "eidola/ghosts")
	for g := 1; g < gpus; g++ {
		// Draw both numbers for every ghost so a ghost's draws do not depend
		// on the other settings.
		skew, strag := r.Float64(), r.Float64()
		shift[g] = p.SkewS * skew
		if strag < p.StragglerProbability {
			shift[g] += p.StragglerDelayS
		}
		if p.Delayed == nil || p.Delayed(g) {
			shift[g] += p.DelayS
		}
	}
	out := make([]Arrival, len(script))
	for i, a := range script {
		if a.SourceGPU > 0 && a.SourceGPU < gpus {
			a.TimeS += shift[a.SourceGPU]
		}
		if p.JitterS > 0 {
			u := float64(rng.Mix(p.Seed, uint64(a.SourceGPU), uint64(a.Chunk))>>11) / (1 << 53)
			a.TimeS += p.JitterS * u
		}
		out[i] = a
	}
	SortArrivals(out)
	return out
}
