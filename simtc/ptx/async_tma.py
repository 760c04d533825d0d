"""TMA, bulk copies and ``cp.async`` in the executor, through simtc's TMA model (:mod:`simtc.smem.tma`).

Each handler compiles one ``cp.*`` instruction into a closure of :mod:`simtc.ptx.executor` (``compile(instruction,
compiler) -> body(warp, frame, entry, mask, full)``). Every executing lane issues its own copy, in ascending lane
order (kernels elect one thread for TMA).

* ``cp.async.bulk.tensor.<n>d.shared::cluster.global.tile[::gather4].mbarrier::complete_tx::bytes [dst], [map,
  {c...}], [bar]`` (also ``.shared::cta.global``): the tensor map is read at its address (a ``__grid_constant__``
  parameter through ``cvta.param``, a global or a ``.const`` address), decoded from simtc's encoding
  (:mod:`simtc.ptx.tensor_map`) and the box moved by :func:`simtc.smem.tma.tile_load` /
  :func:`~simtc.smem.tma.gather4_load` into the CTA's shared memory (the Cta's
  :class:`~simtc.smem.SharedMemory`), whose byte count then completes on the mbarrier through the same
  :class:`~simtc.semantics.MbarrierState` and shared-memory image as :mod:`simtc.ptx.async_ops`'s mbarrier
  instructions (PTX ISA 9.0 §9.7.9.25.5.2).
* ``cp.async.bulk.tensor.<n>d.global.shared::cta.tile.bulk_group [map, {c...}], [src]`` and
  ``cp.reduce.async.bulk.tensor...<op>...`` (``add min max inc dec and or xor`` as modelled by
  :func:`simtc.smem.tma.reduce_values`): :func:`simtc.smem.tma.tile_store` (§9.7.9.25.5.3).
* ``cp.async.bulk`` global -> shared (``mbarrier::complete_tx::bytes``), shared -> global (``bulk_group``) and
  shared::cta -> shared::cluster within the CTA: ``size`` bytes, both addresses 16-byte aligned, a multiple of
  16 bytes (§9.7.9.25.4.1).
* ``cp.async.ca/cg.shared.global [dst], [src], cp-size{, src-size}{, ignore-src}``: ``cp-size`` bytes with the
  bytes past ``src-size`` zero (§9.7.9.25.3.1); ``cp.async.mbarrier.arrive.noinc`` arrives on the mbarrier, the
  form without ``.noinc`` leaves its pending count as it was (it adds one and arrives, §9.7.13.15.15).

**Untimed**, as :mod:`simtc.semantics`: a copy has completed when it is issued, so ``cp.async.bulk.commit_group``,
``cp.async.bulk.wait_group(.read)``, ``cp.async.commit_group``, ``cp.async.wait_group``/``wait_all`` and the
prefetches (``cp.async.bulk.prefetch[.tensor]``) have nothing left to do; each is a note of the launch.

**Faults** (:class:`~simtc.ptx.errors.KernelFault`, with the thread and PTX line the executor adds): a global
byte the map or the copy reaches outside every allocation (named as memcheck names it), a misaligned shared
box, a map not made by ``simtc.cuda.tensor_map``, a ``.<n>d`` that is not the map's rank, a copy onto an
mbarrier that is not initialised. **Refused** by name: ``.multicast::cluster``, ``.cta_group::2``, ``.im2col*``,
``.tile::scatter4``, ``.cp_mask``, the non-tensor ``cp.reduce.async.bulk``.

:func:`install` puts the ``cp`` compiler into the executor's opcode table; :mod:`simtc.ptx.executor` calls it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simtc.isa.mbarrier import MbarrierArrive
from simtc.ptx.async_ops import _kfault, _live, _model, _run, _shared_offsets, _sync_image, wake
from simtc.ptx.errors import PtxSyntaxError, PtxUnsupported
from simtc.ptx.ir import Address, Imm, Instruction, Reg, Sym, TensorRef
from simtc.ptx.memory import CONST_WINDOW, PARAM_WINDOW, _word_rows, window_of
from simtc.ptx.tensor_map import SIZE, decode
from simtc.smem.tma import TensorMap, TensorMapError, gather4_load, tile_load, tile_store

__all__ = ["install"]

_REF_TENSOR = "PTX ISA 9.0 §9.7.9.25.5.2 (cp.async.bulk.tensor)"
_REF_REDUCE = "PTX ISA 9.0 §9.7.9.25.5.3 (cp.reduce.async.bulk.tensor)"
_REF_BULK = "PTX ISA 9.0 §9.7.9.25.4.1 (cp.async.bulk)"
_REF_CPASYNC = "PTX ISA 9.0 §9.7.9.25.3.1 (cp.async)"
_REF_ARRIVE = "PTX ISA 9.0 §9.7.13.15.15 (cp.async.mbarrier.arrive)"
_REDUCTIONS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
_UNTIMED = ("accepted: simtc's copies complete when issued (untimed, as simtc.semantics), so there is nothing "
            "left to wait for")


def _kf(err: TensorMapError | str, lane: int, *, rule: str = "", ref: str | None = None):
    if isinstance(err, TensorMapError):
        return _kfault(err.message, lane, rule=err.rule or rule, ref=err.ref)
    return _kfault(err, lane, rule=rule, ref=ref)


# ------------------------------------------------------------------------------------------------------------
# the tensor map and global memory
# ------------------------------------------------------------------------------------------------------------

_MAPS: dict[bytes, TensorMap] = {}
"""Decoded tensor maps by their 128 bytes (a map is decoded once)."""


def _map_bytes(w, f, addr: int, lane: int, ins: Instruction) -> bytes:
    """The 128 bytes at the tensor map's generic address ``addr``."""
    if addr % 64:
        raise _kf(f"{ins.name}: the tensor map address {addr:#x} of lane {lane} is not 64-byte aligned", lane,
                  rule="a tensor map is 64-byte aligned", ref="CUDA Driver API, cuTensorMapEncodeTiled")
    space = window_of(addr)
    if space == "param":
        p = w.frames[0].params
        off = addr - PARAM_WINDOW
        if off + SIZE > p.shape[1]:
            raise _kf(f"{ins.name}: the tensor map at {addr:#x} runs past the kernel's {p.shape[1]} parameter bytes",
                      lane, rule="the tensor map is a kernel parameter of 128 bytes", ref=_REF_TENSOR)
        return bytes(p[lane, off:off + SIZE])
    if space == "const":
        bank = w.cta.launch.image.const_bank
        off = addr - CONST_WINDOW
        return bytes(bank[off:off + SIZE])
    if space == "global":
        mem = w.cta.launch.device.memory
        a = mem.allocation_of(addr)
        if a is None or addr + SIZE > a.base + a.size:
            _, where = mem.nearest(addr)
            raise _kf(f"{ins.name}: the tensor map address {addr:#x} of lane {lane} is not inside a global "
                      f"allocation{where}", lane, rule="the tensor map lies in param, const or global memory",
                      ref=_REF_TENSOR)
        return bytes(a.data[addr - a.base:addr - a.base + SIZE])
    raise _kf(f"{ins.name}: the tensor map address {addr:#x} of lane {lane} is in {space} memory", lane,
              rule="the tensor map lies in param, const or global memory", ref=_REF_TENSOR)


