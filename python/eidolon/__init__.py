"""Eidolon: a performance simulator for distributed AI training and inference.

A Go simulation core, driven from Python; results are Arrow tables.

>>> import eidolon
>>> r = eidolon.run({"kind": "selftest", "iterations": 10})
>>> sorted(r.tables)
['summary']
"""

from importlib import metadata as _metadata

from . import datasets, models, presets, speculative
from .api import Result, SweepResult, kinds, load_spec, run, validate
from .calibrate import calibrate, fitted_gpu
from .perfetto import write_perfetto
from .search import search_parallel
from .sweep import sweep
from .errors import EidolonError, InternalError, Problem, SimulationError, SpecError

try:  # the installed package's version, which setup.py took from the engine's (bindings.Version)
    __version__ = _metadata.version("eidolon")
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "EidolonError",
    "InternalError",
    "Problem",
    "Result",
    "SimulationError",
    "SpecError",
    "SweepResult",
    "calibrate",
    "fitted_gpu",
    "kinds",
    "load_spec",
    "models",
    "datasets",
    "presets",
    "run",
    "search_parallel",
    "speculative",
    "sweep",
    "validate",
    "write_perfetto",
]
