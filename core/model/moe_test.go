package model

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// Every MoE preset's total and active parameter counts are within 1% of
// the published figures.
func TestMoEPresetParamsMatchPublished(t *testing.T) {
	for _, p := range MoEPresets() {
		c, ok := ByName(p.Config.Name)
		require.True(t, ok)
		require.Empty(t, c.Check(), p.Config.Name)
		total, active := float64(Params(c)), float64(p.PublishedActive(c))
		t.Logf("%-16s total %.4gB (published %.4gB) active %.4gB (published %.4gB)", c.Name, total/1e9, p.PublishedParams/1e9, active/1e9, p.PublishedActiveParams/1e9)
		assert.InDelta(t, 1, total/p.PublishedParams, 0.01, "%s total", c.Name)
		if p.ActiveStep > 0 {
			// A figure coarser than 1%: the count lies in its interval.
			lo := p.PublishedActiveParams - p.ActiveStep/2
			if p.ActiveTruncated {
				lo = p.PublishedActiveParams
			}
			assert.GreaterOrEqual(t, active, lo, "%s active", c.Name)
			assert.Less(t, active, lo+p.ActiveStep, "%s active", c.Name)
			continue
		}
		assert.InDelta(t, 1, active/p.PublishedActiveParams, 0.01, "%s active", c.Name)
	}
}

// Mixtral-8x7B by hand: attention 4096·(4096+2·1024) + 4096·4096, experts
// 8·3·4096·14336, router 8·4096, two norms; embeddings 2·32000·4096 and the
// final norm.
func TestMixtralParamsClosedForm(t *testing.T) {
	c, _ := ByName("mixtral-8x7b")
	h := int64(4096)
	layer := h*(h+2*1024) + h*h + 8*3*h*14336 + 8*h + 2*h
	want := 32*layer + 2*32000*h + h
	assert.Equal(t, want, Params(c))
	assert.Equal(t, want-32*6*3*h*14336, ActiveParams(c))
}

// DeepSeek-V3's MLA caches 512+64 elements per token and layer:
// 61·576·2 bytes in bf16.
func TestMLAKVCache(t *testing.T) {
	c, _ := ByName("deepseek-v3")
	assert.Equal(t, 61*576*2.0, KVCacheBytesPerToken(c, hw.BF16))
	assert.Equal(t, "AAA", c.Pattern[:3])
	assert.Equal(t, 58, countRune(c.Pattern, PatMoE))
}

// A balanced MoE block's expert GEMMs do k/E of the work of all experts:
// forward FLOPs of the routed experts = 2·3·h·f·T·k.
func TestMoEForwardFLOPs(t *testing.T) {
	c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1})
	g, err := Build(c, Run{Phase: Training, Batch: 2, SeqLen: 1024, TP: 1, DType: hw.BF16})
	require.NoError(t, err)
	blk, ok := g.Block(BlockMoE)
	require.True(t, ok)
	var experts float64
	for _, o := range blk.Forward {
		if o.Kind == GroupedGEMM {
			experts += o.FLOPs
		}
	}
	T := 2048.0
	assert.InDelta(t, 2*3*4096*14336*T*2, experts, 1)
	// EP 4: each rank holds 2 experts and (balanced) processes T·k tokens.
	g4, err := Build(c, Run{Phase: Training, Batch: 2, SeqLen: 1024, TP: 1, EP: 4, DType: hw.BF16})
	require.NoError(t, err)
	b4, _ := g4.Block(BlockMoE)
	assert.Equal(t, blk.ExpertParams/4, b4.ExpertParams)
	for _, o := range b4.Forward {
		if o.Kind == GroupedGEMM {
			assert.Len(t, o.Groups, 2)
			assert.Equal(t, int64(T*2), o.M)
		}
	}
}

func TestMoEBadSpecsNameField(t *testing.T) {
	c, _ := FromPreset("mixtral-8x7b", Config{MoE: MoE{ExpertsPerToken: 9}})
	ps := c.Check()
	require.NotEmpty(t, ps)
	assert.Equal(t, "experts_per_token", ps[0].Path)
	c, _ = ByName("mixtral-8x7b")
	ps = c.CheckRun(Run{Phase: Training, Batch: 1, SeqLen: 8, TP: 1, EP: 3, DType: hw.BF16})
	require.NotEmpty(t, ps)
	assert.Equal(t, "ep", ps[0].Path)
}

func TestOverridePresetKeepsMoEFields(t *testing.T) {
	c, ok := FromPreset("deepseek-v3", Config{Layers: 5, MoE: MoE{Experts: 64}})
	require.True(t, ok)
	assert.Equal(t, 64, c.Experts)
	assert.Equal(t, 8, c.ExpertsPerToken)
	assert.Equal(t, "AAAEE", c.Pattern)
	assert.False(t, math.IsNaN(float64(Params(c))))
}

