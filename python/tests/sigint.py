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
spec = json.loads(sys.argv[1])
delay = float(sys.argv[2])
eidolon.validate(spec)  # import and warm up outside the timed part
timer = threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGINT))
start = time.monotonic()
timer.start()
try:
    eidolon.run(spec, progress=False)
    print(json.dumps({"outcome": "finished", "elapsed": time.monotonic() - start}))
except KeyboardInterrupt:
    back = time.monotonic() - start - delay
    # the interpreter is usable again
    assert eidolon.run({"kind": "selftest", "iterations": 10}, progress=False)["summary"].num_rows == 1
    print(json.dumps({"outcome": "interrupted", "elapsed": back}))
"""


def interrupt_run(spec: dict, delay_s: float = 0.5, timeout_s: float = 60.0, must_interrupt: bool = True) -> float:
    """Seconds from the SIGINT to KeyboardInterrupt in a child running spec."""
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec), str(delay_s)],
                         capture_output=True, text=True, timeout=timeout_s)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if must_interrupt:
        assert res["outcome"] == "interrupted", f"the run finished before the SIGINT ({res['elapsed']:.2f} s): make it longer"
    return res["elapsed"]
