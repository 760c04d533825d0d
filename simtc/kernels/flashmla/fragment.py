"""The QK instructions' A operand: what of CuTe's TMEM fragment reaches the hardware, and what is thrown away.

FlashMLA (``deepseek-ai/FlashMLA`` at ``9241ae3``) makes the A operand of its QK MMAs as a CuTe fragment,
``make_fragment_A(partition_shape_A(...))`` (``csrc/sm100/decode/head64/kernel.cuh`` lines 537-538 for the RoPE
part, 547-548 for the NoPE part), of the fragment type its MMA atom declares: CuTe's 16-bit TMEM fragment
``tmem_frg_1sm`` in the ``NonInterleaved`` allocation mode (``csrc/kerutils/include/kerutils/device/sm100/gemm.cuh``
line 59, whose comment says A should really be duplicated, which CuTe refuses for one CTA, and that
``NonInterleaved`` is chosen for a correct address calculation). It then overwrites the fragment's data pointer
with ``tmem_cols::Q_Tail`` (line 540) or ``tmem_cols::Q`` (line 550). ``utcmma_ts``
(``csrc/kerutils/include/kerutils/device/sm100/helpers.cuh`` lines 66-75) issues one instruction per k-block of
the fragment, and the instruction receives one 32-bit TMEM address: the raw pointer of that k-block, the base plus
the fragment layout's offset of k-block k, turned into an address by CuTe's ``tmem_ptr`` arithmetic
(:func:`tmem_address`).

So of the fragment's computation the hardware sees one number, the column step from one k-block to the next; the
base is replaced by the kernel's column assignment, and the layout inside a k-block (which lanes hold which rows)
is never sent: the ``.ws`` instruction's data-path layout decides where it reads A (:mod:`simtc.tmem.layouts`).

Here, simtc's side of that: the addresses the head64 Program's QK instructions issue (:func:`qk_a_addresses`), a
Program whose QK instructions take their A addresses from another fragment layout (:func:`readdress_qk_a`, a
seeded bug for the checks), and which A reads fall outside Q's columns (:func:`a_reads_outside`). Notebook 03
(section 8) computes CuTe's fragment layout itself with pycute and checks it against these.

>>> from simtc.kernels.flashmla.head64 import head64_program
>>> [(lab, lane, col) for lab, lane, col in qk_a_addresses(head64_program("v32", 1))][:3]
[('QK RoPE k=0', 0, 384), ('QK RoPE k=1', 0, 392), ('QK k=0', 0, 256)]
>>> tmem_address(16), split_address(tmem_address(16)), split_address(tmem_address(LANE_STRIDE_16))
(8, (0, 8, 0), (1, 0, 0))
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from simtc.errors import SimtcError
from simtc.isa.program import Program
from simtc.isa.tcgen05 import Mma
from simtc.kernels.flashmla.constants import P_COLUMN, Q_COLUMN, Q_TAIL_COLUMN

__all__ = ["LANE_STRIDE_16", "a_reads_outside", "lane_stride", "qk_a_addresses", "readdress_qk_a", "split_address",
           "tmem_address"]

_CUTLASS = "NVIDIA/cutlass include/cute/pointer.hpp line 311 at 147f567 (FlashMLA's pinned CUTLASS)"


def _shift(bits: int) -> int:
    if bits not in (8, 16, 32):
        raise SimtcError(f"a TMEM fragment of {bits}-bit values: CuTe's tmem_ptr takes 8, 16 or 32 bits",
                         rule="tmem_ptr element bits divide 32", ref=_CUTLASS)
    return {32: 0, 16: 1, 8: 2}[bits]


def lane_stride(bits: int = 16) -> int:
    """CuTe's ``TMEM::DP<T>``: the fragment offset (in elements) of one lane, ``(1 << 16) << log2(32 / bits)``
    (CUTLASS ``include/cute/arch/tmem_allocator_sm100.hpp`` line 53 at ``147f567``); 131,072 for bf16."""
    return (1 << 16) << _shift(bits)


LANE_STRIDE_16 = lane_stride(16)
"""``TMEM::DP<bf16>`` = 131,072."""


def tmem_address(offset: int, bits: int = 16, base: int = 0) -> int:
    """The 32-bit TMEM address CuTe's ``tmem_ptr<T>`` gives for ``base + offset`` (offset in elements of ``bits``):
    the offset rotated right by log2(32 / bits) and added (CUTLASS ``include/cute/pointer.hpp`` line 311 at
    ``147f567``), so 32 / bits elements share a 32-bit column and the sub-word index lands in the top bits."""
    s = _shift(bits)
    off = int(offset) & 0xFFFFFFFF
    rot = ((off >> s) | (off << (32 - s))) & 0xFFFFFFFF if s else off
    return (int(base) + rot) & 0xFFFFFFFF


def split_address(addr: int, bits: int = 16) -> tuple[int, int, int]:
    """(lane, column, sub-word) of a CuTe TMEM address: lane bits 16-22, column bits 0-15, the sub-word index in
    the top log2(32 / bits) bits (PTX ISA 9.0 §9.7.16.1.1 for lane and column; the sub-word bits are CuTe's)."""
    s = _shift(bits)
    return (addr >> 16) & 0x7F, addr & 0xFFFF, (addr >> (32 - s)) if s else 0


def _k_of(label: str) -> int:
    return int(label.rsplit("k=", 1)[1].split()[0])


def _is_qk(r) -> bool:
    return isinstance(r, Mma) and r.label.startswith("QK")


def _block_qk(program: Program, block: int) -> list[Mma]:
    """The QK MMA records of ``block`` (a block starts where the first QK label comes again)."""
    qk = [r for r in program.role("mma").records if _is_qk(r)]
    if not qk:
        raise SimtcError(f"Program {program.name!r} has no QK MMA records", rule="QK MMAs labelled 'QK ...'")
    starts = [i for i, r in enumerate(qk) if r.label == qk[0].label]
    if not 0 <= block < len(starts):
        raise SimtcError(f"block {block} of a Program with {len(starts)} block(s)", rule="block in range")
    return qk[starts[block]:starts[block + 1] if block + 1 < len(starts) else len(qk)]


def qk_a_addresses(program: Program, block: int = 0) -> list[tuple[str, int, int]]:
    """(label, lane, column) of the A address each QK instruction of ``block`` issues, in issue order, read from
    the MMA role of the head64 Program."""
    return [(r.label, *split_address(r.a)[:2]) for r in _block_qk(program, block)]


def readdress_qk_a(program: Program, offset: Callable[[int], int]) -> Program:
    """``program`` with every QK instruction's A address = its fragment's base (``tmem_cols::Q_Tail`` for the RoPE
    instructions, ``tmem_cols::Q`` for the NoPE ones) + ``offset(k)``, a 32-bit address offset of k-block k (what
    :func:`tmem_address` gives for a fragment layout's offset). ``offset = lambda k: tmem_address(16 * k)`` gives
    back the kernel's addresses; another layout's step, a seeded bug."""
    def edit(r):
        if not _is_qk(r):
            return r
        base = Q_TAIL_COLUMN if "RoPE" in r.label else Q_COLUMN
        return attrs.evolve(r, a=(base + int(offset(_k_of(r.label)))) & 0xFFFFFFFF)

    roles = tuple(attrs.evolve(role, records=tuple(edit(r) for r in role.records)) if role.name == "mma" else role
                  for role in program.roles)
    return attrs.evolve(program, roles=roles, name=program.name + "-a-readdressed")


def a_reads_outside(program: Program, columns: tuple[int, int] = (Q_COLUMN, P_COLUMN - 1),
                    block: int = 0) -> list[tuple[str, int, int]]:
    """(label, first column, last column) of each QK instruction of ``block`` whose A read (its record's TMEM
    footprint) leaves ``columns`` (default Q's, 256-399)."""
    warp = program.role("mma").warps[0]
    out = []
    for r in _block_qk(program, block):
        rect = r.footprint(warp).tmem_reads[0]
        lo, hi = rect.col0, rect.col0 + rect.cols - 1
        if lo < columns[0] or hi > columns[1]:
            out.append((r.label, lo, hi))
    return out
