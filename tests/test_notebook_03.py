"""Notebook 03 as a learner uses it: run its cells in a fresh kernel, then step through the dual GEMM with the widget.

``tests/test_notebooks.py`` runs every notebook to its final assertions. This test runs notebook 03's cells up to
its stepping widget (sections 1-3) and then presses the widget's *next MMA* button the way a learner in JupyterLab
would: 17 presses from the first QK instruction walk the other 17 of block 0's 18 dual-GEMM instructions, and the
picture the widget shows after the last one's completion has P written in both lane halves by it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "notebooks" / "src" / "03_dual_gemm.py"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("nbclient", "nbformat", "ipykernel", "ipywidgets")),
    reason="nbclient, nbformat, ipykernel and ipywidgets (dev extra) not installed")]

LEARNER = """
labels = [widget.event().label]
for _ in range(17):
    widget.click("mma")
    labels.append(widget.event().label)
last = widget.to_next(label="QK k=15", kind="complete")
state = widget.stepper.state()
p_owner = {state.writers[i] for i in state.writer_ids[:, 400:464].ravel().tolist()}
print(json.dumps({"labels": labels, "status": widget.status(), "slider": widget.slider.value, "step": widget.step,
                  "last": last.label, "p_owner": sorted(p_owner), "picture": widget.html()}))
"""


def _cells():
    spec = importlib.util.spec_from_file_location("_simtc_nb_script_03", ROOT / "docs" / "scripts" / "notebooks.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script, script.cells_of(SOURCE)


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    """Run sections 1-3 of notebook 03 in a fresh kernel, then press the widget's buttons; the widget cell's outputs
    and what the presses showed."""
    import nbformat
    from nbclient import NotebookClient

    script, cells = _cells()
    upto = next(i for i, (kind, body) in enumerate(cells) if kind == "code" and "StepperWidget(" in body)
    nb = nbformat.reads(script.notebook_json(cells[:upto + 1]), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import json\n" + LEARNER))
    base = tmp_path_factory.mktemp("jupyter")
    spec_dir = base / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (simtc tests)", "language": "python"}))
    mp = pytest.MonkeyPatch()
    for k, v in {"JUPYTER_PATH": str(base), "JUPYTER_PLATFORM_DIRS": "1", "IPYTHONDIR": str(base / "ipython"),
                 "JUPYTER_RUNTIME_DIR": str(base / "runtime"), "JUPYTER_CONFIG_DIR": str(base / "config"),
                 "MPLBACKEND": "Agg", "SIMTC_PROGRESS": "0"}.items():
        mp.setenv(k, v)
    try:
        NotebookClient(nb, kernel_name="python3", timeout=120,
                       resources={"metadata": {"path": str(base)}}).execute()
    finally:
        mp.undo()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    widget_outputs = nb.cells[upto].outputs
    pressed = json.loads("".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream"))
    return widget_outputs, pressed


def test_the_widget_cell_shows_a_live_widget_and_its_picture(learner):
    outputs, _ = learner
    data = [o["data"] for o in outputs if o.output_type == "display_data"]
    assert any(WIDGET_MIME in d for d in data), "JupyterLab gets no widget view"
    html = next(d["text/html"] for d in data if "text/html" in d)
    assert "QK RoPE k=0" in html and "tcgen05.mma.ws" in html  # the first dual-GEMM instruction, its PTX line


def test_next_mma_walks_the_18_dual_gemm_instructions(learner):
    _, pressed = learner
    assert pressed["labels"] == ["QK RoPE k=0", "QK RoPE k=1", *(f"QK k={k}" for k in range(16))]
    assert pressed["slider"] == pressed["step"]  # the slider follows the presses
    assert pressed["status"].startswith(f"step {pressed['step']} of ")


def test_after_the_last_completion_p_is_the_18th_instructions(learner):
    _, pressed = learner
    assert pressed["last"] == "QK k=15"
    assert len(pressed["p_owner"]) == 1 and pressed["p_owner"][0].endswith("QK k=15")  # all 128 lanes x 64 columns
    assert "Tensor Memory at step" in pressed["picture"] and "QK k=15" in pressed["picture"]
