"""Turn a user's table into spec data: an inline data set (seedflood) or a request trace (serving).

>>> import pyarrow as pa
>>> t = pa.table({"x0": [0.0, 1.0, 2.0], "x1": [1.0, 0.5, 0.0], "label": [0, 1, 1]})
>>> d = inline(t, label="label")
>>> d["n_features"], d["features_flat"][:4], d["labels"]
(2, [0.0, 1.0, 1.0, 0.5], [0, 1, 1])
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def inline(table: Any, label: str = "label") -> dict[str, Any]:
    """An inline ``dataset`` spec from a ``pyarrow.Table`` or pandas DataFrame.

    Every column but ``label`` is a numeric feature; ``label`` holds integer
    classes 0..k-1. Rows are samples, in order.
    """
    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    if label not in table.column_names:
        raise ValueError(f"no label column {label!r}; columns: {', '.join(table.column_names)}")
    features = [c for c in table.column_names if c != label]
    if not features:
        raise ValueError("the table has no feature columns")
    import numpy as np

    x = np.column_stack([table.column(c).to_numpy(zero_copy_only=False).astype(np.float64) for c in features])
    y = table.column(label).to_numpy(zero_copy_only=False)
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"label column {label!r} must hold integers, got {y.dtype}")
    return {"kind": "inline", "features_flat": x.ravel().tolist(), "n_features": len(features), "labels": y.tolist()}


def trace(table: Any) -> dict[str, Any]:
    """A serving ``workload.trace`` from a ``pyarrow.Table`` or DataFrame of requests.

    Columns: ``arrival_s`` (sorted), ``prompt_tokens``, ``output_tokens`` and,
    optionally, ``prefix_id`` (-1: none) with ``prefix_tokens`` (the shared
    prefix's length; 0 when absent).

    >>> import pyarrow as pa
    >>> t = pa.table({"arrival_s": [0.0, 0.5], "prompt_tokens": [100, 200], "output_tokens": [10, 20]})
    >>> trace(t)
    {'arrival_s': [0.0, 0.5], 'prompt_tokens': [100, 200], 'output_tokens': [10, 20]}
    """
    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    need = ["arrival_s", "prompt_tokens", "output_tokens"]
    missing = [c for c in need if c not in table.column_names]
    if missing:
        raise ValueError(f"a trace needs columns {need}; missing {missing}")
    out: dict[str, Any] = {
        "arrival_s": _column(table, "arrival_s", float),
        "prompt_tokens": _column(table, "prompt_tokens", int),
        "output_tokens": _column(table, "output_tokens", int),
    }
    if "prefix_id" in table.column_names:
        out["prefix_id"] = _column(table, "prefix_id", int)
        out["prefix_tokens"] = _column(table, "prefix_tokens", int) if "prefix_tokens" in table.column_names else [0] * table.num_rows
    return out


def _column(table: pa.Table, name: str, kind: type) -> list[Any]:
    """A column's values as floats or ints, refusing a missing value or, for
    ints, a fraction (a token count of 1.5 is no count)."""
    out: list[Any] = []
    for row, v in enumerate(table.column(name).to_pylist()):
        if v is None or (isinstance(v, float) and v != v):
            raise ValueError(f"trace column {name!r} has no value at row {row}")
        if kind is int and (isinstance(v, bool) or not float(v).is_integer()):
            raise ValueError(f"trace column {name!r} must hold whole numbers, got {v!r} at row {row}")
        out.append(kind(v))
    return out
