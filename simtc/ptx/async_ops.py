"""Asynchronous and tensor-core PTX in the executor (``mbarrier``, ``tcgen05``, ``wgmma``, fences) via simtc's models.

Each handler here compiles one PTX instruction into a closure of :mod:`simtc.ptx.executor` (same signature as the
executor's own: ``compile(instruction, compiler) -> body(warp, frame, entry, mask, full)``). At run time the body
reads its operands' values (descriptor words as 64-bit registers, instruction descriptors as 32-bit ones, TMEM
and shared-memory addresses), decodes them **as the hardware reads them** into the instruction records of
:mod:`simtc.isa` (:class:`~simtc.isa.tcgen05.Mma`, :class:`~simtc.isa.tcgen05.Cp`, :class:`~simtc.isa.tcgen05.Ld`,
:class:`~simtc.isa.mbarrier.MbarrierInit`, ...; descriptors through :meth:`simtc.smem.desc.SmemDescriptor.from_u64`
and :meth:`simtc.isa.idesc.InstrDescriptor.from_u32`) and applies them with :func:`simtc.semantics.execute` on the
CTA's :class:`simtc.semantics.Cta` -- the functions the hand replay of FlashMLA uses, never a second copy. The
executor's shared memory *is* that Cta's :class:`~simtc.smem.SharedMemory`, so ``st.shared`` by CUDA-core code
and a ``tcgen05.cp``/``mma`` operand read see the same bytes.

**Issue.** ``tcgen05.mma``/``cp``/``commit`` and the ``mbarrier`` operations are per thread: every executing lane
issues its own, in ascending lane order (kernels elect one thread). The ``.sync.aligned`` instructions
(``tcgen05.alloc``/``dealloc``/``relinquish_alloc_permit``/``ld``/``st``/``wait``) are issued once by the whole
converged warp with the same operands in every thread (PTX ISA 9.0 §9.7.16.5, Table 46); anything else is a
:class:`~simtc.ptx.errors.KernelFault`.

**Untimed.** As in :mod:`simtc.semantics`, every asynchronous operation completes when it is issued: a
``tcgen05.commit`` arrives on its mbarrier at once, and the waits and fences (``tcgen05.wait::*``,
``tcgen05.fence::*``, ``fence.proxy.async``, ``fence.mbarrier_init``) change no state.

**mbarriers** are identified by their shared-memory address; the record's name is derived from it
(:func:`mbarrier_name`: ``mbar@0x1008``). The object occupies its 8 bytes of shared memory, 8-byte aligned (PTX ISA
9.0 §9.7.13.15.1); its state (pending arrivals, tx-count, phase) is the Cta's
:class:`~simtc.semantics.MbarrierState`. PTX calls the object's contents opaque (§9.7.13.15.2), so the 8 bytes
hold **simtc's own encoding** of that state (:func:`mbarrier_image`: bits 0-19 pending arrivals, 20-39 expected
arrivals, 40-60 tx-count in two's complement, bit 63 the current phase's parity); an access other than an mbarrier
instruction that changes them is reported when the barrier is next used (§9.7.13.15). The 64-bit *state* an
arrive returns is the same encoding, taken right after the arrival with the parity of the phase it arrived on
(§9.7.13.15.13: the state of the phase prior to the arrive); ``mbarrier.pending_count`` reads its pending count
(simtc's reading of §9.7.13.15.17 [inferred]).

**Waiting.** ``mbarrier.try_wait`` whose phase has not completed suspends the warp at that instruction (PTX lets
``try_wait`` suspend for a time limit; simtc's limit is unbounded) and the executor runs the other warps; the
operation that completes the phase wakes it. When every warp waits, the executor's deadlock report names each
warp's PTX line and what it waits on (the barrier, its address and the parity). ``mbarrier.test_wait`` never
suspends. A ``tcgen05.alloc`` that finds no free columns suspends likewise until a ``tcgen05.dealloc``.

**wgmma** (sm_90a): the semantics take a warpgroup's whole accumulator fragment (:mod:`simtc.mma.wgmma`: N/2
``.f32`` or N/4 ``.f16x2`` registers per thread), so a ``wgmma.mma_async`` waits until all four warps of its
warpgroup have issued it (every warp must, with the same descriptors: PTX ISA 9.0 §9.7.15.1), then executes once on
the fragment gathered from the four warps' registers (thread 32w + l, register i) and writes each warp's rows back.
A from shared memory (SS: ``d, a-desc, b-desc, ...``) and from registers (RS: ``d, {a0, a1, a2, a3}, b-desc, ...``,
A's (128, 4) registers gathered the same way) with ``.bf16`` or ``.f16`` inputs and an ``.f32`` or ``.f16`` D
(``.bf16`` with an ``.f32`` D only); ``wgmma.fence``/``commit_group``/``wait_group`` are their records, ordering
only. ``.tf32``, ``.e4m3``/``.e5m2``, ``.s8``/``.u8``, ``.b1`` inputs and ``.sp`` are refused by name.

**Refused by name** (:class:`~simtc.ptx.errors.PtxUnsupported`): clusters and CTA pairs (``.cta_group::2``,
``.multicast::cluster``), sparse and block-scaled MMAs, ``.ashift``, a non-zero ``disable-output-lane``,
``scale-input-d`` or ``.ws`` zero-column mask (the record does not carry them), ``tcgen05.cp`` decompression,
``tcgen05.shift`` (its lanes are not documented), ``mbarrier.arrive_drop``, and the MMA kinds simtc's tensor-core
model does not execute (it says which). A use the models refuse (the lane-quadrant rule, an allocation of more
than 512 columns, an illegal instruction descriptor, ...) is a :class:`~simtc.ptx.errors.KernelFault` carrying the
model's message and rule, with the thread and the PTX line added by the executor.

:func:`install` puts these compilers into the executor's opcode table; :mod:`simtc.ptx.executor` calls it once.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator

import numpy as np
from attrs import define, field

from simtc.errors import SimtcError, TmemWouldBlock
from simtc.isa.idesc import KINDS, InstrDescriptor
from simtc.isa.mbarrier import MAX_TX, MbarrierArrive, MbarrierArriveExpectTx, MbarrierInit, MbarrierTryWait
from simtc.isa.sync import FenceProxyAsync
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
    St,
    WaitLd,
    WaitSt,
)
from simtc.isa.wgmma import WgmmaCommitGroup, WgmmaFence, WgmmaMmaAsync, WgmmaWaitGroup
from simtc.ptx.errors import KernelFault, PtxSyntaxError, PtxUnsupported
from simtc.ptx.ir import Address, Imm, Instruction, Sink, Vector
from simtc.ptx.memory import SHARED_WINDOW, window_of
from simtc.semantics import MbarrierState, WouldBlock, execute
from simtc.smem.desc import SmemDescriptor

__all__ = ["HANDLERS", "MBARRIER_SIZE", "install", "issued", "mbarrier_image", "mbarrier_name", "wake"]

MBARRIER_SIZE = 8
"""Bytes of an mbarrier object, also its alignment (PTX ISA 9.0 §9.7.13.15.1)."""
_REF_MBAR = "PTX ISA 9.0 §9.7.13.15"
_REF_ISSUE = "PTX ISA 9.0 §9.7.16.5 Table 46 (.sync.aligned: one converged warp, the same operands)"
_REF_CTA_GROUP = "PTX ISA 9.0 §9.7.16.5 Table 46 (.cta_group::2: a CTA pair of a cluster)"
_REF_MMA = "PTX ISA 9.0 §9.7.16.10.9"
_REF_LDST = "PTX ISA 9.0 §9.7.16.8.3"
_BLOCK: list[int] = []
"""The executor's BLOCK result, given to :func:`install` (one source of truth: :data:`simtc.ptx.executor.BLOCK`)."""


