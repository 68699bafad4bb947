"""Benchmark and fidelity report: simulator wall time against problem size,
per scenario, and the fidelity tables against published reference figures.

    make bench                       # small sizes
    .venv/bin/python bench/report.py --full   # the sizes the issues name (minutes)

Wall times are measured here, around eidolon.run, on whatever machine runs it;
they are a report, never an assertion. The Go benchmarks (`go test -bench . ./bench`)
measure the core alone; the fidelity tables come from `go test -v -run Fidelity ./bench`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd

import eidolon

ROOT = Path(__file__).resolve().parent.parent


def timed(spec: dict[str, Any]) -> tuple[float, eidolon.Result]:
    start = time.perf_counter()
    r = eidolon.run(spec, progress=False)
    return time.perf_counter() - start, r


def collective_scale(full: bool) -> pd.DataFrame:
    """1 GiB ring all-reduce with congestion over N dgx-h100 nodes: one ring (the issue's
    benchmark; NCCL's default would run one ring per rail, 8x the flows)."""
    rows = []
    for nodes in [1, 16, 128] + ([512, 1024] if full else []):
        wall, r = timed({"kind": "collective", "cluster": {"preset": "dgx-h100", "nodes": nodes}, "sizes_bytes": [2**30],
                             "algorithms": ["ring"], "channels": 1})
        s = r.to_pandas("summary").iloc[0]
        rows.append({"gpus": nodes * 8, "wall_s": wall, "simulated_time_s": s.time_s, "busbw_GB_per_s": s.busbw_bytes_per_s / 1e9})
    return pd.DataFrame(rows)


def operators_scale(full: bool) -> pd.DataFrame:
    """Every operator of one training step of a model on one GPU."""
    rows = []
    for model in ["llama2-7b", "llama2-70b", "gpt3-175b"] + (["gpt-1t"] if full else []):
        wall, r = timed({"kind": "operators", "gpu": "h100-sxm", "model": model, "batch": 1, "seq_len": 4096, "phase": "training"})
        s = r.to_pandas("summary").iloc[0]
        rows.append({"model": model, "operators": r["operators"].num_rows, "wall_s": wall, "step_time_s": s.time_s})
    return pd.DataFrame(rows)


def seedflood_scale(full: bool) -> pd.DataFrame:
    """SeedFlood with SubCGE on a torus of clients; synthetic 10-class data."""
    rows = []
    for clients, hidden, steps in [(16, 64, 100), (128, 64, 100)] + ([(128, 1300, 500)] if full else []):
        spec = {"kind": "seedflood", "seed": 1, "topology": {"kind": "torus", "clients": clients},
                "model": {"kind": "mlp", "hidden": [hidden]}, "methods": ["seedflood"], "steps": steps,
                "batch_size": 1, "eval_every_steps": steps,
                "dataset": {"samples": 4096, "n_features": 784 if hidden > 64 else 32, "classes": 10}}
        wall, r = timed(spec)
        s = r.to_pandas("summary").iloc[0]
        rows.append({"clients": clients, "params": s.params, "steps": steps, "wall_s": wall,
                     "bytes_per_client_per_step": s.bytes_per_client_per_step,
                     "apply_madds_per_client_per_step": s.apply_madds_per_client_per_step})
    return pd.DataFrame(rows)


def ssm_tp_scale(full: bool) -> pd.DataFrame:
    """ssm_tp: Mamba-2.8B (and Falcon-Mamba-7B) on 4 A100, TP 1/2/4, none and int8, three prompts."""
    rows = []
    for model, output in [("mamba-2.8b", 32)] + ([("falcon-mamba-7b", 128)] if full else []):
        spec = {"kind": "ssm_tp", "model": model, "gpu": "a100-80gb-sxm",
                "cluster": {"topology": "switch", "gpus": 4, "link": "nvlink3"},
                "tp_degrees": [1, 2, 4], "quantization": ["none", "int8"], "batch": 8,
                "prompt_lengths": [512, 2048, 8192], "output_length": output}
        wall, r = timed(spec)
        t = r.to_pandas("throughput")
        rows.append({"model": model, "configurations": len(t), "output_tokens": output, "wall_s": wall,
                     "max_speedup_tp4": t[t.tp == 4].speedup.max()})
    return pd.DataFrame(rows)


def fault_sweep_scale(full: bool) -> pd.DataFrame:
    """Random single-cable faults (each drawn cable degraded to half, then failed) of a GPT-3 175B step, TP 8 x PP 8."""
    rows = []
    for nodes, cables in [(8, 10), (32, 25)] + ([(128, 150)] if full else []):
        wall, r = timed({"kind": "fault_sweep", "seed": 1, "mode": "single_link", "cables": cables, "degraded_health": 0.5,
                         "training": {"model": "gpt3-175b", "gpu": "a100-80gb-sxm",
                                      "cluster": {"preset": "dgx-a100", "nodes": nodes},
                                      "parallel": {"tp": 8, "pp": 8, "global_batch": 12 * nodes,
                                                   "sequence_parallel": True, "recompute": "selective"},
                                      "timeline_ranks": [-1]}})
        s = r.to_pandas("summary").iloc[0]
        rows.append({"gpus": nodes * 8, "samples": s.samples, "wall_s": wall, "wall_s_per_sample": wall / s.samples,
                     "failed_share": s.failed_share, "slowdown_p50": s.slowdown_p50, "slowdown_p99": s.slowdown_p99})
    return pd.DataFrame(rows)


def training_scale(full: bool) -> pd.DataFrame:
    """One GPT-3 175B step (TP 8, PP 8, SP + selective) on 64 / 1,024 / 8,192 A100s, healthy and with a degraded NIC link."""
    rows = []
    cases = [(8, 64, None), (128, 1536, None), (128, 1536, "n37.nic3")] + ([(1024, 1536, None)] if full else [])
    for nodes, batch, degraded in cases:
        spec = {"kind": "training", "model": "gpt3-175b", "gpu": "a100-80gb-sxm", "cluster": {"preset": "dgx-a100", "nodes": nodes},
                "parallel": {"tp": 8, "pp": 8, "global_batch": batch, "sequence_parallel": True, "recompute": "selective"},
                "timeline_ranks": [-1]}
        if degraded:
            spec["faults"] = {"links": [{"src": degraded, "dst": "rail3.leaf1", "health": 0.5}]}
        wall, r = timed(spec)
        s = r.to_pandas("summary").iloc[0]
        rows.append({"gpus": nodes * 8, "degraded_link": degraded or "", "wall_s": wall, "step_time_s": s.step_time_s,
                     "mfu": s.mfu, "simulated_ranks": s.simulated_ranks})
    if full:
        wall, r = timed({"kind": "parallel_search", "model": "gpt3-175b", "gpu": "a100-80gb-sxm",
                         "cluster": {"preset": "dgx-a100", "nodes": 128}, "global_batch": 1536})
        rows.append({"gpus": 1024, "degraded_link": "parallel_search (all layouts)", "wall_s": wall,
                     "step_time_s": r.to_pandas("configs").step_time_s.iloc[0], "mfu": r.to_pandas("configs").mfu.iloc[0],
                     "simulated_ranks": (r.to_pandas("configs").status == "simulated").sum()})
    return pd.DataFrame(rows)


# Run one spec in a fresh interpreter and report its wall time and the
# process's peak resident memory (the Go heap included).
_ONE_RUN = """
import json, resource, sys, time
import eidolon
spec = json.loads(sys.argv[1])
t = time.perf_counter()
r = eidolon.run(spec, progress=False)
wall = time.perf_counter() - t
s = r.to_pandas("summary").iloc[0]
print(json.dumps({"wall_s": wall, "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "step_time_s": float(s.step_time_s), "simulated_ranks": int(s.simulated_ranks)}))
"""


def largest_clusters(full: bool) -> pd.DataFrame:
    """GPT-3 175B (TP 8, PP 8, 12 sequences per node) and Llama 3.1 405B (TP 8, PP 16, as Meta ran it on
    16,384 H100s, and its long-context stage at CP 16), each in its own process: wall time and peak memory."""
    def gpt3(nodes: int) -> dict[str, Any]:
        return {"kind": "training", "model": "gpt3-175b", "gpu": "a100-80gb-sxm", "cluster": {"preset": "dgx-a100", "nodes": nodes},
                "parallel": {"tp": 8, "pp": 8, "micro_batch": 1, "global_batch": 12 * nodes, "sequence_parallel": True,
                             "recompute": "selective"}, "timeline_ranks": [-1]}
    llama = {"kind": "training", "model": "llama3-405b", "gpu": "h100-sxm", "cluster": {"preset": "dgx-h100", "nodes": 2048},
             "parallel": {"tp": 8, "pp": 16, "micro_batch": 1, "global_batch": 2048, "sequence_parallel": True},
             "seq_len": 8192, "dtype": "bf16", "timeline_ranks": [-1]}
    degraded = dict(llama, faults={"links": [{"src": "n1000.nic3", "dst": "rail3.leaf31", "health": 0.25}]})
    # Meta's long-context stage: CP 16 over 131,072-token sequences.
    long_context = dict(llama, parallel=dict(llama["parallel"], cp=16, global_batch=128), seq_len=131072)
    cases = [("gpt3-175b", 8 * 128, gpt3(128)), ("gpt3-175b", 8 * 1024, gpt3(1024))]
    if full:
        cases += [("gpt3-175b", 8 * 2048, gpt3(2048)), ("gpt3-175b", 8 * 8192, gpt3(8192)),
                  ("llama3-405b", 16384, llama), ("llama3-405b, one degraded cable", 16384, degraded),
                  ("llama3-405b, CP 16, 131,072 tokens", 16384, long_context)]
    rows = []
    for name, gpus, spec in cases:
        out = subprocess.run([sys.executable, "-c", _ONE_RUN, json.dumps(spec)], capture_output=True, text=True, check=True)
        rows.append({"model": name, "gpus": gpus, **json.loads(out.stdout.strip().splitlines()[-1])})
    return pd.DataFrame(rows)


def start_up(full: bool) -> pd.DataFrame:
    """Whole-process times: importing pyarrow, importing eidolon, and `python -m eidolon run` of a tiny spec and of a
    1,024-GPU 1 GiB ring all-reduce (best of 3)."""
    def best(cmd: list[str]) -> float:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True)
            times.append(time.perf_counter() - t)
        return min(times)
    rows = [{"what": "python -c 'import pyarrow'", "wall_s": best([sys.executable, "-c", "import pyarrow"])},
            {"what": "python -c 'import eidolon'", "wall_s": best([sys.executable, "-c", "import eidolon"])}]
    with tempfile.TemporaryDirectory() as d:
        for what, spec in [("run: selftest, 1,000 iterations", {"kind": "selftest", "iterations": 1000}),
                           ("run: 1 GiB ring all-reduce over 1,024 GPUs", {"kind": "collective", "cluster": {"preset": "dgx-h100", "nodes": 128},
                                                                        "sizes_bytes": [2**30], "algorithms": ["ring"], "channels": 1})]:
            path = Path(d) / "spec.json"
            path.write_text(json.dumps(spec))
            rows.append({"what": f"python -m eidolon {what}", "wall_s": best([sys.executable, "-m", "eidolon", "run", str(path)])})
    return pd.DataFrame(rows)


