"""The user API: run a spec, validate it, hold the result tables."""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Union

import pyarrow as pa

from . import _engine
from .errors import Problem, SpecError, spec_error

if TYPE_CHECKING:  # pandas is imported lazily
    import pandas as pd

SpecLike = Union[Mapping[str, Any], str, "os.PathLike[str]"]


def load_spec(spec: SpecLike) -> dict[str, Any]:
    """Return a spec as a dict: from a dict, or from a JSON or YAML file path.

    Anything else, a file that does not parse, or a document that is not a
    mapping raises :class:`SpecError` (never a parser's own exception).

    >>> load_spec([{"kind": "selftest"}])
    Traceback (most recent call last):
    ...
    eidolon.errors.SpecError: a spec must be a dict or a path to a JSON/YAML file, got list
    """
    if isinstance(spec, Mapping):
        return dict(spec)
    if isinstance(spec, (str, os.PathLike)):
        path = Path(spec)
        if not path.is_file():
            raise SpecError(f"spec file not found: {path}", [("", f"spec file not found: {path}")])
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"{path}: cannot read: {exc}", [("", str(exc))]) from None
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                msg = " ".join(str(exc).split())
                raise SpecError(f"{path}: not valid YAML: {msg}", [("", f"not valid YAML: {msg}")]) from None
        else:
            try:
                data = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise SpecError(f"{path}: not valid JSON: {exc}", [("", str(exc))]) from None
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise SpecError(f"{path}: a spec must be a mapping, got {kind}", [("", f"a spec must be a mapping, got {kind}")])
        return data
    msg = f"a spec must be a dict or a path to a JSON/YAML file, got {type(spec).__name__}"
    raise SpecError(msg, [("", msg)])


def _to_json(spec: Mapping[str, Any]) -> str:
    """The spec as JSON. NumPy and pandas values (what a DataFrame hands
    over: ``df.tp.iloc[0]`` is an ``int64``, ``df.tp.unique()`` an array)
    become plain numbers and lists; a value JSON cannot hold (NaN, a set,
    an object) is a :class:`SpecError` naming its path."""
    problems: list[tuple[str, str]] = []
    try:
        plain = _plain(spec, "", problems)
    except RecursionError:
        problems = [("", "the spec nests too deeply to be JSON")]
    if problems:
        raise spec_error(problems)
    return json.dumps(plain, allow_nan=False)


# Types a list may hold as they are: JSON's own, floats once fsum has
# found them finite.
_EXACT = frozenset({int, bool, str})
_NUMBERS = frozenset({int, float, bool})


def _finite_sum(xs: Any) -> bool:
    """Whether fsum finds xs finite (False too where it overflows)."""
    try:
        return math.isfinite(math.fsum(xs))
    except OverflowError:
        return False


