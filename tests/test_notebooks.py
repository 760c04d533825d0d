"""The tutorial notebooks execute top to bottom in a fresh kernel and end with the facts they teach.

Each notebook in ``notebooks/`` is generated from its percent-format source in ``notebooks/src/``
by ``docs/scripts/notebooks.py`` and stored without outputs. The kernel is this interpreter
(a kernelspec written to a temporary ``JUPYTER_PATH`` by that script), so the test needs no user-level
Jupyter setup: nbclient and ipykernel come with the dev extra.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SCRIPT = ROOT / "docs" / "scripts" / "notebooks.py"

HAVE_JUPYTER = all(importlib.util.find_spec(m) is not None for m in ("nbclient", "nbformat", "ipykernel"))
needs_jupyter = pytest.mark.skipif(not HAVE_JUPYTER,
                                   reason="nbclient, nbformat and ipykernel (dev extra) not installed")


def test_there_are_notebooks_for_every_source():
    names = [p.stem for p in NOTEBOOKS]
    assert len(names) >= 4
    assert names == sorted(p.stem for p in (ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))


@needs_jupyter
def test_notebooks_match_their_sources():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs_and_ends_with_assertions(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "a notebook without code"
    assert all(not c["outputs"] and c["execution_count"] is None for c in code), "outputs committed"
    last = "".join(code[-1]["source"])
    assert last.count("assert ") >= 3, "the last cell asserts the facts the notebook teaches"


@pytest.fixture(scope="session")
def executed():
    """Every notebook executed in a fresh kernel (``docs/scripts/notebooks.py``'s ``executed_all``: in parallel,
    each in its own kernel, kept in the cache the docs build reads too, keyed by the notebook, simtc's code and
    the package versions -- so a suite that also builds the site runs each notebook once)."""
    spec = importlib.util.spec_from_file_location("_simtc_docs_notebooks", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {src.stem: nb for src, nb in mod.executed_all().items()}


@needs_jupyter
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, executed):
    nb = executed[path.stem]
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    # rich views show as HTML inline, not just as text
    assert any("text/html" in o.get("data", {}) for c in code for o in c.outputs)
    last = "".join(o.get("text", "") for o in code[-1].outputs if o.output_type == "stream")
    assert "facts of notebook" in last and "hold" in last
