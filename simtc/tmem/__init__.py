"""Tensor Memory: addresses, allocation, lane quadrants, data-path layouts, ``tcgen05.ld/st/cp``.

* :mod:`simtc.tmem.address` -- 128 lanes x 512 columns, ``taddr = lane << 16 | column``, quadrants.
* :mod:`simtc.tmem.memory` -- :class:`TensorMemory` with the ``tcgen05.alloc`` rules and checked access.
* :mod:`simtc.tmem.layouts` -- data-path layouts A-G (where an MMA's D lands) and A-in-TMEM placement.
* :mod:`simtc.tmem.ldst` -- ``tcgen05.ld/st`` shapes and the thread/register <-> cell map.
* :mod:`simtc.tmem.cp` -- ``tcgen05.cp`` from shared memory through a descriptor.
* :mod:`simtc.tmem.regions` -- named regions (FlashMLA's head64 map).

Importing this package loads numpy and attrs only (no rich, no renderer).

>>> from simtc.tmem import datapath_layout
>>> datapath_layout(64, 128, ws=True).map(70 - 64, 70)   # D[6][70] of FlashMLA's P tile
(70, 6)
"""

from simtc.tmem.address import COLUMNS, LANES, TmemAddress, pack_taddr, quadrant_lanes, unpack_taddr
from simtc.tmem.cp import CP_SHAPES, CpShape, cp_shape, tcgen05_cp
from simtc.tmem.layouts import DataPathLayout, datapath_layout
from simtc.tmem.ldst import NUMS, SHAPES, LdStOp, LdStShape, all_ops, ld_st_shape
from simtc.tmem.memory import ALLOC_SIZES, Allocation, TensorMemory
from simtc.tmem.regions import FLASHMLA_HEAD64_V32, TmemRegion

__all__ = [
    "ALLOC_SIZES",
    "COLUMNS",
    "CP_SHAPES",
    "FLASHMLA_HEAD64_V32",
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
