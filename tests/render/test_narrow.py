"""At 80 columns no picture is cut: wide views fold into stacked panels and keep all their content."""

import re

import numpy as np
import pytest

from simtc.kernels.flashmla import TMEM_V32
from simtc.mma import InstrDescriptor
from simtc.render import to_text
from simtc.render.banks import BankMapView
from simtc.render.mma import InstrDescriptorView
from simtc.render.smem import DescriptorView, TileView
from simtc.render.tmem import CpView, LayoutView, LdView, TmemMapView
from simtc.smem import CanonicalLayout, SmemDescriptor, bank_conflicts
from simtc.tmem import LdStOp, cp_shape, datapath_layout

W = 80


def lines_of(view, width=W):
    text = to_text(view, width=width)
    assert "…" not in text                                   # rich's ellipsis: a cut cell
    lines = text.splitlines()
    assert max(len(ln.rstrip()) for ln in lines) <= width
    return lines


def test_bank_map_keeps_all_32_banks_and_the_wavefront_column():
    rep = bank_conflicts(32 * np.arange(32, dtype=np.int64), 16)    # smem banks --width 16 --stride 32
    lines = lines_of(BankMapView(rep))
    headers = [ln for ln in lines if ln.startswith("phase")]
    assert len(headers) >= 2                                 # folded
    banks = [int(t) for h in headers for t in h.split()[1:] if t.isdigit()]
    assert banks == list(range(32))
    assert headers[-1].split()[-1] == "wavefronts"
    # every phase row carries its wavefront count in the last panel
    last = lines[lines.index(headers[-1]) + 1:][:len(rep.phase_wavefronts)]
    assert [int(ln.split()[-1]) for ln in last] == [int(w) for w in rep.phase_wavefronts]
    assert any("conflict" in ln for ln in lines) and any("bank not used" in ln for ln in lines)   # the legend


def test_wide_tile_keeps_every_offset():
    lay = CanonicalLayout("bf16", "K", "SW128", 8, 128)                  # smem layout --rows 8 --cols 128
    text = "\n".join(lines_of(TileView(lay)))
    mn, k = np.meshgrid(np.arange(8), np.arange(0, 128, 8), indexing="ij")
    expected = sorted(f"{int(o):#06x}" for o in lay.offset(mn, k).ravel())
    assert sorted(re.findall(r"0x[0-9a-f]{4}\b(?!\w)", text.split("logical view")[1])) == expected
    for c in range(16):
        assert f"k {8 * c}-{8 * c + 7}" in text


def test_physical_tile_keeps_every_chunk():
    lay = CanonicalLayout("bf16", "K", "SW128", 8, 128)
    text = "\n".join(lines_of(TileView(lay, view="physical")))
    for r in range(8):
        for k in range(0, 128, 8):
            assert f"{r}:{k}-{k + 7}" in text
    for c in range(8):
        assert f"banks {4 * c}-{4 * c + 3}" in text


def test_ld_map_keeps_every_register_column():
    op = LdStOp("32x32b", 128)                                           # tmem ld --shape 32x32b --num 128
    text = "\n".join(lines_of(LdView(op)))
    for c in range(16):                                                  # the 16 columns drawn
        assert re.search(rf"(?<![\w+])\+{c}(?!\d)", text)
        for lane in range(32):
            assert f"t{lane}r{c}" in text
    assert "+16 to +127 not drawn" in text                               # and it says what is not drawn


@pytest.mark.parametrize("cpc", [1, 2, 4, 8])
def test_tmem_map_rows_cover_all_512_columns(cpc):
    lines = lines_of(TmemMapView(regions=TMEM_V32, lanes_per_row=32, columns_per_char=cpc))
    rows = [ln for ln in lines if ln.strip().startswith("0-31")]
    grid = "".join(ln.split()[-1] for ln in rows)
    assert grid == ("O" * 256 + "Q" * 128 + "t" * 16 + "P" * 64 + "f" * 48)[::cpc]


def test_cp_view_says_it_shows_every_kth_row():
    text = "\n".join(lines_of(CpView(cp_shape("128x256b"))))
    assert "showing every 8th source row (16 of 128" in text
    rows = [int(ln.split()[0]) for ln in text.splitlines() if ln.strip()[:1].isdigit()]
    assert rows == list(range(0, 128, 8))
    text = "\n".join(lines_of(CpView(cp_shape("4x256b"))))
    assert "every" not in text and "96" in text


def test_other_views_fit():
    for v in (LayoutView(datapath_layout(64, 128, ws=True), c0=400),
              DescriptorView(SmemDescriptor.from_u64(0x4000404000010000)),
              InstrDescriptorView(InstrDescriptor.from_u32(0x04200490))):
        lines_of(v)


def test_too_narrow_says_the_width_needed():
    text = to_text(BankMapView(bank_conflicts(np.arange(32) * 4)), width=12)
    assert "bank map: needs a console at least 16 characters wide (this one has 12)" in " ".join(text.split())
    assert "…" not in text and not re.search(r"^phase +0 ", text, re.M)   # no cut table


def test_crosscheck_table_keeps_every_figure_at_80_columns():
    from pathlib import Path

    from simtc.hw.crosscheck import replay
    from simtc.render.hw import CrosscheckTable

    run = replay(Path(__file__).parents[1] / "data" / "h200_crosscheck_seed0.npz")
    view = CrosscheckTable(run.results, "recorded")
    assert view.grid_width() > W  # the grid does not fit: the stacked form must carry every figure
    text = "\n".join(lines_of(view))
    for r in run.results:
        assert r.check.split()[0] in text
        if r.elements:
            assert f"{r.elements_exact}/{r.elements}" in text.replace("\n", "")
        if r.cycles is not None:
            assert f"{r.cycles:.0f}" in text
