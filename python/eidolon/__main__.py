"""Command line: ``python -m eidolon run SPEC --out DIR``, ``presets``, ``validate``, ``kinds``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from . import api, presets
from .errors import EidolonError, SpecError

if TYPE_CHECKING:
    import pyarrow as pa


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if v is None:
        return ""
    return str(v)


def _show(name: str, table: pa.Table, rows: int) -> None:
    """Print a table's first rows as aligned text (pyarrow only: no pandas import, so the command starts fast)."""
    head = table.slice(0, rows).to_pylist()
    cols = table.column_names
    cells = [[_cell(r[c]) for c in cols] for r in head]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    print(f"== {name} ({table.num_rows} rows)")
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))
    if table.num_rows > rows:
        print(f"... {table.num_rows - rows} more rows")
    print()


CATALOGUES = ["gpus", "gpu_figures", "links", "models", "clusters"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eidolon", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="simulate a JSON/YAML spec and print its tables")
    p_run.add_argument("spec")
    p_run.add_argument("--out", help="write each table as Parquet into this folder")
    p_run.add_argument("--rows", type=int, default=20, help="rows to print per table")
    p_val = sub.add_parser("validate", help="list every problem of a spec")
    p_val.add_argument("spec")
    p_pre = sub.add_parser("presets", help="print the preset catalogues")
    p_pre.add_argument("name", nargs="?", choices=CATALOGUES)
    sub.add_parser("kinds", help="list the scenario kinds")
    args = parser.parse_args(argv)

    try:
        if args.command == "run":
            result = api.run(args.spec)
            # written before printing, so that a reader that stops early
            # (`| head`) leaves the files whole
            written = result.save(args.out) if args.out else []
            for name, table in result.tables.items():
                _show(name, table, args.rows)
            for path in written:
                print(f"wrote {path}")
        elif args.command == "validate":
            problems = api.validate(args.spec)
            for where, message in problems:
                print(f"{where}: {message}" if where else message)
            if problems:
                return 1
            print("valid")
        elif args.command == "presets":
            for name in [args.name] if args.name else CATALOGUES:
                _show(name, presets.catalog(name), 1000)
        elif args.command == "kinds":
            for k in api.kinds():
                print(f"{k['name']:<12} {k['doc']}")
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except EidolonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `... | head` stopped reading: not an error; send what is left of
        # the output nowhere, so that the interpreter's exit does not fail
        # on flushing it
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
