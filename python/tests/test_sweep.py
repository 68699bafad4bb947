"""eidolon.sweep: local pool, any Executor (Dask included), failures, resume."""

from concurrent.futures import ThreadPoolExecutor

import pytest

import eidolon
from eidolon.sweep import varying_parameters


def specs(n=4):
    return [{"kind": "selftest", "iterations": 1000 * (i + 1), "seed": 1} for i in range(n)]


def test_varying_parameters():
    assert varying_parameters([{"a": {"b": 1, "c": 2}}, {"a": {"b": 2, "c": 2}}]) == ["a.b"]
    assert varying_parameters([{"x": [1, 2]}, {"x": [1, 2]}]) == []


def test_sweep_concatenates_in_point_order_with_parameter_columns():
    r = eidolon.sweep(specs(), progress=False)
    summary = r.to_pandas("summary")
    assert summary["point"].tolist() == [0, 1, 2, 3]
    assert summary["iterations"].tolist() == [1000, 2000, 3000, 4000]
    single = [eidolon.run(s)["summary"].column("checksum")[0].as_py() for s in specs()]
    assert summary["checksum"].tolist() == single


def test_a_failing_point_is_reported_and_the_rest_goes_on():
    pts = specs(3)
    pts[1] = {"kind": "selftest", "fail": "link 7 down", "seed": 1}
    r = eidolon.sweep(pts, executor=ThreadPoolExecutor(2), progress=False)
    points = r.to_pandas("points")
    assert points["ok"].tolist() == [True, False, True]
    assert "SimulationError: link 7 down" in points["error"][1]
    assert r.to_pandas("summary")["point"].tolist() == [0, 2]


@pytest.mark.parametrize("specs,says", [([], "at least one spec"), ({"kind": "selftest"}, "list of specs, got one dict")])
def test_a_sweep_of_no_specs_or_of_one_spec_says_what_it_takes(specs, says):
    with pytest.raises(eidolon.SpecError, match=says):
        eidolon.sweep(specs, progress=False)


def test_numpy_parameters_are_numbers_and_mixed_ones_text():
    np = pytest.importorskip("numpy")
    pts = [{"kind": "selftest", "iterations": n, "seed": 1} for n in np.array([1000, 2000])]
    pts.append({"kind": "selftest", "iterations": [3000], "seed": 1})  # a list where a number goes: fails alone
    pts.append({"kind": "selftest", "iterations": {4000}, "seed": 1})  # a set: JSON cannot hold it
    r = eidolon.sweep(pts, executor=ThreadPoolExecutor(2), progress=False)
    points = r.to_pandas("points")
    assert points["ok"].tolist() == [True, True, False, False]
    assert "iterations: must be an integer" in points["error"][2]
    assert "iterations: must be a number, string, boolean, list, mapping or null, got set" in points["error"][3]
    assert points["iterations"].tolist()[:3] == ["1000", "2000", "[3000]"]  # one column type: text
    summary = r.to_pandas("summary")
    assert summary["checksum"].tolist() == [eidolon.run(p)["summary"].column("checksum")[0].as_py() for p in pts[:2]]
    plain = eidolon.sweep(pts[:2], executor=ThreadPoolExecutor(2), progress=False).to_pandas("points")
    assert plain["iterations"].tolist() == [1000, 2000] and plain["iterations"].dtype == "int64"


def test_store_resumes(tmp_path):
    first = eidolon.sweep(specs(2), executor=ThreadPoolExecutor(1), progress=False, store=tmp_path)
    assert first["points"]["wall_s"].to_pylist()[0] > 0
    again = eidolon.sweep(specs(3), executor=ThreadPoolExecutor(1), progress=False, store=tmp_path)
    summary = again.to_pandas("summary")
    assert summary["iterations"].tolist() == [1000, 2000, 3000]
    # the two stored points were not rerun: their wall time is the stored one
    assert again["points"]["wall_s"].to_pylist()[:2] == first["points"]["wall_s"].to_pylist()


def test_dask_cluster_gives_the_same_table():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            remote = eidolon.sweep(specs(), executor=client.get_executor(), progress=False)
    local = eidolon.sweep(specs(), executor=ThreadPoolExecutor(2), progress=False)
    assert remote["summary"].equals(local["summary"])


def test_keyboard_interrupt_stops_the_default_pool():
    import os
    import signal
    import threading
    import time

    long = [{"kind": "selftest", "iterations": 10**14, "seed": i} for i in range(4)]
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        eidolon.sweep(long, progress=False)
    timer.join()
    assert time.monotonic() - start < 10  # the points would otherwise run for hours
    assert eidolon.run({"kind": "selftest", "iterations": 5})["summary"].num_rows == 1


def crash_on_13(spec):
    """A sweep worker that dies (as a Go fatal error would) on one point."""
    import os

    from eidolon.sweep import run_point

    if spec.get("iterations") == 13:
        os._exit(3)
    return run_point(spec)


def test_a_point_that_kills_its_worker_fails_alone_and_is_not_stored(tmp_path):
    import importlib

    sw = importlib.import_module("eidolon.sweep")

    pts = [{"kind": "selftest", "iterations": n, "seed": 1} for n in (10, 13, 20, 30)]
    r = sw.sweep(pts, progress=False, store=tmp_path, _run_point=crash_on_13)
    points = r.to_pandas("points")
    assert points["ok"].tolist() == [True, False, True, True]
    assert "WorkerDied" in points["error"][1]
    assert r.to_pandas("summary")["iterations"].tolist() == [10, 20, 30]
    # the failure was not stored as done: a rerun tries it again (and it now succeeds)
    again = sw.sweep(pts, progress=False, store=tmp_path, executor=ThreadPoolExecutor(1))
    assert again.to_pandas("points")["ok"].tolist() == [True, True, True, True]
    assert again.to_pandas("summary")["iterations"].tolist() == [10, 13, 20, 30]


def test_parameter_columns_never_overwrite_result_columns():
    # "iterations" is both a varying parameter and a summary column: the data stays
    # under its own name, the parameter gets a prefix only where it collides
    pts = [{"kind": "selftest", "iterations": n, "seed": s} for n, s in ((10, 1), (20, 2))]
    r = eidolon.sweep(pts, executor=ThreadPoolExecutor(1), progress=False)
    summary = r.to_pandas("summary")
    assert summary["iterations"].tolist() == [10, 20]
    assert summary["param_iterations"].tolist() == [10, 20]
    assert summary["seed"].tolist() == [1, 2]  # no summary column named seed: no prefix
    assert "iterations_" not in summary.columns
    assert r["points"].column_names == ["point", "iterations", "seed", "ok", "error", "wall_s"]


def test_store_key_is_the_spec_after_defaults_and_the_version(monkeypatch):
    from eidolon import _engine
    from eidolon.sweep import point_key

    default = {"kind": "selftest"}
    spelled = {"kind": "selftest", "iterations": 1_000_000}
    assert point_key(default) == point_key(spelled)
    assert point_key(default) != point_key({"kind": "selftest", "iterations": 7})
    monkeypatch.setattr(_engine, "engine_version", lambda: "0.0.1-old")
    old = point_key(default)
    monkeypatch.undo()
    assert old != point_key(default)
