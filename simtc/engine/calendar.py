"""Two ways a unit hands out its time, and the busy record the timeline draws.

* :class:`Calendar` -- a resource of fixed bandwidth shared by requests that may be booked ahead of time
  (a TMA's bytes arrive thousands of cycles after the TMA was issued; an MMA waiting behind others reads
  its operands when it enters the pipe). A request of ``d`` cycles from cycle ``t`` takes the first ``d``
  free cycles at or after ``t``, around what earlier requests booked: transfers interleave, and what was
  booked first keeps its cycles. The shared-memory port and the SM's memory link are calendars.
* :class:`InOrder` -- a server that takes requests in the order they come, each starting when the
  previous one frees it ("next free" time): the tensor pipe, the TMEM path, a sub-partition's issue slot
  and pipes.

Both record the cycles they are busy (``busy``) and their busy spans, merged where they touch
(:class:`Spans`; a calendar's spans are its busy intervals, kept when it forgets them).

>>> c = Calendar("port")
>>> c.book(10, 4), c.book(0, 6), c.book(0, 8)   # the third fills 6-10, then 14-18
(14, 6, 18)
>>> c.busy, list(c.spans)
(18, [(0, 18, -1)])
>>> s = InOrder("pipe")
>>> s.take(5, 3), s.take(5, 3), s.free
(8, 11, 11)
"""

from __future__ import annotations

import bisect
from array import array

__all__ = ["Calendar", "InOrder", "OneServer", "Spans"]


class Spans:
    """Busy spans ``(start, end, who)`` of one unit, kept sorted by start and merged where they overlap or touch
    (``who`` is the first requester of a merged span; -1 where unknown)."""

    __slots__ = ("_items",)

    def __init__(self):
        self._items: list[list[int]] = []

    def add(self, start: int, end: int, who: int = -1) -> None:
        if end <= start:
            return
        items = self._items
        if not items or start > items[-1][1]:
            if not items or start >= items[-1][0]:
                items.append([start, end, who])
                return
        elif start >= items[-1][0]:  # touches the last span: extend it (the common case)
            if end > items[-1][1]:
                items[-1][1] = end
            return
        # out of order (a booking ahead of time followed by an earlier one): insert and merge
        i = bisect.bisect_left(items, [start, -1, -1])
        items.insert(i, [start, end, who])
        j = max(0, i - 1)
        while j + 1 < len(items):
            a, b = items[j], items[j + 1]
            if b[0] <= a[1]:
                a[1] = max(a[1], b[1])
                del items[j + 1]
            elif j >= i:
                break
            else:
                j += 1

    def __iter__(self):
        return (tuple(x) for x in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)


class InOrder:
    """A server taking requests in arrival order: ``take(t, d)`` starts at ``max(t, free)`` and holds it ``d``."""

    __slots__ = ("busy", "free", "name", "spans")

    def __init__(self, name: str, spans: bool = True):
        self.name = name
        self.free = 0
        self.busy = 0
        self.spans = Spans() if spans else None

    def start(self, t: int) -> int:
        """When a request arriving at ``t`` would start."""
        return t if t > self.free else self.free

    def take(self, t: int, d: int, who: int = -1) -> int:
        """Book ``d`` cycles from ``max(t, free)``; returns the end."""
        s = t if t > self.free else self.free
        e = s + d
        self.free = e
        self.busy += d
        if self.spans is not None:
            self.spans.add(s, e, who)
        return e


class Calendar:
    """A bandwidth booked in whole cycles: ``book(t, d)`` takes the first ``d`` free cycles at or after ``t``.

    Busy time is a sorted list of disjoint intervals; :meth:`forget` drops those that ended before a cycle
    no request can start before (the engine's clock), so the list stays short.
    """

    __slots__ = ("_ends", "_past", "_starts", "busy", "name")

    def __init__(self, name: str):
        self.name = name
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.busy = 0
        self._past = array("q")  # forgotten busy intervals, start and end interleaved (for the timeline)

    @property
    def spans(self) -> Spans:
        """Every busy interval so far, ``(start, end, -1)``."""
        out = Spans()
        past = self._past
        for i in range(0, len(past), 2):
            out.add(past[i], past[i + 1])
        for a, b in zip(self._starts, self._ends, strict=True):
            out.add(a, b)
        return out

    def book(self, t: int, d: int, who: int = -1) -> int:
        """Take ``d`` (>= 0) cycles from the free time at or after ``t``; returns the cycle the last one ends."""
        if d <= 0:
            return t
        self.busy += d
        starts, ends = self._starts, self._ends
        if not starts or t >= ends[-1]:  # nothing booked at or after t: one interval (the common case)
            if starts and t == ends[-1]:
                ends[-1] = t + d
            else:
                starts.append(t)
                ends.append(t + d)
            return t + d
        i = bisect.bisect_right(ends, t)  # first interval ending after t
        pos, need = t, d
        while need:
            if i < len(starts) and starts[i] <= pos:  # inside a busy interval: skip to its end
                pos = ends[i]
                i += 1
                continue
            gap_end = starts[i] if i < len(starts) else None
            take = need if gap_end is None else min(need, gap_end - pos)
            self._insert(i, pos, pos + take)
            i = bisect.bisect_right(self._ends, pos + take - 1)
            pos += take
            need -= take
        return pos

    def _insert(self, i: int, s: int, e: int) -> None:
        starts, ends = self._starts, self._ends
        left = i > 0 and ends[i - 1] == s
        right = i < len(starts) and starts[i] == e
        if left and right:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]
        elif left:
            ends[i - 1] = e
        elif right:
            starts[i] = s
        else:
            starts.insert(i, s)
            ends.insert(i, e)

    def _window_free(self, t: int, d: int) -> bool:
        """Whether cycles ``t .. t+d-1`` are all free."""
        i = bisect.bisect_right(self._ends, t)  # first interval ending after t
        return i == len(self._starts) or self._starts[i] >= t + d

    def forget(self, before: int) -> None:
        """Set aside the busy intervals that ended at or before cycle ``before`` (no request can reach them)."""
        k = bisect.bisect_right(self._ends, before)
        if k:
            past = self._past
            for a, b in zip(self._starts[:k], self._ends[:k], strict=True):
                past.append(a)
                past.append(b)
            del self._starts[:k], self._ends[:k]

    def free_at(self, t: int) -> bool:
        """Whether cycle ``t`` is free."""
        i = bisect.bisect_right(self._ends, t)
        return not (i < len(self._starts) and self._starts[i] <= t)


class OneServer:
    """A unit whose time is one :class:`InOrder` or :class:`Calendar`, ``self.server``: its busy cycles and spans
    are the server's (the tensor pipe, the TMEM path, the L1's miss path)."""

    __slots__ = ()

    @property
    def busy(self) -> int:
        return self.server.busy

    @property
    def spans(self):
        return self.server.spans
