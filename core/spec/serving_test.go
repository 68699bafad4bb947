package spec

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The serving engine's batch defaults are vLLM V1's for its OpenAI server:
// the A100 80 GB is held to 2048 tokens and 256 sequences despite its
// memory; other GPUs of 70 GiB or more get 8192 and 1024; smaller ones the
// A100's. A budget or limit the spec gives is kept.
func TestServingBatchDefaults(t *testing.T) {
	for _, c := range []struct {
		gpu          string
		tokens, seqs int
	}{
		{"a100-80gb-sxm", 2048, 256},
		{"h100-sxm", 8192, 1024},
		{"h200", 8192, 1024},
		{"mi300x", 8192, 1024},
		{"rtx-a6000", 2048, 256},
		{"no-such-gpu", 2048, 256},
	} {
		s := Serving{Target: Target{GPU: GPU{Preset: c.gpu}}}
		s.Defaults()
		require.Equal(t, c.tokens, s.Engine.MaxNumBatchedTokens, c.gpu)
		require.Equal(t, c.seqs, s.Engine.MaxNumSeqs, c.gpu)
		require.Equal(t, c.tokens, s.Engine.ChunkTokens, c.gpu)
	}
	// A what-if part: its memory decides, and the device's name is its
	// preset's (a renamed A100 is still an A100 to vLLM).
	for _, c := range []struct {
		gpu    GPU
		tokens int
	}{
		{GPU{Preset: "a100-80gb-sxm", Name: "fast-ampere", Figures: map[string]float64{"clock_hz": 2e9}}, 2048},
		{GPU{Preset: "rtx-a6000", Figures: map[string]float64{"hbm_bytes": 96e9}}, 8192},
		{GPU{Preset: "h100-sxm", Figures: map[string]float64{"hbm_bytes": 40e9}}, 2048},
	} {
		s := Serving{Target: Target{GPU: c.gpu}}
		s.Defaults()
		require.Equal(t, c.tokens, s.Engine.MaxNumBatchedTokens, c.gpu.String())
	}
	s := Serving{Target: Target{GPU: GPU{Preset: "a100-80gb-sxm"}}, Engine: ServingEngine{MaxNumBatchedTokens: 8192, MaxNumSeqs: 64}}
	s.Defaults()
	require.Equal(t, 8192, s.Engine.MaxNumBatchedTokens)
	require.Equal(t, 64, s.Engine.MaxNumSeqs)
}

// A request length may be a bare number, as the inference kind's are: it
// decodes as that fixed length, round-trips through JSON as the object it
// stands for, and a bad number is a problem at the length's path.
func TestServingLengthsAcceptANumber(t *testing.T) {
	var w ServingWorkload
	require.NoError(t, Decode([]byte(`{"prompt_tokens":2048,"output_tokens":{"dist":"uniform","min_tokens":16,"max_tokens":300}}`), &w))
	require.Equal(t, Lengths{Dist: "fixed", Tokens: 2048}, w.PromptTokens)
	require.Equal(t, "uniform", w.OutputTokens.Dist)

	again, err := json.Marshal(w)
	require.NoError(t, err)
	var w2 ServingWorkload
	require.NoError(t, Decode(again, &w2))
	require.Equal(t, w, w2)

	for doc, want := range map[string]string{
		`{"prompt_tokens":1.5}`: "prompt_tokens.tokens: must be an integer",
		`{"prompt_tokens":"x"}`: "prompt_tokens: must be an object",
	} {
		require.ErrorContains(t, Decode([]byte(doc), &w), want, doc)
	}
	var p Problems
	w = ServingWorkload{}
	require.NoError(t, Decode([]byte(`{"output_tokens":-3}`), &w))
	w.OutputTokens.validate(&p, "workload.output_tokens")
	require.ErrorContains(t, p.Err(), "workload.output_tokens.tokens: must be in [1,")
}
