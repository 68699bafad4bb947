package spec

import (
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
