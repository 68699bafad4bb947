package model

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPresetsValidAndParams(t *testing.T) {
	names := map[string]bool{}
	for _, p := range Presets() {
		c := p.Config
		require.False(t, names[c.Name], "duplicate %s", c.Name)
		names[c.Name] = true
		require.Empty(t, c.Check(), c.Name)
		got := float64(Params(c))
		t.Logf("%-16s params %.4g published %.4g (%+.2f%%)", c.Name, got, p.PublishedParams, 100*(got/p.PublishedParams-1))
		assert.InEpsilon(t, p.PublishedParams, got, 0.01, "%s: %s", c.Name, p.Source)
	}
}

// Exact parameter counts of the Hugging Face checkpoints (model cards).
func TestLlamaParamsExact(t *testing.T) {
	for name, want := range map[string]int64{
		"llama2-7b": 6_738_415_616, "llama2-13b": 13_015_864_320, "llama2-70b": 68_976_648_192,
		"llama3-8b": 8_030_261_248, "llama3-70b": 70_553_706_496,
	} {
		c, ok := ByName(name)
		require.True(t, ok)
		assert.Equal(t, want, Params(c), name)
	}
}

// megatronFLOPs is the per-iteration training FLOPs formula of Narayanan et
// al. 2021 (shared/reference/README.md), B sequences of s tokens.
func megatronFLOPs(B, s, L, h, V float64, full bool) float64 {
	if full {
		return 96 * B * s * L * h * h * (1 + s/(6*h) + V/(16*L*h))
	}
	return 72 * B * s * L * h * h * (1 + s/(6*h) + V/(12*L*h))
}

func TestMegatronFLOPsFormula(t *testing.T) {
	for _, name := range []string{"gpt-22b", "gpt3-175b", "gpt-530b", "gpt-1t"} {
		c, _ := ByName(name)
		for _, rc := range []Recompute{RecomputeNone, RecomputeFull} {
			for _, tp := range []int{1, 8} {
				r := Run{Phase: Training, Batch: 4, SeqLen: 2048, TP: tp, DType: hw.BF16, UnfusedAttention: true, Recompute: rc}
				g, err := Build(c, r)
				require.NoError(t, err)
				want := megatronFLOPs(4, 2048, float64(c.Layers), float64(c.Hidden), float64(c.Vocab), rc == RecomputeFull)
				// Every GEMM is split evenly over the TP ranks.
				got := g.Totals().MatmulFLOPs * float64(tp)
				assert.InEpsilon(t, want, got, 1e-12, "%s %s tp%d", name, rc, tp)
				// With FlashAttention the causal half of the scores, its
				// backward counted as the model's four matmuls (not its
				// kernel's five): the formula's attention term halved.
				r.UnfusedAttention = false
				g, err = Build(c, r)
				require.NoError(t, err)
				l, h, s := float64(c.Layers), float64(c.Hidden), 2048.0
				k := 72.0
				if rc == RecomputeFull {
					k = 96
				}
				attn := k * 4 * s * l * h * h * s / (6 * h) // the formula's (non-causal) attention term
				got = g.Totals().MatmulFLOPs * float64(tp)
				assert.InEpsilon(t, want-attn/2, got, 1e-3, "%s %s tp%d flash", name, rc, tp)
			}
		}
	}
}

func TestGEMMOpFLOPs(t *testing.T) {
	o := NewGEMM("x", hw.BF16, 3, 10, 20, 30)
	// 2·M·N·K·batch = 2·10·20·30·3 = 36,000; bytes 3·2·(10·30+30·20+10·20) = 6,600.
	assert.Equal(t, 36000.0, o.FLOPs)
	assert.Equal(t, 6600.0, o.Bytes)
}

// Korthikanti et al. 2022: activation bytes per GPT layer (16-bit), s·b·h·(34
// + 5·a·s/h) without parallelism; s·b·h·(10 + 24/t + 5·a·s/(h·t)) with TP;
// (s·b·h/t)·(34 + 5·a·s/h) with TP+SP; 34·s·b·h/t with TP+SP+selective; and
// 2·s·b·h for full recompute (with SP: /t).
func TestKorthikantiActivations(t *testing.T) {
	c, _ := ByName("gpt-22b")
	s, bsz, h, a := 2048.0, 4.0, float64(c.Hidden), float64(c.Heads)
	for _, tc := range []struct {
		tp   int
		sp   bool
		rc   Recompute
		want float64
	}{
		{1, false, RecomputeNone, s * bsz * h * (34 + 5*a*s/h)},
		{8, false, RecomputeNone, s * bsz * h * (10 + 24/8.0 + 5*a*s/(h*8))},
		{8, true, RecomputeNone, s * bsz * h / 8 * (34 + 5*a*s/h)},
		{8, true, RecomputeSelective, 34 * s * bsz * h / 8},
		{1, false, RecomputeFull, 2 * s * bsz * h},
	} {
		g, err := Build(c, Run{Phase: Training, Batch: 4, SeqLen: 2048, TP: tc.tp, SequenceParallel: tc.sp,
			Recompute: tc.rc, DType: hw.BF16, UnfusedAttention: true})
		require.NoError(t, err)
		blk, _ := g.Block(BlockTransformer)
		// Norm statistics are not in the formula: none are kept; compare exactly.
		assert.InEpsilon(t, tc.want, blk.ActivationBytes, 1e-12, "tp%d sp%v %s", tc.tp, tc.sp, tc.rc)
	}
}

