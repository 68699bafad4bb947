package model

import "reflect"

// Presets returns every model preset in a fixed order, defaulted. Each cites
// the paper or model card its hyper-parameters come from; PublishedParams is
// the parameter count that source states (tests check the count against it).
func Presets() []Preset {
	ps := rawPresets()
	for i := range ps {
		ps[i].Config.Defaults()
	}
	return ps
}

// rawPresets are the presets as published, before defaults.
func rawPresets() []Preset {
	ps := densePresets()
	for _, m := range MoEPresets() {
		ps = append(ps, m.Preset)
	}
	return ps
}

func densePresets() []Preset {
	return []Preset{
		// Megatron GPT configurations: Narayanan et al. 2021 (arXiv 2104.04473)
		// Table 1 and Korthikanti et al. 2022 (arXiv 2205.05198) Table 3;
		// vocabulary 51,200, sequence 2,048, tied embeddings.
		// Table 1 rounds its counts to 0.1B; for the two smallest that is
		// more than 1 %, so theirs are the paper's own count, §5.1's
		// P = 12lh²(1 + 13/12h + (V + s)/12lh).
		{gpt("gpt-1.7b", 24, 2304, 24), 1.652e9, "Narayanan et al. 2021, Table 1 (1.7B; §5.1's formula: 1.652B)"},
		{gpt("gpt-3.6b", 30, 3072, 32), 3.562e9, "Narayanan et al. 2021, Table 1 (3.6B; §5.1's formula: 3.562B)"},
		{gpt("gpt-7.5b", 36, 4096, 32), 7.5e9, "Narayanan et al. 2021, Table 1 (7.5B)"},
		{gpt("gpt-18.4b", 40, 6144, 48), 18.4e9, "Narayanan et al. 2021, Table 1 (18.4B)"},
		{gpt("gpt-22b", 48, 6144, 64), 22e9, "Korthikanti et al. 2022, Table 3 (22B)"},
		{gpt("gpt-39.1b", 48, 8192, 64), 39.1e9, "Narayanan et al. 2021, Table 1 (39.1B)"},
		{gpt("gpt-76.1b", 60, 10240, 80), 76.1e9, "Narayanan et al. 2021, Table 1 (76.1B)"},
		{gpt("gpt-145.6b", 80, 12288, 96), 145.6e9, "Narayanan et al. 2021, Table 1 (145.6B)"},
		{gpt("gpt3-175b", 96, 12288, 96), 174.6e9, "Narayanan et al. 2021, Table 1 (174.6B); Brown et al. 2020"},
		{gpt("gpt-310.1b", 96, 16384, 128), 310.1e9, "Narayanan et al. 2021, Table 1 (310.1B)"},
		{gpt("gpt-530b", 105, 20480, 128), 529.6e9, "Narayanan et al. 2021, Table 1 (529.6B)"},
		{gpt("gpt-1t", 128, 25600, 160), 1008.0e9, "Narayanan et al. 2021, Table 1 (1008.0B)"},
		// Llama 2 (Touvron et al. 2023, arXiv 2307.09288; Hugging Face
		// meta-llama/Llama-2-*-hf config.json): vocab 32,000, untied.
		{llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000), 6_738_415_616, "meta-llama/Llama-2-7b-hf model card (6.74B)"},
		{llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000), 13_015_864_320, "meta-llama/Llama-2-13b-hf model card (13.0B)"},
		{llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000), 68_976_648_192, "meta-llama/Llama-2-70b-hf model card (69.0B)"},
		// Llama 3 (Dubey et al. 2024, arXiv 2407.21783; meta-llama/Meta-Llama-3-*
		// config.json): vocab 128,256, 8 KV heads, untied.
		{llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256), 8_030_261_248, "meta-llama/Meta-Llama-3-8B model card (8.03B)"},
		{llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256), 70_553_706_496, "meta-llama/Meta-Llama-3-70B model card (70.6B)"},
		// Llama 3.1 405B (Dubey et al. 2024, Table 3: 126 layers, model
		// dimension 16,384, FFN 53,248, 128 heads, 8 KV heads;
		// meta-llama/Llama-3.1-405B config.json: vocab 128,256, untied).
		{llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256), 405.85e9, "meta-llama/Llama-3.1-405B model card (405.85B)"},
		// Qwen3 dense (Qwen/Qwen3-8B and Qwen/Qwen3-32B config.json: head_dim
		// 128, 8 KV heads, vocab 151,936, untied, each head's queries and
		// keys RMS-normalized: qk_norm).
		{qwen3("qwen3-8b", 36, 4096, 32, 12288), 8.2e9, "Qwen/Qwen3-8B config.json and model card (8.2B)"},
		{qwen3("qwen3-32b", 64, 5120, 64, 25600), 32.8e9, "Qwen/Qwen3-32B config.json and model card (32.8B)"},
		// Mamba-1 (Gu & Dao 2023, arXiv 2312.00752, Table 3; state-spaces/mamba-*
		// config.json): d_state 16, expand 2, d_conv 4, vocab 50,277 padded to a
		// multiple of 8 (50,280), tied embeddings.
		{mamba("mamba-130m", 24, 768), 129e6, "state-spaces/mamba-130m model card (129M)"},
		{mamba("mamba-370m", 48, 1024), 372e6, "state-spaces/mamba-370m model card (372M)"},
		{mamba("mamba-790m", 48, 1536), 793e6, "state-spaces/mamba-790m model card (793M)"},
		{mamba("mamba-1.4b", 48, 2048), 1.37e9, "state-spaces/mamba-1.4b model card (1.37B)"},
		{mamba("mamba-2.8b", 64, 2560), 2.77e9, "state-spaces/mamba-2.8b model card (2.77B)"},
		// Mamba-2 (Dao & Gu 2024, arXiv 2405.21060; state-spaces/mamba2-2.7b
		// config.json): d_state 128, head dim 64, 1 group, chunk 256, vocab
		// padded to a multiple of 16 (50,288), tied.
		{Config{Name: "mamba2-2.7b", Family: Mamba2, Layers: 64, Hidden: 2560, Vocab: 50288, TiedEmbeddings: true}, 2.7e9, "state-spaces/mamba2-2.7b model card (2.7B)"},
		// Falcon Mamba 7B (Zuo et al. 2024, arXiv 2410.05355; tiiuae/falcon-mamba-7b
		// config.json): 64 Mamba-1 blocks, d_model 4,096, d_state 16, dt_rank
		// 256, vocab 65,024, untied.
		{Config{Name: "falcon-mamba-7b", Family: Mamba, Layers: 64, Hidden: 4096, Vocab: 65024, DtRank: 256}, 7.27e9, "tiiuae/falcon-mamba-7b model card (7.27B)"},
		// Zamba 7B (Glorioso et al. 2024, arXiv 2405.16712; Zyphra/Zamba-7B-v1,
		// Hugging Face ZambaConfig): 76 Mamba blocks, d_model 3,712, one shared
		// attention+MLP block (16 heads of 464 over the 2·d_model concatenation,
		// MLP 14,848) invoked 13 times, vocab 32,000, tied.
		{Config{Name: "zamba-7b", Family: Hybrid, SSM: Mamba, Layers: 76, Hidden: 3712, Vocab: 32000,
			TiedEmbeddings: true, Heads: 16, KVHeads: 16, HeadDim: 464, FFNHidden: 14848,
			Pattern: ZambaPattern(76, 6, 4)}, 7.23e9, "Zyphra/Zamba-7B-v1 model card (7.23B)"},
	}
}

