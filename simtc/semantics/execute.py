"""``execute(record, cta, *, warp=0)``: one free function per record type (``functools.singledispatch``).

The untimed semantics: every asynchronous operation (``tcgen05.cp/mma/ld/st``, TMA, ``wgmma``)
completes when it is issued, so ``tcgen05.commit`` arrives on its mbarrier at once and waits
and fences change no state (they are still checked: a wait on an unknown barrier is an
error). ``mbarrier.try_wait`` raises :class:`~simtc.semantics.WouldBlock` when the phase has
not completed: a scheduler retries it later (:func:`simtc.semantics.run_program`).

``threads`` is how many threads of ``warp`` execute the record (1-32); it matters for
non-elected arrivals (``mbarrier.arrive``: every executing thread arrives; ``bar.sync``).

Registers: ``cta.regs[warp][name]`` holds a (threads, registers) ``uint32`` array for
``tcgen05.ld`` and ``ld.shared`` (per thread: ``width`` bytes as uint8/uint16/uint32 words), and a
warpgroup's ``wgmma`` registers, held by the warp that executes the record: the accumulator fragment
((128, N/2) ``float32`` for an ``.f32`` D, (128, N/4) ``uint32`` ``.f16x2`` words for an ``.f16`` D) and,
in the RS form, A's (128, 4) ``uint32`` registers (:mod:`simtc.mma.wgmma`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from simtc.isa.base import Instr
from simtc.isa.cuda_core import CudaCoreBlock
from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx, MbarrierInit, MbarrierInval, MbarrierTryWait
from simtc.isa.shared import LdShared, StShared
from simtc.isa.sync import BarArrive, BarSync, ElectSync, FenceProxyAsync
from simtc.isa.tcgen05 import (
    Alloc,
    Commit,
    Cp,
    Dealloc,
    FenceAfterThreadSync,
    FenceBeforeThreadSync,
    Ld,
    Mma,
    RelinquishAllocPermit,
    Shift,
    St,
    WaitLd,
    WaitSt,
)
from simtc.isa.tma import BulkCommitGroup, BulkWaitGroupRead, CpAsyncBulk, CpAsyncBulkTensor, CpAsyncBulkTensorStore
from simtc.isa.wgmma import WgmmaCommitGroup, WgmmaFence, WgmmaMmaAsync, WgmmaWaitGroup
from simtc.mma.tcgen05 import tcgen05_mma
from simtc.mma.wgmma import wgmma_mma_async, wgmma_mma_async_rs
from simtc.semantics.cta import Cta, MbarrierState, NamedBarrierState, SemanticsError, WouldBlock
from simtc.smem.tma import TensorMap, gather4_load, numpy_reader
from simtc.tmem.cp import tcgen05_cp

__all__ = ["EFFECTS", "execute", "register_effect"]

_REF_MBAR = "PTX ISA 9.0 §9.7.13.15"

EFFECTS: dict[str, Callable] = {}
"""Effect name -> ``fn(cta, record, warp)``: the numpy work a :class:`~simtc.isa.cuda_core.CudaCoreBlock` stands for."""


def register_effect(name: str) -> Callable[[Callable], Callable]:
    """Decorator: ``@register_effect("softmax_exp2")`` makes ``fn(cta, record, warp)`` that effect."""

    def deco(fn: Callable) -> Callable:
        if name in EFFECTS and EFFECTS[name] is not fn:
            raise SemanticsError(f"effect {name!r} is registered already", rule="effect names are unique")
        EFFECTS[name] = fn
        return fn

    return deco


def _check_threads(threads: int) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not 1 <= threads <= 32:
        raise SemanticsError(f"threads = {threads!r}: a warp executes a record with 1 to 32 threads",
                             rule="threads of one warp")
    return int(threads)


def execute(record: Instr, cta: Cta, *, warp: int = 0, threads: int = 32) -> None:
    """Apply ``record``'s effect to ``cta`` as warp ``warp`` (``threads`` of its threads) executes it.

    Shared-memory and TMEM accesses go through the memories' access API while ``cta.current`` is
    ``record``, so observers see them and the record becomes the last writer of what it writes.
    """
    threads = _check_threads(threads)
    before, cta.current = cta.current, record
    try:
        _apply(record, cta, int(warp), threads)
    finally:
        cta.current = before


@functools.singledispatch
def _apply(record, cta: Cta, warp: int, threads: int) -> None:
    raise SemanticsError(f"no semantics for {type(record).__name__} ({getattr(record, 'op', record)!r})",
                         rule="every record type has a semantics function")


# ---- tcgen05: allocation ------------------------------------------------------------------------------
@_apply.register
def _alloc(r: Alloc, cta: Cta, warp: int, threads: int) -> None:
    addr = cta.tmem.alloc(r.ncols, warp=warp)
    cta.smem.write(r.dst, np.array([addr.taddr], dtype="<u4"), writer=r)


@_apply.register
def _dealloc(r: Dealloc, cta: Cta, warp: int, threads: int) -> None:
    cta.tmem.dealloc(r.taddr, r.ncols, warp=warp)


@_apply.register
def _relinquish(r: RelinquishAllocPermit, cta: Cta, warp: int, threads: int) -> None:
    cta.tmem.relinquish_alloc_permit(warp=warp)


# ---- tcgen05: data movement and MMA -------------------------------------------------------------------
@_apply.register
def _cp(r: Cp, cta: Cta, warp: int, threads: int) -> None:
    tcgen05_cp(cta.tmem, r.taddr, cta.smem, r.desc, r.shape, r.multicast, label=r)


@_apply.register
def _mma(r: Mma, cta: Cta, warp: int, threads: int) -> None:
    a = {"a_desc": r.a} if r.form == "SS" else {"a_taddr": r.a}
    tcgen05_mma(cta.tmem, cta.smem, d_taddr=r.d_taddr, b_desc=r.b_desc, idesc=r.idesc,
                enable_input_d=r.enable_input_d, ws=r.ws, label=r.label or r.ptx(), writer=r, **a)


@_apply.register
def _commit(r: Commit, cta: Cta, warp: int, threads: int) -> None:
    # untimed: every earlier tcgen05 operation of this thread has completed, so the arrive happens now
    cta.mbarrier(r.bar).arrive(1)


def _ldst_taddr(r: Ld | St, warp: int) -> int:
    return (r.lane0(warp) << 16) | (r.taddr & 0xFFFF)


@_apply.register
def _ld(r: Ld, cta: Cta, warp: int, threads: int) -> None:
    cta.warp_regs(warp)[r.dst] = cta.tmem.ld(_ldst_taddr(r, warp), r._op(), warp=warp)


@_apply.register
def _st(r: St, cta: Cta, warp: int, threads: int) -> None:
    cta.tmem.st(_ldst_taddr(r, warp), cta.reg(warp, r.src), r._op(), warp=warp, label=r)


@_apply.register
def _elect(r: ElectSync, cta: Cta, warp: int, threads: int) -> None:
    """``elect.sync`` picks the lane the record's role already is; nothing to compute."""


