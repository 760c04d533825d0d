"""The H200 gather microbenchmarks as Programs: what the engine says about the very loops that were measured.

Two loops of :mod:`simtc.hw` time FlashMLA's SM90 producer pattern -- 128-bit loads of 8 token rows per
warp-instruction, lane ``l`` on row ``l % 8`` (``splitkv_mla.cuh`` L459-460, L583-584 at ``9241ae3``) -- with one
warpgroup on one SM:

* :func:`rows_program` -- :mod:`simtc.hw.l1_probe`'s ``simtc_l1_probe_rows``: per block of 64 rows each thread
  loads 7 chunks of its 2 rows (14 loads), the warpgroup meets at a named barrier
  (``tests/data/h200_l1_probe.json``, ``rows``);
* :func:`gather_program` -- ``simtc calibrate``'s LDG gather (``simtc/hw/cuda/calibrate_memory.cu``, method 0):
  a row's NoPE chunks, its scales and its RoPE, 22 (V32) or 20 (MODEL1) loads a thread
  (``tests/data/h200_calibration.json``, ``memory``, 1 CTA, 1 block in flight).

Both are built from :class:`~simtc.isa.CudaCoreBlock` records whose global loads carry the pattern
(``gmem_rows`` 8, ``gmem_pitch``, ``gmem_lanes="interleaved"``), so the engine's L1 model
(:mod:`simtc.engine.l1`) prices them as it prices the kernel's. Run with ``l2_resident=("",)`` the loads are
served by L2, as in the recordings' 8 MiB pools. ``tests/kernels/test_gathers.py`` holds the engine's cycles
per block against the recordings.

>>> from simtc.engine import Engine
>>> from simtc.engine.parameters import Timing
>>> eng = Engine(rows_program(656, blocks=4), timing=Timing("sm90"), active_sms=1, check=False,
...              l2_resident=("",)).run()
>>> 1300 < eng.cycles / 4 < 1600
True
"""

from __future__ import annotations

from simtc.isa.cuda_core import CudaCoreBlock
from simtc.isa.program import Program, Role
from simtc.isa.sync import BarSync

__all__ = ["GATHER_LOADS", "gather_program", "rows_program"]

_NOPE = "LDG.E.EL.LTC256B.128.CONSTANT"
_L2_128 = "LDG.E.EL.LTC128B.128.CONSTANT"
GATHER_LOADS = {
    "v32": ((_NOPE, 16), (_L2_128, 6)),
    "model1": ((_NOPE, 14), ("LDG.E.64.CONSTANT", 2), (_L2_128, 4)),
}
"""Loads a thread issues per block in ``simtc calibrate``'s LDG gather: V32 8 NoPE chunks x 2 rows, then the 16-B
scales and 2 RoPE chunks of each row; MODEL1 7 NoPE chunks x 2 rows, 8-B scales, 2 RoPE chunks (SASS checked by
``simtc calibrate``)."""
_PITCH = {"v32": 656, "model1": 576}


def _loop(name: str, counts, pitch: int, blocks: int) -> Program:
    recs: list = []
    for b in range(blocks):
        recs += [CudaCoreBlock(f"loads {b}", counts, gmem_rows=8, gmem_pitch=pitch, gmem_lanes="interleaved",
                               regs_written=(f"rows{b}",)),
                 CudaCoreBlock(f"fold {b}", (("STS", 1),), regs_read=(f"rows{b}",)),
                 BarSync(1, 128)]
    return Program(name, (Role("warpgroup", (0, 1, 2, 3), tuple(recs)),),
                   description=f"{blocks} blocks of 64 gathered rows {pitch} B apart, one warpgroup")


def rows_program(pitch: int, blocks: int = 16) -> Program:
    """:mod:`simtc.hw.l1_probe`'s row loop: 14 loads of 8 rows ``pitch`` bytes apart per thread and block (MODEL1's
    pages start their 576-byte records on the same 64-byte multiples as a 576-byte pitch)."""
    return _loop(f"l1-probe-rows-p{pitch}", ((_NOPE, 14),), pitch, blocks)


def gather_program(fmt: str, blocks: int = 12) -> Program:
    """``simtc calibrate``'s LDG gather of ``fmt`` (``v32`` or ``model1``) rows, one block in flight."""
    return _loop(f"calibrate-gather-{fmt}", GATHER_LOADS[fmt], _PITCH[fmt], blocks)