// The Hugging Face config.json of DeepSeek-V3 (the fields FromHFConfig
// reads, values from deepseek-ai/DeepSeek-V3) gives the preset.
func TestFromHFConfigDeepSeekV3(t *testing.T) {
	hf := map[string]any{"model_type": "deepseek_v3", "num_hidden_layers": 61.0, "hidden_size": 7168.0,
		"num_attention_heads": 128.0, "num_key_value_heads": 128.0, "intermediate_size": 18432.0, "vocab_size": 129280.0,
		"tie_word_embeddings": false, "n_routed_experts": 256.0, "num_experts_per_tok": 8.0, "moe_intermediate_size": 2048.0,
		"n_shared_experts": 1.0, "first_k_dense_replace": 3.0, "moe_layer_freq": 1.0, "scoring_func": "sigmoid",
		"q_lora_rank": 1536.0, "kv_lora_rank": 512.0, "qk_rope_head_dim": 64.0, "qk_nope_head_dim": 128.0, "v_head_dim": 128.0,
		"quantization_config": map[string]any{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": []any{128.0, 128.0}}}
	c, err := FromHFConfig(hf)
	require.NoError(t, err)
	want, _ := ByName("deepseek-v3")
	assert.Equal(t, Params(want), Params(c))
	assert.Equal(t, ActiveParams(want), ActiveParams(c))
	assert.Equal(t, want.Pattern, c.Pattern)
	assert.True(t, c.FP8BlockScaled)
	delete(hf, "quantization_config")
	c, err = FromHFConfig(hf)
	require.NoError(t, err)
	assert.False(t, c.FP8BlockScaled)

	l, err := FromHFConfig(map[string]any{"model_type": "llama", "num_hidden_layers": 32.0, "hidden_size": 4096.0,
		"num_attention_heads": 32.0, "num_key_value_heads": 32.0, "intermediate_size": 11008.0, "vocab_size": 32000.0})
	require.NoError(t, err)
	assert.Equal(t, int64(6_738_415_616), Params(l))

	_, err = FromHFConfig(map[string]any{"model_type": "mixtral", "hidden_size": 4096.0})
	require.ErrorContains(t, err, "num_local_experts")
	_, err = FromHFConfig(map[string]any{"model_type": "t5"})
	require.ErrorContains(t, err, "model_type")
}

// DeepSeek's activated counts leave out the input embedding: for
// DeepSeek-V2-Lite (arXiv 2405.04434, 15.7B total, 2.4B activated) and
// DeepSeek-V3 (37B) the count without it is closer to the published
// figure than the count with it.
func TestDeepSeekActiveConvention(t *testing.T) {
	lite := Config{Name: "deepseek-v2-lite", Family: LLaMA, Layers: 27, Hidden: 2048, Heads: 16, FFNHidden: 10944, Vocab: 102400,
		MoE: MoE{Experts: 64, ExpertsPerToken: 6, SharedExperts: 2, ExpertFFNHidden: 1408, DenseLayers: 1,
			KVLoRARank: 512, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128}}
	lite.Defaults()
	require.Empty(t, lite.Check())
	require.InDelta(t, 1, float64(Params(lite))/15.7e9, 0.01)
	v3, ok := ByName("deepseek-v3")
	require.True(t, ok)
	for _, tc := range []struct {
		c         Config
		published float64
	}{{lite, 2.4e9}, {v3, 37e9}} {
		with := float64(ActiveParams(tc.c))
		without := with - float64(tc.c.Vocab)*float64(tc.c.Hidden)
		require.Less(t, math.Abs(without-tc.published), math.Abs(with-tc.published), tc.c.Name)
	}
}

// DeepSeek-V3's multi-token-prediction module runs in training only: one
// block after the LM head with its own projection and transformer block
// (the head and the embedding are shared), and it is left out of the
// parameter count.
func TestMTPModule(t *testing.T) {
	c, ok := ByName("deepseek-v3")
	require.True(t, ok)
	c.Layers, c.Pattern = 5, ""
	plain := c
	c.MTPLayers = 1
	c.Defaults()
	plain.Defaults()
	require.Equal(t, Params(plain), Params(c), "the main model's parameters")
	run := Run{Phase: Training, Batch: 1, SeqLen: 256, TP: 1, DType: hw.BF16}
	g, err := Build(c, run)
	require.NoError(t, err)
	require.Equal(t, 2, g.Tail())
	mtp, ok := g.Block(BlockMTP)
	require.True(t, ok)
	moe, ok := g.Block(BlockMoE)
	require.True(t, ok)
	h := int64(c.Hidden)
	require.Equal(t, moe.Params+2*h+2*h*h, mtp.Params)
	require.Equal(t, moe.ExpertParams, mtp.ExpertParams)
	inf, err := Build(c, Run{Phase: Prefill, Batch: 1, SeqLen: 256, TP: 1, DType: hw.BF16})
	require.NoError(t, err)
	_, ok = inf.Block(BlockMTP)
	require.False(t, ok, "inference runs the main model only")
	require.Equal(t, 1, inf.Tail())
	// More MTP modules than layers is an error naming the field (a spec
	// fuzz case asked for a million, which no budget had counted).
	c.MTPLayers = c.Layers + 1
	_, err = Build(c, run)
	require.ErrorContains(t, err, "mtp_layers")
	// An MTP module is a transformer layer: a pure SSM model has none to
	// give (its attention had zero heads and NaN intensity: grown-spec
	// test, seed 466).
	m, ok := ByName("falcon-mamba-7b")
	require.True(t, ok)
	m.Layers, m.MTPLayers = 2, 1
	m.Defaults()
	_, err = Build(m, run)
	require.ErrorContains(t, err, "mtp_layers: multi-token-prediction modules are transformer layers")
}

// Megatron-Core's second permutation: with more than one local expert a
// training MoE block copies the received tokens into expert order and back
// (each reading and writing every received token, with its fp32
// probability and the index map), and the backward copies the gradients
// back; with one local expert, or in inference, there is no copy.
func TestMoESortChunks(t *testing.T) {
	c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1})
	find := func(ops []Op, name string) (Op, bool) {
		for _, o := range ops {
			if o.Name == name {
				return o, true
			}
		}
		return Op{}, false
	}
	// EP 4: 2 local experts, T·k = 4,096 received slots (balanced).
	g, err := Build(c, Run{Phase: Training, Batch: 2, SeqLen: 1024, TP: 1, EP: 4, DType: hw.BF16})
	require.NoError(t, err)
	blk, _ := g.Block(BlockMoE)
	r, h := 4096.0, 4096.0
	sort, ok := find(blk.Forward, "moe.sort_chunks")
	require.True(t, ok)
	assert.InDelta(t, 2*r*h*2+2*4*r+8*r, sort.Bytes, 1)
	unsort, ok := find(blk.Forward, "moe.unsort_chunks")
	require.True(t, ok)
	assert.InDelta(t, 2*r*h*2+2*4*r+8*r, unsort.Bytes, 1)
	for _, n := range []string{"moe.sort_chunks.bwd", "moe.unsort_chunks.bwd"} {
		o, ok := find(blk.Backward, n)
		require.True(t, ok, n)
		assert.InDelta(t, 2*r*h*2+8*r, o.Bytes, 1)
	}
	// The copies sit between the dispatch and the expert GEMMs, and between
	// the expert GEMMs and the combine.
	var order []string
	for _, o := range blk.Forward {
		if o.Kind == AllToAll || o.Kind == GroupedGEMM || o.Name == "moe.sort_chunks" || o.Name == "moe.unsort_chunks" {
			order = append(order, o.Name)
		}
	}
	assert.Equal(t, []string{"moe.dispatch.all_to_all", "moe.sort_chunks", "moe.experts.gate_up", "moe.experts.down",
		"moe.unsort_chunks", "moe.combine.all_to_all"}, order)
	// EP 8: one local expert, nothing to sort; inference never sorts.
	g8, err := Build(c, Run{Phase: Training, Batch: 2, SeqLen: 1024, TP: 1, EP: 8, DType: hw.BF16})
	require.NoError(t, err)
	b8, _ := g8.Block(BlockMoE)
	_, ok = find(b8.Forward, "moe.sort_chunks")
	assert.False(t, ok)
	gi, err := Build(c, Run{Phase: Prefill, Batch: 2, SeqLen: 1024, TP: 1, EP: 4, DType: hw.BF16})
	require.NoError(t, err)
	bi, _ := gi.Block(BlockMoE)
	_, ok = find(bi.Forward, "moe.sort_chunks")
	assert.False(t, ok)
}

