"""The serving scenario kind through the Python API."""

import pyarrow as pa
import pytest

import eidolon

BASE = {"kind": "serving", "model": "llama3-8b", "gpu": "a100-80gb-sxm",
        "cluster": {"preset": "dgx-a100", "nodes": 1}}


def spec(**kw):
    s = dict(BASE)
    s.update(kw)
    return s


def test_tables_and_columns():
    r = eidolon.run(spec(workload={"rate_per_s": 10, "requests": 200, "warmup_requests": 20}), progress=False)
    assert sorted(r.tables) == ["iterations", "requests", "summary"]
    rq = r.to_pandas("requests")
    assert len(rq) == 200
    assert {"arrival_s", "scheduled_s", "first_token_s", "finish_s", "ttft_s", "itl_s_mean", "itl_s_max",
            "e2e_s", "preemptions", "replica", "warmup"} <= set(rq.columns)
    assert (rq.ttft_s > 0).all() and (rq.e2e_s >= rq.ttft_s).all()
    assert rq.warmup.sum() == 20
    it = r.to_pandas("iterations")
    assert {"start_s", "duration_s", "sequences", "prefill_tokens", "decode_tokens", "kv_blocks_used"} <= set(it.columns)
    # Every prompt and output token goes through some iteration (no preemption here).
    assert it.prefill_tokens.sum() == rq.prompt_tokens.sum()
    assert it.decode_tokens.sum() == (rq.output_tokens - 1).sum()
    s = r.to_pandas("summary").iloc[0]
    assert s.requests == 180
    assert s.ttft_s_p50 <= s.ttft_s_p90 <= s.ttft_s_p99


def test_trace_from_a_table():
    t = pa.table({"arrival_s": [0.0, 0.1, 0.2, 5.0], "prompt_tokens": [800, 800, 300, 800],
                  "output_tokens": [8, 8, 8, 8], "prefix_id": [0, 0, -1, 0], "prefix_tokens": [512, 512, 0, 512]})
    r = eidolon.run(spec(workload={"trace": eidolon.datasets.trace(t)}), progress=False)
    rq = r.to_pandas("requests")
    assert rq.arrival_s.tolist() == [0.0, 0.1, 0.2, 5.0]
    # The first computes the prefix (32 blocks of 16), the others with it find it cached.
    assert rq.cached_tokens.tolist() == [0, 512, 0, 512]


@pytest.mark.parametrize("column,values,says", [
    ("arrival_s", [0.0, float("nan")], "no value at row 1"),
    ("prompt_tokens", [100, 150.5], "whole numbers"),
    ("output_tokens", [None, 8], "no value at row 0"),
])
def test_trace_refuses_missing_and_fractional_values(column, values, says):
    import pandas as pd
    df = pd.DataFrame({"arrival_s": [0.0, 0.5], "prompt_tokens": [100, 200], "output_tokens": [8, 8]})
    df[column] = values
    with pytest.raises(ValueError, match=f"{column}.*{says}"):
        eidolon.datasets.trace(df)


def test_same_seed_same_tables():
    s = spec(seed=4, workload={"arrival": "gamma", "burstiness": 0.5, "rate_per_s": 20, "requests": 100,
                               "prompt_tokens": {"dist": "lognormal", "tokens": 500}})
    a, b = eidolon.run(s, progress=False), eidolon.run(s, progress=False)
    for name in a.tables:
        assert a.tables[name].equals(b.tables[name]), name


@pytest.mark.parametrize("bad,field", [
    ({"workload": {"rate_per_s": 0}}, "workload.rate_per_s"),
    ({"workload": {"rate_per_s": 1}, "engine": {"max_num_batched_tokens": 256, "chunk_tokens": 512}}, "engine.chunk_tokens"),
    ({"workload": {"rate_per_s": 1}, "slo": {"ttft": 0.2}}, "slo.ttft"),
    ({"workload": {"rate_per_s": 1}, "engine": {"step_overhead_s": -1e-3}}, "engine.step_overhead_s"),
    ({"workload": {"rate_per_s": 1}, "engine": {"kv_cache_dtype": "int4"}}, "engine.kv_cache_dtype"),
    ({"workload": {"rate_per_s": 1}, "engine": {"weight_dtype": "int2"}}, "engine.weight_dtype"),
    ({"workload": {"rate_per_s": 1}, "ep": 2}, "ep"),
    ({"workload": {"rate_per_s": 1}, "engine": {"all2all_backend": "deepep_low_latency"}}, "engine.all2all_backend"),
    ({"workload": {"rate_per_s": 1}, "engine": {"custom_all_reduce_engine": "trt"}}, "engine.custom_all_reduce_engine"),
])
def test_spec_errors(bad, field):
    with pytest.raises(eidolon.SpecError, match=field.replace(".", r"\.")):
        eidolon.run(spec(**bad), progress=False)