@_apply.register
def _shift(r: Shift, cta: Cta, warp: int, threads: int) -> None:
    raise SemanticsError(f"{r.ptx()}: the data movement of tcgen05.shift is not modelled (the record's footprint is an "
                         "assumption: the PTX text simtc cites does not say which lanes take part), so a Program "
                         "with it runs on the engine and the checker only", rule="modelled tcgen05 data movement",
                         ref="PTX ISA 9.0 §9.7.16.9.3")


@_apply.register(WaitLd)
@_apply.register(WaitSt)
@_apply.register(FenceBeforeThreadSync)
@_apply.register(FenceAfterThreadSync)
@_apply.register(FenceProxyAsync)
@_apply.register(WgmmaFence)
@_apply.register(WgmmaCommitGroup)
@_apply.register(WgmmaWaitGroup)
@_apply.register(BulkCommitGroup)
@_apply.register(BulkWaitGroupRead)
def _no_state(r: Instr, cta: Cta, warp: int, threads: int) -> None:
    """Waits and fences: ordering only; in the untimed mode everything before them has completed."""


# ---- mbarriers ------------------------------------------------------------------------------------------
@_apply.register
def _mbar_init(r: MbarrierInit, cta: Cta, warp: int, threads: int) -> None:
    cta.mbarriers[r.bar] = MbarrierState(r.bar, r.count, r.count)


