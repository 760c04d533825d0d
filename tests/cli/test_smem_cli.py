"""`simtc smem ...` and `simtc decode smem-desc` through main(), as a user runs them."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from simtc.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_layout_json_golden(capsys):
    rc, out, _ = run(capsys, "smem", "layout", "--rows", "64", "--cols", "64", "--dtype", "bf16", "--major", "K",
                     "--swizzle", "SW128", "--json")
    assert rc == 0
    data = json.loads(out)
    assert [data["offsets"][1][c] // 2 for c in range(0, 64, 8)] == [72, 64, 88, 80, 104, 96, 120, 112]
    assert data["descriptor"] == {"start": 0, "lbo": 16, "sbo": 1024, "base_offset": 0,
                                  "sm100": "0x4000404000010000", "sm90": "0x4000004000010000"}


@pytest.mark.parametrize("sw,sbo,w100,w90", [
    ("SW64", 512, "0x8000402000010000", "0x8000002000010000"),
    ("SW32", 256, "0xc000401000010000", "0xc000001000010000"),
])
def test_layout_json_other_swizzles(capsys, sw, sbo, w100, w90):
    _, out, _ = run(capsys, "smem", "layout", "--rows", "64", "--cols", "64", "--swizzle", sw, "--json")
    d = json.loads(out)["descriptor"]
    assert (d["sbo"], d["sm100"], d["sm90"]) == (sbo, w100, w90)


def test_layout_picture_and_svg(capsys, tmp_path):
    svg = tmp_path / "tile.svg"
    rc, out, err = run(capsys, "smem", "layout", "--rows", "128", "--cols", "64", "--svg", str(svg),
                       "--term-width", "150")
    assert rc == 0 and "0x0090" in out and "wrote" in err
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert "0x0090" in svg.read_text()


def test_layout_errors_exit_2_with_rule(capsys):
    rc, out, err = run(capsys, "smem", "layout", "--rows", "12", "--cols", "64", "--json")
    assert rc == 2 and out == ""
    assert "whole number of 8x64" in err and "rule:" in err


def test_decode_smem_desc_json(capsys):
    rc, out, _ = run(capsys, "decode", "smem-desc", "0x4000404000010000", "--json")
    d = json.loads(out)
    assert rc == 0
    assert (d["arch"], d["start"], d["lbo"], d["sbo"], d["base_offset"], d["lbo_mode"], d["swizzle"],
            d["version"]) == ("sm100", 0, 16, 1024, 0, 0, "SW128", 1)
    assert any("1024-byte boundary" in line for line in d["explanation"])
    _, out, _ = run(capsys, "decode", "smem-desc", "0x4000004000010000", "--json")
    assert json.loads(out)["arch"] == "sm90"
    rc, out, _ = run(capsys, "decode", "smem-desc", "0x4000404000011200")
    assert rc == 0 and "73728" in out


@pytest.mark.parametrize("value,arch,match", [
    ("0xE000404000010000", "sm100", "layout type 7"),
    ("0x4000004000010000", "sm100", "bits 46-48"),
    ("0x4000404000010000", "sm90", "reserved bits 46-48"),
    ("banana", "auto", "not an integer"),
])
def test_decode_illegal(capsys, value, arch, match):
    rc, out, err = run(capsys, "decode", "smem-desc", value, "--arch", arch)
    assert rc == 2 and out == "" and match in err and "Traceback" not in err


def test_banks(capsys):
    rc, out, _ = run(capsys, "smem", "banks", "--width", "16", "--stride", "32", "--json")
    assert json.loads(out)["wavefronts"] == 8
    rc, out, _ = run(capsys, "smem", "banks", "--addresses", "0,128,256")
    assert rc == 0 and "3 wavefronts" in out


def test_console_script_help_is_cheap():
    # `python -m simtc --help` must not import numpy, rich or cupy
    code = ("import sys, contextlib, io\n"
            "from simtc.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
            "bad = [m for m in ('numpy', 'rich', 'cupy') if m in sys.modules]\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_cli_input_limits(capsys):
    rc, out, err = run(capsys, "smem", "layout", "--rows", "4096", "--cols", "64", "--json")   # 512 KiB
    assert rc == 2 and out == "" and "524288 B" in err and "227 KiB of shared memory per block" in err
    rc, out, err = run(capsys, "smem", "layout", "--rows", "1000000", "--cols", "64", "--json")
    assert rc == 2 and out == "" and "1..232448" in err and "227 KiB" in err
    rc, out, err = run(capsys, "smem", "banks", "--stride", "-4")
    assert rc == 2 and "negative address" in err