def _plain(value: Any, path: str, problems: list[tuple[str, str]]) -> Any:
    """value as plain JSON types, problems appended at their paths."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            problems.append((path, f"must be a finite number, got {value}"))
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                problems.append((path, f"keys must be strings, got {type(k).__name__} {k!r}"))
                continue
            out[k] = _plain(v, f"{path}.{k}" if path else k, problems)
        return out
    if isinstance(value, (list, tuple)):
        # A long list of plain numbers (a serving trace's million arrivals)
        # is already JSON: checked at C speed, element by element only to
        # name a bad one (fsum is finite exactly when every term is, or
        # overflows, which the slow path then judges).
        kinds = set(map(type, value))
        if kinds <= _EXACT or (kinds <= _NUMBERS and _finite_sum(value)):
            return list(value)
        return [_plain(v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a NumPy scalar
        return _plain(value.item(), path, problems)
    if hasattr(value, "tolist"):  # a NumPy array, a pandas Series or Index
        return _plain(value.tolist(), path, problems)
    problems.append((path, f"must be a number, string, boolean, list, mapping or null, got {type(value).__name__}"))
    return None


class Result:
    """The tables of one run.

    ``result.tables`` maps table names to ``pyarrow.Table``; ``result["summary"]``
    is a shortcut, and ``result.to_pandas("summary")`` converts one table.
    Every table's schema metadata holds the spec, the seed and the version.
    """

    def __init__(self, spec: dict[str, Any], tables: dict[str, pa.Table]):
        self.spec = spec
        self.tables = tables

    def __getitem__(self, name: str) -> pa.Table:
        try:
            return self.tables[name]
        except KeyError:
            raise KeyError(f"no table {name!r}; tables: {', '.join(self.tables)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.tables)

    def __contains__(self, name: object) -> bool:
        return name in self.tables

    def to_pandas(self, name: str = "summary") -> "pd.DataFrame":
        """One table as a pandas DataFrame."""
        df: pd.DataFrame = self[name].to_pandas()
        return df

    @property
    def kind(self) -> str:
        """The scenario kind run (``"sweep"`` for a :class:`SweepResult`)."""
        return str(self.spec.get("kind", ""))

    @property
    def metadata(self) -> dict[str, str]:
        """The run's metadata (eidolon_version, kind, seed, spec, wall_s), from any table."""
        first = next(iter(self.tables.values()))
        meta = first.schema.metadata or {}
        return {k.decode(): v.decode() for k, v in meta.items() if k != b"table"}

    def save(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Write each table as ``<name>.parquet`` and the spec as ``spec.json``."""
        import pyarrow.parquet as pq

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self.tables.items():
            path = out / f"{name}.parquet"
            pq.write_table(table, path)
            written.append(path)
        (out / "spec.json").write_text(json.dumps(self.spec, indent=2))
        return written

    def to_perfetto(self, path: str | os.PathLike[str]) -> Path:
        """Write the ``timeline`` table (training, inference) as a Chrome /
        Perfetto trace at ``path``; open it at https://ui.perfetto.dev."""
        from .perfetto import write_perfetto

        return write_perfetto(self, path)

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}: {t.num_rows} rows" for n, t in self.tables.items())
        return f"<eidolon.Result kind={self.spec.get('kind')!r} {parts}>"

    def key_numbers(self) -> dict[str, Any]:
        """The run's headline figures: the first row of its ``summary`` table
        (every kind has one), numbers and strings only, in column order.

        >>> run({"kind": "selftest", "iterations": 10, "seed": 1}, progress=False).key_numbers()["iterations"]
        10
        """
        if "summary" not in self.tables or self.tables["summary"].num_rows == 0:
            return {}
        row = self.tables["summary"].slice(0, 1).to_pylist()[0]
        return {k: v for k, v in row.items() if isinstance(v, (int, float, str))}

    _numbers_from = "summary"  # the table key_numbers reads

    def _heading(self) -> str:
        meta = self.metadata
        facts = [f"kind <b>{html.escape(self.kind)}</b>"]
        facts += [f"{k} {html.escape(meta[k])}" for k in ("seed", "eidolon_version", "wall_s") if k in meta]
        return "eidolon.Result: " + ", ".join(facts)

    def _repr_html_(self) -> str:
        """The notebook view: the kind and run facts, the key numbers of the
        summary, and each table with its rows and columns."""
        out = [f"<div class='eidolon-result'><p>{self._heading()}</p>"]
        numbers = self.key_numbers()
        if numbers:
            out.append(f"<table><thead><tr><th colspan='2'>key numbers ({self._numbers_from})</th></tr></thead><tbody>")
            for name, value in list(numbers.items())[:_HTML_MAX_NUMBERS]:
                out.append(f"<tr><td>{html.escape(name)}</td><td>{html.escape(_fmt(value))}</td></tr>")
            if len(numbers) > _HTML_MAX_NUMBERS:
                more = len(numbers) - _HTML_MAX_NUMBERS
                out.append(f"<tr><td colspan='2'>... {more} more in result[{self._numbers_from!r}]</td></tr>")
            out.append("</tbody></table>")
        out.append("<table><thead><tr><th>table</th><th>rows</th><th>columns</th></tr></thead><tbody>")
        for name, t in self.tables.items():
            cols = t.column_names
            shown = ", ".join(cols[:_HTML_MAX_COLUMNS]) + (f", ... ({len(cols)} in all)" if len(cols) > _HTML_MAX_COLUMNS else "")
            out.append(f"<tr><td>{html.escape(name)}</td><td>{t.num_rows}</td><td>{html.escape(shown)}</td></tr>")
        out.append("</tbody></table></div>")
        return "".join(out)


_HTML_MAX_NUMBERS = 16  # summary columns shown in the notebook view
_HTML_MAX_COLUMNS = 12  # column names listed per table


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


