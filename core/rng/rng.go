// Package rng splits one master seed into named, independent random streams,
// so that adding a random draw in one module never shifts another module's draws.
package rng

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// Stream returns a deterministic generator for the named stream of a seed.
// The same (seed, name) always yields the same sequence.
func Stream(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// Mix hashes a seed with integers into a new seed, for counter-based draws
// (e.g. the perturbation of client c at step t).
func Mix(seed uint64, parts ...uint64) uint64 {
	x := seed ^ 0x9e3779b97f4a7c15
	for _, p := range parts {
		x = splitmix(x ^ splitmix(p))
	}
	return x
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Gamma draws Gamma(shape, 1) by Marsaglia and Tsang (2000, "A simple
// method for generating gamma variables"), with the boost
// Gamma(a) = Gamma(a+1)·U^(1/a) for shape < 1. Shape must be > 0.
func Gamma(r *rand.Rand, shape float64) float64 {
	if shape < 1 {
		return Gamma(r, shape+1) * math.Pow(r.Float64(), 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		// The squeeze accepts most draws without the logarithm; the log
		// test decides the rest.
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
