"""Views of tiles, descriptors and bank maps render the model's numbers (text and SVG)."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from simtc.errors import SimtcError
from simtc.render import to_svg, to_text
from simtc.render.banks import BankMapView
from simtc.render.smem import DescriptorView, TileView
from simtc.smem import CanonicalLayout, SmemDescriptor, bank_conflicts


def test_logical_tile_view_shows_swizzled_offsets():
    t = CanonicalLayout("bf16", "K", "SW128", 16, 64)
    text = to_text(TileView(t), width=160)
    row1 = next(line for line in text.splitlines() if line.strip().startswith("1 "))
    # row 1: chunks land at 0x90, 0x80, 0xb0, 0xa0, ... (chunk c -> c ^ 1)
    assert row1.split()[1:] == ["0x0090", "0x0080", "0x00b0", "0x00a0", "0x00d0", "0x00c0", "0x00f0", "0x00e0"]
    assert "0x4000404000010000" in text


def test_physical_view_inverts_the_logical_one():
    t = CanonicalLayout("bf16", "MN", "SW64", 64, 16)
    text = to_text(TileView(t, view="physical"), width=160)
    # MN-major SW64: K row 2 (byte 128) puts MN 0-7 in chunk 1 (phase (128>>7)&3 = 1)
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("0x0080"))
    assert line.split()[1:3] == ["8-15:2", "0-7:2"]


def test_descriptor_view_lists_fields_and_meaning():
    text = to_text(DescriptorView(SmemDescriptor.from_u64(0x4000404000011200)), width=140)
    for s in ("start", "73728", "sbo", "1024", "layout_type", "SWIZZLE_128B", "version"):
        assert s in text
    assert "bits 63..0  01000000 00000000 01000000 01000000" in text


def test_bank_map_view():
    text = to_text(BankMapView(bank_conflicts(np.arange(32) * 8, 4)), width=160)
    assert "2 wavefronts (ideal 1" in text


def test_svg_export_is_valid_and_stable():
    t = CanonicalLayout("bf16", "K", "SW128", 128, 64)
    a = to_svg(TileView(t), width=140)
    b = to_svg(TileView(t), width=140)
    assert a == b  # fixed unique_id: reproducible output
    root = ET.fromstring(a)
    assert root.tag.endswith("svg")
    assert a.count("0x3ff0") == 1  # last chunk of row 127 lands at 0x3ff0 (row 127: chunk 7 ^ 7 = 0)


def test_svg_renders_to_png(tmp_path):
    cairosvg = pytest.importorskip("cairosvg", reason="cairosvg (dev extra) converts SVG to PNG")
    t = CanonicalLayout("bf16", "K", "SW128", 32, 64)
    png = tmp_path / "tile.png"
    cairosvg.svg2png(bytestring=to_svg(TileView(t)).encode(), write_to=str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_unknown_view():
    with pytest.raises(SimtcError, match="unknown view"):
        TileView(CanonicalLayout("bf16", "K", "SW128", 8, 64), view="sideways")


def test_a_bank_report_prints_through_its_view():
    """The report is a plain model (no rich protocol, no import of simtc.render); rich prints its view."""
    from rich.console import Console

    report = bank_conflicts(np.arange(32) * 4)
    assert not hasattr(report, "__rich__") and not hasattr(report, "__rich_console__")
    console = Console(width=120, record=True, color_system=None)
    console.print(BankMapView(report))
    assert "1 wavefronts" in console.export_text()


def test_views_show_in_jupyter():
    """rich's JupyterMixin gives every view an HTML and a plain-text representation."""
    from simtc.mma import InstrDescriptor
    from simtc.render.banks import BankMapView
    from simtc.render.mma import InstrDescriptorView
    from simtc.render.tmem import CpView, LdView, TmemMapView
    from simtc.tmem import LdStOp, TensorMemory, cp_shape

    tm = TensorMemory()
    tm.alloc(128)
    views = [TileView(CanonicalLayout("bf16", "K", "SW128", 8, 64)),
             DescriptorView(SmemDescriptor.from_u64(0x4000404000010000)),
             BankMapView(bank_conflicts(np.arange(32) * 4)),
             InstrDescriptorView(InstrDescriptor.from_u32(0x04200490)),
             TmemMapView(tm),
             CpView(cp_shape("128x256b")),
             LdView(LdStOp("32x32b", 128))]
    for v in views:
        bundle = v._repr_mimebundle_(include=[], exclude=[])
        assert "<pre" in bundle["text/html"] and bundle["text/plain"].strip()
