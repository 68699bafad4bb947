"""Exceptions raised by Eidolon. Native errors are mapped here, in one place."""

from __future__ import annotations


class EidolonError(Exception):
    """Base class of every error Eidolon raises."""


class SpecError(EidolonError, ValueError):
    """The spec is invalid. ``problems`` lists every (path, message) found."""

    def __init__(self, message: str, problems: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.problems = problems or []


class SimulationError(EidolonError, RuntimeError):
    """A valid spec whose run cannot complete (e.g. a partitioned network)."""


class InternalError(EidolonError, RuntimeError):
    """A bug in Eidolon (a recovered Go panic); the interpreter is still usable."""


_PREFIXES: dict[str, type[EidolonError]] = {
    "SpecError: ": SpecError,
    "SimulationError: ": SimulationError,
    "InternalError: ": InternalError,
}


def from_native(exc: BaseException) -> BaseException:
    """Translate an exception raised by the native module.

    The Go side prefixes each error message with its class (see bindings.go).
    """
    msg = str(exc)
    if msg.startswith("Canceled: "):
        return KeyboardInterrupt(msg[len("Canceled: ") :])
    for prefix, cls in _PREFIXES.items():
        if msg.startswith(prefix):
            text = msg[len(prefix) :]
            if cls is SpecError:
                return SpecError(text, _problems(text))
            return cls(text)
    return exc


def _problems(text: str) -> list[tuple[str, str]]:
    """Parse 'path: message' lines of a Go spec.Error message."""
    lines = text.splitlines()
    if len(lines) == 1:
        body = lines[0].removeprefix("invalid spec: ")
        lines = [body]
    else:
        lines = [ln.strip() for ln in lines[1:]]
    out = []
    for ln in lines:
        path, sep, message = ln.partition(": ")
        out.append((path, message) if sep and " " not in path else ("", ln))
    return out
