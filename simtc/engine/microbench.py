"""MMA latency / II microbenchmarks as Programs, run on the engine (the method of SemiAnalysisAI/microbench-blackwell
umma_latency: one MMA + commit + wait for the latency, a + b/D fitted over chain depths for the II).

* **latency**: one thread issues **one** MMA, ``tcgen05.commit`` to an mbarrier, then waits on it
  with ``try_wait.parity``; latency = the cycle the wait returns minus the MMA's issue cycle.
  (sm90: one ``wgmma.mma_async`` by a warpgroup, ``commit_group``, ``wait_group 0``.)
* **II**: a "prime" MMA with enable-input-d = false, then D back-to-back MMAs on the same
  operands and accumulator, commit, wait; the II is the slope of the chain's cycles over the
  depths D (least squares over ``DEPTHS``), i.e. the ``a`` of CyclesPerMMA = a + b/D.

The ``.ws`` collector usages map to records as KevinZeng08/microbench-blackwell
``umma_throughput/tcgen05_mma_ws.md`` measures them: ``discard`` =
``b0::discard`` on every MMA, ``pingpong`` = alternating ``b0::discard`` / ``b1::discard``,
``reuse`` = ``b0::fill``, ``b0::use`` ..., ``b0::lastuse``.

>>> r = run_mma("sm100", 128, 64, operands="SS")
>>> r["latency_cycles"], r["ii_cycles"]          # B200: 168 and 48.02 measured
(168, 48.0)
"""

from __future__ import annotations

from simtc.engine import timing as timing_model
from simtc.errors import ShapeError

__all__ = ["DEPTHS", "ii_program", "latency_program", "run_mma"]

DEPTHS = (32, 64, 128, 256)

_A_AT, _B_AT = 0, 65536          # shared-memory operand bases (SW128 K-major atoms)
_D_COL, _A_COL = 0, 256          # TMEM accumulator / TS A column


def _records(arch: str, m: int, n: int, operands: str, ws: bool, collector: str, depth: int):
    """The MMA records of a chain: one (depth 0: just the prime) or prime + depth."""
    from simtc.isa import InstrDescriptor, Mma, SmemDescriptor, WgmmaMmaAsync

    if arch == "sm90":
        a = "a_frag" if operands == "RS" else SmemDescriptor(start=_A_AT, lbo=16, sbo=1024, layout_type="SW128",
                                                              arch="sm90")
        b = SmemDescriptor(start=_B_AT, lbo=16, sbo=1024, layout_type="SW128", arch="sm90")
        return [WgmmaMmaAsync(64, n, 16, "bf16", a, b, i > 0, "acc", label="prime" if i == 0 else f"chain {i}")
                for i in range(depth + 1)]
    idesc = InstrDescriptor(kind="f16", m=m, n=n, a_format="bf16", b_format="bf16")
    b = SmemDescriptor(start=_B_AT, lbo=16, sbo=1024, layout_type="SW128")
    a = _A_COL if operands == "TS" else SmemDescriptor(start=_A_AT, lbo=16, sbo=1024, layout_type="SW128")
    out = []
    for i in range(depth + 1):
        if not ws:
            coll = "discard"
        elif collector == "pingpong":
            coll = f"b{i % 2}::discard"
        elif collector == "reuse":
            coll = "b0::fill" if i == 0 else ("b0::lastuse" if i == depth else "b0::use")
        else:
            coll = "discard"
        out.append(Mma(_D_COL, a, b, idesc, i > 0, ws=ws, collector=coll,
                       label="prime" if i == 0 else f"chain {i}"))
    return out


def _program(arch: str, name: str, mmas: list):
    from simtc.isa import (
        Alloc,
        Commit,
        Dealloc,
        MbarrierInit,
        MbarrierTryWait,
        Program,
        RelinquishAllocPermit,
        Role,
        WgmmaCommitGroup,
        WgmmaFence,
        WgmmaWaitGroup,
    )
    from simtc.isa.program import Barrier

    if arch == "sm90":
        recs = [WgmmaFence(), *mmas, WgmmaCommitGroup(), WgmmaWaitGroup(0), WgmmaFence(label="end")]
        return Program(name, (Role("wg", (0, 1, 2, 3), tuple(recs)),), description="wgmma microbenchmark")
    recs = [Alloc(512, 0), RelinquishAllocPermit(), MbarrierInit("done", 1), *mmas, Commit("done"),
            MbarrierTryWait("done", 0), Dealloc(0, 512, label="end")]
    return Program(name, (Role("mma", (0,), tuple(recs), threads=32),),
                   barriers=(Barrier("done", "mbarrier", 1),), description="tcgen05.mma microbenchmark")


