"""`simtc tmem ...` through main(), as a user runs it."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from simtc.cli import main
from simtc.tmem import LdStOp, datapath_layout


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_layout_json_layout_e(capsys):
    rc, out, _ = run(capsys, "tmem", "layout", "--m", "64", "--n", "128", "--ws", "--json")
    assert rc == 0
    d = json.loads(out)
    assert (d["layout"], d["lanes"], d["columns"]) == ("E", [0, 127], 64)
    assert len(d["map"]) == 64 and len(d["map"][0]) == 128
    assert d["map"][5][70] == [69, 6] and d["map"][63][63] == [63, 63]
    assert "[inferred]" in d["a_operand"]["source"]


def test_layout_json_layout_f_alignment_16(capsys):
    _, out, _ = run(capsys, "tmem", "layout", "--m", "64", "--n", "64", "--lane-align", "16", "--json")
    d = json.loads(out)
    assert (d["layout"], d["lanes"], d["columns"]) == ("F", [16, 127], 64)
    lane, col = datapath_layout(64, 64, lane_align=16).full_map()
    assert d["map"] == np.stack([lane, col], axis=-1).tolist()


def test_layout_picture_and_svg(capsys, tmp_path):
    svg = tmp_path / "e.svg"
    rc, out, err = run(capsys, "tmem", "layout", "--m", "64", "--n", "128", "--ws", "--svg", str(svg),
                       "--term-width", "130")
    assert rc == 0 and "Layout E" in out and "wrote" in err
    ET.parse(svg)


def test_ld_json(capsys):
    _, out, _ = run(capsys, "tmem", "ld", "--shape", "16x256b", "--num", "1", "--json")
    d = json.loads(out)
    assert d["registers"] == 4 and d["instruction"] == "tcgen05.ld.sync.aligned.16x256b.x1.b32"
    assert d["map"][5] == [[1, 2], [1, 3], [9, 2], [9, 3]]
    assert "halves" not in d


def test_ld_json_packed_documents_the_halves(capsys):
    _, out, _ = run(capsys, "tmem", "ld", "--shape", "16x256b", "--num", "2", "--pack", "--json")
    d = json.loads(out)
    op = LdStOp("16x256b", 2, pack=True)
    assert d["columns"] == 32 and d["pack"] is True
    assert d["map"][5][4] == [1, int(op.columns()[5, 4, 0])]
    assert d["halves"][5][4] == [[1, 20], [1, 21]]
    for t in range(32):                           # the high half is always the next column
        for i in range(op.nregs):
            (l0, c0), (l1, c1) = d["halves"][t][i]
            assert (l0, c1) == (l1, c0 + 1) and d["map"][t][i] == [l0, c0]


def test_ld_illegal_num_is_a_clean_error(capsys):
    rc, _, err = run(capsys, "tmem", "ld", "--shape", "16x256b", "--num", "64")
    assert rc == 2 and "register-count limit" in err and "Traceback" not in err


def test_ld_picture(capsys):
    rc, out, _ = run(capsys, "tmem", "ld", "--shape", "16x64b", "--num", "2", "--term-width", "140")
    assert rc == 0 and "t0r0" in out and "SM100_TMEM_LOAD_16dp64b2x" in out


def test_cp_and_map(capsys, tmp_path):
    _, out, _ = run(capsys, "tmem", "cp", "--shape", "64x128b.warpx2::02_13", "--json")
    d = json.loads(out)
    assert d["lanes"][0] == [0, 64] and d["lanes"][63] == [63, 127]
    rc, out, _ = run(capsys, "tmem", "cp", "--shape", "4x256b")
    assert rc == 0 and "cutlass only" in out
    _, out, _ = run(capsys, "tmem", "map", "--json")
    d = json.loads(out)
    assert d["allocations"] == [{"column": 0, "ncols": 512, "warp": 0}]
    assert [r["name"] for r in d["regions"]] == ["O", "Q", "Q_tail", "P", "free"]
    svg = tmp_path / "map.svg"
    rc, out, _ = run(capsys, "tmem", "map", "--svg", str(svg), "--term-width", "120")
    assert rc == 0 and "warp quadrant 3" in out
    ET.parse(svg)


def test_cli_module_is_cheap_to_import():
    code = ("import sys, simtc.cli.tmem\n"
            "print(','.join(m for m in ('numpy', 'rich', 'simtc.tmem', 'simtc.render') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


@pytest.mark.parametrize("argv", [["tmem", "layout", "--m", "96", "--n", "64"],
                                  ["tmem", "layout", "--m", "64", "--n", "32", "--ws"]])
def test_layout_errors(capsys, argv):
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and "rule:" in err


def test_cli_tmem_geometry_matches_the_model():
    """The CLI keeps TMEM's column count literal (no numpy at parser build); it must be the model's."""
    import simtc.cli.tmem as cli_tmem
    from simtc.tmem.address import COLUMNS

    assert cli_tmem._COLUMNS == COLUMNS == 512


def test_cli_shape_choices_are_the_models_tables():
    """The --shape choices are literal (no numpy at parser build); they must be the model's tables' keys."""
    import simtc.cli.tmem as cli_tmem
    from simtc.tmem import CP_SHAPES, SHAPES

    assert sorted(cli_tmem._CP_SHAPE_CHOICES) == sorted(CP_SHAPES) and len(CP_SHAPES) == 6
    assert sorted(cli_tmem._LD_SHAPE_CHOICES) == sorted(SHAPES) and len(SHAPES) == 5
    assert not hasattr(cli_tmem, "CP_SHAPES")


def test_ld_imm_must_keep_the_access_inside_tmem(capsys):
    rc, out, _ = run(capsys, "tmem", "ld", "--shape", "16x32bx2", "--num", "2", "--imm", "510", "--json")
    assert rc == 0 and json.loads(out)["columns"] == 512          # last legal offset: 510 + 2 columns
    rc, _, err = run(capsys, "tmem", "ld", "--shape", "16x32bx2", "--num", "2", "--imm", "511")
    assert rc == 2 and "columns 511..512" in err and "inside TMEM's 512 columns" in err


def test_layout_c0_at_the_last_legal_column(capsys):
    rc, out, _ = run(capsys, "tmem", "layout", "--m", "128", "--n", "256", "--c0", "256", "--json")
    assert rc == 0 and json.loads(out)["columns"] == 256
    rc, _, err = run(capsys, "tmem", "layout", "--m", "128", "--n", "256", "--c0", "257")
    assert rc == 2 and "use --c0 0..256" in err
