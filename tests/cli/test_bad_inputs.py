"""Bad command lines: each one is refused with exit status 2 and one line naming the rule, never a traceback.

Every case is run in-process through ``simtc.cli.main`` (fast); a few also through a subprocess to
prove nothing else reaches the terminal.
"""

import os
import subprocess
import sys

import pytest

from simtc.cli import main

LAYOUT = ["smem", "layout", "--rows", "64", "--cols", "64"]
BANKS = ["smem", "banks"]
TLAYOUT = ["tmem", "layout", "--m", "64", "--n", "64"]
LD = ["tmem", "ld", "--shape", "32x32b"]

# (argv, a piece of text the one error line must contain: the rule or the value refused)
BAD = [
    # smem layout
    (["smem", "layout", "--rows", "8", "--cols", "8", "--swizzle", "INTERLEAVE"], "K slice is 32 bytes"),
    ([*LAYOUT, "--max-rows", "0"], "show at least one row"),
    ([*LAYOUT, "--max-rows", "-3"], "show at least one row"),
    ([*LAYOUT, "--term-width", "0"], "at least 40 terminal columns"),
    ([*LAYOUT, "--term-width", "-5"], "at least 40 terminal columns"),
    ([*LAYOUT, "--term-width", "39"], "at least 40 terminal columns"),
    ([*LAYOUT, "--term-width", "wide"], "not an integer"),
    ([*LAYOUT, "--dtype", "bf17"], "invalid choice: 'bf17'"),
    ([*LAYOUT, "--dtype", "fp32"], "invalid choice: 'fp32'"),
    ([*LAYOUT, "--swizzle", "SW256"], "invalid choice: 'SW256'"),
    ([*LAYOUT, "--major", "row"], "invalid choice"),
    ([*LAYOUT, "--view", "3d"], "invalid choice: '3d'"),
    (["smem", "layout", "--rows", "-8", "--cols", "64"], "must be in 1..232448, got -8"),
    (["smem", "layout", "--rows", "0", "--cols", "64"], "must be in 1..232448, got 0"),
    (["smem", "layout", "--rows", "abc", "--cols", "64"], "not an integer: 'abc'"),
    (["smem", "layout", "--rows", "12", "--cols", "64"], "whole number of 8x64"),
    (["smem", "layout", "--rows", "64", "--cols", "36"], "rule:"),
    (["smem", "layout", "--rows", "4096", "--cols", "64"], "227 KiB of shared memory per block"),
    (["smem", "layout", "--rows", "99999999999999999999", "--cols", "64"], "227 KiB"),
    (["smem", "layout", "--cols", "64"], "the following arguments are required: --rows"),
    # smem banks
    ([*BANKS, "--stride", "99999999999999999999"], "227 KiB of shared memory"),
    ([*BANKS, "--base", "1000000000000"], "must be in 0..232447"),
    ([*BANKS, "--base", "-16"], "must be in 0..232447"),
    ([*BANKS, "--addresses", ","], "empty list"),
    ([*BANKS, "--addresses", ""], "empty list"),
    ([*BANKS, "--addresses", "0,4", "--stride", "4"], "not allowed with argument --addresses"),
    ([*BANKS, "--addresses", "0,128", "--base", "4"], "either --addresses or --base/--stride"),
    ([*BANKS, "--addresses", "0,x"], "not an integer: 'x'"),
    ([*BANKS, "--addresses", ",".join(str(4 * t) for t in range(33))], "at most 32"),
    ([*BANKS, "--addresses", "0,2"], "not aligned to 4 B"),
    ([*BANKS, "--addresses", "0,-4"], "must be in 0..232447"),
    ([*BANKS, "--width", "3"], "invalid choice: 3"),
    ([*BANKS, "--width", "32"], "invalid choice: 32"),
    ([*BANKS, "--stride", "-4"], "negative address"),
    ([*BANKS, "--stride", "8192"], "outside the 232448 B of shared memory"),
    ([*BANKS, "--base", "232440", "--width", "16"], "outside the 232448 B of shared memory"),
    # tmem layout
    (["tmem", "layout", "--m", "256", "--n", "64"], "add --cta-group 2"),
    ([*TLAYOUT, "--c0", "600"], "TMEM columns are 0-511"),
    ([*TLAYOUT, "--c0", "-1"], "TMEM columns are 0-511"),
    (["tmem", "layout", "--m", "128", "--n", "256", "--c0", "300"], "256 columns wide"),
    (["tmem", "layout", "--m", "96", "--n", "64"], "M must be"),
    (["tmem", "layout", "--m", "64", "--n", "7"], "N must be"),
    ([*TLAYOUT, "--cta-group", "3"], "invalid choice: 3"),
    ([*TLAYOUT, "--lane-align", "8"], "invalid choice: 8"),
    (["tmem", "layout", "--m", "64.0", "--n", "64"], "not an integer"),
    # tmem ld
    (["tmem", "ld", "--shape", "16x32bx2", "--imm", "99999"], "column offset in TMEM's 512 columns"),
    (["tmem", "ld", "--shape", "16x32bx2", "--num", "128", "--imm", "400"], "inside TMEM's 512 columns"),
    ([*LD, "--warp", "-1"], "warps 0-31"),
    ([*LD, "--warp", "99"], "32*(w%4)"),
    (["tmem", "ld", "--shape", "16x256b", "--num", "64"], "register-count limit"),
    ([*LD, "--num", "3"], "rule:"),
    ([*LD, "--num", "0"], "rule:"),
    ([*LD, "--imm", "4"], "only with .16x32bx2"),
    (["tmem", "ld", "--shape", "64x64b"], "invalid choice: '64x64b'"),
    # tmem cp / map
    (["tmem", "cp", "--shape", "256x256b"], "invalid choice: '256x256b'"),
    (["tmem", "map", "--lanes-per-row", "3"], "invalid choice: 3"),
    (["tmem", "map", "--columns-per-char", "0"], "invalid choice: 0"),
    (["tmem", "map", "--by", "owner"], "invalid choice: 'owner'"),
    # decode
    (["decode", "smem-desc", "0xZZ"], "not an integer: '0xZZ'"),
    (["decode", "smem-desc", "--", "-1"], "does not fit in 64 unsigned bits"),
    (["decode", "smem-desc", "0x10000000000000000"], "does not fit in 64 unsigned bits"),
    (["decode", "smem-desc", "0xE000404000010000", "--arch", "sm100"], "layout type 7"),
    (["decode", "smem-desc", "0x4000404000010000", "--arch", "sm80"], "invalid choice: 'sm80'"),
    (["decode", "idesc", "0x1ffffffff"], "does not fit in 32 unsigned bits"),
    (["decode", "idesc", "banana"], "not an integer: 'banana'"),
    (["decode", "idesc", "0x40"], "reserved bit 6"),
    (["decode", "idesc", "0x04200490", "--kind", "f32"], "invalid choice: 'f32'"),
    (["decode", "idesc"], "the following arguments are required: value"),
    # command level
    (["bogus"], "invalid choice: 'bogus'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["smem", "layout", "--rows", "64", "--cols", "64", "--colour"], "unrecognized arguments: --colour"),
]

# commands that run without a subcommand: help on stdout, the one error line on stderr
BARE = [[], ["smem"], ["tmem"], ["decode"]]

# every picture command, with the arguments it needs
PICTURES = {
    "smem layout": LAYOUT,
    "smem banks": [*BANKS, "--width", "16", "--stride", "32"],
    "tmem layout": TLAYOUT,
    "tmem ld": LD,
    "tmem cp": ["tmem", "cp", "--shape", "128x256b"],
    "tmem map": ["tmem", "map"],
    "decode smem-desc": ["decode", "smem-desc", "0x4000404000010000"],
    "decode idesc": ["decode", "idesc", "0x04200490"],
}


def run(capsys, argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_error_line(err: str, must_contain: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("simtc: error: "), line
    assert "[rule: " in line and line.endswith("]"), line
    assert must_contain in line, line
    assert "Traceback" not in err and "internal error" not in err


def test_enough_bad_inputs():
    assert len(BAD) + len(BARE) + len(PICTURES) >= 40


@pytest.mark.parametrize(("argv", "text"), BAD, ids=[" ".join(a) or "(none)" for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(capsys, argv, text):
    rc, out, err = run(capsys, argv)
    assert rc == 2
    assert out == ""
    assert_one_error_line(err, text)


@pytest.mark.parametrize("argv", BARE, ids=[" ".join(a) or "(none)" for a in BARE])
def test_missing_command_prints_help_and_exits_2(capsys, argv):
    rc, out, err = run(capsys, argv)
    assert rc == 2
    assert out.startswith("usage: simtc")
    assert_one_error_line(err, "is required")


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_svg_into_a_missing_directory_is_refused_before_the_work(capsys, tmp_path, name):
    target = tmp_path / "no" / "such" / "dir" / "p.svg"
    rc, out, err = run(capsys, [*PICTURES[name], "--svg", str(target)])
    assert rc == 2 and out == ""
    assert_one_error_line(err, "does not exist")
    assert "existing, writable directory" in err
    assert not target.parent.exists()


@pytest.mark.parametrize("name", ["smem banks", "tmem map"])
def test_svg_onto_a_directory_is_refused(capsys, tmp_path, name):
    rc, out, err = run(capsys, [*PICTURES[name], "--json", "--svg", str(tmp_path)])
    assert rc == 2 and out == ""
    assert_one_error_line(err, "it is a directory")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
def test_svg_into_a_read_only_directory_is_refused(capsys, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        rc, out, err = run(capsys, [*PICTURES["tmem layout"], "--svg", str(ro / "p.svg")])
    finally:
        ro.chmod(0o700)
    assert rc == 2 and out == ""
    assert_one_error_line(err, "is not writable")


def test_write_failure_after_the_check_is_one_line(capsys, tmp_path, monkeypatch):
    """An OSError while writing (e.g. disk full) still becomes one line naming the path."""
    import simtc.render.export as export

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "to_svg", fail)
    target = tmp_path / "p.svg"
    rc, out, err = run(capsys, [*PICTURES["tmem ld"], "--svg", str(target)])
    assert rc == 2 and out == ""
    assert_one_error_line(err, "No space left on device")
    assert str(target) in err


@pytest.mark.parametrize("argv", [
    ["smem", "banks", "--stride", "99999999999999999999"],
    ["tmem", "layout", "--m", "64", "--n", "64", "--svg", "/nonexistent-dir/p.svg"],
    ["decode", "idesc", "banana"],
    [],
])
def test_no_traceback_reaches_the_terminal(argv):
    p = subprocess.run([sys.executable, "-m", "simtc", *argv], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("simtc: error: ") and "[rule: " in lines[0]
    assert "Traceback" not in p.stderr + p.stdout
