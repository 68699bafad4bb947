"""Turn a user's table into an inline data set for specs that train on data (seedflood).

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
