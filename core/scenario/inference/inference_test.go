package inference_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func run(t *testing.T, extra string) scenario.Result {
	js := fmt.Sprintf(`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1}%s}`, extra)
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err, js)
	return res
}

func table[T any](res scenario.Result, name string) []T {
	for _, tb := range res.Tables {
		if tb.Name == name {
			return tb.Rows.([]T)
		}
	}
	return nil
}

// One request group is the same run as the uniform batch fields.
func TestOneGroupIsTheUniformBatch(t *testing.T) {
	for _, layout := range []string{`"tp":2`, `"tp":2,"pp":2`} {
		a := table[inference.SummaryRow](run(t, `,`+layout+`,"batch":3,"prompt_tokens":100,"output_tokens":12`), "summary")[0]
		b := table[inference.SummaryRow](run(t, `,`+layout+`,"requests":[{"count":3,"prompt_tokens":100,"output_tokens":12}]`), "summary")[0]
		assert.Equal(t, a, b, layout)
	}
}

// Two groups: the short outputs finish first; the KV cache holds every
// request's prompt and output: 2 · 32 layers · 32 heads · 128 · 2 B per token.
func TestRequestGroups(t *testing.T) {
	for _, layout := range []string{`"tp":1`, `"tp":2,"pp":2,"replicas":2`} {
		res := run(t, `,`+layout+`,"requests":[{"count":2,"prompt_tokens":300,"output_tokens":8},{"count":1,"prompt_tokens":50,"output_tokens":20}]`)
		s := table[inference.SummaryRow](res, "summary")[0]
		rq := table[inference.RequestRow](res, "requests")
		require.Len(t, rq, 2)
		assert.Less(t, rq[0].E2ES, rq[1].E2ES, "8 tokens end before 20")
		assert.Less(t, rq[0].TTFTS, rq[1].TTFTS, "group 0 is prefilled first")
		assert.Equal(t, s.E2ES, rq[1].E2ES)
		assert.InEpsilon(t, (2*rq[0].TTFTS+rq[1].TTFTS)/3, s.TTFTS, 1e-12)
		for _, m := range table[job.MemoryRow](res, "memory") {
			if m.Category == "kv_cache" && m.Stage == 0 {
				perToken := 2.0 * 32 * 32 * 128 * 2
				if layout != `"tp":1` {
					perToken /= 4 // half the layers, half the heads
				}
				assert.InEpsilon(t, perToken*(2*308+70), m.Bytes, 1e-12, layout)
			}
		}
	}
}

func TestRequestErrorsNameFields(t *testing.T) {
	js := `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"requests":[{"count":0,"prompt_tokens":5,"output_tokens":1}]}`
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "requests[0].count")
}

// memoryOf is a run's memory table by category (stage 0).
func memoryOf(t *testing.T, extra string) (inference.SummaryRow, map[string]float64) {
	res := run(t, extra)
	m := map[string]float64{}
	for _, r := range table[job.MemoryRow](res, "memory") {
		if r.Stage == 0 {
			m[r.Category] = r.Bytes
		}
	}
	return table[inference.SummaryRow](res, "summary")[0], m
}

// kv_cache_dtype "fp8" stores keys and values in one byte: the KV cache
// halves exactly (2 · 32 layers · 32 heads · 128 · 1 B per token of the
// 4 × (2,000 + 64) tokens held), the weights do not move, and decoding at
// a long context, whose attention reads the cache, gets faster.
func TestFP8KVCacheHalvesTheCache(t *testing.T) {
	const w = `,"batch":4,"prompt_tokens":2000,"output_tokens":64`
	auto, am := memoryOf(t, w)
	fp8, fm := memoryOf(t, w+`,"kv_cache_dtype":"fp8"`)
	tokens := 4.0 * (2000 + 64)
	assert.InDelta(t, 2*32*32*128*2*tokens, am["kv_cache"], 1)
	assert.InDelta(t, 2*32*32*128*1*tokens, fm["kv_cache"], 1)
	assert.Equal(t, am["weights"], fm["weights"])
	assert.Less(t, fp8.TPOTS, auto.TPOTS)
	explicit, em := memoryOf(t, w+`,"kv_cache_dtype":"bf16"`)
	assert.Equal(t, auto, explicit, "auto is the activations' type")
	assert.Equal(t, am, em)
}

