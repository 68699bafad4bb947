"""Types of the gopy-generated module ``eidolon._native.bindings``.

Written by hand from bindings/bindings.go and bindings/memory.go (gopy
writes untyped wrappers); python/tests/test_typing.py checks that every
function here exists in the built module with the same parameters, and the
reverse. gopy maps Go's int64 to ``int``, float64 to ``float``, []byte to
:class:`go.Slice_byte`, and a returned non-nil ``error`` to a raised
``RuntimeError`` whose text starts with the error's class (see
``eidolon.errors.from_native``); a function whose only result is an error
returns ``""`` (the nil error's text) when it succeeds.
"""

from . import go

def Start(specJSON: str, maxMemoryBytes: float) -> int:
    """Validate a spec and start its run; the handle for Wait/Progress/Cancel/Result."""

def Wait(handle: int, timeoutMs: int) -> bool:
    """Block up to timeoutMs milliseconds; whether the run has finished."""

def Progress(handle: int) -> float:
    """The fraction of the run done, in [0, 1]."""

def Cancel(handle: int) -> str:
    """Ask a run to stop; returns ""."""

def Result(handle: int) -> go.Slice_byte:
    """Wait for the run, forget its handle; its tables as a bundle of Arrow IPC streams."""

def Validate(specJSON: str, maxMemoryBytes: float) -> str:
    """A JSON list of {"path", "message", "allowed"} problems ("[]" when valid)."""

def Kinds() -> str:
    """The scenario kinds as JSON [{"name", "doc"}]."""

def Presets(name: str) -> go.Slice_byte:
    """A preset catalogue as a bundle holding one table of that name."""

def Canonical(specJSON: str) -> str:
    """The spec after defaults, as JSON."""

def EngineVersion() -> str:
    """The engine's version (bindings.Version, the project's one version)."""

def DefaultMaxMemoryBytes() -> float:
    """Half of this machine's memory (or of RLIMIT_AS); 0 when unknown."""

def FreeMemory() -> str:
    """Return the Go heap's unused memory to the OS (after a large result is dropped); returns ""."""

def ForcePanic() -> str:
    """Panic inside an exported function (tests: the recovery keeps Python alive); always raises."""
