"""Executes every notebook in notebooks/ top to bottom, as CI does; a failing cell fails the test.

The kernel is this interpreter: a kernelspec pointing at ``sys.executable`` is written to a
temporary directory put first on JUPYTER_PATH, so a user-level "python3" kernelspec of some
other environment cannot be picked up instead.
"""
from __future__ import annotations

import os
import pathlib
import sys

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from nbclient import NotebookClient

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 300


def test_notebooks_exist():
    names = [p.name for p in NOTEBOOKS]
    assert "01_digits_pure_functions.ipynb" in names and "02_digits_nn_module.ipynb" in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_committed_without_outputs(path):
    # Outputs (figures especially) would bloat every diff; CI regenerates them.
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not dirty, f"{path.name}: clear the outputs of cells {dirty} before committing"


@pytest.fixture(scope="module")
def this_interpreter_kernel(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("jupyter")
    write_kernel_spec(str(data_dir / "kernels" / "python3"))  # argv[0] = sys.executable
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join([str(data_dir)] + ([old] if old else []))
    yield "python3"
    if old is None:
        del os.environ["JUPYTER_PATH"]
    else:
        os.environ["JUPYTER_PATH"] = old


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, this_interpreter_kernel):
    nb = nbformat.read(path, as_version=4)
    # One extra cell reports which environment the kernel runs in.
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print('kernel prefix:', sys.prefix)"))
    env = dict(os.environ)
    # The notebooks' matrices are small: multithreaded BLAS only adds contention, badly so
    # next to the other pytest-xdist worker on 2 cores (an OpenBLAS step goes from ~0.1 ms to
    # several ms), so the kernel gets one thread unless the caller chose otherwise.
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("MPLBACKEND", None)  # the kernel's inline backend, so figures become outputs
    client = NotebookClient(nb, kernel_name=this_interpreter_kernel, timeout=CELL_TIMEOUT_S,
                            startup_timeout=120,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=env)  # raises CellExecutionError naming the cell and its traceback

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    streams = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    figures = sum("image/png" in o.get("data", {}) for o in outputs)
    min_figures, lines = EXPECTED.get(path.stem, EXPECTED_DEFAULT)
    assert figures >= min_figures, f"{path.name}: expected rendered figures, got {figures}"
    for line in lines:
        assert line in streams, f"{path.name}: missing output {line!r}"
    assert f"kernel prefix: {sys.prefix}\n" in streams, "the kernel ran another Python environment"


# What each notebook must show: (minimum figures, lines its outputs must contain).
EXPECTED_DEFAULT = (2, ("test accuracy:",))
EXPECTED = {
    "03_sharding": (1, ("matches NumPy: True", "full value matches: True",
                        "ring all-reduce matches psum: True",
                        "gradient matches the closed form: True")),
}
