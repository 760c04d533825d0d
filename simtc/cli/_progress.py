"""Long work on the command line: a progress bar on stderr, and a refusal of requests that would not fit in memory.

* :func:`progress` -- a context manager yielding a callback ``update(phase, done, total)`` (the form
  :func:`simtc.kernels.flashmla.replay.replay` and :func:`simtc.kernels.flashmla.io.make_inputs` report in) that
  draws one rich bar per phase on stderr, or None when no bar is wanted: under ``--json``, when stderr is not a
  terminal, or with ``SIMTC_PROGRESS=0``. The bar is transient (erased when the work ends) and nothing of it
  reaches stdout, so ``--json`` output and piped output stay clean.
* :func:`available_memory` -- the bytes this process may still take: ``SIMTC_MEMORY_LIMIT`` when set (bytes, or
  with a K/M/G/T suffix, powers of 1024), else the smaller of ``MemAvailable`` (``/proc/meminfo``; elsewhere
  ``os.sysconf`` available pages) and the cgroup's ``memory.max`` less its ``memory.current`` where there is one.
* :func:`check_memory` -- refuse (:class:`MemoryLimitError`, exit 2) a request whose estimate exceeds it, naming
  the estimate, what is available and where that figure comes from, before any of the work is done.

Kept light: rich is imported only when a bar is drawn.

>>> parse_size("1.5G"), parse_size("512M"), parse_size("4096")
(1610612736, 536870912, 4096)
>>> format_bytes(9_234_567_890)
'8.6 GiB'
"""

from __future__ import annotations

import contextlib
import os
import sys

from simtc.errors import SimtcError

__all__ = ["MEMORY_ENV", "MemoryLimitError", "available_memory", "check_memory", "format_bytes", "parse_size",
           "progress", "progress_wanted"]

MEMORY_ENV = "SIMTC_MEMORY_LIMIT"
"""Environment variable that sets the memory a request may use (overrides what the machine reports)."""
PROGRESS_ENV = "SIMTC_PROGRESS"
"""Environment variable: ``0`` turns the progress bar off (it is drawn only on a terminal anyway)."""
_MEMORY_RULE = "a request must fit in the memory available (its estimate <= MemAvailable, or SIMTC_MEMORY_LIMIT)"
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class MemoryLimitError(SimtcError, MemoryError):
    """A request whose memory estimate exceeds what the machine has available (refused before the work)."""


def parse_size(text: str) -> int:
    """Bytes from ``"123"``, ``"512M"``, ``"1.5G"``, ``"2GiB"`` (K/M/G/T are powers of 1024); ValueError else."""
    s = text.strip().upper().removesuffix("IB").removesuffix("B")
    if not s.isascii():
        raise ValueError(text)
    unit = s[-1:] if s[-1:] in _UNITS else ""
    value = float(s[:len(s) - len(unit)])
    if not value >= 0 or value == float("inf"):
        raise ValueError(text)
    return int(value * _UNITS[unit])


def format_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps it >= 1 (one decimal)."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        scale = _UNITS[unit[0]]
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _sysconf_available() -> int | None:
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup_available() -> int | None:
    """cgroup v2: ``memory.max`` less ``memory.current`` of this process's group (None when unlimited/unknown)."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next((line.strip().split(":", 2)[2] for line in f if line.startswith("0::")), None)
        if path is None:
            return None
        base = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
        with open(os.path.join(base, "memory.max")) as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open(os.path.join(base, "memory.current")) as f:
            current = int(f.read().strip())
        return max(0, int(limit) - current)
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def available_memory() -> tuple[int | None, str]:
    """(bytes a request may use, where that figure comes from); (None, why) when nothing can be read."""
    text = os.environ.get(MEMORY_ENV, "").strip()
    if text:
        try:
            return parse_size(text), f"{MEMORY_ENV}={text}"
        except ValueError:
            raise SimtcError(f"{MEMORY_ENV}={text!r} is not a size: set it to bytes, e.g. 2000000000 or 2G, or unset "
                             "it", rule=f"{MEMORY_ENV} is a number of bytes with an optional K/M/G/T suffix") from None
    found = [(v, src) for v, src in ((_meminfo_available(), "MemAvailable in /proc/meminfo"),
                                     (_cgroup_available(), "the cgroup's memory.max less memory.current"))
             if v is not None]
    if not found:
        v = _sysconf_available()
        return (v, "available physical pages (os.sysconf)") if v is not None else (None, "unknown")
    return min(found)


def check_memory(need: int, what: str) -> None:
    """Refuse ``what`` (e.g. "simtc inputs make --topk 1000064") when ``need`` bytes exceed :func:`available_memory`
    (nothing is refused when the machine does not say)."""
    have, source = available_memory()
    if have is not None and need > have:
        raise MemoryLimitError(f"{what} needs about {format_bytes(need)} of memory (estimate), more than the "
                               f"{format_bytes(have)} available ({source}); ask for less", rule=_MEMORY_RULE)


def progress_wanted(as_json: bool = False, stream=None) -> bool:
    """Whether to draw a bar: not under ``--json``, only on a terminal, not with ``SIMTC_PROGRESS=0``."""
    stream = sys.stderr if stream is None else stream
    if as_json or os.environ.get(PROGRESS_ENV, "").strip() == "0":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextlib.contextmanager
def progress(as_json: bool = False, stream=None):
    """Yield ``update(phase, done, total)`` drawing one transient bar per phase on ``stream`` (stderr), or None
    when :func:`progress_wanted` says no (callers pass it on as is: None means "report nothing")."""
    stream = sys.stderr if stream is None else stream
    if not progress_wanted(as_json, stream):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=Console(file=stream), transient=True)
    tasks: dict[str, int] = {}

    def update(phase: str, done: int, total: int) -> None:
        task = tasks.get(phase)
        if task is None:
            task = tasks[phase] = bar.add_task(phase, total=total)
        bar.update(task, completed=done, total=total)

    with bar:
        yield update
