"""Run many specs in parallel and concatenate their tables.

The default executor is a process pool on this machine (spawned, not forked:
a forked child of a process running the Go runtime would hang). Any
``concurrent.futures.Executor`` works, e.g. a Dask cluster's
``client.get_executor()``, so the same call scales past one machine.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
import traceback
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pyarrow as pa

from .api import SpecLike, SweepResult, _plain, load_spec
from .errors import SpecError

POINTS = "points"


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def varying_parameters(specs: list[dict[str, Any]]) -> list[str]:
    """The dotted spec keys whose values differ between specs, in first-seen order."""
    flat = [_flatten(s) for s in specs]
    keys: list[str] = []
    for f in flat:
        keys.extend(k for k in f if k not in keys)
    canon = [{k: json.dumps(f.get(k), sort_keys=True, default=repr) for k in keys} for f in flat]
    return [k for k in keys if len({c[k] for c in canon}) > 1]


def point_key(spec: Mapping[str, Any]) -> str:
    """A stable identity for a spec, used to skip points already in a store.

    It hashes the engine's version and the spec after defaults, so results
    of an older version are not returned as current, and spelling out a
    default value finds the same stored point. An invalid spec (never
    stored) is keyed by its text.
    """
    from . import _engine
    from .api import _to_json
    from .errors import SpecError

    try:
        canon: Any = json.loads(_engine.canonical_json(_to_json(spec)))
    except SpecError:
        canon = spec
    doc = {"eidolon_version": _engine.engine_version(), "spec": canon}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def run_point(spec: dict[str, Any]) -> tuple[dict[str, pa.Table] | None, str, float]:
    """Run one spec in a worker: (tables or None, error text, wall seconds)."""
    from . import api

    start = time.perf_counter()
    try:
        tables = api.run(spec, progress=False).tables
        return tables, "", time.perf_counter() - start
    except Exception as exc:  # a failing point is reported in its row
        return None, f"{type(exc).__name__}: {exc}", time.perf_counter() - start


def _param_value(v: Any, text: bool = False) -> Any:
    """A parameter's cell: the value, or its JSON text where it is no
    scalar or its column is text (``text``)."""
    if v is None or (isinstance(v, (int, float, str, bool)) and not text):
        return v
    return json.dumps(v, sort_keys=True, default=repr)


def _text_params(flat: list[dict[str, Any]], params: list[str]) -> set[str]:
    """The parameters whose values are not all booleans, all numbers or all
    strings (``tp`` 2 in one spec and ``[2, 4]`` in another): their columns
    hold every value as JSON text, so that the points' tables concatenate."""

    def kind(v: Any) -> str | None:
        if v is None:
            return None
        if isinstance(v, bool):
            return "bool"
        return "number" if isinstance(v, (int, float)) else "str" if isinstance(v, str) else "json"

    out = set()
    for p in params:
        kinds = {kind(f.get(p)) for f in flat} - {None}
        if len(kinds) > 1 or "json" in kinds:
            out.add(p)
    return out


