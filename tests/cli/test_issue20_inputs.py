"""Inputs that used to be accepted silently or refused unclearly: each is now refused with one line naming the rule
(exit 2) or done right; and the whole kernels are Programs ``simtc program`` shows."""

import json
import re

import pytest

from simtc.cli import build_parser, main


def run(capsys, argv, monkeypatch=None, columns=None):
    if monkeypatch is not None:
        if columns is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", columns)
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(err: str, *pieces: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("simtc: error: ") and "[rule: " in lines[0], err
    assert "Traceback" not in err and "internal error" not in err
    for p in pieces:
        assert p in lines[0], (p, lines[0])
    return lines[0]


# ---- silently accepted -> refused or done right ----------------------------------------------------------------

def test_list_mutations_with_a_mutation_is_refused(capsys):
    rc, out, err = run(capsys, ["replay", "flashmla-head64", "--list-mutations", "--mutate", "no-such-bug"])
    assert rc == 2 and out == ""
    one_error(err, "--list-mutations", "no-such-bug")


@pytest.mark.parametrize("argv", [["replay", "flashmla-head64", "--json", "--step", "3"],
                                  ["simulate", "flashmla-qk", "--json", "--step"]])
def test_json_with_step_is_refused_so_json_stays_json_only(capsys, argv):
    rc, out, err = run(capsys, argv)
    assert rc == 2 and out == ""
    one_error(err, "--json", "--step")


def test_program_list_svg_writes_the_list(capsys, tmp_path):
    svg = tmp_path / "list.svg"
    rc, _, err = run(capsys, ["program", "--list", "--svg", str(svg)])
    assert rc == 0 and svg.is_file() and f"wrote {svg}" in err
    text = svg.read_text()
    assert text.startswith("<svg") and "hazard/tx-underflow" in text and "flashmla-head64" in text


@pytest.mark.parametrize("name", ["picture.png", "picture.PNG", "picture.pdf", "picture", "picture.svg.txt"])
@pytest.mark.parametrize("argv", [["decode", "idesc", "0x04200490"], ["program", "flashmla-qk"],
                                  ["replay", "flashmla-head64"], ["simulate", "flashmla-qk"]])
def test_svg_to_another_format_is_refused_before_any_work(capsys, tmp_path, argv, name):
    target = tmp_path / name
    rc, out, err = run(capsys, [*argv, "--svg", str(target)])
    assert rc == 2 and out == "" and not target.exists()
    one_error(err, "--svg writes SVG", ".svg")


def test_svg_suffix_in_any_case_is_written(capsys, tmp_path):
    target = tmp_path / "p.SVG"
    rc, _, _ = run(capsys, ["decode", "idesc", "0x04200490", "--json", "--svg", str(target)])
    assert rc == 0 and target.read_text().startswith("<svg")


@pytest.mark.parametrize("argv", [["decode", "idesc", "\uff10x04200490"],
                                  ["decode", "smem-desc", "\uff10x4000404000010000"], ["decode", "idesc", "\u0664"],
                                  ["tmem", "layout", "--m", "\uff16\uff14", "--n", "64"],
                                  ["smem", "banks", "--width", "\uff11\uff16"]])
def test_unicode_digits_are_refused(capsys, argv):
    rc, out, err = run(capsys, argv)
    assert rc == 2 and out == ""
    one_error(err, "not an integer")


def test_int_builtin_would_accept_them():  # the reason the check exists
    assert int("\uff10x04200490", 0) == 0x04200490


def test_unicode_digits_in_a_program_json_are_refused(capsys, tmp_path):
    rc, out, _ = run(capsys, ["program", "flashmla-qk", "--json"])
    good = tmp_path / "good.json"
    good.write_text(out)
    assert run(capsys, ["program", str(good), "--json"])[0] == 0
    bad = tmp_path / "bad.json"
    bad.write_text(out.replace('"idesc":"0x04200490"', '"idesc":"\uff10x04200490"', 1))
    rc, out, err = run(capsys, ["program", str(bad)])
    assert rc == 2 and out == ""
    one_error(err, "field 'idesc'", "not an integer")


@pytest.mark.parametrize("columns", ["0", "-3", "abc", "1e3", "\uff18\uff10"])
def test_columns_that_are_no_width_are_refused(capsys, monkeypatch, columns):
    rc, out, err = run(capsys, ["decode", "idesc", "0x04200490"], monkeypatch, columns)
    assert rc == 2 and out == ""
    one_error(err, "COLUMNS")


@pytest.mark.parametrize("argv", [["decode", "idesc", "0x04200490"], ["program", "--list"],
                                  ["tmem", "layout", "--m", "64", "--n", "128", "--ws"]])
def test_narrow_columns_are_clamped_to_40(capsys, monkeypatch, argv):
    rc, out, err = run(capsys, argv, monkeypatch, "10")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines and max(map(len, lines)) <= 40 and max(map(len, lines)) > 30  # 40 wide, not 10
    # COLUMNS is restored after the command
    import os

    assert os.environ["COLUMNS"] == "10"


def test_columns_80_and_term_width_40_give_the_same_text(capsys, monkeypatch):
    _, clamped, _ = run(capsys, ["decode", "idesc", "0x04200490"], monkeypatch, "12")
    _, forced, _ = run(capsys, ["decode", "idesc", "0x04200490", "--term-width", "40"], monkeypatch, None)
    assert clamped == forced


# ---- unclear -> clear ----------------------------------------------------------------------------------------

def _qk_json(capsys) -> dict:
    rc, out, _ = run(capsys, ["program", "flashmla-qk", "--json"])
    assert rc == 0
    return json.loads(out)


@pytest.mark.parametrize("edit, pieces", [
    (lambda d: d["roles"]["mma"]["records"][18].update(idesc="0x0420049G"),
     ["role 'mma' record 18 (tcgen05.mma 'QK RoPE k=0')", "field 'idesc'", "'0x0420049G'"]),
    (lambda d: d["roles"]["mma"]["records"][0].update(taddr="256"),
     ["role 'mma' record 0 (tcgen05.cp 'cp Q NoPE t=0 s=0')", "field 'taddr'", "'256'"]),
    (lambda d: d["roles"]["mma"]["records"][3].update(shape="128x999b"),
     ["role 'mma' record 3 (tcgen05.cp", "field 'shape'", "128x999b"]),
    (lambda d: d["roles"]["softmax"]["records"][2].update(desc="0x1"),
     ["role 'softmax' record 2 (tcgen05.ld \"P (this warp's quadrant)\")", "unknown JSON field 'desc'"]),
    (lambda d: d["roles"]["mma"]["records"].__setitem__(5, 7), ["role 'mma' record 5:", "'op' tag"]),
    (lambda d: d["roles"]["mma"].update(warps=4), ["role 'mma'", "\"warps\"", "JSON list"]),
    (lambda d: d["barriers"][0].update(count="x"), ["barrier 0 ('qk_done[1]')", "'x'"]),
    (lambda d: d.update(meta=5), ["\"meta\""]),
])
def test_a_bad_program_json_names_the_role_record_op_and_field(capsys, tmp_path, edit, pieces):
    d = _qk_json(capsys)
    edit(d)
    f = tmp_path / "prog.json"
    f.write_text(json.dumps(d))
    rc, out, err = run(capsys, ["program", str(f)])
    assert rc == 2 and out == ""
    one_error(err, str(f), *pieces)


def test_an_unknown_program_gets_a_short_line_with_close_names(capsys):
    rc, out, err = run(capsys, ["program", "flashmla-head65"])
    line = one_error(err, "did you mean flashmla-head64", "simtc program --list")
    assert rc == 2 and out == "" and len(line) < 300 and "hazard/" not in line
    rc, _, err = run(capsys, ["program", "hazard/ld-before-comit"])
    one_error(err, "did you mean hazard/ld-before-commit")
    rc, _, err = run(capsys, ["program", "zzzz"])
    assert "did you mean" not in one_error(err, "lists all")


def test_program_list_fits_80_columns(capsys, monkeypatch):
    rc, out, _ = run(capsys, ["program", "--list"], monkeypatch, "80")
    lines = out.splitlines()
    assert rc == 0 and max(map(len, lines)) <= 80
    from simtc.kernels.registry import programs

    # every program is listed, its name at the start of a line, and every word of its description survives
    text = " ".join(out.split())
    for name, desc in programs().items():
        assert any(x.startswith(name + " ") or x == name for x in lines), name
        assert " ".join(desc.split()) in text, name


def _all_help_texts():
    parser = build_parser()
    stack = [parser]
    while stack:
        p = stack.pop()
        yield p.prog, p.format_help()
        for a in p._actions:
            if a.__class__.__name__ == "_SubParsersAction":
                stack.extend(a.choices.values())


def test_no_help_text_states_a_default_twice(monkeypatch):
    monkeypatch.setenv("COLUMNS", "4000")
    seen = 0
    for prog, text in _all_help_texts():
        seen += 1
        for line in text.splitlines():
            assert len(re.findall(r"\(default\b", line)) <= 1, (prog, line)
    assert seen > 20
    # the formatter adds "(default: X)" only where the help does not say it already, in either spelling
    from simtc.cli._common import ArgumentParser

    p = ArgumentParser(prog="t")
    p.add_argument("--a", default=4, help="blocks (default 4)")
    p.add_argument("--b", default=4, help="blocks")
    p.add_argument("--c", default=4, help="blocks (default: four)")
    text = " ".join(p.format_help().split())
    assert "blocks (default 4) " in text and "(default 4) (default" not in text
    assert "blocks (default: 4)" in text and text.count("(default: four)") == 1 and "four) (default" not in text


# ---- the whole kernel as a Program ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, name, blocks", [
    (["flashmla-head64"], "flashmla-head64-v32", 4),
    (["flashmla-head64", "--model", "model1", "--blocks", "2"], "flashmla-head64-model1", 2),
    (["flashmla-head64-v32", "--blocks", "3"], "flashmla-head64-v32", 3),
    (["flashmla-head64-model1"], "flashmla-head64-model1", 4),
    (["flashmla-sm90", "--model", "model1", "--blocks", "3"], "flashmla-sm90-model1", 3),
    (["flashmla-sm90-v32"], "flashmla-sm90-v32", 2),
])
def test_the_whole_kernels_are_programs(capsys, argv, name, blocks):
    from simtc.kernels.flashmla.head64 import head64_program
    from simtc.kernels.flashmla.sm90 import sm90_program

    rc, out, _ = run(capsys, ["program", *argv, "--json"])
    assert rc == 0
    d = json.loads(out)
    assert d["name"] == name
    model_name = name.rsplit("-", 1)[1]
    want = (head64_program(model_name, blocks) if "head64" in name else sm90_program(model_name, blocks)).to_json()
    assert d == want


