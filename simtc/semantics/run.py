"""``run_program``: execute a :class:`simtc.isa.Program` untimed on a :class:`~simtc.semantics.Cta`.

Each warp of each role walks the role's records in order. A warp runs until a record would
wait (:class:`~simtc.semantics.WouldBlock`: an unfinished mbarrier phase, a named barrier still
missing threads); then the next warp runs. Warps are visited in role order, then warp order;
the order of records that do not wait on each other is therefore this fixed interleaving (the
engine decides real timing). When no warp can move, the program is deadlocked: that is an error
naming every waiting warp.
"""

from __future__ import annotations

from simtc.semantics.cta import Cta, SemanticsError, WouldBlock
from simtc.semantics.execute import execute

__all__ = ["run_program"]


def run_program(program, cta: Cta | None = None, *, init_barriers: bool = True) -> Cta:
    """Run every role of ``program`` to its end; returns the :class:`Cta` (a fresh one by default).

    With ``init_barriers`` the program's mbarrier table is initialised first (the setup the
    kernel's barrier-init warp does; a program that issues its own ``mbarrier.init`` passes False).
    """
    cta = Cta() if cta is None else cta
    if init_barriers:
        cta.init_barriers(program)
    cursors = []  # [role, warp, threads, next record index]
    for role in program.roles:
        for i, w in enumerate(role.warps):
            threads = min(32, role.threads - 32 * i)
            if threads > 0:
                cursors.append([role, w, threads, 0])
    while True:
        moved, blocked = False, []
        for cur in cursors:
            role, warp, threads, i = cur
            while i < len(role.records):
                try:
                    execute(role.records[i], cta, warp=warp, threads=threads)
                except WouldBlock as e:
                    blocked.append(f"role {role.name!r} warp {warp} at record {i}: {e.message}")
                    break
                i += 1
                moved = True
            cur[3] = i
        if not blocked:
            return cta
        if not moved:
            raise SemanticsError(f"program {program.name!r} deadlocks: " + "; ".join(blocked),
                                 rule="every wait is eventually satisfied")
