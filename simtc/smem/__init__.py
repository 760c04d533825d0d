"""The shared-memory model: swizzles, canonical operand layouts, descriptors, images, banks.

Everything a tensor-core operand in shared memory needs: which byte holds which element
(:class:`CanonicalLayout`), the 64-bit matrix descriptor (:class:`SmemDescriptor`), how the
hardware reads through a descriptor (:func:`descriptor_addresses`), byte images
(:func:`write_tile` / :func:`read_tile`), a per-CTA :class:`SharedMemory`, and the
bank-conflict analyzer (:func:`bank_conflicts`).

The memory model (:mod:`simtc.smem.memory`: ``SharedMemory``, ``Buffer``, ``SMEM_CAPACITY``) loads
lazily (PEP 562), so the pure value modules (:mod:`simtc.smem.desc`, :mod:`~simtc.smem.swizzle`,
:mod:`~simtc.smem.layout`, :mod:`~simtc.smem.read`, ...) can be used without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# the pure value modules load eagerly (binding ``swizzle`` the function over the submodule of that name)
from simtc.smem.banks import BankReport, bank_conflicts, bank_of
from simtc.smem.desc import SmemDescriptor
from simtc.smem.image import read_tile, read_tile_bits, write_tile, write_tile_bits
from simtc.smem.layout import INSTR_K_BYTES, LAYOUT_DTYPES, CanonicalLayout, Major, canonical_combinations, major
from simtc.smem.read import descriptor_addresses
from simtc.smem.swizzle import SwizzleMode, swizzle, swizzle_mode, unswizzle

if TYPE_CHECKING:
    from simtc.smem.memory import SMEM_CAPACITY, Buffer, SharedMemory

_LAZY = {"SMEM_CAPACITY": "simtc.smem.memory", "Buffer": "simtc.smem.memory", "SharedMemory": "simtc.smem.memory"}

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


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'simtc.smem' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