// What a training MoE block keeps per routed slot: the expert GEMMs'
// inputs (h and f elements), the gate/up output the scaled SwiGLU needs
// (2f) and the slot's fp32 probability; the unpermutation (a plain sum, the
// probabilities being applied in the activation) keeps nothing. So one more
// expert per token adds (h + 3f)·2 + 4 bytes per token.
func TestMoESavedPerSlot(t *testing.T) {
	act := func(k int) float64 {
		c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1, MoE: MoE{ExpertsPerToken: k}})
		g, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.BF16})
		require.NoError(t, err)
		blk, ok := g.Block(BlockMoE)
		require.True(t, ok)
		return blk.ActivationBytes
	}
	h, f := 4096.0, 14336.0
	assert.InDelta(t, 1024*((h+3*f)*2+4), act(2)-act(1), 1)
}

// Under --recompute-modules moe the layer keeps only the MoE's input (the
// checkpoint's): what it keeps depends neither on how many experts a token
// goes to nor on the experts' size, and it is below what moe_act keeps.
func TestRecomputeMoEKeepsOnlyItsInput(t *testing.T) {
	act := func(k, f int, mods ...string) float64 {
		c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1, MoE: MoE{ExpertsPerToken: k, ExpertFFNHidden: f}})
		g, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 2, SequenceParallel: true, EP: 4,
			DType: hw.BF16, Recompute: RecomputeSelective, RecomputeModules: mods})
		require.NoError(t, err)
		blk, ok := g.Block(BlockMoE)
		require.True(t, ok)
		return blk.ActivationBytes
	}
	base := act(2, 14336, ModuleMoE)
	assert.Equal(t, base, act(1, 14336, ModuleMoE))
	assert.Equal(t, base, act(2, 7168, ModuleMoE))
	assert.Less(t, base, act(2, 14336, ModuleMoEAct))
	// Without it, what the layer keeps grows with the slots (TestMoESavedPerSlot).
	assert.Greater(t, act(2, 14336)-act(1, 14336), 0.0)
}

