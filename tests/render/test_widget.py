"""The Jupyter stepping widget (simtc.render.widget): its model, its controls kept in sync, its HTML, the static
fallback, and its output in an executed notebook."""

from __future__ import annotations

import html
import importlib.util
import json
import re
import sys

import pytest

from simtc.engine.stepper import StepError, Stepper
from simtc.kernels.flashmla.replay import stepper as head64_stepper
from simtc.kernels.hazards import build
from simtc.render import widget as widget_module
from simtc.render.export import to_text
from simtc.render.timeline import _CURSOR
from simtc.render.widget import StepperWidget, WidgetError, have_ipywidgets, show_steps

needs_widgets = pytest.mark.skipif(not have_ipywidgets(),
                                   reason="ipywidgets (dev extra) not installed: the interactive controls cannot be "
                                          "built; the model and the static pictures are tested without them")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CURSOR_COLOUR = _CURSOR.bgcolor.get_truecolor().hex


@pytest.fixture
def w():
    """The widget over one block of the head64 replay, without the timeline (faster pictures)."""
    return StepperWidget(head64_stepper("v32", 1), timeline=False)


def _text_of(page: str) -> str:
    """The text of an HTML picture, its tags dropped and its whitespace (line breaks of wrapped lines) collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())


def _in_sync(w) -> bool:
    return w.slider.value == w.stepper.position == w.step


def test_model_moves_the_stepper(w):
    assert w.step == 0 and w.total == len(w.stepper.events) == 1175  # the one-block run: 1175 trace events
    e = w.next()
    assert w.step == 1 and e is w.stepper.event(1)
    w.next(10)
    assert w.step == 11
    assert w.back(3) is w.stepper.event(8) and w.step == 8
    w.goto(100)
    assert w.step == 100
    w.step = 7
    assert w.stepper.position == 7
    w.goto(w.total)
    assert w.next() is w.stepper.event(w.total) and w.step == w.total and "end of the run" in w.message
    with pytest.raises(StepError, match="past the end"):
        w.goto(w.total + 1)
    w.goto(0)
    assert w.back() is None and w.step == 0


def test_next_mma_and_next_completion(w):
    e = w.next_mma()
    assert e.kind == "issue" and e.ptx.startswith("tcgen05.mma") and e.role == "mma" and e.label.startswith("QK")
    assert e.step == w.stepper.find(opcode="tcgen05.mma", start=0)  # no MMA event before it
    e = w.next_completion()
    assert e.kind == "phase" and e.step == w.stepper.find(kind="phase", start=w.stepper.find(opcode="tcgen05.mma",
                                                                                               start=0))
    # the block's qk_done completion releases the four softmax warps
    while e is not None and e.barrier != "qk_done[0]":
        e = w.next_completion()
    assert sorted(e.released) == [("softmax", k) for k in range(4)]
    assert "releases softmax[w0], softmax[w1], softmax[w2], softmax[w3]" in w.html()
    last = w.stepper.find(opcode="tcgen05.mma", kind="issue", start=0)
    while (n := w.stepper.find(opcode="tcgen05.mma", kind="issue", start=last)) is not None:
        last = n
    w.goto(last)
    assert w.next_mma() is None and w.step == last and "no further MMA" in w.message  # no move


def test_to_next_role_and_barrier(w):
    e = w.to_next(barrier="sv_done[0]", kind="phase")
    assert e.detail.startswith("sv_done[0] phase 0 complete")
    at = w.step
    assert w.to_next(barrier="qk_done[0]", kind="phase") is None and w.step == at  # it completed before
    assert "no further event with barrier qk_done[0], kind phase" in w.message and w.message in w.status()
    targets = [name for name, _ in w.targets()]
    assert targets[:6] == [f"role {r}" for r in ("softmax", "mma", "raw", "rope", "index", "dequant")]
    assert {"barrier qk_done[0]", "barrier so_ready[0]", "barrier bar 10", "barrier bar 11"} <= set(targets)


def test_html_shows_the_step_its_ptx_line_and_the_cursor():
    w = StepperWidget(head64_stepper("v32", 1))  # with the timeline
    seen = set()
    for step in (0, 1, w.stepper.find(opcode="tcgen05.mma", start=0), w.stepper.find(barrier="bar 10", kind="phase",
                                                                                       start=0), w.total):
        w.goto(step)
        h = w.html()
        e = w.event()
        cycle = 0 if e is None else e.cycle
        text = _text_of(h)
        assert f"cursor at step {step} (cycle {cycle})" in text and f"cursor: cycle {cycle}" in text
        assert f"background-color: {CURSOR_COLOUR}" in h  # the cursor's column across the timeline's rows
        if e is not None:
            assert f"step {step} of {w.total}" in text
            if e.ptx:
                assert " ".join(e.ptx.split()) in text
        else:
            assert "step 0: before the first event" in text
        seen.add(h)
    assert len(seen) == 5  # the picture changes with the step
    assert h.startswith("<pre style=") and h.rstrip().endswith("</pre>") and "<span style=" in h


def test_back_then_next_gives_the_same_picture(w):
    for step in (1, 300, 527, 1000):
        w.goto(step)
        before = w.html()
        w.back()
        assert w.html() != before
        w.next()
        assert w.html() == before
    # reached from the end (a checkpoint) and from the start: the same picture
    w.goto(w.total)
    w.goto(700)
    far = w.html()
    w.goto(0)
    w.next(700)
    assert w.html() == far


@needs_widgets
def test_slider_follows_every_move(w):
    assert w.slider.min == 0 and w.slider.max == w.total and _in_sync(w)
    for move in (lambda: w.next(), lambda: w.next(5), lambda: w.back(2), lambda: w.goto(400), w.next_mma,
                 w.next_completion, lambda: w.to_next(role="softmax"), lambda: w.goto(0)):
        move()
        assert _in_sync(w)
        assert w._controls["picture"].value == w.html() and w._controls["status"].value == w.status()


@needs_widgets
def test_slider_and_buttons_move_the_stepper(w):
    w.slider.value = 527
    assert w.stepper.position == 527 and w.event().barrier == "qk_done[0]"
    assert w._controls["picture"].value == w.html() and "qk_done[0] phase 0 complete" in w.html()
    w.click("back")
    assert w.step == 526 and _in_sync(w)
    w.click("next")
    w.click("next")
    assert w.step == 528 and _in_sync(w)
    w.click("mma")
    assert w.event().ptx.startswith("tcgen05.mma") and _in_sync(w)  # the first PV MMA
    at = w.step
    w.select("role mma")
    w.click("jump")
    assert w.event().role == "mma" and w.step == w.stepper.find(role="mma", start=at) and _in_sync(w)
    w.click("completion")
    assert w.event().kind == "phase" and w.event().barrier == "sv_done[0]" and _in_sync(w)  # PV done
    w.select("barrier sv_done[0]")
    w.click("jump")
    assert w.event().barrier == "sv_done[0]" and w.event().role == "softmax" and _in_sync(w)  # a waiter resumes
    at = w.step
    w.select("role mma")
    w.click("jump")  # the MMA warp has finished: no move
    assert w.step == at and "no further event with role mma" in w._controls["status"].value and _in_sync(w)
    with pytest.raises(WidgetError, match="no jump target"):
        w.select("barrier nothing")
    with pytest.raises(WidgetError, match="no control"):
        w.click("forward")


@needs_widgets
def test_display_bundle_has_the_widget_and_the_picture(w):
    w.goto(42)
    bundle = w._repr_mimebundle_()
    assert bundle[WIDGET_VIEW]["model_id"] == w.widget.model_id
    assert bundle["text/html"] == w.html() and "step 42 of 1175" in bundle["text/plain"]


def test_without_ipywidgets_the_model_and_the_picture_remain(monkeypatch):
    monkeypatch.setattr(widget_module, "have_ipywidgets", lambda: False)
    w = StepperWidget(Stepper.for_program(build("hazard/ld-before-commit-fixed"), mode="timing"), start=3)
    assert w.widget is None and w.slider is None and w.step == 3
    w.next()
    assert w.step == 4
    bundle = w._repr_mimebundle_()
    assert WIDGET_VIEW not in bundle and "ipywidgets is not installed" in bundle["text/html"]
    assert bundle["text/html"].endswith(w.html()) and "step 4 of" in w.html()
    with pytest.raises(WidgetError, match="ipywidgets is not installed"):
        w.click("next")


def test_static_pictures_of_chosen_steps():
    s = head64_stepper("v32", 1)
    mma = s.find(opcode="tcgen05.mma", start=0)
    p_done = s.find(barrier="qk_done[0]", kind="phase", start=0)
    s.goto(17)
    view = show_steps(s, [mma, (p_done, "P is in TMEM")], timeline=False)
    text = to_text(view, width=200)
    assert s.position == 17  # rendering moved the stepper and put it back
    assert f"step {mma} (cycle {s.event(mma).cycle})" in text and s.event(mma).ptx in text
    assert f"step {p_done}: P is in TMEM (cycle {s.event(p_done).cycle})" in text
    assert "releases softmax[w0], softmax[w1], softmax[w2], softmax[w3]" in text
    assert text.count("Tensor Memory at step") == 2
    # the same pictures from the class and from a widget
    assert to_text(StepperWidget.static(s, [mma, (p_done, "P is in TMEM")], timeline=False), width=200) == text
    w = StepperWidget(s, start=5, timeline=False)
    assert to_text(w.static([mma, (p_done, "P is in TMEM")]), width=200) == text and w.step == 5
    # in Jupyter it shows as HTML (rich's display)
    assert f"step {p_done}: P is in TMEM" in view._repr_mimebundle_([], [])["text/html"]


@needs_widgets
@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("nbclient", "nbformat", "ipykernel")),
                    reason="nbclient, nbformat and ipykernel (dev extra) not installed")
def test_executed_notebook_keeps_the_widget_and_the_pictures(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    spec = tmp_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    for k, v in {"JUPYTER_PATH": tmp_path, "JUPYTER_PLATFORM_DIRS": "1", "IPYTHONDIR": tmp_path / "ipython",
                 "JUPYTER_RUNTIME_DIR": tmp_path / "runtime", "JUPYTER_CONFIG_DIR": tmp_path / "config"}.items():
        monkeypatch.setenv(k, str(v))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from simtc.engine.stepper import Stepper\nfrom simtc.kernels.hazards import build\n"
        "from simtc.render.widget import StepperWidget, show_steps\n"
        "s = Stepper.for_program(build('hazard/ld-before-commit-fixed'), mode='timing')\n"
        "w = StepperWidget(s, start=2)\nw"),
        nbformat.v4.new_code_cell("w.next_completion()\nshow_steps(s, [1, 3])")]
    NotebookClient(nb, kernel_name="python3", timeout=60, resources={"metadata": {"path": str(tmp_path)}}).execute()
    first, second = (c.outputs for c in nb.cells)
    shown = next(o for o in first if o.output_type == "execute_result")["data"]
    assert WIDGET_VIEW in shown and "step 2 of" in shown["text/html"]
    model_id = shown[WIDGET_VIEW]["model_id"]
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert model_id in state and state[model_id]["model_name"] == "VBoxModel"
    # the saved state holds the slider at the step the kernel moved to, and that step's picture
    sliders = [m["state"] for m in state.values() if m["model_name"] == "IntSliderModel"]
    pictures = [m["state"]["value"] for m in state.values() if m["model_name"] == "HTMLModel"]
    assert len(sliders) == 1 and sliders[0]["value"] > 2
    assert f"step {sliders[0]['value']} of" in pictures[0]
    static = next(o for o in second if o.output_type == "execute_result")["data"]["text/html"]
    assert "step 1 " in static and "step 3 " in static


def test_mma_lands_shows_p_fill_one_completion_at_a_time(w):
    """From block 0's first QK issue, 18 "MMA lands" reach the 18 QK completions in the kernel's order (RoPE first),
    and after each the TMEM picture's P columns are last written by that instruction."""
    first = w.stepper.find(opcode="tcgen05.mma", kind="issue", start=0)
    w.goto(first)
    labels, pictures = [], set()
    for _ in range(18):
        e = w.next_mma_lands()
        assert e.kind == "complete" and e.ptx.startswith("tcgen05.mma")
        labels.append(e.label)
        st = w.stepper.state()
        assert st.tmem_writer[0, 400] == e.step and st.tmem_writer[127, 463] == e.step  # P: lanes 0-127, cols 400-463
        pictures.add(w.html())
    assert labels == ["QK RoPE k=0", "QK RoPE k=1", *(f"QK k={k}" for k in range(16))]
    assert len(pictures) == 18  # the picture changed at every press
    if have_ipywidgets():
        w.goto(first)
        w.click("lands")
        assert w.event().label == "QK RoPE k=0" and w.event().kind == "complete" and _in_sync(w)
