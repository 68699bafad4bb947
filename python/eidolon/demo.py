"""The demo behind `make demo`: one small run of each scenario, tables printed, plots in out/.

python -m eidolon.demo --out out
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd

import eidolon


def show(title: str, df: pd.DataFrame, rows: int = 12) -> None:
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.4g}".format):
        print(f"\n=== {title}")
        print(df.head(rows).to_string(index=False))


def _plt() -> Any:  # matplotlib.pyplot, imported only when a demo plots
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def demo_presets(out: Path) -> None:
    gpus = eidolon.presets.gpus().to_pandas()
    gpus["ridge_bf16_flop_per_byte"] = gpus.peak_bf16_flops_per_s / gpus.hbm_bandwidth_bytes_per_s
    show("GPU presets", gpus[["name", "peak_bf16_flops_per_s", "hbm_bandwidth_bytes_per_s", "ridge_bf16_flop_per_byte"]])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(gpus.hbm_bandwidth_bytes_per_s / 1e12, gpus.peak_bf16_flops_per_s / 1e12)
    for _, g in gpus.iterrows():
        ax.annotate(g["name"], (g.hbm_bandwidth_bytes_per_s / 1e12, g.peak_bf16_flops_per_s / 1e12), fontsize=7)
    ax.set(xlabel="HBM TB/s", ylabel="BF16 TFLOP/s", title="GPU presets")
    fig.savefig(out / "gpus.png", dpi=100)
    plt.close(fig)


def demo_operators(out: Path) -> None:
    r = eidolon.run({"kind": "operators", "gpu": "h100-sxm", "model": "llama2-7b", "batch": 1,
                     "seq_len": 4096, "phase": "training"}, progress=False)
    ops = r.to_pandas("operators").sort_values("time_s", ascending=False)
    show("operators: LLaMA-2-7B training step on one H100, costliest operators", ops, 10)
    show("operators: summary", r.to_pandas("summary")[["model", "gpu", "time_s", "flops", "flops_utilization", "tokens_per_s"]])


def demo_calibrate(out: Path) -> None:
    # Stand-in measurements (a profiler's table in practice): the forward
    # GEMMs of two LLaMA-2-7B steps timed on an H100 whose main loop runs at
    # 60 % of its peak; calibrate finds that part again from the preset.
    part = {"preset": "h100-sxm", "tensor_efficiency": 0.6}
    rows = []
    for seq in (512, 4096):
        ops = eidolon.run({"kind": "operators", "gpu": part, "model": "llama2-7b", "batch": 1, "seq_len": seq},
                          progress=False).to_pandas("operators")
        rows.append(ops[(ops.kind == "gemm") & (ops["pass"] == "forward")])
    gemms = pd.concat(rows)
    kernels = [{"op": "gemm", "m": int(m), "n": int(n), "k": int(k), "time_s": t}
               for (m, n, k), t in zip((s.split("x") for s in gemms["shape"]), gemms["time_s"])]
    r = eidolon.calibrate(kernels, gpu="h100-sxm", progress=False)
    show("calibrate: the H100 preset fitted to GEMMs timed on a slower part", r.to_pandas("figures"))
    show("calibrate: summary", r.to_pandas("summary")[["kernels", "held_out_kernels", "start_held_out_median_abs_error",
                                                       "fitted_held_out_median_abs_error", "gpu_spec"]])


def demo_collective(out: Path) -> None:
    r = eidolon.run({"kind": "collective", "cluster": {"preset": "dgx-h100", "nodes": 2},
                     "algorithms": ["nccl", "ring", "tree", "direct", "hierarchical"],
                     "sizes_bytes": [2**20, 2**24, 2**28, 2**30]}, progress=False)
    s = r.to_pandas("summary")
    show("collective: all-reduce on 2 DGX-H100 nodes (16 GPUs)", s[["algorithm", "size_bytes", "time_s", "busbw_bytes_per_s"]], 16)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for algo, g in s.groupby("algorithm"):
        ax.semilogx(g.size_bytes, g.busbw_bytes_per_s / 1e9, marker="o", label=algo)
    ax.set(xlabel="message size (bytes)", ylabel="busbw (GB/s)", title="all-reduce, 16 H100")
    ax.legend()
    fig.savefig(out / "collective_busbw.png", dpi=100)
    plt.close(fig)


def demo_seedflood(out: Path) -> None:
    # The paper's regime (arXiv 2602.18181): fine-tune a pre-trained model on 128 clients
    # of a ring; the same spec as notebook 06's default.
    r = eidolon.run({"kind": "seedflood", "seed": 1, "topology": {"kind": "ring", "clients": 128},
                     "model": {"kind": "softmax"},
                     "dataset": {"n_features": 1_000_000, "latent_dim": 8, "exact_subspace": True,
                                 "samples": 10_000, "classes": 10, "class_separation": 1.0},
                     "pretrain": {"kind": "source", "steps": 300, "shift": 0.5},
                     "methods": ["seedflood", "dsgd"], "steps": 200, "eval_every_steps": 10,
                     "learning_rate": 0.6, "first_order_learning_rate": 0.3, "subspace_rank": 8,
                     "link": "eth-100g", "step_time_s": 0.1}, progress=False)
    s = r.to_pandas("summary")
    seed, dsgd = s.set_index("method").loc["seedflood"], s.set_index("method").loc["dsgd"]
    show(f"seedflood: fine-tuning a pre-trained 10M-parameter model on 128 clients of a ring: "
         f"{100 * seed.final_accuracy / dsgd.final_accuracy:.1f} % of DSGD's accuracy at "
         f"1/{dsgd.total_bytes / seed.total_bytes:,.0f} of its bytes",
         s[["method", "params", "initial_accuracy", "final_accuracy", "total_bytes", "converged", "note"]])
    show("seedflood: bytes until 95 % of DSGD's best accuracy, and what those steps send at 1.3B parameters",
         r.to_pandas("bytes_to_accuracy")[["method", "target_accuracy", "reached", "step", "cumulative_bytes",
                                           "bytes_vs_seedflood", "projected_bytes"]])
    show("seedflood: bytes per round for a 1.3B-parameter model on 128 clients",
         r.to_pandas("projection")[["method", "bytes_per_round", "ratio_to_seedflood"]])


def demo_eidola(out: Path) -> None:
    r = eidolon.run({"kind": "eidola", "ghosts": 15, "injected_delays_s": [0, 2e-6, 10e-6]}, progress=False)
    s = r.to_pandas("summary")
    show("eidola: all-gather + GEMM on one H100 with 15 ghost peers, polling against SyncMon",
         s[["mode", "injected_delay_s", "kernel_time_s", "polling_reads", "sm_idle_fraction"]])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode, g in s.groupby("mode"):
        ax.semilogy(g.injected_delay_s * 1e6, g.polling_reads, marker="o", label=mode)
    ax.set(xlabel="injected delay (us)", ylabel="polling reads", title="spin-wait against SyncMon")
    ax.legend()
    fig.savefig(out / "eidola_polling.png", dpi=100)
    plt.close(fig)


def demo_ssm_tp(out: Path) -> None:
    # The paper's check case: batch 16, an 8k prompt, 256 output tokens;
    # decode from CUDA graphs, int8 all-reduce fused (default) and unfused.
    r = eidolon.run({"kind": "ssm_tp", "model": "mamba-2.8b", "gpu": "a100-80gb-sxm",
                     "cluster": {"topology": "switch", "gpus": 4, "link": "nvlink3"},
                     "tp_degrees": [1, 2, 4], "quantization": ["none", "int8"],
                     "quantized_allreduce": ["fused", "unfused"], "batch": 16,
                     "prompt_lengths": [8192], "output_length": 256}, progress=False)
    t = r.to_pandas("throughput")
    base = t[t.allreduce_kernel == "nccl"].set_index("tp").tokens_per_s
    t["int8_gain"] = t.tokens_per_s / t.tp.map(base) - 1
    t = t[(t.tp > 1) | (t.allreduce_kernel == "nccl")]  # one GPU has no all-reduce
    show("ssm_tp: Mamba-2.8B on 4 A100 over NVLink, batch-request throughput and speed-up over one GPU"
         " (paper: 1.6-2.1x on 2, 2.6-4.0x on 4, +10-18% from quantized all-reduce)",
         t[["tp", "quantization", "allreduce_kernel", "ttft_s", "tpot_s", "tokens_per_s", "speedup", "int8_gain"]])
    m = r.to_pandas("memory")
    show("ssm_tp: memory per GPU", m[["tp", "prompt_tokens", "weights_bytes", "state_cache_bytes",
                                      "longest_prompt_tokens", "largest_batch"]])


def demo_training(out: Path) -> None:
    r = eidolon.run({"kind": "training", "model": "gpt3-175b", "gpu": "a100-80gb-sxm",
                     "cluster": {"preset": "dgx-a100", "nodes": 8},
                     "parallel": {"tp": 8, "pp": 8, "global_batch": 64, "virtual_stages": 3,
                                  "sequence_parallel": True, "recompute": "selective"},
                     "dtype": "fp16", "unfused_attention": True}, progress=False)
    show("training: one GPT-3 175B step on 64 A100 (TP 8, PP 8 interleaved, SP + selective recompute)",
         r.to_pandas("summary")[["step_time_s", "tokens_per_s", "mfu", "compute_s", "exposed_comm_s", "bubble_s",
                                 "memory_peak_bytes", "fits"]])
    m = r.to_pandas("memory").query("stage == 0")
    show("training: memory per GPU of the first stage", m[["category", "bytes"]])
    print("Perfetto trace:", r.to_perfetto(out / "training_step_trace.json"))


def demo_inference(out: Path) -> None:
    rows = []
    for tp in (1, 2, 4, 8):
        r = eidolon.run({"kind": "inference", "model": "llama2-7b", "gpu": "a100-80gb-sxm",
                         "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": tp, "batch": 1,
                         "prompt_tokens": 200, "output_tokens": 200, "dtype": "fp16"}, progress=False)
        rows.append(r.to_pandas("summary").assign(tp=tp))
    show("inference: LLaMA-2-7B, batch 1, 200 + 200 tokens on A100 by TP degree",
         pd.concat(rows)[["tp", "ttft_s", "tpot_s", "e2e_s", "tokens_per_s", "memory_peak_bytes", "longest_prompt_tokens"]])


def demo_serving(out: Path) -> None:
    rows = []
    for rate in (5, 20, 35):
        r = eidolon.run({"kind": "serving", "model": "llama3-8b", "gpu": "a100-80gb-sxm",
                         "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": 2, "slo": {"ttft_s": 0.5, "itl_s": 0.05},
                         "workload": {"rate_per_s": rate, "requests": 600, "warmup_requests": 60,
                                      "prompt_tokens": {"dist": "lognormal", "tokens": 1000, "sigma": 0.5},
                                      "output_tokens": {"dist": "uniform", "min_tokens": 16, "max_tokens": 256}}},
                        progress=False)
        rows.append(r.to_pandas("summary").assign(rate_per_s=rate))
    show("serving: Llama-3-8B on 2 A100 (TP 2), Poisson arrivals: latency against load",
         pd.concat(rows)[["rate_per_s", "requests_per_s", "ttft_s_p50", "ttft_s_p99", "itl_s_p50", "itl_s_p99",
                          "slo_attainment", "kv_utilization_mean"]])
    spec_rows = []
    for clients in (1, 16, 64):
        for k in (0, 2, 4):
            engine = {"speculative": {"method": "ngram", "num_speculative_tokens": k, "per_token_acceptance": 0.7}} if k else {}
            s = eidolon.run({"kind": "serving", "model": "llama3-8b", "gpu": "a100-80gb-sxm",
                             "cluster": {"preset": "dgx-a100", "nodes": 1}, "tp": 2, "engine": engine,
                             "workload": {"arrival": "closed_loop", "concurrency": clients, "requests": 4 * clients + 8,
                                          "prompt_tokens": {"tokens": 1000}, "output_tokens": {"tokens": 200}}},
                            progress=False).to_pandas("summary").iloc[0]
            spec_rows.append({"clients": clients, "drafts": k, "itl_ms": 1e3 * s.itl_s_mean,
                         "mean_acceptance_length": s.mean_acceptance_length, "output_tokens_per_s": s.output_tokens_per_s})
    show("serving: speculative decoding (n-gram drafts kept with probability 0.7 each): the gain shrinks with the clients",
         pd.DataFrame(spec_rows))


def demo_fault_sweep(out: Path) -> None:
    training = {"model": {"preset": "gpt-22b", "layers": 4}, "gpu": "a100-80gb-sxm",
                "cluster": {"preset": "dgx-a100", "nodes": 4},
                "parallel": {"tp": 8, "pp": 2, "dp": 2, "global_batch": 16}, "timeline_ranks": [-1]}
    rows = []
    faults: list[tuple[str, dict[str, Any]]] = [
        ("one cable at 25%", {"link_degradations": 1, "degraded_health": 0.25}),
        ("one cable failed", {"link_failures": 1})]
    for fault, extra in faults:
        r = eidolon.run({"kind": "fault_sweep", "seed": 1, "training": training, "samples": 40, **extra}, progress=False)
        rows.append(r.to_pandas("summary").assign(fault=fault))
    show("fault_sweep: 40 random single-cable faults of a training step on 32 A100s (TP 8, PP 2, DP 2)",
         pd.concat(rows)[["fault", "samples", "healthy_step_time_s", "failed_share", "slowdown_p50", "slowdown_p90",
                          "slowdown_p99", "slowdown_max"]])


# The demos, in the order they print.
DEMOS: list[Callable[[Path], None]] = [
    demo_presets,
    demo_operators,
    demo_calibrate,
    demo_collective,
    demo_seedflood,
    demo_eidola,
    demo_ssm_tp,
    demo_training,
    demo_inference,
    demo_serving,
    demo_fault_sweep,
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for fn in DEMOS:
        start = time.perf_counter()
        fn(out)
        print(f"({fn.__name__}: {time.perf_counter() - start:.2f} s)")
    print(f"\nplots written to {out.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