// Preset is a named configuration with its published parameter count.
type Preset struct {
	Config          Config
	PublishedParams float64
	Source          string
}

func gpt(name string, layers, hidden, heads int) Config {
	return Config{Name: name, Family: GPT, Layers: layers, Hidden: hidden, Heads: heads,
		Vocab: 51200, Positions: 2048, TiedEmbeddings: true}
}

func llama(name string, layers, hidden, heads, kvHeads, ffn, vocab int) Config {
	return Config{Name: name, Family: LLaMA, Layers: layers, Hidden: hidden, Heads: heads,
		KVHeads: kvHeads, FFNHidden: ffn, Vocab: vocab}
}

// qwen3 is a dense Qwen3: LLaMA's block with 8 KV heads of 128, QK norm
// and Qwen's vocabulary.
func qwen3(name string, layers, hidden, heads, ffn int) Config {
	c := llama(name, layers, hidden, heads, 8, ffn, 151936)
	c.HeadDim, c.QKNorm = 128, true
	return c
}

func mamba(name string, layers, hidden int) Config {
	return Config{Name: name, Family: Mamba, Layers: layers, Hidden: hidden, Vocab: 50280, TiedEmbeddings: true}
}

// overlay sets the non-zero fields of ov on bv, field by field inside
// embedded structs (MoE).
func overlay(bv, ov reflect.Value) {
	for i := 0; i < ov.NumField(); i++ {
		f := ov.Field(i)
		if ov.Type().Field(i).Anonymous && f.Kind() == reflect.Struct {
			overlay(bv.Field(i), f)
			continue
		}
		if !f.IsZero() {
			bv.Field(i).Set(f)
		}
	}
}

// ByName returns the preset configuration with this name.
func ByName(name string) (Config, bool) {
	for _, p := range Presets() {
		if p.Config.Name == name {
			return p.Config, true
		}
	}
	return Config{}, false
}

// Names lists the preset names in order.
func Names() []string {
	ps := Presets()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Config.Name
	}
	return out
}

// FromPreset starts from the named preset's published hyper-parameters,
// replaces those that over sets (non-zero fields; a bool can only be set to
// true), and fills the remaining defaults, so {"preset": "llama2-7b",
// "layers": 2} is a two-layer LLaMA-2-7B. The pattern of a GPT, LLaMA or
// Mamba preset follows an overridden layer count.
func FromPreset(name string, over Config) (Config, bool) {
	var base Config
	found := false
	for _, p := range rawPresets() {
		if p.Config.Name == name {
			base, found = p.Config, true
		}
	}
	if !found {
		return Config{}, false
	}
	bv := reflect.ValueOf(&base).Elem()
	ov := reflect.ValueOf(over)
	overlay(bv, ov)
	if over.Layers != 0 && over.Pattern == "" && base.Family != Hybrid {
		base.Pattern = ""
	}
	base.Defaults()
	return base, true
}
