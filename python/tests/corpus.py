"""A reliability corpus: seeded mutated and extreme specs for every kind.

Each case must end in a clean ``SpecError``, a ``SimulationError``, or a
result whose tables hold only finite numbers (nulls allowed) — never a
crash, a hang, a foreign exception or a NaN. A run still going after
``WATCHDOG_S`` is sent SIGINT and must come back within ``HANG_S`` (a long
but valid run is fine, one that ignores Ctrl-C is a hang).

Cases run in worker processes (many per process, under an address-space cap
set with RLIMIT_AS); a worker that dies is restarted and the case it was
running is recorded as a crash. Reproduce one case with

    python tests/corpus.py --seed SEED --case I
"""

from __future__ import annotations

import copy
import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from typing import Any

A100 = "a100-80gb-sxm"
MEMORY_CAP_BYTES = 6 << 30  # RLIMIT_AS of a worker (Go reserves address space generously)
WATCHDOG_S = 0.4  # a run still going after this is interrupted
HANG_S = 5.0  # ... and must be back this long after the interrupt

# Small, fast specs of every kind: each mutation starts from one of these.
BASES: dict[str, dict[str, Any]] = {
    "selftest": {"kind": "selftest", "iterations": 1000, "seed": 3},
    "operators": {"kind": "operators", "gpu": "h100-sxm", "model": {"preset": "gpt-22b", "layers": 2},
                  "phase": "training", "batch": 2, "seq_len": 512, "tp": 2},
    "collective": {"kind": "collective", "cluster": {"topology": "ring", "gpus": 4, "link": "nvlink4"},
                   "collective": "all_reduce", "sizes_bytes": [1e6, 1e8]},
    "eidola": {"kind": "eidola", "ghosts": 3, "script_source": "generator", "generator": {"interval_s": 1e-6},
               "gemm": {"m": 1024, "n": 1024, "k": 1024}, "sync_modes": ["spin_wait", "syncmon"],
               "injected_delays_s": [0, 1e-5]},
    "eidola_table": {"kind": "eidola", "kernel": "gemm_reducescatter", "ghosts": 3, "script_source": "table",
                     "script": [{"time_s": 1e-6 * g, "source_gpu": g, "chunk": c, "bytes": 65536}
                                for g in (1, 2, 3) for c in range(8)],
                     "gemm": {"m": 1024, "n": 1024, "k": 1024}, "seeds": 2},
    "collective_a2a": {"kind": "collective", "cluster": {"preset": "dgx-a100", "nodes": 2}, "collective": "all_to_all",
                       "sizes_bytes": [1e6], "flows": True, "concurrent": 2},
    "eidola_setup": {"kind": "eidola", "ghosts": 3, "gemm": {"m": 1024, "n": 1024, "k": 1024},
                     "cluster": {"topology": "switch", "gpus": 4, "link": "nvlink4"}},
    "training": {"kind": "training", "model": {"preset": "gpt-22b", "layers": 2}, "gpu": A100,
                 "cluster": {"preset": "dgx-a100", "nodes": 1}, "parallel": {"tp": 4, "pp": 1, "global_batch": 4},
                 "seq_len": 512, "timeline_ranks": [0],
                 "faults": {"links": [{"src": "n0.gpu1", "dst": "n0.nvswitch", "health": 0.5}]}},
    "inference": {"kind": "inference", "model": {"preset": "llama2-7b", "layers": 2}, "gpu": A100,
                  "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": 2, "pp": 1, "batch": 2,
                  "prompt_tokens": 128, "output_tokens": 8, "kv_cache_dtype": "fp8",
                  "custom_all_reduce_engine": "tensorrt_llm"},
    "fault_sweep": {"kind": "fault_sweep", "seed": 5, "samples": 2, "link_failures": 1, "degraded_health": 0.2,
                    "training": {"model": {"preset": "gpt-22b", "layers": 2}, "gpu": A100,
                                 "cluster": {"preset": "dgx-a100", "nodes": 1}, "parallel": {"tp": 8, "global_batch": 2},
                                 "seq_len": 256, "timeline_ranks": [-1]}},
    "ssm_tp": {"kind": "ssm_tp", "model": "mamba-2.8b", "gpu": A100,
               "cluster": {"topology": "switch", "gpus": 4, "link": "nvlink3"},
               "tp_degrees": [1, 2], "batch": 2, "prompt_lengths": [256], "output_length": 4},
    "seedflood": {"kind": "seedflood", "topology": {"kind": "ring", "clients": 4}, "steps": 3,
                  "methods": ["seedflood", "dsgd"], "dataset": {"samples": 60, "n_features": 3, "classes": 2}},
    "serving": {"kind": "serving", "model": {"preset": "llama3-8b", "layers": 2}, "gpu": A100,
                "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": 1, "pp": 2, "replicas": 2,
                "engine": {"max_num_batched_tokens": 512, "kv_blocks": 200, "step_overhead_s": 1e-3, "weight_dtype": "int8",
                           "step_overhead_s_per_seq": 2e-5, "decode_attention": "xqa"},
                "workload": {"rate_per_s": 20, "requests": 30, "prompt_tokens": {"dist": "lognormal", "tokens": 200, "max_tokens": 1000},
                             "output_tokens": {"tokens": 8}}},
    "serving_moe": {"kind": "serving", "model": {"preset": "mixtral-8x7b", "layers": 2}, "gpu": "h100-sxm",
                    "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 2, "replicas": 2,
                    "engine": {"enable_expert_parallel": True, "kv_cache_dtype": "fp8"}, "disaggregation": {"prefill_replicas": 1},
                    "workload": {"arrival": "closed_loop", "concurrency": 4, "requests": 12,
                                 "prompt_tokens": {"tokens": 300}, "output_tokens": {"tokens": 6}}},
    "serving_wide_ep": {"kind": "serving", "model": {"preset": "qwen3-30b-a3b", "layers": 2}, "gpu": "h100-sxm",
                        "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 2, "ep": 4, "redundant_experts": 4,
                        "engine": {"max_num_batched_tokens": 1024, "max_num_seqs": 8, "all2all_backend": "deepep_auto"},
                        "workload": {"rate_per_s": 40, "requests": 20, "prompt_tokens": {"tokens": 400},
                                     "output_tokens": {"tokens": 6}}},
    "serving_spec": {"kind": "serving", "model": {"preset": "llama3-8b", "layers": 2}, "gpu": A100,
                     "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": 2,
                     "engine": {"speculative": {"method": "draft_model", "num_speculative_tokens": 3, "per_token_acceptance": 0.7,
                                                "draft_model": {"preset": "llama3-8b", "layers": 1}}},
                     "workload": {"arrival": "closed_loop", "concurrency": 3, "requests": 9, "prompt_tokens": {"tokens": 200},
                                  "output_tokens": {"tokens": 12}}},
    "training_instances": {"kind": "training", "model": {"preset": "llama2-7b", "layers": 2}, "gpu": A100,
                           "cluster": {"preset": "dgx-a100", "nodes": 2},
                           "parallel": {"tp": 2, "zero": 3, "distributed_optimizer_instances": 2, "global_batch": 16},
                           "seq_len": 256, "timeline_ranks": [-1]},
    "training_layout": {"kind": "training", "model": {"preset": "deepseek-v3", "layers": 4, "mtp_layers": 1}, "gpu": "h800",
                        "cluster": {"preset": "dgx-h800", "nodes": 1},
                        "parallel": {"pp": 2, "ep": 4, "global_batch": 8, "pipeline_model_parallel_layout": "Et|t|t|tmL"},
                        "seq_len": 256},
    "inference_moe": {"kind": "inference", "model": {"preset": "qwen3-30b-a3b", "layers": 2}, "gpu": "h100-sxm",
                      "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 4, "enable_expert_parallel": True,
                      "batch": 4, "prompt_tokens": 64, "output_tokens": 4, "weight_dtype": "int4"},
    "inference_wide_ep": {"kind": "inference", "model": {"preset": "deepseek-v3", "layers": 4}, "gpu": "h800",
                          "cluster": {"preset": "dgx-h800", "nodes": 2}, "replicas": 16, "ep": 16, "redundant_experts": 16,
                          "hierarchical_a2a": True, "two_batch_overlap": True,
                          "batch": 4, "prompt_tokens": 128, "output_tokens": 4, "dtype": "fp8"},
    "inference_decode_only": {"kind": "inference", "model": {"preset": "llama2-7b", "layers": 4}, "gpu": "h100-sxm",
                              "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 2, "pp": 2, "decode_only": True,
                              "requests": [{"count": 4, "prompt_tokens": 256, "output_tokens": 6},
                                           {"count": 2, "prompt_tokens": 1024, "output_tokens": 3}]},
    "training_tp_overlap": {"kind": "training", "model": {"preset": "mixtral-8x7b", "layers": 2}, "gpu": "h100-sxm",
                            "cluster": {"preset": "dgx-h100", "nodes": 1},
                            "parallel": {"tp": 4, "ep": 2, "global_batch": 4, "sequence_parallel": True,
                                         "tp_comm_overlap": True, "recompute": "selective"},
                            "seq_len": 512, "dtype": "fp8"},
    "operators_what_if_gpu": {"kind": "operators", "model": {"preset": "llama2-7b", "layers": 2}, "phase": "decode",
                              "gpu": {"preset": "h100-sxm", "name": "x", "hbm_bandwidth_bytes_per_s": 4.8e12,
                                      "sm_count": 144, "tensor_efficiency": 0.7, "l2_bytes": 2**25,
                                      "memory_latency_s": 5e-7}},
    "calibrate": {"kind": "calibrate", "gpu": A100, "max_iterations": 40,
                  "kernels": [{"op": "gemm", "m": 512 * (i + 1), "n": 4096, "k": 4096, "time_s": 8e-5 * (i + 1)} for i in range(4)]
                  + [{"op": "elementwise", "bytes": 1e8, "time_s": 6.5e-5}]},
    "training_moe_fp8": {"kind": "training", "model": {"preset": "gpt-oss-120b", "layers": 2}, "gpu": "b200",
                         "cluster": {"preset": "dgx-b200", "nodes": 1}, "parallel": {"ep": 4, "global_batch": 16},
                         "seq_len": 512, "dtype": "fp8", "fp8_recipe": "mxfp8", "te_op_fuser": True, "grad_dtype": "bf16",
                         "routing": {"distribution": "zipf", "skew": 1.1, "seed": 4}},
    "training_hf_cp": {"kind": "training", "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 1},
                       "model": {"hf_config": {"model_type": "qwen3_moe", "hidden_size": 512, "num_hidden_layers": 2,
                                               "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
                                               "intermediate_size": 1024, "moe_intermediate_size": 256, "num_experts": 8,
                                               "num_experts_per_tok": 2, "vocab_size": 32000,
                                               "max_position_embeddings": 4096, "swiglu_limit": 7.0}},
                       "parallel": {"tp": 2, "cp": 2, "ep": 2, "global_batch": 4, "sequence_parallel": True},
                       "seq_len": 1024, "execution": "cuda_graphs"},
    "training_hybrid": {"kind": "training", "model": {"preset": "zamba-7b", "layers": 4, "pattern": "MMAM"}, "gpu": "h100-sxm",
                        "cluster": {"preset": "dgx-h100", "nodes": 1},
                        "parallel": {"tp": 2, "pp": 2, "global_batch": 8, "virtual_stages": 2}, "seq_len": 512},
    "serving_gpt_oss": {"kind": "serving", "model": {"preset": "gpt-oss-20b", "layers": 4}, "gpu": "h100-sxm",
                        "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 1,
                        "engine": {"weight_dtype": "mxfp4", "max_num_batched_tokens": 1024},
                        "workload": {"rate_per_s": 30, "requests": 20, "prompt_tokens": {"tokens": 600},
                                     "output_tokens": {"tokens": 8}}},
    "inference_llama4": {"kind": "inference", "model": {"preset": "llama4-maverick", "layers": 2}, "gpu": "h100-sxm",
                         "cluster": {"preset": "dgx-h100", "nodes": 1}, "tp": 8, "batch": 2, "prompt_tokens": 256,
                         "output_tokens": 4, "dtype": "fp8"},
    "parallel_search": {"kind": "parallel_search", "model": {"preset": "gpt-22b", "layers": 2}, "gpu": A100,
                        "cluster": {"preset": "dgx-a100", "nodes": 1}, "global_batch": 8, "seq_len": 512,
                        "tp": [2, 4], "pp": [1], "micro_batch": [1], "keep": 2},
}

