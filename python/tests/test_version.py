"""The version is written once, in bindings/bindings.go; the package and the engine agree on it."""

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import eidolon
from eidolon import _engine

ROOT = Path(__file__).resolve().parents[2]


def _go_version() -> str:
    src = ROOT / "bindings" / "bindings.go"
    if not src.exists():
        pytest.skip("not a source tree")
    (version,) = re.findall(r'^const Version = "([^"]+)"$', src.read_text(), re.M)
    return version


def test_package_engine_and_go_source_agree():
    version = _go_version()
    assert eidolon.__version__ == version
    assert _engine.engine_version() == version
    assert metadata.version("eidolon") == version
    r = eidolon.run({"kind": "selftest", "iterations": 10}, progress=False)
    assert r.metadata["eidolon_version"] == version


def test_version_is_written_nowhere_else():
    version = _go_version()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    places = [ROOT / "pyproject.toml", ROOT / "setup.py", *sorted((ROOT / "python" / "eidolon").glob("*.py"))]
    literal = re.compile(rf"""["']{re.escape(version)}["']""")
    assert [p.name for p in places if literal.search(p.read_text())] == []
