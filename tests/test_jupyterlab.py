"""The stepping notebooks in a real JupyterLab, driven in a headless Chromium as a new user would use them.

``docs/scripts/check_jupyterlab.py`` starts ``jupyter lab`` (this interpreter's, which needs the ``notebooks``
extra) on a temporary copy of ``notebooks/``, opens notebook 03 in Chromium through Playwright, runs all cells from
the *Run* menu, presses the stepping widget's buttons and reads what the page shows; then notebook 04. Skipped,
saying why, without JupyterLab and ipywidgets, Playwright or Chromium (``--fresh`` runs the same check in a new
virtual environment made by the README's command; not run here, it installs packages).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("_simtc_check_jupyterlab_t",
                                                  ROOT / "docs" / "scripts" / "check_jupyterlab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _script()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    why = check.missing_requirements()
    if why:
        pytest.skip(f"no JupyterLab check in a browser: {why}")
    shots = tmp_path_factory.mktemp("jupyterlab-shots")
    problems, report = check.check(check.this_jupyter(), shots, timeout_s=600, log=lambda *_: None)
    return problems, report, shots


def test_readme_command_opens_the_notebooks_with_the_notebooks_extra():
    make, install, cute, start = check.readme_notebook_command()
    assert make == "python3 -m venv .venv"
    assert install == '.venv/bin/pip install -q -e ".[notebooks]"'
    assert cute == ".venv/bin/pip install -q --no-deps nvidia-cutlass==4.2.0.0"  # pycute, for notebook 03
    assert start == ".venv/bin/jupyter lab notebooks/"
    extra = (ROOT / "pyproject.toml").read_text()
    assert 'notebooks = ["jupyterlab>=4.0", "ipywidgets>=8.1", "ipykernel>=6.25"]' in extra


def test_every_check_passes_and_the_server_is_stopped(lab):
    problems, report, _ = lab
    assert problems == []
    assert report["server_stopped"] and report["dialogs"] == [] and report["console_errors"] == []


@pytest.mark.parametrize("name", check.NOTEBOOKS)
def test_run_all_cells_runs_every_cell_without_an_error(lab, name):
    """Run > Run All Cells in the browser, then the saved notebook: every code cell ran, no error output, the last
    cell (the asserts answering the notebook's questions) printed that all its facts hold."""
    _, report, _ = lab
    r = report[name]
    assert r["executed"] == r["code_cells"] > 10 and r["errors"] == [] and r["dom_errors"] == []
    assert r["last_output"].strip() == check.LAST_LINE[name] and all(r["outputs_of_last_cells"])
    assert r["widget_views"] == 1


def test_next_mma_walks_the_18_qk_instructions_and_the_slider_follows(lab):
    _, report, _ = lab
    r = report["03_dual_gemm"]
    assert r["labels"] == ["QK RoPE k=0", "QK RoPE k=1", *(f"QK k={k}" for k in range(16))]
    assert r["kinds"] == ["issue"] and r["steps"] == sorted(set(r["steps"]))
    assert len(r["tmem_redrawn"]) == 17 and all(r["tmem_redrawn"])
    # the writes land at completion: P is first written between the RoPE pair and the NoPE issues (press 2)
    assert r["p_writer_walk"][0] is None and r["p_writer_walk"][-1].endswith(" QK RoPE k=1")
    assert r["tmem_map_changed"][1] and sum(r["tmem_map_changed"]) >= 1


def test_go_role_mma_watches_p_fill_until_the_18th_completes(lab):
    _, report, _ = lab
    r = report["03_dual_gemm"]
    assert r["completions_seen"] == [f"QK k={k}" for k in range(16)]
    assert r["p_writer_final"].endswith(" QK k=15")
    first_step = r["steps"][0]
    assert r["back"][1] == r["back"][0] - 1                                 # back: one event
    assert r["typed"] == (first_step, first_step, "QK RoPE k=0")            # a step typed into the slider's box


def test_mma_lands_watches_p_fill_one_completion_per_press(lab):
    _, report, _ = lab
    lands = report["03_dual_gemm"]["lands"]
    labels = ["QK RoPE k=0", "QK RoPE k=1", *(f"QK k={k}" for k in range(16))]
    assert [label for label, _, _ in lands] == labels and {kind for _, kind, _ in lands} == {"complete"}
    assert all(writer.endswith(" " + label) for label, _, writer in lands)  # P's picture follows every press


def test_notebook_04_widget_moves(lab):
    _, report, _ = lab
    moves = {label: (a, b) for label, a, b, _ in report["04_pipeline_timeline"]["moves"]}
    assert moves["◀ back"][1] == moves["◀ back"][0] - 1
    assert moves["slider ArrowRight"][1] == moves["slider ArrowRight"][0] + 1
    assert moves["slider drag"][1] > moves["slider drag"][0]
    assert moves["next completion"][1] > moves["next completion"][0]


def test_screenshots_are_written(lab):
    _, report, shots = lab
    names = {p.name for p in shots.glob("*.png")}
    assert {"03-start.png", "03-mma-press-1.tmem.png", "03-mma-18th.tmem.png", "03-qk-k15-complete.tmem.png",
            "04-after-moves.png"} <= names
    listed = report["03_dual_gemm"]["shots"] + report["04_pipeline_timeline"]["shots"]
    assert sorted(listed) == sorted(str(p) for p in shots.glob("*.png"))
    for p in shots.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 20_000
