"""The replay's memory stays bounded per block: what a run keeps beyond its inputs grows by a few tens of KiB per
block (``benchmarks/replay_memory.py`` measures the whole process at 256, 1,024 and 4,096 blocks)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from simtc.kernels.flashmla import replay


def _peak_after_inputs(blocks: int) -> int:
    """Peak traced bytes from the end of the inputs to the end of the engine run (reference P, Program, loading
    the request, the run with its trace and semantics state): everything but the seeded cache itself."""
    def tell(phase, done, total):
        if phase == "inputs" and done == total:
            tracemalloc.start()
        elif phase == "engine" and done == total and tracemalloc.is_tracing():
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    peaks: list[int] = []
    try:
        r = replay.replay("v32", blocks, 0, progress=tell)
    finally:
        tracemalloc.stop()
    assert r.ok and r.p_bit_exact
    return peaks[0]


def test_memory_per_block_is_bounded():
    """4 -> 16 blocks: the peak grows by less than 48 KiB per block (measured ~26 KiB: trace, engine state, the
    RoPE view of the cache) and by far less than 4x. Keeping every block's P (32 KiB), or any per-block record of
    hundreds of KiB as once made 4,096 blocks need 7 GB, fails this."""
    replay.replay("v32", 2, 0)  # warm the per-pattern caches (Program blocks, MMA plans), shared by every size
    small, large = _peak_after_inputs(4), _peak_after_inputs(16)
    assert (large - small) / 12 < 48 * 1024, (small, large)
    assert large < 1.5 * small, (small, large)


def test_p_trace_keeps_digests_not_blocks():
    trace = replay.PTrace(3)
    lanes = np.arange(32)
    rng = np.random.default_rng(0)
    p = rng.normal(size=(3, 128, 64)).astype(np.float32)
    for blk in range(2):
        for w in range(4):
            trace[blk, 32 * w + lanes, :32], trace[blk, 32 * w + lanes, 32:] = \
                p[blk, 32 * w + lanes, :32], p[blk, 32 * w + lanes, 32:]
    trace[2, lanes, :32] = p[2, lanes, :32]  # block 2: one write of eight
    assert trace.nbytes == 2 * 16 + 128 * 64 * 4  # two digests, one open block
    assert trace.matches(0, p[0]) and trace.matches(1, p[1]) and not trace.matches(0, p[1])
    q = p[1].copy()
    q.view(np.uint32)[5, 7] ^= 1  # one bit
    assert not trace.matches(1, q)
    assert not trace.matches(2, p[2])  # partly written: the rest is zeros
    assert trace.matches(2, np.where(np.arange(128)[:, None] < 32, np.where(np.arange(64) < 32, p[2], 0), 0))
    trace[0, lanes, :32] = p[0, lanes, :32]  # a ninth write: no longer checkable
    assert not trace.matches(0, p[0])
    with pytest.raises(IndexError):
        trace[3, lanes, :32] = p[0, lanes, :32]