# ------------------------------------------------------------------------------------------------------------
# per-CTA state kept beside the executor's
# ------------------------------------------------------------------------------------------------------------

@define(eq=False)
class _CtaAsync:
    """What this module keeps per executed CTA: live mbarriers by address, their last image, waiting warps."""

    images: dict[int, bytes] = field(factory=dict)
    """Shared-memory address of each live mbarrier -> the 8 bytes simtc last wrote there."""
    waits: dict[int, tuple] = field(factory=dict)
    """Warp id -> (warp, kind, what): ``("mbarrier", [(name, parity), ...])``, or ``("alloc", ready)``."""


_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""The executor's CtaState -> this module's :class:`_CtaAsync` (gone with the CTA)."""


def _state(cs) -> _CtaAsync:
    st = _STATE.get(cs)
    if st is None:
        st = _STATE[cs] = _CtaAsync()
    return st


_SINKS: list[list] = []


@contextlib.contextmanager
def issued() -> Iterator[list[tuple]]:
    """``with issued() as log:`` collects ``(ctaid, warp, lane, record)`` for every record this module executes.

    The test of the dual-QK kernel compares the collected ``tcgen05.cp``/``mma`` records with what
    :mod:`simtc.hw.tcgen05` says the kernel issues.
    """
    records: list[tuple] = []
    _SINKS.append(records)
    try:
        yield records
    finally:
        _SINKS.remove(records)



def _run(record, w, lane: int, threads: int = 1, *, warp: int | None = None) -> None:
    """``execute(record, cta, warp=w.wid, threads=...)`` (``warp``: another CTA warp index), logged when asked."""
    wid = w.wid if warp is None else warp
    if _SINKS:
        for s in _SINKS:
            s.append((w.cta.ctaid, wid, lane, record))
    execute(record, w.cta.cta, warp=wid, threads=threads)


def _fault(err: SimtcError, lane: int) -> KernelFault:
    """A model's error as a fault of thread ``lane`` (the executor adds the thread, the PTX line and the source)."""
    k = KernelFault(err.message, rule=err.rule, ref=err.ref)
    k.lane = lane
    return k


def _kfault(message: str, lane: int, *, rule: str, ref: str | None = None) -> KernelFault:
    k = KernelFault(message, rule=rule, ref=ref)
    k.lane = lane
    return k


def wake(cs) -> None:
    """Let the warps of CTA ``cs`` waiting on an mbarrier phase that has now completed (or on a TMEM allocation,
    after a dealloc) run again; they re-execute their wait. Everything that changes an mbarrier's state in an
    executed kernel calls this."""
    st = _STATE.get(cs)
    if st is None or not st.waits:
        return
    bars = cs.cta.mbarriers
    for wid, (w, kind, what) in list(st.waits.items()):
        if kind == "mbarrier":
            ready = all(name not in bars or bars[name].completed(parity) for name, parity in what)
        else:
            ready = what
        if ready:
            del st.waits[wid]
            w.blocked = None
            w.blocked_at = None


def _wait(w, f, e, ins: Instruction, what: str, kind: str, detail) -> int:
    st = _state(w.cta)
    st.waits[w.wid] = (w, kind, detail)
    w.blocked = what
    w.blocked_at = (f.code, e[0], ins.line, ins.text or ins.name)
    return _BLOCK[0]


# ------------------------------------------------------------------------------------------------------------
# mbarrier objects in shared memory
# ------------------------------------------------------------------------------------------------------------

def mbarrier_name(address: int) -> str:
    """The record name of the mbarrier at shared-memory address ``address``.

    >>> mbarrier_name(0x24010)
    'mbar@0x24010'
    """
    return f"mbar@{int(address):#x}"


def mbarrier_image(state: MbarrierState, *, pending: int | None = None, tx: int | None = None,
                   parity: int | None = None) -> bytes:
    """simtc's 8-byte encoding of an mbarrier's state (not the hardware's: PTX calls it opaque, §9.7.13.15.2).

    Bits 0-19 pending arrivals, 20-39 expected arrivals per phase, 40-60 tx-count (21-bit two's complement),
    bit 63 the parity of the current phase. ``pending``/``tx``/``parity`` override the state's (an arrive's
    returned state holds the phase it arrived on).

    >>> st = MbarrierState("mbar@0x0", 2, 1, tx=-16, phase=3)
    >>> hex(int.from_bytes(mbarrier_image(st), "little"))
    '0x9ffff00000200001'
    """
    p = state.pending if pending is None else pending
    t = state.tx if tx is None else tx
    ph = state.phase % 2 if parity is None else parity
    word = (p & 0xFFFFF) | ((state.count & 0xFFFFF) << 20) | ((t & 0x1FFFFF) << 40) | (ph << 63)
    return word.to_bytes(8, "little")


def _image_fields(word: int) -> tuple[int, int, int, int]:
    """(pending, count, tx, parity) of an image or state token."""
    tx = (word >> 40) & 0x1FFFFF
    if tx >= 1 << 20:
        tx -= 1 << 21
    return word & 0xFFFFF, (word >> 20) & 0xFFFFF, tx, (word >> 63) & 1


def _space(ins: Instruction) -> str:
    """``"shared"`` for ``.shared``/``.shared::cta``/``.shared::cluster`` operands, else ``"generic"``."""
    return "shared" if any(m.split("::")[0] == "shared" for m in ins.modifiers) else "generic"


