"""The engine's clock and event queue: SimPy's :class:`simpy.Environment`, through its public API only.

Everything in the engine that takes time goes through a :class:`Scheduler`:

* ``sleep(d)`` -- an event ``d`` cycles from now (``env.timeout``), what a warp yields to wait;
* ``call_at(t, fn, *args)`` -- call ``fn(*args)`` at cycle ``t`` (a timeout with ``fn`` in its
  ``callbacks``): how units complete work and arrivals land;
* ``event()`` -- an event a barrier succeeds when a waiting warp may go on;
* ``process(gen)`` -- a warp's generator as a SimPy process.

Order is SimPy's: events are processed by (time, priority, insertion order); every engine event has the
same priority, so at equal times the one scheduled first runs first. ``tests/engine/test_scheduler.py`` pins
that behaviour (it is what makes runs deterministic).

>>> s = Scheduler()
>>> seen = []
>>> s.call_at(5, seen.append, "b"); s.call_at(5, seen.append, "c"); s.call_at(2, seen.append, "a")
>>> s.run(); seen, s.now
(['a', 'b', 'c'], 5)
"""

from __future__ import annotations

import simpy

__all__ = ["Scheduler"]


class _Call:
    """A timeout callback that calls ``fn(*args)`` (no closure per call)."""

    __slots__ = ("args", "fn")

    def __init__(self, fn, args: tuple):
        self.fn = fn
        self.args = args

    def __call__(self, _event) -> None:
        self.fn(*self.args)


class Scheduler:
    """Integer-cycle time on a SimPy environment (public API: ``timeout``, ``event``, ``process``, ``run``,
    ``step``, ``peek``, ``now``)."""

    __slots__ = ("env",)

    def __init__(self):
        self.env = simpy.Environment()

    @property
    def now(self) -> int:
        return int(self.env.now)

    def sleep(self, delay: int):
        """An event ``delay`` (>= 0) cycles from now."""
        return self.env.timeout(delay)

    def call_at(self, t: int, fn, *args) -> None:
        """Call ``fn(*args)`` at cycle ``t`` (now if ``t`` is in the past)."""
        ev = self.env.timeout(max(0, t - self.env.now))
        ev.callbacks.append(_Call(fn, args))

    def event(self):
        """A pending event (succeed it with ``event.succeed(value)``)."""
        return self.env.event()

    def process(self, generator):
        return self.env.process(generator)

    def run(self, until: int | None = None) -> None:
        """Process events until none is left, or until the next one is at cycle ``until`` or later."""
        if until is None:
            self.env.run()
            return
        env = self.env
        while env.peek() < until:
            env.step()

    def step(self) -> bool:
        """Process one event; False when none was left."""
        if self.env.peek() == float("inf"):
            return False
        self.env.step()
        return True

    def peek(self) -> float:
        """Cycle of the next event (``inf`` when none is scheduled)."""
        return self.env.peek()

    @property
    def idle(self) -> bool:
        return self.env.peek() == float("inf")