def _tensor_map(w, f, addr: int, lane: int, ins: Instruction) -> TensorMap:
    raw = _map_bytes(w, f, addr, lane, ins)
    tm = _MAPS.get(raw)
    if tm is None:
        try:
            tm = decode(raw)
        except TensorMapError as err:
            raise _kf(err, lane) from None
        if len(_MAPS) > 4096:
            _MAPS.clear()
        _MAPS[raw] = tm
    return tm


def _global(w, base: int, lane: int, ins: Instruction, what: str) -> tuple[Callable, Callable]:
    """``read(offsets, size)`` and ``write(offsets, rows)`` for byte offsets from global address ``base``, checked
    against the allocation holding ``base`` (a byte outside it is a fault naming the nearest allocation)."""
    mem = w.cta.launch.device.memory
    alloc = mem.allocation_of(base)

    def where(offsets: np.ndarray, size: int, kind: str) -> np.ndarray:
        if alloc is None:
            bad = base + (int(offsets[0]) if offsets.size else 0)
            _, near = mem.nearest(bad)
            raise _kf(f"invalid global {kind} of size {size} bytes by {ins.name} ({what}) of lane {lane}: address "
                      f"{bad:#x} is out of bounds{near}", lane, rule="accesses stay inside an allocation",
                      ref="PTX ISA 9.0 §5.1")
        rel = offsets + (base - alloc.base)
        out = (rel < 0) | (rel + size > alloc.size)
        if out.any():
            bad = alloc.base + int(rel[np.flatnonzero(out)[0]])
            _, near = mem.nearest(bad)
            raise _kf(f"invalid global {kind} of size {size} bytes by {ins.name} ({what}) of lane {lane}: address "
                      f"{bad:#x} is out of bounds{near}", lane, rule="accesses stay inside an allocation",
                      ref="PTX ISA 9.0 §5.1")
        return rel[:, None] + np.arange(size)

    def read(offsets: np.ndarray, size: int) -> np.ndarray:
        if not offsets.size:
            return np.zeros((0, size), np.uint8)
        at = where(offsets, size, "read")  # checked first: with no allocation it raises the fault
        return alloc.data[at]

    def write(offsets: np.ndarray, rows: np.ndarray) -> None:
        if offsets.size:
            at = where(offsets, rows.shape[1], "write")
            alloc.data[at] = rows
    return read, write