func TestTPCollectivesAndSplit(t *testing.T) {
	c, _ := ByName("llama2-7b")
	r := Run{Phase: Training, Batch: 2, SeqLen: 1024, TP: 4, DType: hw.BF16}
	g, err := Build(c, r)
	require.NoError(t, err)
	blk, _ := g.Block(BlockTransformer)
	var fwd, bwd []Op
	for _, o := range blk.Forward {
		if o.IsComm() {
			fwd = append(fwd, o)
		}
	}
	for _, o := range blk.Backward {
		if o.IsComm() {
			bwd = append(bwd, o)
		}
	}
	// Megatron: one all-reduce after attention and one after the MLP in each
	// direction, of the full activation b·s·h·2 bytes.
	full := 2.0 * 1024 * 4096 * 2
	require.Len(t, fwd, 2)
	require.Len(t, bwd, 2)
	for _, o := range append(fwd, bwd...) {
		assert.Equal(t, AllReduce, o.Kind)
		assert.Equal(t, full, o.Bytes)
	}
	qkv := blk.Forward[1]
	require.Equal(t, "attn.qkv", qkv.Name)
	assert.Equal(t, int64(3*4096/4), qkv.N) // (32 + 2·32)/4 heads · 128
	assert.Equal(t, int64(4096), qkv.K)

	// Sequence parallel: all-gather + reduce-scatter in place of all-reduces.
	r.SequenceParallel = true
	g, _ = Build(c, r)
	blk, _ = g.Block(BlockTransformer)
	kinds := map[Kind]int{}
	for _, o := range blk.Forward {
		if o.IsComm() {
			kinds[o.Kind]++
		}
	}
	assert.Equal(t, map[Kind]int{AllGather: 2, ReduceScatter: 2}, kinds)
}

func TestMambaSplit(t *testing.T) {
	c, _ := ByName("mamba-2.8b")
	g1, _ := Build(c, Run{Phase: Prefill, Batch: 1, SeqLen: 512, TP: 1, DType: hw.BF16})
	g2, _ := Build(c, Run{Phase: Prefill, Batch: 1, SeqLen: 512, TP: 2, DType: hw.BF16})
	b1, _ := g1.Block(BlockMamba)
	b2, _ := g2.Block(BlockMamba)
	comm := 0
	for _, o := range b2.Forward {
		if o.IsComm() {
			comm++
		}
	}
	assert.Equal(t, 2, comm, "x_proj partial sums and out_proj")
	assert.Equal(t, b1.Forward[1].N/2, b2.Forward[1].N, "in_proj columns split")
	// Scan FLOPs split exactly in half.
	scan := func(b Block) float64 {
		for _, o := range b.Forward {
			if o.Kind == SelectiveScan {
				return o.FLOPs
			}
		}
		return 0
	}
	assert.Equal(t, scan(b1)/2, scan(b2))

	c2, _ := ByName("mamba2-2.7b")
	g, err := Build(c2, Run{Phase: Training, Batch: 1, SeqLen: 2048, TP: 2, DType: hw.BF16})
	require.NoError(t, err)
	b, _ := g.Block(BlockMamba2)
	// in_proj per rank: 2·(5120/2) + 2·1·128 (group replicated) + 80/2.
	assert.Equal(t, int64(5120+256+40), b.Forward[1].N)
}

func TestStateAndCache(t *testing.T) {
	c, _ := ByName("llama2-7b")
	// 2 (K, V) · 32 layers · 32 heads · 128 · 2 bytes = 524,288 bytes per token.
	assert.Equal(t, 524288.0, KVCacheBytesPerToken(c, hw.BF16))
	assert.Zero(t, SSMStateBytesPerSeq(c, hw.BF16))
	m, _ := ByName("mamba-2.8b")
	// 64 · (5120·3 + 5120·16) · 2 bytes = 12,451,840.
	assert.Equal(t, 12451840.0, SSMStateBytesPerSeq(m, hw.BF16))
	z, _ := ByName("zamba-7b")
	assert.Equal(t, 13, countRune(z.Pattern, PatShared))
	assert.Equal(t, 13*2*16*464*2.0, KVCacheBytesPerToken(z, hw.BF16))
}

func countRune(s string, r rune) int {
	n := 0
	for _, x := range s {
		if x == r {
			n++
		}
	}
	return n
}

func TestEveryPresetEveryPhase(t *testing.T) {
	for _, p := range Presets() {
		for _, ph := range []Phase{Training, Prefill, Decode} {
			g, err := Build(p.Config, Run{Phase: ph, Batch: 2, SeqLen: 512, KVLen: 512, TP: 1, DType: hw.BF16})
			require.NoError(t, err, p.Config.Name)
			for _, b := range g.Blocks {
				for _, o := range append(append([]Op{}, b.Forward...), b.Backward...) {
					require.False(t, math.IsNaN(o.FLOPs) || o.FLOPs < 0 || o.Bytes < 0, "%s %s", b.Name, o.Name)
				}
			}
			require.Len(t, g.Order, len(p.Config.Pattern)+2)
		}
	}
}

func TestCheckReportsProblems(t *testing.T) {
	c := Config{Family: "gpx"}
	assert.Len(t, c.Check(), 1)
	c = Config{Family: LLaMA, Layers: 2, Hidden: 64, Vocab: 100, Heads: 6, KVHeads: 4}
	c.Defaults()
	ps := c.Check()
	assert.NotEmpty(t, ps)
	l, _ := ByName("llama2-7b")
	assert.NotEmpty(t, l.CheckRun(Run{Phase: Training, Batch: 1, SeqLen: 8, TP: 3, DType: hw.BF16}))
}