EXTREMES: list[Any] = [0, -1, 1, 3, 2**31, 2**40, 2**53 + 1, 2**63 - 1, 2**64, -(2**63), 1e-300, 1e-9, 0.5,
                       1e300, -1e300, 1e15, 25, "x", "", None, [], {}, [0], True, False]


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _get(node: Any, path: tuple) -> Any:
    for p in path:
        node = node[p]
    return node


def _set(node: Any, path: tuple, value: Any) -> None:
    _get(node, path[:-1])[path[-1]] = copy.deepcopy(value)  # never share (or nest) a value


def _mutate(spec: dict[str, Any], rnd: random.Random, harsh: bool = False) -> None:
    paths = [p for p in _paths(spec) if p != ("kind",)]
    if harsh:  # grow the numbers that size the work
        paths = [p for p in paths if isinstance(_get(spec, p), (int, float)) and not isinstance(_get(spec, p), bool)] or paths
    if not paths:
        return
    path = rnd.choice(paths)
    old = _get(spec, path)
    r = rnd.random()
    if harsh and isinstance(old, (int, float)) and not isinstance(old, bool):
        new = old * rnd.choice([4, 16, 100, 1000, 2**16]) if old else rnd.choice([1, 64, 4096])
        _set(spec, path, int(new) if isinstance(old, int) else new)
        return
    if r < 0.45:
        _set(spec, path, rnd.choice(EXTREMES))
    elif r < 0.65 and isinstance(old, (int, float)) and not isinstance(old, bool):
        scale = rnd.choice([1e3, 1e6, 1e9, -1, 1e-6, 1.5])
        new = old * scale
        _set(spec, path, int(new) if isinstance(old, int) and abs(new) < 2**70 else new)
    elif r < 0.75:
        parent = _get(spec, path[:-1])
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    elif r < 0.85:
        parent = _get(spec, path[:-1])
        if isinstance(parent, dict):
            parent[rnd.choice(["bandwith_bytes_per_s", "extra", "layer", "nodes"])] = copy.deepcopy(rnd.choice(EXTREMES))
    elif r < 0.95 and isinstance(old, list):
        _set(spec, path, old * rnd.choice([0, 3, 50]))
    else:
        _set(spec, path, rnd.choice(["x", {"a": 1}, [1, "b"], -0.0]))


