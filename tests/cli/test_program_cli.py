"""`simtc program ...` through main(), as a user runs it."""

import json

import pytest

import simtc.cli as cli
from simtc.isa.program import Program
from simtc.kernels.flashmla import qk_program


@pytest.fixture
def run(capsys, monkeypatch):
    if "program" not in cli.COMMAND_MODULES:
        monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, "program"))

    def go(*argv):
        rc = cli.main(list(argv))
        out, err = capsys.readouterr()
        return rc, out, err

    return go


def test_list_names_each_program_on_one_line(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "4000")  # wide enough for every description: one line each
    rc, out, _ = run("program", "--list")
    assert rc == 0
    from simtc.kernels.registry import programs

    lines = out.splitlines()
    assert len(lines) == len(programs()) and all(len(line.split(None, 1)) == 2 for line in lines)
    qk = [line for line in lines if line.startswith("flashmla-qk ")]
    assert len(qk) == 1 and "18 tcgen05.mma.ws" in qk[0]
    rc, out, _ = run("program", "--list", "--json")
    assert rc == 0 and json.loads(out)["flashmla-qk"] == programs()["flashmla-qk"]


def test_json_counts_and_loads_back(run, tmp_path):
    rc, out, _ = run("program", "flashmla-qk", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["name"] == "flashmla-qk"
    assert data["counts"]["tcgen05.cp"] == 18 and data["counts"]["tcgen05.mma.ws"] == 18
    assert len(data["roles"]["mma"]["records"]) == 37
    f = tmp_path / "qk.json"
    f.write_text(out)
    assert Program.from_json(json.loads(f.read_text())) == qk_program()
    rc, again, _ = run("program", str(f), "--json")
    assert rc == 0 and again == out
    rc, listing, _ = run("program", str(f), "--term-width", "160")
    assert rc == 0 and "QK NoPE k=15" in listing and "tcgen05.mma.ws" in listing


def test_ptx_has_18_ws_mma_lines(run):
    rc, out, _ = run("program", "flashmla-qk", "--ptx")
    assert rc == 0
    mma = [line for line in out.splitlines() if line.startswith("tcgen05.mma.ws") and "kind::f16" in line]
    assert len(mma) == 18
    assert sum(line.startswith("tcgen05.cp.") for line in out.splitlines()) == 18


@pytest.mark.parametrize("argv,msg", [
    (("program", "no-such-program"), "unknown program 'no-such-program'"),
    (("program", "missing.json"), "no such file"),
    (("program",), "give a program NAME"),
    (("program", "flashmla-qk", "--ptx", "--json"), "does not combine"),
])
def test_errors_are_one_line_exit_2(run, argv, msg):
    rc, _, err = run(*argv)
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1 and "[rule:" in err


def test_bad_json_files(run, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rc, _, err = run("program", str(bad))
    assert rc == 2 and "not readable JSON" in err
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"name": "x"}))
    rc, _, err = run("program", str(wrong))
    assert rc == 2 and "a Program's JSON is an object" in err and len(err.strip().splitlines()) == 1