// A field the model's blocks do not read is still checked, not dropped: a
// router or SSM kind of no allowed value, or an SSM family's blocks named
// other than the family.
func TestCheckReportsFieldsTheModelDoesNotRead(t *testing.T) {
	paths := func(c Config) (out []string) {
		c.Defaults()
		for _, p := range c.Check() {
			out = append(out, p.Path)
		}
		return out
	}
	dense, _ := ByName("llama2-7b")
	mamba, _ := ByName("falcon-mamba-7b")
	for _, c := range []struct {
		edit  func(*Config)
		field string
	}{
		{func(c *Config) { *c = dense; c.Router = "eager" }, "router"},
		{func(c *Config) { *c = dense; c.SSM = "bogus" }, "ssm"},
		{func(c *Config) { *c = mamba; c.SSM = "bogus" }, "ssm"},
		{func(c *Config) { *c = mamba; c.SSM = Mamba2 }, "ssm"},
	} {
		var cfg Config
		c.edit(&cfg)
		assert.Contains(t, paths(cfg), c.field)
	}
	ok := dense
	ok.Router = RouterSigmoid // a valid router on a dense model is moot, not wrong
	assert.Empty(t, paths(ok))
}

// The optimizer step's HBM traffic per parameter with fp32 gradients:
// fp16 unscale (8) + norm (4) + Adam (28) + master-to-model copy (6) + zeroing
// (4) = 50 B; bf16 has no loss scaler (42 B); fp32 weights need no copy (36 B).
func TestOptimizerStepTraffic(t *testing.T) {
	for d, want := range map[hw.DType]float64{hw.FP16: 50, hw.BF16: 42, hw.FP32: 36} {
		var bytes float64
		for _, o := range OptimizerStep("opt", 1000, d, 4) {
			require.Equal(t, Optimizer, o.Pass)
			bytes += o.Bytes
		}
		assert.InDelta(t, want*1000, bytes, 1e-9, d)
	}
}

// A GPT layer's training backward reduces the gradient of each of its four
// biases and runs three kernels per LayerNorm; LLaMA has no biases.
func TestBackwardBiasGradsAndNormKernels(t *testing.T) {
	for name, biases := range map[string]int{"gpt-22b": 4, "llama2-7b": 0} {
		c, _ := ByName(name)
		g, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 256, TP: 2, DType: hw.BF16})
		require.NoError(t, err)
		blk, _ := g.Block(BlockTransformer)
		var nb, nn int
		for _, o := range blk.Backward {
			if strings.HasSuffix(o.Name, ".bias_grad") {
				nb++
			}
			if o.Kind == Norm {
				nn++
			}
		}
		assert.Equal(t, biases, nb, name)
		assert.Equal(t, 2*3, nn, name)
	}
}

// The row-wise streaming kernels carry their rows and width, which the
// compute model needs for their latency at few rows: a batch-4 decode's
// norms are 4 rows of the hidden size, its rotary 4 rows of the rank's
// query and key heads, its embedding 4 ids, its residual adds 4 rows.
func TestRowKernelsCarryTheirShape(t *testing.T) {
	c, _ := ByName("llama2-7b")
	g, err := Build(c, Run{Phase: Decode, Batch: 4, KVLen: 100, TP: 2, DType: hw.BF16})
	require.NoError(t, err)
	shape := map[string][2]int64{}
	for _, name := range []string{BlockEmbedding, BlockTransformer} {
		blk, ok := g.Block(name)
		require.True(t, ok)
		for _, o := range blk.Forward {
			if o.Kind != GEMM {
				shape[o.Name] = [2]int64{o.M, o.N}
			}
		}
	}
	assert.Equal(t, [2]int64{4, 4096}, shape["embed.lookup"])
	assert.Equal(t, [2]int64{4, 4096}, shape["attn.norm"])
	assert.Equal(t, [2]int64{4, (16 + 16) * 128}, shape["attn.rotary"])
	assert.Equal(t, [2]int64{4, 4096}, shape["attn.residual"])
	assert.Equal(t, [2]int64{0, 0}, shape["mlp.swiglu"], "vectorized kernels have no row shape")
}

// With a gradient buffer type (Megatron's gradient-accumulation fusion),
// every weight-gradient GEMM, dense and grouped, reads and writes that
// buffer: 2·4 bytes per weight element in fp32 instead of 2 written; the
// other GEMMs, and a run without the buffer type, are unchanged.
func TestWeightGradientsAccumulateIntoMainGrad(t *testing.T) {
	for _, name := range []string{"llama2-7b", "mixtral-8x7b"} {
		c, ok := ByName(name)
		require.True(t, ok)
		r := Run{Phase: Training, Batch: 1, SeqLen: 512, TP: 2, SequenceParallel: true, DType: hw.BF16}
		plain, err := Build(c, r)
		require.NoError(t, err)
		r.GradDType = hw.FP32
		fused, err := Build(c, r)
		require.NoError(t, err)
		var wgrads int
		for b := range fused.Blocks {
			for i, o := range fused.Blocks[b].Backward {
				p := plain.Blocks[b].Backward[i]
				if !strings.HasSuffix(o.Name, ".wgrad") {
					assert.Equal(t, p, o, o.Name)
					continue
				}
				wgrads++
				weights := float64(o.M * o.N)
				if o.GroupK {
					weights = float64(len(o.Groups)) * float64(o.K*o.N)
				}
				assert.Equal(t, hw.FP32, o.Accumulate, o.Name)
				assert.Equal(t, hw.DType(""), p.Accumulate, o.Name)
				assert.InDelta(t, p.Bytes+weights*(8-2), o.Bytes, 1e-6*o.Bytes, o.Name)
				assert.Equal(t, p.FLOPs, o.FLOPs, o.Name)
			}
		}
		assert.Positive(t, wgrads, name)
	}
}

