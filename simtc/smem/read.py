"""How the tensor core reads shared memory through a matrix descriptor.

Given only a descriptor's fields (start, LBO, SBO, layout type) and what the instruction
knows (major mode, element size, MN extent, K extent), :func:`descriptor_addresses` returns
the absolute shared-memory byte address of every operand element. It is written from the
canonical-layout formulas of PTX ISA 9.0 §9.7.16.3.3 (= §9.7.15.5.1.2.1.3 for wgmma), *not*
from :class:`simtc.smem.layout.CanonicalLayout`, so that tests can show builder and
descriptor agree. ``tcgen05.mma``, ``wgmma`` and ``tcgen05.cp`` in simtc read operands
through this function, and the hardware cross-check feeds the same descriptors to a GPU.

With ``eb`` = element bytes, ``T = 16 / eb``, ``S`` = swizzle row width, ``W = S / eb``,
``R`` = rows of a swizzle atom (8; 4 for SW128_32B), the offset added to ``start`` is:

======================  ===================================================================
K-major, none           ``(r//8)*SBO + (k//T)*LBO + (r%8)*16 + (k%T)*eb``
K-major, swizzled       ``(r//8)*SBO + (r%8)*S + k*eb``  (K must stay inside one row)
MN-major, none          ``(mn//T)*SBO + (k//8)*LBO + (k%8)*16 + (mn%T)*eb``
MN-major, swizzled      ``(mn//W)*LBO + (k//R)*SBO + (k%R)*S + (mn%W)*eb``
======================  ===================================================================

and the swizzle is applied to ``start + offset`` (absolute address).

>>> from simtc.smem.desc import SmemDescriptor
>>> d = SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128")
>>> [int(a) // 2 for a in descriptor_addresses(d, major="K", dtype="bf16", rows=2, k=16)[1, ::8]]
[72, 64]
"""

from __future__ import annotations

import functools

import numpy as np

from simtc.errors import DescriptorError
from simtc.numerics.formats import dtype_info
from simtc.smem.desc import SmemDescriptor
from simtc.smem.layout import INSTR_K_BYTES, Major, major
from simtc.smem.swizzle import SwizzleMode, swizzle

__all__ = ["BASE_OFFSET_HYPOTHESES", "MEASURED_BASE_OFFSET", "descriptor_addresses", "descriptor_offsets_unswizzled",
           "read_bits", "swizzle_with_base"]

BASE_OFFSET_HYPOTHESES = ("absolute", "relative", "subtract")
"""Candidate readings of a non-zero base offset (with ``Swizzle<B,M,S>``, row phase p, XOR p << M):

* ``absolute``: p from the absolute address ``start + off``; the base offset is ignored;
* ``relative``: p from ``(off >> (M+S)) + base_offset`` (the pattern restarts at ``start``,
  shifted by the base offset);
* ``subtract``: p from ``((start + off) >> (M+S)) - base_offset``.

With base offset 0 and an aligned start all three agree. **Measured on an H200** (``wgmma``,
SW128/SW64/SW32, A off its boundary, both data placements, base offset 0 and the PTX value;
``simtc crosscheck``, 2026-11-29): only ``subtract`` predicts every run bit for bit. So a base
offset equal to ``(start >> 7) mod 8`` makes the hardware read the tile as if its pattern
restarted at ``start``; base offset 0 reads the pattern of the absolute address (what TMA
writes). simtc uses ``subtract`` for sm90 [hw] and assumes it for sm100 [inferred]."""

MEASURED_BASE_OFFSET = "subtract"


def swizzle_with_base(start: int, off: np.ndarray, mode: SwizzleMode, base_offset: int, hypothesis: str):
    """Physical addresses of ``start + off`` under one base-offset hypothesis (see above)."""
    b, m, s = mode.cute
    if b == 0:
        return start + off
    mask = (1 << b) - 1
    x = start + off
    if hypothesis == "absolute":
        phase = (x >> (m + s)) & mask
    elif hypothesis == "relative":
        phase = ((off >> (m + s)) + base_offset) & mask
    elif hypothesis == "subtract":
        phase = ((x >> (m + s)) - base_offset) & mask
    else:
        raise DescriptorError(f"unknown base-offset hypothesis {hypothesis!r}; known: "
                              f"{', '.join(BASE_OFFSET_HYPOTHESES)}", rule="base-offset hypotheses")
    return x ^ (phase << m)


