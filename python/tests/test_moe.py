"""Mixture-of-experts models from Python: Hugging Face configs, EP, routing tables."""

import json

import pyarrow as pa
import pytest

import eidolon
from eidolon.models import expert_loads, from_hf_config

MIXTRAL_HF = {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
              "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
              "rope_scaling": None, "quantization_config": {"quant_method": "fp8"}}


def step(model, **extra):
    spec = {"kind": "training", "model": model, "gpu": "h100-sxm",
            "cluster": {"preset": "dgx-h100", "nodes": 1},
            "parallel": {"dp": 8, "ep": 8, "global_batch": 8}, "seq_len": 512, **extra}
    return eidolon.run(spec, progress=False)


def test_hf_config_matches_preset(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(MIXTRAL_HF))
    a = step(from_hf_config(p, layers=2)).to_pandas("summary").iloc[0]
    b = step({"preset": "mixtral-8x7b", "layers": 2}).to_pandas("summary").iloc[0]
    assert a.step_time_s == pytest.approx(b.step_time_s)
    assert a.memory_peak_bytes == pytest.approx(b.memory_peak_bytes)


DEEPSEEK_V3_HF = {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168,
                  "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
                  "vocab_size": 129280, "n_routed_experts": 256, "num_experts_per_tok": 8,
                  "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3,
                  "scoring_func": "sigmoid", "q_lora_rank": 1536, "kv_lora_rank": 512,
                  "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
                  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                                          "quant_method": "fp8", "weight_block_size": [128, 128]}}


def test_hf_config_keeps_block_scaled_fp8():
    # DeepSeek-V3's FP8 checkpoint scales its weights per 128×128 block: its
    # FP8 prefill runs block-scaled GEMMs (promoting every 128 elements) as
    # the preset does, and slower than the same model with per-tensor scales.
    model = from_hf_config(DEEPSEEK_V3_HF, layers=4)
    assert model["hf_config"]["quantization_config"] == {"quant_method": "fp8", "weight_block_size": [128, 128]}

    def ttft(m):
        spec = {"kind": "inference", "model": m, "gpu": "h800", "cluster": {"preset": "dgx-h800", "nodes": 1},
                "replicas": 8, "ep": 8, "batch": 2, "prompt_tokens": 1024, "output_tokens": 1, "dtype": "fp8"}
        return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0].ttft_s

    block = ttft(model)
    assert block == pytest.approx(ttft({"preset": "deepseek-v3", "layers": 4}))
    per_tensor = dict(DEEPSEEK_V3_HF, quantization_config={"quant_method": "fp8"})
    assert ttft(from_hf_config(per_tensor, layers=4)) < block


def test_bad_hf_config_is_a_spec_error():
    with pytest.raises(eidolon.SpecError) as e:
        step(from_hf_config({"model_type": "mixtral", "hidden_size": 4096}))
    assert "model.hf_config" in str(e.value)
    with pytest.raises(eidolon.SpecError, match="hf_config: a Hugging Face config needs a 'model_type'"):
        from_hf_config({"hidden_size": 1})
    with pytest.raises(eidolon.SpecError, match="hf_config: cannot read a config.json"):
        from_hf_config("/nonexistent/config.json")
    with pytest.raises(eidolon.SpecError, match="hf_config: cannot read a config.json"):
        from_hf_config('{"model_type": ')
    with pytest.raises(eidolon.SpecError, match="got int"):
        from_hf_config(3)


def test_hf_config_object_reads_through_to_dict():
    class PretrainedConfig:  # what transformers.AutoConfig.from_pretrained returns, as far as this reads it
        def to_dict(self):
            return dict(MIXTRAL_HF)

    assert from_hf_config(PretrainedConfig(), layers=2) == from_hf_config(MIXTRAL_HF, layers=2)


def test_load_table_skews_the_step():
    loads = expert_loads(pa.table({"expert": list(range(8)), "load": [8, 1, 1, 1, 1, 1, 1, 1]}))
    model = {"preset": "mixtral-8x7b", "layers": 2}
    flat = step(model).to_pandas("summary").iloc[0]
    hot = step(model, routing={"distribution": "table", "loads": loads, "seed": 1})
    t = hot.to_pandas("timeline")
    assert set(t["stream"]) >= {"compute", "ep"}
    assert hot.to_pandas("summary").iloc[0].step_time_s > flat.step_time_s


