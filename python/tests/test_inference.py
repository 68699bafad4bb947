"""The inference scenario kind's quantization options through the Python API."""

import pytest

import eidolon


def serve(batch, **extra):
    spec = {"kind": "inference", "model": "llama2-70b", "gpu": "a100-80gb-sxm",
            "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": 2, "batch": batch,
            "prompt_tokens": 512, "output_tokens": 32, "dtype": "fp16", **extra}
    return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]


def test_weight_only_quantization_speeds_decode_not_prefill():
    # Notebook 04's quantization section: at batch 1 a decode step streams
    # the weights (int4 well under half the 16-bit TPOT, int8 between), the
    # prefill is compute-bound (TTFT within 1 %), and the freed memory
    # lets much longer prompts fit.
    s = {w: serve(1, weight_dtype=w) for w in ("auto", "int8", "int4")}
    assert s["int4"].tpot_s < 0.5 * s["auto"].tpot_s
    assert s["int4"].tpot_s < s["int8"].tpot_s < s["auto"].tpot_s
    assert s["int4"].ttft_s == pytest.approx(s["auto"].ttft_s, rel=0.01)
    assert s["int4"].longest_prompt_tokens > 4 * s["auto"].longest_prompt_tokens
    # At batch 64 the GEMMs near their compute bound: the gain shrinks.
    big = {w: serve(64, weight_dtype=w) for w in ("auto", "int4")}
    assert big["int4"].tpot_s / big["auto"].tpot_s > s["int4"].tpot_s / s["auto"].tpot_s


def test_fp8_kv_cache_and_weight_errors_name_fields():
    with pytest.raises(eidolon.SpecError, match="kv_cache_dtype"):
        serve(1, kv_cache_dtype="int4")
    with pytest.raises(eidolon.SpecError, match="weight_dtype"):
        serve(1, weight_dtype="fp16")


def test_fused_add_norm_shortens_both_phases_and_checks_its_type():
    # vLLM's fused_add_rms_norm: the residual add runs inside the next
    # RMSNorm, one vectorized kernel where two ran; memory is unchanged.
    plain, fused = serve(1), serve(1, fused_add_norm=True)
    assert fused.ttft_s < plain.ttft_s
    assert fused.tpot_s < plain.tpot_s
    assert fused.longest_prompt_tokens == plain.longest_prompt_tokens
    with pytest.raises(eidolon.SpecError, match="fused_add_norm"):
        serve(1, fused_add_norm="yes")


def test_custom_all_reduce_engine_rules():
    # A 500-token prompt of an 8,192-wide model all-reduces 8,192,000
    # bytes: vLLM's custom two-shot kernel (below 8 MiB), TensorRT-LLM's
    # NCCL (above its 8,000,000-byte workspace), so its prefill is slower;
    # 400 tokens (6,553,600 bytes) run two-shot under both rules.
    def ttft(prompt, engine):
        s = {"kind": "inference", "model": "llama3-70b", "gpu": "a100-80gb-sxm",
             "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": 8, "batch": 1,
             "prompt_tokens": prompt, "output_tokens": 2, "custom_all_reduce_engine": engine}
        return eidolon.run(s, progress=False).tables["summary"].to_pandas().ttft_s[0]
    assert ttft(500, "tensorrt_llm") > 1.03 * ttft(500, "vllm")
    assert ttft(400, "tensorrt_llm") == pytest.approx(ttft(400, "vllm"), rel=1e-9)
    with pytest.raises(eidolon.SpecError, match="custom_all_reduce_engine"):
        ttft(400, "nccl")


def test_decode_attention_kernel():
    # TensorRT-LLM's XQA kernel streams one long cache on a few dozen SMs
    # where flash-decoding's split fills them: a lone 20,000-token decode
    # is slower; its prefill is the same.
    def summary(kernel):
        s = {"kind": "inference", "model": "llama3-70b", "gpu": "a100-80gb-sxm",
             "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": 8, "batch": 1,
             "prompt_tokens": 20000, "output_tokens": 4, "decode_attention": kernel}
        return eidolon.run(s, progress=False).tables["summary"].to_pandas().iloc[0]
    flash, xqa = summary("flash_decoding"), summary("xqa")
    assert xqa.tpot_s > flash.tpot_s
    assert xqa.ttft_s == pytest.approx(flash.ttft_s, rel=1e-12)
    with pytest.raises(eidolon.SpecError, match="decode_attention"):
        summary("paged_attention")


def test_fp4_on_blackwell():
    # NVFP4 (dtype "fp4"): on a B200 its prefill is faster than FP8's (twice
    # the tensor rate, attention still 16-bit) and its decode streams 4.5-bit
    # weights; FP8 is faster than BF16 in turn. Parts without FP4 math,
    # training and weight-only quantization on top of it are spec errors
    # naming the field.
    def infer(dtype):
        spec = {"kind": "inference", "model": "llama3-70b", "gpu": "b200", "cluster": {"preset": "dgx-b200", "nodes": 1},
                "tp": 2, "batch": 16, "prompt_tokens": 2048, "output_tokens": 16, "dtype": dtype}
        return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]

    bf16, fp8, fp4 = infer("bf16"), infer("fp8"), infer("fp4")
    assert fp4.ttft_s < fp8.ttft_s < bf16.ttft_s
    assert fp4.tpot_s < fp8.tpot_s < bf16.tpot_s
    assert fp4.memory_peak_bytes < fp8.memory_peak_bytes
    paths = lambda spec: [p.path for p in eidolon.validate(spec)]
    assert paths({"kind": "inference", "model": "llama3-8b", "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1},
                  "batch": 1, "prompt_tokens": 8, "output_tokens": 2, "dtype": "fp4"}) == ["dtype"]
    assert paths({"kind": "inference", "model": "llama3-8b", "gpu": "b200", "cluster": {"preset": "dgx-b200", "nodes": 1},
                  "batch": 1, "prompt_tokens": 8, "output_tokens": 2, "dtype": "fp4", "weight_dtype": "int4"}) == ["weight_dtype"]
    assert paths({"kind": "training", "model": "llama3-8b", "gpu": "b200", "cluster": {"preset": "dgx-b200", "nodes": 1},
                  "parallel": {"dp": 8, "global_batch": 8}, "seq_len": 1024, "dtype": "fp4"}) == ["dtype"]