// Training in FP8 follows Transformer Engine's recipe: each linear layer's
// GEMMs in FP8, with its input cast to FP8 as is and transposed (4 bytes an
// element: read 2, write 1 + 1) unless a norm wrote it in FP8 (then the
// backward transposes it: 2 bytes), its output gradient cast the same way,
// and its FP8 input kept for the backward; attention, the output layer and
// the router stay in 16-bit. Inference in FP8 is unchanged.
func TestFP8TrainingAsTransformerEngine(t *testing.T) {
	c, ok := ByName("llama2-7b")
	require.True(t, ok)
	g, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.FP8})
	require.NoError(t, err)
	blk, _ := g.Block(BlockTransformer)
	byName := map[string]Op{}
	for _, o := range append(append([]Op{}, blk.Forward...), blk.Backward...) {
		byName[o.Name] = o
	}
	T, h, f := int64(1024), int64(c.Hidden), int64(c.FFNHidden)
	for _, name := range []string{"attn.out", "mlp.down"} { // inputs from attention and SwiGLU
		k := h
		if name == "mlp.down" {
			k = f
		}
		cast, ok := byName[name+".fp8_cast"]
		require.True(t, ok, name)
		assert.Equal(t, Quantize, cast.Kind)
		assert.InDelta(t, 4*float64(T*k), cast.Bytes, 1e-9, name)
		assert.Equal(t, hw.FP8, byName[name].DType, name)
	}
	for _, name := range []string{"attn.qkv", "mlp.gate_up"} { // inputs from the norms
		_, cast := byName[name+".fp8_cast"]
		assert.False(t, cast, name)
		tr, ok := byName[name+".fp8_transpose"]
		require.True(t, ok, name)
		assert.InDelta(t, 2*float64(T*h), tr.Bytes, 1e-9, name)
	}
	gu := byName["mlp.gate_up.grad_fp8_cast"]
	assert.InDelta(t, 4*float64(T*2*f), gu.Bytes, 1e-9)
	assert.Equal(t, hw.BF16, byName["attn.flash"].DType)
	head, _ := g.Block(BlockLMHead)
	for _, o := range head.Forward {
		if o.Kind == GEMM {
			assert.Equal(t, hw.BF16, o.DType, o.Name)
		}
	}
	// Inference attends in 16 bits too (prefill and decode) and has no
	// casts; its linear layers stay FP8.
	for _, r := range []Run{{Phase: Prefill, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.FP8}, {Phase: Decode, Batch: 4, KVLen: 1024, TP: 1, DType: hw.FP8}} {
		p, err := Build(c, r)
		require.NoError(t, err)
		pb, _ := p.Block(BlockTransformer)
		attn := 0
		for _, o := range pb.Forward {
			assert.NotEqual(t, Quantize, o.Kind, o.Name)
			switch o.Kind {
			case FlashAttention, DecodeAttention:
				attn++
				assert.Equal(t, hw.BF16, o.DType, o.Name)
			case GEMM:
				assert.Equal(t, hw.FP8, o.DType, o.Name)
			}
		}
		assert.Equal(t, 1, attn, r.Phase)
	}
}

// opsByName is a block's forward and backward operators of c under r, by
// name.
func opsByName(t *testing.T, c Config, r Run, block string) map[string]Op {
	t.Helper()
	g, err := Build(c, r)
	require.NoError(t, err)
	blk, ok := g.Block(block)
	require.True(t, ok, block)
	m := map[string]Op{}
	for _, o := range append(append([]Op{}, blk.Forward...), blk.Backward...) {
		m[o.Name] = o
	}
	return m
}

// FP8 attention (Run.FP8Attention, Transformer Engine's fp8_dpa): the
// attention's matmuls in FP8, Q, K and V cast before it and the output read
// back after it, in that order; backward, the output's gradient cast before
// the attention's backward and Q, K and V's gradients read back after it.
// Without it, or without an FP8 dtype, nothing changes.
func TestFP8Attention(t *testing.T) {
	c, ok := ByName("llama3-8b")
	require.True(t, ok)
	build := func(d hw.DType, fp8Attn bool) Block {
		g, err := Build(c, Run{Phase: Training, Batch: 2, SeqLen: 1024, TP: 2, DType: d, FP8Recipe: FP8MXFP8, FP8Attention: fp8Attn})
		require.NoError(t, err)
		blk, _ := g.Block(BlockTransformer)
		return blk
	}
	index := func(ops []Op, name string) int {
		return slices.IndexFunc(ops, func(o Op) bool { return o.Name == name })
	}
	blk := build(hw.FP8, true)
	fwd, bwd := blk.Forward, blk.Backward
	fa := index(fwd, "attn.flash")
	require.GreaterOrEqual(t, fa, 1)
	assert.Equal(t, hw.FP8, fwd[fa].DType)
	assert.Equal(t, "attn.fp8_cast", fwd[fa-1].Name)
	assert.Equal(t, "attn.fp8_dequantize", fwd[fa+1].Name)
	fb := index(bwd, "attn.flash.bwd")
	require.GreaterOrEqual(t, fb, 1)
	assert.Equal(t, hw.FP8, bwd[fb].DType)
	assert.Equal(t, "attn.grad_fp8_cast", bwd[fb-1].Name)
	assert.Equal(t, "attn.grad_fp8_dequantize", bwd[fb+1].Name)
	// 2,048 tokens; at TP 2 a rank holds 16 query and 4 key/value heads of 128.
	tokens, q, kv := 2048.0, 16*128.0, 2*4*128.0
	assert.InDelta(t, tokens*(q+kv)*(2+2+2.0/32), fwd[fa-1].Bytes, 1e-6) // MXFP8: rowwise and columnwise with scales
	assert.InDelta(t, tokens*q*3, fwd[fa+1].Bytes, 1e-6)                 // read FP8, write BF16
	assert.InDelta(t, tokens*(q+kv)*3, bwd[fb+1].Bytes, 1e-6)
	for _, off := range []Block{build(hw.FP8, false), build(hw.BF16, true)} {
		assert.Equal(t, -1, index(off.Forward, "attn.fp8_cast"))
		assert.Equal(t, hw.BF16, off.Forward[index(off.Forward, "attn.flash")].DType)
	}
}

