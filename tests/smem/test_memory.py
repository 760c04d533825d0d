"""SharedMemory: capacity, allocation, aliasing, tiles through buffers, errors."""

import numpy as np
import pytest

from simtc.errors import AllocationError, SimtcError, SmemError
from simtc.smem import CanonicalLayout, SharedMemory, descriptor_addresses


def test_capacity_is_227_kib_per_block():
    assert SharedMemory().size == 232448 == SharedMemory(arch="sm90").size
    with pytest.raises(AllocationError, match="227 KiB per block"):
        SharedMemory(size=232448 + 16)


def test_flashmla_v32_plan_fits_and_aliases():
    # FlashMLA config.h SharedMemoryPlan (lines 159-194 at 9241ae3): V32 plan offsets; Q aliases dequant[0],
    # o_accum aliases dequant[1] and raw_nope
    sm = SharedMemory()
    sm.alloc("q", 65536, align=1024, at=0)
    sm.alloc("dequant0", 73728, align=1024, at=0)
    sm.alloc("dequant1", 73728, align=1024, at=73728)
    sm.alloc("o_accum", 133088, at=73728)
    sm.alloc("raw_nope0", 32768, at=147456)
    sm.alloc("raw_nope1", 32768, at=180224)
    sm.alloc("p_exchange", 16384, at=212992)
    sm.alloc("tail", 232192 - 229376, at=229376)
    assert 232448 - sm.free_bytes == 232192
    assert {b.name for b in sm.aliases("o_accum")} == {"dequant1", "raw_nope0", "raw_nope1"}
    assert [b.name for b in sm.aliases("q")] == ["dequant0"]
    with pytest.raises(AllocationError, match="beyond"):
        sm.alloc("too_much", 1024)


def test_bump_allocation_aligns():
    sm = SharedMemory()
    a = sm.alloc("a", 100)
    b = sm.alloc("b", 64, align=1024)
    c = sm.alloc("c", 8)
    assert (a.offset, b.offset, c.offset) == (0, 1024, 1088)
    with pytest.raises(AllocationError, match="exists already"):
        sm.alloc("a", 16)
    with pytest.raises(AllocationError, match="power of two"):
        sm.alloc("d", 16, align=48)
    with pytest.raises(AllocationError, match="not 1024-byte aligned"):
        sm.alloc("e", 16, align=1024, at=16)


def test_tiles_through_buffers_and_descriptors():
    sm = SharedMemory()
    t = CanonicalLayout("bf16", "K", "SW128", 64, 64)
    buf = sm.alloc("k", t.nbytes, align=1024, at=8192)
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 128
    sm.write_tile(t, x, "k")
    assert np.array_equal(sm.read_tile(t, buf), x)
    d = sm.descriptor(t, "k", k_slice=1)
    assert d.start == 8192 + 32
    # gather through the descriptor reading gives back the matrix slice
    addr = descriptor_addresses(d, major="K", dtype="bf16", rows=64)
    raw = sm.gather(addr, 2)
    vals = (raw[..., 0].astype(np.uint32) | (raw[..., 1].astype(np.uint32) << 8)) << 16
    assert np.array_equal(vals.view(np.float32), x[:, 16:32])


def test_views_and_raw_access():
    sm = SharedMemory()
    sm.alloc("f", 64)
    v = sm.view("f", np.float32, (4, 4))
    v[:] = 1.5
    assert sm.read(0, 4).view(np.float32)[0] == 1.5
    sm.write(60, b"\x01\x02\x03\x04")
    assert sm.read(60, 4).tolist() == [1, 2, 3, 4]
    with pytest.raises(SmemError, match="outside"):
        sm.read(232440, 16)
    with pytest.raises(SmemError, match="no buffer named"):
        sm.view("nope")
    with pytest.raises(SmemError, match="outside"):
        sm.gather(np.array([232447]), 2)
    with pytest.raises(SimtcError, match="unknown architecture"):
        SharedMemory(arch="sm80")
