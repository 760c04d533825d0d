"""A warp (or an elected thread) issuing its role's records in order: the process every record passes through.

For each record the warp

1. waits until the registers the record reads are ready (the **scoreboard**: a register is ready when its
   producer's latency has passed -- an ``ld.shared``'s data, a CUDA-core block's results);
2. takes a cycle of its sub-partition's **issue slot** (shared with the other warps of the sub-partition;
   a CUDA-core block takes one per instruction, in slices: :mod:`simtc.engine.issue`);
3. hands the record to its **handler** (:mod:`simtc.engine.handlers`), which books the units the record
   uses and says how long the warp is held -- one cycle for most records, longer for a block, until a
   barrier or a wait lets it go for the blocking ones.

The warp's trace events (issue, wait, resume, done) go to the engine's trace; what the records touch goes
to the engine's observers (the hazard checker).
"""

from __future__ import annotations

from simtc.engine.ops import K_CUDA

__all__ = ["Warp", "run"]


class Warp:
    """One warp of a role (or its one elected thread) and its timing state."""

    __slots__ = ("bulk_groups", "bulk_open", "busy", "done", "finished_at", "idx", "last_ev", "ld_last", "ops", "pc",
                 "proc", "ready", "role", "sp", "st_last", "store_visible", "tc", "tc_last_ev", "threads",
                 "wait_since", "waited", "waiting_on", "warp", "wg_count", "wg_groups", "wg_inflight", "wg_open")

    def __init__(self, idx: int, role: str, warp: int, threads: int, ops: list, sp):
        self.idx, self.role, self.warp, self.threads, self.ops, self.sp = idx, role, warp, threads, ops, sp
        self.pc = 0
        self.done = False
        self.waiting_on: str | None = None
        self.wait_since = 0
        self.busy = self.waited = 0
        self.last_ev = -1
        self.ready: dict[str, int] = {}  # register -> cycle its value is ready (the scoreboard)
        self.tc: list = []  # Flights of its asynchronous tcgen05 operations that may still be in flight
        self.tc_last_ev = -1
        self.ld_last = self.st_last = 0
        self.store_visible = 0  # when this warp's shared-memory stores are visible to a barrier
        self.bulk_groups: list[int] = []  # read-done cycle per committed bulk group
        self.bulk_open = 0
        self.wg_groups: list[int] = []
        self.wg_open = 0
        self.wg_count = 0
        self.wg_inflight: list[int] = []
        self.proc = None
        self.finished_at: int | None = None

    @property
    def name(self) -> str:
        return f"{self.role}[w{self.warp}]"

    def tc_flights(self, now: int) -> list:
        """Its tensor-pipe instructions not yet complete at ``now`` (what a ``tcgen05.commit`` tracks)."""
        self.tc = [f for f in self.tc if f.done > now]
        return list(self.tc)

    def block(self, eng, i: int, what: str) -> None:
        """Start waiting (trace event ``wait``)."""
        self.waiting_on = what
        self.wait_since = eng.sched.now
        self.last_ev = eng.ev(self.role, self.warp, i, "wait", what, self.last_ev)

    def unblock(self, eng, i: int, dep: int) -> None:
        """Stop waiting (trace event ``resume``, caused by ``dep``)."""
        self.waited += eng.sched.now - self.wait_since
        self.waiting_on = None
        self.last_ev = eng.ev(self.role, self.warp, i, "resume", "", dep)

    def wait_until(self, eng, i: int, t: int, what: str, dep: int | None = None):
        """Wait until cycle ``t`` (a generator to ``yield from``)."""
        self.block(eng, i, what)
        yield eng.sched.sleep(t - eng.sched.now)
        self.unblock(eng, i, self.last_ev if dep is None else dep)


def run(eng, w: Warp):
    """The warp's process: issue its records in order (see the module text)."""
    env = eng.sched.env
    timeout = env.timeout
    sp = w.sp
    issued = eng.issued
    sem = eng.mode == "semantics"
    for i, op in enumerate(w.ops):
        w.pc = i
        now = env.now
        if op.regs_r:
            ready = w.ready
            t = max(ready.get(r, 0) for r in op.regs_r)
            if t > now:
                regs = ", ".join(r for r in op.regs_r if ready.get(r, 0) > now)
                yield from w.wait_until(eng, i, t, f"registers {regs}")
                now = env.now
        if op.kind == K_CUDA:  # issues instruction by instruction: the handler books the issue slot
            yield from op.handler(eng, w, op, i, now)
            continue
        t = sp.issue_one(now)
        if t > now:
            yield timeout(t - now)
            now = t
        ev = issued(w, i, op, now)
        r = op.handler(eng, w, op, i, now, ev)
        if sem and op.sync:
            eng.execute(op.rec, w)
        if r.__class__ is int:
            w.busy += r
            if r:
                yield timeout(r)
        else:
            yield from r
    w.done = True
    w.finished_at = eng.sched.now
    w.pc = len(w.ops)
    w.last_ev = eng.ev(w.role, w.warp, -1, "done", "", w.last_ev)