def _plain_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with NumPy and pandas values as plain numbers and lists (so
    its parameters are columns of numbers), or as given where it holds
    what JSON cannot: its point then fails with the SpecError naming it."""
    problems: list[tuple[str, str]] = []
    plain = _plain(spec, "", problems)
    return spec if problems else plain


def _param_column(name: str, taken: Iterable[str]) -> str:
    """A parameter's column: its dotted path, or ``param_<path>`` where a
    result column (or a column the sweep adds) has that name already."""
    return name if name not in taken else f"param_{name}"


def _with_params(table: pa.Table, point: int, params: dict[str, Any], text: set[str]) -> pa.Table:
    """The table with a ``point`` column and the parameters' columns first.

    A parameter never overwrites data: one whose name a result column has
    (``tp`` in parallel_search's ``configs``) becomes ``param_tp``.
    """
    taken = set(table.column_names) | {"point"}
    point_col = "point" if "point" not in table.column_names else "sweep_point"
    cols = {point_col: pa.array([point] * table.num_rows, pa.int64())}
    for name, value in params.items():
        cols[_param_column(name, taken)] = pa.array([_param_value(value, name in text)] * table.num_rows)
    for name in table.column_names:
        cols[name] = table.column(name)
    return pa.table(cols)


class _Store:
    """A Parquet data set on disk: one file per (table, point); rerunning skips stored points."""

    def __init__(self, root: Path):
        self.root = root
        (root / POINTS).mkdir(parents=True, exist_ok=True)

    def done(self, key: str) -> bool:
        return (self.root / POINTS / f"{key}.parquet").exists()

    def write(self, key: str, tables: dict[str, pa.Table]) -> None:
        import pyarrow.parquet as pq

        for name, t in tables.items():
            (self.root / name).mkdir(exist_ok=True)
            tmp = self.root / name / f".{key}.tmp"
            pq.write_table(t, tmp)
            os.replace(tmp, self.root / name / f"{key}.parquet")  # points last: a crash never half-records a point

    def read(self, name: str, key: str) -> pa.Table:
        import pyarrow.parquet as pq

        return pq.read_table(self.root / name / f"{key}.parquet")

    def table_names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())


def _default_executor(workers: int | None = None) -> Executor:
    return ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn"))


def sweep(
    specs: Iterable[SpecLike],
    executor: Executor | None = None,
    progress: bool = True,
    store: str | os.PathLike[str] | None = None,
    _run_point: Callable[[dict[str, Any]], Any] = run_point,
) -> SweepResult:
    """Run every spec and concatenate their tables, as a :class:`SweepResult`.

    Each output table gains a ``point`` column (the spec's index) and one
    column per parameter that varies between specs (dotted paths such as
    ``cluster.nodes``). The ``points`` table has one row per spec: its
    parameters, ``ok``, ``error`` (why a point failed; the others go on) and
    ``wall_s``. With ``store``, finished points are appended to a Parquet data
    set in that folder and a rerun skips them; a failed point is never
    stored, so a rerun tries it again. A point whose worker process dies
    fails alone: the default pool is restarted and the other points run.
    Ctrl-C cancels what has not started and re-raises.

    >>> r = sweep([{"kind": "selftest", "iterations": n} for n in (10, 20)], executor=None, progress=False)
    >>> r["summary"].column("iterations").to_pylist()
    [10, 20]
    >>> r["points"].column_names
    ['point', 'iterations', 'ok', 'error', 'wall_s']
    """
    if isinstance(specs, (Mapping, str, bytes, os.PathLike)):
        raise SpecError(f"sweep takes a list of specs, got one {type(specs).__name__} (run one spec with eidolon.run)")
    spec_list = [_plain_spec(load_spec(s)) for s in specs]
    if not spec_list:
        raise SpecError("sweep needs at least one spec, got none")
    params = varying_parameters(spec_list)
    flat = [_flatten(s) for s in spec_list]
    text = _text_params(flat, params)
    keys = [point_key(s) for s in spec_list]
    st = _Store(Path(store)) if store is not None else None

    own = executor is None
    results: dict[int, tuple[dict[str, pa.Table] | None, str, float]] = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(spec_list), desc="sweep")

    def finish(i: int, result: tuple[dict[str, pa.Table] | None, str, float]) -> None:
        results[i] = result
        tables, err, wall = result
        if st is not None and not err:  # failures are never stored as done
            st.write(keys[i], {**(tables or {}), POINTS: _points_row(i, flat[i], params, text, err, wall)})
        if bar is not None:
            bar.update(1)

    todo: list[int] = []
    for i in range(len(spec_list)):
        if st is not None and st.done(keys[i]):
            results[i] = ({}, "", 0.0)
            if bar is not None:
                bar.update(1)
        else:
            todo.append(i)
    pool: Executor | None = None
    futures: dict[int, Any] = {}
    try:
        # With its own pool a dead worker breaks every pending future: the
        # pool is restarted and the unfinished points rerun one at a time
        # until the one that kills its worker is found (with one worker the
        # earliest unfinished point is the one that was running); then the
        # rest go back to the full pool.
        serial = False
        while todo:
            active = executor if executor is not None else _default_executor(1 if serial else None)
            pool = active
            futures = {i: active.submit(_run_point, spec_list[i]) for i in todo}
            broken = False
            order = {f: i for i, f in futures.items()}
            for fut in as_completed(order):
                i = order[fut]
                try:
                    finish(i, fut.result())
                except BrokenProcessPool as exc:
                    if not own:
                        finish(i, (None, f"{type(exc).__name__}: {exc}", 0.0))
                        continue
                    broken = True
                    break
                except Exception as exc:  # the worker itself failed
                    finish(i, (None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=1)}", 0.0))
            if own:
                active.shutdown(wait=False, cancel_futures=True)
                pool = None
            todo = [i for i in todo if i not in results]
            if not broken:
                break
            if serial:
                culprit = todo[0]
                finish(culprit, (None, "WorkerDied: the worker process running this point died (a crash or the memory limit)", 0.0))
                todo = todo[1:]
            serial = not serial
    except KeyboardInterrupt:
        if pool is not None:
            if own:
                _terminate(pool)
            else:
                for f in futures.values():
                    f.cancel()
        raise
    finally:
        if bar is not None:
            bar.close()
        if own and pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    return _collect(spec_list, flat, params, text, keys, results, st)


def _points_row(i: int, flat: dict[str, Any], params: list[str], text: set[str], err: str, wall: float) -> pa.Table:
    row: dict[str, Any] = {"point": [i]}
    for p in params:
        row[_param_column(p, ("point", "ok", "error", "wall_s"))] = [_param_value(flat.get(p), p in text)]
    row.update(ok=[not err], error=[err], wall_s=[wall])
    return pa.table(row)


def _collect(
    spec_list: list[dict[str, Any]],
    flat: list[dict[str, Any]],
    params: list[str],
    text: set[str],
    keys: list[str],
    results: dict[int, tuple[dict[str, pa.Table] | None, str, float]],
    st: _Store | None,
) -> SweepResult:
    per_table: dict[str, list[pa.Table]] = {}
    points = []
    for i in range(len(spec_list)):
        p = {k: flat[i].get(k) for k in params}
        if st is not None and not results[i][1] and st.done(keys[i]):
            names = [n for n in st.table_names() if (st.root / n / f"{keys[i]}.parquet").exists()]
            tables = {n: st.read(n, keys[i]) for n in names if n != POINTS}
            points.append(st.read(POINTS, keys[i]).set_column(0, "point", pa.array([i], pa.int64())))
        else:
            tables = results[i][0] or {}
            points.append(_points_row(i, flat[i], params, text, results[i][1], results[i][2]))
        for name, t in tables.items():
            per_table.setdefault(name, []).append(_with_params(t, i, p, text))
    out = {name: pa.concat_tables(ts, promote_options="permissive") for name, ts in per_table.items()}
    out[POINTS] = pa.concat_tables(points, promote_options="permissive")
    return SweepResult({"sweep": spec_list}, out)


def _terminate(pool: Executor) -> None:
    """Stop a process pool's workers at once (Ctrl-C must not wait for running points)."""
    procs = getattr(pool, "_processes", None) or {}
    for p in list(procs.values()):
        p.terminate()
