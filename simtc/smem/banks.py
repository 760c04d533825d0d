"""Shared-memory bank-conflict analysis for one warp's vector access.

Model [doc + inferred]: shared memory has 32 banks of 4 bytes; byte address ``a`` lives in
bank ``(a // 4) % 32`` (CUDA C++ Programming Guide, "Shared Memory" for compute capability
5.x and later, unchanged through 9.0/10.0). A warp's access of ``w`` bytes per thread is served
in phases of ``128 / w`` threads (32 threads for 4 B, 16 for 8 B, 8 for 16 B), because one
wavefront moves at most 128 bytes. Within a phase, threads that read the same 4-byte word
share it (broadcast); every extra *distinct* word in the same bank costs one more wavefront.
The ideal count is ``32 * w / 128`` wavefronts (1, 2, 4). The phase grouping for 8- and
16-byte accesses is the standard model profilers report ("wavefronts"), taken here as an
assumption [inferred], not a documented rule.

>>> import numpy as np
>>> bank_conflicts(np.arange(32) * 4).wavefronts      # consecutive words: conflict-free
1
>>> bank_conflicts(np.arange(32) * 128).wavefronts    # same bank, 32 distinct words
32
>>> bank_conflicts(np.arange(32) * 16, width=16).wavefronts   # 16-B vectors, contiguous
4
"""

from __future__ import annotations

import numpy as np
from attrs import frozen

from simtc.errors import BankError

__all__ = ["NUM_BANKS", "BankReport", "bank_conflicts", "bank_of"]

NUM_BANKS = 32
BANK_BYTES = 4


def bank_of(address):
    """Bank of a byte address (vectorized).

    >>> int(bank_of(132))
    1
    """
    a = np.asarray(address)
    if a.dtype.kind not in "iu" or a.dtype == np.bool_:
        raise BankError(f"byte addresses must be integers, got {a.dtype} data", rule="byte addresses are integers")
    if a.size and int(a.min()) < 0:
        raise BankError(f"byte addresses are non-negative, got {int(a.min())}",
                        rule="shared-memory addresses are non-negative")
    return (a.astype(np.int64) // BANK_BYTES) % NUM_BANKS


@frozen
class BankReport:
    """Result of :func:`bank_conflicts`."""

    width: int
    """Bytes per thread (4, 8 or 16)."""
    addresses: tuple[int | None, ...]
    """Per-thread start address (None = inactive thread)."""
    phase_threads: int
    """Threads served per phase (128 / width)."""
    phase_wavefronts: tuple[int, ...]
    """Wavefronts each phase needs (0 for a phase with no active thread)."""
    bank_words: tuple[tuple[tuple[int, ...], ...], ...]
    """Per phase, per bank: the distinct 4-byte word addresses touched."""

    @property
    def wavefronts(self) -> int:
        """Total wavefronts the access takes."""
        return int(sum(self.phase_wavefronts))

    @property
    def ideal(self) -> int:
        """Wavefronts with no conflict (one per active phase)."""
        return int(sum(1 for w in self.phase_wavefronts if w))

    @property
    def conflict_degree(self) -> float:
        """wavefronts / ideal (1.0 = conflict-free)."""
        return self.wavefronts / self.ideal if self.ideal else 0.0

    def thread_banks(self, thread: int) -> list[int]:
        """Banks touched by one thread."""
        a = self.addresses[thread]
        if a is None:
            return []
        return [int(b) for b in bank_of(a + BANK_BYTES * np.arange(self.width // BANK_BYTES))]


def bank_conflicts(addresses, width: int = 4) -> BankReport:
    """Analyse one warp-wide access: ``addresses`` holds each thread's byte address.

    ``addresses`` has 32 entries (or fewer: missing threads are inactive); an entry of -1
    (or a masked value) marks an inactive thread. Each address must be aligned to ``width``.
    """
    if width not in (4, 8, 16):
        raise BankError(f"vector width must be 4, 8 or 16 bytes per thread, got {width}",
                        rule="ld/st.shared vector widths (32/64/128-bit)")
    a = np.ma.asarray(addresses)
    if a.ndim != 1 or a.size > 32:
        raise BankError(f"one warp has at most 32 threads; got shape {a.shape}", rule="warp size 32")
    if a.dtype.kind not in "iu":
        raise BankError(f"addresses must be integers, got dtype {a.dtype}", rule="byte addresses are integers")
    filled = a.filled(-1)
    if np.any(filled < -1):
        bad = int(np.flatnonzero(filled < -1)[0])
        raise BankError(f"thread {bad}: address {int(filled[bad])} is negative (only -1 marks an inactive thread)",
                        rule="shared-memory addresses are non-negative; -1 = inactive thread")
    mask = np.ma.getmaskarray(a) | (filled < 0)
    addr = np.full(32, -1, dtype=np.int64)
    addr[: a.size] = np.where(mask, -1, a.filled(-1))
    active = addr >= 0
    if np.any(addr[active] % width):
        bad = int(np.flatnonzero(active & (addr % width != 0))[0])
        raise BankError(f"thread {bad}: address {int(addr[bad])} is not aligned to {width} B",
                        rule="vector accesses are naturally aligned", ref="PTX ISA 9.0 §5.4.5 (vector data types)")
    per_phase = 128 // width
    words_per_thread = width // BANK_BYTES
    phase_wf, phase_words = [], []
    for p in range(32 // per_phase):
        sl = slice(p * per_phase, (p + 1) * per_phase)
        aa = addr[sl][active[sl]]
        if aa.size == 0:
            phase_wf.append(0)
            phase_words.append(tuple(() for _ in range(NUM_BANKS)))
            continue
        words = np.unique((aa[:, None] // BANK_BYTES + np.arange(words_per_thread)).ravel())
        banks = words % NUM_BANKS
        counts = np.bincount(banks, minlength=NUM_BANKS)
        order = np.argsort(banks, kind="stable")
        groups = np.split(words[order] * BANK_BYTES, np.cumsum(counts)[:-1])
        phase_wf.append(int(counts.max()))
        phase_words.append(tuple(tuple(g.tolist()) for g in groups))
    return BankReport(width=width, addresses=tuple(int(x) if x >= 0 else None for x in addr),
                      phase_threads=per_phase, phase_wavefronts=tuple(phase_wf), bank_words=tuple(phase_words))
