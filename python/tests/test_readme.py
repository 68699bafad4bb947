"""The README: its Python examples run as written (in a scratch directory), and every scenario kind is in its table and in docs/SCENARIOS.md."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    scope: dict = {}
    for code in blocks:
        exec(compile(code, str(README), "exec"), scope)
    assert (tmp_path / "out" / "step.json").stat().st_size > 0
    assert (tmp_path / "out" / "run1" / "summary.parquet").exists()
    links = scope["sweep"].to_pandas("links")
    assert len(links) > 0


SCENARIOS = README.parent / "docs" / "SCENARIOS.md"


def test_every_kind_is_documented():
    """Each registered kind has a row in the README's Scenarios table that
    links to its section of docs/SCENARIOS.md, and that section exists."""
    import eidolon

    readme = README.read_text()
    sections = set(re.findall(r"^## `([a-z_]+)`$", SCENARIOS.read_text(), flags=re.M))
    kinds = {k["name"] for k in eidolon.kinds()}
    assert sections == kinds
    for kind in kinds:
        assert f"| [`{kind}`](docs/SCENARIOS.md#{kind}) |" in readme, kind
