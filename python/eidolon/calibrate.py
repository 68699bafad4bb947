"""Fit a GPU's kernel figures to measured kernel times (the calibrate kind)."""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Mapping, Union

from .api import Result, run

_COLUMNS = ("op", "m", "n", "k", "batch", "bytes", "dtype", "time_s")


def _rows(kernels: Any) -> list[dict[str, Any]]:
    """Kernel rows from a DataFrame, an Arrow table or an iterable of dicts."""
    if hasattr(kernels, "to_pylist"):  # pyarrow.Table
        records = kernels.to_pylist()
    elif hasattr(kernels, "to_dict"):  # pandas.DataFrame
        records = kernels.to_dict("records")
    else:
        records = [dict(r) for r in kernels]
    out = []
    for r in records:
        row: dict[str, Any] = {}
        for key in _COLUMNS:
            v = r.get(key)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue  # a column this kind of kernel does not have
            row[key] = v  # NumPy scalars become numbers in run's spec encoding
        out.append(row)
    return out


def calibrate(kernels: Union[Any, Iterable[Mapping[str, Any]]], gpu: Union[str, Mapping[str, Any]],
              progress: bool = True, **spec: Any) -> Result:
    """Fit ``gpu``'s kernel figures to measured kernels and return the run.

    ``kernels`` is a pandas DataFrame, an Arrow table or a list of dicts with
    the columns ``op`` ("gemm" or "elementwise"), ``m``, ``n``, ``k``,
    ``batch`` (GEMMs), ``bytes`` (elementwise), ``dtype`` (default bf16) and
    ``time_s`` (the profiler's kernel time); a missing or NaN cell is a
    field the kernel does not have. Extra keyword arguments go into the spec
    (``fit``, ``held_out_every``, ``max_iterations``). The result's tables
    are the kind's (summary, figures, kernels); ``fitted_gpu(result)`` is
    the fitted part as a ``gpu`` for any other spec.

    >>> r = calibrate([{"op": "gemm", "m": 4096, "n": 4096, "k": 4096, "time_s": 5.8e-4},
    ...                {"op": "gemm", "m": 1024, "n": 4096, "k": 4096, "time_s": 1.5e-4}],
    ...               gpu="a100-80gb-sxm", held_out_every=0, max_iterations=50, progress=False)
    >>> fitted_gpu(r)["preset"]
    'a100-80gb-sxm'
    """
    doc: dict[str, Any] = {"kind": "calibrate", "gpu": gpu if isinstance(gpu, str) else dict(gpu),
                           "kernels": _rows(kernels)}
    doc.update(spec)
    return run(doc, progress=progress)


def fitted_gpu(result: Result) -> dict[str, Any]:
    """The fitted part of a calibrate run as a spec's ``gpu`` object."""
    if getattr(result, "kind", None) != "calibrate":
        raise ValueError(f"fitted_gpu needs the result of a calibrate run, got a {getattr(result, 'kind', type(result).__name__)!r} one")
    spec = json.loads(result.to_pandas("summary")["gpu_spec"].iloc[0])
    return {"preset": spec} if isinstance(spec, str) else dict(spec)
