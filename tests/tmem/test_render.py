"""TMEM views: map, layout and ld pictures render the model's numbers (text and SVG).

Their speed (the full 128 x 512 map well under a second) is measured in benchmarks/bench_tmem.py.
"""

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from simtc.errors import SimtcError
from simtc.kernels.flashmla import TMEM_V32
from simtc.render import to_svg, to_text
from simtc.render.tmem import LayoutView, LdView, TmemMapView
from simtc.tmem import LdStOp, TensorMemory, datapath_layout


def _busy_tmem():
    tm = TensorMemory(enforce_nonincreasing=False)
    tm.alloc(256, warp=0)
    tm.alloc(128, warp=0)
    for w in range(4):
        tm.st((32 * w) << 16, np.zeros((32, 64), np.uint32), "32x32b", 64, warp=w)
    tm.st(16 << 16 | 256, np.zeros((32, 16), np.uint32), "16x256b", 4, warp=0)
    return tm


def test_full_map_renders_in_text_and_svg():
    tm = _busy_tmem()
    views = [TmemMapView(tm, by=b) for b in ("allocation", "writer")]
    views.append(TmemMapView(tm, regions=TMEM_V32))
    views.append(TmemMapView(tm, by="writer", lanes_per_row=1, columns_per_char=1))   # all 65,536 cells
    for v in views:
        text = to_text(v, width=600)
        assert "warp quadrant 3" in text
        assert ET.fromstring(to_svg(v, width=600)).tag.endswith("svg")
    full = to_text(views[-1], width=600).splitlines()
    assert sum(1 for ln in full if ln.strip()[:3].rstrip().isdigit()) >= 128  # one row per lane


def test_map_by_allocation_marks_quadrants_and_allocations():
    tm = _busy_tmem()
    text = to_text(TmemMapView(tm), width=120)
    lines = text.splitlines()
    for q in range(4):
        assert f"warp quadrant {q} (warps with w % 4 = {q}): lanes {32 * q}-{32 * q + 31}" in text
    row0 = next(ln for ln in lines if ln.strip().startswith("0-3"))
    grid = row0.split()[-1]
    assert grid == "0" * 32 + "1" * 16 + "·" * 16                 # 256 + 128 columns allocated, 128 free
    assert "allocation #0: columns 0-255 (256), by warp 0" in text


def test_map_by_writer_shows_mixed_blocks():
    tm = _busy_tmem()
    text = to_text(TmemMapView(tm, by="writer"), width=120)
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("16-19")).split()[-1]
    assert row[:8] == "0" * 8 and row[32:34] == "44"                # st by warp 0, then the 16x256b store
    assert "tcgen05.st.sync.aligned.16x256b.x4.b32 (warp 0)" in text


def test_flashmla_region_map():
    text = to_text(TmemMapView(regions=TMEM_V32), width=120)
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("64-67")).split()[-1]
    assert row == "O" * 32 + "Q" * 16 + "t" * 2 + "P" * 8 + "f" * 6
    assert "Q_tail: lanes 0-127, columns 384-399" in text


def test_layout_view_e_and_f():
    text = to_text(LayoutView(datapath_layout(64, 128, ws=True), c0=400), width=130)
    assert "Layout E" in text and "[inferred]" in text
    assert "64-79   │ 0-15   │ 64-127    │ 400-463" in text
    text = to_text(LayoutView(datapath_layout(64, 128, lane_align=16)), width=130)
    assert "0-15    │ unused" in text and "16-31   │ 0-15" in text


def test_ld_view_names_thread_and_register_of_each_cell():
    text = to_text(LdView(LdStOp("16x256b", 1)), width=160)
    row9 = next(ln for ln in text.splitlines() if ln.strip().startswith("+9 "))
    assert row9.split()[1:9] == ["t4r2", "t4r3", "t5r2", "t5r3", "t6r2", "t6r3", "t7r2", "t7r3"]
    text = to_text(LdView(LdStOp("16x32bx2", 1, pack=True), threads_listed=17), width=160)
    assert "t16r0l" in text and "thread 16: r0=(0,2,3)" in text


def test_svg_is_valid_xml_and_stable():
    v = TmemMapView(_busy_tmem(), by="writer")
    a, b = to_svg(v), to_svg(v)
    assert a == b
    ET.fromstring(a)


def test_tensor_memory_renders_through_its_view():
    """TensorMemory is a plain model (no rich protocol, no import of simtc.render); the map is its view."""
    tm = _busy_tmem()
    assert not hasattr(tm, "__rich__") and not hasattr(tm, "__rich_console__")
    assert "Tensor Memory 128 lanes x 512 columns" in to_text(TmemMapView(tm))


def test_bad_view_options_raise():
    with pytest.raises(SimtcError):
        TmemMapView(by="writer")
    with pytest.raises(SimtcError):
        TmemMapView(TensorMemory(), by="colour")
    with pytest.raises(SimtcError):
        TmemMapView(TensorMemory(), lanes_per_row=3)