// An 8-bit run keeps its weights in 8 bits (vLLM's FP8 checkpoints) and its
// KV cache in 16 unless told otherwise.
func TestFP8WeightsAreOneByte(t *testing.T) {
	const w = `,"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"batch":2,"prompt_tokens":512,"output_tokens":8`
	_, bf := memoryOf(t, w)
	_, f8 := memoryOf(t, w+`,"dtype":"fp8"`)
	assert.InEpsilon(t, bf["weights"]/2, f8["weights"], 1e-12)
	assert.Equal(t, bf["kv_cache"], f8["kv_cache"])
}

// decode_attention "xqa" (TensorRT-LLM's kernel for grouped-query
// attention) keeps one sequence's long cache on a few blocks where
// flash-decoding fills the SMs: Llama-3-8B's batch-1 decode over a
// 16,000-token cache is slower, its prefill and memory the same. Llama-2-7B,
// multi-head, runs TensorRT-LLM's masked-MHA kernel, split as flash-decoding.
func TestXQADecodeSlowerForOneLongSequence(t *testing.T) {
	// run's "model" given again: encoding/json keeps the last.
	const w = `,"model":"llama3-8b","batch":1,"prompt_tokens":16000,"output_tokens":16`
	flash, fm := memoryOf(t, w)
	xqa, xm := memoryOf(t, w+`,"decode_attention":"xqa"`)
	assert.Greater(t, xqa.TPOTS, flash.TPOTS)
	assert.Equal(t, flash.TTFTS, xqa.TTFTS)
	assert.Equal(t, fm, xm)
	const mha = `,"batch":1,"prompt_tokens":16000,"output_tokens":16`
	f, _ := memoryOf(t, mha)
	x, _ := memoryOf(t, mha+`,"decode_attention":"xqa"`)
	assert.Equal(t, f, x)
}

func TestDecodeAttentionErrorNamesField(t *testing.T) {
	js := `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"decode_attention":"paged"}`
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decode_attention")
}

func TestKVCacheDTypeErrorNamesField(t *testing.T) {
	js := `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"kv_cache_dtype":"int4"}`
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kv_cache_dtype")
}

// weight_dtype "int4" (GPTQ/AWQ weights, vLLM's Marlin kernels): the
// linear layers' weights take half a byte and a 16-bit scale per 128 (the
// embedding and the output layer stay 16-bit), and a batch-1 decode, which
// streams them, runs in well under half the time; "int8" in between.
func TestWeightOnlyQuantization(t *testing.T) {
	const w = `,"batch":1,"prompt_tokens":256,"output_tokens":32`
	bf, bm := memoryOf(t, w)
	i4, m4 := memoryOf(t, w+`,"weight_dtype":"int4"`)
	i8, _ := memoryOf(t, w+`,"weight_dtype":"int8"`)
	linear := 32 * 4096 * (12288 + 4096 + 22016 + 11008.0)
	assert.InEpsilon(t, bm["weights"]-linear*2+linear*(0.5+2.0/128), m4["weights"], 1e-9)
	assert.Equal(t, bm["kv_cache"], m4["kv_cache"])
	assert.Less(t, i4.TPOTS, 0.5*bf.TPOTS)
	assert.Less(t, i4.TPOTS, i8.TPOTS)
	assert.Less(t, i8.TPOTS, bf.TPOTS)
	for _, js := range []string{
		`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"weight_dtype":"int2"}`,
		`{"kind":"inference","model":"llama2-7b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"dtype":"fp8","weight_dtype":"int8"}`,
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		require.Error(t, err, js)
		assert.Contains(t, err.Error(), "weight_dtype")
	}
}

// A host cost that only training pays (a backward operator, Megatron-Core's
// MoE module code) is refused on an inference run, not ignored; the
// forward operator's and the NCCL call's are read (the prefill runs
// eagerly under cuda_graphs).
func TestHostCostsAnInferenceRunDoesNotPay(t *testing.T) {
	run := func(host string) error {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"inference","model":{"preset":"llama2-7b","layers":2},
			"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"tp":2,"prompt_tokens":128,"output_tokens":4,"host":`+host+`}`))
		return err
	}
	for _, f := range []string{"backward_op_s", "moe_op_s"} {
		require.ErrorContains(t, run(`{"`+f+`":1e-4}`), "host."+f+": applies to training")
	}
	require.NoError(t, run(`{"forward_op_s":1e-4,"collective_s":1e-4}`))
}
