"""Large requests: the memory estimate and its refusal, the progress bar, bad or unwritable files, --inputs flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from simtc.cli import _progress, main
from simtc.kernels.flashmla import io, replay


def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("inputs") / "good.npz"
    io.save_inputs(path, io.make_inputs("v32", topk=64, seed=1))
    return path


# ---- the memory estimate and the refusal ----------------------------------------------------------------------
def test_parse_size_and_limit_env(monkeypatch):
    assert [_progress.parse_size(t) for t in ("2G", "512MiB", "1.5k", "4096", "3 GB")] == \
        [2 << 30, 512 << 20, 1536, 4096, 3 << 30]
    for bad in ("", "G", "-1G", "nan", "12X", "١٢"):
        with pytest.raises(ValueError):
            _progress.parse_size(bad)
    monkeypatch.setenv("SIMTC_MEMORY_LIMIT", "3G")
    assert _progress.available_memory() == (3 << 30, "SIMTC_MEMORY_LIMIT=3G")
    monkeypatch.delenv("SIMTC_MEMORY_LIMIT")
    have, source = _progress.available_memory()
    if sys.platform.startswith("linux"):  # MemAvailable (or a cgroup's room) is always there on Linux
        assert have > 0 and source
        with open("/proc/meminfo") as f:
            total = int(next(line for line in f if line.startswith("MemTotal:")).split()[1]) * 1024
        assert have <= total


def test_make_inputs_estimate_bounds_the_measured_peak():
    """The estimate (less the interpreter's fixed share) is above tracemalloc's peak, and not by more than 2x, for
    K-dominated, Q-dominated and index-dominated requests."""
    import tracemalloc

    for args in (dict(b=1, s_q=1, topk=16384), dict(b=96, s_q=1, topk=64), dict(b=64, s_q=1, topk=2048)):
        tracemalloc.start()
        io.make_inputs("v32", seed=1, **args)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        est = io.make_inputs_memory("v32", **args) - io._FIXED_BYTES
        assert peak <= est <= 2 * peak, (args, peak, est)


def test_make_inputs_memory_stays_near_its_output():
    """Drawing in chunks: the peak of a K-dominated request is about the cache plus its K as bf16 bits and one
    chunk, not the 36 bytes per value of one whole draw."""
    import tracemalloc

    tracemalloc.start()
    inp = io.make_inputs("v32", topk=16384, seed=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    k_values = inp.num_blocks * 64 * 576
    assert peak < inp.kv.nbytes + 2 * k_values + (100 << 20) and peak < 36 * k_values / 4


def test_inputs_make_refuses_what_does_not_fit_in_under_a_second(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("SIMTC_MEMORY_LIMIT", "2G")
    t0 = time.perf_counter()
    rc, out, err = run_cli(capsys, "inputs", "make", tmp_path / "x.npz", "--seed", "1", "--topk", "1000064")
    assert time.perf_counter() - t0 < 1.0
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "needs about 3.6 GiB" in err and "2.0 GiB available (SIMTC_MEMORY_LIMIT=2G)" in err
    assert "rule: a request must fit in the memory available" in err and not (tmp_path / "x.npz").exists()
    # a Q-dominated request: b x s_q rows of 64 x 576 values
    rc, _, err = run_cli(capsys, "inputs", "make", tmp_path / "x.npz", "--seed", "1", "--b", "4096", "--s-q", "16")
    assert rc == 2 and "needs about 11.7 GiB" in err
    monkeypatch.setenv("SIMTC_MEMORY_LIMIT", "lots")
    rc, _, err = run_cli(capsys, "inputs", "make", tmp_path / "x.npz", "--seed", "1")
    assert rc == 2 and "SIMTC_MEMORY_LIMIT='lots' is not a size" in err


def test_replay_refuses_what_does_not_fit(capsys, monkeypatch, good):
    monkeypatch.setenv("SIMTC_MEMORY_LIMIT", "512M")
    rc, out, err = run_cli(capsys, "replay", "flashmla-head64", "--blocks", "4096", "--json")
    assert rc == 2 and out == "" and "replay --blocks 4096 needs about 884.1 MiB" in err
    assert replay.memory_estimate("v32", 4096, timing_only=True) < 512 << 20  # timing only fits
    monkeypatch.setenv("SIMTC_MEMORY_LIMIT", "1M")
    for argv in (("inputs", "check", good), ("replay", "flashmla-head64", "--inputs", good)):
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 2 and out == "" and f"{good} needs about" in err and "available" in err, argv


def test_replay_estimate_covers_the_measured_growth():
    """The per-block term covers the seeded cache and what a run keeps per block (see test_replay_memory)."""
    per_block = replay.memory_estimate("v32", 2048) - replay.memory_estimate("v32", 1024)
    assert per_block / 1024 >= 2 * 64 * 656 + 30 * 1024


# ---- the progress bar ---------------------------------------------------------------------------------------
class _Tty:
    def __init__(self, tty: bool):
        self.tty, self.text = tty, []

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text.append(s)
        return len(s)

    def flush(self):
        pass


def test_progress_only_on_a_terminal_and_never_with_json(monkeypatch):
    monkeypatch.delenv("SIMTC_PROGRESS", raising=False)
    assert _progress.progress_wanted(False, _Tty(True))
    assert not _progress.progress_wanted(True, _Tty(True))
    assert not _progress.progress_wanted(False, _Tty(False))
    monkeypatch.setenv("SIMTC_PROGRESS", "0")
    assert not _progress.progress_wanted(False, _Tty(True))
    monkeypatch.delenv("SIMTC_PROGRESS")
    with _progress.progress(True, _Tty(True)) as tell:
        assert tell is None
    tty = _Tty(True)
    with _progress.progress(False, tty) as tell:
        replay.replay("v32", 2, 0, progress=tell)
    drawn = "".join(tty.text)
    assert "engine" in drawn and "reference P" in drawn and "━" in drawn


def test_replay_progress_reports_every_phase_and_changes_nothing():
    seen: list[tuple[str, int, int]] = []
    r = replay.replay("v32", 4, 0, progress=lambda *a: seen.append(a))
    plain = replay.replay("v32", 4, 0)
    assert (r.cycles, r.events, r.critical_path, r.o_rel_error, r.p_bit_exact) == \
        (plain.cycles, plain.events, plain.critical_path, plain.o_rel_error, plain.p_bit_exact)
    last = {p: (d, t) for p, d, t in seen}
    assert set(last) == {"inputs", "reference P", "engine", "reference O", "P check"}
    assert all(d == t for d, t in last.values())
    engine = [d for p, d, _ in seen if p == "engine"]
    assert engine == sorted(engine) and engine[0] == 0


def test_engine_slices_keep_the_trace(monkeypatch):
    """A run in slices of ENGINE_SLICE cycles (what progress asks for) gives the same trace as one run."""
    from simtc.engine import Engine
    from simtc.kernels.flashmla.head64 import head64_program

    monkeypatch.setattr(replay, "ENGINE_SLICE", 3000)
    program = head64_program("v32", 6, [False, False, False, True, False, False])
    whole = Engine(program, mode="timing").run()
    calls = []
    sliced = replay.run_engine(Engine(program, mode="timing"), lambda *a: calls.append(a))
    assert whole.cycles > 5 * replay.ENGINE_SLICE and len(calls) >= 5
    assert sliced.trace == whole.trace and sliced.cycles == whole.cycles


def test_json_stays_json_and_no_bar_when_not_a_terminal(tmp_path):
    """Through a real process (stderr a pipe): --json prints one JSON document, stderr stays empty."""
    env = {**os.environ, "SIMTC_PROGRESS": "1"}
    for argv in (["replay", "flashmla-head64", "--blocks", "2", "--json"],
                 ["inputs", "make", str(tmp_path / "a.npz"), "--seed", "1", "--json"]):
        p = subprocess.run([sys.executable, "-m", "simtc", *argv], capture_output=True, text=True, env=env,
                           timeout=120)
        assert p.returncode == 0 and p.stderr == "", (argv, p.stderr)
        assert isinstance(json.loads(p.stdout), dict) and p.stdout.count("\n") == 1
    p = subprocess.run([sys.executable, "-m", "simtc", "replay", "flashmla-head64", "--blocks", "2"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stderr == "" and "\x1b" not in p.stdout and "━" not in p.stdout


# ---- bad, truncated or unwritable files -----------------------------------------------------------------------
def _one_line(rc, out, err):
    assert rc == 2 and out == "" and err.count("\n") == 1 and "internal error" not in err and "bug" not in err
    return err


def test_truncated_or_corrupt_npz_is_a_bad_file_not_a_bug(capsys, tmp_path, good):
    data = good.read_bytes()
    truncated, corrupt = tmp_path / "truncated.npz", tmp_path / "corrupt.npz"
    truncated.write_bytes(data[:len(data) // 2])
    broken = bytearray(data)
    broken[2000:2100] = b"x" * 100  # inside the first member's data: its CRC no longer matches
    corrupt.write_bytes(bytes(broken))
    for path, what in ((truncated, "is not a readable .npz archive"), (corrupt, "cannot be read")):
        for argv in (("inputs", "check", path), ("replay", "flashmla-head64", "--inputs", path)):
            err = _one_line(*run_cli(capsys, *argv))
            assert repr(str(path)) in err and what in err and "truncated or corrupt" in err, err


def test_missing_file_and_directory_are_named(capsys, tmp_path):
    for path, why in ((tmp_path / "none.npz", "No such file or directory"), (tmp_path, "Is a directory")):
        err = _one_line(*run_cli(capsys, "inputs", "check", path))
        assert f"cannot read {str(path)!r}: {why}" in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device that is always full)")
def test_disk_full_names_the_file(capsys, good):
    err = _one_line(*run_cli(capsys, "inputs", "make", "/dev/full", "--seed", "1"))
    assert "cannot write '/dev/full': No space left on device" in err
    rc, _, err = run_cli(capsys, "replay", "flashmla-head64", "--inputs", good, "--save-outputs", "/dev/full")
    assert rc == 2 and "cannot write '/dev/full': No space left on device" in err


def test_failed_write_leaves_no_half_file(tmp_path, monkeypatch):
    path = tmp_path / "half.npz"

    def full(f, **arrays):
        f.write(b"PK partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    with pytest.raises(io.FlashMLAFileError, match=r"cannot write .*half\.npz.*No space left"):
        io.save_inputs(path, io.make_inputs("v32", topk=64, seed=1))
    assert not path.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_named(capsys, tmp_path, good):
    path = tmp_path / "locked.npz"
    path.write_bytes(good.read_bytes())
    path.chmod(0)
    err = _one_line(*run_cli(capsys, "inputs", "check", path))
    assert f"cannot read {str(path)!r}: Permission denied" in err


# ---- --inputs fixes the model, the blocks and the data ---------------------------------------------------------
@pytest.mark.parametrize("flags", [("--model", "model1"), ("--blocks", "3"), ("--seed", "5"),
                                   ("--model", "v32", "--seed", "0")])
def test_inputs_refuses_model_blocks_seed(capsys, good, flags):
    err = _one_line(*run_cli(capsys, "replay", "flashmla-head64", "--inputs", good, *flags))
    named = [f for f in flags if f.startswith("--")]
    assert f"{', '.join(named)} cannot be combined with --inputs" in err and "the file fixes the model" in err


def test_seeded_defaults_unchanged(capsys):
    rc, out, _ = run_cli(capsys, "replay", "flashmla-head64", "--json")
    d = json.loads(out)
    assert rc == 0 and (d["model"], d["blocks"], d["seed"]) == ("v32", 4, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pseudo-terminal")
def test_bar_on_a_terminal_and_stdout_untouched():
    """stderr a pseudo-terminal: the bar is drawn there (phase names, rich's bar), stdout keeps the plain summary."""
    import pty
    import select

    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "SIMTC_PROGRESS"}
    p = subprocess.Popen([sys.executable, "-m", "simtc", "replay", "flashmla-head64", "--blocks", "2"],
                         stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    drawn = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        elif p.poll() is not None:
            break
    with p.stdout:
        out = p.stdout.read().decode()
    assert p.wait(timeout=60) == 0
    os.close(leader)
    text = drawn.decode(errors="replace")
    assert "engine" in text and "━" in text
    assert out.startswith("FlashMLA head64 V32: 2 block(s)") and "\x1b" not in out and "━" not in out