// Megatron-Core's --recompute-modules layernorm moe_act: the layer's two
// norm outputs and the experts' activation output are not kept (Tn·h·2
// bytes each, and every received slot's f activations) and the three
// operators rerun in the backward; an unknown module or modules without
// "selective" are errors naming the field.
func TestRecomputeModules(t *testing.T) {
	c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1})
	run := Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 1, EP: 4, DType: hw.BF16, Recompute: RecomputeSelective}
	build := func(mods []string) Block {
		r := run
		r.RecomputeModules = mods
		return moeBlock(t, c, r)
	}
	base, rc := build(nil), build([]string{ModuleLayerNorm, ModuleMoEAct})
	// Balanced over EP 4: 1,024·2 slots reach this rank's 2 experts. The
	// default (core_attn) drops FlashAttention's fp32 log-sum-exp instead
	// (32 heads × 1,024 queries).
	h, f := 4096.0, 14336.0
	assert.InDelta(t, 2*1024*h*2+2048*f*2-4*32*1024, base.ActivationBytes-rc.ActivationBytes, 1)
	var rerun []string
	for _, o := range rc.Backward {
		if o.Pass == Recomputed {
			rerun = append(rerun, o.Name)
		}
	}
	assert.Equal(t, []string{"attn.norm", "mlp.norm", "moe.experts.swiglu"}, rerun)
	// The default, core_attn, reruns the core attention whichever kernel
	// runs it (Megatron-Core's Attention._checkpointed_attention_forward).
	var core []string
	for _, o := range base.Backward {
		if o.Pass == Recomputed {
			core = append(core, o.Name)
		}
	}
	assert.Equal(t, []string{"attn.flash"}, core)
	// --recompute-modules moe: the whole MoE layer (router, permute, both
	// all-to-alls, the expert chunks' copies, the experts) reruns in the
	// backward, in forward order, before the layer's backward.
	moe := build([]string{ModuleMoE})
	var want, got []string
	for _, o := range moe.Forward {
		if strings.HasPrefix(o.Name, "moe.") {
			want = append(want, o.Name)
		}
	}
	for _, o := range moe.Backward {
		if o.Pass == Recomputed {
			got = append(got, o.Name)
		}
	}
	assert.Equal(t, want, got)
	assert.Contains(t, got, "moe.dispatch.all_to_all")
	assert.Contains(t, got, "moe.combine.all_to_all")
	for _, bad := range []Run{
		{Phase: Training, Batch: 1, SeqLen: 8, DType: hw.BF16, Recompute: RecomputeSelective, RecomputeModules: []string{"mlp_act"}},
		{Phase: Training, Batch: 1, SeqLen: 8, DType: hw.BF16, Recompute: RecomputeFull, RecomputeModules: []string{ModuleMoEAct}},
	} {
		ps := c.CheckRun(bad)
		require.NotEmpty(t, ps)
		assert.Equal(t, "recompute_modules", ps[0].Path)
	}
}

// Inference with experts split by TP all-reduces each token's output once,
// after its k expert outputs are summed (T·h elements, not T·k·h); with
// expert parallelism inside the TP group (EP = TP, ExpertTP = 1) each rank
// holds E/TP whole experts and the same weights in all, computes the
// routed slots of its experts (the busiest rank's share, rounded up), and
// dispatches nothing.
func TestExpertsInsideTheTPGroup(t *testing.T) {
	c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1})
	const T, h, f = 4096, 4096, 14336
	ops := func(r Run) (fwd []Op, params int64) {
		g, err := Build(c, r)
		require.NoError(t, err)
		b, _ := g.Block(BlockMoE)
		return b.Forward, b.Params
	}
	find := func(fwd []Op, name string) *Op {
		for i := range fwd {
			if fwd[i].Name == name {
				return &fwd[i]
			}
		}
		return nil
	}
	split, splitParams := ops(Run{Phase: Prefill, Batch: 1, SeqLen: T, TP: 8, DType: hw.BF16})
	whole, wholeParams := ops(Run{Phase: Prefill, Batch: 1, SeqLen: T, TP: 8, EP: 8, ExpertTP: 1, DType: hw.BF16})
	assert.Equal(t, splitParams, wholeParams)
	for _, fwd := range [][]Op{split, whole} {
		ar := find(fwd, "moe.tp.all_reduce")
		require.NotNil(t, ar)
		assert.Equal(t, float64(T*h*2), ar.Bytes)
	}
	for _, o := range whole {
		assert.NotEqual(t, AllToAll, o.Kind, o.Name)
	}
	up := find(whole, "moe.experts.gate_up")
	require.NotNil(t, up)
	assert.Equal(t, []int64{T * 2 / 8}, up.Groups, "one whole expert, its 1,024 routed slots")
	assert.Equal(t, int64(2*f), up.N)
	splitUp := find(split, "moe.experts.gate_up")
	assert.Len(t, splitUp.Groups, 8)
	assert.Equal(t, int64(2*f/8), splitUp.N)
	// A single decoding token: two routed slots over eight ranks still
	// run one whole expert on the busiest.
	dec, _ := ops(Run{Phase: Decode, Batch: 1, KVLen: 100, TP: 8, EP: 8, ExpertTP: 1, DType: hw.BF16})
	assert.Equal(t, []int64{1}, find(dec, "moe.experts.gate_up").Groups)
	// In training it still needs sequence parallelism.
	_, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: T, TP: 8, EP: 8, ExpertTP: 1, DType: hw.BF16})
	require.ErrorContains(t, err, "expert_tp")
}

