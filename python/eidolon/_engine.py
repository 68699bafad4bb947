"""The thin layer over the native (gopy) module: start, poll, cancel, decode."""

from __future__ import annotations

import json
import struct
from typing import Any, Callable

import pyarrow as pa
import pyarrow.ipc

from . import errors

_MAGIC = b"EIDOLON1"
_POLL_MS = 100  # how often Python regains control to see Ctrl-C and update progress


def _native():
    try:
        from ._native import bindings  # type: ignore[attr-defined]
    except ImportError as exc:  # pragma: no cover - only without a build
        raise ImportError(
            "eidolon's native extension is not built; run `make dev` in the source tree"
        ) from exc
    return bindings


def call(fn_name: str, *args: Any) -> Any:
    """Call a native function, mapping its errors to Eidolon exceptions."""
    fn = getattr(_native(), fn_name)
    try:
        return fn(*args)
    except RuntimeError as exc:
        raise errors.from_native(exc) from None


def decode_bundle(slice_: Any) -> dict[str, pa.Table]:
    """Decode the bytes of a table bundle (see core/table/bundle.go)."""
    data = bytes(slice_)
    view = memoryview(data)
    if view[: len(_MAGIC)] != _MAGIC:
        raise errors.InternalError("result bundle has a bad header")
    (count,) = struct.unpack_from("<I", view, len(_MAGIC))
    pos = len(_MAGIC) + 4
    tables: dict[str, pa.Table] = {}
    buf = pa.py_buffer(data)
    for _ in range(count):
        (name_len,) = struct.unpack_from("<I", view, pos)
        pos += 4
        name = bytes(view[pos : pos + name_len]).decode()
        pos += name_len
        (size,) = struct.unpack_from("<Q", view, pos)
        pos += 8
        tables[name] = pa.ipc.open_stream(buf.slice(pos, size)).read_all()
        pos += size
    return tables


def run_json(
    spec_json: str, progress: Callable[[float], None] | None = None, max_memory_bytes: float | None = None
) -> dict[str, pa.Table]:
    """Run a spec document; Ctrl-C cancels the Go run and re-raises.

    ``max_memory_bytes`` caps the run's estimated memory (None: the spec's
    ``max_memory_bytes``, else half of this machine's memory).
    """
    handle = call("Start", spec_json, _limit(max_memory_bytes))
    try:
        while not call("Wait", handle, _POLL_MS):
            if progress is not None:
                progress(call("Progress", handle))
    except KeyboardInterrupt:
        call("Cancel", handle)
        try:
            call("Result", handle)
        except (KeyboardInterrupt, errors.EidolonError):
            pass
        raise
    result = call("Result", handle)
    if progress is not None:
        progress(1.0)
    return decode_bundle(result)


def _limit(max_memory_bytes: float | None) -> float:
    if max_memory_bytes is None:
        return 0.0
    value = float(max_memory_bytes)
    if not value > 0 or value == float("inf"):
        raise errors.SpecError(
            f"max_memory_bytes must be > 0 bytes, got {max_memory_bytes!r}",
            [("max_memory_bytes", f"must be > 0 bytes, got {max_memory_bytes!r}")],
        )
    return value


def validate_json(spec_json: str, max_memory_bytes: float | None = None) -> list[tuple[str, str]]:
    problems = json.loads(call("Validate", spec_json, _limit(max_memory_bytes)))
    return [(p["path"], p["message"]) for p in problems]


def canonical_json(spec_json: str) -> str:
    """The spec after defaults, as the engine records it (SpecError if invalid)."""
    return call("Canonical", spec_json)


def engine_version() -> str:
    return call("EngineVersion")


def presets(name: str) -> pa.Table:
    return decode_bundle(call("Presets", name))[name]


def kinds() -> list[dict[str, str]]:
    return json.loads(call("Kinds"))
