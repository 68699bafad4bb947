package model

import "github.com/eidolon-sim/eidolon/core/hw"

// Params is the model's parameter count (the sum over its blocks at TP 1,
// shared weights once).
func Params(c Config) int64 {
	g, err := Build(c, Run{Phase: Decode, Batch: 1, TP: 1, DType: hw.BF16})
	if err != nil {
		return 0
	}
	return g.Params()
}

// Params is the parameters held by this rank.
func (g Graph) Params() int64 {
	var n int64
	for _, b := range g.Blocks {
		n += int64(b.Count)*b.Params + b.SharedParams
	}
	return n
}

// KVCacheBytesPerToken is the KV cache one token adds to a sequence: keys
// and values of every attention invocation (Zamba's shared block caches per
// invocation), in type d. Past its window or chunk a local-attention layer
// adds none (KVCacheBytesPerSeq).
func KVCacheBytesPerToken(c Config, d hw.DType) float64 {
	return KVCacheBytesPerSeq(c, d, 1)
}

// KVCacheBytesPerSeq is the KV cache of one sequence of context tokens in
// type d: every attention invocation's keys and values, a local layer's
// (Config.Local) for its window or chunk only.
func KVCacheBytesPerSeq(c Config, d hw.DType, context int) float64 {
	tokens, k := 0, 0
	for _, p := range c.Pattern {
		switch {
		case p == PatShared:
			tokens += context
		case p == PatAttention || p == PatMoE:
			if span := int(c.Local(k).Span()); span > 0 {
				tokens += min(context, span)
			} else {
				tokens += context
			}
			k++
		}
	}
	return float64(tokens) * KVBytesPerTokenLayer(c, 1, d.Bytes())
}

// KVBytesPerTokenLayer is the KV cache one token adds to one attention
// layer on one of tp ranks, at e bytes an element: its keys and values
// (the KV heads split over TP, at least one each), or MLA's latent and
// shared rotary key (replicated over TP).
func KVBytesPerTokenLayer(c Config, tp int, e float64) float64 {
	if c.IsMLA() {
		return float64(c.KVLoRARank+c.QKRopeHeadDim) * e
	}
	return 2 * float64(max(c.KVHeads/max(tp, 1), 1)*c.HeadDim) * e
}

// SSMStateBytesPerSeq is the recurrent state one sequence carries while
// decoding, in type d: per SSM block the conv state ((d_conv−1) columns of
// its channels: d_inner, plus 2·ngroups·d_state for Mamba-2) and the SSM
// state (d_inner·d_state). Independent of the sequence length.
func SSMStateBytesPerSeq(c Config, d hw.DType) float64 {
	convC := c.DInner()
	if c.SSM == Mamba2 {
		convC += 2 * c.NGroups * c.DState
	}
	per := float64(convC*(c.DConv-1) + c.DInner()*c.DState)
	n := 0
	for _, p := range c.Pattern {
		if p == PatSSM {
			n++
		}
	}
	return float64(n) * per * d.Bytes()
}

// Totals are a graph's sums over every block instance, on one rank.
type Totals struct {
	ForwardFLOPs, BackwardFLOPs, OptimizerFLOPs float64
	// MatmulFLOPs counts GEMMs and attention only, as the Megatron formula does.
	MatmulFLOPs float64
	// CommBytes is the payload of the tensor-parallel collectives.
	CommBytes float64
	// ActivationBytes is what a training step keeps between forward and backward.
	ActivationBytes float64
}

// Totals sums the graph.
func (g Graph) Totals() Totals {
	var t Totals
	for _, b := range g.Blocks {
		n := float64(b.Count)
		t.ActivationBytes += n * b.ActivationBytes
		for _, list := range [][]Op{b.Forward, b.Backward} {
			for _, o := range list {
				if o.IsComm() {
					t.CommBytes += n * o.Bytes
					continue
				}
				if o.Pass == Forward {
					t.ForwardFLOPs += n * o.FLOPs
				} else {
					t.BackwardFLOPs += n * o.FLOPs
				}
				if o.IsMatmul() {
					t.MatmulFLOPs += n * o.ModelFLOPs()
				}
			}
		}
		for _, o := range b.Optimizer {
			t.OptimizerFLOPs += n * o.FLOPs
		}
		for _, o := range b.SharedOptimizer {
			t.OptimizerFLOPs += o.FLOPs
		}
	}
	return t
}