// An 8-bit KV cache (Run.KVDType): the decode attention reads the cache at
// one byte an element and the query and output at the activations' two;
// the cache write reads the new keys and values at two and writes them at
// one; MLA's latent cache likewise.
func TestKVCacheDType(t *testing.T) {
	c, _ := FromPreset("llama2-7b", Config{Layers: 1})
	find := func(r Run, name string) Op {
		g, err := Build(c, r)
		require.NoError(t, err)
		for _, b := range g.Blocks {
			for _, o := range b.Forward {
				if o.Name == name {
					return o
				}
			}
		}
		t.Fatalf("no %s", name)
		return Op{}
	}
	dec := Run{Phase: Decode, Batch: 4, KVLen: 999, TP: 1, DType: hw.BF16, KVDType: hw.FP8}
	o := find(dec, "attn.decode")
	assert.Equal(t, 4*128*(2*1*32*1000+2*2*32.0), o.Bytes)
	pre := Run{Phase: Prefill, Batch: 2, SeqLen: 100, TP: 1, DType: hw.BF16, KVDType: hw.FP8}
	n := 2 * 100 * 2 * 32 * 128.0
	assert.Equal(t, n*(2+1), find(pre, "attn.kv_cache_write").Bytes)
	pre.KVDType = ""
	assert.Equal(t, n*(2+2), find(pre, "attn.kv_cache_write").Bytes)

	ds, _ := ByName("deepseek-v3")
	m := MLADecodeAttention(ds, hw.FP8, 1, 2, 16, 4096)
	assert.Equal(t, 2*(4096*576+2*16*(2*512+64.0)), m.Bytes)
	// MLA's cache write too, prefill and decode: its latent and rotary key.
	ds, _ = FromPreset("deepseek-v3", Config{Layers: 4})
	for _, r := range []Run{{Phase: Prefill, Batch: 2, SeqLen: 100}, {Phase: Decode, Batch: 200, KVLen: 50}} {
		r.TP, r.DType, r.KVDType = 1, hw.BF16, hw.FP8
		g, err := Build(ds, r)
		require.NoError(t, err)
		for _, blk := range g.Blocks {
			for _, o := range blk.Forward {
				if o.Name == "attn.kv_cache_write" {
					assert.Equal(t, 200*576*(2+1.0), o.Bytes, "%s %s", r.Phase, blk.Name)
				}
			}
		}
	}
}

// Weight-only quantization (Run.WeightDType) stores the linear layers'
// weights, experts included, and counts them in QuantizedParams; the
// router, the embedding and the output layer keep the math type, and
// training ignores it.
func TestWeightOnlyQuantizedParams(t *testing.T) {
	c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1})
	r := Run{Phase: Decode, Batch: 2, KVLen: 100, TP: 2, DType: hw.BF16, WeightDType: hw.INT4}
	g, err := Build(c, r)
	require.NoError(t, err)
	for _, b := range g.Blocks {
		var q int64
		for _, o := range b.Forward {
			switch {
			case o.Name == "moe.router" || o.Name == "head.logits":
				assert.Equal(t, hw.DType(""), o.WeightDType, o.Name)
			case o.Kind == GEMM || o.Kind == GroupedGEMM:
				assert.Equal(t, hw.INT4, o.WeightDType, o.Name)
				q += int64(max(len(o.Groups), 1)) * o.K * o.N
			}
		}
		assert.Equal(t, q, b.QuantizedParams, b.Name)
		assert.LessOrEqual(t, b.QuantizedParams, b.Params, b.Name)
	}
	moe, _ := g.Block(BlockMoE)
	// Attention (q, k, v, o at TP 2) and the 8 experts' SwiGLU per rank.
	assert.Equal(t, int64(4096*(4096+2*1024)/2+4096*4096/2+8*3*4096*14336/2), moe.QuantizedParams)
	tr, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 128, TP: 2, SequenceParallel: true, DType: hw.BF16, WeightDType: hw.INT4})
	require.NoError(t, err)
	m, _ := tr.Block(BlockMoE)
	assert.Zero(t, m.QuantizedParams)
}

