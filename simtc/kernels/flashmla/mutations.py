"""A catalogue of seeded bugs in FlashMLA head64: each one a function Program -> Program.

Every mutation removes, moves or corrupts one synchronisation or descriptor detail of the kernel
(:func:`~simtc.kernels.flashmla.head64.head64_program`) the way a programmer could get it wrong, and
the replay must flag it: by a hazard rule of the engine's checker (:data:`simtc.engine.hazards.RULES`),
by a deadlock, or by a wrong result (P not bit-exact, O / LSE off). ``simtc replay flashmla-head64
--mutate NAME`` runs one (exit 1 when it is caught); ``--list-mutations`` lists them with the check
that is expected to catch each.

The mutation applies to the first block's records where the kernel has one per block (the bug then
exists once per request, which is enough to be caught), and to every block otherwise.

>>> sorted(MUTATIONS)[:3]
['dequant-no-proxy-fence', 'early-so-ready', 'early-sv-commit']
>>> len(MUTATIONS) >= 8
True
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from simtc.errors import SimtcError
from simtc.isa.mbarrier import MbarrierArrive, MbarrierArriveExpectTx, MbarrierTryWait
from simtc.isa.program import Program
from simtc.isa.sync import BarSync, FenceProxyAsync
from simtc.isa.tcgen05 import Commit, FenceAfterThreadSync, FenceBeforeThreadSync, Mma, WaitLd

__all__ = ["MUTATIONS", "Mutation", "mutate"]


@attrs.frozen
class Mutation:
    """One seeded bug: what it breaks, the check expected to catch it, and the Program transform."""

    name: str
    text: str
    caught_by: str
    """A hazard rule name, ``"deadlock"``, or ``"result"`` (P / O / LSE check)."""
    ref: str
    fn: Callable[[Program], Program]


def _edit(program: Program, role: str, fn: Callable[[list], list]) -> Program:
    roles = tuple(attrs.evolve(r, records=tuple(fn(list(r.records)))) if r.name == role else r
                  for r in program.roles)
    return attrs.evolve(program, roles=roles, name=program.name + "-mutated")


def _first(recs: list, pred, what: str, start: int = 0) -> int:
    for i in range(start, len(recs)):
        if pred(recs[i]):
            return i
    raise SimtcError(f"mutation target not found: {what}", rule="mutations apply to the head64 Program")


def _drop_first(role: str, pred, what: str):
    def fn(program: Program) -> Program:
        def edit(recs: list) -> list:
            del recs[_first(recs, pred, what)]
            return recs
        return _edit(program, role, edit)
    return fn


def _is_wait(bar: str):
    return lambda r: isinstance(r, MbarrierTryWait) and r.bar == bar


def _after_wait(role: str, bar: str, kind: type, what: str):
    """Drop the first record of type ``kind`` after the first wait on ``bar``."""
    def fn(program: Program) -> Program:
        def edit(recs: list) -> list:
            i = _first(recs, _is_wait(bar), f"wait on {bar}")
            del recs[_first(recs, lambda r: isinstance(r, kind), what, i)]
            return recs
        return _edit(program, role, edit)
    return fn


def _phase_off_by_one(program: Program) -> Program:
    def edit(recs: list) -> list:
        i = _first(recs, _is_wait("qk_done[0]"), "softmax wait on qk_done[0]")
        recs[i] = attrs.evolve(recs[i], parity=recs[i].parity ^ 1)
        return recs
    return _edit(program, "softmax", edit)


def _early_sv_commit(program: Program) -> Program:
    """The MMA thread commits to sv_done[0] before issuing block 0's PV MMAs: the release of V (and of O) is
    signalled before its consumer, the PV MMAs, has finished reading it."""
    def edit(recs: list) -> list:
        i = _first(recs, lambda r: isinstance(r, Commit) and r.bar == "sv_done[0]", "commit to sv_done[0]")
        rec = recs.pop(i)
        j = _first(recs, lambda r: isinstance(r, Mma) and r.label.startswith("PV"), "block 0's first PV MMA")
        recs.insert(j, rec)
        return recs
    return _edit(program, "mma", edit)


def _early_so_ready(program: Program) -> Program:
    """The softmax warpgroup hands S to the MMA (so_ready) before writing it."""
    def edit(recs: list) -> list:
        i = _first(recs, lambda r: isinstance(r, MbarrierArrive) and r.bar == "so_ready[0]", "so_ready[0] arrive")
        rec = recs.pop(i)
        j = _first(recs, lambda r: getattr(r, "label", "") == "S chunk 0", "the S stores")
        recs.insert(j, rec)
        return recs
    return _edit(program, "softmax", edit)


def _wrong_sbo(program: Program) -> Program:
    """The first NoPE QK MMA's B descriptor with SBO 512 B instead of 1,024 B (8 rows of 128 B)."""
    def edit(recs: list) -> list:
        i = _first(recs, lambda r: isinstance(r, Mma) and r.label == "QK k=0", "QK k=0")
        recs[i] = attrs.evolve(recs[i], b_desc=attrs.evolve(recs[i].b_desc, sbo=512))
        return recs
    return _edit(program, "mma", edit)


def _wrong_k_slice(program: Program) -> Program:
    """QK k=1 reads K's k-slice 0 again (descriptor start 32 B too low): one 16-dim step counted twice."""
    def edit(recs: list) -> list:
        i0 = _first(recs, lambda r: isinstance(r, Mma) and r.label == "QK k=0", "QK k=0")
        i1 = _first(recs, lambda r: isinstance(r, Mma) and r.label == "QK k=1", "QK k=1")
        recs[i1] = attrs.evolve(recs[i1], b_desc=recs[i0].b_desc)
        return recs
    return _edit(program, "mma", edit)


