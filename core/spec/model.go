package spec

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/eidolon-sim/eidolon/core/model"
)

// Model names an architecture, in one of two JSON forms:
//
//	"model": "llama2-7b"                              a preset (eidolon.presets.models())
//	"model": {"preset": "llama2-7b", "layers": 2}     a preset with some hyper-parameters replaced
//	"model": {"family": "llama", "layers": 4, ...}    explicit hyper-parameters (model.Config fields)
//
// Field names of the object form: preset, name, family, layers, hidden,
// vocab, tied_embeddings, heads, kv_heads, head_dim, ffn_hidden, positions,
// ssm, d_state, d_conv, expand, dt_rank, ssm_head_dim, n_groups,
// chunk_size, pattern. Problems in the object form are reported under the
// path "model".
type Model struct {
	Preset string `json:"preset,omitempty"`
	model.Config
}

// modelFields is Model without its JSON method, for strict decoding.
type modelFields Model

// UnmarshalJSON accepts a preset name or an object of hyper-parameters.
func (m *Model) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		*m = Model{}
		return json.Unmarshal(data, &m.Preset)
	}
	var f modelFields
	if err := Decode(data, &f); err != nil {
		var se *Error
		if errors.As(err, &se) {
			for i := range se.Problems {
				se.Problems[i].Path = Field("model", se.Problems[i].Path)
			}
		}
		return err
	}
	*m = Model(f)
	return nil
}

// MarshalJSON writes a bare preset as its name, anything else as an object.
func (m Model) MarshalJSON() ([]byte, error) {
	if m.Preset != "" && m.Config == (model.Config{}) {
		return json.Marshal(m.Preset)
	}
	return json.Marshal(modelFields(m))
}

// Resolve returns the architecture: the preset with replacements, or the
// explicit hyper-parameters with the family's defaults.
func (m Model) Resolve() (model.Config, bool) {
	if m.Preset != "" {
		return model.FromPreset(m.Preset, m.Config)
	}
	c := m.Config
	c.Defaults()
	return c, true
}

// Validate reports an unknown preset or every invalid hyper-parameter.
func (m Model) Validate(p *Problems, path string) {
	c, ok := m.Resolve()
	if !ok {
		where := path
		if m.Config != (model.Config{}) {
			where = Field(path, "preset")
		}
		p.OneOf(where, m.Preset, model.Names())
		return
	}
	for _, fp := range c.Check() {
		p.Addf(Field(path, fp.Field), "%s", fp.Message)
	}
}
