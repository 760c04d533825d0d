"""The timeline view renders every row, marks barriers and the critical path, in text, SVG and Jupyter."""

from simtc.engine.core import Engine
from simtc.kernels.hazards import build
from simtc.render.export import to_svg, to_text
from simtc.render.timeline import TimelineView


def test_rows_and_marks():
    e = Engine(build("hazard/missing-before-fence-fixed")).run()
    text = to_text(TimelineView(e), width=100)
    for row in ("epilogue[w0]", "epilogue[w3]", "mma[w4]", "tensor pipe", "TMEM ld/st", "mma_done", "epi_done"):
        assert row in text
    assert "░" in text and "│" in text and "critical path" in text
    assert str(e.cycles) in text


def test_hazards_listed_and_svg_and_html():
    e = Engine(build("hazard/ld-before-commit")).run()
    view = TimelineView(e)
    assert "tmem-read-before-commit" in to_text(view, width=120)
    assert to_svg(view, width=100).startswith("<svg")
    assert "mma[w4]" in view._repr_mimebundle_(include=None, exclude=None)["text/html"]


def test_paused_run_shows_waiting_warps():
    e = Engine(build("hazard/ld-before-commit-fixed")).run(until=100)
    text = to_text(TimelineView(e), width=80)
    line = next(ln for ln in text.splitlines() if ln.startswith("epilogue[w0]"))
    assert line.rstrip().endswith("░")


def test_long_barrier_names_are_whole_or_abbreviated_with_a_legend():
    from simtc.kernels.flashmla.replay import replay
    from simtc.render.export import to_text

    eng = replay("v32", 2, 0, timing_only=True, keep_engine=True).engine
    names = {e.detail.split(" ")[0] for e in eng.trace if e.kind == "arrive" and not e.detail.startswith("bar ")}
    assert "valid_coord_scale_ready[0]" in names
    wide = to_text(TimelineView(eng, width=140), width=140)
    assert all(n in wide for n in names) and "abbreviated" not in wide
    narrow = " ".join(to_text(TimelineView(eng, width=60), width=60).split())
    legend = narrow[narrow.index("abbreviated:"):]
    assert all(n in narrow for n in names)  # every full name is still on the page
    assert "valid_coord_scale_ready[0]" in legend and "~" in legend
