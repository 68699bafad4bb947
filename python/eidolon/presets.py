"""Preset catalogues as Arrow tables.

>>> gpus().num_rows > 5
True
>>> "h100-sxm" in gpus().column("name").to_pylist()
True
"""

from __future__ import annotations

import pyarrow as pa

from . import _engine


def catalog(name: str) -> pa.Table:
    """Any preset catalogue by name (see ``eidolon.presets.names()``)."""
    return _engine.presets(name)


def gpus() -> pa.Table:
    """GPU presets: peak FLOP/s per data type, SMs, caches, HBM, with units in column names."""
    return catalog("gpus")


def gpu_figures() -> pa.Table:
    """The GPU figures a spec may change from a preset (a what-if part) and
    the range each must lie in: ``{"preset": "h100-sxm", figure: value}``.

    >>> "hbm_bandwidth_bytes_per_s" in gpu_figures().column("figure").to_pylist()
    True
    """
    return catalog("gpu_figures")


def links() -> pa.Table:
    """Link presets: bandwidth per direction and latency."""
    return catalog("links")


def models() -> pa.Table:
    """Model presets (the zoo): architecture hyper-parameters and counts."""
    return catalog("models")
