"""Exceptions raised by Eidolon. Native errors are mapped here, in one place."""

from __future__ import annotations

import json
from typing import Iterable, Union


class Problem(tuple[str, str]):
    """One thing wrong with a spec: ``path``, ``message`` and ``allowed``.

    It is a ``(path, message)`` pair, so code that unpacks or compares pairs
    keeps working; ``allowed`` is an extra attribute, not an item: what the
    field may be on its own terms (``"> 0"``, ``"[1, 16384]"``,
    ``'one of ["ring", "tree"]'``), or ``""`` where the check does not state
    it. Equality and hashing use the pair only.

    >>> p = Problem("iterations", "must be in [1, 1e15], got -1", "[1, 1e15]")
    >>> path, message = p
    >>> p == ("iterations", "must be in [1, 1e15], got -1"), p.allowed
    (True, '[1, 1e15]')
    >>> p
    Problem(path='iterations', message='must be in [1, 1e15], got -1', allowed='[1, 1e15]')
    """

    allowed: str

    def __new__(cls, path: str, message: str, allowed: str = "") -> Problem:
        self = super().__new__(cls, (path, message))
        self.allowed = allowed
        return self

    @property
    def path(self) -> str:
        return self[0]

    @property
    def message(self) -> str:
        return self[1]

    def __getnewargs__(self) -> tuple[str, str, str]:  # pickling (sweep workers) keeps allowed
        return (self[0], self[1], self.allowed)

    def __repr__(self) -> str:
        return f"Problem(path={self[0]!r}, message={self[1]!r}, allowed={self.allowed!r})"


ProblemLike = Union[Problem, tuple[str, str]]


def _as_problem(p: ProblemLike) -> Problem:
    return p if isinstance(p, Problem) else Problem(p[0], p[1])


class EidolonError(Exception):
    """Base class of every error Eidolon raises."""


class SpecError(EidolonError, ValueError):
    """The spec is invalid. ``problems`` lists every :class:`Problem` found:
    (path, message) pairs with an ``allowed`` attribute, as the engine
    reported them (structured, not parsed from the message)."""

    problems: list[Problem]

    def __init__(self, message: str, problems: Iterable[ProblemLike] | None = None):
        super().__init__(message)
        self.problems = [_as_problem(p) for p in problems or ()]


def spec_error(problems: Iterable[ProblemLike]) -> SpecError:
    """A SpecError worded as the engine words one (core/problem's Error):
    ``invalid spec: path: message``, or each problem on a line of its own.

    >>> spec_error([("seed", "bad")])
    SpecError('invalid spec: seed: bad')
    """
    ps = [_as_problem(p) for p in problems]
    lines = [f"{p.path + ': ' if p.path else ''}{p.message}" for p in ps]
    if len(lines) == 1:
        return SpecError("invalid spec: " + lines[0], ps)
    return SpecError(f"invalid spec, {len(lines)} problems:\n" + "\n".join("  " + ln for ln in lines), ps)


class SimulationError(EidolonError, RuntimeError):
    """A valid spec whose run cannot complete (e.g. a partitioned network)."""


class InternalError(EidolonError, RuntimeError):
    """A bug in Eidolon (a recovered Go panic); the interpreter is still usable."""


_PREFIXES: dict[str, type[EidolonError]] = {
    "SpecError: ": SpecError,
    "SimulationError: ": SimulationError,
    "InternalError: ": InternalError,
}

# Separates a SpecError's text from its problems' JSON (bindings.ProblemsMark).
PROBLEMS_MARK = "\x1e"


def problems_from_json(doc: str) -> list[Problem]:
    """Problems from the engine's JSON list of {"path", "message", "allowed"}."""
    return [Problem(p["path"], p["message"], p.get("allowed", "")) for p in json.loads(doc)]


def from_native(exc: BaseException) -> BaseException:
    """Translate an exception raised by the native module.

    The Go side prefixes each error message with its class (see bindings.go);
    a SpecError's text is followed by ``PROBLEMS_MARK`` and its problems as JSON.

    >>> e = from_native(RuntimeError('SpecError: invalid spec: seed: bad\\x1e[{"path": "seed", "message": "bad", "allowed": ""}]'))
    >>> e, e.problems
    (SpecError('invalid spec: seed: bad'), [Problem(path='seed', message='bad', allowed='')])
    """
    msg = str(exc)
    if msg.startswith("Canceled: "):
        return KeyboardInterrupt(msg[len("Canceled: ") :])
    for prefix, cls in _PREFIXES.items():
        if msg.startswith(prefix):
            text = msg[len(prefix) :]
            if cls is SpecError:
                text, mark, doc = text.partition(PROBLEMS_MARK)
                if not mark:  # every SpecError from bindings.classify has the mark; kept whole if not
                    return SpecError(text, [Problem("", text)])
                return SpecError(text, problems_from_json(doc))
            return cls(text)
    return exc
