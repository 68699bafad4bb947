package spec

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModelHFConfigDecodes(t *testing.T) {
	var m Model
	require.NoError(t, m.UnmarshalJSON([]byte(`{"hf_config": {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2}, "layers": 2}`)))
	c, ok := m.Resolve()
	require.True(t, ok)
	require.Equal(t, 2, c.Layers)
	require.Equal(t, "EE", c.Pattern)
	var p Problems
	m.Validate(&p, "model")
	require.NoError(t, p.Err())
	var bad Model
	require.NoError(t, bad.UnmarshalJSON([]byte(`{"hf_config": {"model_type": "mixtral"}}`)))
	bad.Validate(&p, "model")
	require.ErrorContains(t, p.Err(), "model.hf_config")
}

// Mixture-of-experts and latent-attention sizes are bounded as the dense
// ones are, given directly or through a config.json: a billion experts
// validated and then took the machine's 24 GB in the routing's counts.
func TestModelMoESizesBounded(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"preset": "mixtral-8x7b", "experts": 1000000000}`, "model.experts: must be in [1, 1048576], got 1000000000"},
		{`{"preset": "deepseek-v3", "kv_lora_rank": 2000000}`, "model.kv_lora_rank: must be in [1, 1048576], got 2000000"},
		{`{"hf_config": {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 1000000000, "num_experts_per_tok": 2}, "layers": 2}`,
			"model.hf_config: experts must be in [1, 1048576], got 1000000000"},
	} {
		var m Model
		require.NoError(t, m.UnmarshalJSON([]byte(c.doc)))
		var p Problems
		m.Validate(&p, "model")
		require.ErrorContains(t, p.Err(), c.want, c.doc)
	}
	// The largest published count (PEER's 2^20) is a model.
	var m Model
	require.NoError(t, m.UnmarshalJSON([]byte(`{"preset": "mixtral-8x7b", "experts": 1048576}`)))
	var p Problems
	m.Validate(&p, "model")
	require.NoError(t, p.Err())
}

// A Hugging Face config's problems are the spec's at the config's own keys
// (they were one problem at model.hf_config, the keys inside its message):
// a key missing or fractional, a layer type, a nested text_config's keys,
// each key once (llama4 reads intermediate_size twice).
func TestHFConfigProblemsNameTheirKeys(t *testing.T) {
	for _, tc := range []struct {
		hf   string
		want []string
	}{
		{`{"model_type": "mixtral", "hidden_size": 4096.5, "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
			"intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8}`,
			[]string{"model.hf_config.hidden_size: must be an integer, got 4096.5",
				"model.hf_config.num_experts_per_tok: missing in the mixtral config"}},
		{`{"model_type": "nonsense"}`, []string{`model.hf_config.model_type: must be one of deepseek_v2`}},
		{`{"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
			"num_hidden_layers": 2, "vocab_size": 32000, "layer_types": ["sliding_attention", "linear"]}`,
			[]string{`model.hf_config.layer_types[1]: must be "sliding_attention", "chunked_attention" or "full_attention", got linear`}},
		{`{"model_type": "llama4", "text_config": {"hidden_size": 5120}}`,
			[]string{"model.hf_config.text_config.intermediate_size: missing in the llama4_text config"}},
	} {
		var m Model
		require.NoError(t, m.UnmarshalJSON([]byte(`{"hf_config": `+tc.hf+`}`)))
		var p Problems
		m.Validate(&p, "model")
		err := p.Err()
		require.Error(t, err)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w)
			require.Equal(t, 1, strings.Count(err.Error(), w), w)
		}
	}
}