@_apply.register
def _mbar_inval(r: MbarrierInval, cta: Cta, warp: int, threads: int) -> None:
    """The object stops being an mbarrier (PTX ISA 9.0 §9.7.13.15.10): a later use is "used before mbarrier.init"."""
    cta.mbarrier(r.bar)
    del cta.mbarriers[r.bar]


def _keep_token(r: MbarrierArrive | MbarrierArriveExpectTx, cta: Cta, warp: int, phase: int) -> None:
    """The arrive's ``state`` token: the phase it arrived in (simtc's reading of the opaque token, as the checker's)."""
    if r.state:
        cta.warp_regs(warp)[r.state] = ("mbarrier-token", r.bar, phase)


@_apply.register
def _mbar_arrive(r: MbarrierArrive, cta: Cta, warp: int, threads: int) -> None:
    bar = cta.mbarrier(r.bar)
    _keep_token(r, cta, warp, bar.phase)
    bar.arrive(r.count * threads)


@_apply.register
def _mbar_expect(r: MbarrierArriveExpectTx, cta: Cta, warp: int, threads: int) -> None:
    bar = cta.mbarrier(r.bar)
    _keep_token(r, cta, warp, bar.phase)
    bar.expect_tx(r.tx_bytes)
    bar.arrive(1)


@_apply.register
def _mbar_wait(r: MbarrierTryWait, cta: Cta, warp: int, threads: int) -> None:
    bar = cta.mbarrier(r.bar)
    if r.token:
        tok = cta.warp_regs(warp).get(r.token)
        if not (isinstance(tok, tuple) and tok[:2] == ("mbarrier-token", r.bar)):
            raise SemanticsError(f"warp {warp} waits on mbarrier {r.bar!r} with {r.token!r}, which holds no state "
                                 f"token of an arrive on {r.bar!r}", rule="a token wait takes the state of an "
                                 "arrive on the same mbarrier", ref=f"{_REF_MBAR}.16")
        if bar.phase <= tok[2]:
            raise WouldBlock(f"warp {warp} waits on mbarrier {r.bar!r} for phase {tok[2]} (its token), which has not "
                             f"completed ({bar.pending} of {bar.count} arrivals and {bar.tx} tx bytes pending)",
                             rule="try_wait with a token returns once the token's phase has completed",
                             ref=f"{_REF_MBAR}.16")
        return
    if not bar.completed(r.parity):
        raise WouldBlock(f"warp {warp} waits on mbarrier {r.bar!r} for the phase of parity {r.parity}, which has not "
                         f"completed ({bar.pending} of {bar.count} arrivals and {bar.tx} tx bytes pending)",
                         rule="try_wait.parity returns once the phase with that parity has completed",
                         ref=f"{_REF_MBAR}.16")


# ---- named barriers -------------------------------------------------------------------------------------
def _named(cta: Cta, r: BarSync | BarArrive, warp: int) -> NamedBarrierState:
    bid = r.id_for(warp)
    b = cta.named.setdefault(bid, NamedBarrierState(bid, r.threads))
    if b.threads != r.threads:
        raise SemanticsError(f"named barrier {bid}: {r.op} with {r.threads} threads while this generation expects "
                             f"{b.threads}", rule="all participants of a named barrier give the same thread count",
                             ref="PTX ISA 9.0 §9.7.13.1")
    return b


def _bar_arrive(b: NamedBarrierState, threads: int) -> None:
    b.arrived += threads
    if b.arrived >= b.threads:
        b.generation += 1
        b.arrived = 0