def _complete_tx(w, bar: int, nbytes: int, lane: int, ins: Instruction) -> None:
    """``complete_tx(nbytes)`` on the live mbarrier at shared address ``bar`` (async_ops' state and image)."""
    _, state = _live(w, bar, lane, ins)
    _model(lambda: state.complete_tx(nbytes), lane)
    _sync_image(w, bar)
    wake(w.cta)


# ------------------------------------------------------------------------------------------------------------
# operands
# ------------------------------------------------------------------------------------------------------------

def _refuse_mods(ins: Instruction) -> None:
    for m in ins.modifiers:
        why = None
        if m.startswith("multicast"):
            why = ".multicast::cluster reaches other CTAs of a cluster; simtc executes clusters of one CTA"
        elif m.startswith("cta_group::") and m != "cta_group::1":
            why = f".{m} issues for a CTA pair of a cluster; simtc executes clusters of one CTA"
        elif m.startswith("im2col"):
            why = f".{m} (im2col modes) has no data model in simtc (modelled: .tile, .tile::gather4)"
        elif m == "tile::scatter4":
            why = ".tile::scatter4 has no data model in simtc (modelled: .tile, .tile::gather4)"
        elif m == "cp_mask":
            why = ".cp_mask (a byte mask on the copy) is not modelled"
        if why:
            raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): {why}", rule="modelled TMA forms",
                                 ref=_REF_TENSOR)


def _tensor_reader(c, op: TensorRef) -> tuple[Callable, list[Callable]]:
    tensor = op.tensor
    addr = c.address(Address(tensor, 0), "generic") if isinstance(tensor, Sym) else c.reader(tensor, "u64")
    coords = [c.reader(x, "s32") for x in op.coords.items]
    return addr, coords


def _operands(ins: Instruction, n: int) -> list:
    ops = list(ins.operands)
    if len(ops) < n:
        raise PtxSyntaxError(f"line {ins.line}: {ins.name} takes {n} operands, got {len(ops)}",
                             rule="cp.async.bulk operands", ref=_REF_BULK)
    return ops


def _s32(v: np.ndarray, lane: int) -> int:
    return int(np.asarray(v[lane]).astype(np.uint32).view(np.int32))


# ------------------------------------------------------------------------------------------------------------
# cp.async.bulk.tensor / cp.reduce.async.bulk.tensor
# ------------------------------------------------------------------------------------------------------------

def _tensor_load(ins: Instruction, c):
    gather = "tile::gather4" in ins.modifiers
    ops = _operands(ins, 3)
    if not isinstance(ops[1], TensorRef):
        raise PtxSyntaxError(f"line {ins.line}: {ins.name}: the source is [tensorMap, {{coordinates}}], got {ops[1]}",
                             rule="tensor operands", ref=_REF_TENSOR)
    dim = next((int(m[:-1]) for m in ins.modifiers if m[:-1].isdigit() and m.endswith("d")), None)
    ncoords = len(ops[1].coords.items)
    if dim is None or ncoords != (5 if gather else dim):
        raise PtxSyntaxError(f"line {ins.line}: {ins.name} with {ncoords} coordinates", rule="one coordinate per "
                             "dimension (gather4: a column and four rows)", ref=_REF_TENSOR)
    dst_of = _shared_offsets(c, ops[0], ins, "destination")
    bar_of = _shared_offsets(c, ops[2], ins, "mbarrier")
    map_of, coords_of = _tensor_reader(c, ops[1])
    c.note("cp.async.bulk.tensor: the box is moved at issue by simtc.smem.tma from the tensor map of "
           "simtc.cuda.tensor_map (simtc's own 128-byte encoding); its bytes complete on the mbarrier at once")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        dsts, bars, maps = dst_of(w, f, lanes), bar_of(w, f, lanes), map_of(f)
        cs = [r(f) for r in coords_of]
        smem = w.cta.cta.smem
        for k, lane in enumerate(lanes.tolist()):
            tm = _tensor_map(w, f, int(maps[lane]), lane, ins)
            read, _ = _global(w, tm.address, lane, ins, "the tensor map's tensor")
            co = [_s32(v, lane) for v in cs]
            dst = int(dsts[k])
            if gather:
                nbytes = _model(lambda tm=tm, co=co, read=read, dst=dst: gather4_load(tm, co[0], co[1:], read, smem,
                                                                                       dst), lane)
            else:
                nbytes = _model(lambda tm=tm, co=co, read=read, dst=dst: tile_load(tm, co, read, smem, dst), lane)
            _complete_tx(w, int(bars[k]), nbytes, lane, ins)
        return None
    return body


