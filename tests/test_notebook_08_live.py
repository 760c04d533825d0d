"""Notebook 08 with a FlashMLA checkout: the kernel compiled, executed and held to its recording and the hand Program.

``tests/test_notebooks.py`` executes every notebook as CI does, without a checkout, where notebook 08 answers from
the recordings in ``tests/data``. With ``SIMTC_FLASHMLA_DIR`` (and nvcc) the notebook also compiles FlashMLA's head64
kernel, executes it and asserts the facts on the executed records themselves; this test runs it that way (in a fresh
kernel, outside the docs build's cache, whose key does not include the checkout) and checks that the live
assertions ran and held.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "scripts" / "notebooks.py"
SOURCE = ROOT / "notebooks" / "src" / "08_the_kernel_itself.py"
CHECKOUT = os.environ.get("SIMTC_FLASHMLA_DIR")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHECKOUT or shutil.which("nvcc") is None,
                       reason="set SIMTC_FLASHMLA_DIR to a FlashMLA checkout (9241ae3, its CUTLASS headers) and put "
                              "nvcc on PATH: the notebook's live cells compile FlashMLA's kernel, which the repository "
                              "does not hold"),
    pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("nbclient", "nbformat", "ipykernel")),
                       reason="nbclient, nbformat and ipykernel (dev extra) not installed"),
]


def test_the_live_notebook_executes_and_its_live_assertions_hold():
    import nbformat

    spec = importlib.util.spec_from_file_location("_simtc_docs_notebooks_08", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with tempfile.TemporaryDirectory(prefix="simtc-nb08-") as tmp:
        env = {**mod._kernel_env(Path(tmp)), "SIMTC_FLASHMLA_DIR": CHECKOUT}
        out = Path(tmp) / "08.ipynb"
        done = subprocess.run([sys.executable, str(SCRIPT), "--execute-one", str(SOURCE), str(out)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        nb = nbformat.read(out, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = ["".join(o.get("text", "") for o in c.outputs if o.output_type == "stream") for c in code]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert text[0].startswith("live: FlashMLA at") and "is compiled and executed below" in text[0]
    assert not any("skipped (no FlashMLA checkout)" in t for t in text)
    assert text[-1].strip() == "all facts of notebook 08 hold"      # the live branch of the last cell ran
    assert any("kernel.cuh:542" in t and "kernel.cuh:552" in t for t in text)