def _shared_offsets(c, op, ins: Instruction, what: str) -> Callable:
    """A function of (warp, frame, lanes) giving the shared-memory offsets of operand ``op`` in those lanes.

    A generic address must lie in the shared window (:data:`simtc.ptx.memory.SHARED_WINDOW`); a
    ``.shared::cluster`` address of a launch without clusters is the CTA's own shared memory.
    """
    if not isinstance(op, Address):
        raise PtxSyntaxError(f"line {ins.line}: {ins.name}: {what} must be an address operand [..], got {op}",
                             rule="memory operands", ref="PTX ISA 9.0 §6.4.1")
    generic = _space(ins) == "generic"
    rd = c.address(op, "generic" if generic else "shared")

    def offsets(w, f, lanes: np.ndarray) -> np.ndarray:
        a = rd(f)[lanes].astype(np.uint64)
        if generic:
            for k, v in enumerate(a.tolist()):
                if window_of(v) != "shared":
                    raise _kfault(f"{ins.name}: the {what} address {v:#x} of lane {int(lanes[k])} is not in the "
                                  f"shared window ({window_of(v)} memory)", int(lanes[k]),
                                  rule=f"the {what} is in shared memory", ref="PTX ISA 9.0 §6.4.1.1")
            a = a - np.uint64(SHARED_WINDOW)
        return a.astype(np.int64)
    return offsets


def _check_bar_address(w, addr: int, lane: int, ins: Instruction) -> None:
    size = w.cta.shared_size
    if addr % MBARRIER_SIZE or not 0 <= addr <= size - MBARRIER_SIZE:
        why = (f"is not {MBARRIER_SIZE}-byte aligned" if addr % MBARRIER_SIZE else
               f"is outside the CTA's {size} bytes of shared memory")
        raise _kfault(f"{ins.name}: mbarrier address {addr:#x} of lane {lane} {why}", lane,
                      rule="an mbarrier object is 8 bytes, 8-byte aligned, in shared memory",
                      ref=f"{_REF_MBAR}.1")


def _live(w, addr: int, lane: int, ins: Instruction) -> tuple[str, MbarrierState]:
    """The name and state of the live mbarrier at ``addr``; faults when none is there or its bytes were changed."""
    _check_bar_address(w, addr, lane, ins)
    st = _state(w.cta)
    name = mbarrier_name(addr)
    img = st.images.get(addr)
    state = w.cta.cta.mbarriers.get(name)
    if img is None or state is None:
        raise _kfault(f"{ins.name}: no mbarrier is initialised at shared address {addr:#x} (mbarrier.init comes "
                      "first; after mbarrier.inval the object is gone)", lane,
                      rule="mbarriers are initialised before use", ref=f"{_REF_MBAR}.9")
    now = bytes(w.cta.cta.smem.data[addr:addr + MBARRIER_SIZE])
    if now != img:
        raise _kfault(f"{ins.name}: the mbarrier object at shared address {addr:#x} was changed by an access other "
                      f"than an mbarrier instruction (its 8 bytes are {now.hex()}, simtc's image of its state is "
                      f"{img.hex()})", lane, rule="an mbarrier object is accessed only by mbarrier instructions",
                      ref=f"{_REF_MBAR}.8")
    return name, state


def _sync_image(w, addr: int) -> None:
    name = mbarrier_name(addr)
    img = mbarrier_image(w.cta.cta.mbarriers[name])
    w.cta.cta.smem.write(addr, img)
    _state(w.cta).images[addr] = img


def _model(fn: Callable, lane: int):
    """``fn()``; a model's error becomes a fault of ``lane`` (waiting -- WouldBlock, TmemWouldBlock -- and
    PtxUnsupported pass through)."""
    try:
        return fn()
    except (WouldBlock, TmemWouldBlock):
        raise
    except KernelFault:
        raise
    except SimtcError as err:
        if isinstance(err, PtxUnsupported):
            raise
        raise _fault(err, lane) from None


# ------------------------------------------------------------------------------------------------------------
# operand helpers
# ------------------------------------------------------------------------------------------------------------

def _uniform(v: np.ndarray, lanes: np.ndarray, ins: Instruction, what: str) -> int:
    """The one value every executing lane gives (``v``: one per lane of ``lanes``; a ``.sync.aligned`` operand),
    else a fault naming a lane that differs."""
    if v.size and (v != v[0]).any():
        k = int(np.flatnonzero(v != v[0])[0])
        raise _kfault(f"{ins.name}: the {what} differs between the warp's threads (lane {int(lanes[0])}: "
                      f"{int(v[0]):#x}, lane {int(lanes[k])}: {int(v[k]):#x})", int(lanes[k]),
                      rule="every thread of the warp gives the same operands", ref=_REF_ISSUE)
    return int(v[0])


def _converged(w, m: np.ndarray, ins: Instruction) -> np.ndarray:
    """The executing lanes of a ``.sync.aligned`` instruction: all 32 threads of the warp, or a fault."""
    lanes = np.flatnonzero(m)
    if lanes.size != 32:
        lane = int(lanes[0]) if lanes.size else 0
        raise _kfault(f"{ins.name} is .sync.aligned: all 32 threads of the warp execute it together, but "
                      f"{lanes.size} do (lanes {_lane_list(lanes)})", lane,
                      rule="issued by one whole converged warp", ref=_REF_ISSUE)
    return lanes


def _lane_list(lanes: np.ndarray) -> str:
    v = lanes.tolist()
    return ", ".join(map(str, v)) if len(v) <= 8 else f"{v[0]}..{v[-1]}"


def _cta_group(ins: Instruction) -> None:
    for m in ins.modifiers:
        if m.startswith("cta_group::") and m != "cta_group::1":
            raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): .{m} issues on a CTA pair of a cluster; "
                                 "simtc executes one CTA at a time (clusters of one CTA)",
                                 rule="tcgen05 with .cta_group::1", ref=_REF_CTA_GROUP)
        if m.startswith("multicast::cluster"):
            raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): .multicast::cluster reaches other CTAs of a "
                                 "cluster; simtc executes clusters of one CTA", rule="no cluster multicast",
                                 ref="PTX ISA 9.0 §9.7.16.12.1 (tcgen05.commit)")


def _regs(op) -> list:
    """The registers of a brace list (or a single register)."""
    if isinstance(op, Vector):
        return list(op.items)
    return [op]


# ------------------------------------------------------------------------------------------------------------
# mbarrier
# ------------------------------------------------------------------------------------------------------------

def _mbarrier(ins: Instruction, c):
    mods = ins.modifiers
    if not mods:
        raise PtxSyntaxError(f"line {ins.line}: mbarrier without an operation", rule="mbarrier operations",
                             ref=_REF_MBAR)
    kind = mods[0]
    for m in mods:
        if m.startswith("multicast") or (m == "shared::cluster" and kind not in ("arrive", "expect_tx",
                                                                                 "complete_tx")):
            raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): .{m} on mbarrier.{kind}: clusters of more than "
                                 "one CTA are not modelled", rule="mbarriers of the executing CTA", ref=_REF_MBAR)
    build = _MBAR.get(kind)
    if build is None:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): mbarrier.{kind} is not modelled (simtc models init, "
                             "inval, arrive, arrive.expect_tx, arrive.noComplete, expect_tx, complete_tx, test_wait, "
                             "try_wait, pending_count)", rule="modelled mbarrier operations", ref=_REF_MBAR)
    c.note("mbarrier: simtc's state of each mbarrier is its simtc.semantics.MbarrierState; the object's 8 bytes hold "
           "simtc's own encoding of it (PTX calls the contents opaque)")
    return build(ins, c)


