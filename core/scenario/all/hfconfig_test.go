package all_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// hfConfigs are config.json files of the families the converter reads, as
// their repositories publish them (the fields it maps).
var hfConfigs = map[string]string{
	"llama": `{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
		"num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096}`,
	"mixtral": `{"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
		"num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 32768,
		"num_local_experts": 8, "num_experts_per_tok": 2}`,
	"qwen3_moe": `{"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
		"num_attention_heads": 32, "num_hidden_layers": 48, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936,
		"num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 40960}`,
	"deepseek_v3": `{"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
		"num_attention_heads": 128, "num_hidden_layers": 61, "num_key_value_heads": 128, "vocab_size": 129280,
		"n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
		"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
		"max_position_embeddings": 163840, "n_group": 8, "topk_group": 4}`,
	"mamba": `{"model_type": "mamba", "hidden_size": 2560, "num_hidden_layers": 64, "vocab_size": 50280, "state_size": 16,
		"expand": 2, "conv_kernel": 4, "time_step_rank": 160}`,
	"gpt2": `{"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}`,
}

// A model given as a config.json is another way into every size the spec
// bounds: each config above with one or two of its fields set to a value
// of another type or scale (zero, negative, a billion, a string, a list)
// must run an inference pass and a training step to finite tables or stop
// with a spec or simulation error, never panic, and validate must refuse
// exactly what the run refuses. Found this way: a billion experts, which
// validated and then took the machine's memory in the routing's counts.
func TestHFConfigMutationsRunClean(t *testing.T) {
	seed := seedFromEnv("EIDOLON_HF_SEED")
	rng := rand.New(rand.NewPCG(seed, 14))
	values := []any{0, -1, 1, 2, 3, 7, 64, 1000, 1e6, 1e9, 1 << 31, 0.5, 1e-9, nil, "x", true, []any{}, map[string]any{}, []any{0}}
	names := sortedKeys(hfConfigs, "")
	const specs = 60
	ran := 0
	for i := range specs {
		var cfg map[string]any
		require.NoError(t, json.Unmarshal([]byte(hfConfigs[names[i%len(names)]]), &cfg))
		keys := sortedKeys(cfg, "model_type")
		for range 1 + rng.IntN(2) {
			cfg[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
		}
		model := map[string]any{"hf_config": cfg, "layers": 2}
		doc := map[string]any{"kind": "inference", "gpu": "h100-sxm", "cluster": map[string]any{"preset": "dgx-h100", "nodes": 1},
			"model": model, "tp": 1, "batch": 1, "prompt_tokens": 64, "output_tokens": 2}
		if i%2 == 1 {
			doc = map[string]any{"kind": "training", "gpu": "h100-sxm", "cluster": map[string]any{"preset": "dgx-h100", "nodes": 1},
				"model": model, "parallel": map[string]any{"tp": 1, "global_batch": 8}, "seq_len": 512}
		}
		if requireBoundedRunsClean(t, doc, fmt.Sprintf("config %d", i)) {
			ran++
		}
	}
	t.Logf("seed %d: %d of %d mutated configs ran", seed, ran, specs)
	require.GreaterOrEqual(t, ran, specs/20, "too few mutated configs ran to test anything")
}
