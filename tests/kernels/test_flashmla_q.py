"""FlashMLA head64's Q placement falls out of the primitives (``kernel.cuh`` lines 464-513 at 9241ae3).

Q (64 heads x 576 dims, bf16) is stored in shared memory as FlashMLA does: eight 64x64
K-major SW128 tiles ("q", 8 KiB each, dims 64i..64i+63), then Q RoPE as two 64x32 K-major
SW64 tiles at 65,536 (dims 512-543, 544-575). Sixteen ``tcgen05.cp.128x256b`` read a
128-row SW128 view (rows 64-127 = the next 8-KiB tile) with start t*16384 + s*32 into TMEM
columns 256 + 8*(4t + s); two more read a 128-row SW64 view of the RoPE tiles (start
65536 + 32*s) into columns 384 + 8*s.
"""

import numpy as np
import pytest

from simtc.smem import CanonicalLayout, SharedMemory, SmemDescriptor
from simtc.tmem import TensorMemory

# kernel.cuh lines 477-486: copy (t, s) reads start t*16384 + s*32 into column 256 + 32t + 8s; the dims each
# lane half receives follow from the 128-row view [inferred]:
# (t, s, first TMEM column, smem start, lanes 0-63 dims, lanes 64-127 dims)
TABLE = [
    (0, 0, 256, 0, (0, 15), (64, 79)), (0, 1, 264, 32, (16, 31), (80, 95)),
    (0, 2, 272, 64, (32, 47), (96, 111)), (0, 3, 280, 96, (48, 63), (112, 127)),
    (1, 0, 288, 16384, (128, 143), (192, 207)), (1, 1, 296, 16416, (144, 159), (208, 223)),
    (1, 2, 304, 16448, (160, 175), (224, 239)), (1, 3, 312, 16480, (176, 191), (240, 255)),
    (2, 0, 320, 32768, (256, 271), (320, 335)), (2, 1, 328, 32800, (272, 287), (336, 351)),
    (2, 2, 336, 32832, (288, 303), (352, 367)), (2, 3, 344, 32864, (304, 319), (368, 383)),
    (3, 0, 352, 49152, (384, 399), (448, 463)), (3, 1, 360, 49184, (400, 415), (464, 479)),
    (3, 2, 368, 49216, (416, 431), (480, 495)), (3, 3, 376, 49248, (432, 447), (496, 511)),
    ("rope", 0, 384, 65536, (512, 527), (544, 559)), ("rope", 1, 392, 65568, (528, 543), (560, 575)),
]


@pytest.fixture(scope="module")
def placed():
    q = (np.arange(64)[:, None] * 576 + np.arange(576)[None, :]).astype(np.uint16)   # unique bf16 bit patterns
    sm = SharedMemory()
    sm.alloc("q", 65536, align=1024)
    sm.alloc("q_sw64", 8192, align=1024)
    nope = CanonicalLayout("bf16", "K", "SW128", 64, 64)
    for i in range(8):
        sm.write_tile_bits(nope, q[:, 64 * i:64 * i + 64], "q", offset=8192 * i)
    rope = CanonicalLayout("bf16", "K", "SW64", 64, 32)
    for j in range(2):
        sm.write_tile_bits(rope, q[:, 512 + 32 * j:544 + 32 * j], "q_sw64", offset=4096 * j)

    tm = TensorMemory()
    assert tm.alloc(512, warp=0).column == 0          # FlashMLA asserts the start address is 0
    tm.relinquish_alloc_permit(warp=0)
    nope_desc = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128")
    rope_desc = SmemDescriptor(start=65536, lbo=16, sbo=512, layout_type="SW64")
    assert nope_desc.encode() >> 32 == 0x40004040 and rope_desc.encode() >> 32 == 0x80004020
    for t in range(4):
        for s in range(4):
            d = nope_desc.advance(t * 16384 + s * 32)
            # the same descriptor CUTLASS builds for a 128-row view, K-slice s
            assert d == CanonicalLayout("bf16", "K", "SW128", 128, 64).descriptor(start=16384 * t, k_slice=s)
            tm.cp(256 + 8 * (4 * t + s), sm, d, "128x256b", label=f"cp Q t={t} s={s}")
    for s in range(2):
        tm.cp(384 + 8 * s, sm, rope_desc.advance(32 * s), "128x256b", label=f"cp Q RoPE s={s}")
    return q, tm


def _dims(tm, lanes, c0):
    """bf16 bit patterns held by lanes x columns c0..c0+7, low half first: (lanes, 16)."""
    cells = tm.cells[lanes, c0:c0 + 8]
    return np.stack([cells & 0xFFFF, cells >> 16], axis=-1).reshape(len(lanes), 16)