def latency_program(arch: str, m: int, n: int, operands: str = "SS", ws: bool = False, collector: str = "discard"):
    """One MMA + commit + wait (sm90: wgmma + commit_group + wait_group 0)."""
    return _program(arch, f"bench/latency-{arch}-{operands}-{m}x{n}", _records(arch, m, n, operands, ws, collector,
                                                                                  0))


def ii_program(arch: str, m: int, n: int, depth: int, operands: str = "SS", ws: bool = False,
               collector: str = "discard"):
    """A prime MMA + ``depth`` back-to-back MMAs + commit + wait."""
    return _program(arch, f"bench/ii-{arch}-{operands}-{m}x{n}-d{depth}",
                    _records(arch, m, n, operands, ws, collector, depth))


def _span(engine) -> int:
    """Cycles from the first MMA's issue to the issue of the record after the wait (the ``end`` label)."""
    first = end = None
    for e in engine.trace:
        if e.kind != "issue" or e.warp != engine.agents[0].warp or e.role != engine.agents[0].role:
            continue
        rec = engine.agents[0].ops[e.index].rec
        if first is None and type(rec).__name__ in ("Mma", "WgmmaMmaAsync"):
            first = e.cycle
        if rec.label == "end":
            end = e.cycle
    return end - first


def run_mma(arch: str, m: int, n: int, k: int | None = None, operands: str = "SS", ws: bool = False,
            collector: str = "discard", cta_group: int = 1, dtype: str = "bf16", timing=None) -> dict:
    """Run the latency and II programs on the engine: ``{"latency_cycles", "ii_cycles", "depths",
    "chain_cycles", "parameters": [{name, value, unit, label, source, used_by}]}`` (the parameters the
    closed-form model of this instruction reads). Illegal forms raise naming the rule.

    ``timing``: a :class:`~simtc.engine.parameters.Timing` of ``arch`` (default: its table)."""
    from simtc.engine.core import Engine
    from simtc.engine.parameters import Timing

    timing_model.mma_spec(arch, m, n, k, operands, ws, collector, cta_group, dtype)  # legality, with the rule
    if cta_group != 1:
        raise ShapeError("the engine's MMA records are cta_group::1 (a CTA pair is not modelled as a Program)",
                         rule="engine programs are cta_group::1", ref="PTX ISA 9.0 §9.7.16.6 Table 46")
    if dtype != "bf16":
        raise ShapeError(f"the microbenchmark programs use bf16 operands, got {dtype!r}",
                         rule="microbenchmark programs are bf16 (the published B200 / GB200 data is bf16)")
    timing = timing or Timing(arch)
    eng = Engine(latency_program(arch, m, n, operands, ws, collector), timing=timing).run()
    _require_clean(eng)
    latency = _span(eng)
    spans = []
    for d in DEPTHS:
        e = Engine(ii_program(arch, m, n, d, operands, ws, collector), timing=timing).run()
        _require_clean(e)
        spans.append(_span(e))
    n_ = len(DEPTHS)
    mx, my = sum(DEPTHS) / n_, sum(spans) / n_
    slope = sum((x - mx) * (y - my) for x, y in zip(DEPTHS, spans, strict=True)) / sum((x - mx) ** 2 for x in DEPTHS)
    return {"instruction": timing_model.mma_spec(arch, m, n, k, operands, ws, collector, cta_group, dtype).ptx,
            "latency_cycles": latency, "ii_cycles": round(slope, 2), "depths": list(DEPTHS), "chain_cycles": spans,
            "parameters": [{**p.as_dict(), "value": timing[p.name]} for p in
                           timing_model.predict_mma(arch, m, n, k, operands, ws, collector, cta_group, dtype,
                                                    timing=timing).parameters]}


def _require_clean(engine) -> None:
    from simtc.engine.core import EngineError

    if not engine.clean:
        raise EngineError("microbenchmark program is not clean: " + "; ".join(str(h) for h in engine.hazards),
                          rule="microbenchmarks run clean")
