"""eidolon.calibrate: a profiler's table in, a what-if GPU out."""

import pandas as pd
import pytest

import eidolon

PART = {"preset": "h100-sxm", "tensor_efficiency": 0.6, "hbm_efficiency": 0.7}


def measured() -> pd.DataFrame:
    """Stand-in measurements: LLaMA-2-7B's forward GEMMs and residual adds timed on PART."""
    rows = []
    for seq in (256, 1024, 4096):
        ops = eidolon.run({"kind": "operators", "gpu": PART, "model": "llama2-7b", "batch": 1, "seq_len": seq},
                          progress=False).to_pandas("operators")
        fwd = ops[ops["pass"] == "forward"]
        for _, o in fwd[fwd.kind == "gemm"].iterrows():
            m, n, k = (int(x) for x in o["shape"].split("x"))
            rows.append({"op": "gemm", "m": m, "n": n, "k": k, "time_s": o.time_s})
        add = fwd[fwd.op == "attn.residual"].iloc[0]
        rows.append({"op": "elementwise", "bytes": add.bytes_hbm, "time_s": add.time_s})
    return pd.DataFrame(rows)  # gemm rows have NaN bytes, elementwise rows NaN m, n, k


def test_calibrate_a_dataframe_and_use_the_part():
    df = measured()
    r = eidolon.calibrate(df, gpu="h100-sxm", progress=False)
    s = r.to_pandas("summary").iloc[0]
    assert s.kernels == len(df)
    assert s.start_held_out_median_abs_error > 0.05
    assert s.fitted_held_out_median_abs_error < 0.02
    figures = r.to_pandas("figures").set_index("figure").fitted
    assert figures["tensor_efficiency"] == pytest.approx(0.6, rel=0.05)
    assert figures["hbm_efficiency"] == pytest.approx(0.7, rel=0.05)
    gpu = eidolon.fitted_gpu(r)
    assert gpu["preset"] == "h100-sxm"
    step = {name: eidolon.run({"kind": "operators", "gpu": g, "model": "llama2-7b", "batch": 1, "seq_len": 2048},
                              progress=False).to_pandas("summary").time_s[0]
            for name, g in (("part", PART), ("fitted", gpu), ("preset", "h100-sxm"))}
    assert step["fitted"] == pytest.approx(step["part"], rel=0.02)
    assert abs(step["preset"] / step["part"] - 1) > 0.1


def test_calibrate_reports_bad_rows_by_index():
    with pytest.raises(eidolon.SpecError) as info:
        eidolon.calibrate([{"op": "gemm", "m": 64, "n": 64, "k": 64, "time_s": -1}], gpu="h100-sxm", progress=False)
    assert any(p.path == "kernels[0].time_s" for p in info.value.problems)


def test_fitted_gpu_needs_a_calibrate_run():
    with pytest.raises(ValueError, match="calibrate run, got a 'selftest' one"):
        eidolon.fitted_gpu(eidolon.run({"kind": "selftest", "iterations": 1}))
