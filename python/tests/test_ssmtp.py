"""The ssm_tp scenario kind through the Python API."""

import pytest

import eidolon

NVLINK = {"topology": "switch", "gpus": 4, "link": "nvlink3"}


def spec(**kw):
    s = {"kind": "ssm_tp", "model": "mamba-2.8b", "gpu": "a100-80gb-sxm", "cluster": NVLINK,
         "tp_degrees": [1, 2, 4], "batch": 4, "prompt_lengths": [512, 4096], "output_length": 8}
    s.update(kw)
    return s


def test_tables_and_columns():
    r = eidolon.run(spec(strategies=["ssm_tp", "naive"], quantization=["none", "int8"]), progress=False)
    tp = r.to_pandas("throughput")
    assert {"tp", "strategy", "quantization", "prompt_tokens", "ttft_s", "tpot_s", "e2e_s",
            "tokens_per_s", "speedup", "efficiency", "fits"} <= set(tp.columns)
    assert len(tp) == 3 * 2 * 2 * 2
    assert (tp[tp.tp == 1].speedup == 1).all()
    mem = r.to_pandas("memory")
    assert {"weights_bytes", "state_cache_bytes", "kv_cache_bytes", "activations_bytes",
            "longest_prompt_tokens", "largest_batch"} <= set(mem.columns)
    one = mem[mem.tp == 1].state_cache_bytes.iloc[0]
    for t in (2, 4):
        assert mem[mem.tp == t].state_cache_bytes.iloc[0] == one / t
    comm = r.to_pandas("comm")
    multi = comm[comm.tp > 1]
    assert set(multi[multi.strategy == "naive"].all_reduces_per_ssm_layer) == {2}
    assert set(multi[multi.strategy == "ssm_tp"].all_reduces_per_ssm_layer) == {1}
    q = multi[multi.quantization == "int8"]
    assert (q.quant_rel_error > 0).all() and (q.quant_rel_error < 0.1).all()


def test_speedup_grows_with_prompt():
    tp = eidolon.run(spec(), progress=False).to_pandas("throughput")
    four = tp[tp.tp == 4].sort_values("prompt_tokens")
    assert four.speedup.is_monotonic_increasing and four.speedup.iloc[0] > 1


def test_spec_errors_name_fields():
    with pytest.raises(eidolon.SpecError, match=r"tp_degrees\[1\].*n_groups = 1"):
        eidolon.run(spec(model="mamba2-2.7b", tp_degrees=[1, 2]), progress=False)
    with pytest.raises(eidolon.SpecError, match=r"tp_degrees\[0\].*cluster has 4"):
        eidolon.run(spec(tp_degrees=[8]), progress=False)
    with pytest.raises(eidolon.SpecError, match=r"prompt_lengths\[0\].*longest that fits"):
        eidolon.run(spec(model="falcon-mamba-7b", gpu="rtx-a6000", tp_degrees=[1], prompt_lengths=[2_000_000]),
                    progress=False)


def test_fused_and_unfused_quantized_allreduce():
    r = eidolon.run(spec(tp_degrees=[1, 4], quantization=["none", "int8"], quantized_allreduce=["fused", "unfused"],
                         prompt_lengths=[4096]), progress=False)
    tp, comm = r.to_pandas("throughput"), r.to_pandas("comm")
    assert list(tp[tp.tp == 4].allreduce_kernel) == ["nccl", "fused", "unfused"]
    # Batch-request throughput: requests/s × output tokens per request = tokens/s.
    assert ((tp.requests_per_s * tp.output_tokens - tp.tokens_per_s).abs() < 1e-9 * tp.tokens_per_s).all()
    four = tp[tp.tp == 4].set_index("allreduce_kernel")
    assert four.tokens_per_s["fused"] > four.tokens_per_s["unfused"]
    algo = comm[comm.tp == 4].set_index("allreduce_kernel").algorithm
    assert (algo["nccl"], algo["fused"], algo["unfused"]) == ("ring", "ring", "direct")