// fp8_output_proj (MXFP8 only): the output layer's GEMMs in FP8 behind
// their casts, as a Transformer Engine linear layer; without it the head
// stays in 16 bits.
func TestFP8OutputProj(t *testing.T) {
	c, ok := ByName("llama3-8b")
	require.True(t, ok)
	head := func(proj bool) map[string]Op {
		return opsByName(t, c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.FP8, FP8Recipe: FP8MXFP8, FP8OutputProj: proj}, BlockLMHead)
	}
	on, off := head(true), head(false)
	for _, name := range []string{OpLogits, OpLogits + ".dgrad", OpLogits + ".wgrad"} {
		assert.Equal(t, hw.FP8, on[name].DType, name)
		assert.Equal(t, hw.BF16, off[name].DType, name)
	}
	require.Contains(t, on, OpLogits+".fp8_cast")
	require.Contains(t, on, OpLogits+".grad_fp8_cast")
	assert.NotContains(t, off, OpLogits+".fp8_cast")
	vocab := float64(VocabShard(c.Vocab, 1, 0))
	assert.InDelta(t, 1024*vocab*(2+2+2.0/32), on[OpLogits+".grad_fp8_cast"].Bytes, 1e-3)
}

// A LayerNorm model's inference norms are PyTorch's kernel
// (Op.NativeLayerNorm); its training norms and an RMSNorm model's are not.
func TestNativeLayerNormOnlyForLayerNormInference(t *testing.T) {
	native := func(name string, r Run) bool {
		c, ok := ByName(name)
		require.True(t, ok)
		g, err := Build(c, r)
		require.NoError(t, err)
		blk, _ := g.Block(BlockTransformer)
		for _, o := range blk.Forward {
			if o.Kind == Norm {
				return o.NativeLayerNorm
			}
		}
		t.Fatalf("%s has no norm", name)
		return false
	}
	prefill := Run{Phase: Prefill, Batch: 1, SeqLen: 512, TP: 1, DType: hw.FP16}
	assert.True(t, native("gpt3-175b", prefill))
	assert.False(t, native("llama2-7b", prefill))
	assert.False(t, native("gpt3-175b", Run{Phase: Training, Batch: 1, SeqLen: 512, TP: 1, DType: hw.FP16}))
}

// Current scaling (fp8_recipe tensorwise) reads every tensor it casts once
// more, for its amax, in a kernel before the cast; delayed scaling (the
// default) takes the amax in the cast itself.
func TestFP8CurrentScalingTakesAmax(t *testing.T) {
	c, ok := ByName("llama2-7b")
	require.True(t, ok)
	ops := func(recipe string) []Op {
		g, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.FP8, FP8Recipe: recipe})
		require.NoError(t, err)
		blk, _ := g.Block(BlockTransformer)
		return append(append([]Op{}, blk.Forward...), blk.Backward...)
	}
	amax := func(os []Op) map[string]Op {
		m := map[string]Op{}
		for i, o := range os {
			if strings.HasSuffix(o.Name, ".amax") {
				require.Greater(t, len(os), i+1)
				assert.Equal(t, strings.TrimSuffix(o.Name, ".amax"), os[i+1].Name, "the cast follows its amax")
				m[o.Name] = o
			}
		}
		return m
	}
	assert.Empty(t, amax(ops("")))
	assert.Empty(t, amax(ops(FP8Delayed)))
	cur := amax(ops(FP8Tensorwise))
	T, f := int64(1024), int64(c.FFNHidden)
	require.Contains(t, cur, "mlp.down.fp8_cast.amax")
	assert.InDelta(t, 2*float64(T*f), cur["mlp.down.fp8_cast.amax"].Bytes, 1e-9) // one 16-bit read
	assert.Contains(t, cur, "mlp.gate_up.grad_fp8_cast.amax")
	assert.NotContains(t, cur, "attn.qkv.fp8_cast.amax") // the norm writes its output in FP8
}

