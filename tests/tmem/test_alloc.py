"""tcgen05.alloc / dealloc / relinquish_alloc_permit rules (PTX ISA 9.0 §9.7.16.1.2, §9.7.16.7.1)."""

import numpy as np
import pytest

from simtc.errors import SimtcError, TmemAllocError, TmemWouldBlock
from simtc.smem import SharedMemory
from simtc.tmem import TensorMemory, TmemAddress


def test_flashmla_allocation_sequence():
    tm = TensorMemory()
    sm = SharedMemory()
    a = tm.alloc(512, warp=0, smem=sm, dst=231968)        # FlashMLA: tmem_start_addr at 231,968
    assert a == TmemAddress(0, 0)
    assert int(sm.read(231968, 4).view("<u4")[0]) == 0
    tm.relinquish_alloc_permit(warp=0)
    assert (tm.owner == 0).all()
    tm.dealloc(a, 512, warp=0)
    tm.check_all_freed()


def test_512_then_another_would_block():
    tm = TensorMemory()
    tm.alloc(512)
    with pytest.raises(TmemWouldBlock) as e:
        tm.alloc(32, warp=1)
    assert isinstance(e.value, TmemAllocError) and isinstance(e.value, SimtcError)
    assert "would block" in str(e.value)
    assert e.value.rule == "alloc blocks until enough columns are free"
    assert "§9.7.16" in e.value.ref


@pytest.mark.parametrize("n", [0, 16, 48, 100, 384, 1024, 33, 64.0, True])
def test_non_power_of_two_sizes(n):
    with pytest.raises(TmemAllocError) as e:
        TensorMemory().alloc(n)
    assert "power of two" in e.value.rule


def test_alloc_after_relinquish():
    tm = TensorMemory()
    tm.alloc(256)
    tm.relinquish_alloc_permit(warp=3)
    with pytest.raises(TmemAllocError) as e:
        tm.alloc(128)
    assert e.value.rule == "no alloc after relinquish_alloc_permit"


def test_alloc_needs_a_whole_warp():
    with pytest.raises(TmemAllocError) as e:
        TensorMemory().alloc(32, active_mask=0x0000FFFF)
    assert "whole converged warp" in e.value.rule


def test_policy_lowest_aligned_free_block():
    tm = TensorMemory(enforce_nonincreasing=False)
    assert tm.alloc(128).column == 0
    assert tm.alloc(32).column == 128
    assert tm.alloc(64).column == 192           # aligned to 64: 160 would be unaligned
    assert tm.alloc(256).column == 256
    tm.dealloc(0, 128)
    assert tm.alloc(64).column == 0
    assert tm.alloc(32).column == 64
    with pytest.raises(TmemWouldBlock):         # 32 free columns at 96-127... but 160-191 too: still no 64
        tm.alloc(64)
    assert tm.alloc(32).column == 96


def test_sizes_must_not_increase_by_default():
    tm = TensorMemory()
    tm.alloc(64)
    with pytest.raises(TmemAllocError) as e:
        tm.alloc(128)
    assert e.value.rule == "allocation sizes do not increase"


def test_dealloc_must_match_an_allocation():
    tm = TensorMemory()
    a = tm.alloc(128)
    for taddr, n in ((a, 64), (32, 128), (1 << 16, 128)):
        with pytest.raises(TmemAllocError) as e:
            tm.dealloc(taddr, n)
        assert e.value.rule == "dealloc must name a previous allocation"
    tm.dealloc(a, 128, warp=5)                    # any warp may free
    with pytest.raises(TmemAllocError):
        tm.dealloc(a, 128)                        # double free


def test_everything_freed_at_exit():
    tm = TensorMemory()
    tm.alloc(256)
    with pytest.raises(TmemAllocError) as e:
        tm.check_all_freed()
    assert "deallocated before exit" in e.value.rule
    assert "columns 0-255" in str(e.value)


def test_owner_tracking_is_per_cell_and_read_only():
    tm = TensorMemory(enforce_nonincreasing=False)
    tm.alloc(32)
    tm.alloc(64)
    assert tm.owner.shape == (128, 512)
    assert (tm.owner[:, :32] == 0).all() and (tm.owner[:, 64:128] == 1).all() and (tm.owner[:, 32:64] == -1).all()
    with pytest.raises(ValueError):
        tm.owner[0, 0] = 5
    assert np.unique(tm.owner).tolist() == [-1, 0, 1]
