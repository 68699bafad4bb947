package eidola

import "github.com/eidolon-sim/eidolon/core/hw"

// Cost is what one CTA's work asks of the GPU once its flags are set. The
// detailed model turns it into a duration under the current contention: the
// CTA takes max(ComputeS, L2 bytes / its L2 share, HBMBytes / its HBM share),
// where the shares split the GPU's bandwidth, less the polling traffic, over
// the CTAs computing at that moment.
type Cost struct {
	// ComputeS is the time on one SM with memory keeping up (tensor or
	// vector pipe bound, including the main loop's fixed overheads).
	ComputeS float64
	// ReadBytes and WriteBytes pass through L2.
	ReadBytes, WriteBytes float64
	// HBMBytes is the part of that traffic that reaches HBM.
	HBMBytes float64
}

// CostModel prices the work of one CTA on one GPU. The scenario passes an
// adapter over core/compute; tests pass closed-form models.
type CostModel interface {
	// GEMMTile is one CTA computing a tileM×tileN output tile of an m×n×k
	// GEMM (the whole GEMM sets how operands are reused through L2).
	GEMMTile(m, n, k, tileM, tileN int, d hw.DType) Cost
	// Reduce is one CTA summing `copies` chunks of `elems` elements into one.
	Reduce(elems, copies int, d hw.DType) Cost
	// Copy is one CTA copying elems elements from a receive buffer to the output.
	Copy(elems int, d hw.DType) Cost
}