def _mb_init(ins: Instruction, c):
    addr_of = _shared_offsets(c, ins.operands[0], ins, "mbarrier")
    count = c.reader(ins.operands[1], "u32")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        addrs, counts = addr_of(w, f, lanes), count(f)[lanes]
        cta = w.cta.cta
        st = _state(w.cta)
        for lane, a, n in zip(lanes.tolist(), addrs.tolist(), counts.tolist(), strict=True):
            _check_bar_address(w, a, lane, ins)
            name = mbarrier_name(a)
            if a in st.images and name in cta.mbarriers:
                raise _kfault(f"{ins.name}: the mbarrier at shared address {a:#x} is still valid; mbarrier.inval it "
                              "before initialising it again", lane,
                              rule="mbarrier.init on a location without a valid mbarrier object",
                              ref=f"{_REF_MBAR}.9")
            _model(lambda n=n, name=name, lane=lane, w=w: _run(MbarrierInit(name, n), w, lane), lane)
            _sync_image(w, a)
        return None
    return body


def _mb_inval(ins: Instruction, c):
    addr_of = _shared_offsets(c, ins.operands[0], ins, "mbarrier")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        st = _state(w.cta)
        for lane, a in zip(lanes.tolist(), addr_of(w, f, lanes).tolist(), strict=True):
            name, _ = _live(w, a, lane, ins)
            del w.cta.cta.mbarriers[name]
            del st.images[a]
        return None
    return body


def _mb_arrive(ins: Instruction, c):
    mods = ins.modifiers
    expect = "expect_tx" in mods
    no_complete = "noComplete" in mods
    ops = list(ins.operands)
    dst, bar = ops[0], ops[1]
    addr_of = _shared_offsets(c, bar, ins, "mbarrier")
    arg = c.reader(ops[2], "u32") if len(ops) > 2 else None
    if expect and arg is None:
        raise PtxSyntaxError(f"line {ins.line}: mbarrier.arrive.expect_tx needs a tx count", rule="operands",
                             ref=f"{_REF_MBAR}.13")
    if no_complete and arg is None:
        raise PtxSyntaxError(f"line {ins.line}: mbarrier.arrive.noComplete needs a count", rule="operands",
                             ref=f"{_REF_MBAR}.13")
    wr = c.writer(dst, "b64") if not isinstance(dst, Sink) else None

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        addrs = addr_of(w, f, lanes)
        args = arg(f)[lanes].tolist() if arg is not None else [1] * lanes.size
        tokens = np.zeros(32, np.uint64)
        for lane, a, n in zip(lanes.tolist(), addrs.tolist(), args, strict=True):
            name, state = _live(w, a, lane, ins)
            parity, phase = state.phase % 2, state.phase
            if expect:
                rec = _model(lambda n=n, name=name: MbarrierArriveExpectTx(name, n), lane)
            else:
                rec = _model(lambda n=n, name=name: MbarrierArrive(name, n), lane)
                if no_complete and state.pending - n == 0 and state.tx == 0:
                    raise _kfault(f"{ins.name}: this arrive of {n} completes the current phase of {name} "
                                  f"({state.pending} pending), which .noComplete forbids", lane,
                                  rule=".noComplete arrivals do not complete the phase", ref=f"{_REF_MBAR}.13")
            _model(lambda rec=rec, lane=lane: _run(rec, w, lane), lane)
            done = state.phase != phase
            img = mbarrier_image(state, pending=0 if done else None, tx=0 if done else None, parity=parity)
            tokens[lane] = int.from_bytes(img, "little")
            _sync_image(w, a)
        wake(w.cta)
        if wr is not None:
            wr(f, tokens, m, full)
        return None
    return body


def _mb_tx(ins: Instruction, c):
    complete = ins.modifiers[0] == "complete_tx"
    addr_of = _shared_offsets(c, ins.operands[0], ins, "mbarrier")
    tx = c.reader(ins.operands[1], "u32")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        for lane, a, n in zip(lanes.tolist(), addr_of(w, f, lanes).tolist(), tx(f)[lanes].tolist(), strict=True):
            _, state = _live(w, a, lane, ins)
            if not 0 <= n <= MAX_TX:
                raise _kfault(f"{ins.name}: {n} bytes: the tx-count is 0 ... 2**20 - 1", lane,
                              rule="mbarrier tx-count range", ref=f"{_REF_MBAR}.2")
            # the MbarrierState's own operations (no record exists for a lone expect_tx/complete_tx)
            _model(lambda n=n, state=state: state.complete_tx(n) if complete else state.expect_tx(n), lane)
            _sync_image(w, a)
        wake(w.cta)
        return None
    return body


def _mb_wait(ins: Instruction, c):
    mods = ins.modifiers
    blocking = mods[0] == "try_wait"
    parity_form = "parity" in mods
    ops = list(ins.operands)
    wr = c.writer(ops[0], "pred")
    addr_of = _shared_offsets(c, ops[1], ins, "mbarrier")
    arg = c.reader(ops[2], "u32" if parity_form else "b64")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        addrs, vals = addr_of(w, f, lanes), arg(f)[lanes].tolist()
        done = np.zeros(32, bool)
        waits = []
        for lane, a, v in zip(lanes.tolist(), addrs.tolist(), vals, strict=True):
            name, state = _live(w, a, lane, ins)
            parity = int(v) if parity_form else _image_fields(int(v))[3]
            rec = _model(lambda name=name, parity=parity: MbarrierTryWait(name, parity), lane)
            try:
                _model(lambda rec=rec, lane=lane: _run(rec, w, lane), lane)
                done[lane] = True
            except WouldBlock:
                waits.append((name, parity, state, a))
        if waits and blocking:
            seen = {(n, p): (s, a) for n, p, s, a in waits}
            what = "; ".join(f"mbarrier {n} (shared address {a:#x}) to complete its phase of parity {p} "
                             f"({s.pending} of {s.count} arrivals and {s.tx} tx bytes pending)"
                             for (n, p), (s, a) in seen.items())
            return _wait(w, f, e, ins, what, "mbarrier", [(n, p) for n, p, _, _ in waits])
        wr(f, done, m, full)
        return None
    return body


def _mb_pending(ins: Instruction, c):
    wr = c.writer(ins.operands[0], "u32")
    tok = c.reader(ins.operands[1], "b64")

    def body(w, f, e, m, full):
        v = tok(f)
        out = (v & np.uint64(0xFFFFF)).astype(np.uint32)
        wr(f, out, m, full)
        return None
    return body


def _mb_refuse(ins: Instruction, c):
    raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): mbarrier.arrive_drop changes the expected count of "
                         "later phases, which simtc's MbarrierState does not model", rule="modelled mbarrier "
                         "operations", ref=f"{_REF_MBAR}.14")


