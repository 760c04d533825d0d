"""Every single-record deletion of FlashMLA head64's synchronisation, and every parity flip, through the checker.

For each role of the head64 Program (V32, ``BLOCKS`` blocks so that every ring buffer is reused) the script deletes,
one at a time, every fence (``tcgen05.fence::*``, ``fence.proxy.async``), wait (``mbarrier.try_wait``,
``tcgen05.wait::ld/st``), commit, mbarrier arrive and named barrier, and flips the parity of every
``mbarrier.try_wait``; it replays each mutant timing-only (the hazard checker on) and counts those flagged by a
hazard or a deadlock. A hazard that is a known race of the kernel itself (``head64.KNOWN_RACES``: the unmutated
Program has it too) does not count.

Every mutant the checker does not flag must be *harmless*: :data:`HARMLESS` holds, keyed by role, mutation, record
class, site (the barrier, the record's label, or what the record follows) and which occurrence (``phantom``: a wait
on a fresh barrier's phantom phase; ``last``: the role's last record of that kind at that site; ``any``), the
argument why deleting (flipping) it changes no happens-before order the Program's accesses rely on. The sweep fails
(exit 1) when an unflagged mutant has no argument: a miss of the checker, or a new harmless class to argue.

    python benchmarks/checker_mutations.py [--blocks 6] [--json FILE]

On the development machine (2 cores) a sweep of 6 blocks (329 mutants) takes about 20 s of CPU time.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import attrs

from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx, MbarrierTryWait
from simtc.isa.sync import BarArrive, BarSync, FenceProxyAsync
from simtc.isa.tcgen05 import Commit, FenceAfterThreadSync, FenceBeforeThreadSync, WaitLd, WaitSt
from simtc.kernels.flashmla import replay as rp
from simtc.kernels.flashmla.head64 import head64_program

DELETABLE = (FenceAfterThreadSync, FenceBeforeThreadSync, FenceProxyAsync, MbarrierTryWait, WaitLd, WaitSt, Commit,
             MbarrierArrive, MbarrierArriveExpectTx, BarSync, BarArrive)

_ONE_REQUEST = ("a one-request Program has no earlier request: {what}; in the kernel (kernel.cuh at 9241ae3) the wait "
                "orders the previous request's {prev}")
_LAST_USE = ("the last use of the slot: no wait ever observes this arrival's phase (the {who} would wait on it "
             "{later} blocks later, past the request's end)")

HARMLESS: dict[tuple[str, str, str, str, str], str] = {
    # (role, mutation, record class, site, which) -> why the unflagged mutant is harmless
    # -- waits on a fresh barrier's phantom phase: they pass at once and carry nothing
    ("raw", "delete", "MbarrierTryWait", "raw_free", "phantom"):
        "the first wait on a fresh raw_free passes on its phantom phase at once and carries no knowledge",
    ("rope", "delete", "MbarrierTryWait", "qk_done", "phantom"):
        "the first wait on a fresh qk_done (the RoPE buffer free) passes on its phantom phase and carries nothing",
    ("dequant", "delete", "MbarrierTryWait", "sv_done", "phantom"):
        "the first wait on a fresh sv_done (the dequant buffer free) passes on its phantom phase and carries nothing",
    ("index", "delete", "MbarrierTryWait", "valid_coord_scale_free", "phantom"):
        "the first wait on a fresh valid_coord_scale_free passes on its phantom phase and carries nothing",
    # -- arrivals no wait observes
    ("raw", "delete", "MbarrierArrive", "valid_coord_scale_free", "last"):
        _LAST_USE.format(who="index warp", later="4 (NUM_INDEX_BUFS)"),
    ("rope", "delete", "MbarrierArrive", "valid_coord_scale_free", "last"):
        _LAST_USE.format(who="index warp", later="4 (NUM_INDEX_BUFS)"),
    ("dequant", "delete", "MbarrierArrive", "valid_coord_scale_free", "last"):
        _LAST_USE.format(who="index warp", later="4 (NUM_INDEX_BUFS)"),
    ("softmax", "delete", "MbarrierArrive", "valid_coord_scale_free", "last"):
        _LAST_USE.format(who="index warp", later="4 (NUM_INDEX_BUFS)"),
    ("dequant", "delete", "MbarrierArrive", "raw_free", "last"):
        _LAST_USE.format(who="raw producer", later="2 (NUM_BUFS)"),
    ("mma", "delete", "Commit", "sv_done", "last"):
        "the last commit on a buffer's sv_done that is not the final block's (the epilogue waits on that one; "
        "deleting it deadlocks, flagged): no wait observes its phase, and the commits after it (the final block's "
        "qk_done and sv_done) track the same PV MMAs, since a commit tracks every earlier MMA of the thread "
        "(PTX ISA 9.0 §9.7.16.12.1)",
    # -- ordering that reaches the warp another way
    ("mma", "delete", "MbarrierTryWait", "q_utccp", "any"):
        "the MMA thread waits for its own Q copies: its MMAs read them from TMEM after the copies, and cp -> mma is "
        "a pipelined pair ordered by issue (PTX ISA 9.0 §9.7.16.6.2); nothing else of the thread reads Q",
    ("mma", "delete", "FenceAfterThreadSync", "after q_utccp", "any"):
        "the fence after the thread's wait for its own Q copies orders nothing the pipelined cp -> mma pair "
        "(PTX ISA 9.0 §9.7.16.6.2) does not already order",
    ("dequant", "delete", "MbarrierTryWait", "q_utccp", "any"):
        "redundant: the dequant warps overwrite Q (dequant0 aliases q) only after waiting raw_ready, whose "
        "arrive.expect_tx the raw producer issues after its own wait on q_utccp; the Q copies' completion reaches "
        "them through that chain (mbarrier release/acquire is transitive, PTX ISA 9.0 §9.7.13.15)",
    ("dequant", "delete", "MbarrierTryWait", "valid_coord_scale_ready", "any"):
        "redundant: the dequant warps read the scales after waiting raw_ready, whose arrive.expect_tx the raw "
        "producer issues after its own wait on the same valid_coord_scale_ready phase (transitive, PTX ISA 9.0 "
        "§9.7.13.15)",
    ("softmax", "delete", "MbarrierTryWait", "valid_coord_scale_ready", "any"):
        "redundant: WG0 reads is_token_valid after waiting qk_done, whose commit follows the MMA thread's wait on "
        "nope_ready, which the dequant warps arrive on after waiting raw_ready, which the raw producer arrives on "
        "after waiting this valid_coord_scale_ready phase (a transitive chain, PTX ISA 9.0 §9.7.13.15)",
    ("raw", "delete", "MbarrierTryWait", "q_utccp", "any"):
        _ONE_REQUEST.format(what="raw_nope0/1 alias neither Q buffer, so no Q copy reads what the gathers write",
                            prev="Q (bar_phase_batch_rel, line 589)"),
    ("raw", "delete", "MbarrierTryWait", "last_store_done", "any"):
        _ONE_REQUEST.format(what="no earlier O store reads o_accum_buf, which raw_nope0/1 alias",
                            prev="O stores (line 590)"),
    ("rope", "delete", "MbarrierTryWait", "last_store_done", "any"):
        _ONE_REQUEST.format(what="no earlier O store reads o_buf, which dequant1.rope aliases",
                            prev="O stores (line 620)"),
    ("softmax", "delete", "BarSync", "exchange and row-max buffers free", "any"):
        "redundant in one request: every reuse of p_exchange_buf and rowwise_max_buf is ordered without it -- a "
        "warp's block-i reads precede the block-i row-max wg0_sync (p_exchange) or its own arrival at the block-i+1 "
        "pair barrier (rowwise_max_buf), both passed by its partner before the partner's block-i+1 writes; S "
        "(which aliases p_exchange_buf) is ordered through so_ready -> qk_done. In the kernel (kernel.cuh line 161 "
        "at 9241ae3) it also orders the previous request's li exchange reads (line 311) before the next writes",
    # -- a tcgen05.wait::ld whose load only feeds registers (PTX ISA 9.0 §9.7.16.6.4.5: an intra-thread register
    # dependency on tcgen05.ld is respected without the wait; the wait is needed only before a write, dealloc or
    # release of the cells the load reads)
    ("softmax", "delete", "WaitLd", "after P columns 432-463", "last"):
        "the last block's P loads: their registers are used in order without the wait (a register dependency, PTX "
        "ISA 9.0 §9.7.16.6.4.5), and nothing writes, frees or takes P's columns before another wait::ld: the QK MMA "
        "that would overwrite P belongs to a block past the request's end, the so_ready release hands the MMA thread "
        "only the PV MMA (O and shared-memory S, not P's columns), and the epilogue's first O-chunk wait::ld waits "
        "for every earlier tcgen05.ld of the thread (PTX ISA 9.0 §9.7.16.8.5)",
    **{("softmax", "delete", "WaitLd", f"after O chunk {c}", "last"):
       f"the epilogue's O chunk {c} load: the scale and bf16 conversion read its registers in order without the "
       "wait (a register dependency, PTX ISA 9.0 §9.7.16.6.4.5); every PV MMA completed before the epilogue "
       "(sv_done), so nothing writes or frees O's columns before the next chunk's wait::ld, which waits for every "
       "earlier tcgen05.ld of the thread (PTX ISA 9.0 §9.7.16.8.5)" for c in range(3)},
    ("softmax", "delete", "WaitLd", "after O chunk 3", "last"):
        "the epilogue's last O load: the scale and bf16 conversion read its registers in order without the wait (a "
        "register dependency, PTX ISA 9.0 §9.7.16.6.4.5), and the one-request Program ends with no write, dealloc or "
        "release of O's columns after it. In the kernel the teardown follows (everyone_sync, then warp 0's "
        "tcgen05.dealloc of the 512 columns, kernel.cuh line 425 at 9241ae3), which the Program leaves out "
        "(simtc.kernels.flashmla.head64, modelling decisions): there this wait::ld orders the load before the dealloc",
    ("softmax", "delete", "FenceBeforeThreadSync", "after WaitLd", "last"):
        "the last block's fence after the P readback publishes the loads for the next QK MMA that overwrites P; "
        "after the last block no MMA writes P",
}
"""The unflagged mutants' classes and why each is harmless (see the module text)."""


