package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"

	"github.com/eidolon-sim/eidolon/core/model"
)

// Model names an architecture, in one of two JSON forms:
//
//	"model": "llama2-7b"                              a preset (eidolon.presets.models())
//	"model": {"preset": "llama2-7b", "layers": 2}     a preset with some hyper-parameters replaced
//	"model": {"family": "llama", "layers": 4, ...}    explicit hyper-parameters (model.Config fields)
//	"model": {"hf_config": {...}}                     a Hugging Face config.json (model.FromHFConfig)
//
// Field names of the object form: preset, name, family, layers, hidden,
// vocab, tied_embeddings, heads, kv_heads, head_dim, ffn_hidden, positions,
// ssm, d_state, d_conv, expand, dt_rank, ssm_head_dim, n_groups,
// chunk_size, pattern. Problems in the object form are reported under the
// path "model".
type Model struct {
	Preset string `json:"preset,omitempty"`
	// HFConfig is a Hugging Face config.json object (model_type and the
	// transformers field names); other fields set beside it replace its values.
	HFConfig map[string]any `json:"hf_config,omitempty"`
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
	if m.Preset != "" && m.Config == (model.Config{}) && m.HFConfig == nil {
		return json.Marshal(m.Preset)
	}
	return json.Marshal(modelFields(m))
}

// Resolve returns the architecture: the preset with replacements, or the
// explicit hyper-parameters with the family's defaults.
func (m Model) Resolve() (model.Config, bool) {
	if m.HFConfig != nil {
		c, err := model.FromHFConfig(m.HFConfig)
		if err != nil {
			return model.Config{}, false
		}
		v := reflect.ValueOf(&c).Elem()
		overlayConfig(v, reflect.ValueOf(m.Config))
		c.Pattern = m.Config.Pattern
		c.Defaults()
		return c, true
	}
	if m.Preset != "" {
		return model.FromPreset(m.Preset, m.Config)
	}
	c := m.Config
	c.Defaults()
	return c, true
}

// Validate reports an unknown preset or every invalid hyper-parameter.
func (m Model) Validate(p *Problems, path string) {
	if m.HFConfig != nil {
		if _, err := model.FromHFConfig(m.HFConfig); err != nil {
			p.Addf(Field(path, "hf_config"), "%s", err.Error())
			return
		}
	}
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

// overlayConfig sets the non-zero fields of ov on bv (inside embedded structs too).
func overlayConfig(bv, ov reflect.Value) {
	for i := 0; i < ov.NumField(); i++ {
		f := ov.Field(i)
		if ov.Type().Field(i).Anonymous && f.Kind() == reflect.Struct {
			overlayConfig(bv.Field(i), f)
			continue
		}
		if !f.IsZero() {
			bv.Field(i).Set(f)
		}
	}
}
