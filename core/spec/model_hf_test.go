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
