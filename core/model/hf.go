package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// HFModelTypes are the Hugging Face config.json model_type values
// FromHFConfig reads.
var HFModelTypes = []string{"deepseek_v2", "deepseek_v3", "glm4_moe", "gpt2", "gpt_oss", "llama", "llama4", "llama4_text", "mamba", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"}

// HFConfigError is what is wrong with one key of a Hugging Face config
// (Key: its path in the config, "model_type", "layer_types[3]").
type HFConfigError struct{ Key, Message string }

// HFConfigErrors are every key's problem, in key order.
type HFConfigErrors []HFConfigError

func (es HFConfigErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Key + ": " + e.Message
	}
	return strings.Join(parts, "; ")
}

// hfError is one key's problem as an error.
func hfError(key, format string, args ...any) error {
	return HFConfigErrors{{key, fmt.Sprintf(format, args...)}}
}

// FromHFConfig maps a Hugging Face config.json (decoded JSON) to a Config:
// dense LLaMA-style models (llama, mistral, qwen2, qwen3), GPT-2, Mamba,
// and the mixture-of-experts families (mixtral, qwen2_moe, qwen3_moe,
// gpt_oss, glm4_moe, llama4 (its text_config) and llama4_text, deepseek_v2,
// deepseek_v3, the latter with multi-head latent attention). Local
// attention is read from layer_types where the config lists it (gpt_oss's
// sliding_attention; llama4's chunked_attention; transformers' newer
// configs), else from sliding_window (mistral, mixtral: every layer),
// use_sliding_window and max_window_layers (qwen2, qwen3: the layers from
// max_window_layers on) or no_rope_layers (llama4: its rotary layers are
// chunked, its NoPE ones global).
// The field names are those of the transformers configuration classes.
// The result is defaulted; Check reports what is left invalid.
func FromHFConfig(hf map[string]any) (Config, error) {
	mt, _ := hf["model_type"].(string)
	if text, ok := hf["text_config"].(map[string]any); ok && mt == "llama4" {
		// Llama 4's config.json wraps the language model's in text_config
		// (model_type llama4_text); the vision encoder is not modelled.
		inner := map[string]any{}
		for k, v := range text {
			inner[k] = v
		}
		inner["model_type"] = "llama4_text"
		if _, named := inner["_name_or_path"]; !named {
			inner["_name_or_path"] = hf["_name_or_path"]
		}
		c, err := FromHFConfig(inner)
		var es HFConfigErrors
		if errors.As(err, &es) {
			for i := range es {
				es[i].Key = "text_config." + es[i].Key
			}
			return c, es
		}
		return c, err
	}
	var missing HFConfigErrors
	num := func(key string, need bool) int {
		v, ok := hf[key]
		if !ok || v == nil {
			if need {
				missing = append(missing, HFConfigError{key, fmt.Sprintf("missing in the %s config", mt)})
			}
			return 0
		}
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) {
			missing = append(missing, HFConfigError{key, fmt.Sprintf("must be an integer, got %v", v)})
			return 0
		}
		return int(f)
	}
	flag := func(key string, def bool) bool {
		if v, ok := hf[key].(bool); ok {
			return v
		}
		return def
	}
	c := Config{}
	if n, ok := hf["_name_or_path"].(string); ok {
		c.Name = n
	}
	switch mt {
	case "gpt2":
		c = Config{Name: c.Name, Family: GPT, Layers: num("n_layer", true), Hidden: num("n_embd", true), Heads: num("n_head", true),
			Vocab: num("vocab_size", true), Positions: num("n_positions", true), TiedEmbeddings: flag("tie_word_embeddings", true)}
		c.FFNHidden = num("n_inner", false)
	case "mamba":
		c = Config{Name: c.Name, Family: Mamba, Layers: num("num_hidden_layers", true), Hidden: num("hidden_size", true),
			Vocab: num("vocab_size", true), DState: num("state_size", false), Expand: num("expand", false),
			DConv: num("conv_kernel", false), DtRank: num("time_step_rank", false), TiedEmbeddings: flag("tie_word_embeddings", true)}
	case "llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "llama4_text", "glm4_moe", "deepseek_v2", "deepseek_v3":
		c.Family = LLaMA
		c.Layers = num("num_hidden_layers", true)
		c.Hidden = num("hidden_size", true)
		c.Heads = num("num_attention_heads", true)
		c.KVHeads = num("num_key_value_heads", false)
		c.HeadDim = num("head_dim", false)
		c.FFNHidden = num("intermediate_size", true)
		c.Vocab = num("vocab_size", true)
		c.TiedEmbeddings = flag("tie_word_embeddings", false)
		// Qwen3's attention normalizes each head's queries and keys
		// (transformers' Qwen3Attention and Qwen3MoeAttention: q_norm, k_norm).
		c.QKNorm = mt == "qwen3" || mt == "qwen3_moe"
		switch mt {
		case "mixtral", "gpt_oss":
			// gpt-oss's experts are intermediate_size wide, as Mixtral's;
			// its attention's biases and sinks (a logit per head) are not
			// priced.
			c.Experts = num("num_local_experts", true)
			c.ExpertsPerToken = num("num_experts_per_tok", true)
			// GptOssExperts' gate_up_proj_bias and down_proj_bias.
			c.ExpertBias = mt == "gpt_oss"
			if v, ok := hf["swiglu_limit"]; ok && v != nil {
				if l, isNum := v.(float64); isNum {
					c.GLULimit = l
				} else {
					missing = append(missing, HFConfigError{"swiglu_limit", fmt.Sprintf("must be a number, got %v", v)})
				}
			}
		case "llama4_text":
			// Every interleave_moe_layer_step-th layer routes each token
			// to num_experts_per_tok of num_local_experts experts of
			// intermediate_size beside a shared expert of the same size,
			// with a sigmoid score (Llama4TextMoe); the other layers are
			// dense MLPs of intermediate_size_mlp. use_qk_norm normalizes
			// the rotary layers' queries and keys.
			c.FFNHidden = num("intermediate_size_mlp", true)
			c.Experts = num("num_local_experts", true)
			c.ExpertsPerToken = num("num_experts_per_tok", true)
			c.ExpertFFNHidden = num("intermediate_size", true)
			c.SharedExperts, c.SharedExpertFFNHidden = 1, c.ExpertFFNHidden
			c.MoEEvery = num("interleave_moe_layer_step", false)
			c.Router = RouterSigmoid
			c.QKNorm = flag("use_qk_norm", false)
		case "qwen2_moe", "qwen3_moe":
			c.Experts = num("num_experts", true)
			c.ExpertsPerToken = num("num_experts_per_tok", true)
			c.ExpertFFNHidden = num("moe_intermediate_size", true)
			c.MoEEvery = num("decoder_sparse_step", false)
			if s := num("shared_expert_intermediate_size", false); s > 0 {
				c.SharedExperts, c.SharedExpertFFNHidden = 1, s
			}
		case "deepseek_v2", "deepseek_v3", "glm4_moe":
			// GLM-4.5 (glm4_moe) has DeepSeek-V3's MoE (first_k_dense_replace
			// dense layers, n_shared_experts beside n_routed_experts, a
			// sigmoid score) around grouped-query attention (Glm4MoeConfig);
			// its partial rotary and attention biases are not priced, its
			// multi-token-prediction layer (num_nextn_predict_layers) is not
			// part of the model, as DeepSeek-V3's is not.
			c.Experts = num("n_routed_experts", true)
			c.ExpertsPerToken = num("num_experts_per_tok", true)
			c.ExpertFFNHidden = num("moe_intermediate_size", true)
			c.SharedExperts = num("n_shared_experts", false)
			c.DenseLayers = num("first_k_dense_replace", false)
			c.MoEEvery = num("moe_layer_freq", false)
			if s, _ := hf["scoring_func"].(string); s != "" {
				c.Router = s
			}
			if mt == "glm4_moe" {
				c.Router = RouterSigmoid
				c.QKNorm = flag("use_qk_norm", false)
				break
			}
			c.QLoRARank = num("q_lora_rank", false)
			c.KVLoRARank = num("kv_lora_rank", true)
			c.QKRopeHeadDim = num("qk_rope_head_dim", true)
			c.QKNopeHeadDim = num("qk_nope_head_dim", true)
			c.VHeadDim = num("v_head_dim", true)
			c.KVHeads = 0
		}
	default:
		return Config{}, hfError("model_type", "must be one of %s, got %q", strings.Join(HFModelTypes, ", "), mt)
	}
	if c.Family == LLaMA {
		var err error
		if c.SlidingWindow, c.AttentionChunk, c.WindowPattern, err = hfLocal(hf, mt, c.Layers); err != nil {
			return Config{}, err
		}
	}
	// An FP8 checkpoint with per-block weight scales (DeepSeek-V3's
	// "quantization_config": {"quant_method": "fp8", "weight_block_size":
	// [128, 128]}).
	if q, ok := hf["quantization_config"].(map[string]any); ok && q["quant_method"] == "fp8" && q["weight_block_size"] != nil {
		c.FP8BlockScaled = true
	}
	if len(missing) > 0 {
		sort.SliceStable(missing, func(i, j int) bool { return missing[i].Key < missing[j].Key })
		// A key read twice (llama4's intermediate_size) is said once.
		return Config{}, slices.CompactFunc(missing, func(a, b HFConfigError) bool { return a.Key == b.Key })
	}
	c.Defaults()
	return c, nil
}

