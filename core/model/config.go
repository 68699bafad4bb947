// Package model turns architectures into operators with shapes: per block
// (transformer layer, Mamba mixer, embedding, LM head), per tensor-parallel
// rank, for a training step (forward, backward, optimizer) or an inference
// pass (prefill, decode). It also counts parameters, FLOPs, weight bytes,
// activations, KV cache and SSM state. It knows shapes, not time: package
// compute prices the operators, and communication is only marked (as
// collective ops with their payload), never simulated here.
package model

import (
	"fmt"
	"strings"

	"github.com/eidolon-sim/eidolon/core/problem"
)

// Family is an architecture family.
type Family string

const (
	// GPT: LayerNorm, multi-head attention, GELU MLP (4h), biases, learned
	// positions, dropout, tied embeddings (the Megatron GPT configurations).
	GPT Family = "gpt"
	// LLaMA: RMSNorm, grouped-query attention with rotary embeddings, SwiGLU
	// MLP, no biases, no dropout.
	LLaMA Family = "llama"
	// Mamba: Mamba-1 blocks (RMSNorm + selective-scan mixer), no MLP.
	Mamba Family = "mamba"
	// Mamba2: Mamba-2 blocks (RMSNorm + SSD mixer), no MLP.
	Mamba2 Family = "mamba2"
	// Hybrid: a layer pattern mixing SSM blocks and attention blocks.
	Hybrid Family = "hybrid"
)

// Families lists the families in a fixed order.
var Families = []Family{GPT, LLaMA, Mamba, Mamba2, Hybrid}

// Pattern letters of a hybrid model, one per position.
const (
	// PatSSM is an SSM block (Mamba-1 or Mamba-2, per Config.SSM).
	PatSSM = 'M'
	// PatAttention is a transformer block (attention + MLP) with its own weights.
	PatAttention = 'A'
	// PatMoE is a transformer block whose MLP is a mixture of experts
	// (router, routed SwiGLU experts, shared experts: see moe.go).
	PatMoE = 'E'
	// PatShared is one invocation of a Zamba-style shared transformer block:
	// its input is the concatenation of the residual stream and the input
	// embeddings (width 2·hidden), its attention and MLP weights are shared
	// by every invocation, and each invocation has its own hidden×hidden
	// output projection (Glorioso et al. 2024, arXiv 2405.16712).
	PatShared = 'S'
)

// MaxLayers is the most layers a model may have (spec's bound on layers
// and on a pattern's letters).
const MaxLayers = 1 << 14