// WeightBytes: a block's own quantized parameters first, the rest shared:
// Zamba's shared block quantizes its per-use linear (own) and its shared
// attention and MLP; a transformer block has nothing shared.
func TestWeightBytesSplitsOwnAndShared(t *testing.T) {
	c, _ := ByName("zamba-7b")
	g, err := Build(c, Run{Phase: Decode, Batch: 1, KVLen: 10, TP: 1, DType: hw.BF16, WeightDType: hw.INT4})
	require.NoError(t, err)
	sb, ok := g.Block(BlockShared)
	require.True(t, ok)
	we := 0.5 + 2.0/128
	h := int64(c.Hidden)
	own, shared := WeightBytes(sb, hw.BF16, hw.INT4)
	assert.InDelta(t, float64(h*h)*we, own, 1e-6)
	sq := sb.QuantizedParams - h*h
	require.Greater(t, sq, int64(0))
	assert.InDelta(t, float64(sb.SharedParams-sq)*2+float64(sq)*we, shared, 1e-6)
	bf, _ := WeightBytes(sb, hw.BF16, "")
	assert.InDelta(t, float64(sb.Params)*2, bf, 1e-6, "no quantized parameters without a weight type")
}

// --moe-router-dtype fp32: the router's input cast up (and its gradient
// back) by a kernel of its own, its three GEMMs in FP32, which keeps its
// FP32 input (Tn·h·4 bytes where the 16-bit router kept Tn·h·2), and the
// top-k reading FP32 logits; in inference, and by default, the router
// runs in the math's type.
func TestRouterDTypeFP32(t *testing.T) {
	c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1})
	build := func(d hw.DType, phase Phase) Block {
		g, err := Build(c, Run{Phase: phase, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.BF16, RouterDType: d})
		require.NoError(t, err)
		blk, ok := g.Block(BlockMoE)
		require.True(t, ok)
		return blk
	}
	ops := func(list []Op) map[string]Op {
		m := map[string]Op{}
		for _, o := range list {
			m[o.Name] = o
		}
		return m
	}
	fp32, bf16 := build(hw.FP32, Training), build("", Training)
	f, b := ops(fp32.Forward), ops(bf16.Forward)
	n := 1024.0 * 4096
	require.Contains(t, f, "moe.router.cast")
	assert.Equal(t, n*(2+4), f["moe.router.cast"].Bytes)
	assert.NotContains(t, b, "moe.router.cast")
	assert.Equal(t, hw.FP32, f["moe.router"].DType)
	assert.Equal(t, hw.BF16, b["moe.router"].DType)
	fb := ops(fp32.Backward)
	assert.Equal(t, hw.FP32, fb["moe.router.dgrad"].DType)
	assert.Equal(t, hw.FP32, fb["moe.router.wgrad"].DType)
	assert.Contains(t, fb, "moe.router.cast.bwd")
	assert.Equal(t, 2*1024.0*8, f["moe.router.topk"].Bytes-b["moe.router.topk"].Bytes, "8 experts' logits read in FP32")
	assert.InDelta(t, n*(4-2), fp32.ActivationBytes-bf16.ActivationBytes, 1)

	inf := ops(build(hw.FP32, Prefill).Forward)
	assert.NotContains(t, inf, "moe.router.cast")
	assert.Equal(t, hw.BF16, inf["moe.router"].DType)
}

// TestFP8Dispatch: FP8 training dispatches the activation type unless
// FP8Dispatch asks for DeepSeek-V3's FP8 dispatch (hidden bytes plus an
// FP32 scale per 128); the combines carry the activation type either way,
// and an FP8 inference run dispatches FP8.
func TestFP8Dispatch(t *testing.T) {
	c, _ := FromPreset("mixtral-8x7b", Config{Layers: 1})
	build := func(phase Phase, fp8Dispatch bool) (fwd, bwd map[string]Op) {
		g, err := Build(c, Run{Phase: phase, Batch: 1, SeqLen: 1024, TP: 1, EP: 8, DType: hw.FP8, FP8Dispatch: fp8Dispatch})
		require.NoError(t, err)
		blk, ok := g.Block(BlockMoE)
		require.True(t, ok)
		fwd, bwd = map[string]Op{}, map[string]Op{}
		for _, o := range blk.Forward {
			fwd[o.Name] = o
		}
		for _, o := range blk.Backward {
			bwd[o.Name] = o
		}
		return fwd, bwd
	}
	const h = 4096.0
	slots := 1024.0 * 2 // tokens × top-2
	bf16 := slots * h * 2
	fp8 := slots * (h + 4*h/128)

	f, b := build(Training, false)
	assert.Equal(t, bf16, f["moe.dispatch.all_to_all"].Bytes, "Megatron-Core dispatches the hidden states as given")
	assert.Equal(t, bf16, b["moe.combine.all_to_all.bwd"].Bytes)
	f, b = build(Training, true)
	assert.Equal(t, fp8, f["moe.dispatch.all_to_all"].Bytes, "DeepSeek-V3's FP8 dispatch")
	assert.Equal(t, fp8, b["moe.combine.all_to_all.bwd"].Bytes)
	assert.Equal(t, bf16, f["moe.combine.all_to_all"].Bytes, "the combine stays in BF16")
	assert.Equal(t, bf16, b["moe.dispatch.all_to_all.bwd"].Bytes)
	f, _ = build(Prefill, false)
	assert.Equal(t, fp8, f["moe.dispatch.all_to_all"].Bytes, "FP8 inference dispatches FP8")
}

