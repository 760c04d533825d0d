"""The stepping API, its pictures and the terminal stepping (``--step``, ``--step-to``), on the head64 replay and the
hazard catalogue."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from simtc.cli import main
from simtc.engine.stepper import StepError, Stepper
from simtc.kernels.flashmla.plan import TMEM_V32
from simtc.kernels.flashmla.replay import stepper as head64_stepper
from simtc.kernels.hazards import build


@pytest.fixture(scope="module")
def walked():
    """A 2-block head64 stepper walked to its end, with the JSON of every step (the same as --step-to N --json)."""
    s = head64_stepper("v32", 2)
    n = len(s)
    states = [s.goto(k).to_json() for k in range(n + 1)]
    return s, states


def _region(name):
    return next(r for r in TMEM_V32 if r.name == name)


def test_every_step_keeps_time_and_phases_moving_forward(walked):
    s, states = walked
    cycles = [st["cycle"] for st in states]
    assert cycles == sorted(cycles)  # cycles never go back
    last_phase: dict[str, int] = {}
    for k, st in enumerate(states):
        for m in st["mbarriers"]:
            assert m["phase"] >= last_phase.get(m["name"], 0), (k, m)  # phases only advance
            last_phase[m["name"]] = m["phase"]
            assert 0 <= m["pending"] <= m["expected"]
        for w in st["warps"]:  # every warp has its PC, the PTX line it is on, and what it waits on
            assert set(w) >= {"role", "warp", "pc", "ptx", "waiting_on"}
            assert (w["waiting_on"] is None) == (w["status"] != "waiting")
            assert (w["ptx"] is None) == (w["status"] == "done")
    phases = sum(1 for e in s.events if e.kind == "phase" and not e.detail.startswith("bar "))
    assert phases > 20 and phases == sum(m["phase"] for m in states[-1]["mbarriers"]) - sum(
        m["phase"] for m in states[0]["mbarriers"])  # each completion advanced its barrier by one phase
    # every record's event carries its PTX line; every phase event names its barrier
    for e in s.events:
        if e.index >= 0:
            assert (e.ptx and e.ptx.endswith(";")) or e.ptx.startswith("//"), e
        if e.kind == "phase":
            assert e.barrier and e.barrier in e.detail


def test_back_then_forward_gives_identical_states(walked):
    s, states = walked
    n = len(states) - 1
    rng = np.random.default_rng(7)
    for k in rng.integers(0, n + 1, 40).tolist():
        assert s.goto(k).to_json() == states[k]
        s.forward(min(13, n - k))
        s.back(min(13, n - k))
        assert s.position == k and s.to_json() == {"step": k, "event": s.event().to_json() if k else None,
                                                   "state": states[k]}
    fresh = head64_stepper("v32", 2)  # a new run, re-executed from scratch, steps to the same states
    for k in (0, 1, 257, n // 2, n):
        assert fresh.goto(k).to_json() == states[k]


def test_the_dual_gemm_fills_tmem_where_the_plan_puts_it(walked):
    s, _ = walked
    q, tail, p = _region("Q"), _region("Q_tail"), _region("P")
    landed = [e for e in s.events if e.kind == "complete" and e.ptx.startswith("tcgen05.cp")]
    assert len(landed) == 18  # Q: 16 tiles of 64 bf16 columns... as 18 cp of 128 lanes x 8 columns, once per CTA
    s.goto(max(e.step for e in landed))
    st = s.state()
    written = st.tmem_writer >= 0
    assert written[:, q.columns[0]:tail.columns[1] + 1].all()  # Q and Q_tail: 18 cp of 8 columns, all 128 lanes
    assert written.sum() == 128 * (tail.columns[1] + 1 - q.columns[0]) == 128 * 18 * 8
    mma = s.to_next(opcode="tcgen05.mma", kind="complete")  # the first QK MMA writes P's columns in both halves
    assert mma.writes["tmem"] == [{"lanes": [0, 127], "columns": [p.columns[0], p.columns[1]]}]
    assert mma.lands == "completion" and "RoPE" in mma.label  # RoPE first, as the kernel orders it
    reads = mma.reads["tmem"][0]["columns"]
    assert tail.columns[0] <= reads[0] <= reads[1] <= tail.columns[1]
    assert s.state().tmem_writer[0, p.columns[0]] == mma.step


def test_a_phase_completion_names_the_warps_it_releases(walked):
    s, _ = walked
    n = s.find(kind="phase", barrier="qk_done", start=0)
    e = s.event(n)
    assert e.released == tuple(("softmax", w) for w in range(4))
    resumed = {(x.role, x.warp) for x in s.events[n:] if x.kind == "resume"}
    assert set(e.released) <= resumed
    bar = s.event(s.find(kind="phase", barrier="bar ", start=0))
    assert bar.released and "released" in bar.detail


def test_stepping_errors_name_the_rule():
    s = Stepper.for_program(build("hazard/ld-before-commit-fixed"), mode="timing")
    n = len(s)
    for bad in (-1, n + 1):
        with pytest.raises(StepError, match="steps run from 0 to the number of events"):
            s.goto(bad)
    with pytest.raises(StepError, match="stepping targets"):
        s.find()
    assert s.goto(n).step == n and s.forward() is None and s.back(n + 5) is None and s.position == 0


def test_step_to_json_on_the_command_line(capsys):
    assert main(["replay", "flashmla-head64", "--blocks", "2", "--step-to", "400", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["step"] == 400
    assert set(d["event"]) >= {"cycle", "role", "warp", "ptx", "reads", "writes", "released"}
    assert set(d["state"]) >= {"tmem", "smem", "mbarriers", "warps"}
    assert {"name", "phase", "pending", "tx"} <= set(d["state"]["mbarriers"][0])
    assert main(["replay", "flashmla-head64", "--blocks", "2", "--step-to", "10000000"]) == 2
    err = capsys.readouterr().err
    assert "past the end" in err and "events" in err
    assert main(["simulate", "hazard/ld-before-commit", "--timing-only", "--step-to", "3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["step"] == 3 and d["event"]["ptx"] and d["event"]["barrier"] == "bar 1"
    n = len(Stepper.for_program(build("hazard/ld-before-commit"), mode="timing"))
    assert main(["simulate", "hazard/ld-before-commit", "--timing-only", "--step-to", str(n)]) == 1  # the hazard


def test_one_format_for_replay_and_simulate(capsys):
    assert main(["simulate", "hazard/over-arrival-fixed", "--timing-only", "--step", "6"]) == 0
    sim = capsys.readouterr().out.splitlines()
    assert main(["replay", "flashmla-head64", "--blocks", "1", "--step", "6"]) == 0
    rep = capsys.readouterr().out.splitlines()
    for out in (sim, rep):
        events = out[:6]
        assert all(int(x.split()[0]) >= 0 for x in events)  # cycle first, then who, record, kind, PTX
        assert all(x.split()[2].startswith("#") or x.split()[2] in ("phase", "done") or x.split()[1] == "-"
                   for x in events)
        assert out[6].startswith("step 6 ") and any(x.startswith("warps at cycle") for x in out)


def test_interactive_commands():
    s = head64_stepper("v32", 1)
    out = io.StringIO()
    cmds = "n\n\nn 5\nb\nb 2\nc\nj 300\n/tcgen05.mma\ns\nx\nj 99999999\nb 9999\nn nine\nh\nq\n"
    from simtc.cli._step import interact

    assert interact(s, io.StringIO(cmds), out, width=100) == 0
    text = out.getvalue()
    assert "step 1 " in text and "step 2 " in text and "step 7 " in text and "step 6 " in text
    assert "phase" in text and "releases" in text  # c: the next barrier completion and whom it released
    assert "step 300 " in text and "tcgen05.mma" in text and "warps at cycle" in text
    assert "unknown command 'x'" in text and "past the end" in text and "whole number" in text
    assert "step 0: before the first event" in text and "j N" in text


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_step_is_interactive_on_a_terminal(tmp_path):
    """``simtc simulate --step`` on a real (pseudo-)terminal reads commands: n, b, c, q."""
    import pty

    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="100", TERM="dumb", NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "simtc", "simulate", "hazard/ld-before-commit-fixed",
                             "--timing-only", "--step"], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    buf = b""

    def read_until(marker: bytes, limit: float = 60.0) -> bytes:
        nonlocal buf
        end = time.monotonic() + limit
        while marker not in buf and time.monotonic() < end:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
        got, _, buf = buf.partition(marker)
        return got

    try:
        assert b"stepping through the run" in read_until(b"step> ")
        os.write(master, b"n\n")
        assert b"step 1 " in read_until(b"step> ")
        os.write(master, b"c\n")
        assert b"phase" in read_until(b"step> ")
        os.write(master, b"b\n")
        read_until(b"step> ")
        os.write(master, b"q\n")
        assert proc.wait(timeout=60) in (0, 1)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_step_to_draws_the_step_as_svg_and_step_refuses_svg(tmp_path, capsys):
    svg = tmp_path / "step.svg"
    assert main(["simulate", "hazard/ld-before-commit-fixed", "--timing-only", "--step-to", "5", "--json",
                 "--svg", str(svg)]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 5
    text = svg.read_text()
    assert text.startswith("<svg") and "step 5</title>" in text and "cursor" in text
    assert main(["replay", "flashmla-head64", "--blocks", "1", "--step", "3", "--svg", str(svg)]) == 2
    assert "--svg combines with --step-to, not with --step" in capsys.readouterr().err
