"""tcgen05.cp: shared memory -> TMEM through a descriptor (PTX ISA 9.0 §9.7.16.9.2; CUTLASS UTCCP traits)."""

import numpy as np
import pytest

from simtc.errors import SimtcError, TmemAccessError, TmemShapeError
from simtc.smem import CanonicalLayout, SharedMemory, SmemDescriptor
from simtc.tmem import CP_SHAPES, TensorMemory, cp_shape


def _tile(sm, swizzle, rows=128, cols=32, at=0):
    """A K-major tile of 32-bit words, word (r, k) = r * 1000 + k, stored as CUTLASS lays it out."""
    lay = CanonicalLayout("fp32", "K", swizzle, rows, cols)
    bits = (np.arange(rows)[:, None] * 1000 + np.arange(cols)[None, :]).astype(np.uint32)
    sm.write_tile_bits(lay, bits, at)
    return lay, bits


@pytest.mark.parametrize("swizzle,cols", [("INTERLEAVE", 8), ("SW32", 8), ("SW64", 16), ("SW128", 32)])
def test_128x256b_puts_row_r_in_lane_r_for_every_swizzle(swizzle, cols):
    sm, tm = SharedMemory(), TensorMemory()
    tm.alloc(128)
    lay, bits = _tile(sm, swizzle, cols=cols, at=4096)
    for s in range(cols // 8):                                   # one 32-byte K slice per copy
        tm.cp(8 * s, sm, lay.descriptor(start=4096, k_slice=s), "128x256b")
    assert (tm.cells[:, :cols] == bits).all()


@pytest.mark.parametrize("swizzle", ["INTERLEAVE", "SW32", "SW128"])
def test_128x128b_reads_16_bytes_per_row(swizzle):
    sm, tm = SharedMemory(), TensorMemory()
    tm.alloc(32)
    lay, bits = _tile(sm, swizzle, cols=8 if swizzle != "SW128" else 32)
    d = lay.descriptor(start=0)
    tm.cp(0, sm, d, "128x128b")
    second = d.advance(lay.lbo if swizzle == "INTERLEAVE" else 16)    # next 16 bytes of K
    tm.cp(4, sm, second.encode(), "128x128b")                        # a raw 64-bit word works too
    assert (tm.cells[:, :8] == bits[:, :8]).all()
    assert (tm.cells[:, 8:] == 0).all()


@pytest.mark.parametrize("name", sorted(CP_SHAPES))
def test_multicast_maps(name):
    cs = CP_SHAPES[name]
    sm, tm = SharedMemory(), TensorMemory()
    tm.alloc(32)
    lay, bits = _tile(sm, "SW128", rows=128, cols=32)
    tm.cp(16, sm, lay.descriptor(start=0), name)
    lanes = cs.lanes()
    got = tm.cells[:, 16:16 + cs.columns]
    written = tm.last_writer[:, 16:16 + cs.columns] >= 0
    for r in range(cs.rows):
        for lane in lanes[r]:
            assert (got[lane] == bits[r, :cs.columns]).all()
    assert written.sum() == lanes.size * cs.columns                 # nothing else written
    assert (tm.last_writer[:, :16] == -1).all() and (tm.last_writer[:, 16 + cs.columns:] == -1).all()


def test_multicast_lane_sets_match_ptx_wording():
    """02_13: warp pairs {0,2},{1,3}; 01_23: {0,1},{2,3}; each warp of a pair gets the same rows."""
    q = lambda lanes: (lanes // 32).tolist()  # noqa: E731
    l0213 = cp_shape("64x128b.warpx2::02_13").lanes()
    assert q(l0213[0]) == [0, 2] and q(l0213[32]) == [1, 3]
    l0123 = cp_shape("64x128b.warpx2::01_23").lanes()
    assert q(l0123[0]) == [0, 1] and q(l0123[63]) == [2, 3]
    assert q(cp_shape("32x128b.warpx4").lanes()[5]) == [0, 1, 2, 3]
    assert cp_shape("4x256b").lanes()[:, 0].tolist() == [0, 32, 64, 96]
    for cs in CP_SHAPES.values():                                   # every map is injective
        assert len(np.unique(cs.lanes())) == cs.lanes().size


def test_cp_reads_through_descriptor_addresses(monkeypatch):
    """One source of truth: cp gets its source addresses from simtc.smem.read.descriptor_addresses."""
    import simtc.smem.read as read_mod

    calls = []
    real = read_mod.descriptor_addresses

    def spy(*a, **k):
        calls.append({key: v for key, v in k.items() if v is not None})
        return real(*a, **k)

    monkeypatch.setattr(read_mod, "descriptor_addresses", spy)
    sm, tm = SharedMemory(), TensorMemory()
    tm.alloc(32)
    tm.cp(0, sm, SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128"))
    assert calls == [{"major": "K", "elem_bytes": 4, "rows": 128, "k": 8}]


@pytest.mark.parametrize("shape,mc", [("64x128b", None), ("32x128b", None), ("128x256b", "warpx4"),
                                      ("64x128b", "warpx4"), ("256x256b", None)])
def test_illegal_shape_or_multicast(shape, mc):
    with pytest.raises(TmemShapeError) as e:
        cp_shape(shape, mc)
    assert isinstance(e.value, SimtcError) and "§9.7.16.9.2" in e.value.ref


def test_cp_outside_allocation_or_tmem():
    sm, tm = SharedMemory(), TensorMemory()
    tm.alloc(32)
    d = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128")
    with pytest.raises(TmemAccessError) as e:
        tm.cp(28, sm, d)                          # columns 28-35
    assert e.value.rule == "TMEM accesses stay inside allocated columns"
    with pytest.raises(TmemAccessError):
        tm.cp(1 << 16, sm, d)                     # 128 rows from lane 1 run past lane 127
    tm.cp(31 << 16, sm, d, "4x256b")              # lanes 31, 63, 95, 127: fits [cutlass only]


def test_cp_records_last_writer():
    sm, tm = SharedMemory(), TensorMemory()
    tm.alloc(32)
    d = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128")
    tm.cp(0, sm, d, label="first")
    tm.cp(8, sm, d)
    assert tm.instructions == ["first", "tcgen05.cp.cta_group::1.128x256b"]
    assert (tm.last_writer[:, :8] == 0).all() and (tm.last_writer[:, 8:16] == 1).all()
