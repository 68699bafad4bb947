package model

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlashAttentionCausalFLOPs(t *testing.T) {
	// Causal self-attention over s tokens attends s(s+1)/2 pairs; Q·Kᵀ and
	// P·V are 2·d FLOPs each per pair: 4·b·h·d·s(s+1)/2.
	o := NewFlashAttention("fa", hw.BF16, 2, 32, 8, 1000, 1000, 128, true)
	assert.Equal(t, 4.0*2*32*128*1000*1001/2, o.FLOPs)
	full := NewFlashAttention("fa", hw.BF16, 2, 32, 8, 1000, 1000, 128, false)
	assert.Equal(t, 4.0*2*32*128*1000*1000, full.FLOPs)
	// Backward: 2.5× (five matmuls against two).
	assert.Equal(t, 2.5*o.FLOPs, flashBackward(o).FLOPs)
	// Decode: one query over 1000 keys.
	d := NewDecodeAttention("d", hw.BF16, 2, 2, 32, 8, 1000, 128)
	assert.Equal(t, 4.0*2*32*1000*128, d.FLOPs)
}

// The matmul FLOPs of a Mamba-1 block's forward are its four projections:
// 2·T·(h·2·di + di·(R+2N) + R·di + di·h).
func TestMamba1ForwardFLOPs(t *testing.T) {
	c, _ := ByName("mamba-1.4b")
	g, err := Build(c, Run{Phase: Prefill, Batch: 2, SeqLen: 1024, TP: 1, DType: hw.BF16})
	require.NoError(t, err)
	blk, _ := g.Block(BlockMamba)
	T, h, di, R, N := 2048.0, 2048.0, 4096.0, 128.0, 16.0
	want := 2 * T * (h*2*di + di*(R+2*N) + R*di + di*h)
	gemm, scan := 0.0, 0.0
	for _, o := range blk.Forward {
		switch o.Kind {
		case GEMM:
			gemm += o.FLOPs
		case SelectiveScan:
			scan = o.FLOPs
		}
	}
	assert.Equal(t, want, gemm)
	// 9 FLOPs per (token, channel, state) plus 5 per (token, channel).
	assert.Equal(t, 9*T*di*N+5*T*di, scan)
}

// Splitting over t ranks divides every matmul exactly when heads, KV heads,
// channels and vocabulary divide by t.
func TestTPSplitsMatmulsExactly(t *testing.T) {
	for _, name := range []string{"llama2-7b", "llama2-70b", "mamba-2.8b", "gpt-22b"} {
		c, _ := ByName(name)
		r := Run{Phase: Training, Batch: 1, SeqLen: 512, TP: 1, DType: hw.BF16}
		g1, err := Build(c, r)
		require.NoError(t, err)
		r.TP = 8
		g8, err := Build(c, r)
		require.NoError(t, err)
		assert.InEpsilon(t, g1.Totals().MatmulFLOPs, 8*g8.Totals().MatmulFLOPs, 1e-12, name)
		assert.Zero(t, g1.Totals().CommBytes, name)
		assert.Positive(t, g8.Totals().CommBytes, name)
	}
}

// Training's forward is prefill's forward on every block but the LM head
// (which prefill computes for the last token only).
func TestPrefillMatchesTrainingForward(t *testing.T) {
	c, _ := ByName("llama3-8b")
	tr, _ := Build(c, Run{Phase: Training, Batch: 2, SeqLen: 256, DType: hw.BF16})
	pf, _ := Build(c, Run{Phase: Prefill, Batch: 2, SeqLen: 256, DType: hw.BF16})
	bt, _ := tr.Block(BlockTransformer)
	bp, _ := pf.Block(BlockTransformer)
	sum := func(ops []Op) float64 {
		s := 0.0
		for _, o := range ops {
			if o.IsMatmul() {
				s += o.FLOPs
			}
		}
		return s
	}
	assert.Equal(t, sum(bt.Forward), sum(bp.Forward))
	// Backward matmuls: 2× forward GEMMs, 2.5× attention.
	assert.Greater(t, sum(bt.Backward), 2*sum(bt.Forward))
	assert.Less(t, sum(bt.Backward), 2.5*sum(bt.Forward))
}

func TestFromPresetOverride(t *testing.T) {
	c, ok := FromPreset("mamba-130m", Config{Layers: 3, DState: 32})
	require.True(t, ok)
	assert.Equal(t, "MMM", c.Pattern)
	assert.Equal(t, 32, c.DState)
	assert.Equal(t, 768, c.Hidden)
	_, ok = FromPreset("nope", Config{})
	assert.False(t, ok)
	assert.Equal(t, "MMMAMMMA", EveryK(8, 4))
	assert.Len(t, Catalog(), len(Presets()))
}

// Mamba-2 SSD on one sequence of 512 tokens in chunks of 256 (2 chunks), 80
// heads of 64, state 128, 1 group: C·Bᵀ 2·T·Q·N·G, scores·X 2·T·Q·H·P,
// chunk states and state outputs 2 × 2·T·N·H·P, decay mask T·Q·H, state
// passing 2·chunks·H·P·N.
func TestSSDFLOPs(t *testing.T) {
	c, _ := ByName("mamba2-2.7b")
	g, err := Build(c, Run{Phase: Prefill, Batch: 1, SeqLen: 512, DType: hw.BF16})
	require.NoError(t, err)
	blk, _ := g.Block(BlockMamba2)
	T, Q, H, P, N, G := 512.0, 256.0, 80.0, 64.0, 128.0, 1.0
	want := 2*T*Q*N*G + 2*T*Q*H*P + 4*T*N*H*P + T*Q*H + 2*2*H*P*N
	found := false
	for _, o := range blk.Forward {
		if o.Kind == SSDScan {
			assert.Equal(t, want, o.FLOPs)
			found = true
		}
	}
	assert.True(t, found)
	// Its in_proj packs z, x (2·5120), B, C (2·128) and dt (80 heads).
	assert.Equal(t, int64(2*5120+2*128+80), blk.Forward[1].N)
}