def test_step_overhead_adds_to_every_token():
    # One closed-loop client: each iteration holds its one sequence, so
    # every inter-token gap grows by the loop's time per iteration and per
    # sequence, and the first token by one of them.
    w = {"arrival": "closed_loop", "concurrency": 1, "requests": 3, "prompt_tokens": {"tokens": 300},
         "output_tokens": {"tokens": 20}}
    base = eidolon.run(spec(workload=w), progress=False).to_pandas("requests")
    slow = eidolon.run(spec(workload=w, engine={"step_overhead_s": 2e-3, "step_overhead_s_per_seq": 5e-4}),
                       progress=False).to_pandas("requests")
    assert (slow.itl_s_mean - base.itl_s_mean).round(9).tolist() == [2.5e-3] * 3
    assert (slow.ttft_s - base.ttft_s).round(9).tolist() == [2.5e-3] * 3


def test_step_overhead_costs_latency_and_capacity():
    # Notebook 10's loop section: a synchronous engine loop's time per
    # iteration raises the median ITL below capacity and lowers the
    # throughput past it.
    w = {"requests": 400, "warmup_requests": 40,
         "prompt_tokens": {"dist": "lognormal", "tokens": 1500, "sigma": 0.6, "max_tokens": 16000},
         "output_tokens": {"dist": "uniform", "min_tokens": 16, "max_tokens": 300}}
    def summary(rate, ms):
        s = spec(tp=2, workload={**w, "rate_per_s": rate},
                 engine={"step_overhead_s": ms / 1e3, "step_overhead_s_per_seq": ms / 1e5})
        return eidolon.run(s, progress=False).to_pandas("summary").iloc[0]
    low = [summary(8, ms) for ms in (0, 1, 4)]
    assert low[0].itl_s_p50 + 1e-3 < low[1].itl_s_p50 < low[2].itl_s_p50
    high = [summary(15, ms) for ms in (0, 4)]
    assert high[1].requests_per_s < 0.95 * high[0].requests_per_s


def test_fp8_kv_cache_holds_twice_the_tokens():
    w = {"rate_per_s": 2, "requests": 60, "prompt_tokens": {"tokens": 2000}, "output_tokens": {"tokens": 100}}
    blocks = {kv: eidolon.run(spec(workload=w, engine={"kv_cache_dtype": kv, "gpu_memory_utilization": 0.3}),
                              progress=False).to_pandas("summary").kv_blocks_per_replica[0]
              for kv in ("auto", "fp8")}
    assert abs(blocks["fp8"] - 2 * blocks["auto"]) <= 1


def test_fp8_kv_cache_where_the_cache_overflows():
    # Notebook 10's FP8 KV cache section: Llama-3-8B on one A100 with
    # ~12,000-token prompts at 0.7 requests/s overflows the 16-bit cache
    # (preemptions, recomputation) but hardly the 8-bit one. At 0.5 the
    # 16-bit cache preempts too, but the prefix cache keeps a preempted
    # request's blocks for its return, so it keeps up; with prefix caching
    # off those preemptions recompute everything and it falls behind.
    def run(rate, kv, caching=True):
        w = {"rate_per_s": rate, "requests": 400, "warmup_requests": 40,
             "prompt_tokens": {"dist": "lognormal", "tokens": 12000, "sigma": 0.3, "max_tokens": 30000},
             "output_tokens": {"dist": "uniform", "min_tokens": 200, "max_tokens": 800}}
        engine = {"kv_cache_dtype": kv, "prefix_caching": caching}
        return eidolon.run(spec(model="llama3-8b", tp=1, workload=w, engine=engine), progress=False).to_pandas("summary").iloc[0]

    s = {kv: run(0.7, kv) for kv in ("auto", "fp8")}
    assert s["auto"].preemptions > 100 and s["fp8"].preemptions < s["auto"].preemptions / 10
    assert s["fp8"].requests_per_s > 1.1 * s["auto"].requests_per_s
    assert s["fp8"].ttft_s_p50 < s["auto"].ttft_s_p50 / 5
    cached, uncached = run(0.5, "auto"), run(0.5, "auto", caching=False)
    assert 0 < cached.preemptions < uncached.preemptions / 4
    assert cached.requests_per_s > 1.1 * uncached.requests_per_s


def test_search_ranks_by_gpus():
    r = eidolon.run(spec(slo={"ttft_s": 0.5, "itl_s": 0.05},
                         search={"tp": [1, 2], "replicas": [1, 2]},
                         workload={"rate_per_s": 20, "requests": 200, "prompt_tokens": {"tokens": 1000},
                                   "output_tokens": {"tokens": 32}}), progress=False)
    c = r.to_pandas("configs")
    assert len(c) == 4
    ok = c[c.meets_slo]
    assert list(ok["rank"]) == list(range(1, len(ok) + 1))
    assert ok.gpus.is_monotonic_increasing


