"""The SM's shared memory as one bandwidth: ``smem_port_bytes_per_cycle`` (128 B: 32 banks x 4 B) per cycle.

Every reader and writer draws from it, each in whole cycles:

* ``ld.shared`` / ``st.shared`` and the LDS/STS of CUDA-core blocks -- one cycle per *wavefront* (a bank
  conflict costs more wavefronts; :func:`simtc.smem.banks.bank_conflicts`);
* the tensor pipe's operand reads -- A (SS) and B of ``tcgen05.mma`` / ``wgmma`` when the MMA enters the
  pipe, the ``.ws`` B-collector fills, the source of ``tcgen05.cp``;
* the copy engine -- TMA loads write their bytes when they arrive; TMA stores and bulk copies read theirs.

The port is a :class:`~simtc.engine.calendar.Calendar`, so a transfer booked ahead (an MMA behind others,
a TMA's data still in flight) keeps its cycles and later requests use the free ones around it. An operand
stream keeps its pace while warps load and store around it: on the H200, an SS ``wgmma`` chain reading
80 B/cycle ran at the same 128 cycles per instruction with LDS.128 streams beside it, which got 33 B/cycle
(``tests/data/h200_calibration.json``, ``shared_memory.wgmma_lds``) -- the tensor core's reads come first,
the warps' ld/st.shared take the cycles left. With the
``shared_port`` mechanism off each kind of consumer (``"ldst"``, ``"tensor"``, ``"copy"``) has a port of its
own: nothing meets (the model before one shared bandwidth).

>>> from simtc.engine.parameters import Timing
>>> p = SharedMemoryPort(Timing("sm100"))
>>> p.cycles(10240), p.transfer(0, 80, "tensor"), p.transfer(10, 4, "ldst")   # an ld.shared waits its turn
(80, 80, 84)
>>> q = SharedMemoryPort(Timing("sm100").without("shared_port"))
>>> q.transfer(0, 80, "tensor"), q.transfer(0, 4, "ldst")
(80, 4)
"""

from __future__ import annotations

import math

from simtc.engine.calendar import Calendar

__all__ = ["CONSUMERS", "SharedMemoryPort"]

CONSUMERS = ("ldst", "tensor", "copy")


class SharedMemoryPort:
    """One bandwidth for the SM (or one per consumer kind, with the ``shared_port`` mechanism off)."""

    __slots__ = ("bytes_per_cycle", "calendars", "shared")

    def __init__(self, timing):
        self.bytes_per_cycle = timing["smem_port_bytes_per_cycle"]
        self.shared = timing.enabled("shared_port")
        if self.shared:
            one = Calendar("smem_port")
            self.calendars = dict.fromkeys(CONSUMERS, one)
        else:
            self.calendars = {c: Calendar(f"smem_port:{c}") for c in CONSUMERS}

    def cycles(self, nbytes: int) -> int:
        """Port cycles of ``nbytes`` streamed without conflicts."""
        return math.ceil(nbytes / self.bytes_per_cycle)

    def transfer(self, t: int, cycles: int, consumer: str, who: int = -1) -> int:
        """Book ``cycles`` of the port from cycle ``t`` for ``consumer``; returns the cycle the transfer ends."""
        return self.calendars[consumer].book(t, cycles, who)

    @property
    def busy(self) -> int:
        return sum(c.busy for c in set(self.calendars.values()))

    @property
    def spans(self):
        """Busy spans of the port (of all its calendars, merged, with the mechanism off)."""
        cals = list(dict.fromkeys(self.calendars.values()))
        if len(cals) == 1:
            return cals[0].spans
        from simtc.engine.calendar import Spans

        out = Spans()
        for s, e, w in sorted(x for c in cals for x in c.spans):
            out.add(s, e, w)
        return out

    def forget(self, before: int) -> None:
        for c in set(self.calendars.values()):
            c.forget(before)