def descriptor_offsets_unswizzled(desc: SmemDescriptor, *, major: str | Major, elem_bytes: int,
                                  rows: int, k: int) -> np.ndarray:
    """Offsets from ``desc.start`` before the swizzle, shape (rows, k); see the module table."""
    mj = _major(major)
    lay = desc.layout_type
    eb = int(elem_bytes)
    if eb not in (1, 2, 4):
        raise DescriptorError(f"element size {eb} B is not 1, 2 or 4", rule="operand element sizes")
    if rows <= 0 or k <= 0:
        raise DescriptorError(f"rows and k must be positive, got {rows}x{k}", rule="instruction extents")
    r = np.arange(rows, dtype=np.int64)[:, None]
    kk = np.arange(k, dtype=np.int64)[None, :]
    t = 16 // eb
    if mj is Major.K:
        if lay is SwizzleMode.INTERLEAVE:
            if rows % 8:
                raise DescriptorError(f"K-major operands have whole 8-row core matrices; rows = {rows}",
                                      rule="core matrix = 8 rows x 16 B", ref="PTX ISA 9.0 §9.7.16.3.3")
            return (r // 8) * desc.sbo + (kk // t) * desc.lbo + (r % 8) * 16 + (kk % t) * eb
        if lay is SwizzleMode.SW128_32B:
            raise DescriptorError("the 128B swizzle with 32-byte atomicity has no K-major form",
                                  rule="128B/32B-atomicity swizzle is MN-major only",
                                  ref="PTX ISA 9.0 §9.7.16.10.6 Table 53")
        if k * eb > lay.width:
            raise DescriptorError(
                f"a K-major {lay.value} descriptor covers at most {lay.width} B of K per row; asked for {k * eb} B",
                rule="K-major swizzled: K stays inside one swizzle row", ref="PTX ISA 9.0 §9.7.16.3.3",
            )
        return (r // 8) * desc.sbo + (r % 8) * lay.width + kk * eb
    if lay is SwizzleMode.INTERLEAVE:
        return (r // t) * desc.sbo + (kk // 8) * desc.lbo + (kk % 8) * 16 + (r % t) * eb
    w = lay.width // eb
    rr = lay.atom_rows
    return (r // w) * desc.lbo + (kk // rr) * desc.sbo + (kk % rr) * lay.width + (r % w) * eb


def descriptor_addresses(desc: SmemDescriptor, *, major: str | Major, dtype: str | None = None,
                         elem_bytes: int | None = None, rows: int, k: int | None = None,
                         base_offset_hypothesis: str | None = None) -> np.ndarray:
    """Absolute byte address of each element (mn, k) the hardware reads through ``desc``.

    Parameters
    ----------
    desc:
        The descriptor (sm100 or sm90; the encodings read the same way).
    major:
        ``"K"`` or ``"MN"`` (the instruction's transpose bit for this operand).
    dtype, elem_bytes:
        Element type name or its size in bytes (one of them).
    rows:
        MN extent the instruction reads (M for A, N for B; source rows for ``tcgen05.cp``).
    k:
        K extent in elements; default one instruction slice (32 bytes of K).
    base_offset_hypothesis:
        For experiments: read a non-zero base offset under one of :data:`BASE_OFFSET_HYPOTHESES`
        (default: the measured one, :data:`MEASURED_BASE_OFFSET`).

    Returns an int64 array of shape (rows, k).

    A non-zero base offset is read as measured on an H200: the swizzle row phase is the absolute
    address's minus the base offset (:data:`BASE_OFFSET_HYPOTHESES`); for sm100 that is an
    assumption [inferred]. The absolute-LBO mode (sm_103a) raises :class:`DescriptorError`.
    """
    if (dtype is None) == (elem_bytes is None):
        raise DescriptorError("give exactly one of dtype or elem_bytes", rule="element size")
    eb = dtype_info(dtype).bytes if dtype is not None else int(elem_bytes)
    if k is None:
        k = INSTR_K_BYTES // eb
    if desc.base_offset and base_offset_hypothesis is None:
        base_offset_hypothesis = MEASURED_BASE_OFFSET
    if desc.lbo_mode:
        raise DescriptorError("absolute-LBO mode (bit 52, sm_103a) is not modelled",
                              rule="modelled descriptors use relative LBO", ref="PTX ISA 9.0 §9.7.16.4.1")
    off = descriptor_offsets_unswizzled(desc, major=major, elem_bytes=eb, rows=rows, k=k)
    if base_offset_hypothesis is not None:
        return swizzle_with_base(desc.start, off, desc.layout_type, desc.base_offset, base_offset_hypothesis)
    return swizzle(desc.start + off, desc.layout_type)


def _major(value) -> Major:
    return major(value)


def clear_caches() -> None:
    """Forget the cached descriptor readings (benchmarks time a cold run with this)."""
    _decoded.cache_clear()
    _addresses.cache_clear()


@functools.lru_cache(maxsize=1024)
def _decoded(word: int, arch: str) -> SmemDescriptor:
    """A 64-bit descriptor word decoded once per (word, arch): descriptors are values."""
    return SmemDescriptor.from_u64(word, arch)


@functools.lru_cache(maxsize=1024)
def _addresses(reading, desc: SmemDescriptor, mj, eb: int, rows: int, k: int, hypothesis: str | None) -> np.ndarray:
    """``reading`` (:func:`descriptor_addresses`) computed once per descriptor and extents, read-only: the reading
    of a descriptor depends on nothing else, and a kernel issues the same few descriptors again and again. The
    function is part of the key, so a replaced reading (a test's spy) is called, never served another's result."""
    addr = reading(desc, major=mj, elem_bytes=eb, rows=rows, k=k, base_offset_hypothesis=hypothesis)
    addr.setflags(write=False)
    return addr


def read_bits(smem, desc: SmemDescriptor | int, *, major: str | Major, elem_bytes: int, rows: int, k: int,
              base_offset_hypothesis: str | None = None) -> np.ndarray:
    """The bit patterns (rows x k, unsigned) read through ``desc`` from ``smem`` (a SharedMemory).

    This is the one reading every consumer uses: ``wgmma`` and ``tcgen05.mma`` operands
    (:mod:`simtc.mma.operands`) and ``tcgen05.cp`` sources (:mod:`simtc.tmem.cp`). An int
    descriptor is decoded for ``smem.arch``. Elements are little-endian.
    """
    if not isinstance(desc, SmemDescriptor):
        desc = _decoded(int(desc), smem.arch)
    eb = int(elem_bytes)
    addr = _addresses(descriptor_addresses, desc, major, eb, int(rows), int(k), base_offset_hypothesis)
    raw = np.ascontiguousarray(smem.gather(addr, eb))
    return raw.view({1: "<u1", 2: "<u2", 4: "<u4"}[eb])[..., 0].astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[eb])
