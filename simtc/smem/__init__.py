"""The shared-memory model: swizzles, canonical operand layouts, descriptors, images, banks.

Everything a tensor-core operand in shared memory needs: which byte holds which element
(:class:`CanonicalLayout`), the 64-bit matrix descriptor (:class:`SmemDescriptor`), how the
hardware reads through a descriptor (:func:`descriptor_addresses`), byte images
(:func:`write_tile` / :func:`read_tile`), a per-CTA :class:`SharedMemory`, and the
bank-conflict analyzer (:func:`bank_conflicts`).
"""

from simtc.smem.banks import BankReport, bank_conflicts, bank_of
from simtc.smem.desc import SmemDescriptor
from simtc.smem.image import read_tile, read_tile_bits, write_tile, write_tile_bits
from simtc.smem.layout import INSTR_K_BYTES, LAYOUT_DTYPES, CanonicalLayout, Major, canonical_combinations, major
from simtc.smem.memory import SMEM_CAPACITY, Buffer, SharedMemory
from simtc.smem.read import descriptor_addresses
from simtc.smem.swizzle import SwizzleMode, swizzle, swizzle_mode, unswizzle

__all__ = [
    "INSTR_K_BYTES",
    "LAYOUT_DTYPES",
    "SMEM_CAPACITY",
    "BankReport",
    "Buffer",
    "CanonicalLayout",
    "Major",
    "SharedMemory",
    "SmemDescriptor",
    "SwizzleMode",
    "bank_conflicts",
    "bank_of",
    "canonical_combinations",
    "descriptor_addresses",
    "major",
    "read_tile",
    "read_tile_bits",
    "swizzle",
    "swizzle_mode",
    "unswizzle",
    "write_tile",
    "write_tile_bits",
]