_MBAR: dict[str, Callable] = {
    "init": _mb_init, "inval": _mb_inval, "arrive": _mb_arrive, "expect_tx": _mb_tx, "complete_tx": _mb_tx,
    "test_wait": _mb_wait, "try_wait": _mb_wait, "pending_count": _mb_pending, "arrive_drop": _mb_refuse,
}


# ------------------------------------------------------------------------------------------------------------
# fences
# ------------------------------------------------------------------------------------------------------------

def _fence(other: Callable | None) -> Callable:
    def compile_fence(ins: Instruction, c):
        parts = ins.name.split(".")
        if parts[1:3] == ["proxy", "async"]:
            space = ".".join(parts[3:])
            rec = _model(lambda: FenceProxyAsync(space), 0)
            c.note("fence.proxy.async: ordering only; in simtc's untimed semantics every asynchronous operation has "
                   "completed when it was issued")

            def body(w, f, e, m, full):
                _model(lambda: _run(rec, w, int(np.flatnonzero(m)[0])), 0)
                return None
            return body
        if parts[1] == "mbarrier_init":
            c.note("fence.mbarrier_init: ordering only (mbarrier.init takes effect when executed)")
            return lambda w, f, e, m, full: None
        if other is None:
            raise PtxUnsupported(f"{ins.name} is not modelled", rule="fences", ref="PTX ISA 9.0 §9.7.13.4")
        return other(ins, c)
    return compile_fence


# ------------------------------------------------------------------------------------------------------------
# tcgen05
# ------------------------------------------------------------------------------------------------------------

def _tcgen05(ins: Instruction, c):
    mods = ins.modifiers
    _cta_group(ins)
    kind = mods[0].split("::")[0] if mods else ""
    build = _TC.get(kind)
    if build is None:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): tcgen05.{kind} is not modelled",
                             rule="modelled tcgen05 instructions", ref="PTX ISA 9.0 §9.7.16")
    c.note("tcgen05: every asynchronous operation completes when it is issued (simtc's untimed semantics); waits "
           "and fences order nothing further")
    return build(ins, c)


def _tc_alloc(ins: Instruction, c):
    dst_of = _shared_offsets(c, ins.operands[0], ins, "tcgen05.alloc destination")
    ncols = c.reader(ins.operands[1], "u32")

    def body(w, f, e, m, full):
        lanes = _converged(w, m, ins)
        dst = _uniform(dst_of(w, f, lanes), lanes, ins, "destination address")
        n = _uniform(ncols(f)[lanes], lanes, ins, "column count")
        rec = _model(lambda: Alloc(n, dst), 0)
        if dst + 4 > w.cta.shared_size:
            raise _kfault(f"{ins.name}: destination {dst:#x} is outside the CTA's {w.cta.shared_size} bytes of shared "
                          "memory", 0, rule="tcgen05.alloc writes a shared-memory word", ref="PTX ISA 9.0 §9.7.16.7.1")
        try:
            _model(lambda: _run(rec, w, 0, 32), 0)
        except TmemWouldBlock as err:  # no free columns yet: wait for a dealloc (PTX: alloc may block)
            return _wait(w, f, e, ins, f"{n} free TMEM columns ({err.message})", "alloc", False)
        return None
    return body


def _tc_dealloc(ins: Instruction, c):
    taddr = c.reader(ins.operands[0], "b32")
    ncols = c.reader(ins.operands[1], "u32")

    def body(w, f, e, m, full):
        lanes = _converged(w, m, ins)
        t = _uniform(taddr(f)[lanes], lanes, ins, "TMEM address")
        n = _uniform(ncols(f)[lanes], lanes, ins, "column count")
        _model(lambda: _run(Dealloc(t, n), w, 0, 32), 0)
        st = _STATE.get(w.cta)
        if st is not None:
            for wid, (ww, kind, _) in list(st.waits.items()):
                if kind == "alloc":
                    st.waits[wid] = (ww, kind, True)
            wake(w.cta)
        return None
    return body


def _tc_relinquish(ins: Instruction, c):
    rec = RelinquishAllocPermit()

    def body(w, f, e, m, full):
        _converged(w, m, ins)
        _model(lambda: _run(rec, w, 0, 32), 0)
        return None
    return body


def _tc_cp(ins: Instruction, c):
    mods = [m for m in ins.modifiers[1:] if not m.startswith("cta_group")]
    fmts = [m for m in mods if m.startswith("b8x16")]
    if fmts or any(m.startswith(("b6x16", "b4x16")) for m in mods):
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): tcgen05.cp decompression ({'.'.join(mods[1:])}) is "
                             "not modelled", rule="tcgen05.cp without decompression", ref="PTX ISA 9.0 §9.7.16.9.2")
    if not mods:
        raise PtxSyntaxError(f"line {ins.line}: tcgen05.cp without a shape", rule="tcgen05.cp shapes",
                             ref="PTX ISA 9.0 §9.7.16.9.2")
    shape, multicast = mods[0], (mods[1] if len(mods) > 1 else None)
    taddr = c.address(ins.operands[0], "tmem") if isinstance(ins.operands[0], Address) else None
    if taddr is None:
        raise PtxSyntaxError(f"line {ins.line}: tcgen05.cp's destination is a TMEM address [taddr]",
                             rule="operands", ref="PTX ISA 9.0 §9.7.16.9.2")
    desc = c.reader(ins.operands[1], "b64")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        ta, dv = taddr(f)[lanes].tolist(), desc(f)[lanes].tolist()
        for lane, t, d in zip(lanes.tolist(), ta, dv, strict=True):
            rec = _model(lambda t=t, d=d: Cp(t & 0xFFFFFFFF, SmemDescriptor.from_u64(d, "sm100"), shape, multicast),
                         lane)
            _model(lambda rec=rec, lane=lane: _run(rec, w, lane), lane)
        return None
    return body


_MMA_MODS_REFUSED = {"sp": "sparse A (a metadata operand)", "ashift": ".ashift (shifting A's lanes)",
                     "block_scale": "block scaling (scale-factor operands)"}


