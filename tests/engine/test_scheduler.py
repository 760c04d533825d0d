"""What the engine relies on from SimPy (public API only, through simtc.engine.scheduler): events at equal times run
in the order they were scheduled, timeouts of 0 run after what is already due now, ``run(until)`` stops before the
cycle given, and ``peek`` reports the next cycle. Runs are deterministic because of these."""

import simpy

from simtc.engine.scheduler import Scheduler


def test_equal_times_run_in_scheduling_order():
    s = Scheduler()
    seen = []
    for tag in "abcdef":
        s.call_at(7, seen.append, tag)
    s.call_at(3, seen.append, "first")
    s.run()
    assert seen == ["first", *"abcdef"] and s.now == 7


def test_a_zero_delay_runs_after_what_is_already_due():
    s = Scheduler()
    seen = []

    def at_two():
        seen.append("x")
        s.call_at(2, seen.append, "scheduled at 2, from 2")   # same cycle, queued behind y
    s.call_at(2, at_two)
    s.call_at(2, seen.append, "y")
    s.run()
    assert seen == ["x", "y", "scheduled at 2, from 2"]


def test_past_times_run_now():
    s = Scheduler()
    seen = []
    s.call_at(5, lambda: s.call_at(1, seen.append, s.now))
    s.run()
    assert seen == [5]


def test_run_until_stops_before_that_cycle_and_step_peek_idle():
    s = Scheduler()
    seen = []
    for t in (1, 4, 9):
        s.call_at(t, seen.append, t)
    s.run(until=9)
    assert seen == [1, 4] and s.peek() == 9 and not s.idle
    assert s.step() and seen == [1, 4, 9]
    assert s.idle and not s.step() and s.peek() == float("inf")


def test_processes_sleep_and_events_wake_them_in_order():
    s = Scheduler()
    seen = []
    gate = s.event()

    def warp(name, delay):
        yield s.sleep(delay)
        seen.append((name, s.now))
        yield gate
        seen.append((name, "woken", s.now))

    s.process(warp("a", 2))
    s.process(warp("b", 2))
    s.call_at(6, gate.succeed)
    s.run()
    assert seen == [("a", 2), ("b", 2), ("a", "woken", 6), ("b", "woken", 6)]


def test_the_environment_is_simpys_own():
    assert isinstance(Scheduler().env, simpy.Environment)
