"""The demo behind `make demo`: one small run of each scenario, tables printed, plots in out/.

python -m eidolon.demo --out out
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable

import pandas as pd

import eidolon


def show(title: str, df: pd.DataFrame, rows: int = 12) -> None:
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.4g}".format):
        print(f"\n=== {title}")
        print(df.head(rows).to_string(index=False))


def _plt():
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


# Each demo is (scenario kind it needs, function). A demo runs when its kind
# is in this build; the presets demo needs none.
DEMOS: list[tuple[str | None, Callable[[Path], None]]] = [
    (None, demo_presets),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    known = {k["name"] for k in eidolon.kinds()}
    for kind, fn in DEMOS:
        if kind is not None and kind not in known:
            continue
        start = time.perf_counter()
        fn(out)
        print(f"({fn.__name__}: {time.perf_counter() - start:.2f} s)")
    print(f"\nplots written to {out.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
