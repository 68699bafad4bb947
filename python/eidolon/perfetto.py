"""Write a run's ``timeline`` table as a Chrome / Perfetto trace.

The trace is the Trace Event Format's JSON object form: one complete event
("ph": "X") per task, one process per rank and one thread per stream
(compute, tp, cp, dp, pp, ep), times in microseconds. Open it at
https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Union

import pyarrow as pa

_STREAMS = ["compute", "tp", "cp", "dp", "pp", "ep"]


def _timeline(result: Any) -> pa.Table:
    if isinstance(result, pa.Table):
        return result
    tables = getattr(result, "tables", None)
    if tables is None or "timeline" not in tables:
        raise ValueError("write_perfetto needs a Result with a 'timeline' table (training or inference) or that table")
    if tables["timeline"].num_rows == 0:
        raise ValueError("the timeline has no rows: the spec's timeline_ranks recorded none ([-1]); list the ranks to trace")
    return tables["timeline"]


def trace_events(result: Any) -> list[dict[str, Any]]:
    """The trace events of a result's timeline (metadata events first)."""
    table = _timeline(result)
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    n = table.num_rows
    events: list[dict[str, Any]] = []
    ranks = sorted(set(cols["rank"]))
    streams = sorted(set(cols["stream"]), key=lambda s: (_STREAMS.index(s) if s in _STREAMS else len(_STREAMS), s))
    tid = {s: i for i, s in enumerate(streams)}
    for r in ranks:
        events.append({"name": "process_name", "ph": "M", "pid": r, "args": {"name": f"rank {r}"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": r, "args": {"sort_index": r}})
        for s in streams:
            events.append({"name": "thread_name", "ph": "M", "pid": r, "tid": tid[s], "args": {"name": s}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": r, "tid": tid[s], "args": {"sort_index": tid[s]}})
    for i in range(n):
        start, end = cols["start_s"][i], cols["end_s"][i]
        args: dict[str, Any] = {}
        for key in ("bytes", "flops", "micro_batch"):
            if key in cols:
                v = cols[key][i]
                if v is not None and not (isinstance(v, float) and math.isnan(v)) and v != 0:
                    args[key] = v
        events.append({
            "name": cols["name"][i],
            "cat": cols["stream"][i],
            "ph": "X",
            "ts": start * 1e6,
            "dur": max(0.0, end - start) * 1e6,
            "pid": cols["rank"][i],
            "tid": tid[cols["stream"][i]],
            "args": args,
        })
    return events


def write_perfetto(result: Any, path: Union[str, "os.PathLike[str]"]) -> Path:
    """Write ``result``'s timeline (a Result or the timeline table) to
    ``path`` as a Chrome/Perfetto JSON trace and return the path."""
    out = Path(path)
    doc = {"traceEvents": trace_events(result), "displayTimeUnit": "ms",
           "otherData": {"generator": "eidolon", "time_unit_of_ts": "us"}}
    out.write_text(json.dumps(doc))
    return out