@_apply.register
def _bar_sync(r: BarSync, cta: Cta, warp: int, threads: int) -> None:
    key = (warp, r.id_for(warp))
    b = _named(cta, r, warp)
    if key not in cta._bar_waits:  # first attempt: arrive (a retry after WouldBlock does not arrive again)
        cta._bar_waits[key] = b.generation
        _bar_arrive(b, 32)  # bar.sync counts whole warps (PTX ISA 9.0 §9.7.13.1)
    if b.generation == cta._bar_waits[key]:
        raise WouldBlock(f"warp {warp} waits at named barrier {key[1]}: {b.arrived} of {b.threads} threads arrived",
                         rule="bar.sync waits until the barrier's thread count has arrived",
                         ref="PTX ISA 9.0 §9.7.13.1")
    del cta._bar_waits[key]


@_apply.register
def _bar_arrive_rec(r: BarArrive, cta: Cta, warp: int, threads: int) -> None:
    _bar_arrive(_named(cta, r, warp), 32)


# ---- TMA ------------------------------------------------------------------------------------------------
def _gmem(cta: Cta, name: str) -> np.ndarray:
    try:
        return np.ascontiguousarray(cta.gmem[name]).reshape(-1).view(np.uint8)
    except KeyError:
        raise SemanticsError(f"no global tensor named {name!r} (have {sorted(cta.gmem)})",
                             rule="TMA sources are named global tensors") from None


@_apply.register
def _tma_load(r: CpAsyncBulkTensor, cta: Cta, warp: int, threads: int) -> None:
    """A tile load: ``nbytes`` bytes of the named global tensor, from byte ``coords[0]`` (default 0).

    simtc moves TMA data as bytes: the global tensor holds the box's bytes in the order they land
    in shared memory (its swizzle already applied) [simplification: the tensor map is not modelled].
    """
    if r.mode == "gather4":
        _gather4(r, cta, warp)
        return
    if r.mode != "tile":
        raise SemanticsError(f"{r.ptx()}: only tile and gather4 tensor loads have data semantics in simtc",
                             rule="modelled TMA load modes (tile, gather4)")
    src = _gmem(cta, r.tensor)
    start = r.coords[0] if r.coords else 0
    if start < 0 or start + r.nbytes > src.size:
        raise SemanticsError(f"{r.ptx()}: bytes {start}..{start + r.nbytes} of {r.tensor!r} ({src.size} B)",
                             rule="a tile load stays inside its global tensor")
    cta.smem.write(r.dst, src[start:start + r.nbytes], writer=r)
    cta.mbarrier(r.bar).complete_tx(r.nbytes)


def _gather4(r: CpAsyncBulkTensor, cta: Cta, warp: int) -> None:
    """``.tile::gather4``: four rows of a 2-D global tensor, ``nbytes / 4`` bytes each, land one after another.

    The global tensor is a 2-D array (rows x elements); the column coordinate counts its elements.
    Row coordinates come from ``coords[1:5]`` or, at run time, from the issuing thread's register
    ``coord_reg`` (four int32). A row coordinate outside the tensor (FlashMLA writes -1 for invalid
    tokens) is filled with zeros, as TMA fills out-of-bound boxes (PTX ISA 9.0 §5.5.3.3 Out of Boundary
    Access; FlashMLA ``kernel.cuh`` relies on it). ``swizzle`` permutes the destination's 16-byte
    chunks by their absolute address. The data move is TMA's one model, :func:`simtc.smem.tma.gather4_load`,
    on the tensor map the named tensor stands for (:func:`_gather4_map`).
    """
    try:
        src = cta.gmem[r.tensor]
    except KeyError:
        raise SemanticsError(f"no global tensor named {r.tensor!r} (have {sorted(cta.gmem)})",
                             rule="TMA sources are named global tensors") from None
    if src.ndim != 2:
        raise SemanticsError(f"{r.ptx()}: gather4 reads a 2-D global tensor, {r.tensor!r} has shape {src.shape}",
                             rule=".tile::gather4 is .2d", ref="PTX ISA 9.0 §9.7.9.25.5.2")
    if r.coord_reg:
        rows = np.ascontiguousarray(cta.reg(warp, r.coord_reg)).reshape(-1).view(np.int32)[:4]
        col = r.coords[0] if r.coords else 0
    elif len(r.coords) == 5:
        col, rows = r.coords[0], np.asarray(r.coords[1:], dtype=np.int64)
    else:
        raise SemanticsError(f"{r.ptx()}: a gather4 needs its row coordinates (coords or coord_reg)",
                             rule=".tile::gather4 has 4 row coordinates", ref="PTX ISA 9.0 §9.7.9.25.5.2")
    raw = np.ascontiguousarray(src).view(np.uint8).reshape(src.shape[0], -1)
    tm, col_elem = _gather4_map(r, raw, int(col) * src.dtype.itemsize)
    gather4_load(tm, col_elem, [int(x) for x in rows], numpy_reader(raw), cta.smem, r.dst, writer=r)
    cta.mbarrier(r.bar).complete_tx(r.nbytes)


