"""The README's Python examples run as written (in a scratch directory)."""

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
