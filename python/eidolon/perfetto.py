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
from typing import Any, Iterator, Union

import pyarrow as pa
import pyarrow.compute

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


def _metadata(table: pa.Table) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The process and thread names and orders, and each stream's thread id."""
    ranks = sorted(pa.compute.unique(table.column("rank")).to_pylist())
    names = pa.compute.unique(table.column("stream")).to_pylist()
    streams = sorted(names, key=lambda s: (_STREAMS.index(s) if s in _STREAMS else len(_STREAMS), s))
    tid = {s: i for i, s in enumerate(streams)}
    events: list[dict[str, Any]] = []
    for r in ranks:
        events.append({"name": "process_name", "ph": "M", "pid": r, "args": {"name": f"rank {r}"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": r, "args": {"sort_index": r}})
        for s in streams:
            events.append({"name": "thread_name", "ph": "M", "pid": r, "tid": tid[s], "args": {"name": s}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": r, "tid": tid[s], "args": {"sort_index": tid[s]}})
    return events, tid


# Rows converted to events at a time: a timeline of millions of rows is
# written in slices, never held whole as Python objects (12 M rows built
# whole took 14 GB and 5 minutes).
_BATCH_ROWS = 65536


def _spans(table: pa.Table, tid: dict[str, int]) -> Iterator[list[dict[str, Any]]]:
    """The complete events of the timeline's tasks, a slice of rows at a time."""
    for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
        cols = batch.to_pydict()
        events = []
        for i in range(batch.num_rows):
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
        yield events


def trace_events(result: Any) -> list[dict[str, Any]]:
    """The trace events of a result's timeline (metadata events first)."""
    table = _timeline(result)
    events, tid = _metadata(table)
    for spans in _spans(table, tid):
        events.extend(spans)
    return events


def write_perfetto(result: Any, path: Union[str, "os.PathLike[str]"]) -> Path:
    """Write ``result``'s timeline (a Result or the timeline table) to
    ``path`` as a Chrome/Perfetto JSON trace and return the path. The events
    are written a slice of rows at a time, so a timeline of millions of rows
    needs no more memory than the slice's."""
    table = _timeline(result)
    out = Path(path)
    meta, tid = _metadata(table)
    other = json.dumps({"generator": "eidolon", "time_unit_of_ts": "us"})
    with out.open("w") as f:
        f.write('{"traceEvents": [')
        f.write(", ".join(json.dumps(e) for e in meta))
        for spans in _spans(table, tid):
            if spans:
                f.write(", ")
                f.write(", ".join(json.dumps(e) for e in spans))
        f.write(f'], "displayTimeUnit": "ms", "otherData": {other}}}')
    return out