def _tc_mma(ins: Instruction, c):
    mods = ins.modifiers
    ws = "ws" in mods
    kind = next((m.split("::", 1)[1] for m in mods if m.startswith("kind::")), None)
    for m in mods:
        base = m.split("::")[0]
        if base in _MMA_MODS_REFUSED or base.startswith("scale_vec"):
            raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): {_MMA_MODS_REFUSED.get(base, m)} is not "
                                 "modelled", rule="dense tcgen05.mma without block scaling", ref=_REF_MMA)
    if kind not in KINDS:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): kind::{kind} is not modelled (instruction "
                             f"descriptors of kind {', '.join(KINDS)} are decoded)", rule="modelled tcgen05.mma "
                             "kinds", ref=_REF_MMA)
    coll = next((m.split("::", 1)[1] for m in mods if m.startswith("collector::")), None)
    collector = coll or "discard"
    ops = list(ins.operands)
    if len(ops) < 5:
        raise PtxSyntaxError(f"line {ins.line}: tcgen05.mma takes [d-tmem], a, b-desc, idesc, enable-input-d",
                             rule="tcgen05.mma operands", ref=f"{_REF_MMA}.1")
    d_of = c.address(ops[0], "tmem")
    ts = isinstance(ops[1], Address)
    a_of = c.address(ops[1], "tmem") if ts else c.reader(ops[1], "b64")
    b_of = c.reader(ops[2], "b64")
    i_of = c.reader(ops[3], "b32")
    rest = ops[4:]
    lane_mask = None
    if rest and isinstance(rest[0], Vector):
        if ws:
            raise PtxSyntaxError(f"line {ins.line}: tcgen05.mma.ws has no disable-output-lane operand",
                                 rule=".ws operand list", ref=f"{_REF_MMA}.1")
        lane_mask = [c.reader(r, "b32") for r in rest[0].items]
        rest = rest[1:]
    if not rest:
        raise PtxSyntaxError(f"line {ins.line}: tcgen05.mma needs enable-input-d", rule="tcgen05.mma operands",
                             ref=f"{_REF_MMA}.1")
    en_of = c.reader(rest[0], "pred")
    tail = rest[1:]
    scale = mask_desc = None
    if tail:
        if ws:
            mask_desc = c.reader(tail[0], "b64")
        elif isinstance(tail[0], Imm):
            scale = int(tail[0].value)
        else:
            raise PtxSyntaxError(f"line {ins.line}: scale-input-d is an immediate", rule="tcgen05.mma operands",
                                 ref=f"{_REF_MMA}.1")
    if scale:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): scale-input-d = {scale} (D scaled by 2^-{scale}) is "
                             "not modelled", rule="tcgen05.mma without scale-input-d", ref=f"{_REF_MMA}.1")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        d, a, b, i, en = d_of(f), a_of(f), b_of(f), i_of(f), en_of(f)
        lm = [r(f) for r in lane_mask] if lane_mask else None
        zm = mask_desc(f) if mask_desc is not None else None
        for lane in lanes.tolist():
            if lm is not None and any(int(v[lane]) for v in lm):
                raise PtxUnsupported(f"{ins.name}: a non-zero disable-output-lane mask is not modelled (simtc's "
                                     "Mma record does not carry it)", rule="tcgen05.mma writes every D lane",
                                     ref=f"{_REF_MMA}.1")
            if zm is not None and int(zm[lane]):
                raise PtxUnsupported(f"{ins.name}: a non-zero .ws zero-column mask is not modelled",
                                     rule="modelled .ws operands", ref="PTX ISA 9.0 §9.7.16.4.3")
            rec = _model(lambda lane=lane: Mma(
                int(d[lane]) & 0xFFFFFFFF,
                (int(a[lane]) & 0xFFFFFFFF) if ts else SmemDescriptor.from_u64(int(a[lane]), "sm100"),
                SmemDescriptor.from_u64(int(b[lane]), "sm100"),
                InstrDescriptor.from_u32(int(i[lane]), kind),
                bool(en[lane]), ws=ws, collector=collector), lane)
            try:
                _run(rec, w, lane)
            except SimtcError as err:
                if type(err) is SimtcError:  # the tensor-core model's "not modelled" (rules are subclasses)
                    raise PtxUnsupported(f"{ins.name}: {err.message}", rule=err.rule, ref=err.ref) from None
                raise _fault(err, lane) from None
        return None
    return body


def _tc_commit(ins: Instruction, c):
    if "mbarrier::arrive::one" not in ins.modifiers:
        raise PtxSyntaxError(f"line {ins.line}: tcgen05.commit takes .mbarrier::arrive::one",
                             rule="tcgen05.commit qualifiers", ref="PTX ISA 9.0 §9.7.16.12.1")
    addr_of = _shared_offsets(c, ins.operands[0], ins, "mbarrier")

    def body(w, f, e, m, full):
        lanes = np.flatnonzero(m)
        for lane, a in zip(lanes.tolist(), addr_of(w, f, lanes).tolist(), strict=True):
            name, _ = _live(w, a, lane, ins)
            _model(lambda name=name, lane=lane: _run(Commit(name), w, lane), lane)
            _sync_image(w, a)
        wake(w.cta)
        return None
    return body


def _lane_base(taddr: int, w) -> str:
    """How a ``tcgen05.ld``/``st`` address's lane field is read for warp ``w``. A warp reaches only its own quadrant
    of lanes, 32 x (warp id % 4) onwards (PTX ISA 9.0 §9.7.16.8.3); an address in that quadrant is absolute. Lane
    field 0 from a warp of another quadrant reaches that warp's own quadrant: FlashMLA's head64 kernel loads P with
    the bare column from warps of every quadrant (``tmem_cols::P`` at ``csrc/sm100/decode/head64/kernel.cuh`` line
    169 at 9241ae3) and gives correct results on B200s. [inferred from that kernel; what the hardware does with
    other out-of-quadrant lane fields is not known, so they stay the model's fault]"""
    lane = (taddr >> 16) & 0xFFFF
    return "warp" if lane == 0 and w.wid % 4 else "absolute"


def _ldst_form(ins: Instruction, kind: str) -> tuple[str, int, bool]:
    mods = [m for m in ins.modifiers[1:] if m not in ("sync", "aligned", "b32")]
    packing = "pack::16b" if kind == "ld" else "unpack::16b"
    pack = packing in mods
    mods = [m for m in mods if m != packing]
    if len(mods) != 2 or not mods[1].startswith("x") or not mods[1][1:].isdigit():
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): simtc models tcgen05.{kind}.sync.aligned.<shape>."
                             f"x<num>[.{packing}].b32", rule="modelled tcgen05.ld/st forms", ref=_REF_LDST)
    return mods[0], int(mods[1][1:]), pack


def _tc_ld(ins: Instruction, c):
    shape, num, pack = _ldst_form(ins, "ld")
    ops = list(ins.operands)
    dsts = _regs(ops[0])
    taddr = c.address(ops[1], "tmem")
    imm = int(ops[2].value) if len(ops) > 2 and isinstance(ops[2], Imm) else None
    wrs = [c.writer(r, "b32") for r in dsts]
    scratch = "tcgen05.ld"

    def body(w, f, e, m, full):
        lanes = _converged(w, m, ins)
        t = _uniform(taddr(f)[lanes], lanes, ins, "TMEM address") & 0xFFFFFFFF
        lb = _lane_base(t, w)
        rec = _model(lambda: Ld(t, shape, num, scratch, pack=pack, lane_base=lb, imm=imm), 0)
        if rec.nregs != len(wrs):
            raise PtxSyntaxError(f"line {ins.line}: {ins.name} gives each thread {rec.nregs} registers; the list has "
                                 f"{len(wrs)}", rule="one destination register per loaded word", ref=_REF_LDST)
        _model(lambda: _run(rec, w, 0, 32), 0)
        regs = w.cta.cta.warp_regs(w.wid)
        v = regs.pop(scratch)
        for k, wr in enumerate(wrs):
            wr(f, np.ascontiguousarray(v[:, k]), m, full)
        return None
    return body


