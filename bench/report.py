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
import subprocess
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


SECTIONS: list[tuple[str, Callable[[bool], pd.DataFrame]]] = [
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
