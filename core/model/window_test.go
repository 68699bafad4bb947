package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// The pairs local attention attends, against counting them one query at
// a time: query i (aligned to the end of the keys, at position
// p = skv−sq+i) sees min(p+1, w) keys through a sliding window of w, and
// p mod c + 1 through chunks of c.
func TestLocalAttentionPairs(t *testing.T) {
	for _, sq := range []int64{1, 7, 128, 1000} {
		for _, off := range []int64{0, 5, 300} {
			for _, w := range []int64{0, 1, 64, 128, 5000} {
				want, chunked := 0.0, 0.0
				for i := int64(0); i < sq; i++ {
					p := off + i
					keys := p + 1
					if w > 0 {
						keys = min(keys, w)
						chunked += float64(p%w + 1)
					} else {
						chunked += float64(p + 1)
					}
					want += float64(keys)
				}
				assert.Equal(t, want, attnPairs(sq, sq+off, true, Local{Window: w}), "sq %d off %d w %d", sq, off, w)
				assert.Equal(t, chunked, attnPairs(sq, sq+off, true, Local{Chunk: w}), "sq %d off %d chunk %d", sq, off, w)
			}
		}
	}
	// Without a mask local attention is not applied (no query has a position).
	assert.Equal(t, 100.0*200, attnPairs(100, 200, false, Local{Window: 10}))
	assert.Equal(t, 100.0*200, attnPairs(100, 200, false, Local{Chunk: 10}))
}

// gpt-oss alternates a 128-token band with full attention from layer 0: half
// its layers build as windowed blocks, whose prefill attention does the
// band's work and whose decode reads the last 128 keys; the cache keeps
// every token for the full layers and 128 for the windowed ones.
func TestGPTOSSWindowedLayers(t *testing.T) {
	c, g := presetPrefill(t, "gpt-oss-20b", 4096, 1)
	full, ok := g.Block(BlockMoE)
	require.True(t, ok)
	band, ok := g.Block(BlockMoESWA)
	require.True(t, ok)
	assert.Equal(t, 12, full.Count)
	assert.Equal(t, 12, band.Count)
	assert.Equal(t, BlockMoESWA, g.Blocks[g.Order[1]].Name, "layer 0 is windowed")
	flash := func(b Block) Op {
		for _, o := range b.Forward {
			if o.Kind == FlashAttention {
				return o
			}
		}
		t.Fatal("no attention")
		return Op{}
	}
	s, w := 4096.0, 128.0
	perPair := 4 * 64 * 64.0 // 64 heads of 64
	assert.Equal(t, perPair*s*(s+1)/2, flash(full).FLOPs)
	assert.Equal(t, perPair*(w*(w+1)/2+(s-w)*w), flash(band).FLOPs)

	d, err := Build(c, Run{Phase: Decode, Batch: 2, KVLen: 9000, TP: 1, DType: hw.BF16})
	require.NoError(t, err)
	keys := map[string]int64{}
	for _, b := range d.Blocks {
		for _, o := range b.Forward {
			if o.Kind == DecodeAttention {
				keys[b.Name] = o.SeqKV
			}
		}
	}
	assert.Equal(t, map[string]int64{BlockMoE: 9001, BlockMoESWA: 128}, keys)

	perLayer := KVBytesPerTokenLayer(c, 1, 2)
	assert.Equal(t, perLayer*(12*9000+12*128), KVCacheBytesPerSeq(c, hw.BF16, 9000))
	assert.Equal(t, perLayer*24*100, KVCacheBytesPerSeq(c, hw.BF16, 100))
	assert.Equal(t, 24*perLayer, KVCacheBytesPerToken(c, hw.BF16))
}

// Local attention's problems are named: letters other than S, C and F, a
// pattern without its window or chunk, both kinds in one model, a negative
// window, a window on latent attention, and a context-parallel ring that
// does not model it.
func TestWindowProblems(t *testing.T) {
	base, _ := ByName("llama2-7b")
	paths := func(c Config) []string {
		c.Defaults()
		var out []string
		for _, p := range c.Check() {
			out = append(out, p.Path)
		}
		return out
	}
	c := base
	c.SlidingWindow, c.WindowPattern = 4096, "SX"
	assert.Equal(t, []string{"window_pattern"}, paths(c))
	c = base
	c.WindowPattern = "S"
	assert.Equal(t, []string{"window_pattern"}, paths(c))
	c = base
	c.SlidingWindow = -1
	assert.Equal(t, []string{"sliding_window"}, paths(c))
	ds, _ := ByName("deepseek-v3")
	ds.SlidingWindow = 128
	assert.Equal(t, []string{"window_pattern"}, paths(ds))
	c = base
	c.SlidingWindow, c.AttentionChunk, c.WindowPattern = 128, 8192, "SCF"
	assert.Equal(t, []string{"window_pattern"}, paths(c))
	c = base
	c.WindowPattern = "CF"
	assert.Equal(t, []string{"window_pattern"}, paths(c))

	c = base
	c.SlidingWindow = 4096
	c.Defaults()
	require.Empty(t, c.Check())
	assert.Equal(t, "S", c.WindowPattern)
	r := Run{Phase: Training, Batch: 1, SeqLen: 8192, TP: 1, CP: 2, DType: hw.BF16}
	ps := c.CheckRun(r)
	require.Len(t, ps, 1)
	assert.Equal(t, "cp", ps[0].Path)
	r.CPComm = CPAllToAll
	assert.Empty(t, c.CheckRun(r))
}

