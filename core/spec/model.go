package spec

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"

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
	// decodeProblems are the type errors of the object form (paths relative
	// to the model), reported by Validate under the model's own path; the
	// well-typed fields are decoded, so the rest of the spec is too.
	decodeProblems []Problem
	// falses are the switches (tied_embeddings, fp8_block_scaled) the
	// object gives as false: a preset's or a config.json's true is
	// replaced by them, where a false in Config alone would read as unset.
	falses []string
}

// modelFields is Model without its JSON method, for strict decoding.
type modelFields Model

// UnmarshalJSON accepts a preset name or an object of hyper-parameters.
func (m *Model) UnmarshalJSON(data []byte) error {
	*m = Model{}
	var f modelFields
	object, probs, err := decodeNameOrObject(data, &m.Preset, &f)
	if err != nil || !object {
		return err
	}
	*m = Model(f)
	m.decodeProblems = probs
	if tree, err := parseTree(data); err == nil {
		obj, _ := tree.(map[string]any)
		for _, name := range configSwitches() {
			if v, ok := obj[name].(bool); ok && !v {
				m.falses = append(m.falses, name)
			}
		}
	}
	return nil
}

// configSwitches are the JSON names of model.Config's bool fields, sorted.
func configSwitches() []string {
	var out []string
	for name, f := range configJSONFields {
		if f.typ.Kind() == reflect.Bool {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// switchOff sets c's switches named in names to false.
func switchOff(c *model.Config, names []string) {
	for _, name := range names {
		reflect.ValueOf(c).Elem().FieldByIndex(configJSONFields[name].index).SetBool(false)
	}
}

// configJSONFields are model.Config's fields by JSON name.
var configJSONFields = structFields(reflect.TypeFor[model.Config]())

// MarshalJSON writes a bare preset as its name, anything else as an object.
func (m Model) MarshalJSON() ([]byte, error) {
	if m.Preset != "" && m.Config == (model.Config{}) && m.HFConfig == nil && len(m.falses) == 0 {
		return json.Marshal(m.Preset)
	}
	if len(m.falses) == 0 {
		return json.Marshal(modelFields(m))
	}
	js, err := json.Marshal(modelFields(m))
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(js, &obj); err != nil {
		return nil, err
	}
	for _, name := range m.falses {
		obj[name] = false
	}
	return json.Marshal(obj)
}

// Resolve returns the architecture: the preset with replacements, or the
// explicit hyper-parameters with the family's defaults.
//
// It is false, too, when a hyper-parameter is out of bounds (modelBounds)
// or did not decode: Validate reports those; no other caller may build a
// model from them.
func (m Model) Resolve() (model.Config, bool) {
	if len(m.decodeProblems) > 0 || !m.inBounds() {
		return model.Config{}, false
	}
	if m.HFConfig != nil {
		c, err := model.FromHFConfig(m.HFConfig)
		if err != nil || !configInBounds(&c) {
			return model.Config{}, false
		}
		v := reflect.ValueOf(&c).Elem()
		overlayConfig(v, reflect.ValueOf(m.Config))
		switchOff(&c, m.falses)
		c.Pattern = m.Config.Pattern
		c.Defaults()
		return c, true
	}
	if m.Preset != "" {
		c, ok := model.FromPreset(m.Preset, m.Config)
		switchOff(&c, m.falses)
		return c, ok
	}
	c := m.Config
	c.Defaults()
	return c, true
}

// modelBounds are the largest values the hyper-parameters may take, checked
// on the fields as written (before a preset or the defaults fill them, so a
// negative or huge value never reaches model.FromPreset). They are about 100
// times the largest published models (GPT-3 175B: 96 layers, hidden 12,288;
// LLaMA-3 405B: 126 layers, hidden 16,384, ffn 53,248, vocab 128,256), and
// keep every operator shape product within int64 and float64 exactness.
var modelBounds = []struct {
	field string
	value func(c *model.Config) int
	max   int
}{
	{"layers", func(c *model.Config) int { return c.Layers }, model.MaxLayers},
	{"hidden", func(c *model.Config) int { return c.Hidden }, 1 << 20},
	{"vocab", func(c *model.Config) int { return c.Vocab }, 1 << 24},
	{"heads", func(c *model.Config) int { return c.Heads }, 1 << 14},
	{"kv_heads", func(c *model.Config) int { return c.KVHeads }, 1 << 14},
	{"head_dim", func(c *model.Config) int { return c.HeadDim }, 1 << 16},
	{"ffn_hidden", func(c *model.Config) int { return c.FFNHidden }, 1 << 22},
	{"positions", func(c *model.Config) int { return c.Positions }, 1 << 26},
	{"sliding_window", func(c *model.Config) int { return c.SlidingWindow }, 1 << 26},
	{"d_state", func(c *model.Config) int { return c.DState }, 1 << 16},
	{"d_conv", func(c *model.Config) int { return c.DConv }, 1 << 10},
	{"expand", func(c *model.Config) int { return c.Expand }, 64},
	{"dt_rank", func(c *model.Config) int { return c.DtRank }, 1 << 20},
	{"ssm_head_dim", func(c *model.Config) int { return c.SSMHeadDim }, 1 << 16},
	{"n_groups", func(c *model.Config) int { return c.NGroups }, 1 << 14},
	{"chunk_size", func(c *model.Config) int { return c.ChunkSize }, 1 << 20},
	// Mixture-of-experts and latent-attention sizes, bounded as the dense
	// ones are (a routing draws and keeps a count per expert: a billion
	// experts took the machine's 24 GB). 2^20 experts is the most a
	// published model has (PEER, He 2024, "Mixture of A Million Experts").
	{"experts", func(c *model.Config) int { return c.Experts }, 1 << 20},
	{"experts_per_token", func(c *model.Config) int { return c.ExpertsPerToken }, 1 << 14},
	{"shared_experts", func(c *model.Config) int { return c.SharedExperts }, 1 << 10},
	{"expert_ffn_hidden", func(c *model.Config) int { return c.ExpertFFNHidden }, 1 << 22},
	{"shared_expert_ffn_hidden", func(c *model.Config) int { return c.SharedExpertFFNHidden }, 1 << 22},
	{"moe_every", func(c *model.Config) int { return c.MoEEvery }, 1 << 14},
	{"q_lora_rank", func(c *model.Config) int { return c.QLoRARank }, 1 << 20},
	{"kv_lora_rank", func(c *model.Config) int { return c.KVLoRARank }, 1 << 20},
	{"qk_rope_head_dim", func(c *model.Config) int { return c.QKRopeHeadDim }, 1 << 16},
	{"qk_nope_head_dim", func(c *model.Config) int { return c.QKNopeHeadDim }, 1 << 16},
	{"v_head_dim", func(c *model.Config) int { return c.VHeadDim }, 1 << 16},
}

func (m Model) inBounds() bool { return configInBounds(&m.Config) }

func configInBounds(c *model.Config) bool {
	for _, b := range modelBounds {
		if v := b.value(c); v < 0 || v > b.max {
			return false
		}
	}
	return len(c.Pattern) <= model.MaxLayers
}

// Validate reports an unknown preset or every invalid hyper-parameter.
func (m Model) Validate(p *Problems, path string) {
	if len(m.decodeProblems) > 0 {
		for _, dp := range m.decodeProblems {
			at := path
			if dp.Path != "" {
				at = Field(path, dp.Path)
			}
			dp.Path = at
			p.Add(dp)
		}
		return
	}
	n := p.Len()
	for _, b := range modelBounds {
		if v := b.value(&m.Config); v < 0 || v > b.max {
			p.AddAllowed(Field(path, b.field), "[1, "+strconv.Itoa(b.max)+"]", "must be in [1, %d], got %d", b.max, v)
		}
	}
	if len(m.Pattern) > model.MaxLayers {
		p.Addf(Field(path, "pattern"), "has %d letters; at most %d (one per layer)", len(m.Pattern), model.MaxLayers)
	}
	if p.Len() > n {
		return
	}
	if m.HFConfig != nil {
		c, err := model.FromHFConfig(m.HFConfig)
		var keys model.HFConfigErrors
		switch {
		case errors.As(err, &keys):
			for _, k := range keys {
				p.Addf(Field(Field(path, "hf_config"), k.Key), "%s", k.Message)
			}
			return
		case err != nil:
			p.Addf(Field(path, "hf_config"), "%s", err.Error())
			return
		}
		for _, b := range modelBounds {
			if v := b.value(&c); v < 0 || v > b.max {
				p.Addf(Field(path, "hf_config"), "%s must be in [1, %d], got %d", b.field, b.max, v)
			}
		}
		if p.Len() > n {
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
		p.Addf(Field(path, fp.Path), "%s", fp.Message)
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