// MXFP8 (fp8_recipe mxfp8): the tensor cores apply the block scales and
// accumulate in FP32, so no GEMM runs a split accumulator; every cast,
// the norm-fed inputs' too, writes its tensor rowwise and columnwise with
// an E8M0 scale byte per 32 elements, and nothing is transposed later.
func TestFP8MXFP8Casts(t *testing.T) {
	c, ok := ByName("llama2-7b")
	require.True(t, ok)
	ops := func(recipe string) map[string]Op {
		return opsByName(t, c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.FP8, GradDType: hw.FP32, FP8Recipe: recipe}, BlockTransformer)
	}
	mx, delayed := ops(FP8MXFP8), ops(FP8Delayed)
	for name, o := range mx {
		if o.Kind == GEMM {
			assert.False(t, o.SplitAccumulator, name)
		}
	}
	assert.True(t, delayed["attn.qkv.dgrad"].SplitAccumulator)
	n := float64(1024 * c.Hidden)
	has := func(m map[string]Op, name string) bool { _, ok := m[name]; return ok }
	require.True(t, has(mx, "attn.qkv.fp8_cast"), "the norm writes 16 bits, a cast follows")
	assert.False(t, has(delayed, "attn.qkv.fp8_cast"))
	assert.False(t, has(mx, "attn.qkv.fp8_transpose"))
	assert.InDelta(t, n*(2+1+1+2.0/32), mx["attn.qkv.fp8_cast"].Bytes, 1e-6)
	down := float64(1024 * c.FFNHidden)
	assert.InDelta(t, down*(2.0/32), mx["mlp.down.fp8_cast"].Bytes-delayed["mlp.down.fp8_cast"].Bytes, 1e-6)
}

// Transformer Engine's per-tensor FP8 recipe runs the forward GEMM with
// fast accumulation and the two gradient GEMMs with a split accumulator;
// the block-wise recipe splits all three; 16-bit GEMMs never do, nor FP8
// inference unless the checkpoint is block-scaled (Config.FP8BlockScaled),
// whose linear layers' forward GEMMs do.
func TestFP8RecipeSplitAccumulator(t *testing.T) {
	c, ok := ByName("mixtral-8x7b")
	require.True(t, ok)
	split := func(r Run) map[string]bool {
		g, err := Build(c, r)
		require.NoError(t, err)
		got := map[string]bool{}
		for _, blk := range g.Blocks {
			for _, o := range append(append([]Op{}, blk.Forward...), blk.Backward...) {
				if o.Tensor && (o.Kind == GEMM || o.Kind == GroupedGEMM) {
					got[o.Name] = o.SplitAccumulator
				}
			}
		}
		return got
	}
	run := Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.FP8, GradDType: hw.FP32}
	tensorwise := split(run)
	for _, name := range []string{"attn.qkv", "moe.experts.gate_up"} {
		require.Contains(t, tensorwise, name)
		assert.False(t, tensorwise[name], name)
		assert.True(t, tensorwise[name+".dgrad"], name)
		assert.True(t, tensorwise[name+".wgrad"], name)
	}
	for _, name := range []string{"moe.router", "moe.router.dgrad", "head.logits", "head.logits.wgrad"} {
		require.Contains(t, tensorwise, name)
		assert.False(t, tensorwise[name], name) // BF16
	}
	run.FP8Recipe = FP8Blockwise
	blockwise := split(run)
	assert.True(t, blockwise["attn.qkv"])
	assert.True(t, blockwise["moe.experts.gate_up"])
	assert.False(t, blockwise["head.logits"])
	prefill := Run{Phase: Prefill, Batch: 1, SeqLen: 1024, TP: 1, DType: hw.FP8, FP8Recipe: FP8Blockwise}
	for name, s := range split(prefill) {
		assert.False(t, s, name)
	}
	c.FP8BlockScaled = true
	blockScaled := split(prefill)
	for _, name := range []string{"attn.qkv", "attn.out", "moe.experts.gate_up", "moe.experts.down"} {
		require.Contains(t, blockScaled, name)
		assert.True(t, blockScaled[name], name)
	}
	assert.False(t, blockScaled["moe.router"])
	assert.False(t, blockScaled["head.logits"])
	ds, ok := ByName("deepseek-v3")
	require.True(t, ok)
	assert.True(t, ds.FP8BlockScaled)

	// Each block-scaled linear layer's input is quantized per 128-element
	// group first (read in 16 bits, written in 8 with an FP32 scale per
	// group), but for a projection after SwiGLU, whose kernel writes it so.
	g, err := Build(ds, Run{Phase: Prefill, Batch: 1, SeqLen: 512, TP: 1, DType: hw.FP8})
	require.NoError(t, err)
	blk, ok := g.Block(BlockMoE)
	require.True(t, ok)
	quant := map[string]Op{}
	for _, o := range blk.Forward {
		if o.Kind == Quantize {
			quant[o.Name] = o
		}
	}
	for _, name := range []string{"attn.q_down", "attn.q_up", "attn.kv_down", "attn.kv_up", "attn.out", "moe.shared.gate_up"} {
		require.Contains(t, quant, name+".fp8_quant")
	}
	assert.NotContains(t, quant, "moe.shared.down.fp8_quant")
	n := 512.0 * float64(ds.Heads*ds.VHeadDim)
	assert.InDelta(t, n*(2+1+4.0/128), quant["attn.out.fp8_quant"].Bytes, 1e-6)
}