def _tc_st(ins: Instruction, c):
    shape, num, pack = _ldst_form(ins, "st")
    ops = list(ins.operands)
    taddr = c.address(ops[0], "tmem")
    imm = int(ops[1].value) if len(ops) > 2 and isinstance(ops[1], Imm) else None
    rds = [c.reader(r, "b32") for r in _regs(ops[-1])]
    scratch = "tcgen05.st"

    def body(w, f, e, m, full):
        lanes = _converged(w, m, ins)
        t = _uniform(taddr(f)[lanes], lanes, ins, "TMEM address") & 0xFFFFFFFF
        lb = _lane_base(t, w)
        rec = _model(lambda: St(t, shape, num, scratch, unpack=pack, lane_base=lb, imm=imm), 0)
        if rec.nregs != len(rds):
            raise PtxSyntaxError(f"line {ins.line}: {ins.name} stores {rec.nregs} registers per thread; the list has "
                                 f"{len(rds)}", rule="one source register per stored word", ref=_REF_LDST)
        regs = w.cta.cta.warp_regs(w.wid)
        regs[scratch] = np.stack([r(f).astype(np.uint32) for r in rds], axis=1)
        try:
            _model(lambda: _run(rec, w, 0, 32), 0)
        finally:
            regs.pop(scratch, None)
        return None
    return body


def _tc_wait(ins: Instruction, c):
    what = ins.modifiers[0]
    rec = {"wait::ld": WaitLd(), "wait::st": WaitSt()}.get(what)
    if rec is None:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): tcgen05.{what}", rule="tcgen05.wait::ld / ::st",
                             ref="PTX ISA 9.0 §9.7.16.8.5")

    def body(w, f, e, m, full):
        _converged(w, m, ins)
        _model(lambda: _run(rec, w, 0, 32), 0)
        return None
    return body


def _tc_fence(ins: Instruction, c):
    what = ins.modifiers[0]
    rec = {"fence::before_thread_sync": FenceBeforeThreadSync(),
           "fence::after_thread_sync": FenceAfterThreadSync()}.get(what)
    if rec is None:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): tcgen05.{what}", rule="tcgen05 fences",
                             ref="PTX ISA 9.0 §9.7.16.11.1")

    def body(w, f, e, m, full):
        _model(lambda: _run(rec, w, int(np.flatnonzero(m)[0])), 0)
        return None
    return body


def _tc_shift(ins: Instruction, c):
    raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): tcgen05.shift is not modelled (PTX does not say "
                         "exactly which lanes and columns it moves)", rule="modelled tcgen05 instructions",
                         ref="PTX ISA 9.0 §9.7.16.9.3")


_TC: dict[str, Callable] = {
    "alloc": _tc_alloc, "dealloc": _tc_dealloc, "relinquish_alloc_permit": _tc_relinquish, "cp": _tc_cp,
    "mma": _tc_mma, "commit": _tc_commit, "ld": _tc_ld, "st": _tc_st, "wait": _tc_wait, "fence": _tc_fence,
    "shift": _tc_shift,
}


# ------------------------------------------------------------------------------------------------------------
# wgmma (sm_90a): one record per warpgroup, its fragments gathered from the four warps
# ------------------------------------------------------------------------------------------------------------

_REF_WGMMA = "PTX ISA 9.0 §9.7.15.5.2"
_WG_TYPES = {"bf16": "bf16", "f16": "fp16"}
_WG_REFUSED = {"tf32": "tf32 (k8)", "e4m3": "e4m3 (k32)", "e5m2": "e5m2 (k32)", "s8": "s8 (k32)", "u8": "u8 (k32)",
               "b1": "b1 (k256)"}
_WG_D = {"f32": "fp32", "f16": "fp16"}


def _wgmma(ins: Instruction, c):
    mods = ins.modifiers
    what = mods[0] if mods else ""
    c.note("wgmma: a warpgroup's wgmma.mma_async executes once all four of its warps have issued it (simtc's "
           "model takes the whole (128, N/2) fragment); commit_group/wait_group then have nothing to wait for")
    if what == "mma_async":
        return _wg_mma(ins, c)
    rec = {"fence": WgmmaFence(), "commit_group": WgmmaCommitGroup()}.get(what)
    if what == "wait_group":
        rec = _model(lambda: WgmmaWaitGroup(int(ins.operands[0].value)), 0)
    if rec is None:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): wgmma.{what} is not modelled",
                             rule="modelled wgmma instructions", ref="PTX ISA 9.0 §9.7.15")

    def body(w, f, e, m, full):
        _converged(w, m, ins)
        _model(lambda: _run(rec, w, 0, 32), 0)
        return None
    return body


@define(eq=False)
class _WgIssue:
    """The warps of a warpgroup that have issued one wgmma.mma_async so far: warp -> (warp, frame, entry, mask,
    full, accumulator bits (32, N/2 or N/4), uniform operand values, A's registers (32, 4) or None)."""

    arrived: dict = field(factory=dict)


