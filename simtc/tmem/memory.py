"""``TensorMemory``: one CTA's 128 x 512 cells of Tensor Memory, its allocator, and checked access.

Allocation rules (PTX ISA 9.0 §9.7.16.1.2, §9.7.16.7.1; CUTLASS
``cute/arch/tmem_allocator_sm100.hpp``):

* ``tcgen05.alloc`` takes a power-of-two column count from 32 to 512; all 128 lanes of each
  allocated column are allocated. It is issued by one whole, converged warp
  (``.sync.aligned``), and **may block** until enough columns are free: simtc raises
  :class:`~simtc.errors.TmemWouldBlock` (a later engine turns it into a wait).
* Within a CTA the allocation size "should not increase between any two allocations in the
  execution order" (checked unless ``enforce_nonincreasing=False``).
* After ``tcgen05.relinquish_alloc_permit`` the CTA may not allocate again.
* ``tcgen05.dealloc`` must name a previous allocation (address and size); everything must be
  freed before the kernel exits (:meth:`TensorMemory.check_all_freed`).
* Where the allocator places a block is not documented. simtc takes the **lowest free
  column aligned to the block size** [inferred: the SASS of ``alloc`` is
  ``UTCATOMSWS.FIND_AND_SET.ALIGN``; FlashMLA asserts its 512-column block starts at 0].

Every access is checked against the allocations; ``tcgen05.ld/st`` also against the
lane-quadrant rule. Every read goes through :meth:`TensorMemory.read_cells` and every write
through :meth:`TensorMemory.write_cells`, which tell an observer (:attr:`TensorMemory.on_access`)
when one is set. Each cell remembers the instruction that last wrote it
(:attr:`TensorMemory.last_writer` indexes :attr:`TensorMemory.writers`, the instruction records
themselves; :attr:`TensorMemory.instructions` gives their labels), for rendering and for hazard
checks.

>>> tm = TensorMemory()
>>> tm.alloc(256, warp=0)
TmemAddress(lane=0, column=0)
>>> tm.alloc(128, warp=0)
TmemAddress(lane=0, column=256)
>>> tm.st(0, np.arange(32, dtype=np.uint32)[:, None], "32x32b", warp=0)
>>> int(tm.ld(0, "32x32b", warp=0)[7, 0])
7
>>> tm.dealloc(0, 256); tm.dealloc(256, 128); tm.check_all_freed()
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from attrs import define, field, frozen

from simtc.errors import (
    LaneQuadrantError,
    TmemAccessError,
    TmemAllocError,
    TmemError,
    TmemShapeError,
    TmemWouldBlock,
)
from simtc.tmem.address import COLUMNS, LANES, QUADRANT_LANES, TmemAddress, as_address, check_range, quadrant_lanes
from simtc.tmem.ldst import LdStOp

__all__ = ["ALLOC_SIZES", "CTA_WARPS", "FULL_WARP", "ST_DTYPES", "Allocation", "TensorMemory", "writer_label"]

ALLOC_SIZES = (32, 64, 128, 256, 512)
"""Legal ``tcgen05.alloc`` column counts (PTX ISA 9.0 §9.7.16.1.2)."""
FULL_WARP = 0xFFFFFFFF
"""Active mask of a whole, converged warp."""
CTA_WARPS = 32
"""Warps a CTA can have: at most 1024 threads per block (CUDA C++ Programming Guide, "Compute
Capabilities", maximum threads per block), so CTA warp indices are 0-31."""
ST_DTYPES = ("u32", "s32", "f32")
"""What ``tcgen05.st`` values may be, given as ``dtype=``: unsigned 32-bit bit patterns (also ``"b32"``,
``"uint32"``), signed 32-bit integers (stored two's complement; also ``"i32"``, ``"int32"``), or fp32
values (their IEEE bits are stored; also ``"fp32"``, ``"float32"``)."""
_ST_ALIASES = {"u32": "u32", "b32": "u32", "uint32": "u32", "s32": "s32", "i32": "s32", "int32": "s32",
               "f32": "f32", "fp32": "f32", "float32": "f32"}
_REF_ST = "PTX ISA 9.0 §9.7.16.8.3 (tcgen05.st stores .b32 registers)"

_REF_ALLOC = "PTX ISA 9.0 §9.7.16.1.2, §9.7.16.7.1"
_REF_ISSUE = "PTX ISA 9.0 §9.7.16.6 Table 46"
_REF_QUAD = "PTX ISA 9.0 §9.7.16.8.1"


@frozen
class Allocation:
    """A live (or past) ``tcgen05.alloc`` block: ``ncols`` columns from ``column``, all lanes."""

    id: int
    column: int
    ncols: int
    warp: int

    @property
    def address(self) -> TmemAddress:
        return TmemAddress(0, self.column)

    @property
    def end(self) -> int:
        return self.column + self.ncols

    def __str__(self) -> str:
        return f"allocation #{self.id}: columns {self.column}-{self.end - 1} ({self.ncols}), by warp {self.warp}"


def _check_warp_index(op: str, warp, error: type[TmemError]) -> None:
    """Raise ``error`` unless ``warp`` is a CTA warp index 0-31."""
    if not isinstance(warp, (int, np.integer)) or isinstance(warp, bool) or not 0 <= warp < CTA_WARPS:
        raise error(f"{op}: warp must be a CTA warp index 0-{CTA_WARPS - 1} (a CTA has at most {CTA_WARPS} warps, "
                    f"1024 threads), got {warp!r}", rule=f"CTA warp index 0-{CTA_WARPS - 1}",
                    ref="CUDA C++ Programming Guide, maximum threads per block (1024)")


def _check_warp_issue(op: str, warp, active_mask) -> None:
    _check_warp_index(op, warp, TmemAllocError)
    if active_mask != FULL_WARP:
        raise TmemAllocError(
            f"{op} is .sync.aligned: all 32 threads of the warp must execute it together (active mask "
            f"{active_mask:#010x})", rule="issued by one whole converged warp", ref=_REF_ISSUE,
        )


@define(eq=False)
class TensorMemory:
    """One CTA's Tensor Memory: ``cells`` (128 lanes x 512 columns, ``uint32``) plus bookkeeping."""

    enforce_nonincreasing: bool = True
    """Raise when an allocation is larger than the previous one (PTX: sizes should not increase)."""
    cells: np.ndarray = field(init=False, factory=lambda: np.zeros((LANES, COLUMNS), dtype=np.uint32))
    column_owner: np.ndarray = field(init=False, factory=lambda: np.full(COLUMNS, -1, dtype=np.int32))
    """Allocation id owning each column (-1 = free); allocations span all lanes."""
    last_writer: np.ndarray = field(init=False, factory=lambda: np.full((LANES, COLUMNS), -1, dtype=np.int32))
    """Index into :attr:`writers` of the instruction that last wrote each cell (-1 = never)."""
    writers: list = field(init=False, factory=list)
    """What wrote TMEM, in issue order (ids used by :attr:`last_writer`): the instruction records themselves
    (:mod:`simtc.isa`), or plain names for writes made without a record."""
    on_access: Callable | None = field(init=False, default=None)
    """Observer of every cell access, ``on_access(kind, lanes, columns)`` with kind ``"tmem.read"`` or
    ``"tmem.write"`` (set by :class:`simtc.semantics.Cta`); None = nobody is watching."""
    allocations: dict[int, Allocation] = field(init=False, factory=dict)
    """Live allocations by id."""
    history: list[Allocation] = field(init=False, factory=list)
    relinquished: bool = field(init=False, default=False)
    _last_size: int | None = field(init=False, default=None)

    # ---- allocator ---------------------------------------------------------------------------------
    def alloc(self, ncols: int, *, warp: int = 0, active_mask: int = FULL_WARP, smem=None,
              dst: int | None = None) -> TmemAddress:
        """``tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], ncols``.

        Returns the address (lane 0, first column). With ``smem`` (a
        :class:`~simtc.smem.SharedMemory`) the 32-bit address is also written, little-endian, at
        byte ``dst`` (default 0) of shared memory, as the hardware does.

        >>> tm = TensorMemory()
        >>> _ = tm.alloc(512)
        >>> tm.alloc(32)
        Traceback (most recent call last):
        ...
        simtc.errors.TmemWouldBlock: tcgen05.alloc of 32 columns would block: no free 32-column block
        (aligned to 32 columns, simtc's [inferred] placement; free columns: 0 of 512; live: allocation #0:
        columns 0-511 (512), by warp 0)
        [rule: alloc blocks until enough columns are free; PTX ISA 9.0 §9.7.16.1.2, §9.7.16.7.1]
        """
        _check_warp_issue("tcgen05.alloc", warp, active_mask)
        if self.relinquished:
            raise TmemAllocError(
                "tcgen05.alloc after tcgen05.relinquish_alloc_permit: the CTA gave up its right to allocate",
                rule="no alloc after relinquish_alloc_permit", ref="PTX ISA 9.0 §9.7.16.7.1",
            )
        if not isinstance(ncols, (int, np.integer)) or isinstance(ncols, bool) or int(ncols) not in ALLOC_SIZES:
            raise TmemAllocError(f"tcgen05.alloc of {ncols!r} columns: nCols must be a power of two from 32 to 512 "
                                 f"({', '.join(map(str, ALLOC_SIZES))})",
                                 rule="nCols is a power of two, 32 <= nCols <= 512", ref=_REF_ALLOC)
        ncols = int(ncols)
        if self.enforce_nonincreasing and self._last_size is not None and ncols > self._last_size:
            raise TmemAllocError(
                f"tcgen05.alloc of {ncols} columns after one of {self._last_size}: within a CTA the number of "
                "columns allocated should not increase between two allocations",
                rule="allocation sizes do not increase", ref="PTX ISA 9.0 §9.7.16.1.2",
            )
        free = (self.column_owner < 0).reshape(-1, ncols).all(axis=1)  # aligned blocks [inferred policy]
        if not free.any():
            live = "; ".join(map(str, self.allocations.values())) or "none"
            raise TmemWouldBlock(
                f"tcgen05.alloc of {ncols} columns would block: no free {ncols}-column block (aligned to {ncols} "
                f"columns, simtc's [inferred] placement; free columns: {int((self.column_owner < 0).sum())} of "
                f"{COLUMNS}; live: {live})",
                rule="alloc blocks until enough columns are free", ref=_REF_ALLOC,
            )
        col = int(np.argmax(free)) * ncols
        a = Allocation(len(self.history), col, ncols, int(warp))
        self.column_owner[col:col + ncols] = a.id
        self.allocations[a.id] = a
        self.history.append(a)
        self._last_size = ncols
        if smem is not None:
            smem.write(int(dst if dst is not None else 0), np.array([a.address.taddr], dtype="<u4"))
        return a.address

    def dealloc(self, taddr: int | TmemAddress, ncols: int, *, warp: int = 0,
                active_mask: int = FULL_WARP) -> None:
        """``tcgen05.dealloc``: free a previous allocation (exact address and size); any warp may do it."""
        _check_warp_issue("tcgen05.dealloc", warp, active_mask)
        addr = as_address(taddr)
        match = [a for a in self.allocations.values() if a.column == addr.column and a.ncols == ncols]
        if addr.lane != 0 or not match:
            live = "; ".join(map(str, self.allocations.values())) or "none"
            raise TmemAllocError(
                f"tcgen05.dealloc of {ncols} columns at {addr} does not match a live allocation (live: {live})",
                rule="dealloc must name a previous allocation", ref="PTX ISA 9.0 §9.7.16.7.1",
            )
        a = match[0]
        self.column_owner[a.column:a.end] = -1
        del self.allocations[a.id]

    def relinquish_alloc_permit(self, *, warp: int = 0, active_mask: int = FULL_WARP) -> None:
        """``tcgen05.relinquish_alloc_permit``: no ``alloc`` may follow in this CTA."""
        _check_warp_issue("tcgen05.relinquish_alloc_permit", warp, active_mask)
        self.relinquished = True

    def check_all_freed(self) -> None:
        """Kernel exit: raise :class:`TmemAllocError` if any allocation is still live."""
        if self.allocations:
            live = "; ".join(map(str, self.allocations.values()))
            raise TmemAllocError(f"kernel exit with Tensor Memory still allocated: {live}",
                                 rule="everything allocated is deallocated before exit", ref=_REF_ALLOC)

    @property
    def owner(self) -> np.ndarray:
        """Read-only per-cell view (128, 512) of the owning allocation id (-1 = free)."""
        return np.broadcast_to(self.column_owner, (LANES, COLUMNS))

    # ---- checked cell access (used by ld / st / cp / mma) ----------------------------------------
    def instruction(self, writer) -> int:
        """Register a writer (an instruction record, or a name); returns its id for :attr:`last_writer`."""
        self.writers.append(writer)
        return len(self.writers) - 1

    @property
    def instructions(self) -> list[str]:
        """The writers' labels, id for id (a record shows its ``label``, else its PTX line)."""
        return [writer_label(w) for w in self.writers]

    def writer_of(self, lane: int, column: int):
        """The record (or name) that last wrote cell (lane, column); None if never written."""
        i = int(self.last_writer[lane, column])
        return self.writers[i] if i >= 0 else None

    def check_cells(self, lanes: np.ndarray, columns: np.ndarray, what: str) -> None:
        """Raise unless every (lane, column) is inside TMEM and inside a live allocation."""
        lanes = np.asarray(lanes)
        columns = np.asarray(columns)
        check_range(lanes, columns, what)
        owner = self.column_owner[columns]
        if (owner < 0).any():
            bad = np.unique(np.asarray(columns)[owner < 0])
            live = "; ".join(map(str, self.allocations.values())) or "none"
            raise TmemAccessError(
                f"{what} touches unallocated columns {_ranges(bad)} (live: {live})",
                rule="TMEM accesses stay inside allocated columns", ref=_REF_ALLOC,
            )

    def read_cells(self, lanes, columns, what: str) -> np.ndarray:
        """The cells at (lanes, columns), uint32 (a copy), after :meth:`check_cells`: every read goes here."""
        self.check_cells(lanes, columns, what)
        if self.on_access is not None:
            self.on_access("tmem.read", np.asarray(lanes), np.asarray(columns))
        if self.cells.flags.c_contiguous:  # flat cell numbers: one index array instead of two (3x faster)
            return self.cells.reshape(-1).take(_cell_index(lanes, columns))
        return self.cells[lanes, columns]

    def write_cells(self, lanes, columns, values, instr: int) -> None:
        """Write ``values`` (uint32) to cells after :meth:`check_cells`; records ``instr`` as last writer.

        Every write goes here (``tcgen05.st``, ``cp``, ``mma``).
        """
        check_range(lanes, columns, "write")
        if self.on_access is not None:
            self.on_access("tmem.write", np.asarray(lanes), np.asarray(columns))
        values = np.asarray(values, dtype=np.uint32)
        if self.cells.flags.c_contiguous and self.last_writer.flags.c_contiguous:  # flat cell numbers (3x faster)
            at = _cell_index(lanes, columns)
            self.cells.reshape(-1)[at] = values
            self.last_writer.reshape(-1)[at] = instr
        else:
            self.cells[lanes, columns] = values
            self.last_writer[lanes, columns] = instr

    # ---- tcgen05.ld / tcgen05.st -------------------------------------------------------------------
    def _ldst_cells(self, kind: str, taddr, op: LdStOp, warp: int, *, check: bool = True
                    ) -> tuple[np.ndarray, np.ndarray]:
        name = op.ptx(kind)
        _check_warp_index(name, warp, LaneQuadrantError)
        addr = as_address(taddr)
        lo, hi = quadrant_lanes(warp)
        align = QUADRANT_LANES if op.lanes == 32 else 16
        last = addr.lane + op.lanes - 1
        if addr.lane < lo or last > hi:
            raise LaneQuadrantError(
                f"{name}: warp {warp} may access TMEM lanes {lo}-{hi} only; this access at lane {addr.lane} "
                f"touches lanes {addr.lane}-{last}", rule="lane-quadrant rule (warp w -> lanes 32*(w%4)..+31)",
                ref=_REF_QUAD,
            )
        if addr.lane % align:
            raise LaneQuadrantError(
                f"{name}: a {op.lanes}-lane shape starts at lane 32*q{' or 32*q + 16' if op.lanes == 16 else ''}; "
                f"got lane {addr.lane}", rule=f"{op.lanes}-lane shapes start at a multiple of {align}",
                ref=f"{_REF_QUAD}; CUTLASS copy_traits_sm100.hpp (the lane bases simtc models)",
            )
        lane, col = op.cells()
        lanes, cols = addr.lane + lane, addr.column + col
        if check:
            self.check_cells(lanes, cols, f"{name} at {addr}")
        return lanes, cols

    def ld(self, taddr: int | TmemAddress, shape: str | LdStOp = "32x32b", num: int = 1, *, warp: int,
           pack: bool = False, imm: int | None = None) -> np.ndarray:
        """``tcgen05.ld``: what each thread of warp ``warp`` receives, uint32 (32 threads, registers).

        ``shape`` is a PTX shape name (with ``num``, ``pack``, ``imm``) or an :class:`LdStOp`.
        """
        op = shape if isinstance(shape, LdStOp) else LdStOp(shape, num, pack=pack, imm=imm)
        lanes, cols = self._ldst_cells("ld", taddr, op, warp, check=False)
        v = self.read_cells(lanes, cols, f"{op.ptx('ld')} at {as_address(taddr)}")
        if not op.pack:
            return v[..., 0].copy()
        return (v[..., 0] & 0xFFFF) | ((v[..., 1] & 0xFFFF) << 16)

    def st(self, taddr: int | TmemAddress, values, shape: str | LdStOp = "32x32b", num: int = 1, *, warp: int,
           unpack: bool = False, imm: int | None = None, label: str | None = None, dtype: str | None = None) -> None:
        """``tcgen05.st``: the exact inverse of :meth:`ld`; ``values`` is (32 threads, registers).

        Registers are 32-bit bit patterns. Without ``dtype``, ``values`` must be integers in
        0..2**32-1 (e.g. a ``uint32`` array); floats, negative numbers and wider values are refused
        rather than converted. With ``dtype`` (one of :data:`ST_DTYPES`) the values' bits in that
        type are stored: ``dtype="f32"`` stores each value's fp32 bits (values must be exactly
        representable in fp32), ``dtype="s32"`` stores signed integers two's complement.

        With ``.unpack::16b`` each register's two 16-bit halves go to the low 16 bits of two
        cells; simtc writes their high 16 bits as zero [inferred: PTX does not say].

        >>> tm = TensorMemory(); _ = tm.alloc(32)
        >>> tm.st(0, np.full((32, 1), 1.5, np.float32), warp=0, dtype="f32")
        >>> hex(int(tm.ld(0, warp=0)[0, 0]))
        '0x3fc00000'
        >>> tm.st(0, np.full((32, 1), 1.5), warp=0)
        Traceback (most recent call last):
        ...
        simtc.errors.TmemError: tcgen05.st.sync.aligned.32x32b.x1.b32: values of type float64 are not 32-bit
        register bit patterns; pass unsigned integers 0..2**32-1 (e.g. a uint32 array), or say what they are with
        dtype='f32' (fp32 bits) or dtype='s32' (two's complement) [rule: tcgen05.st stores 32-bit bit patterns:
        integers 0..2**32-1, or values of an explicit dtype (u32, s32, f32); PTX ISA 9.0 §9.7.16.8.3
        (tcgen05.st stores .b32 registers)]
        """
        op = shape if isinstance(shape, LdStOp) else LdStOp(shape, num, pack=unpack, imm=imm)
        if op.shape.name == "16x32bx2" and op.imm < op.half_span:
            raise TmemShapeError(
                f"{op.ptx('st')}: immHalfSplitoff {op.imm} < {op.half_span} makes the two halves "
                "store to the same cells", rule="16x32bx2 store halves must not overlap [inferred]",
                ref="PTX ISA 9.0 §9.7.16.8.4",
            )
        v = _register_bits(values, dtype, op.ptx("st"))
        if v.shape != (32, op.nregs):
            raise TmemShapeError(f"{op.ptx('st')} stores {op.nregs} register(s) from each of 32 "
                                 f"threads: values must have shape (32, {op.nregs}), got {v.shape}",
                                 rule="registers per thread", ref="PTX ISA 9.0 §9.7.16.8.3 Tables 47/48")
        lanes, cols = self._ldst_cells("st", taddr, op, warp)
        v = np.stack([v & 0xFFFF, v >> 16], axis=-1) if op.pack else v[..., None]
        self.write_cells(lanes, cols, v, self.instruction(label or f"{op.ptx('st')} (warp {warp})"))

    # ---- tcgen05.cp ----------------------------------------------------------------------------------
    def cp(self, taddr: int | TmemAddress, smem, desc, shape: str = "128x256b", multicast: str | None = None, *,
           label: str | None = None) -> None:
        """``tcgen05.cp.cta_group::1``: shared memory (read through ``desc``) -> TMEM; see :mod:`simtc.tmem.cp`."""
        from simtc.tmem.cp import tcgen05_cp

        tcgen05_cp(self, taddr, smem, desc, shape, multicast, label=label)


def _register_bits(values, dtype: str | None, what: str) -> np.ndarray:
    """``values`` as uint32 register bit patterns, refusing every silent conversion (see :meth:`TensorMemory.st`)."""
    rule = "tcgen05.st stores 32-bit bit patterns: integers 0..2**32-1, or values of an explicit dtype (u32, s32, f32)"
    kind = _ST_ALIASES.get(str(dtype).lower()) if dtype is not None else "u32"
    if kind is None:
        raise TmemError(f"{what}: dtype {dtype!r} is not a 32-bit register type; use one of {', '.join(ST_DTYPES)}",
                        rule=rule, ref=_REF_ST)
    try:
        v = np.asarray(values)
    except (ValueError, TypeError) as e:  # ragged nested sequences
        raise TmemError(f"{what}: values are not a rectangular array ({e})", rule=rule, ref=_REF_ST) from None
    if kind == "f32":
        if v.dtype.kind not in "uif":
            raise TmemError(f"{what}: dtype='f32' takes numbers, got values of type {v.dtype}", rule=rule, ref=_REF_ST)
        with np.errstate(over="ignore", invalid="ignore"):
            v32 = v.astype(np.float32)
            exact = (v32.astype(v.dtype) == v) | (np.isnan(v) if v.dtype.kind == "f" else False)
        if not np.all(exact):
            i = tuple(int(x) for x in np.argwhere(~exact)[0])
            raise TmemError(f"{what}: values{list(i)} = {v[i]!r} is not exactly representable in fp32; round it "
                            "first (e.g. with numpy's astype(np.float32))", rule=rule, ref=_REF_ST)
        return v32.view(np.uint32)
    if v.dtype.kind not in "ui":
        hint = "dtype='f32' (fp32 bits) or dtype='s32' (two's complement)"
        raise TmemError(f"{what}: values of type {v.dtype} are not 32-bit register bit patterns; pass unsigned "
                        f"integers 0..2**32-1 (e.g. a uint32 array), or say what they are with {hint}",
                        rule=rule, ref=_REF_ST)
    lo, hi = (0, 2**32 - 1) if kind == "u32" else (-(2**31), 2**31 - 1)
    if v.size and (int(v.min()) < lo or int(v.max()) > hi):
        bad = int(v.min()) if int(v.min()) < lo else int(v.max())
        other = " (negative numbers: dtype='s32' stores them two's complement)" if kind == "u32" and bad < 0 else ""
        raise TmemError(f"{what}: value {bad} does not fit a {kind} register ({lo}..{hi}){other}",
                        rule=rule, ref=_REF_ST)
    return v.astype(np.int32).view(np.uint32) if kind == "s32" else v.astype(np.uint32)


def _cell_index(lanes, columns) -> np.ndarray:
    """Flat cell numbers ``lane * COLUMNS + column`` (broadcast; lanes and columns already range-checked)."""
    return np.asarray(lanes, dtype=np.int64) * COLUMNS + np.asarray(columns, dtype=np.int64)


def writer_label(writer) -> str:
    """How a writer is shown: a record's ``label`` (else its ``ptx()``), or the name itself."""
    if isinstance(writer, str):
        return writer
    return getattr(writer, "label", "") or writer.ptx()


def _ranges(cols: np.ndarray) -> str:
    """'3-7, 12' for sorted unique integers."""
    cols = np.asarray(cols, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(cols) != 1)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [cols.size - 1]])
    return ", ".join(f"{cols[s]}" if s == e else f"{cols[s]}-{cols[e]}" for s, e in zip(starts, ends, strict=True))
