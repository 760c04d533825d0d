"""Peak memory and wall time of ``simtc replay flashmla-head64 --blocks B`` (python benchmarks/replay_memory.py
[B ...] [--timing-only]).

Each replay runs the command line in a fresh process (``python -m simtc replay flashmla-head64 --blocks B --json``,
stderr not a terminal, so no progress bar); its peak resident set (``ru_maxrss`` of that child, from ``os.wait4``)
and its wall time, interpreter start-up included, are printed with the memory estimate the command checks before
it starts (:func:`simtc.kernels.flashmla.replay.memory_estimate`) and the replay's own ``wall_seconds`` /
``inputs_seconds`` / ``check_seconds``.

Measured on the shared 2-core machine (V32, seed 0, full numerics; CPython 3.11, numpy 2; wall time of the whole
process, ``wall_seconds`` of the replay proper in brackets):

=======  ===============  ============  ==========  =======================================================
blocks   peak RSS         estimate      wall time   before (``/usr/bin/time``, same machine)
=======  ===============  ============  ==========  =======================================================
256      160 MB           353 MB        14 s (9)    295 MB, 12 s
1,024    265 MB           468 MB        56 s (39)   373 MB, 115 s (measured beside other work)
4,096    703 MB           927 MB        215 s (152) 872 MB, 270 s
=======  ===============  ============  ==========  =======================================================

Timing only (``--timing-only``): 87 MB / 8.6 s at 1,024 blocks, 135 MB / 33 s at 2,048.

What a block costs once its inputs are made: the seeded cache (two page blocks of 64 x 656 bytes, 84 KiB, half of
them never referenced), its RoPE view (16 KiB), the engine's trace (~640 events in ~23 KiB of columns) and state.
The P check keeps a 16-byte digest per block (:class:`simtc.kernels.flashmla.replay.PTrace`), and inputs, reference
P and the reference attention work in bounded groups (the attention's 64-block group dequantized 512 tokens at a
time); the rest is a fixed ~100 MB (the interpreter and libraries, those groups).
``tests/kernels/test_replay_memory.py`` keeps the per-block growth bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from simtc.kernels.flashmla.replay import memory_estimate

DEFAULT_BLOCKS = (256, 1024, 4096)


def measure(blocks: int, timing_only: bool = False) -> dict:
    """Run one replay in a child process; its peak RSS (bytes), wall seconds and JSON output."""
    argv = [sys.executable, "-m", "simtc", "replay", "flashmla-head64", "--blocks", str(blocks), "--json"]
    if timing_only:
        argv.append("--timing-only")
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = child.stdout.read(), child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):
        raise SystemExit(f"--blocks {blocks}: exit {child.returncode}: {err.decode(errors='replace').strip()}")
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return {"blocks": blocks, "peak_rss": usage.ru_maxrss * scale, "wall": wall, "out": json.loads(out)}


def main(argv: list[str]) -> None:
    timing_only = "--timing-only" in argv
    blocks = [int(a) for a in argv if a != "--timing-only"] or list(DEFAULT_BLOCKS)
    print(f"{'blocks':>7}  {'peak RSS':>10}  {'estimate':>10}  {'wall':>8}  {'replay':>8}  {'inputs':>7}  "
          f"{'checks':>7}  ok")
    for b in blocks:
        r = measure(b, timing_only)
        o = r["out"]
        est = memory_estimate("v32", b, timing_only=timing_only)
        print(f"{b:>7}  {r['peak_rss'] / 1e6:>7.0f} MB  {est / 1e6:>7.0f} MB  {r['wall']:>6.1f} s  "
              f"{o['wall_seconds']:>6.1f} s  {o['inputs_seconds']:>5.1f} s  {o['check_seconds']:>5.1f} s  {o['ok']}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
