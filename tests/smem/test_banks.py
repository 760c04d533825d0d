"""Bank-conflict analyzer: textbook patterns and what the SW128 swizzle buys."""

import numpy as np
import pytest

from simtc.errors import BankError
from simtc.smem import CanonicalLayout, bank_conflicts


@pytest.mark.parametrize("stride,width,wavefronts", [
    (4, 4, 1),      # consecutive words
    (8, 4, 2),      # 2-way
    (128, 4, 32),   # every thread in bank 0
    (0, 4, 1),      # broadcast
    (8, 8, 2),      # contiguous 64-bit: ideal
    (16, 16, 4),    # contiguous 128-bit: ideal
    (32, 16, 8),    # 128-bit with 32-byte stride: 2-way
    (128, 16, 32),  # 128-bit, all in the same 4 banks: 8-way per phase
])
def test_strided_patterns(stride, width, wavefronts):
    assert bank_conflicts(np.arange(32) * stride, width).wavefronts == wavefronts


def test_swizzle_removes_column_conflicts():
    # 8 threads of a phase read the same 16-byte K chunk of 8 consecutive rows of a 64x64 bf16 tile.
    rows = np.arange(32) % 8 + 8 * (np.arange(32) // 8)
    plain = rows * 128  # unswizzled 128-byte rows: all 8 threads of a phase in banks 0-3
    sw = CanonicalLayout("bf16", "K", "SW128", 64, 64).offset(rows, np.zeros(32, dtype=int))
    assert bank_conflicts(plain, 16).wavefronts == 32
    assert bank_conflicts(sw, 16).wavefronts == 4


def test_inactive_threads_and_report():
    a = np.full(32, -1)
    a[:4] = [0, 4, 128, 132]
    r = bank_conflicts(a, 4)
    assert r.wavefronts == 2 and r.ideal == 1 and r.conflict_degree == 2.0
    assert r.thread_banks(2) == [0] and r.thread_banks(5) == []


def test_errors():
    with pytest.raises(BankError, match="4, 8 or 16"):
        bank_conflicts(np.zeros(32, dtype=int), 12)
    with pytest.raises(BankError, match="not aligned"):
        bank_conflicts(np.arange(32) * 4 + 2, 4)
    with pytest.raises(BankError, match="at most 32"):
        bank_conflicts(np.zeros(33, dtype=int))
    with pytest.raises(BankError, match="integers"):
        bank_conflicts(np.zeros(32))