def test_the_timeline_names_a_program_that_program_accepts(capsys):
    from simtc.kernels.flashmla.replay import replay

    r = replay("v32", 2, timing_only=True, keep_engine=True)
    title = r.engine.program.name
    rc, out, _ = run(capsys, ["program", title, "--blocks", "2", "--json"])
    assert rc == 0 and json.loads(out)["name"] == title == "flashmla-head64-v32"
    assert json.loads(out) == r.engine.program.to_json()


def test_program_listing_of_the_whole_kernel_is_a_picture(capsys, monkeypatch):
    rc, out, _ = run(capsys, ["program", "flashmla-head64", "--blocks", "1"], monkeypatch, "100")
    assert rc == 0 and "program flashmla-head64-v32: 6 roles" in out
    assert max(map(len, out.splitlines())) <= 100


@pytest.mark.parametrize("argv, pieces", [
    (["flashmla-qk", "--blocks", "3"], ["takes no --model or --blocks"]),
    (["hazard/over-arrival", "--model", "v32"], ["takes no --model or --blocks"]),
    (["flashmla-head64-v32", "--model", "model1"], ["contradicts", "flashmla-head64 --model model1"]),
    (["flashmla-head64", "--blocks", "65"], ["1-64 blocks"]),
    (["flashmla-head64", "--blocks", "0"], ["1-64 blocks"]),
])
def test_program_parameters_are_checked(capsys, argv, pieces):
    rc, out, err = run(capsys, ["program", *argv])
    assert rc == 2 and out == ""
    one_error(err, *pieces)