// hfLocal reads a config's local attention: the sliding window's keys, the
// chunk's tokens and the pattern of windowed (S), chunked (C) and full (F)
// layers, shortened to its period ("SF" for gpt-oss's alternation, "CCCF"
// for Llama 4), or zeros and "" without local attention.
func hfLocal(hf map[string]any, mt string, layers int) (window, chunk int, pattern string, err error) {
	w, _ := hf["sliding_window"].(float64)
	ch, _ := hf["attention_chunk_size"].(float64)
	var types []string
	if lt, ok := hf["layer_types"].([]any); ok {
		for i, v := range lt {
			switch v {
			case "sliding_attention":
				types = append(types, "S")
			case "chunked_attention":
				types = append(types, "C")
			case "full_attention":
				types = append(types, "F")
			default:
				return 0, 0, "", hfError(fmt.Sprintf("layer_types[%d]", i), `must be "sliding_attention", "chunked_attention" or "full_attention", got %v`, v)
			}
		}
	} else if nr, ok := hf["no_rope_layers"].([]any); ok && mt == "llama4_text" && ch > 0 {
		// transformers' Llama4TextConfig: a layer with rotary embeddings
		// (no_rope_layers[i] = 1) attends in chunks, a NoPE one globally.
		for _, v := range nr {
			types = append(types, map[bool]string{true: "C", false: "F"}[v == 1.0])
		}
	} else {
		switch mt {
		case "mistral", "mixtral":
			if w > 0 {
				types = []string{"S"}
			}
		case "qwen2", "qwen3", "qwen2_moe", "qwen3_moe":
			if use, _ := hf["use_sliding_window"].(bool); use && w > 0 && layers > 0 {
				from, _ := hf["max_window_layers"].(float64)
				for i := 0; i < layers; i++ {
					types = append(types, map[bool]string{true: "S", false: "F"}[float64(i) >= from])
				}
			}
		}
	}
	s, c := slices.Contains(types, "S"), slices.Contains(types, "C")
	if !s && !c {
		return 0, 0, "", nil
	}
	if s && (w <= 0 || w != math.Trunc(w)) {
		return 0, 0, "", hfError("sliding_window", "must be a positive integer where layer_types has sliding layers, got %v", hf["sliding_window"])
	}
	if c && (ch <= 0 || ch != math.Trunc(ch)) {
		return 0, 0, "", hfError("attention_chunk_size", "must be a positive integer where layer_types has chunked layers, got %v", hf["attention_chunk_size"])
	}
	if !s {
		w = 0
	}
	if !c {
		ch = 0
	}
	return int(w), int(ch), strings.Join(types[:period(types)], ""), nil
}

// period is the length of the shortest prefix of xs that repeated gives xs.
func period(xs []string) int {
	for p := 1; p < len(xs); p++ {
		ok := true
		for i := p; i < len(xs) && ok; i++ {
			ok = xs[i] == xs[i-p]
		}
		if ok {
			return p
		}
	}
	return len(xs)
}
