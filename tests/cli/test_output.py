"""The one output routine of the picture commands, and the help every option carries."""

import argparse
import json
import xml.etree.ElementTree as ET

import pytest

from simtc.cli import build_parser, main
from simtc.cli._common import HelpFormatter, check_writable, emit, int_in, int_list

from .test_bad_inputs import PICTURES


def run(capsys, argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_json_with_svg_prints_only_json_and_writes_the_svg(capsys, tmp_path, name):
    svg = tmp_path / "p.svg"
    rc, out, err = run(capsys, [*PICTURES[name], "--json", "--svg", str(svg)])
    assert rc == 0
    data = json.loads(out)                      # stdout is exactly one JSON document
    assert isinstance(data, dict) and data
    assert ET.parse(svg).getroot().tag.endswith("svg")
    assert err.strip() == f"wrote {svg}"


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_json_alone_writes_nothing_else(capsys, tmp_path, name, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(capsys, [*PICTURES[name], "--json"])
    assert rc == 0 and err == ""
    json.loads(out)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_svg_without_json_prints_the_picture_and_writes_the_svg(capsys, tmp_path, name):
    svg = tmp_path / "p.svg"
    rc, out, err = run(capsys, [*PICTURES[name], "--svg", str(svg), "--term-width", "160"])
    assert rc == 0 and out.strip() and "wrote" in err
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)
    ET.parse(svg)


def _cp_rows(out: str) -> list[tuple[int, str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("source row")) + 1
    return [(int(line.split()[0]), " ".join(line.split()[1:])) for line in lines[start:] if line.strip()]


def test_tmem_cp_says_when_it_shows_every_kth_row(capsys):
    _, out, _ = run(capsys, ["tmem", "cp", "--shape", "128x256b", "--term-width", "160"])
    assert "every 8th source row" in out and "16 of 128" in out
    rows = _cp_rows(out)
    assert [r for r, _ in rows] == list(range(0, 128, 8)) and rows[1] == (8, "8")
    _, out, _ = run(capsys, ["tmem", "cp", "--shape", "4x256b", "--term-width", "160"])
    assert "every" not in out                            # all 4 rows shown
    assert [r for r, _ in _cp_rows(out)] == [0, 1, 2, 3]


def _parsers(parser, path=("simtc",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


ALL = list(_parsers(build_parser()))


def test_every_command_is_reached():
    names = {" ".join(p) for p, _ in ALL}
    assert {f"simtc {n}" for n in PICTURES} <= names
    assert "simtc crosscheck" in names


@pytest.mark.parametrize("path,parser", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_option_has_help_showing_its_default(path, parser):
    fmt = HelpFormatter(" ".join(path))
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help.strip(), f"{' '.join(path)} {action.option_strings[0]} has no help"
        if action.nargs == 0:   # a flag: off unless given
            continue
        text = fmt._get_help_string(action) % {"default": action.default}
        assert action.required or "default" in text, f"{' '.join(path)} {action.option_strings[0]}: {text!r}"
    assert "(default: " in parser.format_help() or not any(
        a.option_strings and a.nargs != 0 and not a.required and a.default is not None for a in parser._actions)


def test_help_shows_defaults_in_the_formatted_text(capsys):
    with pytest.raises(SystemExit) as e:
        main(["smem", "layout", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for piece in ("(default: bf16)", "(default: SW128)", "(default: logical)", "(default: all)"):
        assert piece in " ".join(out.split())


# ---- the helpers themselves ----------------------------------------------------------------------

def test_int_in_bounds_and_lazy_bounds():
    conv = int_in(0, lambda: 511, "TMEM columns 0-511", "PTX ISA 9.0 §9.7.16.1")
    assert conv("0x1ff") == 511 and conv("0") == 0 and conv("1_0") == 10
    for bad in ("512", "-1", "x", "1.5", "99999999999999999999999"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"\[rule: TMEM columns 0-511; PTX ISA"):
            conv(bad)
    assert int_in(5, None, "r")("1000000") == 1000000


def test_int_list():
    conv = int_list(0, 100, "addresses", max_items=3)
    assert conv("0,4, 8") == [0, 4, 8]
    for bad, msg in ((",", "empty list"), ("1,2,3,4", "at most 3"), ("1,200", "got 200"), ("1,,y", "not an")):
        with pytest.raises(argparse.ArgumentTypeError, match=msg):
            conv(bad)


def test_check_writable(tmp_path):
    from simtc.errors import SimtcError

    assert check_writable(tmp_path / "new.npz") == tmp_path / "new.npz"
    assert not (tmp_path / "new.npz").exists()         # nothing is created
    for bad, msg in ((tmp_path / "missing" / "x.npz", "does not exist"), (tmp_path, "is a directory"), ("", "empty")):
        with pytest.raises(SimtcError, match=msg) as e:
            check_writable(bad)
        assert e.value.rule
    (tmp_path / "f").write_text("")
    with pytest.raises(SimtcError, match="is not a directory"):
        check_writable(tmp_path / "f" / "x.svg")


def test_emit_builds_the_view_only_when_needed(capsys):
    built = []

    def view():
        built.append(1)
        return "picture"

    args = argparse.Namespace(json=True, svg=None, term_width=None)
    assert emit(args, data={"a": 1}, view=view, title="t") == 0
    assert capsys.readouterr().out == '{"a":1}\n' and built == []
    args.json = False
    emit(args, data={"a": 1}, view=view, title="t")
    assert capsys.readouterr().out.strip() == "picture" and built == [1]
