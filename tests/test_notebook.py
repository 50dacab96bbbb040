"""notebooks/profile_example.ipynb executes top to bottom (nbclient, this environment's ipykernel)."""
import pytest

from conftest import REPO

NOTEBOOK = REPO / "notebooks" / "profile_example.ipynb"


@pytest.mark.slow
def test_example_notebook_executes(tmp_path, monkeypatch):
    # the notebook profiles into a fresh temporary folder, as a user's would: the test's own, not the machine's /tmp
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # The kernel is ipykernel's own spec: it runs this very interpreter (the .venv's python).
    NotebookClient(nb, timeout=240, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "Input-bound" in text and "dataloader waits" in text and "trace.chrome.json" in text
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 2
    bars = figures[0]["data"]["application/vnd.plotly.v1+json"]["data"]
    assert {b["name"] for b in bars} >= {"dataloader", "forward", "backward"}
