"""Footprints from fields alone, against independent formulas (PTX ISA 9.0 §9.7.16.8-§9.7.16.10; FlashMLA
head64 ``kernel.cuh`` / ``config.h`` at 9241ae3 for its operands)."""

import numpy as np
import pytest

from simtc.isa import (
    Cp,
    CpAsyncBulkTensor,
    InstrDescriptor,
    Ld,
    Mma,
    SmemDescriptor,
    SmemRange,
    St,
    StShared,
    TmemRect,
    WgmmaMmaAsync,
)
from simtc.isa.footprint import coalesce
from simtc.tmem.ldst import all_ops

QK = InstrDescriptor.from_u32(0x04200490)
PV = InstrDescriptor.from_u32(0x04410490)
NOPE1 = 73728


def sw128(start):
    return SmemDescriptor(start=start, lbo=16, sbo=1024, layout_type="SW128")


def sw128_k_slice_rows(base, k_slice, rows):
    """SW128 K-major, 32-byte K slice s of each row: XOR of 16-byte chunk bits with row bits (Sw<3,4,3>) keeps the
    two chunks 2s, 2s+1 together at 32-byte block s ^ ((row % 8) >> 1)."""
    return [SmemRange(base + 1024 * (n // 8) + 128 * (n % 8) + 32 * (k_slice ^ ((n % 8) >> 1)),
                      base + 1024 * (n // 8) + 128 * (n % 8) + 32 * (k_slice ^ ((n % 8) >> 1)) + 32)
            for n in range(rows)]


@pytest.mark.parametrize("k", [0, 1, 5, 15])
def test_flashmla_qk_mma_footprint(k):
    # QK NoPE instruction k (kernel.cuh L547-552): A = TMEM col 256 + 8k,
    # B = dual view at nope(1) + 16384*(k//4) + 32*(k%4)
    b = sw128(NOPE1 + 16384 * (k // 4) + 32 * (k % 4))
    fp = Mma(400, 256 + 8 * k, b, QK, True, ws=True).footprint()
    want = coalesce_ranges(sw128_k_slice_rows(NOPE1 + 16384 * (k // 4), k % 4, 128))
    assert list(fp.smem_reads) == want
    if k == 0:  # rows 7 | 8 are adjacent (992-1024 of one 1-KiB atom, then 0-32 of the next)
        assert want[:3] == [SmemRange(73728, 73760), SmemRange(73856, 73888), SmemRange(74016, 74048)]
        assert len(want) == 113
    assert fp.smem_bytes_read == 4096  # 18 x 4 KiB of QK B per block
    assert fp.proxy == "async"
    # Layout E: A read by both lane halves (lanes 0-127), 8 columns; D = 128 lanes x N/2 = 64 columns at 400
    assert fp.tmem_reads == (TmemRect(0, 128, 256 + 8 * k, 8), TmemRect(0, 128, 400, 64))
    assert fp.tmem_writes == (TmemRect(0, 128, 400, 64),)


def test_flashmla_qk_first_mma_does_not_read_d():
    fp = Mma(400, 384, SmemDescriptor(start=139264, lbo=16, sbo=512, layout_type="SW64"), QK, False,
             ws=True).footprint()
    assert fp.tmem_reads == (TmemRect(0, 128, 384, 8),)
    # RoPE dual view (SW64, K-major, Sw<2,4,3>): 64-byte rows; 16-byte chunk bits 4-5 XOR address bits 7-8
    # = (row % 8) >> 1, so K bytes 0-31 (chunks 0, 1) land in 32-byte block (row % 8) >> 2
    want = (SmemRange(139264 + 512 * (n // 8) + 64 * (n % 8) + 32 * ((n % 8) >> 2),
                      139264 + 512 * (n // 8) + 64 * (n % 8) + 32 * ((n % 8) >> 2) + 32)
                  for n in range(128))
    assert list(fp.smem_reads) == coalesce_ranges(list(want))


def coalesce_ranges(ranges):
    return list(coalesce(np.concatenate([np.arange(r.start, r.stop) for r in ranges])))


def test_flashmla_pv_mma_footprint():
    # PV k=0 n=0 (kernel.cuh L578-580): A = S (interleave, 64 rows x 16 K: 2 core-matrix columns of 1024 B),
    # B = V MN-major
    s = SmemDescriptor(start=212992, lbo=1024, sbo=128, layout_type="INTERLEAVE")
    v = SmemDescriptor(start=0, lbo=8192, sbo=1024, layout_type="SW128")
    fp = Mma(0, s, v, PV, False, ws=True).footprint()
    # PV reads 2 KiB of S and 8 KiB of V per instruction; V = 16 token rows of 128 B in each of 4 dim tiles
    assert fp.smem_reads == (SmemRange(0, 2048), SmemRange(8192, 10240), SmemRange(16384, 18432),
                             SmemRange(24576, 26624), SmemRange(212992, 215040))
    assert fp.tmem_reads == () and fp.tmem_writes == (TmemRect(0, 128, 0, 128),)


def test_layout_f_footprint_is_four_lane_blocks():
    f64 = InstrDescriptor(kind="f16", m=64, n=32, a_format="bf16", b_format="bf16")
    fp = Mma(16 << 16 | 40, 16 << 16 | 8, sw128(0), f64, True).footprint()
    blocks = tuple(TmemRect(16 + 32 * q, 16, 40, 32) for q in range(4))
    assert fp.tmem_writes == blocks
    assert fp.tmem_reads == tuple(TmemRect(16 + 32 * q, 16, 8, 8) for q in range(4)) + blocks


def test_q_copy_footprint():
    # Q copy t=0 s=0 (kernel.cuh L477-486): 128 rows x 32 B of the SW128 Q view -> lanes 0-127, columns 256-263
    fp = Cp(256, sw128(0)).footprint()
    assert fp.tmem_writes == (TmemRect(0, 128, 256, 8),)
    assert list(fp.smem_reads) == coalesce_ranges(sw128_k_slice_rows(0, 0, 128))
    assert fp.smem_bytes_read == 4096 and fp.proxy == "async"
    fp1 = Cp(256 + 40, sw128(16384 + 32)).footprint()  # t=1 s=1: columns 296-303
    assert fp1.tmem_writes == (TmemRect(0, 128, 296, 8),)
    assert list(fp1.smem_reads) == coalesce_ranges(sw128_k_slice_rows(16384, 1, 128))


@pytest.mark.parametrize(("shape", "mc"), [("128x256b", None), ("128x128b", None), ("64x128b", "warpx2::02_13"),
                                           ("64x128b", "warpx2::01_23"), ("32x128b", "warpx4"), ("4x256b", None)])
def test_cp_footprint_matches_execution(shape, mc):
    from simtc.smem import SharedMemory
    from simtc.tmem import TensorMemory
    from simtc.tmem.cp import tcgen05_cp

    sm, tm = SharedMemory(), TensorMemory()
    tm.alloc(512)
    sm.write(0, (np.arange(16384, dtype=np.uint32) + 1).astype("<u4"))
    desc = SmemDescriptor(start=1024, lbo=16, sbo=256, layout_type="INTERLEAVE")
    tcgen05_cp(tm, 100, sm, desc, shape, mc)
    written = np.zeros_like(tm.cells, dtype=bool)
    for r in Cp(100, desc, shape, mc).footprint().tmem_writes:
        written[r.lane0:r.lane0 + r.lanes, r.col0:r.col0 + r.cols] = True
    assert np.array_equal(written, tm.cells != 0)


def test_ld_of_warp_2_at_column_400():
    rec = Ld(400, "32x32b", 32, "p")
    fp = rec.footprint(warp=2)
    assert fp.tmem_reads == (TmemRect(64, 32, 400, 32),) and fp.regs_written == ("p",)
    assert rec.footprint(warp=6) == fp  # warp 6 is in quadrant 2 too
    assert rec.footprint(warp=1).tmem_reads == (TmemRect(32, 32, 400, 32),)
    st = St(0, "32x32b", 64, "o").footprint(warp=3)
    assert st.tmem_writes == (TmemRect(96, 32, 0, 64),) and st.regs_read == ("o",)


def test_ld_st_footprints_cover_exactly_the_cells_of_every_form():
    for op in all_ops():
        gap = op.shape.name == "16x32bx2" and 4 * op.half_span <= 512  # second half 2 half-spans further
        for imm in ([None, 3 * op.half_span] if gap else [None]):
            rec = Ld(0 if op.lanes == 32 else 16 << 16, op.shape.name, op.num, "r", pack=op.pack, imm=imm)
            rects = rec.footprint(warp=1).tmem_reads
            got = {(lane, c) for r in rects for lane in range(r.lane0, r.lane0 + r.lanes)
                   for c in range(r.col0, r.col0 + r.cols)}
            lane, col = rec._op().cells()
            base = 32 + (16 if op.lanes == 16 else 0)
            want = set(zip((base + lane).ravel().tolist(), col.ravel().tolist(), strict=True))
            assert got == want, rec.ptx()


def test_tma_and_shared_footprints():
    g = CpAsyncBulkTensor(147456 + 2048, 2048, "raw_ready[0]", mode="gather4").footprint()
    assert g.smem_writes == (SmemRange(149504, 151552),) and g.barriers == ("raw_ready[0]",) and g.proxy == "async"
    # the P exchange (kernel.cuh L184): 32 lanes x 16 B contiguous entries of slot 2 (slot = 256 entries x 16 B = 4 KiB)
    ex = StShared(212992 + 2 * 4096, 16, "p_peer").footprint()
    assert ex.smem_writes == (SmemRange(221184, 221696),) and ex.proxy == "generic"
    strided = StShared(0, 4, "x", threads=4, stride=520 * 4).footprint()
    assert strided.smem_writes == tuple(SmemRange(2080 * i, 2080 * i + 4) for i in range(4))
    pre = StShared(0, 16, "kv", threads=3, offsets=(0, 16, 8192)).footprint()
    assert pre.smem_writes == (SmemRange(0, 32), SmemRange(8192, 8208))


def test_wgmma_footprint():
    a = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
    b = SmemDescriptor(start=8192, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
    fp = WgmmaMmaAsync(64, 64, 16, "bf16", a, b, True, "d").footprint()
    assert list(fp.smem_reads) == coalesce_ranges(sw128_k_slice_rows(0, 0, 64) + sw128_k_slice_rows(8192, 0, 64))
    assert fp.regs_read == ("d",) and fp.regs_written == ("d",)
    fp2 = WgmmaMmaAsync(64, 64, 16, "bf16", "a", b, False, "d").footprint()
    assert fp2.regs_read == ("a",) and fp2.smem_bytes_read == 64 * 32


def test_footprints_are_cached_values():
    a = Mma(400, 256, sw128(NOPE1), QK, True, ws=True)
    b = Mma(400, 256, sw128(NOPE1), QK, True, ws=True, label="other label")
    assert a.footprint() is b.footprint()