// Every operator from the router to the unpermutation, forward and
// backward, is the MoE layer's (Op.MoELayer: the host prices its module
// code); the attention and the shared experts, plain modules, are not.
func TestMoELayerOperatorsMarked(t *testing.T) {
	c, _ := FromPreset("deepseek-v3", Config{Layers: 4})
	g, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 1, EP: 8, DType: hw.BF16})
	require.NoError(t, err)
	blk, ok := g.Block(BlockMoE)
	require.True(t, ok)
	marked := map[string]bool{}
	for _, o := range append(append([]Op{}, blk.Forward...), blk.Backward...) {
		inLayer := strings.HasPrefix(o.Name, "moe.") && !strings.HasPrefix(o.Name, "moe.shared")
		assert.Equal(t, inLayer, o.MoELayer, o.Name)
		if o.MoELayer {
			marked[o.Name] = true
		}
	}
	for _, name := range []string{"moe.router", "moe.router.topk", OpPermute, "moe.experts.gate_up", "moe.experts.down.wgrad", "moe.unpermute", "moe.dispatch.all_to_all"} {
		assert.True(t, marked[name], name)
	}
}

// MXFP4 (gpt-oss's released checkpoints) stores the routed experts alone,
// at 4.25 bits a weight (an E8M0 scale per 32): gpt-oss-120b's 114.7B
// expert parameters take 60.9 GB, the attention, router, embedding and
// output layer stay 16-bit, about 66 GB in all, which fits one 80 GB GPU
// as its model card says.
func TestMXFP4QuantizesTheExperts(t *testing.T) {
	c, _ := ByName("gpt-oss-120b")
	g, err := Build(c, Run{Phase: Decode, Batch: 1, KVLen: 100, TP: 1, DType: hw.BF16, WeightDType: hw.MXFP4})
	require.NoError(t, err)
	var experts, total, bytes float64
	for _, b := range g.Blocks {
		for _, o := range b.Forward {
			if o.Kind == GroupedGEMM {
				assert.Equal(t, hw.MXFP4, o.WeightDType, o.Name)
				experts += float64(b.Count) * float64(len(o.Groups)) * float64(o.K*o.N)
			} else if o.Kind == GEMM {
				assert.Equal(t, hw.DType(""), o.WeightDType, o.Name)
			}
		}
		own, shared := WeightBytes(b, hw.BF16, hw.MXFP4)
		bytes += float64(b.Count)*own + shared
		total += float64(b.Count*int(b.Params) + int(b.SharedParams))
	}
	assert.InDelta(t, 114.67e9, experts, 0.01e9)
	assert.Equal(t, 0.53125, StoredWeightBytes(hw.MXFP4))
	assert.InDelta(t, experts*0.53125+(total-experts)*2, bytes, 1)
	assert.InDelta(t, 66e9, bytes, 1e9)
}

// GLM-4.5-Air's config.json (zai-org/GLM-4.5-Air: 46 layers, the first
// dense, 128 routed experts of 1,408 beside one shared, top-8, 96 heads of
// 128 with 8 KV heads) counts within 1 % of its model card's 106B total.
func TestFromHFConfigGLM45Air(t *testing.T) {
	hf := map[string]any{"model_type": "glm4_moe", "num_hidden_layers": 46.0, "hidden_size": 4096.0, "num_attention_heads": 96.0,
		"num_key_value_heads": 8.0, "head_dim": 128.0, "intermediate_size": 10944.0, "moe_intermediate_size": 1408.0,
		"n_routed_experts": 128.0, "n_shared_experts": 1.0, "num_experts_per_tok": 8.0, "first_k_dense_replace": 1.0,
		"vocab_size": 151552.0, "tie_word_embeddings": false, "num_nextn_predict_layers": 1.0, "partial_rotary_factor": 0.5}
	c, err := FromHFConfig(hf)
	require.NoError(t, err)
	require.Empty(t, c.Check())
	assert.Equal(t, strings.Repeat("A", 1)+strings.Repeat("E", 45), c.Pattern)
	assert.Equal(t, RouterSigmoid, c.Router)
	assert.InDelta(t, 1, float64(Params(c))/106e9, 0.01)
}