def _site(rec, prev) -> str:
    bar = getattr(rec, "bar", None)
    if isinstance(bar, str):
        return bar.split("[")[0]
    if getattr(rec, "label", ""):
        return rec.label
    if isinstance(rec, (WaitLd, WaitSt)) and getattr(prev, "label", ""):
        return f"after {prev.label}"  # the wait named by the load (store) it follows
    pbar = getattr(prev, "bar", None)
    if isinstance(pbar, str):
        return f"after {pbar.split('[')[0]}"
    return f"after {type(prev).__name__}"


def mutants(blocks: int):
    """``(role, index, how, record, site, which)`` of every mutant of the ``blocks``-block Program."""
    program = head64_program("v32", blocks)
    for role in program.roles:
        recs = role.records
        seen: set[str] = set()
        sites = [_site(r, recs[i - 1] if i else None) for i, r in enumerate(recs)]
        last = {(type(r).__name__, getattr(r, "bar", None), s): i for i, (r, s) in enumerate(zip(recs, sites,
                                                                                                  strict=True))}
        for i, rec in enumerate(recs):
            which = "any"
            if isinstance(rec, MbarrierTryWait):
                if rec.bar not in seen and rec.parity == 1:
                    which = "phantom"
                seen.add(rec.bar)
            elif last[type(rec).__name__, getattr(rec, "bar", None), sites[i]] == i:
                which = "last"
            if isinstance(rec, DELETABLE):
                yield role.name, i, "delete", rec, sites[i], which
            if isinstance(rec, MbarrierTryWait):
                yield role.name, i, "flip", rec, sites[i], which


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


