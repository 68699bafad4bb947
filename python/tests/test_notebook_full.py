"""Every notebook also runs at full size (its one parameter, FULL = True), which the
notebook tests (make nb-test) never set: a full-size branch that no longer validates
would otherwise ship (09_moe's layout of 17 chunks for 16 stages did). Each cell is
bounded by the client's timeout, so none of these can hang."""

import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))

# Full size where it takes minutes here: run it by hand with FULL = True.
SLOW = {"08_resilience.ipynb": "FULL simulates 300 fault samples of a 1,024-GPU step (about 6 minutes on 2 cores)"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_at_full_size(path, tmp_path):
    if path.name in SLOW:
        pytest.skip(SLOW[path.name])
    nb = nbformat.read(path, as_version=4)
    switches = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("FULL = False")]
    assert len(switches) == 1, f"{path.name}: expected one cell opening with FULL = False, found {len(switches)}"
    switches[0].source = switches[0].source.replace("FULL = False", "FULL = True", 1)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