def test_ep_must_divide_experts():
    with pytest.raises(eidolon.SpecError) as e:
        eidolon.run({"kind": "training", "model": {"preset": "mixtral-8x7b", "layers": 2}, "gpu": "h100-sxm",
                     "cluster": {"preset": "dgx-h100", "nodes": 2}, "parallel": {"dp": 16, "ep": 16}}, progress=False)
    assert "parallel.ep" in str(e.value)


def search_mixtral(**extra):
    return eidolon.search_parallel({"preset": "mixtral-8x7b", "layers": 2}, "dgx-h100", 8, gpu="h100-sxm",
                                   seq_len=1024, tp=[1, 2], pp=[1], micro_batch=[1], zero=[1], recompute=["full"],
                                   keep=0, progress=False, **extra).to_pandas()


def test_search_enumerates_expert_tp():
    t = search_mixtral()
    assert t["expert_tp"].dtype == "int64"
    sim = t[t.status == "simulated"].set_index(["tp", "ep", "expert_tp"])
    # at tp 2 both expert TPs run, with different step times; at tp 1 only expert TP 1
    for ep in (2, 4):
        assert sim.loc[(2, ep, 1), "step_time_s"] != sim.loc[(2, ep, 2), "step_time_s"]
    assert set(t[t.tp == 1]["expert_tp"]) == {1}
    only = search_mixtral(ep=[4], expert_tp=[1])
    assert set(zip(only.tp, only.ep, only.expert_tp)) == {(1, 4, 1), (2, 4, 1)}


def test_search_bad_expert_tp():
    with pytest.raises(eidolon.SpecError) as e:
        search_mixtral(expert_tp=[1, 4])
    assert [p.path for p in e.value.problems] == ["expert_tp[1]"]


def test_pipeline_layout_lightens_the_last_stage():
    # Notebook 09's small layout section: DeepSeek-V3's last stage carries
    # the output head and the MTP module, so evenly split it sets the pace;
    # a layout giving it only the MTP module and the loss shortens the step.
    spec = {"kind": "training", "model": {"preset": "deepseek-v3", "layers": 8, "mtp_layers": 1}, "gpu": "h800",
            "cluster": {"preset": "dgx-h800", "nodes": 4}, "seq_len": 2048, "dtype": "fp8",
            "parallel": {"pp": 4, "dp": 8, "ep": 8, "global_batch": 64, "zero": 1, "recompute": "full"},
            "timeline_ranks": [-1]}

    def run(layout=None):
        par = dict(spec["parallel"])
        if layout:
            par["pipeline_model_parallel_layout"] = layout
        r = eidolon.run({**spec, "parallel": par}, progress=False)
        return r.to_pandas("summary").iloc[0], r.to_pandas("ranks").groupby("stage").compute_s.max()

    even, even_stages = run()
    light, light_stages = run("Ett|ttt|ttt|mL")
    assert even_stages.idxmax() == 3
    assert light_stages.iloc[3] < even_stages.iloc[3]
    assert light.step_time_s < even.step_time_s
    with pytest.raises(eidolon.SpecError) as e:
        run("Ett|ttt|tt|mL")
    assert "parallel.pipeline_model_parallel_layout" in str(e.value)
    assert "7 transformer layers" in str(e.value)


def test_experts_whole_per_gpu_story():
    # Notebook 09's inference section at its small default: whole experts
    # per GPU slow Mixtral's batch-1 decode and speed up Qwen3-30B-A3B's
    # prefill of 128 sequences.
    def run(preset, batch, whole):
        spec = {"kind": "inference", "model": {"preset": preset, "layers": 8}, "gpu": "h100-sxm",
                "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 8, "batch": batch,
                "prompt_tokens": 512, "output_tokens": 16, "enable_expert_parallel": whole}
        return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]

    assert run("mixtral-8x7b", 1, True).tpot_s > 1.5 * run("mixtral-8x7b", 1, False).tpot_s
    assert run("qwen3-30b-a3b", 128, True).ttft_s < 0.95 * run("qwen3-30b-a3b", 128, False).ttft_s
    with pytest.raises(eidolon.SpecError) as e:
        eidolon.run({"kind": "inference", "model": "llama3-8b", "gpu": "h100-sxm",
                     "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 8, "enable_expert_parallel": True},
                    progress=False)
    assert "enable_expert_parallel" in str(e.value)


def wide_prefill(**extra):
    # Eight layers: three dense, five MoE. With one MoE layer (four) the
    # overlap has little to hide and its MoE layer computes on the SMs
    # DeepEP's kernels leave, so it loses (as SGLang's would).
    spec = {"kind": "inference", "model": {"preset": "deepseek-v3", "layers": 8}, "gpu": "h800",
            "cluster": {"preset": "dgx-h800", "nodes": 2}, "replicas": 16, "ep": 16, "hierarchical_a2a": True,
            "batch": 8, "prompt_tokens": 1024, "output_tokens": 1, "dtype": "fp8", **extra}
    return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]