def harmless(row: dict) -> str | None:
    """The argument for an unflagged mutant (None: none; ``which`` ``last`` / ``phantom`` falls back to ``any``)."""
    key = (row["role"], row["how"], row["record"], row["site"])
    return HARMLESS.get((*key, row["which"])) or HARMLESS.get((*key, "any"))


def sweep(blocks: int = 6, roles=None) -> dict:
    """Every mutant (of ``roles``, default all) replayed and classified: flagged, harmless (with the argument) or
    missed."""
    t0, c0 = time.time(), time.process_time()
    rows = []
    for role, i, how, rec, site, which in mutants(blocks):
        if roles is not None and role not in roles:
            continue
        r = rp.replay("v32", blocks, 0, timing_only=True, transform=_transform(role, i, how))
        rules = sorted({h["rule"] for h in r.hazards})
        row = {"role": role, "index": i, "how": how, "record": type(rec).__name__,
               "bar": rec.bar if isinstance(getattr(rec, "bar", None), str) else None, "site": site,
               "which": which, "rules": rules, "deadlock": r.deadlock is not None,
               "flagged": bool(rules) or r.deadlock is not None}
        row["harmless"] = None if row["flagged"] else harmless(row)
        rows.append(row)
    missed = [x for x in rows if not x["flagged"] and x["harmless"] is None]
    kinds = collections.Counter((x["role"], x["how"], x["record"], x["site"], x["which"])
                                for x in rows if not x["flagged"])
    return {"blocks": blocks, "mutants": len(rows), "flagged": sum(x["flagged"] for x in rows),
            "harmless": sum(x["harmless"] is not None for x in rows), "missed": len(missed),
            "seconds": round(time.time() - t0, 1), "cpu_seconds": round(time.process_time() - c0, 1),
            "unflagged_by_kind": [{"role": k[0], "how": k[1], "record": k[2], "site": k[3], "which": k[4],
                                   "count": n, "harmless": HARMLESS.get(k) or HARMLESS.get((*k[:4], "any"))}
                                  for k, n in sorted(kinds.items())],
            "missed_rows": missed, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    out = sweep(a.blocks)
    print(f"{out['mutants']} mutants at {out['blocks']} blocks: {out['flagged']} flagged, {out['harmless']} "
          f"harmless, {out['missed']} missed ({out['seconds']} s, {out['cpu_seconds']} s CPU)")
    for k in out["unflagged_by_kind"]:
        tag = "harmless" if k["harmless"] else "MISSED  "
        print(f"  {tag} {k['count']:3d} x {k['how']} {k['record']} in {k['role']} ({k['site']}, {k['which']})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if out["missed"] else 0


if __name__ == "__main__":
    sys.exit(main())
