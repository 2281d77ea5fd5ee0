"""The notebooks run top to bottom on a fresh kernel without errors. Each checks its own batched results against
per-row loops or dense results (the cells assert), and each of the batched-backward ones shows the per-row
fallback's warning once."""

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = [
    "01_jacobians",
    "02_per_sample_gradients",
    "03_hessian_vector_products",
    "04_porting_from_torch_func",
    "05_sparse_jacobians",
    "06_curvature",
]
SHOWS_FALLBACK = NOTEBOOKS[:4]  # the notebooks on batched backward each show the per-row fallback's warning once
CELL_TIMEOUT_S = 120


def _read(name):
    return nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)


def _code_outputs(notebook):
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]


def _text(outputs):
    return "".join(output.get("text", "") for output in outputs if output.output_type == "stream")


def test_the_notebook_directory_holds_exactly_the_tested_notebooks():
    assert sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")) == NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_is_rendered_and_small(name):
    notebook = _read(name)
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code_cells), "run the notebook before committing it"
    assert any("image/png" in output.get("data", {}) for output in _code_outputs(notebook)), "the plot is missing"
    assert not [output for output in _code_outputs(notebook) if output.output_type == "error"]
    assert (NOTEBOOK_DIR / f"{name}.ipynb").stat().st_size < 150_000


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes_on_a_fresh_kernel(name):
    notebook = _read(name)
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK_DIR)}}
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error (a failed check included)
    text = _text(_code_outputs(notebook))
    if name in SHOWS_FALLBACK:
        assert "FallbackWarning: " in text and "could not be vectorized" in text
    assert any("image/png" in output.get("data", {}) for output in _code_outputs(notebook))