def test_table_7_2_row_by_row(placed):
    q, tm = placed
    for t, s, c0, start, lo, hi in TABLE:
        src = 0 if t == "rope" else t * 16384 + s * 32
        assert start == (65536 + 32 * s if t == "rope" else src)
        for lanes, (d0, d1) in ((np.arange(64), lo), (np.arange(64, 128), hi)):
            got = _dims(tm, lanes, c0)
            assert (got == q[lanes % 64, d0:d1 + 1]).all(), (t, s, lanes[0])


def test_every_cell_matches_the_dual_gemm_formula(placed):
    """Cell for cell, columns 256-399: lane L (h = L % 64, half = L // 64), 16-bit half j % 2."""
    q, tm = placed
    L = np.arange(128)[:, None]
    h, half = L % 64, L // 64
    want = np.zeros((128, 144, 2), dtype=np.uint32)
    for c in range(144):                                  # the TABLE's rule, scalar, column by column
        for j2 in range(2):
            if c < 128:
                t, s, jj = c // 32, (c % 32) // 8, 2 * (c % 8) + j2
                dim = 128 * t + 64 * half + 16 * s + jj
            else:
                s, jj = (c - 128) // 8, 2 * ((c - 128) % 8) + j2
                dim = 512 + 32 * half + 16 * s + jj
            want[:, c, j2] = q[h, dim][:, 0]
    got = tm.cells[:, 256:400]
    assert (got & 0xFFFF == want[..., 0]).all()          # even dim in the low half
    assert (got >> 16 == want[..., 1]).all()             # odd dim in the high half


def test_even_chunks_low_lanes_odd_chunks_high_lanes(placed):
    q, tm = placed
    chunk_of = np.full(65536, -1)
    chunk_of[q.ravel()] = np.tile(np.arange(576) // 64, 64)
    lo_chunks = np.unique(chunk_of[tm.cells[:64, 256:384] & 0xFFFF])
    hi_chunks = np.unique(chunk_of[tm.cells[64:, 256:384] & 0xFFFF])
    assert lo_chunks.tolist() == [0, 2, 4, 6] and hi_chunks.tolist() == [1, 3, 5, 7]
    # RoPE split 32 | 32
    assert set(np.unique(tm.cells[:64, 384:400] & 0xFFFF) % 576) <= set(range(512, 544))
    assert set(np.unique(tm.cells[64:, 384:400] & 0xFFFF) % 576) <= set(range(544, 576))


def test_only_q_columns_written_and_writers_recorded(placed):
    _, tm = placed
    assert (tm.last_writer[:, :256] == -1).all() and (tm.last_writer[:, 400:] == -1).all()
    assert len(tm.instructions) == 18
    assert (tm.last_writer[:, 256:400].reshape(128, 18, 8) == np.arange(18)[None, :, None]).all()


def test_warps_read_their_q_rows(placed):
    """Q cells already hold bf16 pairs: a plain .32x32b load returns them; .pack::16b would take low halves only."""
    q, tm = placed
    regs = tm.ld((64 << 16) | 256, "32x32b", 8, warp=2)                   # lanes 64-95, columns 256-263
    assert (regs & 0xFFFF == q[0:32, 64:80:2]).all() and (regs >> 16 == q[0:32, 65:80:2]).all()
    packed = tm.ld((64 << 16) | 256, "32x32b", 4, warp=2, pack=True)     # same 8 columns, low halves
    assert (packed & 0xFFFF == q[0:32, 64:80:4]).all() and (packed >> 16 == q[0:32, 66:80:4]).all()


def test_the_package_copies_place_q_like_the_table(placed):
    """simtc.kernels.flashmla's 18 Cp records, run through the semantics layer, give the same cells."""
    from simtc.kernels.flashmla import q_copies
    from simtc.semantics import Cta, execute

    q, tm = placed
    cta = Cta()
    nope = CanonicalLayout("bf16", "K", "SW128", 64, 64)
    rope = CanonicalLayout("bf16", "K", "SW64", 64, 32)
    for i in range(8):
        cta.smem.write_tile_bits(nope, q[:, 64 * i:64 * i + 64], 8192 * i)
    for j in range(2):
        cta.smem.write_tile_bits(rope, q[:, 512 + 32 * j:544 + 32 * j], 65536 + 4096 * j)
    cta.tmem.alloc(512)
    for c in q_copies():
        execute(c, cta, warp=4, threads=1)
    assert np.array_equal(cta.tmem.cells, tm.cells)
