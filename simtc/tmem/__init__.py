"""Tensor Memory: addresses, allocation, lane quadrants, data-path layouts, ``tcgen05.ld/st/cp``.

* :mod:`simtc.tmem.address` -- 128 lanes x 512 columns, ``taddr = lane << 16 | column``, quadrants.
* :mod:`simtc.tmem.memory` -- :class:`TensorMemory` with the ``tcgen05.alloc`` rules and checked access.
* :mod:`simtc.tmem.layouts` -- data-path layouts A-G (where an MMA's D lands) and A-in-TMEM placement.
* :mod:`simtc.tmem.ldst` -- ``tcgen05.ld/st`` shapes and the thread/register <-> cell map.
* :mod:`simtc.tmem.cp` -- ``tcgen05.cp`` from shared memory through a descriptor.
* :mod:`simtc.tmem.regions` -- named regions (FlashMLA's head64 map).

Importing this package loads numpy and attrs only (no rich, no renderer). The memory model
(:mod:`simtc.tmem.memory`: ``TensorMemory``, ``Allocation``, ``ALLOC_SIZES``) loads lazily (PEP 562),
so the geometry modules (address, layouts, ldst, cp, regions) can be used without it.

>>> from simtc.tmem import datapath_layout
>>> datapath_layout(64, 128, ws=True).map(70 - 64, 70)   # D[6][70] of FlashMLA's P tile
(70, 6)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from simtc.tmem.address import COLUMNS, LANES, TmemAddress, pack_taddr, quadrant_lanes, unpack_taddr
from simtc.tmem.cp import CP_SHAPES, CpShape, cp_shape, tcgen05_cp
from simtc.tmem.layouts import DataPathLayout, datapath_layout
from simtc.tmem.ldst import NUMS, SHAPES, LdStOp, LdStShape, all_ops, ld_st_shape
from simtc.tmem.regions import TmemRegion

if TYPE_CHECKING:
    from simtc.tmem.memory import ALLOC_SIZES, Allocation, TensorMemory

_LAZY = {"ALLOC_SIZES": "simtc.tmem.memory", "Allocation": "simtc.tmem.memory", "TensorMemory": "simtc.tmem.memory"}

__all__ = [
    "ALLOC_SIZES",
    "COLUMNS",
    "CP_SHAPES",
    "LANES",
    "NUMS",
    "SHAPES",
    "Allocation",
    "CpShape",
    "DataPathLayout",
    "LdStOp",
    "LdStShape",
    "TensorMemory",
    "TmemAddress",
    "TmemRegion",
    "all_ops",
    "cp_shape",
    "datapath_layout",
    "ld_st_shape",
    "pack_taddr",
    "quadrant_lanes",
    "tcgen05_cp",
    "unpack_taddr",
]


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'simtc.tmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