// The loss as each implementation runs it: bytes moved forward and
// backward and kept per logit (16-bit logits), and the collectives that
// join the vocabulary shards under TP.
func TestCrossEntropyImplementations(t *testing.T) {
	c, ok := ByName("llama2-7b")
	require.True(t, ok)
	te, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 2, DType: hw.BF16, CrossEntropyFusion: CrossEntropyTE})
	require.NoError(t, err)
	teHead, _ := te.Block(BlockLMHead)
	for _, tc := range []struct {
		fusion              string
		fwd, bwd, kept      float64 // bytes per logit
		allReduces, gathers int
	}{
		{"", 38, 14, 4, 3, 0},
		{CrossEntropyUnfused, 38, 14, 4, 3, 0},
		{CrossEntropyNative, 22, 6, 4, 2, 0},
		{CrossEntropyTE, 2, 4, 2, 0, 1},
	} {
		base, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 1024, TP: 2, DType: hw.BF16, CrossEntropyFusion: tc.fusion})
		require.NoError(t, err)
		head, _ := base.Block(BlockLMHead)
		n := 1024.0 * float64(c.Vocab) / 2
		var fwd, bwd float64
		var ars, ags int
		for _, o := range head.Forward {
			switch {
			case o.Kind == CrossEntropy:
				fwd += o.Bytes
			case o.Kind == AllReduce && strings.HasPrefix(o.Name, "head.cross_entropy"):
				ars++
			case o.Kind == AllGather && strings.HasPrefix(o.Name, "head.cross_entropy"):
				ags++
			}
		}
		for _, o := range head.Backward {
			if o.Kind == CrossEntropy {
				bwd += o.Bytes
			}
		}
		assert.InDelta(t, tc.fwd*n, fwd, 1, tc.fusion)
		assert.InDelta(t, tc.bwd*n, bwd, 1, tc.fusion)
		assert.Equal(t, tc.allReduces, ars, tc.fusion)
		assert.Equal(t, tc.gathers, ags, tc.fusion)
		// What the head keeps beyond what TE's (2 bytes a logit) keeps.
		assert.InDelta(t, (tc.kept-2)*n, head.ActivationBytes-teHead.ActivationBytes, 1, tc.fusion)
	}
}

// Context parallelism: c ranks with s tokens each do, between them, the
// causal attention of c·s tokens (the balanced chunks: s queries against
// c·s/2 keys each, exact up to the causal diagonal's half), and exchange
// every rank's keys and values: for MLA, the heads' decompressed keys and
// values. Only training with FlashAttention and without SSM blocks splits.
func TestContextParallelAttention(t *testing.T) {
	for _, name := range []string{"llama3-8b", "deepseek-v3"} {
		c, ok := FromPreset(name, Config{Layers: 4})
		require.True(t, ok)
		attn := func(g Graph) (flops, exchanged float64) {
			for _, b := range g.Blocks {
				for _, o := range b.Forward {
					switch {
					case o.Kind == FlashAttention:
						flops += o.FLOPs
					case o.CP:
						exchanged += o.Bytes
					}
				}
			}
			return flops, exchanged
		}
		full, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 8192, DType: hw.BF16})
		require.NoError(t, err)
		part, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 2048, CP: 4, DType: hw.BF16})
		require.NoError(t, err)
		f1, x1 := attn(full)
		f4, x4 := attn(part)
		require.Zero(t, x1, name)
		require.InEpsilon(t, f1, 4*f4, 1e-3, name)
		require.Positive(t, x4, name)
	}
	mamba, ok := FromPreset("mamba-2.8b", Config{})
	require.True(t, ok)
	ps := mamba.CheckRun(Run{Phase: Training, Batch: 1, SeqLen: 2048, CP: 2, DType: hw.BF16})
	require.NotEmpty(t, ps)
	require.Equal(t, "cp", ps[len(ps)-1].Path)
}

// DeepSpeed-Ulysses (cp_comm_type a2a): an all-to-all gives each of c ranks
// the whole sequence of heads/c heads, so each does 1/c of the causal
// attention; the all-to-alls move each rank's Q, K and V in and its output
// out. The heads of a tensor-parallel rank must split over c.
func TestContextParallelAllToAll(t *testing.T) {
	c, ok := FromPreset("llama3-8b", Config{Layers: 4})
	require.True(t, ok)
	run := func(cp int, comm string) (flops float64, ops []Op) {
		g, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: 8192 / cp, CP: cp, CPComm: comm, TP: 2, DType: hw.BF16})
		require.NoError(t, err)
		for _, o := range g.Blocks[g.Order[1]].Forward {
			if o.Kind == FlashAttention {
				flops += o.FLOPs
			}
			if o.CP {
				ops = append(ops, o)
			}
		}
		return flops, ops
	}
	full, _ := run(1, "")
	part, ops := run(4, CPAllToAll)
	require.InEpsilon(t, full, 4*part, 1e-12)
	require.Len(t, ops, 2)
	// A rank holds 2,048 tokens of 16 query and 4 key/value heads of 128.
	require.Equal(t, AllToAll, ops[0].Kind)
	require.Equal(t, float64(2048*(16+2*4)*128*2), ops[0].Bytes)
	require.Equal(t, float64(2048*16*128*2), ops[1].Bytes)
	ps := c.CheckRun(Run{Phase: Training, Batch: 1, SeqLen: 1024, CP: 8, CPComm: CPAllToAll, TP: 2, DType: hw.BF16})
	require.NotEmpty(t, ps)
	require.Equal(t, "cp_comm_type", ps[0].Path, "4 key/value heads a rank do not split 8 ways")
}

