"""TMA / bulk-copy records (PTX ISA 9.0 §9.7.9.25): tensor loads (tile, gather4), stores, bulk copies.

>>> g = CpAsyncBulkTensor(147456, 2048, "raw_ready[0]", mode="gather4", tensor="kv_nope", coords=(0, 10, 11, 12, 13))
>>> g.ptx().split(" ", 1)
['cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes',
 '[0x24000], [kv_nope, {0, 10, 11, 12, 13}], [raw_ready[0]];']
"""

from __future__ import annotations

from typing import ClassVar

from attrs import field, frozen

from simtc.isa.base import Instr, as_int, as_int_tuple, as_opt_int, fail, is_str, name_str, nonneg, register
from simtc.isa.footprint import Footprint, SmemRange

__all__ = ["BulkCommitGroup", "BulkWaitGroupRead", "CpAsyncBulk", "CpAsyncBulkTensor", "CpAsyncBulkTensorStore"]

_REF_T = "PTX ISA 9.0 §9.7.9.25.5.2 (cp.async.bulk.tensor)"
_REF_B = "PTX ISA 9.0 §9.7.9.25.4.1 (cp.async.bulk)"


def _bytes16(inst, attribute, value) -> None:
    if value <= 0 or value % 16:
        fail(f"{inst.op}: {attribute.name} = {value} must be a positive multiple of 16 bytes",
             rule="bulk copies move multiples of 16 bytes", ref=_REF_B)


def _warp_in_group(inst, attribute, value) -> None:
    if value is not None and not 0 <= value <= 3:
        fail(f"{inst.op}: issuing_warp = {value}: the warp's index in its warpgroup, 0-3 (or None: every warp)",
             rule="a store issued by one warp of a warpgroup role names it by warp % 4")


class _OneWarp:
    """Stores a warpgroup role issues from one of its warps (``if (warp_idx == k) { elect; store }``)."""

    issuing_warp: int | None

    def issued_by(self, warp: int) -> bool:
        """Whether warp ``warp`` issues this store (every warp when ``issuing_warp`` is None)."""
        return self.issuing_warp is None or warp % 4 == self.issuing_warp

    def footprint(self, warp: int = 0) -> Footprint:
        if not self.issued_by(warp):
            return Footprint()
        return Footprint(smem_reads=(SmemRange(self.src, self.src + self.nbytes),), proxy="async")


def _align16(inst, attribute, value) -> None:
    if value % 16:
        fail(f"{inst.op}: shared-memory address {value} is not 16-byte aligned",
             rule="bulk-copy shared-memory addresses are 16-byte aligned", ref=_REF_B)


def _align128(inst, attribute, value) -> None:
    if value % 128:
        fail(f"{inst.op}: shared-memory address {value} is not 128-byte aligned",
             rule="tensor-copy shared-memory boxes are 128-byte aligned",
             ref="CUDA C++ Programming Guide, TMA alignment requirements (shared-memory address 128 B); "
                 "PTX ISA 9.0 itself states only 16 B (§5.5.3.1 Bounding Box)")


def _coords_str(tensor: str, coords: tuple[int, ...]) -> tuple[str, str]:
    if not coords:
        return "Nd", f"[{tensor or 'tensorMap'}, {{...}}]"
    return f"{len(coords)}d", f"[{tensor or 'tensorMap'}, {{{', '.join(map(str, coords))}}}]"


@register
@frozen
class CpAsyncBulkTensor(Instr):
    """``cp.async.bulk.tensor.<n>d.shared::cluster.global.<mode>.mbarrier::complete_tx::bytes
    [dst], [tensor, {coords}], [bar];``

    A TMA load, global -> shared, issued by one thread; completes ``complete_tx(nbytes)`` on
    ``bar``. ``mode`` is ``"tile"`` (1-5 coordinates) or ``"gather4"`` (``.2d`` only: one column
    coordinate and four row coordinates, PTX ISA 9.0 §9.7.9.25.5.2 ``.tile::gather4``).
    ``coords=()`` means "not recorded" (the PTX line then shows ``Nd`` / ``{...}``); ``rows`` is
    the number of box rows, 0 when not recorded (gather4: 4).

    Run-time coordinates: ``coord_reg`` names the register array holding a gather4's four int32
    row coordinates (the issuing thread's 16 bytes, e.g. loaded from shared memory with
    ``ld.shared.v4``); ``coords`` is then ``()`` or the column coordinate alone. ``swizzle``
    (``""`` = none, ``"SW32"``, ``"SW64"``, ``"SW128"``) is the tensor map's shared-memory swizzle,
    which TMA applies to the absolute destination address (PTX ISA 9.0 §5.5.6 tensor-map swizzle).
    """

    op: ClassVar[str] = "cp.async.bulk.tensor"
    opcode: ClassVar[str] = "cp.async.bulk.tensor"
    is_async: ClassVar[bool] = True
    elected: ClassVar[bool] = True
    dst: int = field(converter=as_int, validator=[nonneg, _align128])
    nbytes: int = field(converter=as_int, validator=_bytes16)
    bar: str = field(validator=name_str)
    mode: str = field(default="tile")
    tensor: str = field(default="", validator=is_str)
    coords: tuple[int, ...] = field(default=(), converter=as_int_tuple, metadata={"codec": "tuple"})
    rows: int = field(default=0, converter=as_int, validator=nonneg)
    coord_reg: str = field(default="", validator=is_str)
    swizzle: str = field(default="", validator=is_str)

    def __attrs_post_init__(self) -> None:
        if self.swizzle not in ("", "SW32", "SW64", "SW128"):
            fail(f"tensor-map swizzle {self.swizzle!r}: '', 'SW32', 'SW64' or 'SW128'",
                 rule="tensor-map shared-memory swizzle modes", ref=_REF_T)
        if self.coord_reg and (self.mode != "gather4" or len(self.coords) > 1):
            fail("coord_reg (run-time row coordinates) belongs to a gather4 whose coords are () or (column,)",
                 rule=".tile::gather4 row coordinates in registers", ref=_REF_T)
        if self.mode not in ("tile", "gather4"):
            fail(f"load mode {self.mode!r}: modelled modes are 'tile' and 'gather4'",
                 rule="cp.async.bulk.tensor load modes", ref=_REF_T)
        if self.mode == "gather4":
            if self.coords and len(self.coords) != 5 and not self.coord_reg:
                fail(f".tile::gather4 takes 5 coordinates (column, 4 rows), got {len(self.coords)}",
                     rule=".tile::gather4 is .2d with 4 row coordinates", ref=_REF_T)
            if self.rows not in (0, 4):
                fail(f".tile::gather4 moves 4 rows, got rows = {self.rows}", rule=".tile::gather4 gathers 4 rows",
                     ref=_REF_T)
        elif self.coords and not 1 <= len(self.coords) <= 5:
            fail(f"a tensor copy has 1 to 5 coordinates, got {len(self.coords)}", rule=".dim is .1d ... .5d",
                 ref=_REF_T)

    def ptx(self) -> str:
        dim, src = _coords_str(self.tensor, self.coords)
        if self.coord_reg:
            col = self.coords[0] if self.coords else 0
            src = f"[{self.tensor or 'tensorMap'}, {{{col}, {self.coord_reg}}}]"
        if self.mode == "gather4":
            dim = "2d"
        mode = "tile::gather4" if self.mode == "gather4" else "tile"
        return (f"cp.async.bulk.tensor.{dim}.shared::cluster.global.{mode}.mbarrier::complete_tx::bytes "
                f"[{self.dst:#x}], {src}, [{self.bar}];")

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(smem_writes=(SmemRange(self.dst, self.dst + self.nbytes),), barriers=(self.bar,),
                         regs_read=(self.coord_reg,) if self.coord_reg else (), proxy="async")


