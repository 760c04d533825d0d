"""The state of executing PTX: warps as 32-lane SIMT units, their call frames and reconvergence stacks, the CTA
with its shared memory and named barriers.

**Registers** hold raw bits as numpy arrays of 32 lanes (the unsigned dtype of the declared width, ``bool``
for ``.pred``; the contract of :mod:`simtc.ptx.alu`). A register array is never written in place: a write
makes a new array (``np.where(mask, new, old)``) and rebinds the register, so an array an instruction returned
may be shared between registers safely.

**Divergence and reconvergence: a SIMT stack on immediate post-dominators** (GPGPU-Sim's ``simt_stack``).
Each call frame keeps a stack of entries ``[pc, rpc, mask, n, full]``: the next instruction, the pc at which the
entry reconverges (its entry is popped when ``pc == rpc``), the lanes it runs (bool[32]), their count and
whether they are all the warp's live lanes. A branch that splits the lanes turns the top entry into the
reconvergence entry (``pc = ipdom``) and pushes one entry per side (or, when the top entry already
reconverges at that ipdom and is not the frame's bottom entry, replaces it: the loop case, which keeps the
stack from growing per iteration); the side with the lower pc runs first. ``exit`` removes lanes from every
entry of every frame. Why a stack and not per-thread PCs with min-PC scheduling: the stack reconverges exactly
where the compiler's structured control flow joins (min-PC depends on block layout, and across non-inlined
calls the caller's and callee's pcs are not comparable), its depth is bounded, and it is what GPGPU-Sim
(the functional model learners know) does. It does not model sm_70+ independent thread scheduling: a warp-level
instruction (``shfl.sync``, ``vote.sync``, ...) whose ``membermask`` names a live lane that is on another
path, or a non-``.aligned`` barrier reached by part of a warp, is reported instead of guessed at.

**Functions.** Every ``call`` pushes a :class:`Frame` with its own register file, parameter buffer (the
``.param`` space: the callee's parameters and return values, the caller's ``param0``/``retval0`` variables;
per lane) and local-memory base (the frames' ``.local`` depots lie one after the other in each thread's local
memory, a stack). The bottom entry of a frame reconverges at the function's end (``len(body)``): when it gets
there the frame returns.
"""

from __future__ import annotations

import numpy as np
from attrs import define, field

__all__ = ["LANES", "BarrierState", "CtaState", "Frame", "Warp", "bits_of", "mask_of"]

LANES = np.arange(32, dtype=np.uint32)
_BIT = np.uint64(1) << np.arange(32, dtype=np.uint64)


def bits_of(mask: np.ndarray) -> int:
    """The 32-bit lane mask of a bool[32] array (lane i -> bit i).

    >>> bits_of(np.arange(32) < 3)
    7
    """
    return int(np.packbits(mask, bitorder="little").view("<u4")[0])


def mask_of(bits: int) -> np.ndarray:
    """The bool[32] array of a 32-bit lane mask.

    >>> np.flatnonzero(mask_of(0b1010)).tolist()
    [1, 3]
    """
    return (np.uint64(bits & 0xFFFFFFFF) & _BIT) != 0


def entry(pc: int, rpc: int, mask: np.ndarray, live: np.ndarray, n: int | None = None) -> list:
    """A SIMT-stack entry ``[pc, rpc, mask, n, full]``."""
    n = int(np.count_nonzero(mask)) if n is None else n
    return [pc, rpc, mask, n, n == int(np.count_nonzero(live))]


@define(eq=False)
class Frame:
    """One function activation of a warp."""

    code: object  # executor.FnCode
    regs: list
    params: np.ndarray
    """The frame's ``.param`` space: (32 lanes, bytes) uint8."""
    local_base: int
    stack: list = field(factory=list)
    call: object = None
    """How to return: (caller frame, [(caller offset, callee offset, size)], call mask), None for the kernel."""
    warp: object = None
    cc: np.ndarray = field(factory=lambda: np.zeros(32, bool))
    """The carry flag CC.CF of extended-precision arithmetic (PTX ISA 9.0 §9.7.2), per lane."""