def _tensor_store(ins: Instruction, c, reduce: str | None):
    ops = _operands(ins, 2)
    if not isinstance(ops[0], TensorRef):
        raise PtxSyntaxError(f"line {ins.line}: {ins.name}: the destination is [tensorMap, {{coordinates}}], got "
                             f"{ops[0]}", rule="tensor operands", ref=_REF_TENSOR)
    src_of = _shared_offsets(c, ops[1], ins, "source")
    map_of, coords_of = _tensor_reader(c, ops[0])
    c.note("cp.async.bulk.tensor (store): the box is written at issue by simtc.smem.tma.tile_store; "
           + _UNTIMED)

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        srcs, maps = src_of(w, f, lanes), map_of(f)
        cs = [r(f) for r in coords_of]
        smem = w.cta.cta.smem
        for k, lane in enumerate(lanes.tolist()):
            tm = _tensor_map(w, f, int(maps[lane]), lane, ins)
            read, write = _global(w, tm.address, lane, ins, "the tensor map's tensor")
            co = [_s32(v, lane) for v in cs]
            src = int(srcs[k])
            _model(lambda tm=tm, co=co, src=src, read=read, write=write: tile_store(
                tm, co, smem, src, write, read=read, reduce=reduce), lane)
        return None
    return body


# ------------------------------------------------------------------------------------------------------------
# cp.async.bulk (non-tensor)
# ------------------------------------------------------------------------------------------------------------

def _bulk_check(ins: Instruction, lane: int, size: int, *addrs: tuple[str, int]) -> None:
    if size % 16 or size < 0:
        raise _kf(f"{ins.name}: size {size} of lane {lane} is not a multiple of 16 bytes", lane,
                  rule="bulk copies move multiples of 16 bytes", ref=_REF_BULK)
    for what, a in addrs:
        if a % 16:
            raise _kf(f"{ins.name}: the {what} address {a:#x} of lane {lane} is not 16-byte aligned", lane,
                      rule="bulk-copy addresses are 16-byte aligned", ref=_REF_BULK)


def _smem_range(w, a: int, n: int, lane: int, ins: Instruction, what: str) -> None:
    if a < 0 or a + n > w.cta.shared_size:
        raise _kf(f"{ins.name}: the {what} bytes {a:#x}..{a + n:#x} of lane {lane} leave the CTA's "
                  f"{w.cta.shared_size} bytes of shared memory", lane, rule="accesses stay inside shared memory",
                  ref="PTX ISA 9.0 §5.1")