def test_two_batch_overlap_hides_the_all_to_alls():
    plain, tbo = wide_prefill(), wide_prefill(two_batch_overlap=True)
    assert tbo.ttft_s < plain.ttft_s
    with pytest.raises(eidolon.SpecError) as e:
        wide_prefill(ep=1, two_batch_overlap=True)
    assert "two_batch_overlap" in str(e.value)


def test_redundant_experts_let_ep_72_divide():
    spec = {"kind": "inference", "model": {"preset": "deepseek-v3", "layers": 4}, "gpu": "h100-sxm",
            "cluster": {"preset": "dgx-h100", "nodes": 9}, "replicas": 72, "ep": 72,
            "batch": 16, "prompt_tokens": 256, "output_tokens": 4, "dtype": "fp8"}
    with pytest.raises(eidolon.SpecError) as e:
        eidolon.run(spec, progress=False)
    assert "ep" in str(e.value)
    s = eidolon.run({**spec, "redundant_experts": 32}, progress=False).to_pandas("summary").iloc[0]
    assert s.tpot_s > 0


def test_decode_instance_holds_no_prefill():
    # SGLang's wide-EP decode nodes receive every cache from the prefill
    # nodes: decode_only runs the same decode steps from time 0, with a
    # decode step's activations in place of the prefill's.
    spec = {"kind": "inference", "model": {"preset": "deepseek-v3", "layers": 4}, "gpu": "h100-sxm",
            "cluster": {"preset": "dgx-h100", "nodes": 2}, "replicas": 16, "ep": 16, "low_latency_a2a": True,
            "batch": 64, "prompt_tokens": 2000, "output_tokens": 4, "dtype": "fp8"}
    whole = eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]
    decode = eidolon.run({**spec, "decode_only": True}, progress=False).to_pandas("summary").iloc[0]
    assert decode.ttft_s == 0 < whole.ttft_s
    assert decode.tpot_s == pytest.approx(whole.tpot_s, rel=1e-9)
    assert decode.memory_peak_bytes < whole.memory_peak_bytes
    with pytest.raises(eidolon.SpecError, match="output_tokens.*decode_only"):
        eidolon.run({**spec, "decode_only": True, "output_tokens": 1}, progress=False)


GPT_OSS_20B_HF = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 24,
                  "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                  "intermediate_size": 2880, "vocab_size": 201088, "num_local_experts": 32,
                  "num_experts_per_tok": 4, "sliding_window": 128, "tie_word_embeddings": False,
                  "layer_types": ["sliding_attention", "full_attention"] * 12,
                  "rope_scaling": {"rope_type": "yarn", "factor": 32.0}, "swiglu_limit": 7.0}


def test_gpt_oss_hf_config_and_its_window():
    # openai/gpt-oss-20b's config.json is the preset, its banded layers read
    # from layer_types; the window shortens a long prompt's first token and
    # a long context's decode, and leaves room for longer prompts, against
    # the same model with every layer attending to the whole context.
    model = from_hf_config(GPT_OSS_20B_HF)
    assert model["hf_config"]["layer_types"][:2] == ["sliding_attention", "full_attention"]

    def infer(m, prompt):
        spec = {"kind": "inference", "model": m, "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1},
                "batch": 4, "prompt_tokens": prompt, "output_tokens": 8}
        return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]

    a, b = infer(model, 16384), infer("gpt-oss-20b", 16384)
    assert (a.ttft_s, a.tpot_s, a.memory_peak_bytes) == pytest.approx((b.ttft_s, b.tpot_s, b.memory_peak_bytes))
    full = {"preset": "gpt-oss-20b", "window_pattern": "F"}
    c = infer(full, 16384)
    assert a.ttft_s < c.ttft_s and a.tpot_s < c.tpot_s and a.memory_peak_bytes < c.memory_peak_bytes
    assert a.longest_prompt_tokens > c.longest_prompt_tokens
    # A prompt inside the window: the band is the whole context.
    assert infer("gpt-oss-20b", 100).ttft_s == pytest.approx(infer(full, 100).ttft_s)