// Config is an architecture's hyper-parameters: plain data, JSON-ready.
// Zero optional fields take the family's defaults (see Defaults).
type Config struct {
	Name   string `json:"name,omitempty"`
	Family Family `json:"family"`
	// Layers is the number of mixer blocks (transformer layers or SSM
	// blocks); for hybrids, the length of Pattern without shared invocations.
	Layers int `json:"layers"`
	Hidden int `json:"hidden"`
	Vocab  int `json:"vocab"`
	// TiedEmbeddings shares the input embedding with the LM head.
	TiedEmbeddings bool `json:"tied_embeddings,omitempty"`

	// Attention and MLP (transformer blocks).
	Heads   int `json:"heads,omitempty"`
	KVHeads int `json:"kv_heads,omitempty"` // default Heads (multi-head attention)
	HeadDim int `json:"head_dim,omitempty"` // default Hidden/Heads
	// FFNHidden is the MLP's inner width: 4·Hidden for GPT; SwiGLU's
	// intermediate size for LLaMA and hybrids.
	FFNHidden int `json:"ffn_hidden,omitempty"`
	// Positions is the number of learned position embeddings (GPT); 0 with rotary.
	Positions int `json:"positions,omitempty"`
	// SlidingWindow > 0 limits the attention of the layers WindowPattern
	// marks to the SlidingWindow keys ending at each query (Mistral-7B's
	// sliding_window; gpt-oss's banded layers of 128 tokens, which alternate
	// with dense ones). A windowed layer's attention skips the key blocks
	// outside the window and its KV cache keeps only the window.
	SlidingWindow int `json:"sliding_window,omitempty"`
	// AttentionChunk > 0 splits each sequence into chunks of that many
	// tokens for the layers WindowPattern marks C: a query attends to the
	// keys of its own chunk up to itself (Llama 4's chunked attention,
	// attention_chunk_size 8,192, on three layers of four). Its attention
	// skips the other chunks' key blocks and its KV cache keeps one chunk.
	AttentionChunk int `json:"attention_chunk,omitempty"`
	// WindowPattern says how each attention layer attends, one letter per
	// layer cycled over them in order: S a sliding window, C chunks, F the
	// whole context ("SF" for gpt-oss, layer 0 windowed; "CCCF" for Llama
	// 4); default "S" with a window, "C" with chunks. A model has one kind
	// of local attention: S or C, not both.
	WindowPattern string `json:"window_pattern,omitempty"`
	// QKNorm runs an RMSNorm over each head's queries and keys after the
	// QKV projection, before rotary (Qwen3's q_norm and k_norm, head_dim
	// weights each; Megatron-Core's --qk-layernorm).
	QKNorm bool `json:"qk_norm,omitempty"`

	// SSM blocks. SSM is "mamba" or "mamba2" for hybrids (set by the family otherwise).
	SSM        Family `json:"ssm,omitempty"`
	DState     int    `json:"d_state,omitempty"`      // 16 (Mamba-1), 128 (Mamba-2)
	DConv      int    `json:"d_conv,omitempty"`       // 4
	Expand     int    `json:"expand,omitempty"`       // 2: d_inner = Expand·Hidden
	DtRank     int    `json:"dt_rank,omitempty"`      // Mamba-1: ceil(Hidden/16)
	SSMHeadDim int    `json:"ssm_head_dim,omitempty"` // Mamba-2: 64
	NGroups    int    `json:"n_groups,omitempty"`     // Mamba-2: 1
	ChunkSize  int    `json:"chunk_size,omitempty"`   // Mamba-2: 256

	// Pattern (hybrids): one letter per position, M = SSM block,
	// A = transformer block, S = shared transformer block invocation,
	// E = transformer block with a mixture-of-experts FFN.
	Pattern string `json:"pattern,omitempty"`

	// FP8BlockScaled says the model's FP8 checkpoint scales its weights per
	// block (Hugging Face quantization_config.weight_block_size: [128, 128]
	// for DeepSeek-V3) rather than per tensor. Its FP8 inference runs
	// block-scaled GEMMs (DeepGEMM; vLLM's and SGLang's w8a8_block_fp8
	// kernels), which apply the scales and promote their partial sums every
	// 128 elements, as FP8Blockwise training does; per-tensor FP8 GEMMs
	// accumulate fast (vLLM's CUTLASS FP8 kernels).
	FP8BlockScaled bool `json:"fp8_block_scaled,omitempty"`

	// Mixture of experts and multi-head latent attention: see moe.go.
	MoE
}

// Defaults fills unset optional fields from the family's conventions.
func (c *Config) Defaults() {
	c.moeDefaults()
	switch c.Family {
	case GPT:
		if c.FFNHidden == 0 {
			c.FFNHidden = 4 * c.Hidden
		}
	case Mamba, Mamba2:
		if c.SSM == "" {
			c.SSM = c.Family
		}
	}
	if c.WindowPattern == "" {
		switch {
		case c.SlidingWindow > 0:
			c.WindowPattern = "S"
		case c.AttentionChunk > 0:
			c.WindowPattern = "C"
		}
	}
	if c.Heads > 0 {
		if c.KVHeads == 0 {
			c.KVHeads = c.Heads
		}
		if c.HeadDim == 0 && c.Hidden%c.Heads == 0 {
			c.HeadDim = c.Hidden / c.Heads
		}
	}
	if c.SSM == Mamba || c.SSM == Mamba2 {
		if c.DConv == 0 {
			c.DConv = 4
		}
		if c.Expand == 0 {
			c.Expand = 2
		}
	}
	switch c.SSM {
	case Mamba:
		if c.DState == 0 {
			c.DState = 16
		}
		if c.DtRank == 0 {
			c.DtRank = (c.Hidden + 15) / 16
		}
	case Mamba2:
		if c.DState == 0 {
			c.DState = 128
		}
		if c.SSMHeadDim == 0 {
			c.SSMHeadDim = 64
		}
		if c.NGroups == 0 {
			c.NGroups = 1
		}
		if c.ChunkSize == 0 {
			c.ChunkSize = 256
		}
	}
	// A layer count out of the spec's bounds gets no pattern (the spec
	// reports the count): a negative one would panic, a billion would
	// spell a gigabyte.
	if c.Pattern == "" && c.Layers >= 0 && c.Layers <= MaxLayers {
		switch c.Family {
		case GPT, LLaMA:
			c.Pattern = c.moePattern()
		case Mamba, Mamba2:
			c.Pattern = strings.Repeat(string(PatSSM), c.Layers)
		}
	}
}