@define(eq=False)
class BarrierState:
    """A named CTA barrier between completions: who arrived, how many threads it waits for."""

    expected: int | None = None
    """Threads (a multiple of 32), or None for all the CTA's threads."""
    arrived: list = field(factory=list)
    """(warp, entry or None for an arrive, deliver callback or None, red values)."""

    def threads(self) -> int:
        return 32 * len(self.arrived)


@define(eq=False)
class ClusterBarrier:
    """The split ``barrier.cluster.arrive`` / ``.wait`` of a cluster (PTX ISA 9.0 §9.7.13.3): the phase, the warps
    that arrived in it and the warps waiting for it (each with the stack entry to move past the wait)."""

    phase: int = 0
    arrived: dict = field(factory=dict)
    """warp id -> the phase it arrived in (kept until its wait consumes it)."""
    count: int = 0
    """Warps that arrived in the current phase."""
    waiting: list = field(factory=list)
    """(warp, stack entry) blocked at a wait."""


@define(eq=False)
class Warp:
    """One warp of a CTA: its lanes' thread ids, which lanes live, its frames."""

    cta: CtaState
    wid: int
    tid: np.ndarray
    """(32, 3) thread index of each lane (x, y, z); lanes past the block's size have no thread."""
    live: np.ndarray
    """bool[32]: lanes that are threads and have not exited."""
    frames: list = field(factory=list)
    local: np.ndarray = field(factory=lambda: np.zeros((32, 0), np.uint8))
    local_top: int = 0
    blocked: str | None = None
    """What the warp waits on (None: it may run)."""
    blocked_at: tuple | None = None
    """(frame, pc) of the instruction it waits at."""
    done: bool = False
    executed: int = 0
    specials: dict = field(factory=dict)
    parked: dict = field(factory=dict)
    """barrier id -> [(frame, entry, lanes)]: paths of a diverged warp waiting at a non-.aligned barrier for the rest
    of the warp (PTX ISA 9.0 §9.7.13.1: the barrier "causes executing thread to wait for all non-exited threads
    from its warp and marks warps' arrival")."""

    def grow_local(self, top: int) -> None:
        """Make room for ``top`` bytes of local memory per thread."""
        if top > self.local.shape[1]:
            cap = max(top, 2 * self.local.shape[1], 256)
            cap = -(-cap // 32) * 32
            new = np.zeros((32, cap), np.uint8)
            new[:, :self.local.shape[1]] = self.local
            self.local = new
        self.local_top = top

    def kill(self, m: np.ndarray) -> None:
        """Lanes ``m`` exit: off every entry of every frame; empty entries and frames go."""
        keep = ~m
        self.live = self.live & keep
        for f in self.frames:
            for e in f.stack:
                e[2] = e[2] & keep
                e[3] = int(np.count_nonzero(e[2]))
        self.prune()

    def prune(self) -> None:
        while self.frames:
            st = self.frames[-1].stack
            while st and st[-1][3] == 0:
                st.pop()
            if st:
                return
            self.frames.pop()
        self.done = True

    def thread_of(self, lane: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(ctaid, tid) of a lane."""
        return self.cta.ctaid, tuple(int(v) for v in self.tid[lane])

    def where(self) -> tuple[object, int] | None:
        """(FnCode, pc) of the instruction the warp is at, or None when it is done."""
        if not self.frames:
            return None
        f = self.frames[-1]
        return f.code, f.stack[-1][0]


@define(eq=False)
class CtaState:
    """One CTA being executed: its warps, shared memory (a :class:`simtc.semantics.Cta`'s), named barriers."""

    ctaid: tuple[int, int, int]
    cta: object
    """The :class:`simtc.semantics.Cta` whose SharedMemory is this CTA's shared memory (one access API)."""
    shared_size: int
    warps: list = field(factory=list)
    barriers: dict = field(factory=dict)
    launch: object = None
    """The launch's run state (counters, printf, notes)."""
    cluster_barrier: ClusterBarrier = field(factory=lambda: ClusterBarrier())
    """``barrier.cluster`` of this CTA's cluster (a launch without clusters is a cluster of one CTA)."""

    def live_warps(self) -> int:
        return sum(1 for w in self.warps if not w.done)
