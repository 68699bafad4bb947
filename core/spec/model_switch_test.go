package spec

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// A switch given false replaces a preset's or a config.json's true (a zero
// in the overrides otherwise reads as "keep"), and survives JSON.
func TestModelSwitchesOff(t *testing.T) {
	var tied Model
	require.NoError(t, json.Unmarshal([]byte(`{"preset":"gpt-22b","layers":4}`), &tied))
	c, ok := tied.Resolve()
	require.True(t, ok)
	require.True(t, c.TiedEmbeddings) // the preset's

	var untied Model
	require.NoError(t, json.Unmarshal([]byte(`{"preset":"gpt-22b","layers":4,"tied_embeddings":false}`), &untied))
	c, ok = untied.Resolve()
	require.True(t, ok)
	require.False(t, c.TiedEmbeddings)
	js, err := json.Marshal(untied)
	require.NoError(t, err)
	var again Model
	require.NoError(t, json.Unmarshal(js, &again))
	c2, ok := again.Resolve()
	require.True(t, ok, string(js))
	require.Equal(t, c, c2, string(js))

	var hf Model
	require.NoError(t, json.Unmarshal([]byte(`{"hf_config":{"model_type":"gpt2","n_layer":2,"n_embd":64,"n_head":2,"vocab_size":100,"n_positions":64},
		"tied_embeddings":false}`), &hf))
	c, ok = hf.Resolve()
	require.True(t, ok)
	require.False(t, c.TiedEmbeddings) // gpt2 ties by default

	var ds Model
	require.NoError(t, json.Unmarshal([]byte(`{"preset":"deepseek-v3","fp8_block_scaled":false}`), &ds))
	c, ok = ds.Resolve()
	require.True(t, ok)
	require.False(t, c.FP8BlockScaled)
}