// Check returns every problem of a defaulted config.
func (c Config) Check() []problem.Problem {
	var ps []problem.Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, problem.Problem{Path: field, Message: fmt.Sprintf(format, args...)})
	}
	pos := func(field string, v int) {
		if v <= 0 {
			bad(field, "must be > 0, got %d", v)
		}
	}
	known := false
	for _, f := range Families {
		known = known || c.Family == f
	}
	if !known {
		bad("family", "must be one of gpt, llama, mamba, mamba2, hybrid, got %q", c.Family)
		return ps
	}
	pos("layers", c.Layers)
	pos("hidden", c.Hidden)
	pos("vocab", c.Vocab)
	attn, ssm := c.hasBlock(PatAttention) || c.hasBlock(PatShared) || c.hasBlock(PatMoE), c.hasBlock(PatSSM)
	if attn {
		pos("heads", c.Heads)
		if c.KVLoRARank == 0 {
			pos("head_dim", c.HeadDim)
		}
		if c.hasBlock(PatAttention) || c.hasBlock(PatShared) {
			pos("ffn_hidden", c.FFNHidden)
		}
		if c.Heads > 0 && (c.KVHeads <= 0 || c.Heads%c.KVHeads != 0) {
			bad("kv_heads", "must divide heads (%d), got %d", c.Heads, c.KVHeads)
		}
	}
	if c.Positions < 0 {
		bad("positions", "must be >= 0, got %d", c.Positions)
	}
	if (c.Family == Mamba || c.Family == Mamba2) && c.SSM != c.Family {
		bad("ssm", "must be %q (the family's) or omitted, got %q", c.Family, c.SSM)
	} else if (ssm || c.SSM != "") && c.SSM != Mamba && c.SSM != Mamba2 {
		bad("ssm", "must be \"mamba\" or \"mamba2\", got %q", c.SSM)
	}
	if ssm {
		pos("d_state", c.DState)
		pos("d_conv", c.DConv)
		pos("expand", c.Expand)
		if c.SSM == Mamba {
			pos("dt_rank", c.DtRank)
		}
		if c.SSM == Mamba2 {
			pos("ssm_head_dim", c.SSMHeadDim)
			pos("n_groups", c.NGroups)
			pos("chunk_size", c.ChunkSize)
			if c.SSMHeadDim > 0 && c.DInner()%c.SSMHeadDim != 0 {
				bad("ssm_head_dim", "must divide d_inner = expand·hidden = %d, got %d", c.DInner(), c.SSMHeadDim)
			} else if c.NGroups > 0 && c.SSMHeads()%c.NGroups != 0 {
				bad("n_groups", "must divide the SSM heads (%d), got %d", c.SSMHeads(), c.NGroups)
			}
		}
	}
	for i, r := range c.Pattern {
		if r != PatSSM && r != PatAttention && r != PatShared && r != PatMoE {
			bad("pattern", "letter %d is %q; allowed: M (SSM block), A (transformer block), S (shared transformer block), E (mixture-of-experts transformer block)", i, r)
			return ps
		}
	}
	if c.SlidingWindow < 0 {
		bad("sliding_window", "must be >= 0 (0: no window), got %d", c.SlidingWindow)
	}
	if c.AttentionChunk < 0 {
		bad("attention_chunk", "must be >= 0 (0: no chunks), got %d", c.AttentionChunk)
	}
	if c.WindowPattern != "" {
		s, ch := strings.ContainsRune(c.WindowPattern, 'S'), strings.ContainsRune(c.WindowPattern, 'C')
		switch {
		case s && ch:
			bad("window_pattern", "mixes S and C: a model has one kind of local attention")
		case s && c.SlidingWindow <= 0:
			bad("window_pattern", "has S layers: needs sliding_window (the window's keys) > 0")
		case ch && c.AttentionChunk <= 0:
			bad("window_pattern", "has C layers: needs attention_chunk (the chunk's tokens) > 0")
		}
		if !attn {
			bad("window_pattern", "needs attention layers; the pattern has none")
		}
		if c.IsMLA() {
			bad("window_pattern", "local attention is not modelled with multi-head latent attention (kv_lora_rank)")
		}
		if len(c.WindowPattern) > MaxLayers {
			bad("window_pattern", "has %d letters, at most %d", len(c.WindowPattern), MaxLayers)
		}
		for i, r := range c.WindowPattern {
			if r != 'S' && r != 'C' && r != 'F' {
				bad("window_pattern", "letter %d is %q; allowed: S (sliding-window attention), C (chunked attention), F (full attention)", i, r)
				break
			}
		}
	}
	ps = append(ps, c.checkMoE()...)
	if n := c.mixerLayers(); n != c.Layers {
		bad("pattern", "has %d M/A blocks but layers is %d", n, c.Layers)
	}
	return ps
}

