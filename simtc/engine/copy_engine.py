"""The SM's copy engine (TMA): tensor loads and stores and bulk copies.

Issuing a TMA instruction holds the issuing thread ``tma_issue_gap`` cycles (elect + ``cp.async.bulk``:
the interval FlashGPU-Sim measured between one thread's consecutive bulk copies; the handler holds the warp).
The copy engine then sends the load's rows to the memory system (:mod:`simtc.engine.memory`) together --
a tile box is one request, a ``.tile::gather4`` four requests of one scattered row each -- and writes each
row's bytes into shared memory through the SM's port as they arrive; the load completes (``complete_tx`` on
its mbarrier) when its last byte is written. A store or bulk copy reads its bytes through the port, then
writes them to memory; ``wait_group.read`` waits for the read. How many copies the engine itself keeps in
flight is not known (gather4 has no published throughput): here its requests only meet in the
memory system and on the port.

With the ``copy_engine`` mechanism off issuing takes no time (memory and port still do).

A kernel simtc's executor ran brings its copies here as the same records (:mod:`simtc.ptx.recording`): its
``cp.async.bulk.tensor`` loads with the box's bytes and rows from the decoded tensor map, and its non-tensor
``cp.async.bulk`` global -> shared copies as one-row loads of ``size`` bytes (the requests
``request_bytes_per_cycle`` and ``dram_latency`` were measured with).

>>> from simtc.engine.parameters import Timing
>>> from simtc.engine.memory import MemorySystem
>>> from simtc.engine.smem_port import SharedMemoryPort
>>> from simtc.isa import CpAsyncBulkTensor
>>> t = Timing("sm100")
>>> def engine():
...     return CopyEngine(t, SharedMemoryPort(t), MemorySystem(t))
>>> engine().load(0, CpAsyncBulkTensor(0, 2048, "bar"))    # a tile streams at one request's rate
830
>>> engine().load(0, CpAsyncBulkTensor(0, 2048, "bar", mode="gather4", rows=4))   # four rows side by side
779
>>> engine().gap
32
"""

from __future__ import annotations

from simtc.engine.calendar import Spans

__all__ = ["CopyEngine"]


class CopyEngine:
    """The SM's TMA unit (see the module text)."""

    __slots__ = ("gap", "memory", "port", "spans")

    def __init__(self, timing, port, memory):
        self.gap = timing["tma_issue_gap"] if timing.enabled("copy_engine") else 0
        self.port = port
        self.memory = memory
        self.spans = Spans()

    def load(self, t: int, rec, who: int = -1) -> int:
        """Issue a TMA load at ``t``; returns the cycle its last byte is in shared memory."""
        rows = 4 if rec.mode == "gather4" else 1
        per_row = rec.nbytes // rows
        box_rows = rec.rows if rec.mode == "tile" and rec.rows else 1
        end = t
        for _ in range(rows):
            arrived = self.memory.request(t, per_row, box_rows, rec.tensor)
            written = self.port.transfer(arrived, self.port.cycles(per_row), "copy", who)
            if written > end:
                end = written
        self.spans.add(t, end, who)
        return end

    def store(self, t: int, nbytes: int, tensor: str = "", who: int = -1) -> tuple[int, int]:
        """Issue a TMA store / bulk copy of ``nbytes`` at ``t``: ``(source read, data written to memory)``."""
        read = self.port.transfer(t, self.port.cycles(nbytes), "copy", who)
        written = self.memory.request(read, nbytes, 1, tensor, write=True)
        self.spans.add(t, written, who)
        return read, written

    @property
    def busy(self) -> int:
        """Cycles with at least one copy in flight."""
        return sum(e - s for s, e, _ in self.spans)
