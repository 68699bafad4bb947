package eidola

import (
	"math"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/eidola"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// costs prices one CTA's work with core/compute. The detailed model needs
// a CTA's on-SM time (math and shared memory) apart from its L2 and HBM
// bytes, because it shares those bandwidths itself; so operators are priced
// twice: on the GPU as it is (for the bytes, whose tiling and L2 reuse
// compute models), and on an on-chip twin with unlimited L2 and HBM
// bandwidth and no launch or dispatch cost (whose time is then the SM-bound part).
type costs struct {
	sms    int
	real   *compute.Evaluator
	onChip *compute.Evaluator
}

func computeCosts(g hw.GPU) eidola.CostModel {
	twin := g
	twin.L2BandwidthBytesPerS = math.Inf(1)
	twin.HBMBandwidthBytesPerS = math.Inf(1)
	twin.KernelLaunchS = 0
	return &costs{sms: g.SMCount, real: compute.NewEvaluator(g), onChip: compute.NewEvaluator(twin)}
}

// GEMMTile: one wave of SM-count tileM×tileN×k products gives one CTA's
// on-SM time and L2 traffic (compute's tile search, padding, shared-memory
// staging); the whole m×n×k GEMM gives the HBM traffic with its L2 reuse,
// spread over the tiles.
func (c *costs) GEMMTile(m, n, k, tileM, tileN int, d hw.DType) eidola.Cost {
	wave := model.NewGEMM("eidola.tile", d, int64(c.sms), int64(tileM), int64(tileN), int64(k))
	on := c.must(c.onChip.Op(wave))
	whole := c.must(c.real.Op(model.NewGEMM("eidola.gemm", d, 1, int64(m), int64(n), int64(k))))
	tiles := float64((m / tileM) * (n / tileN))
	out := float64(tileM*tileN) * outBytes(d)
	return eidola.Cost{
		ComputeS:   on.TimeS,
		ReadBytes:  on.BytesL2/float64(c.sms) - out,
		WriteBytes: out,
		HBMBytes:   whole.BytesHBM / tiles,
	}
}

// Reduce: a streaming kernel reading `copies` chunks and writing one; its
// sums run on the vector units. Priced for one chunk per SM, so the on-chip
// time is one SM's.
func (c *costs) Reduce(elems, copies int, d hw.DType) eidola.Cost {
	e, b := float64(elems), d.Bytes()
	return c.stream(float64(copies-1)*e, float64(copies)*e*b, e*b)
}

// Copy moves a chunk from the receive buffer to the output.
func (c *costs) Copy(elems int, d hw.DType) eidola.Cost {
	e, b := float64(elems), d.Bytes()
	return c.stream(0, e*b, e*b)
}

func (c *costs) stream(flops, read, write float64) eidola.Cost {
	n := float64(c.sms)
	on := c.must(c.onChip.Op(model.NewStreaming("eidola.stream", model.Elementwise, hw.FP32, flops*n, (read+write)*n)))
	return eidola.Cost{ComputeS: on.TimeS, ReadBytes: read, WriteBytes: write, HBMBytes: read + write}
}

// must unwraps a cost: compute only fails on collectives and data types a
// GPU lacks, which the spec's validation rules out for these ops.
func (c *costs) must(cost compute.Cost, err error) compute.Cost {
	if err != nil {
		panic("eidola: " + err.Error())
	}
	return cost
}

func outBytes(d hw.DType) float64 { return max(d.Bytes(), 2) }
