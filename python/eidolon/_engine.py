"""The thin layer over the native (gopy) module: start, poll, cancel, decode."""

from __future__ import annotations

import gc
import json
import struct
import threading
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import pyarrow as pa
import pyarrow.ipc

from . import errors

if TYPE_CHECKING:  # the extension is imported when first called
    from ._native import go

T = TypeVar("T")

_MAGIC = b"EIDOLON1"
_POLL_MS = 100  # how often Python regains control to see Ctrl-C and update progress
# A result this large has its Go bundle returned to the OS once decoded
# (see _unhook_gopy_gc): 64 MiB, about a million timeline rows.
_FREE_AFTER_BYTES = 64 << 20


def _unhook_gopy_gc() -> None:
    """gopy's generated modules hook Python's garbage collector to run Go's
    full collection, synchronously, after every Python collection, which
    Python starts every few hundred allocations: any Python code in the
    process then paid for the Go heap (building two million dicts took
    6.0 s instead of 0.3, a 12-million-row trace four minutes). The hooks
    are removed; Go collects on its own schedule, and a large result's run
    returns its memory to the OS itself (bindings.go)."""
    native = __name__.rsplit(".", 1)[0] + "._native"
    gc.callbacks[:] = [cb for cb in gc.callbacks if not getattr(cb, "__module__", "").startswith(native)]


def call(fn: Callable[..., T], *args: Any) -> T:
    """Call a native function (``bindings.Start``, typed by bindings.pyi),
    mapping its errors to Eidolon exceptions. Each caller imports
    ``bindings`` where it needs it, so ``import eidolon`` loads no Go runtime."""
    _unhook_gopy_gc()
    try:
        return fn(*args)
    except RuntimeError as exc:
        raise errors.from_native(exc) from None


def decode_bundle(slice_: go.Slice_byte | bytes) -> dict[str, pa.Table]:
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
    from ._native import bindings

    handle = call(bindings.Start, spec_json, _limit(max_memory_bytes))
    try:
        while not call(bindings.Wait, handle, _POLL_MS):
            if progress is not None:
                progress(call(bindings.Progress, handle))
    except KeyboardInterrupt:
        call(bindings.Cancel, handle)
        try:
            call(bindings.Result, handle)
        except (KeyboardInterrupt, errors.EidolonError):
            pass
        raise
    result = call(bindings.Result, handle)
    if progress is not None:
        progress(1.0)
    tables = decode_bundle(result)
    del result  # the bundle's Go bytes, copied into the tables
    if sum(t.nbytes for t in tables.values()) > _FREE_AFTER_BYTES:
        call(bindings.FreeMemory)
    return tables


def _limit(max_memory_bytes: float | None) -> float:
    if max_memory_bytes is None:
        return 0.0
    value = float(max_memory_bytes)
    if not value > 0 or value == float("inf"):
        raise errors.SpecError(
            f"max_memory_bytes must be > 0 bytes, got {max_memory_bytes!r}",
            [errors.Problem("max_memory_bytes", f"must be > 0 bytes, got {max_memory_bytes!r}", "> 0")],
        )
    return value


def validate_json(spec_json: str, max_memory_bytes: float | None = None) -> list[errors.Problem]:
    """The spec's problems, structured as the engine reports them; Ctrl-C
    interrupts the wait (validating half a million GPUs builds their
    cluster: seconds)."""
    from ._native import bindings

    return errors.problems_from_json(_interruptible(bindings.Validate, spec_json, _limit(max_memory_bytes)))


def _interruptible(fn: Callable[..., T], *args: Any) -> T:
    """``call`` on a worker thread, waited for in slices of ``_POLL_MS`` so
    that Ctrl-C raises KeyboardInterrupt at once; the native call, which
    changes nothing, finishes on its own (the extension releases the GIL
    while Go runs)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = call(fn, *args)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="eidolon-native-call", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(_POLL_MS / 1000)
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def canonical_json(spec_json: str) -> str:
    """The spec after defaults, as the engine records it (SpecError if invalid)."""
    from ._native import bindings

    return call(bindings.Canonical, spec_json)


def engine_version() -> str:
    """The engine's version: the one version of the project (bindings.Version)."""
    from ._native import bindings

    return call(bindings.EngineVersion)


def presets(name: str) -> pa.Table:
    from ._native import bindings

    return decode_bundle(call(bindings.Presets, name))[name]


def kinds() -> list[dict[str, str]]:
    from ._native import bindings

    out: list[dict[str, str]] = json.loads(call(bindings.Kinds))
    return out