def test_parameters_on_a_program_file_are_refused(capsys, tmp_path):
    _, out, _ = run(capsys, ["program", "flashmla-qk", "--json"])
    f = tmp_path / "qk.json"
    f.write_text(out)
    rc, _, err = run(capsys, ["program", str(f), "--blocks", "2"])
    assert rc == 2
    one_error(err, "built already")


def test_registry_build_checks_its_parameters():
    from simtc.errors import SimtcError
    from simtc.kernels import registry

    assert registry.build("flashmla-head64", model="model1", blocks=4096).name == "flashmla-head64-model1"
    for kw in ({"blocks": 0}, {"blocks": 4097}, {"blocks": True}, {"model": "v33"}):
        with pytest.raises(SimtcError):
            registry.build("flashmla-head64", **kw)
    with pytest.raises(SimtcError, match="takes no parameters"):
        registry.build("flashmla-qk", blocks=2)


# ---- timing sensitivity's own parameters ------------------------------------------------------------------------

@pytest.mark.parametrize("argv, piece", [
    (["flashmla-qk", "--factors", "inf"], "within 1/1000"),
    (["flashmla-qk", "--factors", "1e400"], "within 1/1000"),
    (["flashmla-qk", "--factors", "0.5,5000"], "within 1/1000"),
    (["flashmla-qk", "--model", "model1"], "flashmla-head64 only"),
    (["flashmla-qk", "--blocks", "5"], "flashmla-head64 only"),
    (["flashmla-head64-model1", "--model", "v32"], "contradicts"),
])
def test_sensitivity_refuses_what_it_would_ignore_or_crash_on(capsys, argv, piece):
    rc, out, err = run(capsys, ["timing", "sensitivity", *argv])
    assert rc == 2 and out == ""
    one_error(err, piece)


def test_timing_params_with_no_row_says_so(capsys, monkeypatch):
    from simtc.cli import timing

    assert timing._params_lines([], 80, "sm90", "derived") == ["no sm90 parameter is labelled derived"]
    monkeypatch.setattr(timing, "_param_rows", lambda arch, label: [])
    rc, out, _ = run(capsys, ["timing", "params", "--arch", "sm100", "--label", "documented"])
    assert rc == 0 and out.strip() == "no sm100 parameter is labelled documented"
    rc, out, _ = run(capsys, ["timing", "params", "--label", "documented", "--json"])
    assert rc == 0 and json.loads(out) == []
