"""The Tensor Memory Accelerator's tile model: a tensor map, the box its coordinates pick, where it lands.

A :class:`TensorMap` holds what ``cuTensorMapEncodeTiled`` takes (CUDA Driver API, "Tensor Map Object
Management", ``cuTensorMapEncodeTiled``; the CUDA 13.0 ``cuda.h`` comment lists the rules) and checks the same
rules when it is built, each error naming the rule. The byte encoding of a map as a kernel parameter is
:mod:`simtc.ptx.tensor_map`'s; this module is the data model every TMA instruction goes through:

* **the box** (PTX ISA 9.0 §5.5.3.1 Bounding Box, §5.5.3.2 Traversal-Stride): the instruction's signed
  coordinates give the box's first element; along dimension ``d`` the box visits ``ceil(box[d] / estride[d])``
  elements ``c[d] + j * estride[d]`` (``cuTensorMapEncodeTiled``: "TMA loads ceil(boxDim[i] / elementStrides[i])
  elements"; without interleave the stride of dimension 0 is ignored, so dimension 0 visits ``box[0]``);
  element ``(i0, ..., i4)`` is at global byte ``address + sum(i_d * stride_d)`` (``stride_0`` = the element
  size) and lands in shared memory densely, dimension 0 fastest (§5.5: shared memory is "linear data");
* **out of bounds** (§5.5.3.3 Out of Boundary Access): an element outside the tensor in any dimension is not
  read; it lands as 0, or as the map's ``OOB-NaN`` with ``oob_fill="nan"`` (``CU_TENSOR_MAP_FLOAT_OOB_FILL_
  NAN_REQUEST_ZERO_FMA``); a store skips it. The transaction count is the whole box either way;
* **the swizzle** (§5.5.7 Swizzling Modes): the box's 16-byte chunk at linear shared address ``a`` is stored
  at ``swizzle(a)`` of the *absolute* address (:func:`simtc.smem.swizzle.swizzle`, the tensor core's own
  function); with a swizzle, each inner row of the box starts a new span (a 64-byte row under 128B swizzle
  leaves the other 64 bytes of its 128-byte line untouched), while the transaction count stays the box's
  bytes (measured on an H200: ``tests/data/h200_tma_probe.txt``, made by ``simtc/hw/cuda/tma_probe.cu``);
* **alignment** (§5.5.3.1): the box's first element must be 16-byte aligned in global memory, i.e. the
  coordinate of dimension 0 times the element size a multiple of 16 (an H200 stops the kernel with an
  illegal-instruction error otherwise, in the same recording); simtc reports it as an error naming the rule;
* **gather4** (§5.5.3.4 ``.tile::gather4``): a 2-D map whose box has one row; four row coordinates, one
  column coordinate; the four rows land one after another.

Global memory is reached through two callables so that the same model serves the executor (device
allocations) and :mod:`simtc.semantics` (named numpy tensors): ``read(offsets, size) -> (n, size) uint8``
and ``write(offsets, rows)``, with byte offsets from the map's global address.

>>> tm = TensorMap("f32", 0, dims=(6, 3), strides=(32,), box=(4, 2))
>>> g = np.arange(3 * 8, dtype=np.float32)  # 3 rows of 8 floats (32-byte stride), 6 of them in the tensor
>>> box_values(tm, (4, 2), numpy_reader(g)).view(np.float32).reshape(2, 4)  # straddles the right and bottom
array([[20., 21.,  0.,  0.],
       [ 0.,  0.,  0.,  0.]], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from attrs import field, frozen

from simtc.errors import SimtcError
from simtc.smem.swizzle import SwizzleMode, swizzle

__all__ = [
    "DTYPES",
    "FLOAT_DTYPES",
    "OOB_NAN",
    "SWIZZLES",
    "TensorMap",
    "TensorMapError",
    "box_offsets",
    "box_values",
    "gather4_load",
    "numpy_reader",
    "numpy_writer",
    "reduce_values",
    "swizzled_chunks",
    "tile_load",
    "tile_store",
]

REF_ENCODE = "CUDA Driver API, Tensor Map Object Management: cuTensorMapEncodeTiled (CUDA 13.0 cuda.h)"
REF_BOX = "PTX ISA 9.0 §5.5.3.1 (Bounding Box), §5.5.3.2 (Traversal-Stride)"
REF_OOB = "PTX ISA 9.0 §5.5.3.3 (Out of Boundary Access)"
REF_GATHER = "PTX ISA 9.0 §5.5.3.4 (.tile::scatter4 and .tile::gather4 modes)"
REF_SWIZZLE = "PTX ISA 9.0 §5.5.7 (Swizzling Modes)"

DTYPES: dict[str, int] = {
    "u8": 1, "u16": 2, "u32": 4, "s32": 4, "u64": 8, "s64": 8, "f16": 2, "f32": 4, "f64": 8, "bf16": 2,
    "f32_ftz": 4, "tf32": 4, "tf32_ftz": 4,
}
"""Element bytes of each ``CUtensorMapDataType`` simtc models, by simtc's short name (the enum's order:
``UINT8 UINT16 UINT32 INT32 UINT64 INT64 FLOAT16 FLOAT32 FLOAT64 BFLOAT16 FLOAT32_FTZ TFLOAT32 TFLOAT32_FTZ``;
the packed sub-byte types ``16U4_ALIGN8B``, ``16U4_ALIGN16B``, ``16U6_ALIGN16B`` are not modelled)."""
FLOAT_DTYPES = frozenset({"f16", "f32", "f64", "bf16", "f32_ftz", "tf32", "tf32_ftz"})
OOB_NAN: dict[int, int] = {2: 0x7FF7, 4: 0x7FF7_7FF7, 8: 0x7FF7_7FF7_7FF7_7FF7}
"""The bits of an ``OOB-NaN`` element, by element size. PTX names the value ("a special NaN called OOB-NaN",
PTX ISA 9.0 §5.5.3.3) without giving its bits; an H200 writes ``0x7FF7`` for bf16 and f16 and ``0x7FF77FF7``
for f32 (``tests/data/h200_tma_probe.txt``, made by ``simtc/hw/cuda/tma_probe.cu``); f64's is that pattern
repeated [inferred]."""

SWIZZLES: dict[str, tuple[int, SwizzleMode | None]] = {
    "none": (0, None), "32B": (32, SwizzleMode.SW32), "64B": (64, SwizzleMode.SW64),
    "128B": (128, SwizzleMode.SW128), "128B_atom_32B": (128, SwizzleMode.SW128_32B),
    "128B_atom_32B_flip_8B": (128, None), "128B_atom_64B": (128, None),
}
"""``CUtensorMapSwizzle`` (in the enum's order) -> (span in bytes, the :class:`SwizzleMode` TMA applies).
The last two are accepted in a map but have no data model in simtc (None)."""
INTERLEAVES: dict[str, int] = {"none": 0, "16B": 16, "32B": 32}
L2_PROMOTIONS = (0, 64, 128, 256)
OOB_FILLS = ("zero", "nan")


class TensorMapError(SimtcError, ValueError):
    """A tensor map ``cuTensorMapEncodeTiled`` would refuse, or a use of one simtc cannot model."""


def _fail(msg: str, rule: str, ref: str = REF_ENCODE) -> None:
    raise TensorMapError(msg, rule=rule, ref=ref)


def _ints(v) -> tuple[int, ...]:
    return tuple(int(x) for x in v)


def _opt_ints(v) -> tuple[int, ...] | None:
    return None if v is None else _ints(v)


@frozen
class TensorMap:
    """A tiled tensor map: ``cuTensorMapEncodeTiled``'s arguments, checked as the driver checks them.

    ``dims``, ``box`` and ``element_strides`` have ``rank`` entries, dimension 0 (the contiguous one) first;
    ``strides`` are the byte strides of dimensions 1 .. rank-1 (dimension 0's is the element size), as the
    driver takes them. ``swizzle`` is a key of :data:`SWIZZLES`, ``interleave`` of :data:`INTERLEAVES`,
    ``l2_promotion`` 0/64/128/256 bytes, ``oob_fill`` ``"zero"`` or ``"nan"``.

    >>> TensorMap("bf16", 0x1000, dims=(64, 64), strides=(128,), box=(64, 8), swizzle="128B").box_bytes
    1024
    >>> TensorMap("bf16", 0x1000, dims=(128, 64), strides=(256,), box=(128, 8), swizzle="128B")
    Traceback (most recent call last):
    ...
    simtc.smem.tma.TensorMapError: the box's inner dimension is 256 bytes (128 x 2), more than the 128-byte span \
of swizzle 128B [rule: with a swizzle, boxDim[0] * element size <= the swizzle span; CUDA Driver API, Tensor Map \
Object Management: cuTensorMapEncodeTiled (CUDA 13.0 cuda.h)]
    """

    dtype: str
    address: int = field(converter=int)
    dims: tuple[int, ...] = field(converter=_ints)
    strides: tuple[int, ...] = field(converter=_ints)
    box: tuple[int, ...] = field(converter=_ints)
    element_strides: tuple[int, ...] | None = field(default=None, converter=_opt_ints)
    interleave: str = "none"
    swizzle: str = "none"
    l2_promotion: int = field(default=0, converter=int)
    oob_fill: str = "zero"

    def __attrs_post_init__(self) -> None:
        if self.dtype not in DTYPES:
            _fail(f"tensor data type {self.dtype!r}: simtc models {', '.join(DTYPES)} (the packed 16U4/16U6 types "
                  "are not modelled)", "CUtensorMapDataType")
        rank = len(self.dims)
        if not 1 <= rank <= 5:
            _fail(f"tensorRank {rank}: 1 to 5 dimensions", "tensorRank is non-zero and at most 5")
        if self.interleave not in INTERLEAVES:
            _fail(f"interleave {self.interleave!r}: one of {', '.join(INTERLEAVES)}", "CUtensorMapInterleave")
        if self.interleave != "none" and rank < 3:
            _fail(f"tensorRank {rank} with interleave {self.interleave}: an interleaved map has 3 to 5 dimensions",
                  "tensorRank >= 3 when interleave is not NONE")
        align = 32 if self.interleave == "32B" else 16
        if self.address < 0 or self.address % align:
            _fail(f"globalAddress {self.address:#x} is not {align}-byte aligned",
                  f"globalAddress is {align}-byte aligned" + (" (interleave 32B)" if align == 32 else ""))
        for name, v, n in (("globalStrides", self.strides, rank - 1), ("boxDim", self.box, rank),
                           ("elementStrides", self.element_strides, rank)):
            if v is not None and len(v) != n:
                _fail(f"{name} has {len(v)} entries; a rank-{rank} map takes {n}", f"{name} has {n} entries")
        for i, d in enumerate(self.dims):
            if not 1 <= d <= 2**32:
                _fail(f"globalDim[{i}] = {d}: non-zero and at most 2^32", "globalDim is non-zero and <= 2^32")
        for i, s in enumerate(self.strides):
            if s % align or not 0 <= s < 2**40:
                _fail(f"globalStrides[{i}] = {s}: a multiple of {align} below 2^40",
                      f"globalStrides are multiples of {align} and < 2^40")
        es = self.elem_bytes
        for i, b in enumerate(self.box):
            if not 1 <= b <= 256:
                _fail(f"boxDim[{i}] = {b}: non-zero and at most 256", "boxDim is non-zero and <= 256")
        if self.interleave == "none" and self.box[0] * es % 16:
            _fail(f"the box's inner dimension is {self.box[0] * es} bytes ({self.box[0]} x {es}), not a multiple "
                  "of 16", "boxDim[0] * element size is a multiple of 16 bytes (interleave NONE)")
        for i, e in enumerate(self.element_strides or ()):
            if not 1 <= e <= 8:
                _fail(f"elementStrides[{i}] = {e}: non-zero and at most 8", "elementStrides are 1 to 8")
        if self.swizzle not in SWIZZLES:
            _fail(f"swizzle {self.swizzle!r}: one of {', '.join(SWIZZLES)}", "CUtensorMapSwizzle")
        span = SWIZZLES[self.swizzle][0]
        if self.interleave == "32B" and self.swizzle != "32B":
            _fail(f"interleave 32B with swizzle {self.swizzle}", "interleave 32B requires swizzle 32B")
        if self.interleave == "none" and span and self.box[0] * es > span:
            _fail(f"the box's inner dimension is {self.box[0] * es} bytes ({self.box[0]} x {es}), more than the "
                  f"{span}-byte span of swizzle {self.swizzle}",
                  "with a swizzle, boxDim[0] * element size <= the swizzle span")
        if self.l2_promotion not in L2_PROMOTIONS:
            _fail(f"l2Promotion {self.l2_promotion}: 0 (none), 64, 128 or 256 bytes", "CUtensorMapL2promotion")
        if self.oob_fill not in OOB_FILLS:
            _fail(f"oobFill {self.oob_fill!r}: 'zero' (NONE) or 'nan' (NAN_REQUEST_ZERO_FMA)",
                  "CUtensorMapFloatOOBfill")
        if self.oob_fill == "nan" and self.dtype not in FLOAT_DTYPES:
            _fail(f"oobFill NAN_REQUEST_ZERO_FMA with the integer type {self.dtype}",
                  "the NaN fill needs a floating-point data type")

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype]

    @property
    def byte_strides(self) -> tuple[int, ...]:
        """Byte stride of every dimension (dimension 0's is the element size)."""
        return (self.elem_bytes, *self.strides)

    @property
    def traversal(self) -> tuple[int, ...]:
        """Element stride the box takes along each dimension (dimension 0: 1 without interleave)."""
        es = self.element_strides or (1,) * self.rank
        return (1 if self.interleave == "none" else es[0], *es[1:])

    @property
    def box_shape(self) -> tuple[int, ...]:
        """Elements the box visits along each dimension, dimension 0 first: ``ceil(box[d] / traversal[d])``."""
        return tuple(-(-b // t) for b, t in zip(self.box, self.traversal, strict=True))

    @property
    def box_bytes(self) -> int:
        """Bytes one tile copy moves (the transaction count of a load)."""
        return int(np.prod(self.box_shape)) * self.elem_bytes

    @property
    def swizzle_mode(self) -> SwizzleMode | None:
        """The shared-memory swizzle TMA applies (None: no swizzle); refuses the modes simtc does not model."""
        if self.swizzle in ("128B_atom_32B_flip_8B", "128B_atom_64B"):
            _fail(f"swizzle {self.swizzle} has no data model in simtc (modelled: none, 32B, 64B, 128B, "
                  "128B_atom_32B)", "modelled TMA swizzles", REF_SWIZZLE)
        return SWIZZLES[self.swizzle][1]

    def modelled(self) -> None:
        """Refuse what the data model does not cover (interleaved layouts, two 128B sub-modes)."""
        if self.interleave != "none":
            _fail(f"interleave {self.interleave}: interleaved layouts (NC/8DHWC8, NC/16HWC16) have no data model in "
                  "simtc", "modelled TMA layouts (interleave NONE)", "PTX ISA 9.0 §5.5.6 (Interleave layout)")
        self.swizzle_mode  # noqa: B018 (refuses the sub-modes without a model)


def _coords(tm: TensorMap, coords: Sequence[int], what: str = "tile") -> tuple[int, ...]:
    c = tuple(int(x) for x in coords)
    if len(c) != tm.rank:
        _fail(f"a .{len(c)}d {what} copy names a rank-{tm.rank} tensor map", "the copy's .dim is the map's rank",
              "PTX ISA 9.0 §9.7.9.25.5.2 (cp.async.bulk.tensor)")
    return c


def box_offsets(tm: TensorMap, coords: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Global byte offsets (from the map's address) of the box's elements in shared-memory order, and which of
    them lie inside the tensor.

    >>> off, inside = box_offsets(TensorMap("u16", 0, dims=(8, 2), strides=(16,), box=(8, 2)), (-2, 1))
    >>> off.reshape(2, 8)[0].tolist(), inside.reshape(2, 8).sum(axis=1).tolist()
    ([12, 14, 16, 18, 20, 22, 24, 26], [6, 0])
    """
    c = _coords(tm, coords)
    off = np.zeros(1, np.int64)
    inside = np.ones(1, bool)
    for d in reversed(range(tm.rank)):  # outermost first, so dimension 0 ends up fastest
        idx = c[d] + np.arange(tm.box_shape[d], dtype=np.int64) * tm.traversal[d]
        off = (off[:, None] + idx[None, :] * tm.byte_strides[d]).ravel()
        inside = (inside[:, None] & ((idx >= 0) & (idx < tm.dims[d]))[None, :]).ravel()
    return off, inside


def _fill(tm: TensorMap) -> np.ndarray:
    es = tm.elem_bytes
    bits = OOB_NAN[es] if tm.oob_fill == "nan" else 0
    if tm.dtype in ("tf32", "tf32_ftz") and tm.oob_fill == "nan":
        bits = OOB_NAN[4]
    return np.frombuffer(int(bits).to_bytes(es, "little"), np.uint8)


def box_values(tm: TensorMap, coords: Sequence[int], read: Callable) -> np.ndarray:
    """The box's bytes in shared-memory order before the swizzle, out-of-bound elements filled (PTX ISA 9.0
    §5.5.3.3)."""
    off, inside = box_offsets(tm, coords)
    es = tm.elem_bytes
    out = np.empty((off.size, es), np.uint8)
    out[:] = _fill(tm)
    if inside.any():
        out[inside] = read(off[inside], es)
    return out.reshape(-1)


def swizzled_chunks(dst: int, nbytes: int, mode: SwizzleMode | None, row: int | None = None,
                    pitch: int | None = None) -> np.ndarray:
    """Absolute shared-memory addresses of the 16-byte chunks of ``nbytes`` box bytes at ``dst``: rows of ``row``
    bytes ``pitch`` bytes apart (default: dense), then the swizzle.

    >>> swizzled_chunks(1024 + 128, 64, SwizzleMode.SW128).tolist()  # row 1 of a 128B-swizzled atom
    [1168, 1152, 1200, 1184]
    >>> swizzled_chunks(1024, 64, SwizzleMode.SW128, row=32, pitch=128).tolist()  # 32-byte rows, one per line
    [1024, 1040, 1168, 1152]
    """
    k = np.arange(nbytes // 16, dtype=np.int64)
    if row is not None and pitch is not None and pitch != row:
        per = row // 16
        a = int(dst) + (k // per) * pitch + 16 * (k % per)
    else:
        a = int(dst) + 16 * k
    return a if mode is None else swizzle(a, mode)


def _chunks(tm: TensorMap, dst: int, nbytes: int) -> np.ndarray:
    """Where a box of ``tm`` at ``dst`` puts its 16-byte chunks: inner rows a swizzle span apart when swizzled."""
    row = tm.box_shape[0] * tm.elem_bytes
    span = SWIZZLES[tm.swizzle][0]
    return swizzled_chunks(dst, nbytes, tm.swizzle_mode, row, max(row, span) if span else row)


def _check_box_address(tm: TensorMap, c0: int) -> None:
    if (c0 * tm.elem_bytes) % 16:
        _fail(f"the box starts {c0 * tm.elem_bytes} bytes into its row (coordinate {c0} of {tm.elem_bytes}-byte "
              "elements), not on a 16-byte boundary", "the bounding box's address is 16-byte aligned", REF_BOX)


def _check_dst(tm: TensorMap, dst: int, what: str) -> None:
    if dst % 128:
        _fail(f"the shared-memory {what} address {dst:#x} is not 128-byte aligned", "tensor-copy shared-memory "
              "boxes are 128-byte aligned", "CUDA C++ Programming Guide, TMA alignment requirements; PTX ISA 9.0 "
              "§5.5.3.1 states 16 B")


def tile_load(tm: TensorMap, coords: Sequence[int], read: Callable, smem, dst: int, *, writer=None) -> int:
    """A tile-mode load: the box at ``coords`` into :class:`~simtc.smem.SharedMemory` ``smem`` at ``dst``,
    swizzled; returns the bytes moved (the transaction count)."""
    tm.modelled()
    _check_dst(tm, dst, "destination")
    _check_box_address(tm, int(coords[0]))
    data = box_values(tm, coords, read)
    smem.scatter(_chunks(tm, dst, data.size), data.reshape(-1, 16), writer=writer)
    return data.size


def gather4_load(tm: TensorMap, col: int, rows: Sequence[int], read: Callable, smem, dst: int, *,
                 writer=None) -> int:
    """``.tile::gather4``: rows ``rows`` (four) from column ``col`` of a 2-D map whose box has one row, one row
    after another at ``dst``, swizzled; returns the bytes moved (PTX ISA 9.0 §5.5.3.4)."""
    tm.modelled()
    if tm.rank != 2 or tm.box[1] != 1:
        _fail(f"gather4 needs a 2-D map whose box has one row; this map is rank {tm.rank} with box {tm.box}",
              ".tile::gather4: 2-D tensor, box size 1 in dimension 1", REF_GATHER)
    rows = [int(r) for r in rows]
    if len(rows) != 4:
        _fail(f"gather4 takes four row coordinates, got {len(rows)}", ".tile::gather4 has 4 row coordinates",
              REF_GATHER)
    _check_dst(tm, dst, "destination")
    _check_box_address(tm, int(col))
    data = np.concatenate([box_values(tm, (col, r), read) for r in rows])
    smem.scatter(_chunks(tm, dst, data.size), data.reshape(-1, 16), writer=writer)
    return data.size


_REDUCE_INT = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
               "xor": np.bitwise_xor}
_INT_VIEW = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "s32": np.int32, "u64": np.uint64, "s64": np.int64}
_FLOAT_VIEW = {"f16": (np.uint16, np.float16), "f32": (np.uint32, np.float32), "f64": (np.uint64, np.float64)}


def reduce_values(op: str, dtype: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``old op new`` element by element on raw bytes ((n, size) uint8), for ``cp.reduce.async.bulk.tensor``.

    Integers wrap; f16/f32/f64 ``add`` is computed exactly in float64 and rounded once to the type, nearest
    even (float64 has more than twice the bits plus two, so the double rounding is innocuous), ``min``/``max``
    take the numerically smaller/larger (NaN propagates) [inferred: PTX names the operations, §9.7.9.25.5.3].

    >>> a = np.array([[1, 0, 0, 0], [255, 255, 255, 255]], np.uint8)
    >>> reduce_values("add", "u32", a, a).view(np.uint32).ravel().tolist()
    [2, 4294967294]
    """
    ref = "PTX ISA 9.0 §9.7.9.25.5.3 (cp.reduce.async.bulk.tensor)"
    n = old.shape[0]
    if dtype in _INT_VIEW:
        if op not in _REDUCE_INT:
            _fail(f".{op} on .{dtype}", "modelled tensor reductions", ref)
        v = _INT_VIEW[dtype]
        with np.errstate(over="ignore"):
            out = _REDUCE_INT[op](old.view(v).ravel(), new.view(v).ravel()).astype(v)
        return out.view(np.uint8).reshape(n, -1)
    if dtype in _FLOAT_VIEW and op in ("add", "min", "max"):
        bits, f = _FLOAT_VIEW[dtype]
        a = old.view(bits).ravel().view(f).astype(np.float64)
        b = new.view(bits).ravel().view(f).astype(np.float64)
        r = a + b if op == "add" else (np.minimum(a, b) if op == "min" else np.maximum(a, b))
        return r.astype(f).view(bits).view(np.uint8).reshape(n, -1)
    _fail(f".{op} on .{dtype} has no model in simtc (modelled: add/min/max/and/or/xor on integers, add/min/max on "
          "f16/f32/f64)", "modelled tensor reductions", ref)
    raise AssertionError  # unreachable


def tile_store(tm: TensorMap, coords: Sequence[int], smem, src: int, write: Callable, *, read: Callable | None = None,
               reduce: str | None = None) -> int:
    """A tile-mode store (``reduce=None``) or reduction (``"add"``, ``"min"``, ...) of the swizzled box at ``src``
    to the tensor at ``coords``; elements outside the tensor are skipped (PTX ISA 9.0 §5.5.3.3). Returns the bytes
    read."""
    tm.modelled()
    _check_dst(tm, src, "source")
    _check_box_address(tm, int(coords[0]))
    off, inside = box_offsets(tm, coords)
    es = tm.elem_bytes
    nbytes = off.size * es
    data = smem.gather(_chunks(tm, src, nbytes), 16).reshape(-1, es)
    if inside.any():
        rows = data[inside]
        if reduce is not None:
            if read is None:
                _fail("a reduction needs the tensor's current values", "reductions read global memory")
            rows = reduce_values(reduce, tm.dtype, read(off[inside], es), rows)
        write(off[inside], rows)
    return nbytes


def numpy_reader(array: np.ndarray) -> Callable:
    """``read(offsets, size)`` over the bytes of a numpy array (the map's address is byte 0 of it)."""
    raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)

    def read(offsets: np.ndarray, size: int) -> np.ndarray:
        if offsets.size and (int(offsets.min()) < 0 or int(offsets.max()) + size > raw.size):
            _fail(f"the box reads bytes up to {int(offsets.max()) + size} of a {raw.size}-byte tensor",
                  "a tensor map describes memory that exists", REF_BOX)
        return raw[offsets[:, None] + np.arange(size)]
    return read


def numpy_writer(array: np.ndarray) -> Callable:
    """``write(offsets, rows)`` into the bytes of a contiguous numpy array."""
    raw = array.reshape(-1).view(np.uint8)

    def write(offsets: np.ndarray, rows: np.ndarray) -> None:
        size = rows.shape[1]
        if offsets.size and (int(offsets.min()) < 0 or int(offsets.max()) + size > raw.size):
            _fail(f"the box writes bytes up to {int(offsets.max()) + size} of a {raw.size}-byte tensor",
                  "a tensor map describes memory that exists", REF_BOX)
        raw[offsets[:, None] + np.arange(size)] = rows
    return write
