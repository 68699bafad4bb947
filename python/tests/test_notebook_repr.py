"""Results render in notebooks (_repr_html_) with their kind, key numbers and tables; a sweep says it is one."""

import html
import re

import eidolon

SMALL_TRAINING = {"kind": "training", "model": {"preset": "gpt-22b", "layers": 2}, "gpu": "a100-80gb-sxm",
                  "cluster": {"preset": "dgx-a100", "nodes": 1}, "parallel": {"tp": 8, "global_batch": 8}}


def _cells(doc: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", doc)]


def test_result_html_shows_kind_key_numbers_and_tables():
    r = eidolon.run({"kind": "selftest", "iterations": 10, "seed": 3}, progress=False)
    doc = r._repr_html_()
    assert "kind <b>selftest</b>" in doc and "seed 3" in doc and f"eidolon_version {eidolon.__version__}" in doc
    summary = r["summary"].to_pylist()[0]
    cells = _cells(doc)
    # key numbers: name/value pairs of the summary's first row, then one row per table
    assert cells[:4] == ["iterations", "10", "checksum", str(summary["checksum"])]
    assert cells[4:] == ["summary", "1", "iterations, checksum"]
    assert r.key_numbers() == summary


def test_wide_summaries_are_cut_and_every_table_listed():
    r = eidolon.run(SMALL_TRAINING, progress=False)
    doc = r._repr_html_()
    numbers = r.key_numbers()
    assert len(r["summary"].column_names) > 16  # the case under test: more columns than shown
    assert f"... {len(numbers) - 16} more in result['summary']" in doc
    first = next(iter(numbers))
    assert f"<td>{first}</td>" in doc
    for name, t in r.tables.items():
        assert f"<td>{name}</td><td>{t.num_rows}</td>" in doc
    assert "<script" not in doc


def test_html_escapes_what_the_spec_says():
    r = eidolon.Result({"kind": "<x>"}, {"summary": eidolon.run({"kind": "selftest", "iterations": 1}, progress=False)["summary"]})
    doc = r._repr_html_()
    assert "&lt;x&gt;" in doc and "<x>" not in doc


def test_sweep_result_says_it_is_a_sweep():
    specs = [{"kind": "selftest", "iterations": n} for n in (10, 20, -1)]
    r = eidolon.sweep(specs, executor=None, progress=False)
    assert isinstance(r, eidolon.SweepResult) and isinstance(r, eidolon.Result)
    assert r.kind == "sweep" and r.specs == specs and r.spec == {"sweep": specs}
    meta = r.metadata
    assert (meta["kind"], meta["points"], meta["point_kinds"], meta["failed"]) == ("sweep", "3", "selftest", "1")
    assert meta["eidolon_version"] == eidolon.__version__
    assert repr(r).startswith("<eidolon.SweepResult points=3 kinds=['selftest'] ")
    doc = r._repr_html_()
    assert "<b>sweep</b> of 3 points of kind selftest, 1 failed" in doc
    wall = sum(r["points"].column("wall_s").to_pylist())
    assert r.key_numbers() == {"points": 3, "failed": 1, "wall_s_total": wall}
    assert _cells(doc)[:4] == ["points", "3", "failed", "1"]