def _gather4_map(r: CpAsyncBulkTensor, raw: np.ndarray, c0: int):
    """The 2-D tensor map a named tensor's gather4 reads (simtc.smem.tma.TensorMap) and the column in its
    elements: the widest element (8, 4, 2 or 1 bytes) that divides the row pitch, the box row and the column,
    as FlashMLA's maps take INT64 elements for fp8 rows."""
    row_bytes = r.nbytes // 4
    pitch = raw.shape[1]
    if c0 < 0 or c0 + row_bytes > pitch:
        raise SemanticsError(f"{r.ptx()}: bytes {c0}..{c0 + row_bytes} of a {pitch}-byte row of {r.tensor!r}",
                             rule="a gather4 box stays inside its tensor's rows")
    es = next((e for e in (8, 4, 2, 1) if not (row_bytes % e or c0 % e or pitch % e) and row_bytes // e <= 256), 0)
    if not es or pitch % 16:
        raise SemanticsError(f"{r.ptx()}: no tensor map reads {row_bytes}-byte rows at byte {c0} of {pitch}-byte "
                             f"rows of {r.tensor!r}", rule="a gather4 row is at most 256 elements; a row pitch is "
                             "a multiple of 16 bytes", ref="CUDA Driver API, cuTensorMapEncodeTiled")
    sw = {"": "none", "SW32": "32B", "SW64": "64B", "SW128": "128B"}[r.swizzle]
    tm = TensorMap({8: "u64", 4: "u32", 2: "u16", 1: "u8"}[es], 0, dims=(pitch // es, raw.shape[0]),
                   strides=(pitch,), box=(row_bytes // es, 1), swizzle=sw)
    return tm, c0 // es


def _store_to_gmem(cta: Cta, name: str, at: int, data: np.ndarray) -> None:
    dst = _gmem(cta, name) if name in cta.gmem else None
    if dst is None:
        cta.gmem[name] = np.zeros(at + data.size, np.uint8)
        dst = cta.gmem[name]
    if at + data.size > dst.size:
        raise SemanticsError(f"store of {data.size} B at byte {at} leaves global tensor {name!r} ({dst.size} B)",
                             rule="a store stays inside its global tensor")
    dst[at:at + data.size] = data


@_apply.register
def _tma_store(r: CpAsyncBulkTensorStore, cta: Cta, warp: int, threads: int) -> None:
    if not r.issued_by(warp):
        return
    _store_to_gmem(cta, r.tensor or "global", r.coords[0] if r.coords else 0, cta.smem.read(r.src, r.nbytes))


@_apply.register
def _bulk_store(r: CpAsyncBulk, cta: Cta, warp: int, threads: int) -> None:
    if not r.issued_by(warp):
        return
    _store_to_gmem(cta, r.dst or "global", 0, cta.smem.read(r.src, r.nbytes))


# ---- ld.shared / st.shared --------------------------------------------------------------------------------
_WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint32, 16: np.uint32}


def _thread_addresses(r: LdShared | StShared, threads: int, warp: int) -> np.ndarray:
    offs = np.asarray(r.thread_offsets(), dtype=np.int64)
    if threads > offs.size:
        raise SemanticsError(f"{r.ptx()}: {threads} threads execute it but the record describes {offs.size}",
                             rule="a shared access describes every executing thread")
    return r.addr + r.warp_offset(warp) + offs[:threads]


@_apply.register
def _ld_shared(r: LdShared, cta: Cta, warp: int, threads: int) -> None:
    raw = cta.smem.gather(_thread_addresses(r, threads, warp), r.width)  # (threads, width) bytes
    cta.warp_regs(warp)[r.dst] = np.ascontiguousarray(raw).view(_WORD[r.width])


@_apply.register
def _st_shared(r: StShared, cta: Cta, warp: int, threads: int) -> None:
    v = np.ascontiguousarray(cta.reg(warp, r.src))
    raw = v.reshape(v.shape[0], -1).view(np.uint8) if v.ndim else v.view(np.uint8)
    if raw.shape != (threads, r.width):
        raise SemanticsError(f"{r.ptx()}: register {r.src!r} holds {raw.shape[1] if raw.ndim == 2 else 0} B for "
                             f"each of {raw.shape[0]} threads; the store needs {r.width} B for each of {threads}",
                             rule="st.shared stores width bytes per thread")
    cta.smem.scatter(_thread_addresses(r, threads, warp), raw, writer=r)


# ---- wgmma ----------------------------------------------------------------------------------------------
@_apply.register
def _wgmma(r: WgmmaMmaAsync, cta: Cta, warp: int, threads: int) -> None:
    if r.m != 64 or r.k != 16 or r.dtype not in ("bf16", "fp16"):
        raise SemanticsError(f"{r.ptx()}: simtc models m64nNk16 with .bf16 or .f16 inputs (A from shared memory or "
                             "registers, an .f32 or .f16 accumulator)", rule="modelled wgmma forms",
                             ref="PTX ISA 9.0 §9.7.15.5")
    regs = cta.warp_regs(warp)
    acc = regs.get(r.d) if r.scale_d else None
    if r.scale_d and acc is None:
        raise SemanticsError(f"{r.ptx()}: scale-d = 1 reads accumulator {r.d!r}, which warp {warp} does not hold",
                             rule="registers are written before they are read")
    common = dict(n=r.n, dtype=r.dtype, b_major=r.b_major, acc=acc, scale_d=r.scale_d, negate_a=r.scale_a < 0,
                  negate_b=r.scale_b < 0, d_dtype=r.d_dtype)
    if isinstance(r.a, str):  # RS: the warpgroup's (128, 4) A registers, held by the executing warp
        a_regs = regs.get(r.a)
        if a_regs is None:
            raise SemanticsError(f"{r.ptx()}: A is read from registers {r.a!r}, which warp {warp} does not hold",
                                 rule="registers are written before they are read")
        out = wgmma_mma_async_rs(cta.smem, a_regs, r.b_desc, **common)
    else:
        out = wgmma_mma_async(cta.smem, r.a, r.b_desc, a_major=r.a_major, **common)
    regs[r.d] = out


# ---- CUDA-core blocks -----------------------------------------------------------------------------------
@_apply.register
def _cuda_core(r: CudaCoreBlock, cta: Cta, warp: int, threads: int) -> None:
    if not r.effect:
        return  # timing only
    fn = EFFECTS.get(r.effect)
    if fn is None:
        raise SemanticsError(f"CUDA-core block {r.name!r}: no effect named {r.effect!r} is registered "
                             f"(known: {sorted(EFFECTS)})", rule="CudaCoreBlock effects are registered",
                             ref="simtc.semantics.register_effect")
    fn(cta, r, warp)
