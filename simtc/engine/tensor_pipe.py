"""The tensor pipe: ``tcgen05.mma``, ``tcgen05.cp`` and ``wgmma`` in issue order, operands from the port.

An MMA issued at cycle ``t`` enters the pipe at ``t + issue`` (``mma_issue`` / ``wgmma_issue``) or when
the MMA before it leaves, whichever is later. On entering it books its shared-memory operand bytes on the
SM's port (A for SS, and B unless the ``.ws`` collector is reused: :func:`~simtc.engine.timing.port_bytes_per_mma`).
It holds the pipe for its initiation interval (:func:`~simtc.engine.timing.mma_ii_bounds`), where the
port bound is the time the port really took -- longer when other readers and writers were using it -- and
it completes when its latency has passed (:func:`~simtc.engine.timing.mma_completion_cycles`), late by
as much as the port made it wait. The ``.ws`` collector usage of an MMA depends on the MMA before it
(ping-pong between ``b0`` and ``b1``).

``tcgen05.cp`` streams its bytes through the port and completes ``tcgen05_cp_fixed`` later.

With the ``tensor_pipe`` mechanism off every instruction of the pipe completes when it is issued.

>>> from simtc.engine.parameters import Timing
>>> from simtc.engine.smem_port import SharedMemoryPort
>>> from simtc.isa import InstrDescriptor, Mma, SmemDescriptor
>>> qk = Mma(400, 256, SmemDescriptor(start=0, lbo=16, sbo=1024, layout_type="SW128"),
...          InstrDescriptor(kind="f16", m=64, n=128, a_format="bf16", b_format="bf16"), True, ws=True)
>>> t = Timing("sm100")
>>> pipe = TensorPipe(t, SharedMemoryPort(t))
>>> [(f.start, f.done) for f in (pipe.mma(0, qk) for _ in range(3))]  # II 44; 1 + stream 32 + drain 30
[(1, 63), (45, 107), (89, 151)]
"""

from __future__ import annotations

import functools
import math

from simtc.engine import timing as tm
from simtc.engine.calendar import InOrder, OneServer

__all__ = ["Flight", "TensorPipe", "mma_spec_of"]


class Flight:
    """One instruction on the tensor pipe: when it entered, when its operand stream ends, when it completes and
    when the pipe is free for the next instruction (``free``, default: the end of the operand stream)."""

    __slots__ = ("done", "free", "port_end", "start")

    def __init__(self, start: int, port_end: int, done: int, free: int | None = None):
        self.start, self.port_end, self.done = start, port_end, done
        self.free = port_end if free is None else free


def _collector_usage(rec, prev) -> str:
    """The timing model's collector usage (discard / pingpong / reuse) of an MMA after ``prev``.

    ``.ws``: ``bX::use`` / ``bX::lastuse`` reuse the collector (no B fetch); ``bX::fill`` and
    ``bX::discard`` fetch B -- alternating collectors between consecutive MMAs is the
    ping-pong KevinZeng08/microbench-blackwell ``tcgen05_mma_ws.md`` measures. Non-``.ws``: ``a::use`` /
    ``a::lastuse`` reuse A.
    """
    c = rec.collector
    if c.endswith("::use") or c.endswith("::lastuse"):
        return "reuse"
    if rec.ws and prev is not None and getattr(prev, "ws", False):
        buf = c.split("::")[0] if "::" in c else "b0"
        pc = prev.collector
        pbuf = pc.split("::")[0] if "::" in pc else "b0"
        if buf != pbuf:
            return "pingpong"
    return "discard"


def mma_spec_of(rec, prev=None) -> tm.MmaSpec:
    """The :class:`~simtc.engine.timing.MmaSpec` of a ``tcgen05.mma`` or ``wgmma.mma_async`` record."""
    if type(rec).__name__ == "WgmmaMmaAsync":
        operands = "RS" if isinstance(rec.a, str) else "SS"
        return _spec("sm90", rec.m, rec.n, None, operands, False, "discard", rec.dtype)
    d = rec.idesc
    return _spec("sm100", d.m, d.n, None, rec.form, rec.ws, _collector_usage(rec, prev),
                 getattr(d, "a_format", "bf16"))


@functools.lru_cache(maxsize=1024)
def _spec(arch, m, n, k, operands, ws, collector, dtype) -> tm.MmaSpec:
    return tm.mma_spec(arch, m, n, k, operands, ws, collector, 1, dtype)


@functools.lru_cache(maxsize=4096)
def _mma_cost(spec: tm.MmaSpec, timing) -> tuple[int, int, int, int, int]:
    """(issue, II without the port, nominal port bound, port cycles to book, completion after issue)."""
    bounds = tm.mma_ii_bounds(spec, None, timing)
    port_nominal = bounds.pop("smem_port")
    per_byte = timing["smem_port_bytes_per_cycle"]
    book = math.ceil(tm.port_bytes_per_mma(spec) / per_byte)
    issue = tm.mma_latency_breakdown(spec, None, timing)["issue"]
    return issue, max(bounds.values()), port_nominal, book, tm.mma_completion_cycles(spec, None, timing)


class TensorPipe(OneServer):
    """The SM's tensor pipe (see the module text)."""

    __slots__ = ("cp_fixed", "enabled", "port", "prev", "server", "timing")

    def __init__(self, timing, port):
        self.timing = timing
        self.port = port
        self.enabled = timing.enabled("tensor_pipe")
        self.server = InOrder("tensor_pipe")
        self.prev = None
        self.cp_fixed = timing["tcgen05_cp_fixed"] if timing.arch == "sm100" else 0

    def mma(self, t: int, rec, who: int = -1) -> Flight:
        """Issue an MMA record at cycle ``t``; its :class:`Flight` (enters the pipe, operands streamed, completes)."""
        spec = mma_spec_of(rec, self.prev)
        self.prev = rec
        if not self.enabled:
            return Flight(t, t, t)
        issue, ii, port_nominal, book, done = _mma_cost(spec, self.timing)
        start = self.server.start(t + issue)
        port_end = self.port.transfer(start, book, "tensor", who)
        port_bound = port_end - start + (port_nominal - book)  # the A-only fetch startup stays on top
        occ = max(ii, port_bound)
        self.server.take(start, occ, who)
        late = max(0, port_bound - port_nominal)
        return Flight(start, port_end, start - issue + done + late, start + occ)

    def cp(self, t: int, nbytes: int, who: int = -1) -> Flight:
        """Issue a ``tcgen05.cp`` of ``nbytes`` at ``t``; its :class:`Flight`."""
        if not self.enabled:
            return Flight(t, t, t)
        issue = self.timing["mma_issue"]
        start = self.server.start(t + issue)
        end = self.port.transfer(start, self.port.cycles(nbytes), "tensor", who)
        self.server.take(start, end - start, who)
        return Flight(start, end, end + self.cp_fixed)
