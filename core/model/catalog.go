package model

// CatalogRow is one preset in the model zoo (eidolon.presets.models()).
type CatalogRow struct {
	Name   string `arrow:"name"`
	Family string `arrow:"family"`
	// Params counted from the hyper-parameters; PublishedParams as the source states.
	Params          int64   `arrow:"params"`
	PublishedParams float64 `arrow:"published_params"`
	// Layers (mixer blocks), hidden width, vocabulary.
	Layers int `arrow:"layers"`
	Hidden int `arrow:"hidden"`
	Vocab  int `arrow:"vocab"`
	// Attention (0 when the model has none).
	Heads     int `arrow:"heads"`
	KVHeads   int `arrow:"kv_heads"`
	HeadDim   int `arrow:"head_dim"`
	FFNHidden int `arrow:"ffn_hidden"`
	// SSM (0 when the model has none).
	SSM        string `arrow:"ssm"`
	DState     int    `arrow:"d_state"`
	DInner     int    `arrow:"d_inner"`
	DConv      int    `arrow:"d_conv"`
	DtRank     int    `arrow:"dt_rank"`
	SSMHeadDim int    `arrow:"ssm_head_dim"`
	NGroups    int    `arrow:"n_groups"`
	// Pattern of hybrids (M = SSM, A = attention, S = shared attention).
	Pattern string `arrow:"pattern"`
	// Local attention (0 and "" without it): the sliding window's keys,
	// the chunks' tokens, and which attention layers use them (S window,
	// C chunks, F full; cycled over the layers).
	SlidingWindow  int    `arrow:"sliding_window"`
	AttentionChunk int    `arrow:"attention_chunk"`
	WindowPattern  string `arrow:"window_pattern"`
	// Mixture of experts (0 for dense models): routed experts, top-k, the
	// parameters one token uses.
	Experts         int   `arrow:"experts"`
	ExpertsPerToken int   `arrow:"experts_per_token"`
	ActiveParams    int64 `arrow:"active_params"`
	// Per-token KV cache (within any local attention's window or chunk)
	// and per-sequence SSM state, in bf16.
	KVCacheBytesPerToken float64 `arrow:"kv_cache_bytes_per_token"`
	SSMStateBytesPerSeq  float64 `arrow:"ssm_state_bytes_per_seq"`
	Source               string  `arrow:"source"`
}

// Catalog lists the presets as rows.
func Catalog() []CatalogRow {
	ps := Presets()
	out := make([]CatalogRow, len(ps))
	for i, p := range ps {
		c := p.Config
		r := CatalogRow{
			Name: c.Name, Family: string(c.Family), Params: Params(c), PublishedParams: p.PublishedParams,
			Layers: c.Layers, Hidden: c.Hidden, Vocab: c.Vocab,
			Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, FFNHidden: c.FFNHidden,
			SSM: string(c.SSM), DState: c.DState, DConv: c.DConv, DtRank: c.DtRank,
			SSMHeadDim: c.SSMHeadDim, NGroups: c.NGroups,
			SlidingWindow: c.SlidingWindow, AttentionChunk: c.AttentionChunk, WindowPattern: c.WindowPattern,
			KVCacheBytesPerToken: KVCacheBytesPerToken(c, "bf16"),
			SSMStateBytesPerSeq:  SSMStateBytesPerSeq(c, "bf16"),
			Source:               p.Source,
			Experts:              c.Experts, ExpertsPerToken: c.ExpertsPerToken, ActiveParams: ActiveParams(c),
		}
		if c.SSM != "" {
			r.DInner = c.DInner()
		}
		if c.Family == Hybrid {
			r.Pattern = c.Pattern
		}
		out[i] = r
	}
	return out
}