def test_pipeline_replica_throughput_near_separate_replicas():
    # Notebook 10's small default: under load a TP 2 · PP 2 replica keeps an
    # iteration in flight per stage, so its throughput is near two TP-2
    # replicas' and above TP 4's, while TP 4 decodes fastest at light load.
    model = {"model": "llama3-8b", "gpu": "a100-80gb-sxm", "cluster": {"preset": "dgx-a100", "nodes": 1}}
    workload = {"requests": 400, "warmup_requests": 40,
                "prompt_tokens": {"dist": "lognormal", "tokens": 1500, "sigma": 0.6, "max_tokens": 16000},
                "output_tokens": {"dist": "uniform", "min_tokens": 16, "max_tokens": 300}}

    def summary(rate, **layout):
        spec = {"kind": "serving", **model, **layout, "workload": {**workload, "rate_per_s": rate}}
        return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]

    tp4, pp2, two = summary(30, tp=4), summary(30, tp=2, pp=2), summary(30, tp=2, replicas=2)
    assert pp2.requests_per_s > tp4.requests_per_s
    assert pp2.requests_per_s > 0.85 * two.requests_per_s
    assert summary(10, tp=4).itl_s_p50 < summary(10, tp=2, pp=2).itl_s_p50


def test_data_parallel_attention_replica():
    # Wide expert parallelism: one replica of 4 data-parallel attention
    # ranks (ep), each attending to its own sequences, holds four ranks'
    # KV cache (each GPU holding a quarter of the experts leaves more room
    # than four copies of a one-GPU replica), and its decode, each GPU
    # reading a quarter of the experts for its share of the sequences, is
    # faster than one GPU's.
    moe = {"kind": "serving", "model": {"preset": "qwen3-30b-a3b", "layers": 6}, "gpu": "h100-sxm",
           "cluster": {"preset": "dgx-h100", "nodes": 1},
           "workload": {"rate_per_s": 50, "requests": 200, "prompt_tokens": {"tokens": 500},
                        "output_tokens": {"tokens": 50}}}
    wide = eidolon.run({**moe, "ep": 4}, progress=False)
    one = eidolon.run(moe, progress=False)
    it_w, it_1 = wide.to_pandas("iterations"), one.to_pandas("iterations")
    assert it_w.kv_blocks.iloc[0] > 4 * it_1.kv_blocks.iloc[0]
    s, s1 = wide.to_pandas("summary").iloc[0], one.to_pandas("summary").iloc[0]
    assert s.requests == 200 and 0 < s.itl_s_p50 < s1.itl_s_p50


def test_speculative_acceptance_round_trip_and_run():
    """α and vLLM's mean acceptance length convert both ways, and a run at
    that α reports about that length."""
    from eidolon.speculative import acceptance_length, per_token_acceptance

    for alpha, k in [(0.0, 3), (0.55, 2), (0.8, 5), (1.0, 4)]:
        assert per_token_acceptance(acceptance_length(alpha, k), k) == pytest.approx(alpha, abs=1e-9)
    with pytest.raises(ValueError, match="mean_acceptance_length"):
        per_token_acceptance(5.5, 4)
    alpha = per_token_acceptance(3.0, 4)  # a length read from a vLLM log
    s = eidolon.run({"kind": "serving", "model": {"preset": "llama3-8b", "layers": 2}, "gpu": "a100-80gb-sxm",
                     "cluster": {"preset": "dgx-a100", "nodes": 1},
                     "engine": {"speculative": {"method": "ngram", "num_speculative_tokens": 4, "per_token_acceptance": alpha}},
                     "workload": {"rate_per_s": 5, "requests": 200, "prompt_tokens": {"tokens": 100},
                                  "output_tokens": {"tokens": 1000}}}, progress=False).to_pandas("summary").iloc[0]
    assert s.mean_acceptance_length == pytest.approx(3.0, rel=0.03)


def test_fp4_kv_cache_on_blackwell():
    # An NVFP4 cache (4.5 bits an element) holds 8 / 4.5 times the tokens of
    # an FP8 one in the same memory on a B200; on an H100 it is refused.
    def sv(kv, gpu="b200", cluster="dgx-b200"):
        return {"kind": "serving", "model": "llama3-8b", "gpu": gpu, "cluster": {"preset": cluster, "nodes": 1},
                "engine": {"kv_cache_dtype": kv, "gpu_memory_utilization": 0.3},
                "workload": {"rate_per_s": 1, "requests": 10}}

    blocks = {kv: eidolon.run(sv(kv), progress=False).to_pandas("summary").kv_blocks_per_replica[0] for kv in ("fp8", "fp4")}
    assert blocks["fp4"] / blocks["fp8"] == pytest.approx(8 / 4.5, rel=1e-3)
    assert [p.path for p in eidolon.validate(sv("fp4", "h100-sxm", "dgx-h100"))] == ["engine.kv_cache_dtype"]