def _short_tx(program: Program) -> Program:
    """The raw producer expects 1 KiB less than its 16 gathers deliver on raw_ready[0]."""
    def edit(recs: list) -> list:
        i = _first(recs, lambda r: isinstance(r, MbarrierArriveExpectTx) and r.bar == "raw_ready[0]",
                   "raw_ready[0] expect_tx")
        recs[i] = attrs.evolve(recs[i], tx_bytes=recs[i].tx_bytes - 1024)
        return recs
    return _edit(program, "raw", edit)


_CATALOGUE = (
    Mutation("softmax-no-after-fence", "the softmax warps read P (tcgen05.ld) after waiting qk_done without "
             "tcgen05.fence::after_thread_sync", "missing-after-thread-sync-fence", "PTX ISA 9.0 §9.7.16.6.4",
             _after_wait("softmax", "qk_done[0]", FenceAfterThreadSync, "fence::after_thread_sync after qk_done")),
    Mutation("no-wait-ld", "the softmax warps drop tcgen05.wait::ld after the P loads: using P's registers stays "
             "ordered (a register dependency), but fence::before_thread_sync then publishes no completed load, so "
             "the next block's QK MMA may overwrite P while the loads still read it", "tmem-overwrite-in-flight",
             "PTX ISA 9.0 §9.7.16.6.4.5, §9.7.16.6.4",
             _after_wait("softmax", "qk_done[0]", WaitLd, "tcgen05.wait::ld after the P loads")),
    Mutation("phase-off-by-one", "the softmax warps wait qk_done[0] with parity 1 instead of 0 (passes at once on "
             "the fresh barrier: P read before QK completes)", "tmem-overwrite-in-flight", "PTX ISA 9.0 §9.7.13.15",
             _phase_off_by_one),
    Mutation("early-sv-commit", "the MMA thread commits sv_done[0] before block 0's PV MMAs (V and O released "
             "before their consumer finished: the dequant warpgroup overwrites V, the epilogue reads O too early)",
             "smem-overwrite-in-flight", "PTX ISA 9.0 §9.7.16.12.1, §9.7.16.6.4", _early_sv_commit),
    Mutation("early-so-ready", "the softmax warps arrive so_ready[0] before writing S (PV reads S too early)",
             "smem-read-before-complete", "memory consistency model (§8)", _early_so_ready),
    Mutation("no-qk-commit", "the MMA thread never commits block 0's QK MMAs to qk_done[0]", "deadlock",
             "PTX ISA 9.0 §9.7.16.12.1", _drop_first("mma", lambda r: isinstance(r, Commit) and r.bar == "qk_done[0]",
                                                     "commit to qk_done[0]")),
    Mutation("wrong-sbo", "QK k=0's K descriptor has SBO 512 B instead of 1,024 B (wrong rows of K)", "result",
             "PTX ISA 9.0 §9.7.16.4.1 (shared memory descriptor)", _wrong_sbo),
    Mutation("wrong-k-slice", "QK k=1 reads K's first 16-dim slice again (descriptor start not advanced by 32 B)",
             "result", "PTX ISA 9.0 §9.7.16.4.1; FlashMLA helpers.cuh utcmma_ts", _wrong_k_slice),
    Mutation("exchange-no-pair-barrier", "the P_lo/P_hi exchange without its 64-thread pair barrier (warps read "
             "the slot before the partner warp wrote it)", "smem-read-before-complete",
             "memory consistency model (§8); PTX ISA 9.0 §9.7.13.1 (bar.sync)",
             _drop_first("softmax", lambda r: isinstance(r, BarSync) and "pair" in r.label, "the pair barrier")),
    Mutation("softmax-no-proxy-fence", "S written by st.shared and handed to the MMA (so_ready) without "
             "fence.proxy.async", "missing-proxy-fence", "PTX ISA 9.0 §9.7.16.6.5",
             _drop_first("softmax", lambda r: isinstance(r, FenceProxyAsync), "fence.proxy.async before so_ready")),
    Mutation("dequant-no-proxy-fence", "K written by the dequant warpgroup's st.shared and handed to the MMA "
             "(nope_ready) without fence.proxy.async", "missing-proxy-fence", "PTX ISA 9.0 §9.7.16.6.5",
             _drop_first("dequant", lambda r: isinstance(r, FenceProxyAsync), "fence.proxy.async before nope_ready")),
    Mutation("softmax-no-before-fence", "the softmax warps sync (bar.sync) after their P loads without "
             "tcgen05.fence::before_thread_sync", "missing-before-thread-sync-fence", "PTX ISA 9.0 §9.7.16.6.4",
             _after_wait("softmax", "qk_done[0]", FenceBeforeThreadSync,
                         "fence::before_thread_sync after the P loads")),
    Mutation("short-expect-tx", "the raw producer's expect_tx on raw_ready[0] is 1 KiB short of what its gathers "
             "deliver", "mbarrier-tx-underflow", "PTX ISA 9.0 §9.7.13.15", _short_tx),
)

MUTATIONS: dict[str, tuple[str, Callable[[Program], Program]]] = {m.name: (m.text, m.fn) for m in _CATALOGUE}
"""name -> (description, Program -> Program), the form :data:`simtc.kernels.flashmla.head64.MUTATIONS` has."""
CATALOGUE: dict[str, Mutation] = {m.name: m for m in _CATALOGUE}


def mutate(program: Program, name: str) -> Program:
    """Apply mutation ``name`` to ``program`` (a new Program; the original is a frozen value)."""
    try:
        return CATALOGUE[name].fn(program)
    except KeyError:
        raise SimtcError(f"unknown mutation {name!r}; known: {', '.join(sorted(MUTATIONS))}",
                         rule="mutations come from simtc.kernels.flashmla.mutations") from None