def _bulk(ins: Instruction, c):
    mods = ins.modifiers
    spaces = [m.split("::")[0] for m in mods[2:4] if m.split("::")[0] in ("shared", "global")]
    if len(spaces) != 2:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): simtc models cp.async.bulk global->shared, "
                             "shared->global and shared::cta->shared::cluster", rule="modelled bulk copies",
                             ref=_REF_BULK)
    dst_space, src_space = spaces
    ops = _operands(ins, 4 if dst_space == "shared" else 3)
    size_of = c.reader(ops[2], "u32")
    dst_of = _shared_offsets(c, ops[0], ins, "destination") if dst_space == "shared" else c.address(ops[0], "global")
    src_of = _shared_offsets(c, ops[1], ins, "source") if src_space == "shared" else c.address(ops[1], "global")
    bar_of = _shared_offsets(c, ops[3], ins, "mbarrier") if dst_space == "shared" else None
    c.note("cp.async.bulk: the bytes are copied at issue; " + _UNTIMED)

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        sizes = size_of(f)
        dsts = dst_of(w, f, lanes) if dst_space == "shared" else dst_of(f)[lanes]
        srcs = src_of(w, f, lanes) if src_space == "shared" else src_of(f)[lanes]
        bars = bar_of(w, f, lanes) if bar_of is not None else None
        smem = w.cta.cta.smem
        for k, lane in enumerate(lanes.tolist()):
            n, d, s = int(sizes[lane]), int(dsts[k]), int(srcs[k])
            _bulk_check(ins, lane, n, ("destination", d), ("source", s))
            offs = 16 * np.arange(n // 16, dtype=np.int64)
            if src_space == "global":
                read, _ = _global(w, s, lane, ins, "source")
                data = read(offs, 16)
            else:
                _smem_range(w, s, n, lane, ins, "source")
                data = smem.read(s, n).reshape(-1, 16)
            if dst_space == "global":
                _, write = _global(w, d, lane, ins, "destination")
                write(offs, data)
            else:
                _smem_range(w, d, n, lane, ins, "destination")
                smem.write(d, data.reshape(-1))
                _complete_tx(w, int(bars[k]), n, lane, ins)
        return None
    return body


# ------------------------------------------------------------------------------------------------------------
# cp.async (sm_80 style, per thread)
# ------------------------------------------------------------------------------------------------------------

def _cp_async(ins: Instruction, c):
    mods = ins.modifiers
    ops = list(ins.operands)
    if len(ops) < 3:
        raise PtxSyntaxError(f"line {ins.line}: {ins.name} takes [dst], [src], cp-size", rule="cp.async operands",
                             ref=_REF_CPASYNC)
    if not isinstance(ops[2], Imm) or int(ops[2].value) not in (4, 8, 16):
        raise PtxSyntaxError(f"line {ins.line}: {ins.name}: cp-size is the immediate 4, 8 or 16", rule="cp.async "
                             "cp-size", ref=_REF_CPASYNC)
    size = int(ops[2].value)
    if "cg" in mods and size != 16:
        raise PtxSyntaxError(f"line {ins.line}: cp.async.cg copies 16 bytes, not {size}", rule="cp.async.cg "
                             "cp-size is 16", ref=_REF_CPASYNC)
    rest = ops[3:]
    if "L2::cache_hint" in mods and rest:
        rest = rest[:-1]  # the cache policy
    src_size = ignore = None
    for o in rest:
        if isinstance(o, Reg) and c.reg(o.name)[1] == "pred":
            ignore = c.reader(o, "pred")
        else:
            src_size = c.reader(o, "u32")
    dst_of = _shared_offsets(c, ops[0], ins, "destination")
    src_of = c.address(ops[1], "global")
    c.note("cp.async: the bytes are copied at issue; " + _UNTIMED)

    span = np.arange(size, dtype=np.int64)

    def per_lane(w, lanes, dsts, srcs, ns, rows) -> None:
        """The copies lane by lane: raises the fault of the first lane at fault; fills ``rows`` otherwise."""
        for k, lane in enumerate(lanes.tolist()):
            d, s, n = int(dsts[k]), int(srcs[k]), int(ns[k])
            if d % size or s % size:
                raise _kf(f"{ins.name}: lane {lane}'s addresses (shared {d:#x}, global {s:#x}) are not {size}-byte "
                          "aligned", lane, rule="cp.async addresses are aligned to cp-size", ref=_REF_CPASYNC)
            if n > size:
                raise _kf(f"{ins.name}: src-size {n} of lane {lane} exceeds cp-size {size}", lane,
                          rule="src-size <= cp-size", ref=_REF_CPASYNC)
            if n:
                read, _ = _global(w, s, lane, ins, "source")
                rows[k, :n] = read(np.arange(n, dtype=np.int64), 1).reshape(-1)

    def gather(w, dsts, srcs, ns) -> np.ndarray | None:
        """All lanes' rows at once when every lane is aligned, within cp-size and reads one allocation; else None."""
        if ((dsts | srcs) & (size - 1)).any() or (ns > size).any():
            return None
        if not ns.size:
            return np.zeros((0, size), np.uint8)
        full = bool((ns == size).all())
        reading = None if full else ns > 0
        src = srcs if full else srcs[reading]
        if not src.size:
            return np.zeros((dsts.size, size), np.uint8)
        alloc = w.cta.launch.device.memory.allocation_of(int(src[0]))
        if alloc is None:
            return None
        rel = src - alloc.base
        end = int(rel.max()) + size if full else int((rel + ns[reading]).max())
        if int(rel.min()) < 0 or end > alloc.size:
            return None
        if full:  # every lane copies cp-size bytes
            return _word_rows(alloc.data, rel, size)
        rows = np.zeros((dsts.size, size), np.uint8)
        keep = span < ns[reading][:, None]  # the bytes past src-size stay zero
        rows[reading] = np.where(keep, alloc.data[np.where(keep, rel[:, None] + span, 0)], 0)
        return rows

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        dsts, raw_srcs = dst_of(w, f, lanes), src_of(f)[lanes]
        srcs = raw_srcs.astype(np.int64)
        ns = src_size(f)[lanes].astype(np.int64) if src_size is not None else np.full(lanes.size, size, np.int64)
        if ignore is not None:
            ns = np.where(ignore(f)[lanes], 0, ns)
        rows = gather(w, dsts, srcs, ns)
        if rows is None:  # a fault (raised with the first faulting lane's message) or several allocations
            rows = np.zeros((lanes.size, size), np.uint8)
            per_lane(w, lanes, dsts, raw_srcs, ns, rows)
        if lanes.size and (int(dsts.min()) < 0 or int(dsts.max()) + size > w.cta.shared_size):
            for k, lane in enumerate(lanes.tolist()):
                _smem_range(w, int(dsts[k]), size, lane, ins, "destination")
        w.cta.cta.smem.scatter(dsts.astype(np.int64), rows)
        return None
    return body


def _cp_async_arrive(ins: Instruction, c):
    noinc = "noinc" in ins.modifiers
    bar_of = _shared_offsets(c, ins.operands[0], ins, "mbarrier")
    c.note("cp.async.mbarrier.arrive: the thread's cp.async copies have completed at issue, so the arrive happens "
           "at once (.noinc: one arrival; without it the pending count is raised by one first, a net change of 0)")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        for lane, a in zip(lanes.tolist(), bar_of(w, f, lanes).tolist(), strict=True):
            name, _ = _live(w, a, lane, ins)
            if noinc:
                _model(lambda name=name, lane=lane: _run(MbarrierArrive(name, 1), w, lane), lane)
                _sync_image(w, a)
        wake(w.cta)
        return None
    return body


def _nothing(text: str) -> Callable:
    def compile_nothing(ins: Instruction, c):
        c.note(f"{'.'.join(ins.name.split('.')[:4])}: {text}")
        return lambda w, f, e, m, full: None
    return compile_nothing


# ------------------------------------------------------------------------------------------------------------
# dispatch
# ------------------------------------------------------------------------------------------------------------

def _cp(ins: Instruction, c):
    """The compiler of every ``cp.*`` instruction."""
    parts = ins.name.split(".")
    mods = set(parts[1:])
    _refuse_mods(ins)
    if parts[1] == "reduce":
        if "tensor" not in mods:
            raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): the non-tensor cp.reduce.async.bulk is not "
                                 "modelled", rule="modelled bulk reductions", ref=_REF_REDUCE)
        op = next((m for m in parts if m in _REDUCTIONS), None)
        if op is None:
            raise PtxSyntaxError(f"line {ins.line}: {ins.name} names no reduction ({', '.join(_REDUCTIONS)})",
                                 rule="cp.reduce.async.bulk.tensor .redOp", ref=_REF_REDUCE)
        return _tensor_store(ins, c, op)
    if parts[1:3] != ["async", "bulk"] and parts[1] == "async":
        kind = parts[2] if len(parts) > 2 else ""
        if kind in ("ca", "cg"):
            return _cp_async(ins, c)
        if kind in ("commit_group", "wait_group", "wait_all"):
            return _nothing(_UNTIMED)(ins, c)
        if kind == "mbarrier":
            return _cp_async_arrive(ins, c)
    if parts[1:3] == ["async", "bulk"]:
        kind = parts[3] if len(parts) > 3 else ""
        if kind in ("commit_group", "wait_group"):
            return _nothing(_UNTIMED)(ins, c)
        if kind == "prefetch":
            return _nothing("accepted: a prefetch into L2, no effect on values in simtc (no caches are modelled)")(
                ins, c)
        if kind == "tensor":
            if parts[5].split("::")[0] == "shared":
                return _tensor_load(ins, c)
            return _tensor_store(ins, c, None)
        return _bulk(ins, c)
    raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): not modelled", rule="modelled cp.* forms",
                         ref="PTX ISA 9.0 §9.7.9.25")


def install(handlers: dict, refused: dict) -> None:
    """Put the ``cp`` compiler into the executor's opcode table ``handlers`` and take ``cp`` off ``refused``."""
    handlers["cp"] = _cp
    refused.pop("cp", None)
