"""The timeline view renders every row, marks barriers and the critical path, in text, SVG and Jupyter."""

from simtc.engine.core import Engine
from simtc.kernels.hazards import build
from simtc.render.export import to_svg, to_text


def test_rows_and_marks():
    e = Engine(build("hazard/missing-before-fence-fixed")).run()
    text = to_text(e.timeline(), width=100)
    for row in ("epilogue[w0]", "epilogue[w3]", "mma[w4]", "tensor pipe", "TMEM ld/st", "mma_done", "epi_done"):
        assert row in text
    assert "░" in text and "│" in text and "critical path" in text
    assert str(e.cycles) in text


def test_hazards_listed_and_svg_and_html():
    e = Engine(build("hazard/ld-before-commit")).run()
    view = e.timeline()
    assert "tmem-read-before-commit" in to_text(view, width=120)
    assert to_svg(view, width=100).startswith("<svg")
    assert "mma[w4]" in view._repr_mimebundle_(include=None, exclude=None)["text/html"]


def test_paused_run_shows_waiting_warps():
    e = Engine(build("hazard/ld-before-commit-fixed")).run(until=100)
    text = to_text(e.timeline(), width=80)
    line = next(ln for ln in text.splitlines() if ln.startswith("epilogue[w0]"))
    assert line.rstrip().endswith("░")