func (c Config) hasBlock(r rune) bool { return strings.ContainsRune(c.Pattern, r) }

// Local is the local attention of the k-th attention layer (0-based, in
// pattern order, shared invocations aside): its window or chunk, or zero.
func (c Config) Local(k int) Local {
	if c.WindowPattern == "" {
		return Local{}
	}
	switch c.WindowPattern[k%len(c.WindowPattern)] {
	case 'S':
		return Local{Window: int64(c.SlidingWindow)}
	case 'C':
		return Local{Chunk: int64(c.AttentionChunk)}
	}
	return Local{}
}

// LocalKind is the model's one kind of local attention (zero: none).
func (c Config) LocalKind() Local {
	for k := range c.WindowPattern {
		if l := c.Local(k); l.On() {
			return l
		}
	}
	return Local{}
}

func (c Config) mixerLayers() int {
	return strings.Count(c.Pattern, string(PatSSM)) + strings.Count(c.Pattern, string(PatAttention)) + strings.Count(c.Pattern, string(PatMoE))
}

// DInner is the SSM inner width expand·hidden.
func (c Config) DInner() int { return c.Expand * c.Hidden }

// SSMHeads is the number of Mamba-2 heads d_inner / head dim.
func (c Config) SSMHeads() int {
	if c.SSMHeadDim == 0 {
		return 0
	}
	return c.DInner() / c.SSMHeadDim
}

// ZambaPattern is the layer layout of Zyphra's Zamba: n Mamba blocks with the
// shared attention block invoked before block 2 and then before every block
// i ≥ 3 with (i−3) mod period = offset (Hugging Face ZambaConfig
// layers_block_type: attn_layer_period 6, attn_layer_offset 4).
func ZambaPattern(n, period, offset int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i == 2 || (i >= 3 && (i-3)%period == offset) {
			b.WriteRune(PatShared)
		}
		b.WriteRune(PatSSM)
	}
	return b.String()
}

// EveryK is a hybrid pattern of n blocks with an attention block as every
// k-th block (the rest SSM blocks), e.g. EveryK(8, 4) = "MMMAMMMA".
func EveryK(n, k int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if k > 0 && i%k == 0 {
			b.WriteRune(PatAttention)
		} else {
			b.WriteRune(PatSSM)
		}
	}
	return b.String()
}
