"""The hardware's reading of a descriptor reproduces the tile builder, and FlashMLA's CuTe layouts."""

import numpy as np
import pytest

from simtc.errors import DescriptorError
from simtc.smem import (
    CanonicalLayout,
    SmemDescriptor,
    canonical_combinations,
    descriptor_addresses,
    swizzle,
)

COMBOS = [(d, m.value, s) for d, m, s in canonical_combinations()]


@pytest.mark.parametrize("d,m,s", COMBOS, ids=lambda x: getattr(x, "name", x))
def test_reading_reproduces_builder_for_every_mode_and_major(d, m, s):
    am, ak = CanonicalLayout(d, m, s, 1024, 1024).atom_shape
    checked = 0
    for nm, nk in [(1, 1), (2, 1), (1, 2), (4, 2), (3, 3), (16, 1), (1, 4), (2, 8)]:
        t = CanonicalLayout(d, m, s, am * nm, ak * nk)
        if t.cols * t.elem_bytes % 32:
            continue
        off = t.offsets()
        ks = t.k_slice_elems
        for base in (0, 1024 * 37):
            for sl in range(t.cols // ks):
                desc = t.descriptor(start=base, k_slice=sl)
                got = descriptor_addresses(desc, major=m, dtype=d, rows=t.rows)
                assert np.array_equal(got - base, off[:, sl * ks:(sl + 1) * ks]), (nm, nk, base, sl)
                checked += 1
    assert checked > 0


def test_flashmla_k_nope_dual_view():
    # the 128-row DualGemm SW128 view of K NoPE (FlashMLA config.h lines 120-125 at 9241ae3), worked out:
    # B[n][k'] pre-swizzle offset = 1024*(n//8) + 128*(n%8) + 2*(k'%64) + 16384*(k'//64)
    nope = 73728  # dequant[1].nope
    n = np.arange(128)[:, None]
    for k in range(16):
        desc = SmemDescriptor(start=nope + 16384 * (k // 4) + 32 * (k % 4), lbo=16, sbo=1024, layout_type="SW128")
        kp = 16 * k + np.arange(16)[None, :]
        want = swizzle(nope + 1024 * (n // 8) + 128 * (n % 8) + 2 * (kp % 64) + 16384 * (kp // 64), "SW128")
        assert np.array_equal(descriptor_addresses(desc, major="K", dtype="bf16", rows=128), want)


def test_flashmla_v_operand_mn_major():
    # V[dim][token] over the K NoPE bytes: Sw<3,4,3> o (64,(64,8)):(64,(1,4096)) elements, viewed (dim, token)
    for kstep in range(4):
        for nblk in range(2):
            start = 2048 * kstep + 32768 * nblk
            desc = SmemDescriptor(start=start, lbo=8192, sbo=1024, layout_type="SW128")
            dim = 256 * nblk + np.arange(256)[:, None]
            tok = 16 * kstep + np.arange(16)[None, :]
            want = swizzle(2 * (tok * 64 + dim % 64 + 4096 * (dim // 64)), "SW128")
            got = descriptor_addresses(desc, major="MN", dtype="bf16", rows=256)
            assert np.array_equal(got, want)


def test_flashmla_s_operand_interleave():
    # S: Sw<0,4,3> o ((8,8),(8,8)):((8,64),(1,512)) elements; PV A = S + 2048*k, LBO 1024, SBO 128
    s_base = 212992
    for k in range(4):
        desc = SmemDescriptor(start=s_base + 2048 * k, lbo=1024, sbo=128, layout_type="INTERLEAVE")
        h = np.arange(64)[:, None]
        kk = 16 * k + np.arange(16)[None, :]
        want = s_base + 2 * ((h % 8) * 8 + (h // 8) * 64 + (kk % 8) + (kk // 8) * 512)
        assert np.array_equal(descriptor_addresses(desc, major="K", dtype="bf16", rows=64), want)


def test_base_offset_is_read_as_measured():
    # H200: the row phase is the absolute address's minus the base offset. A tile at 1024 + 256 with
    # base offset 2 reads as if its swizzle pattern restarted at the tile start.
    t = CanonicalLayout("bf16", "K", "SW128", 64, 64)
    d = SmemDescriptor(start=1024 + 256, lbo=16, sbo=1024, layout_type="SW128", base_offset=2)
    got = descriptor_addresses(d, major="K", dtype="bf16", rows=64)
    assert np.array_equal(got, 1024 + 256 + t.offsets()[:, :16])
    d0 = SmemDescriptor(start=1024 + 256, lbo=16, sbo=1024, layout_type="SW128")  # base 0: absolute pattern
    assert np.array_equal(descriptor_addresses(d0, major="K", dtype="bf16", rows=64),
                          swizzle(1024 + 256 + t.linear_offset(*np.meshgrid(np.arange(64), np.arange(16),
                                                                             indexing="ij")), "SW128"))


def test_reading_refuses_what_it_cannot_know():
    d = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW32")
    with pytest.raises(DescriptorError, match="at most 32 B of K"):
        descriptor_addresses(d, major="K", dtype="bf16", rows=8, k=32)
    with pytest.raises(DescriptorError, match="exactly one"):
        descriptor_addresses(d, major="K", rows=8)
    with pytest.raises(DescriptorError, match="MN-major only"):
        descriptor_addresses(SmemDescriptor(start=0, lbo=16, sbo=512, layout_type="SW128_32B"), major="K",
                             dtype="tf32", rows=8)


def test_wrong_descriptor_reads_predictably():
    # LBO and SBO swapped on an MN-major SW128 tile: the model says exactly what is read
    t = CanonicalLayout("bf16", "MN", "SW128", 128, 16)
    good = t.descriptor()
    bad = SmemDescriptor(start=0, lbo=good.sbo, sbo=good.lbo, layout_type="SW128")
    a_good = descriptor_addresses(good, major="MN", dtype="bf16", rows=128)
    a_bad = descriptor_addresses(bad, major="MN", dtype="bf16", rows=128)
    assert not np.array_equal(a_good, a_bad)
    assert np.array_equal(a_bad[:64, :8], a_good[:64, :8])  # first atom is read the same either way
