"""Directions: the inference and serving outputs move the way a researcher
expects when one input moves, on seeded random layouts (presets, A100 or
H100, TP 1-8, eager or CUDA graphs). A larger batch never makes a decode step
or the prefill faster, nor the throughput lower; a longer prompt never makes
the first token sooner; more output never ends sooner; three times the
arrival rate never lowers the median latencies or the served rate; an H100
never serves slower than an A100. (Training's directions are Go tests:
core/scenario/training.)
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

import eidolon

Spec = dict[str, Any]
MODELS = ["llama2-7b", "llama3-8b", "llama2-13b", "mixtral-8x7b", "qwen3-30b-a3b"]
GPUS = [("a100-80gb-sxm", "dgx-a100"), ("h100-sxm", "dgx-h100")]


def _summary(spec: Spec) -> Any:
    return eidolon.run(spec, progress=False).to_pandas("summary").iloc[0]


def _with(spec: Spec, **changes: Any) -> Spec:
    out = copy.deepcopy(spec)
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = out
        for p in parents:
            node = node[p]
        node[leaf] = value
    return out


def _layout(rnd: random.Random) -> tuple[str, str, str, int]:
    model = rnd.choice(MODELS)
    gpu, preset = rnd.choice(GPUS)
    return model, gpu, preset, rnd.choice([1, 2, 4, 8])


def _not_below(new: float, old: float, what: str, spec: Spec, tol: float = 0.005) -> None:
    assert new >= old * (1 - tol), f"{what}: {old:.6g} -> {new:.6g}\n{json.dumps(spec)}"


@pytest.mark.parametrize("seed", range(12))
def test_inference_moves_the_right_way(seed: int) -> None:
    rnd = random.Random(seed)
    model, gpu, preset, tp = _layout(rnd)
    base = {"kind": "inference", "model": {"preset": model, "layers": 4}, "gpu": gpu,
            "cluster": {"preset": preset, "nodes": 1}, "tp": tp, "batch": rnd.choice([1, 4, 16]),
            "prompt_tokens": rnd.choice([128, 512, 2048]), "output_tokens": rnd.choice([16, 64]),
            "execution": rnd.choice(["eager", "cuda_graphs"])}
    s0 = _summary(base)
    assert s0.fits, json.dumps(base)
    bigger = _with(base, batch=2 * base["batch"])
    s = _summary(bigger)
    _not_below(s.tpot_s, s0.tpot_s, "time per output token with twice the batch", bigger)
    _not_below(s.ttft_s, s0.ttft_s, "time to first token with twice the batch", bigger)
    _not_below(s.tokens_per_s, s0.tokens_per_s, "tokens/s with twice the batch", bigger)
    longer = _with(base, prompt_tokens=2 * base["prompt_tokens"])
    s = _summary(longer)
    _not_below(s.ttft_s, s0.ttft_s, "time to first token with twice the prompt", longer)
    _not_below(s.tpot_s, s0.tpot_s, "time per output token with twice the prompt", longer)
    more = _with(base, output_tokens=2 * base["output_tokens"])
    _not_below(_summary(more).e2e_s, s0.e2e_s, "end to end with twice the output", more, tol=0)


@pytest.mark.parametrize("seed", range(12))
def test_serving_moves_the_right_way(seed: int) -> None:
    rnd = random.Random(100 + seed)
    model, _, _, tp = _layout(rnd)
    rate = rnd.choice([1, 4, 16])
    base = {"kind": "serving", "model": {"preset": model, "layers": 8}, "gpu": "a100-80gb-sxm",
            "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": tp,
            "workload": {"rate_per_s": rate, "requests": 120, "warmup_requests": 10,
                         "prompt_tokens": {"tokens": rnd.choice([128, 512, 2048])},
                         "output_tokens": {"tokens": rnd.choice([16, 64, 128])}}}
    s0 = _summary(base)
    busier = _with(base, workload__rate_per_s=3 * rate)
    s = _summary(busier)
    # Poisson arrivals from the same seed: the same draws, three times closer.
    _not_below(s.ttft_s_p50, s0.ttft_s_p50, "median time to first token at three times the rate", busier, tol=0.02)
    _not_below(s.itl_s_p50, s0.itl_s_p50, "median inter-token latency at three times the rate", busier, tol=0.02)
    _not_below(s.requests_per_s, s0.requests_per_s, "served requests/s at three times the rate", busier, tol=0.02)
    faster = _with(base, gpu="h100-sxm", cluster__preset="dgx-h100")
    _not_below(s0.e2e_s_p50, _summary(faster).e2e_s_p50, "median end to end on an H100 against an A100", faster, tol=0.01)