// gpt-oss's clamped activation (glu_limit) costs a training step what
// Megatron-Core's eager clamps and concatenation cost: three forward
// kernels over the gate/up output's n elements a half (8n elements read and
// written), three backward ones (two masks reading the gradient and the
// input, writing the gradient, and the halves' assembly: 10n), the
// gate/up output kept besides the concatenation, and under moe_act's
// recomputation the same memory as unclamped with all three rerun; each a
// plain PyTorch call on the host, not the MoE layer's module code.
// Inference, with the clamp fused, is unchanged.
func TestClampedGLU(t *testing.T) {
	const tokens, slots = 1024, 4
	build := func(limit float64, phase Phase, mods ...string) Block {
		c, _ := FromPreset("gpt-oss-20b", Config{Layers: 2})
		c.GLULimit = limit
		r := Run{Phase: phase, Batch: 1, SeqLen: tokens, TP: 1, DType: hw.BF16}
		if len(mods) > 0 {
			r.Recompute, r.RecomputeModules = RecomputeSelective, mods
		}
		return moeBlock(t, c, r)
	}
	bytes := func(ops []Op, pass Pass) (b float64, k int) {
		for _, o := range ops {
			if o.Pass == pass && strings.HasPrefix(o.Name, "moe.experts.glu_clamp") {
				b += o.Bytes
				k++
				assert.False(t, o.MoELayer, "%s is a plain PyTorch call", o.Name)
			}
		}
		return b, k
	}
	n := float64(tokens * slots * 2880) // the activation's output elements
	clamped, plain := build(7, Training), build(0, Training)
	fb, fk := bytes(clamped.Forward, Forward)
	bb, bk := bytes(clamped.Backward, Backward)
	assert.Equal(t, 3, fk)
	assert.Equal(t, 3, bk)
	assert.InDelta(t, 8*n*2, fb, 1)
	assert.InDelta(t, 10*n*2, bb, 1)
	assert.InDelta(t, 2*n*2, clamped.ActivationBytes-plain.ActivationBytes, 1)

	rc, rp := build(7, Training, ModuleMoEAct), build(0, Training, ModuleMoEAct)
	assert.InDelta(t, rp.ActivationBytes, rc.ActivationBytes, 1)
	rb, rk := bytes(rc.Backward, Recomputed)
	assert.Equal(t, 3, rk)
	assert.InDelta(t, 8*n*2, rb, 1)

	inf := build(7, Prefill)
	_, k := bytes(inf.Forward, Forward)
	assert.Zero(t, k)

	c, _ := FromPreset("gpt-oss-20b", Config{MoE: MoE{GLULimit: -1}})
	assert.Contains(t, fmt.Sprint(c.Check()), "glu_limit")
}

// The fused activation that follows Megatron-Core's clamps copies its
// offset to the GPU with torch.tensor, which blocks the host (Op.HostSync):
// the forward's activation and its recomputation are marked, not the
// backward's kernel, nor the op fuser's or an inference engine's.
// gpt-oss's down-projection bias is TEGroupedMLP's eager loop over the
// local experts: two FP32 kernels an expert forward (n = the expert's rows
// × hidden: bias × probabilities 4n written, the add reading 2n + 4n and
// writing 4n), seven backward, then the concatenations and casts, none of
// them carrying the MoE layer's module cost (MoELayer false).
func TestGPTOSSEagerExperts(t *testing.T) {
	const tokens, ep = 1024, 4
	build := func(r Run) Block {
		c, _ := FromPreset("gpt-oss-20b", Config{Layers: 2})
		r.Batch, r.SeqLen, r.TP, r.DType, r.EP, r.ExpertTP = 1, tokens, 1, hw.BF16, ep, 1
		if r.Phase == "" {
			r.Phase = Training
		}
		return moeBlock(t, c, r)
	}
	count := func(ops []Op, prefix string) (k int, bytes float64, syncs []string) {
		for _, o := range ops {
			if o.HostSync {
				syncs = append(syncs, o.Name+"/"+string(o.Pass))
			}
			if strings.HasPrefix(o.Name, prefix) {
				k++
				bytes += o.Bytes
				assert.False(t, o.MoELayer, o.Name)
			}
		}
		return k, bytes, syncs
	}
	eager := build(Run{Recompute: RecomputeSelective, RecomputeModules: []string{ModuleMoEAct}})
	local := 32 / ep
	// Balanced routing: each rank receives its tokens' share of top-4 slots.
	h, rows := 2880.0, float64(tokens*4)
	k, _, syncs := count(eager.Forward, "moe.experts.bias.")
	assert.Equal(t, 2*local+2, k)
	assert.ElementsMatch(t, []string{"moe.experts.swiglu/" + string(Forward)}, syncs)
	k, _, syncs = count(eager.Backward, "moe.experts.bias.")
	assert.Equal(t, 7*local+3, k)
	assert.ElementsMatch(t, []string{"moe.experts.swiglu/" + string(Recomputed)}, syncs)
	_, fb, _ := count(eager.Forward, "moe.experts.bias.0.")
	n := rows / float64(local) * h
	assert.InDelta(t, 4*n+(h*2+4*n/h)+(2*n+8*n), fb, n*1e-6+64)

	for why, blk := range map[string]Block{
		"op fuser": build(Run{TEOpFuser: true}),
		"prefill":  build(Run{Phase: Prefill}),
	} {
		for _, ops := range [][]Op{blk.Forward, blk.Backward} {
			k, _, syncs := count(ops, "moe.experts.bias.")
			assert.Zero(t, k, why)
			assert.Empty(t, syncs, why)
		}
	}
}

// moeBlock builds c for r and returns its mixture-of-experts block.
func moeBlock(t *testing.T, c Config, r Run) Block {
	t.Helper()
	g, err := Build(c, r)
	require.NoError(t, err)
	blk, ok := g.Block(BlockMoE)
	require.True(t, ok)
	return blk
}