SECTIONS: list[tuple[str, Callable[[bool], pd.DataFrame]]] = [
    ("start-up: whole-process times", start_up),
    ("largest clusters: one training step per process (the 16,384- and 65,536-GPU cases with --full)", largest_clusters),
    ("training: one GPT-3 175B step (and, with --full, 8,192 GPUs and a layout search)", training_scale),
    ("operators: one training step's operators on one GPU", operators_scale),
    ("collective: 1 GiB ring all-reduce (one ring) on dgx-h100 nodes", collective_scale),
    ("seedflood: flooding ZO training with SubCGE on a torus", seedflood_scale),
    ("ssm_tp: SSM tensor-parallel inference configurations", ssm_tp_scale),
    ("fault_sweep: single-cable faults of a GPT-3 175B step (1,024 GPUs, 300 samples with --full)", fault_sweep_scale),
]


def fidelity() -> str:
    """The Go fidelity tables (reference figures against the model), as logged by the tests."""
    out = subprocess.run(
        ["go", "test", "-count=1", "-v", "-run", "Fidelity", "./bench", "./bench/fidelity"],
        cwd=ROOT, capture_output=True, text=True,
    )
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip().startswith(("bench", "net_test", "training", "ssm", "fidelity", "|")) or ".go:" in ln]
    return "\n".join(lines) if out.returncode == 0 else out.stdout + out.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="run the large sizes too")
    args = parser.parse_args()
    with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
        for title, fn in SECTIONS:
            print(f"\n=== {title}")
            print(fn(args.full).to_string(index=False))
    print("\n=== fidelity against published figures")
    print(fidelity())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