// gpt-oss's config.json gives the preset; Mistral-7B v0.1's sliding_window
// windows every layer; Qwen2's use_sliding_window the layers from
// max_window_layers on; a window larger than any context changes nothing
// but the pattern.
func TestFromHFConfigWindows(t *testing.T) {
	types := make([]any, 24)
	for i := range types {
		types[i] = map[bool]string{true: "sliding_attention", false: "full_attention"}[i%2 == 0]
	}
	hf := map[string]any{"model_type": "gpt_oss", "num_hidden_layers": 24.0, "hidden_size": 2880.0, "num_attention_heads": 64.0,
		"num_key_value_heads": 8.0, "head_dim": 64.0, "intermediate_size": 2880.0, "vocab_size": 201088.0, "tie_word_embeddings": false,
		"num_local_experts": 32.0, "num_experts_per_tok": 4.0, "sliding_window": 128.0, "layer_types": types, "swiglu_limit": 7.0}
	got, err := FromHFConfig(hf)
	require.NoError(t, err)
	want, _ := ByName("gpt-oss-20b")
	got.Name = want.Name
	assert.Equal(t, want, got)

	mistral := map[string]any{"model_type": "mistral", "num_hidden_layers": 32.0, "hidden_size": 4096.0, "num_attention_heads": 32.0,
		"num_key_value_heads": 8.0, "intermediate_size": 14336.0, "vocab_size": 32000.0, "sliding_window": 4096.0}
	m, err := FromHFConfig(mistral)
	require.NoError(t, err)
	assert.Equal(t, 4096, m.SlidingWindow)
	assert.Equal(t, "S", m.WindowPattern)
	mistral["sliding_window"] = nil // v0.2 on
	m, err = FromHFConfig(mistral)
	require.NoError(t, err)
	assert.Zero(t, m.SlidingWindow)

	qwen := map[string]any{"model_type": "qwen2", "num_hidden_layers": 4.0, "hidden_size": 1024.0, "num_attention_heads": 16.0,
		"num_key_value_heads": 16.0, "intermediate_size": 2816.0, "vocab_size": 151936.0, "sliding_window": 32768.0,
		"use_sliding_window": true, "max_window_layers": 2.0}
	q, err := FromHFConfig(qwen)
	require.NoError(t, err)
	assert.Equal(t, "FFSS", q.WindowPattern)
	qwen["use_sliding_window"] = false
	q, err = FromHFConfig(qwen)
	require.NoError(t, err)
	assert.Zero(t, q.SlidingWindow)

	hf["layer_types"] = []any{"sliding_attention", "linear_attention"}
	_, err = FromHFConfig(hf)
	require.ErrorContains(t, err, "layer_types[1]")
}

// Llama 4 Maverick attends in chunks of 8,192 tokens on three layers of
// four (the fourth, NoPE, globally), its MoE layers every second: chunked
// and full blocks, dense and MoE, as the pattern says; a prefill of two
// chunks does each chunk's causal pairs, a decode reads its own chunk, and
// the cache keeps a chunk for the chunked layers. Its config.json (the
// language model in text_config, the chunked layers from no_rope_layers)
// gives the preset.
func TestLlama4ChunkedAttention(t *testing.T) {
	c, g := presetPrefill(t, "llama4-maverick", 16384, 8)
	counts := map[string]int{}
	for _, b := range g.Blocks {
		counts[b.Name] = b.Count
	}
	assert.Equal(t, map[string]int{BlockEmbedding: 1, BlockLMHead: 1, BlockTransformerChunked: 24, BlockMoEChunked: 12, BlockMoE: 12}, counts)
	chunked, _ := g.Block(BlockTransformerChunked)
	for _, o := range chunked.Forward {
		if o.Kind == FlashAttention {
			assert.Equal(t, 4*5.0*128*(2*8192*8193/2), o.FLOPs, "5 heads of 128 a rank, two chunks' causal pairs")
		}
	}
	d, err := Build(c, Run{Phase: Decode, Batch: 1, KVLen: 9000, TP: 8, DType: hw.BF16})
	require.NoError(t, err)
	for _, b := range d.Blocks {
		for _, o := range b.Forward {
			if o.Kind == DecodeAttention {
				want := map[bool]int64{true: 9000%8192 + 1, false: 9001}[IsLocalBlock(b.Name)]
				assert.Equal(t, want, o.SeqKV, b.Name)
			}
		}
	}
	perLayer := KVBytesPerTokenLayer(c, 1, 2)
	assert.Equal(t, perLayer*(12*20000+36*8192), KVCacheBytesPerSeq(c, hw.BF16, 20000))

	noRope := make([]any, 48)
	for i := range noRope {
		noRope[i] = map[bool]float64{true: 0, false: 1}[(i+1)%4 == 0]
	}
	hf := map[string]any{"model_type": "llama4", "text_config": map[string]any{"model_type": "llama4_text",
		"num_hidden_layers": 48.0, "hidden_size": 5120.0, "num_attention_heads": 40.0, "num_key_value_heads": 8.0, "head_dim": 128.0,
		"intermediate_size": 8192.0, "intermediate_size_mlp": 16384.0, "num_local_experts": 128.0, "num_experts_per_tok": 1.0,
		"interleave_moe_layer_step": 2.0, "vocab_size": 202048.0, "attention_chunk_size": 8192.0, "no_rope_layers": noRope,
		"tie_word_embeddings": false}}
	got, err := FromHFConfig(hf)
	require.NoError(t, err)
	got.Name = c.Name
	assert.Equal(t, c, got)
}

// presetPrefill is the named preset, checked, and its prefill graph of one
// sequence of seq tokens at TP tp.
func presetPrefill(t *testing.T, name string, seq, tp int) (Config, Graph) {
	t.Helper()
	c, ok := ByName(name)
	require.True(t, ok)
	require.Empty(t, c.Check())
	g, err := Build(c, Run{Phase: Prefill, Batch: 1, SeqLen: seq, TP: tp, DType: hw.BF16})
	require.NoError(t, err)
	return c, g
}