// With fused add-norms (vLLM's fused_add_rms_norm) a LLaMA block's two
// residual adds go into its two norms: the same rows, one vectorized
// kernel each reading the block output and the residual stream and
// writing both (4 tensors where the add moved 3 and the norm 2), the
// add's FLOPs with the norm's. GPT's LayerNorm blocks and training keep
// the separate kernels.
func TestFusedAddNorm(t *testing.T) {
	c, _ := ByName("llama2-7b")
	for _, ph := range []Phase{Prefill, Decode} {
		r := Run{Phase: ph, Batch: 2, SeqLen: 64, KVLen: 64, TP: 2, DType: hw.BF16}
		plain, err := Build(c, r)
		require.NoError(t, err)
		r.FusedAddNorm = true
		fused, err := Build(c, r)
		require.NoError(t, err)
		pb, _ := plain.Block(BlockTransformer)
		fb, _ := fused.Block(BlockTransformer)
		require.Len(t, fb.Forward, len(pb.Forward)-2, "the two residual adds go")
		ops := map[string]Op{}
		for _, o := range pb.Forward {
			ops[o.Name] = o
		}
		var flops float64
		for _, o := range pb.Forward {
			flops += o.FLOPs
		}
		for _, o := range fb.Forward {
			flops -= o.FLOPs
			assert.NotContains(t, o.Name, "residual")
			if o.Kind != Norm {
				assert.Equal(t, ops[o.Name], o, "%s unchanged", o.Name)
				continue
			}
			rows := ops[o.Name].M
			n := float64(rows * ops[o.Name].N)
			assert.True(t, o.OnePass, "%s vectorized", o.Name)
			assert.Equal(t, [2]int64{rows, 4096}, [2]int64{o.M, o.N})
			assert.InDelta(t, 4*n*2+8*float64(rows), o.Bytes, 1e-6, o.Name)
		}
		assert.InDelta(t, 0, flops, 1e-6, "the adds' FLOPs move into the norms")
	}
	g, _ := ByName("gpt-22b")
	for _, x := range []struct {
		c Config
		r Run
	}{{g, Run{Phase: Prefill, Batch: 1, SeqLen: 64, TP: 1, DType: hw.BF16, FusedAddNorm: true}},
		{c, Run{Phase: Training, Batch: 1, SeqLen: 64, TP: 1, DType: hw.BF16, FusedAddNorm: true}}} {
		gr, err := Build(x.c, x.r)
		require.NoError(t, err)
		blk, _ := gr.Block(BlockTransformer)
		n := 0
		for _, o := range blk.Forward {
			if strings.HasSuffix(o.Name, ".residual") {
				n++
			}
		}
		assert.Equal(t, 2, n, "%s %s keeps its adds", x.c.Name, x.r.Phase)
	}
}

// QK norm (Qwen3) adds one norm over each head's queries and one over its
// keys, rows of head_dim, between the QKV projection and rotary, with their
// backward kernels, and 2·head_dim weights a layer; Qwen3's Hugging Face
// configs turn it on, LLaMA's do not.
func TestQKNorm(t *testing.T) {
	c, _ := ByName("qwen3-30b-a3b")
	require.True(t, c.QKNorm)
	off := c
	off.QKNorm = false
	assert.Equal(t, int64(2*128*48), Params(c)-Params(off))

	const tp, tokens = 2, 512
	g, err := Build(c, Run{Phase: Training, Batch: 1, SeqLen: tokens, TP: tp, SequenceParallel: true, DType: hw.BF16})
	require.NoError(t, err)
	blk, ok := g.Block(BlockMoE)
	require.True(t, ok)
	var names []string
	shape := map[string][2]int64{}
	for _, o := range blk.Forward {
		names = append(names, o.Name)
		shape[o.Name] = [2]int64{o.M, o.N}
	}
	qkv := slices.Index(names, "attn.qkv")
	require.GreaterOrEqual(t, qkv, 0)
	assert.Equal(t, []string{"attn.q_norm", "attn.k_norm", "attn.rotary"}, names[qkv+1:qkv+4])
	assert.Equal(t, [2]int64{tokens * 32 / tp, 128}, shape["attn.q_norm"])
	assert.Equal(t, [2]int64{tokens * 4 / tp, 128}, shape["attn.k_norm"])
	var bwd int
	for _, o := range blk.Backward {
		if strings.HasPrefix(o.Name, "attn.q_norm") || strings.HasPrefix(o.Name, "attn.k_norm") {
			bwd++
		}
	}
	assert.Equal(t, 2*3, bwd, "each norm's three backward kernels")

	for mt, want := range map[string]bool{"qwen3": true, "qwen3_moe": true, "llama": false, "qwen2": false} {
		hf := map[string]any{"model_type": mt, "num_hidden_layers": 2.0, "hidden_size": 256.0, "num_attention_heads": 4.0,
			"intermediate_size": 512.0, "vocab_size": 1000.0, "num_experts": 4.0, "num_experts_per_tok": 2.0, "moe_intermediate_size": 128.0}
		m, err := FromHFConfig(hf)
		require.NoError(t, err, mt)
		assert.Equal(t, want, m.QKNorm, mt)
	}
}

// The dense Qwen3 presets are what their Hugging Face configs give
// (Qwen/Qwen3-8B config.json's fields).
func TestQwen3PresetMatchesHFConfig(t *testing.T) {
	hf := map[string]any{"model_type": "qwen3", "num_hidden_layers": 36.0, "hidden_size": 4096.0, "num_attention_heads": 32.0,
		"num_key_value_heads": 8.0, "head_dim": 128.0, "intermediate_size": 12288.0, "vocab_size": 151936.0, "tie_word_embeddings": false}
	got, err := FromHFConfig(hf)
	require.NoError(t, err)
	want, ok := ByName("qwen3-8b")
	require.True(t, ok)
	got.Name = want.Name
	assert.Equal(t, want, got)
	assert.Equal(t, Params(want), Params(got))
}