@register
@frozen
class CpAsyncBulkTensorStore(_OneWarp, Instr):
    """``cp.async.bulk.tensor.<n>d.global.shared::cta.tile.bulk_group [tensor, {coords}], [src];`` (TMA store).

    ``issuing_warp``: in a role of several warps, the one (by ``warp % 4``) whose elected thread issues the store;
    the role's other warps skip it (None: every warp issues it)."""

    op: ClassVar[str] = "cp.async.bulk.tensor.store"
    opcode: ClassVar[str] = "cp.async.bulk.tensor"
    is_async: ClassVar[bool] = True
    elected: ClassVar[bool] = True
    src: int = field(converter=as_int, validator=[nonneg, _align128])
    nbytes: int = field(converter=as_int, validator=_bytes16)
    tensor: str = field(default="", validator=is_str)
    coords: tuple[int, ...] = field(default=(), converter=as_int_tuple, metadata={"codec": "tuple"})
    issuing_warp: int | None = field(default=None, converter=as_opt_int, validator=_warp_in_group)

    def __attrs_post_init__(self) -> None:
        if self.coords and not 1 <= len(self.coords) <= 5:
            fail(f"a tensor copy has 1 to 5 coordinates, got {len(self.coords)}", rule=".dim is .1d ... .5d",
                 ref=_REF_T)

    def ptx(self) -> str:
        dim, dst = _coords_str(self.tensor, self.coords)
        return f"cp.async.bulk.tensor.{dim}.global.shared::cta.tile.bulk_group {dst}, [{self.src:#x}];"


@register
@frozen
class CpAsyncBulk(_OneWarp, Instr):
    """``cp.async.bulk.global.shared::cta.bulk_group [dst], [src], nbytes;`` (shared -> global bulk copy);
    ``issuing_warp`` as for :class:`CpAsyncBulkTensorStore`."""

    op: ClassVar[str] = "cp.async.bulk"
    opcode: ClassVar[str] = "cp.async.bulk"
    is_async: ClassVar[bool] = True
    elected: ClassVar[bool] = True
    src: int = field(converter=as_int, validator=[nonneg, _align16])
    nbytes: int = field(converter=as_int, validator=_bytes16)
    dst: str = field(default="", validator=is_str)
    """The global destination, by name (e.g. ``"o_accum[row 5]"``)."""
    issuing_warp: int | None = field(default=None, converter=as_opt_int, validator=_warp_in_group)

    def ptx(self) -> str:
        return f"cp.async.bulk.global.shared::cta.bulk_group [{self.dst or 'dstMem'}], [{self.src:#x}], {self.nbytes};"


@register
@frozen
class BulkCommitGroup(Instr):
    """``cp.async.bulk.commit_group;``: close the thread's current bulk async-group."""

    op: ClassVar[str] = "cp.async.bulk.commit_group"
    opcode: ClassVar[str] = "cp.async.bulk.commit_group"
    elected: ClassVar[bool] = True

    ptx_line: ClassVar[str] = "cp.async.bulk.commit_group;"


@register
@frozen
class BulkWaitGroupRead(Instr):
    """``cp.async.bulk.wait_group.read n;``: wait until at most ``n`` bulk groups still read their source."""

    op: ClassVar[str] = "cp.async.bulk.wait_group.read"
    opcode: ClassVar[str] = "cp.async.bulk.wait_group.read"
    elected: ClassVar[bool] = True
    n: int = field(default=0, converter=as_int, validator=nonneg)

    def ptx(self) -> str:
        return f"cp.async.bulk.wait_group.read {self.n};"