def cases(seed: int, n: int) -> list[dict[str, Any]]:
    """n specs from seed: every kind in turn, the first of each unmutated;
    then, in three rounds of four, 1 to 3 random mutations (extreme values,
    wrong types, deletions, unknown fields), and in the fourth 1 to 4
    "harsh" ones that multiply the numbers sizing the work (valid specs
    that are too big: the memory budget, the horizon and Ctrl-C)."""
    rnd = random.Random(seed)
    names = sorted(BASES)
    out = []
    for i in range(n):
        base = names[i % len(names)]
        spec = copy.deepcopy(BASES[base])
        if i >= len(names):
            harsh = (i // len(names)) % 4 == 3
            for _ in range(rnd.choice([1, 2, 3, 4] if harsh else [1, 1, 1, 2, 3])):
                _mutate(spec, rnd, harsh)
        out.append(spec)
    return out


# ---- the worker: runs cases read from stdin, one JSON line of outcome each

_WORKER = r"""
import json, math, os, resource, signal, sys, threading
cap = int(sys.argv[1]); watchdog = float(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
signal.signal(signal.SIGINT, signal.default_int_handler)
import pyarrow as pa, pyarrow.compute as pc
import eidolon

def nonfinite(tables):
    bad = []
    for name, t in tables.items():
        for col, arr in zip(t.column_names, t.columns):
            if pa.types.is_floating(arr.type):
                n = pc.sum(pc.cast(pc.invert(pc.is_finite(arr)), pa.int64())).as_py() or 0
                if n:
                    bad.append(f"{name}.{col}: {n} non-finite")
    return bad

for line in sys.stdin:
    i, spec = json.loads(line)
    print(json.dumps({"i": i, "outcome": "started"}), flush=True)
    timer = threading.Timer(watchdog, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        try:
            tables = eidolon.run(spec, progress=False).tables
        finally:
            timer.cancel()
        bad = nonfinite(tables)
        res = {"outcome": "nonfinite", "detail": "; ".join(bad)} if bad else {"outcome": "ok"}
    except KeyboardInterrupt:
        res = {"outcome": "canceled"}
    except eidolon.SpecError as e:
        res = {"outcome": "spec_error", "detail": str(e)[:300]}
    except eidolon.SimulationError as e:
        res = {"outcome": "simulation_error", "detail": str(e)[:300]}
    except eidolon.InternalError as e:
        res = {"outcome": "internal_error", "detail": str(e)[:600]}
    except BaseException as e:
        res = {"outcome": "foreign", "detail": f"{type(e).__name__}: {e}"[:600]}
    res["i"] = i
    print(json.dumps(res), flush=True)
"""

GOOD = {"ok", "canceled", "spec_error", "simulation_error"}


def run_cases(specs: list[dict[str, Any]], workers: int = 2) -> list[dict[str, Any]]:
    """Every case's outcome, in case order."""
    results: dict[int, dict[str, Any]] = {}
    todo = list(range(len(specs)))
    lock = threading.Lock()

    def worker_loop() -> None:
        while True:
            with lock:
                batch = todo[:200]
                del todo[:200]
            if not batch:
                return
            while batch:
                batch = _run_batch(specs, batch, results)

    threads = [threading.Thread(target=worker_loop) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[i] for i in range(len(specs))]


def _run_batch(specs, batch: list[int], results: dict[int, dict[str, Any]]) -> list[int]:
    """Run batch in one worker process; return the cases left when it died."""
    env = dict(os.environ, GOMAXPROCS="1", GOGC="50")
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(MEMORY_CAP_BYTES), str(WATCHDOG_S)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout] + [lines.put(None)], daemon=True).start()
    err_tail: list[str] = []
    threading.Thread(target=lambda: [err_tail.append(ln) for ln in proc.stderr], daemon=True).start()
    try:
        for i in batch:
            proc.stdin.write(json.dumps([i, specs[i]]) + "\n")
        proc.stdin.close()
    except BrokenPipeError:
        pass  # it died at once: read what it said, below
    current, started = None, 0.0
    while True:
        try:
            ln = lines.get(timeout=WATCHDOG_S + HANG_S + 30)
        except queue.Empty:
            ln = "HANG"
        if ln == "HANG" or (current is not None and time.monotonic() - started > WATCHDOG_S + HANG_S + 30):
            proc.kill()
            proc.wait()
            if current is not None:
                results[current] = {"i": current, "outcome": "hang"}
            return [i for i in batch if i not in results]
        if ln is None:  # the worker exited
            proc.wait()
            left = [i for i in batch if i not in results]
            if current is None and left and proc.returncode != 0:
                # It died between cases (or before the first): blame the
                # next one, so that a worker that cannot start ends the
                # run instead of being restarted forever.
                current = left[0]
            if current is not None:
                text = "".join(err_tail)
                head = text[: text.find("goroutine ")] if "goroutine " in text else text
                tail = head[-1500:]
                results[current] = {"i": current, "outcome": "crash", "detail": f"exit {proc.returncode}: {tail}"}
            return [i for i in batch if i not in results]
        try:
            msg = json.loads(ln)
        except json.JSONDecodeError:
            proc.kill()
            proc.wait()
            i = current if current is not None else next(i for i in batch if i not in results)
            results[i] = {"i": i, "outcome": "crash", "detail": f"the worker wrote {ln[:300]!r}"}
            return [i for i in batch if i not in results]
        if msg["outcome"] == "started":
            current, started = msg["i"], time.monotonic()
            continue
        results[msg["i"]] = msg
        current = None


def summarize(specs, results) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    return counts


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--cases", type=int, default=2200)
    ap.add_argument("--case", type=int, help="run only this case (print its spec)")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    specs = cases(a.seed, max(a.cases, (a.case or 0) + 1))
    idx = [a.case] if a.case is not None else list(range(a.cases))
    sel = [specs[i] for i in idx]
    start = time.monotonic()
    res = run_cases(sel, a.workers)
    print(f"{len(sel)} cases in {time.monotonic() - start:.1f} s: {summarize(sel, res)}")
    for i, r in zip(idx, res):
        if r["outcome"] not in GOOD or a.case is not None:
            print(i, r["outcome"], r.get("detail", ""), json.dumps(specs[i])[:400])
