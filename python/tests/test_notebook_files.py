"""The notebooks are valid nbformat documents; from nbformat 4.5 every cell has a unique id (nbformat warns now and will refuse later)."""

import json
import pathlib

import nbformat
import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_cells_have_unique_ids(path):
    raw = json.loads(path.read_text())
    if (raw["nbformat"], raw["nbformat_minor"]) < (4, 5):
        nbformat.validate(nbformat.reads(path.read_text(), as_version=4))
        return
    ids = [c.get("id") for c in raw["cells"]]
    assert all(ids), f"{path.name}: cells without an id at {[i for i, x in enumerate(ids) if not x]}"
    assert len(set(ids)) == len(ids), f"{path.name}: repeated cell ids"
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))


def test_notebooks_found():
    assert len(NOTEBOOKS) >= 11
