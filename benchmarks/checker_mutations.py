"""Every single-record deletion of FlashMLA head64's synchronisation, and every parity flip, through the checker.

For each role of the head64 Program (V32, ``BLOCKS`` blocks so that every ring buffer is reused) the script deletes,
one at a time, every fence (``tcgen05.fence::*``, ``fence.proxy.async``), wait (``mbarrier.try_wait``,
``tcgen05.wait::ld/st``), commit, mbarrier arrive and named barrier, and flips the parity of every
``mbarrier.try_wait``; it replays each mutant timing-only (the hazard checker on) and counts those flagged by a
hazard or a deadlock. The unflagged ones are listed by role, record kind and barrier: each is either harmless (with
an argument) or a miss of the checker.

    python benchmarks/checker_mutations.py [--blocks 6] [--json FILE]

On the development machine (2 cores) a sweep of 6 blocks takes about a minute.
"""

from __future__ import annotations

import argparse
import collections
import json
import time

import attrs

from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx, MbarrierTryWait
from simtc.isa.sync import BarArrive, BarSync, FenceProxyAsync
from simtc.isa.tcgen05 import Commit, FenceAfterThreadSync, FenceBeforeThreadSync, WaitLd, WaitSt
from simtc.kernels.flashmla import replay as rp
from simtc.kernels.flashmla.head64 import head64_program

DELETABLE = (FenceAfterThreadSync, FenceBeforeThreadSync, FenceProxyAsync, MbarrierTryWait, WaitLd, WaitSt, Commit,
             MbarrierArrive, MbarrierArriveExpectTx, BarSync, BarArrive)


def mutants(blocks: int):
    program = head64_program("v32", blocks)
    for role in program.roles:
        for i, rec in enumerate(role.records):
            if isinstance(rec, DELETABLE):
                yield role.name, i, "delete", rec
            if isinstance(rec, MbarrierTryWait):
                yield role.name, i, "flip", rec


def _transform(role_name: str, index: int, how: str):
    def f(program):
        roles = []
        for role in program.roles:
            if role.name == role_name:
                recs = list(role.records)
                if how == "delete":
                    del recs[index]
                else:
                    recs[index] = attrs.evolve(recs[index], parity=1 - recs[index].parity)
                role = attrs.evolve(role, records=tuple(recs))
            roles.append(role)
        return attrs.evolve(program, roles=tuple(roles))
    return f


def sweep(blocks: int = 6) -> dict:
    t0 = time.time()
    rows = []
    for role, i, how, rec in mutants(blocks):
        r = rp.replay("v32", blocks, 0, timing_only=True, transform=_transform(role, i, how))
        rules = sorted({h["rule"] for h in r.hazards})
        rows.append({"role": role, "index": i, "how": how, "record": type(rec).__name__,
                     "bar": getattr(rec, "bar", None) if isinstance(getattr(rec, "bar", None), str) else None,
                     "rules": rules, "deadlock": r.deadlock is not None,
                     "flagged": bool(rules) or r.deadlock is not None})
    missed = collections.Counter((x["role"], x["how"], x["record"], (x["bar"] or "").split("[")[0])
                                 for x in rows if not x["flagged"])
    return {"blocks": blocks, "mutants": len(rows), "flagged": sum(x["flagged"] for x in rows),
            "unflagged": len(rows) - sum(x["flagged"] for x in rows), "seconds": round(time.time() - t0, 1),
            "unflagged_by_kind": [{"role": k[0], "how": k[1], "record": k[2], "bar": k[3], "count": n}
                                  for k, n in sorted(missed.items())], "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    out = sweep(a.blocks)
    print(f"{out['mutants']} mutants at {out['blocks']} blocks: {out['flagged']} flagged, {out['unflagged']} not "
          f"({out['seconds']} s)")
    for k in out["unflagged_by_kind"]:
        print(f"  not flagged: {k['count']:3d} x {k['how']} {k['record']} in {k['role']} ({k['bar'] or '-'})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