def test_gpt_oss_serving_prices_the_window():
    # Serving prices the banded layers' attention apart: at 8,000-token
    # prompts the windowed model's first tokens and inter-token latencies
    # are shorter than the same model's with full attention everywhere.
    def serve(m):
        spec = {"kind": "serving", "model": m, "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1},
                "workload": {"arrival": "poisson", "rate_per_s": 2, "requests": 30, "prompt_tokens": 8000,
                             "output_tokens": 64}, "seed": 3}
        return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]

    a, b = serve("gpt-oss-20b"), serve({"preset": "gpt-oss-20b", "window_pattern": "F"})
    assert a.ttft_s_p50 < b.ttft_s_p50
    assert a.itl_s_p50 < b.itl_s_p50


LLAMA4_MAVERICK_HF = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
                      "text_config": {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
                                      "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                                      "intermediate_size": 8192, "intermediate_size_mlp": 16384,
                                      "num_local_experts": 128, "num_experts_per_tok": 1,
                                      "interleave_moe_layer_step": 2, "vocab_size": 202048,
                                      "attention_chunk_size": 8192, "tie_word_embeddings": False,
                                      "no_rope_layers": [0 if (i + 1) % 4 == 0 else 1 for i in range(48)],
                                      "rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
                      "vision_config": {"hidden_size": 1408}}


def test_llama4_hf_config_and_its_chunks():
    # Llama 4's multimodal config.json reads through its text_config to the
    # preset; past one chunk of 8,192 tokens its chunked layers stop growing,
    # so a long prompt's first token comes sooner than with every layer
    # global, in inference and in serving.
    model = from_hf_config(LLAMA4_MAVERICK_HF)
    assert model["hf_config"]["text_config"]["no_rope_layers"][:4] == [1, 1, 1, 0]

    def infer(m, prompt):
        spec = {"kind": "inference", "model": m, "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1},
                "tp": 8, "batch": 1, "prompt_tokens": prompt, "output_tokens": 8, "dtype": "fp8"}
        return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]

    a, b = infer(model, 32768), infer("llama4-maverick", 32768)
    assert (a.ttft_s, a.tpot_s, a.memory_peak_bytes) == pytest.approx((b.ttft_s, b.tpot_s, b.memory_peak_bytes))
    c = infer({"preset": "llama4-maverick", "window_pattern": "F"}, 32768)
    assert a.ttft_s < c.ttft_s and a.memory_peak_bytes < c.memory_peak_bytes

    def serve(m):
        spec = {"kind": "serving", "model": m, "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1},
                "tp": 8, "dtype": "fp8", "seed": 2,
                "workload": {"arrival": "poisson", "rate_per_s": 1, "requests": 12, "prompt_tokens": 20000,
                             "output_tokens": 32}}
        return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]

    assert serve("llama4-maverick").ttft_s_p50 < serve({"preset": "llama4-maverick", "window_pattern": "F"}).ttft_s_p50


def test_mxfp4_experts_fit_gpt_oss_on_one_gpu():
    # gpt-oss's release stores its experts in MXFP4 (4.25 bits) and the
    # rest in BF16: the 117B model fits one 80 GB H100 (its model card's
    # claim); its experts in int8 do not. mxfp4 on a dense model is refused.
    def infer(wd, model="gpt-oss-120b"):
        return {"kind": "inference", "model": model, "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1},
                "batch": 1, "prompt_tokens": 8192, "output_tokens": 4, "weight_dtype": wd}

    mx = eidolon.run(infer("mxfp4"), progress=False).to_pandas("summary").iloc[0]
    assert mx.fits and 60e9 < mx.memory_peak_bytes < 80e9
    assert not eidolon.run(infer("int8"), progress=False).to_pandas("summary").iloc[0].fits
    assert [p.path for p in eidolon.validate(infer("mxfp4", "llama3-8b"))] == ["weight_dtype"]


def test_gpt_oss_training_pays_its_clamps_unless_fused():
    # gpt-oss's config.json clamps its experts' activation (swiglu_limit):
    # an eager Megatron-Core step pays the clamps and their concatenation,
    # so it is slower than with Transformer Engine's op fuser, which clamps
    # inside the activation kernel; the switch is refused on a dense model.
    def train(model, ep=8, **extra):
        return {"kind": "training", "model": model, "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1},
                "parallel": {"dp": 8, "ep": ep, "global_batch": 8}, "seq_len": 2048, **extra}

    small = {"hf_config": {**GPT_OSS_20B_HF, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]}}
    eager = eidolon.run(train(small), progress=False).to_pandas("summary").iloc[0]
    fused = eidolon.run(train(small, te_op_fuser=True), progress=False).to_pandas("summary").iloc[0]
    assert eager.step_time_s > fused.step_time_s
    assert [p.path for p in eidolon.validate(train("llama3-8b", ep=1, te_op_fuser=True))] == ["te_op_fuser"]