class SweepResult(Result):
    """The tables of a sweep (:func:`eidolon.sweep`): each table
    concatenated over the points, plus ``points`` (one row per spec: its
    varying parameters, ``ok``, ``error``, ``wall_s``).

    ``spec`` is ``{"sweep": [spec, ...]}``; ``specs`` is that list, ``kind``
    is ``"sweep"`` and ``metadata`` describes the sweep, not one point.
    """

    _numbers_from = "points"

    @property
    def specs(self) -> list[dict[str, Any]]:
        specs: list[dict[str, Any]] = self.spec["sweep"]
        return specs

    @property
    def kind(self) -> str:
        return "sweep"

    @property
    def point_kinds(self) -> list[str]:
        """The kinds the points run, sorted."""
        return sorted({str(s.get("kind", "")) for s in self.specs})

    @property
    def metadata(self) -> dict[str, str]:
        """kind ("sweep"), points, point_kinds (comma-separated), failed,
        eidolon_version, and spec (the list of specs as JSON)."""
        return {
            "kind": "sweep",
            "points": str(len(self.specs)),
            "point_kinds": ",".join(self.point_kinds),
            "failed": str(self._failed()),
            "eidolon_version": _engine.engine_version(),
            "spec": json.dumps(self.specs),
        }

    def _failed(self) -> int:
        points = self.tables.get("points")
        return 0 if points is None else sum(1 for ok in points.column("ok").to_pylist() if not ok)

    def key_numbers(self) -> dict[str, Any]:
        """points, failed and the wall seconds summed over the points.

        >>> from eidolon import sweep
        >>> sweep([{"kind": "selftest", "iterations": n} for n in (10, 20)], executor=None, progress=False).key_numbers()["points"]
        2
        """
        out: dict[str, Any] = {"points": len(self.specs), "failed": self._failed()}
        if "points" in self.tables:
            out["wall_s_total"] = float(sum(self.tables["points"].column("wall_s").to_pylist()))
        return out

    def _heading(self) -> str:
        kinds = html.escape(", ".join(self.point_kinds))
        return f"eidolon.SweepResult: <b>sweep</b> of {len(self.specs)} points of kind {kinds}, {self._failed()} failed"

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}: {t.num_rows} rows" for n, t in self.tables.items())
        return f"<eidolon.SweepResult points={len(self.specs)} kinds={self.point_kinds!r} {parts}>"


class _Progress:
    """A tqdm bar that appears only for runs longer than a second."""

    def __init__(self, desc: str):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=1000, desc=desc, delay=1.0, leave=False, bar_format="{l_bar}{bar}| {elapsed}")

    def __call__(self, fraction: float) -> None:
        n = int(max(0.0, min(1.0, fraction)) * 1000)
        self.bar.update(n - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def run(spec: SpecLike, progress: bool = True, max_memory_bytes: float | None = None) -> Result:
    """Simulate a spec and return its tables.

    ``spec`` is a dict or a path to a JSON/YAML file. Invalid specs raise
    :class:`eidolon.SpecError` naming every bad field; runs that cannot complete
    raise :class:`eidolon.SimulationError`. Ctrl-C (or Jupyter's stop button)
    cancels the run within about a second and raises KeyboardInterrupt.

    Before it starts, a run's memory is estimated from the spec; one over
    ``max_memory_bytes`` (the spec's own ``max_memory_bytes`` wins; default
    half of this machine's memory) is refused with a SpecError naming the
    fields it grows with, instead of exhausting memory, which would kill the
    interpreter.

    >>> r = run({"kind": "selftest", "iterations": 1000, "seed": 7})
    >>> r["summary"].column_names
    ['iterations', 'checksum']
    >>> int(r.to_pandas("summary")["iterations"][0])
    1000
    """
    text = _to_json(load_spec(spec))
    data = json.loads(text)  # the spec as run: plain values (result.save writes it)
    bar = _Progress(str(data.get("kind", "run"))) if progress else None
    try:
        tables = _engine.run_json(text, bar, max_memory_bytes)
    finally:
        if bar is not None:
            bar.close()
    return Result(data, tables)


def validate(spec: SpecLike, max_memory_bytes: float | None = None) -> list[Problem]:
    """Return every problem of a spec without running it: (field path,
    message) pairs with an ``allowed`` attribute (see :class:`eidolon.errors.Problem`).

    It reports what :func:`run` would reject: the checks that need the
    cluster built (GPU counts, device names, ranks, an ``ssm_tp`` prompt or
    a ``serving`` request that no GPU's memory holds) and the memory budget.
    Building a cluster of hundreds of thousands of GPUs takes seconds;
    Ctrl-C interrupts it.

    >>> validate({"kind": "selftest", "iterations": -1})
    [Problem(path='iterations', message='must be in [1, 1e15], got -1', allowed='[1, 1e15]')]
    >>> [(path, message) for path, message in validate({"kind": "selftest", "iterations": -1})]
    [('iterations', 'must be in [1, 1e15], got -1')]
    >>> validate({"kind": "selftest"})
    []
    """
    data = load_spec(spec)
    try:
        text = _to_json(data)
    except SpecError as exc:  # values JSON cannot hold: the engine never sees the spec
        return exc.problems
    return _engine.validate_json(text, max_memory_bytes)


def kinds() -> list[dict[str, str]]:
    """The scenario kinds this build knows, with a line of documentation each."""
    return _engine.kinds()
