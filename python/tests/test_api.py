"""The Python API end to end through the real extension."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import eidolon
from eidolon import _engine
from eidolon._native import bindings


def test_run_returns_arrow_tables_with_metadata():
    r = eidolon.run({"kind": "selftest", "iterations": 5000, "seed": 11})
    assert isinstance(r["summary"], pa.Table)
    assert r.to_pandas("summary")["iterations"].tolist() == [5000]
    meta = r.metadata
    assert meta["seed"] == "11"
    assert meta["kind"] == "selftest"
    assert meta["eidolon_version"] == eidolon.__version__
    assert json.loads(meta["spec"])["iterations"] == 5000
    assert 0 < float(meta["wall_s"]) < 60  # the run's wall time, measured in the bindings


def test_same_seed_same_tables():
    a = eidolon.run({"kind": "selftest", "iterations": 777, "seed": 3})
    b = eidolon.run({"kind": "selftest", "iterations": 777, "seed": 3})
    c = eidolon.run({"kind": "selftest", "iterations": 777, "seed": 4})
    assert a["summary"].equals(b["summary"])
    assert not a["summary"].equals(c["summary"])


def test_three_mistakes_one_spec_error():
    with pytest.raises(eidolon.SpecError) as info:
        eidolon.run({"kind": "selftest", "iteratons": 5, "seed": "x", "fail": 3})
    paths = [p for p, _ in info.value.problems]
    assert paths == ["fail", "iteratons", "seed"]
    text = str(info.value)
    assert "3 problems" in text and 'did you mean "iterations"?' in text
    assert isinstance(info.value, eidolon.EidolonError)


def test_validate_lists_problems_without_running():
    assert eidolon.validate({"kind": "selftest", "iterations": 0}) == []  # 0 means the default
    assert eidolon.validate({"kind": "seltest"})[0][0] == "kind"


def test_unknown_kind_suggests():
    with pytest.raises(eidolon.SpecError, match='did you mean "selftest"'):
        eidolon.run({"kind": "selftes"})


def test_simulation_error():
    with pytest.raises(eidolon.SimulationError, match="network partitioned"):
        eidolon.run({"kind": "selftest", "fail": "network partitioned"})


def test_forced_panic_is_recovered_and_interpreter_survives():
    with pytest.raises(eidolon.InternalError, match="nil map"):
        _engine.call(bindings.ForcePanic)
    with pytest.raises(eidolon.EidolonError, match="panic requested"):
        eidolon.run({"kind": "selftest", "panic": True})
    assert eidolon.run({"kind": "selftest", "iterations": 10})["summary"].num_rows == 1


def test_keyboard_interrupt_cancels_within_a_second():
    """A real SIGINT, as Ctrl-C or Jupyter's stop button sends, stops a long run.

    In a child process with a hard timeout, so it cannot hang where SIGINT
    was ignored at start (a background job of a non-interactive shell): the
    child restores Python's handler first.
    """
    from sigint import interrupt_run

    elapsed = interrupt_run({"kind": "selftest", "iterations": 10**14})
    # Not a timing assertion on the simulator: a bound on the cancellation path, which
    # would otherwise run for hours.
    assert elapsed < 2


def test_progress_reaches_one():
    seen = []
    _engine.run_json(json.dumps({"kind": "selftest", "iterations": 30_000_000}), seen.append)
    assert seen[-1] == 1.0
    assert seen == sorted(seen)


def test_spec_from_json_and_yaml_files(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"kind": "selftest", "iterations": 9}))
    (tmp_path / "s.yaml").write_text("kind: selftest\niterations: 9\n")
    a = eidolon.run(tmp_path / "s.json")
    b = eidolon.run(str(tmp_path / "s.yaml"))
    assert a["summary"].equals(b["summary"])
    with pytest.raises(eidolon.SpecError, match="not found"):
        eidolon.run(tmp_path / "missing.json")
    with pytest.raises(eidolon.SpecError, match="got int"):
        eidolon.run(42)


def test_unserializable_spec_is_a_spec_error_naming_the_path():
    with pytest.raises(eidolon.SpecError) as info:
        eidolon.run({"kind": "selftest", "iterations": float("nan")})
    assert info.value.problems[0][0] == "iterations" and "finite" in str(info.value)
    bad = {"kind": "selftest", "iterations": {1, 2}, "fail": [1, float("inf")], "name": {3: "x"}}
    problems = eidolon.validate(bad)
    assert [p for p, _ in problems] == ["iterations", "fail[1]", "name"]
    with pytest.raises(eidolon.SpecError, match="3 problems"):
        eidolon.run(bad)


def test_numpy_and_pandas_values_are_numbers():
    """What a DataFrame hands over (``df.x.iloc[0]`` is an int64, ``unique()`` an array)."""
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    plain = eidolon.run({"kind": "selftest", "iterations": 500, "seed": 2})
    r = eidolon.run({"kind": "selftest", "iterations": np.int64(500), "seed": pd.Series([2]).iloc[0]})
    assert r["summary"].equals(plain["summary"])
    assert json.loads(r.metadata["spec"])["iterations"] == 500
    assert r.spec == {"kind": "selftest", "iterations": 500, "seed": 2}  # plain: save() writes it as JSON
    spec = {"kind": "collective", "cluster": {"topology": "ring", "gpus": np.int32(4), "link": "nvlink4"},
            "sizes_bytes": np.array([1e6, 1e7]), "algorithms": pd.Series(["ring"])}
    assert eidolon.run(spec)["summary"].num_rows == 2
    with pytest.raises(eidolon.SpecError, match="iterations: must be an integer, got 2.5"):
        eidolon.run({"kind": "selftest", "iterations": np.float32(2.5)})


def test_save_writes_parquet(tmp_path):
    r = eidolon.run({"kind": "selftest", "iterations": 100})
    paths = r.save(tmp_path / "out")
    assert [p.name for p in paths] == ["summary.parquet"]
    assert pq.read_table(paths[0]).equals(r["summary"])
    assert json.loads((tmp_path / "out" / "spec.json").read_text())["iterations"] == 100


def test_presets_tables():
    gpus = eidolon.presets.gpus().to_pandas()
    h100 = gpus.set_index("name").loc["h100-sxm"]
    assert h100["peak_bf16_flops_per_s"] == pytest.approx(989e12, rel=0.01)  # reference README
    assert eidolon.presets.links().num_rows >= 10
    with pytest.raises(eidolon.SpecError, match="catalog"):
        eidolon.presets.catalog("gpu")


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "eidolon", *args], capture_output=True, text=True, cwd=cwd)


def test_cli(tmp_path):
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"kind": "selftest", "iterations": 3}))
    out = run_cli("run", str(spec), "--out", str(tmp_path / "o"))
    assert out.returncode == 0, out.stderr
    assert "== summary (1 rows)" in out.stdout
    assert (tmp_path / "o" / "summary.parquet").exists()
    spec.write_text(json.dumps({"kind": "selftest", "iterations": -3}))
    bad = run_cli("validate", str(spec))
    assert bad.returncode == 1 and "iterations: must be in" in bad.stdout
    assert run_cli("run", str(spec)).returncode == 2
    pre = run_cli("presets", "gpus")
    assert pre.returncode == 0 and "h100-sxm" in pre.stdout
    figs = run_cli("presets", "gpu_figures")
    assert figs.returncode == 0 and "hbm_bandwidth_bytes_per_s" in figs.stdout
    assert "selftest" in run_cli("kinds").stdout


def test_cli_output_into_a_closed_pipe(tmp_path):
    # `python -m eidolon run ... --out DIR | head -1`: the reader stops
    # early; the command ends quietly, not with a BrokenPipeError traceback,
    # and has written its tables to DIR all the same. The tables print about
    # 480 KB, far more than a pipe holds, so the writer does meet the closed
    # pipe.
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"kind": "collective", "cluster": {"preset": "dgx-h100", "nodes": 4},
                                "sizes_bytes": [1e6, 1e8, 1e9], "algorithms": ["ring", "tree", "direct"]}))
    proc = subprocess.Popen([sys.executable, "-m", "eidolon", "run", str(spec), "--rows", "1000000",
                             "--out", str(tmp_path / "o")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err
    assert {p.name for p in (tmp_path / "o").iterdir()} >= {"summary.parquet", "links.parquet", "spec.json"}


def test_seedflood_summary_reports_wall_time_per_method():
    r = eidolon.run({"kind": "seedflood", "topology": {"kind": "ring", "clients": 4}, "steps": 3,
                     "methods": ["seedflood", "dsgd"], "dataset": {"samples": 60, "n_features": 3, "classes": 2}},
                    progress=False)
    wall = r.to_pandas("summary")["wall_s"]
    assert wall.notna().all() and (wall >= 0).all()
    assert wall.sum() <= float(r.metadata["wall_s"])


def test_gopy_garbage_collector_hooks_are_removed():
    """gopy's modules hook Python's collector to run Go's full collection
    after every Python collection; once the engine has been called, none
    of its hooks remain, so Python code in the process does not pay for the
    Go heap."""
    import gc

    eidolon.run({"kind": "selftest", "iterations": 10}, progress=False)
    from eidolon._native import bindings, go  # noqa: F401  (both install a hook on import)

    _engine.call(bindings.EngineVersion)
    assert not [cb for cb in gc.callbacks if getattr(cb, "__module__", "").startswith("eidolon._native")]


def test_long_lists_of_numbers_are_checked_at_every_element():
    """A long list of plain numbers passes as it is; one that is not finite
    is still named at its index, wherever it is."""
    from eidolon.api import _to_json

    xs = [float(i) for i in range(100_000)]
    assert json.loads(_to_json({"v": xs}))["v"] == xs
    xs[99_999] = float("nan")
    with pytest.raises(eidolon.SpecError) as err:
        _to_json({"v": xs})
    assert [p.path for p in err.value.problems] == ["v[99999]"]
    assert json.loads(_to_json({"v": [1e308, 1e308, 2]}))["v"] == [1e308, 1e308, 2]  # fsum overflows: checked one by one
