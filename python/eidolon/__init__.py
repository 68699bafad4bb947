"""Eidolon: a performance simulator for distributed AI training and inference.

A Go simulation core, driven from Python; results are Arrow tables.

>>> import eidolon
>>> r = eidolon.run({"kind": "selftest", "iterations": 10})
>>> sorted(r.tables)
['summary']
"""

from . import datasets, models, presets
from .api import Result, kinds, load_spec, run, validate
from .perfetto import write_perfetto
from .search import search_parallel
from .sweep import sweep
from .errors import EidolonError, InternalError, SimulationError, SpecError

__version__ = "0.1.0"

__all__ = [
    "EidolonError",
    "InternalError",
    "Result",
    "SimulationError",
    "SpecError",
    "kinds",
    "load_spec",
    "models",
    "datasets",
    "presets",
    "run",
    "search_parallel",
    "sweep",
    "validate",
    "write_perfetto",
]
