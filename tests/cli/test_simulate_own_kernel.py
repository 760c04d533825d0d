"""``simtc simulate`` on a kernel of one's own: examples/tcgen05_gemm.json with data (--tensor), without it (one
timing-only note), stepped, traced, and its dropped-wait variant caught with a grouped report."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simtc.cli import main

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "tcgen05_gemm.py"
PROGRAM = ROOT / "examples" / "tcgen05_gemm.json"


def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _script(*args, cwd=None):
    out = subprocess.run([sys.executable, str(EXAMPLE), *map(str, args)], capture_output=True, text=True,
                         timeout=120, cwd=cwd)
    return out.returncode, out.stdout, out.stderr


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    d = tmp_path_factory.mktemp("tensors")
    rc, _out, err = _script("--write-tensors", d)
    assert rc == 0, err
    return d


def _data(tensors):
    return ["--tensor", f"A={tensors / 'A.npy'}", "--tensor", f"B={tensors / 'B.npy'}"]


def test_with_data_it_runs_in_semantics_mode_and_clean(capsys, tensors):
    rc, out, err = run_cli(capsys, "simulate", PROGRAM, *_data(tensors), "--json")
    d = json.loads(out)
    assert rc == 0 and d["mode"] == "semantics" and d["hazards"] == [] and d["hazard_groups"] == []
    assert "semantics_errors" not in d and err == ""


def test_without_data_one_line_says_timing_only_and_why(capsys):
    rc, out, err = run_cli(capsys, "simulate", PROGRAM, "--term-width", "100")
    notes = err.strip().splitlines()
    assert rc == 0 and len(notes) == 1
    assert notes[0].startswith("note: tcgen05-gemm runs timing-only: its TMA source(s) A, B have no data")
    assert "--tensor NAME=FILE.npy" in notes[0]
    assert "refused" not in out + err  # no per-record notes any more
    rc, out, err = run_cli(capsys, "simulate", PROGRAM, "--timing-only", "--json")
    assert rc == 0 and err == "" and json.loads(out)["mode"] == "timing"


def test_one_source_given_still_names_the_other(capsys, tensors):
    rc, out, err = run_cli(capsys, "simulate", PROGRAM, "--tensor", f"A={tensors / 'A.npy'}", "--json")
    assert rc == 0 and json.loads(out)["mode"] == "timing" and "TMA source(s) B have no data" in err


@pytest.mark.parametrize(("spec", "says"), [
    ("C={A}", "has no TMA source 'C' (its TMA sources: A, B)"),
    ("A={B}", "the Program declares A as uint8[8, 16384]"),
    ("A={A16}", "a uint16 array of shape (8, 8192)"),
    ("A", "give NAME=FILE.npy (the Program's TMA sources: A, B)"),
    ("A={missing}", "cannot read a .npy array"),
])
def test_bad_tensors_are_refused_in_one_line(capsys, tensors, tmp_path, spec, says):
    a16 = tmp_path / "a16.npy"
    np.save(a16, np.load(tensors / "A.npy").view(np.uint16))
    spec = spec.format(A=tensors / "A.npy", B=tensors / "B.npy", A16=a16, missing=tmp_path / "none.npy")
    rc, out, err = run_cli(capsys, "simulate", PROGRAM, "--tensor", spec)
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and len(lines) == 1 and lines[0].startswith("simtc: error: ")
    assert says in lines[0] and "[rule: " in lines[0]


def test_tensor_with_timing_only_is_refused(capsys, tensors):
    rc, _out, err = run_cli(capsys, "simulate", PROGRAM, "--timing-only", "--tensor", f"A={tensors / 'A.npy'}")
    assert rc == 2 and "--tensor does not combine with --timing-only" in err


def test_it_steps(capsys, tensors):
    rc, out, _err = run_cli(capsys, "simulate", PROGRAM, *_data(tensors), "--step-to", 30, "--json")
    d = json.loads(out)
    assert rc == 0 and d["step"] == 30 and d["event"]["step"] == 30 and "state" in d


def test_it_traces_a_valid_perfetto_file(capsys, tensors, tmp_path):
    path = tmp_path / "gemm.trace.json"
    rc, _out, _err = run_cli(capsys, "simulate", PROGRAM, *_data(tensors), "--trace", path, "--json")
    trace = json.loads(path.read_text())
    assert rc == 0 and set(trace) == {"traceEvents", "displayTimeUnit", "otherData"}
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"tensor pipe", "TMA"} <= names or any("mma" in n for n in names)
    slices = [e for e in events if e["ph"] == "X"]
    assert slices and all(e["dur"] >= 0 and isinstance(e["ts"], (int, float)) for e in slices)
    assert sum(e["name"].startswith("tcgen05.mma") for e in slices) >= 32


def test_the_dropped_wait_variant_is_caught_with_a_grouped_report(capsys, tensors, tmp_path):
    bad = tmp_path / "dropped.json"
    assert _script("--variant", "dropped-wait", "--write-json", bad)[0] == 0
    rc, out, _err = run_cli(capsys, "simulate", bad, *_data(tensors), "--term-width", "4096")
    report = out[out.rindex("tcgen05-gemm-dropped-wait: "):].splitlines()
    assert rc == 1
    assert sum(line.startswith("hazard: ") for line in report) == 2
    assert "  missing synchronisation: no wait orders epilogue #3 (tcgen05.ld) after mma #7 (tcgen05.mma)" in out
    assert "tmem_full phase 0" in out and "  255 more caused by the same" in out
    assert report[-1] == "257 hazards from 2 root cause(s); --all-hazards lists every one"
    rc, out, _err = run_cli(capsys, "simulate", bad, *_data(tensors), "--term-width", "4096", "--all-hazards")
    assert rc == 1 and sum(line.startswith("hazard: ") for line in out.splitlines()) == 257
    rc, out, _err = run_cli(capsys, "simulate", bad, *_data(tensors), "--json")
    d = json.loads(out)
    assert rc == 1 and len(d["hazards"]) == 257 and [g["count"] for g in d["hazard_groups"]] == [256, 1]
    g = d["hazard_groups"][0]
    assert g["first"] == d["hazards"][0] and g["missing"]["kind"] == "wait" and len(g["hazards"]) == 256


def test_the_example_runs_from_outside_the_repository(tmp_path):
    """The script needs nothing but an installed simtc: copied elsewhere and run there, D is bit-exact."""
    copy = tmp_path / "tcgen05_gemm.py"
    shutil.copy(EXAMPLE, copy)
    out = subprocess.run([sys.executable, str(copy), "--k-blocks", "4"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "bit-exact: True" in out.stdout


@pytest.mark.slow
def test_one_command_from_a_fresh_clone(tmp_path):
    """``git clone`` (the committed tree), then the one command docs/own_kernel.md gives."""
    clone = tmp_path / "simtc"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    cmd = ("python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/python examples/tcgen05_gemm.py")
    assert cmd in (ROOT / "docs" / "own_kernel.md").read_text()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    out = subprocess.run(["bash", "-c", cmd], cwd=clone, capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "bit-exact: True" in out.stdout


def _blocks(kind: str) -> list[str]:
    text = (ROOT / "docs" / "own_kernel.md").read_text(encoding="utf-8")
    return [b.split("```", 1)[0].strip("\n") for b in text.split(f"```{kind}\n")[1:]]


def test_the_page_commands_run_and_print_what_it_shows(tmp_path):
    """Every command of docs/own_kernel.md's bash blocks (but the fresh clone's, the slow test's) runs in a scratch
    folder with the exit status the page gives; the printed report and note are the page's text blocks."""
    import re
    import shlex

    outputs = []
    for block in _blocks("bash")[1:]:
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            want = int(re.search(r"exit (\d)", comment).group(1)) if "exit" in comment else 0
            argv = shlex.split(command)
            if argv[0] == "python":
                argv = [sys.executable, str(ROOT / argv[1]), *argv[2:]]
            else:
                assert argv[0] == "simtc", line
                argv = [sys.executable, "-m", "simtc", *argv[1:]]
            out = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
            assert out.returncode == want, (line, out.stderr[-1000:])
            outputs.append((argv, out))
    report = next(o.stdout for a, o in outputs if "dropped-wait.json" in a and "--tensor" in a)
    shown = _blocks("text")
    assert report[report.rindex("tcgen05-gemm-dropped-wait: 24350"):].rstrip("\n") == shown[1]
    note = subprocess.run([sys.executable, "-m", "simtc", "simulate", "gemm.json", "--json"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert note.returncode == 0 and note.stderr.strip() == shown[0]
    assert (tmp_path / "gemm.trace.json").is_file()
