"""Send a real SIGINT to a run in a child process and time the way back.

The child restores Python's SIGINT handler (a process started in the
background by a non-interactive shell inherits SIGINT ignored, and would
never see the signal), and the parent kills it after a hard timeout, so a
test built on this cannot hang.
"""

from __future__ import annotations

import json
import subprocess
import sys

_CHILD = r"""
import json, os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import eidolon
spec = json.loads(sys.stdin.read())
delay = float(sys.argv[1])
eidolon.validate(spec)  # import and warm up outside the timed part
timer = threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGINT))
start = time.monotonic()
timer.start()
try:
    try:
        eidolon.run(spec, progress=False)
    finally:
        timer.cancel()
    print(json.dumps({"outcome": "finished", "elapsed": time.monotonic() - start}))
except eidolon.EidolonError as exc:
    print(json.dumps({"outcome": "error", "elapsed": time.monotonic() - start, "error": str(exc)[:500]}))
except KeyboardInterrupt:
    back = time.monotonic() - start - delay
    # the interpreter is usable again
    assert eidolon.run({"kind": "selftest", "iterations": 10}, progress=False)["summary"].num_rows == 1
    print(json.dumps({"outcome": "interrupted", "elapsed": back}))
"""


def interrupt(spec: dict, delay_s: float = 0.5, timeout_s: float = 60.0) -> dict:
    """Run spec in a child, SIGINT it after delay_s: {"outcome", "elapsed"}.

    outcome is "interrupted" (elapsed: seconds from the SIGINT to the
    KeyboardInterrupt), "finished" or "error" (elapsed: the run's seconds).
    """
    # the spec on stdin: a spec of thousands of kernels is longer than an
    # argument may be
    out = subprocess.run([sys.executable, "-c", _CHILD, str(delay_s)], input=json.dumps(spec),
                         capture_output=True, text=True, timeout=timeout_s)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def interrupt_run(spec: dict, delay_s: float = 0.5, timeout_s: float = 60.0) -> float:
    """Seconds from the SIGINT to KeyboardInterrupt in a child running spec."""
    res = interrupt(spec, delay_s, timeout_s)
    assert res["outcome"] == "interrupted", f"the run ended before the SIGINT: {res}"
    return res["elapsed"]
