package seedflood

import (
	"math/rand/v2"

	"github.com/eidolon-sim/eidolon/core/rng"
)

// counterSource is a counter-based generator: draw i of key k is
// splitmix64(k + i·φ). Any client holding the key (a seed derived with
// rng.Mix from the master seed and the message's origin, step and index)
// regenerates exactly the same sequence, with no state shared beforehand.
type counterSource struct {
	key, i uint64
}

func (s *counterSource) Uint64() uint64 {
	s.i++
	return rng.Mix(s.key, s.i)
}

// noise draws the perturbation directions of one message (or of one basis).
type noise struct {
	src  counterSource
	rand *rand.Rand
}

func newNoise(key uint64) *noise {
	n := &noise{src: counterSource{key: key}}
	n.rand = rand.New(&n.src)
	return n
}

// fill writes standard normal draws (ziggurat, from math/rand/v2), or ±1
// Rademacher draws, into dst.
func (n *noise) fill(dst []float32, rademacher bool) {
	if rademacher {
		for i := 0; i < len(dst); i += 64 {
			bits := n.src.Uint64()
			for j := i; j < min(i+64, len(dst)); j++ {
				dst[j] = float32(int64(bits&1)*2 - 1)
				bits >>= 1
			}
		}
		return
	}
	for i := range dst {
		dst[i] = float32(n.rand.NormFloat64())
	}
}
