"""The first tcgen05 kernel executed by simtc's PTX executor: simtc's own ``cuda/tcgen05_dual_qk.cu``.

The kernel (FlashMLA's dual-GEMM QK step: 18 ``tcgen05.cp.128x256b`` of Q, 18 ``tcgen05.mma.ws`` TS M=64 N=128,
a commit to an mbarrier, every warp loading its TMEM quadrant) is compiled by NVRTC for sm_100a and launched
through simtc.cuda exactly as :func:`simtc.hw.tcgen05.run_dual_qk` launches it through CuPy on a B200. Its dump
(Q region and P, 128 lanes x 208 columns) must equal simtc's model of the step
(:func:`simtc.hw.tcgen05.predict_dual_qk`, the hand replay through the semantics layer) bit for bit, and the
records the executor decoded from the kernel's registers must be the ones :mod:`simtc.hw.tcgen05` says it issues.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

import simtc.cuda as xp
from simtc.hw import tcgen05 as hw
from simtc.hw.suite import qk_operands
from simtc.isa.mbarrier import MbarrierInit
from simtc.isa.tcgen05 import Alloc, Commit, Cp, Dealloc, Ld, Mma
from simtc.kernels.flashmla import P_COLUMN, QK_IDESC, q_copies, qk_mmas
from simtc.ptx import async_ops

SMEM = hw.IMAGE_BYTES + 16 + 1024
"""Dynamic shared memory of the launch, as :func:`simtc.hw.tcgen05.run_dual_qk` asks for it."""


def run_dual_qk(xp, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """:func:`simtc.hw.tcgen05.run_dual_qk`'s launch with ``xp`` for cupy (the same calls)."""
    image, params = hw.dual_qk_inputs(q, k)
    fn = xp.RawKernel(hw.kernel_source(), "simtc_tcgen05_dual_qk", options=("-arch=sm_100a", "-lineinfo"))
    fn.max_dynamic_shared_size_bytes = SMEM
    d_img = xp.asarray(image.view(np.uint32))
    d_prm = xp.asarray(np.frombuffer(params, dtype=np.uint8))
    d_out = xp.zeros(128 * len(hw.DUMP_COLUMNS), dtype=xp.uint32)
    fn((1,), (128,), (d_img, d_prm, d_out), shared_mem=SMEM)
    return d_out.get().reshape(128, len(hw.DUMP_COLUMNS))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dual_qk_tmem_cells_are_bit_identical_to_simtcs_model(seed):
    q, k = qk_operands(seed)
    got = run_dual_qk(xp, q, k)
    want = hw.predict_dual_qk(q, k)
    assert got.shape == want.shape == (128, 208)
    np.testing.assert_array_equal(got, want)
    p = got[:, P_COLUMN - hw.DUMP_COLUMNS.start:].view(np.float32)
    assert np.isfinite(p).all() and np.abs(p).max() > 0  # P is there, not zeros


def test_the_kernel_issues_the_records_simtc_describes():
    q, k = qk_operands(0)
    with async_ops.issued() as log:
        run_dual_qk(xp, q, k)
    recs = [(warp, lane, r) for _, warp, lane, r in log]
    by = lambda cls: [r for _, _, r in recs if type(r) is cls]  # noqa: E731
    unlabelled = lambda rs: [attrs.evolve(r, label="") for r in rs]  # noqa: E731
    # the 18 copies and 18 MMAs, issued by thread 0 in program order: descriptors (every field), TMEM
    # addresses, the instruction descriptor's bits and enable-input-d equal what simtc.hw.tcgen05 feeds in
    assert by(Cp) == unlabelled(q_copies()) and by(Mma) == unlabelled(qk_mmas(1))
    assert {(w, lane) for w, lane, r in recs if type(r) in (Cp, Mma, Commit)} == {(0, 0)}
    assert {m.idesc.encode() for m in by(Mma)} == {QK_IDESC.encode()} == {0x04200490}
    assert [m.enable_input_d for m in by(Mma)] == [False] + [True] * 17
    assert [r.desc.hex() for r in by(Cp)] == [c.desc.hex() for c in q_copies()]
    # the setup and the teardown: all 512 columns, the address written after the mbarrier, one commit to it
    bar = async_ops.mbarrier_name(hw.IMAGE_BYTES)
    assert by(Alloc) == [Alloc(512, hw.IMAGE_BYTES + 8)] and by(Dealloc) == [Dealloc(0, 512)]
    assert by(MbarrierInit) == [MbarrierInit(bar, 1)] and by(Commit) == [Commit(bar)]
    # each warp loads its own quadrant, 13 x 16 columns of 256..463 (the SASS check's LDTM.x16 count)
    loads = [(w, r) for w, _, r in recs if type(r) is Ld]
    assert len(loads) == 4 * hw.EXPECTED_SASS["LDTM.x16"]
    for w in range(4):
        mine = [r for ww, r in loads if ww == w]
        assert [r.taddr for r in mine] == [(32 * w) << 16 | c for c in range(256, 464, 16)]
        assert {(r.shape, r.num, r.pack) for r in mine} == {("32x32b", 16, False)}