def _wg_mma(ins: Instruction, c):
    mods = [m for m in ins.modifiers[1:] if m not in ("sync", "aligned")]
    if "sp" in mods or len(mods) != 4 or not mods[0].startswith("m64n"):
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): simtc models dense wgmma.mma_async.sync.aligned."
                             "m64nNkK.<d>.<a>.<b>", rule="modelled wgmma forms", ref=_REF_WGMMA)
    shape, d_t, a_t, b_t = mods
    n, k = (int(x) for x in shape[4:].split("k"))
    for t in (a_t, b_t):
        if t in _WG_REFUSED:
            raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): wgmma with .{_WG_REFUSED[t]} inputs is not "
                                 "modelled (simtc's wgmma takes .bf16 and .f16, K = 16)", rule="modelled wgmma types",
                                 ref=_REF_WGMMA)
    if a_t != b_t or a_t not in _WG_TYPES or d_t not in _WG_D:
        raise PtxUnsupported(f"{ins.name} (PTX line {ins.line}): .{d_t}.{a_t}.{b_t} is not modelled",
                             rule="modelled wgmma types", ref=_REF_WGMMA)
    dtype, d_dtype = _WG_TYPES[a_t], _WG_D[d_t]
    if dtype == "bf16" and d_dtype == "fp16":
        raise PtxSyntaxError(f"line {ins.line}: {ins.name}: .bf16 inputs accumulate into .f32 only",
                             rule="wgmma .bf16 needs an .f32 accumulator", ref=_REF_WGMMA)
    if k != 16:
        raise PtxSyntaxError(f"line {ins.line}: {ins.name}: .{a_t} inputs have K = 16, not {k}",
                             rule="K = 32 bytes of the input type", ref=_REF_WGMMA)
    ops = list(ins.operands)
    rs = len(ops) > 1 and isinstance(ops[1], Vector)
    if rs and len(ops) != 7:
        raise PtxSyntaxError(f"line {ins.line}: wgmma.mma_async with A from registers takes d, {{a0, a1, a2, a3}}, "
                             "b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b (A in registers is K-major: there "
                             "is no imm-trans-a)", rule="register A has no transpose", ref=_REF_WGMMA)
    if not rs and len(ops) != 8:
        raise PtxSyntaxError(f"line {ins.line}: wgmma.mma_async with A from shared memory takes d, a-desc, b-desc, "
                             "scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b", rule="wgmma operands",
                             ref=_REF_WGMMA)
    dregs = _regs(ops[0])
    per = 2 if d_dtype == "fp32" else 4
    if len(dregs) != n // per:
        raise PtxSyntaxError(f"line {ins.line}: {ins.name} has {len(dregs)} accumulator registers; an .{d_t} D of "
                             f"m64n{n} is {n // per} per thread", rule="wgmma accumulator registers",
                             ref="PTX ISA 9.0 §9.7.15.5.1.1.1")
    if rs and len(_regs(ops[1])) != 4:
        raise PtxSyntaxError(f"line {ins.line}: {ins.name}: A from registers is four .b32 registers per thread, "
                             f"not {len(_regs(ops[1]))}", rule="A from registers is four .b32 registers per thread",
                             ref="PTX ISA 9.0 §9.7.15.5.1.1.1")
    rds = [c.reader(r, "b32") for r in dregs]
    wrs = [c.writer(r, "b32") for r in dregs]
    a_rds = [c.reader(r, "b32") for r in _regs(ops[1])] if rs else None
    a_of = None if rs else c.reader(ops[1], "b64")
    b_of, sd_of = c.reader(ops[2], "b64"), c.reader(ops[3], "pred")
    imms = [int(o.value) if isinstance(o, Imm) else None for o in ops[4:]]
    if None in imms:
        raise PtxSyntaxError(f"line {ins.line}: imm-scale-a/b and imm-trans-a/b are immediates", rule="wgmma operands",
                             ref=_REF_WGMMA)
    if rs:
        sa, sb, tb = imms
        ta = 0
    else:
        sa, sb, ta, tb = imms
    scratch, scratch_a = "wgmma.d", "wgmma.a"
    kw = dict(d_dtype=d_dtype, a_major="MN" if ta else "K", b_major="MN" if tb else "K", scale_a=sa, scale_b=sb)
    pending: dict = {}
    records: dict = {}

    def body(w, f, e, m, full):
        lanes = _converged(w, m, ins)
        ops_now = (0 if rs else _uniform(a_of(f)[lanes], lanes, ins, "A descriptor"),
                   _uniform(b_of(f)[lanes], lanes, ins, "B descriptor"),
                   _uniform(sd_of(f)[lanes].astype(np.uint8), lanes, ins, "scale-d"))
        wg = w.wid // 4
        key = (id(w.cta), wg)
        issue = pending.setdefault(key, _WgIssue())
        first = next(iter(issue.arrived.values()), None)
        if first is not None and first[6] != ops_now:
            what = "B descriptor, scale-d" if rs else "A descriptor, B descriptor, scale-d"
            raise _kfault(f"{ins.name}: warp {w.wid} gives operands ({what}) {tuple(hex(v) for v in ops_now)}, warp "
                          f"{first[0].wid} of its warpgroup {tuple(hex(v) for v in first[6])}", 0,
                          rule="the warps of a warpgroup give the same wgmma operands",
                          ref="PTX ISA 9.0 §9.7.15.1")
        acc = np.stack([r(f) for r in rds], axis=1).astype(np.uint32, copy=False)
        a_regs = np.stack([r(f) for r in a_rds], axis=1).astype(np.uint32, copy=False) if rs else None
        issue.arrived[w.wid] = (w, f, e, m, full, acc, ops_now, a_regs)
        if len(issue.arrived) < 4:
            return _wait(w, f, e, ins, f"the other warps of warpgroup {wg} to issue this wgmma.mma_async "
                         f"({len(issue.arrived)} of 4 have)", "wgmma", None)
        del pending[key]
        a, b, sd = ops_now
        lead = 4 * wg
        arrived = [issue.arrived[lead + i] for i in range(4)]
        rec = records.get(ops_now)
        if rec is None:  # the record of these operand values (kernels reuse a few descriptors over and over)
            rec = records[ops_now] = _model(lambda: WgmmaMmaAsync(64, n, k, dtype, scratch_a if rs else a, b,
                                                                  bool(sd), scratch, **kw), 0)
        regs = w.cta.cta.warp_regs(lead)
        acc = np.concatenate([x[5] for x in arrived])
        regs[scratch] = acc.view(np.float32) if d_dtype == "fp32" else acc
        if rs:
            regs[scratch_a] = np.concatenate([x[7] for x in arrived])
        try:
            _model(lambda: _run(rec, w, 0, 32, warp=lead), 0)
            out = np.ascontiguousarray(regs[scratch])
            out = out.astype(np.float32, copy=False).view(np.uint32) if d_dtype == "fp32" else out.astype(np.uint32)
        finally:
            regs.pop(scratch, None)
            regs.pop(scratch_a, None)
        st = _state(w.cta)
        for i in range(4):
            ww, ff, ee, mm, fl = arrived[i][:5]
            part = out[32 * i:32 * i + 32]
            for j, wr in enumerate(wrs):
                wr(ff, np.ascontiguousarray(part[:, j]), mm, fl)
            if ww is not w:  # a warp that waited here goes on past the instruction
                st.waits.pop(ww.wid, None)
                ee[0] += 1
                ww.blocked = None
                ww.blocked_at = None
        return None
    return body


# ------------------------------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------------------------------

HANDLERS: dict[str, Callable] = {"mbarrier": _mbarrier, "tcgen05": _tcgen05, "wgmma": _wgmma}
"""opcode -> compiler, as in :data:`simtc.ptx.executor.HANDLERS` (``fence`` is added by :func:`install`, around the
executor's own: ``fence.proxy.async*`` and ``fence.mbarrier_init`` are this module's, other fences the
executor's)."""


def install(handlers: dict, refused: dict, *, block: int) -> None:
    """Put this module's compilers into the executor's opcode table ``handlers`` and take their opcodes off its
    ``refused`` list; ``block`` is the executor's "the warp waits" result."""
    _BLOCK[:] = [block]
    handlers["fence"] = _fence(handlers.get("fence"))
    for op, fn in HANDLERS.items():
        handlers[op] = fn
        refused.pop(op, None)


