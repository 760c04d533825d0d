"""What each record costs on the engine's units, read from the timing model's parameter tables.

This module holds no number of its own: every cycle count comes from
:data:`simtc.engine.timing.PARAMETERS` (each labelled measured / derived / assumed with its
source) or from the timing model's MMA functions; :meth:`Costs.parameters` lists the parameters
a run used.

How the engine composes them (sm100, one MMA then commit then try_wait by the issuing warp):
the MMA issues at ``t`` and enters the tensor pipe at ``t + mma_issue``; it holds the pipe for
:func:`~simtc.engine.timing.mma_occupancy_cycles` and completes
:func:`~simtc.engine.timing.mma_completion_cycles` after issue; the commit arrives
``commit_arrive`` later; the waiting warp resumes ``mbarrier_try_wait`` after the phase
completes. The sum is :func:`~simtc.engine.timing.predict_mma`'s latency by construction of the
model's breakdown, and the engine's microbenchmark measures it through the event loop.

>>> c = Costs("sm100")
>>> c.commit, c.wait, c.arrive
(29, 32, 29)
"""

from __future__ import annotations

import functools
import math

from simtc.engine import timing
from simtc.errors import SimtcError

__all__ = ["Costs", "mma_spec_of"]


def _collector_usage(rec, prev) -> str:
    """The timing model's collector usage (discard / pingpong / reuse) of an MMA after ``prev``.

    ``.ws``: ``bX::use`` / ``bX::lastuse`` reuse the collector (no B fetch); ``bX::fill`` and
    ``bX::discard`` fetch B -- alternating collectors between consecutive MMAs is the
    ping-pong of ``timing.md`` §2. Non-``.ws``: ``a::use`` / ``a::lastuse`` reuse A.
    """
    c = rec.collector
    if c.endswith("::use") or c.endswith("::lastuse"):
        return "reuse"
    if rec.ws and prev is not None and getattr(prev, "ws", False):
        buf = c.split("::")[0] if "::" in c else "b0"
        pc = prev.collector
        pbuf = pc.split("::")[0] if "::" in pc else "b0"
        if buf != pbuf:
            return "pingpong"
    return "discard"


def mma_spec_of(rec, prev=None) -> timing.MmaSpec:
    """The :class:`~simtc.engine.timing.MmaSpec` of a ``tcgen05.mma`` or ``wgmma.mma_async`` record."""
    if type(rec).__name__ == "WgmmaMmaAsync":
        operands = "RS" if isinstance(rec.a, str) else "SS"
        return _spec("sm90", rec.m, rec.n, None, operands, False, "discard", rec.dtype)
    d = rec.idesc
    return _spec("sm100", d.m, d.n, None, rec.form, rec.ws, _collector_usage(rec, prev),
                 getattr(d, "a_format", "bf16"))


@functools.lru_cache(maxsize=1024)
def _spec(arch, m, n, k, operands, ws, collector, dtype) -> timing.MmaSpec:
    return timing.mma_spec(arch, m, n, k, operands, ws, collector, 1, dtype)


@functools.lru_cache(maxsize=1024)
def _mma_cost(spec: timing.MmaSpec) -> tuple[int, int]:
    return timing.mma_occupancy_cycles(spec), timing.mma_completion_cycles(spec)


# SASS instruction classes of CudaCoreBlock counts -> the timing parameter of their issue interval
_CLASS_II = (("MUFU", "mufu_ii"), ("FFMA2", "fma2_ii"), ("FMUL2", "fma2_ii"), ("FADD2", "fma2_ii"),
             ("FFMA", "fma_ii"), ("FMUL", "fma_ii"), ("FADD", "fma_ii"), ("FMNMX", "fma_ii"), ("FSETP", "fma_ii"))


class Costs:
    """Cycle costs of records on ``arch`` (``"sm100"`` or ``"sm90"``), from the timing tables."""

    def __init__(self, arch: str = "sm100"):
        if arch not in timing.ARCHS:
            raise SimtcError(f"unknown architecture {arch!r}; modelled: {', '.join(timing.ARCHS)}",
                             rule="timing tables exist for sm100 and sm90")
        self.arch = arch
        self._used: dict[str, timing.Parameter] = {}
        p = self.p
        if arch == "sm100":
            self.pipe_issue = int(p("mma_issue"))
            self.commit = int(p("commit_arrive"))
            self.named_barrier = int(p("named_barrier_resume"))
        else:
            self.pipe_issue = int(p("wgmma_issue"))
            self.commit = int(p("mbarrier_arrive"))  # sm90 has no tcgen05.commit; an mbarrier arrive
            self.named_barrier = int(p("named_barrier_release"))
        self.wait = int(p("mbarrier_try_wait"))
        self.arrive = int(p("mbarrier_arrive"))
        self.port = p("smem_port_bytes_per_cycle")

    def p(self, name: str):
        """A parameter's value (and remember that it was used)."""
        prm = timing.parameter(self.arch, name)
        self._used[name] = prm
        return prm.value

    def has(self, name: str) -> bool:
        return name in timing.PARAMETERS[self.arch]

    def parameters(self) -> list[dict]:
        """The parameters this cost model has used so far (name, value, label, source)."""
        return [{"name": q.name, "value": q.value, "label": q.label, "source": q.source}
                for q in sorted(self._used.values(), key=lambda q: q.name)]

    # ---- tensor pipe -----------------------------------------------------------------------------
    def mma(self, rec, prev) -> tuple[int, int, int]:
        """``(pre, occupancy, body)``: the MMA enters the pipe ``pre`` cycles after issue (or when the
        pipe frees), holds it ``occupancy`` cycles and completes ``body`` cycles after entering."""
        spec = mma_spec_of(rec, prev)
        occ, done = _mma_cost(spec)
        return self.pipe_issue, occ, done - self.pipe_issue

    def wgmma(self, rec, prev) -> tuple[int, int, int]:
        spec = mma_spec_of(rec, prev)
        parts = timing.mma_latency_breakdown(spec)
        occ = timing.mma_occupancy_cycles(spec)
        return parts["issue"], occ, sum(parts.values()) - parts["issue"]

    def cp(self, rec) -> tuple[int, int]:
        """tcgen05.cp: occupancy = copied bytes through the shared-memory port; latency adds the
        assumed fixed cost (``tcgen05_cp_fixed``: no public measurement, timing.md §6)."""
        occ = math.ceil(rec.nbytes / self.port)
        return occ, occ + int(self.p("tcgen05_cp_fixed"))

    # ---- TMA -------------------------------------------------------------------------------------
    def tma(self, rec) -> tuple[int, int]:
        """(occupancy of the TMA unit, latency from issue to complete_tx)."""
        n = rec.nbytes
        gap = int(self.p("tma_issue_gap"))
        if self.arch == "sm100":
            occ = max(gap, math.ceil(n / self.p("tma_sm_bytes_per_cycle")))
            lat = int(self.p("tma_dram_latency")) + math.ceil(n / self.p("tma_load_bytes_per_cycle"))
        else:
            occ = gap
            lat = int(self.p("tma_latency"))
        return occ, max(lat, occ)

    # ---- TMEM path -------------------------------------------------------------------------------
    def _ldst(self, rec, fixed: str) -> tuple[int, int]:
        if self.arch != "sm100":
            raise SimtcError("tcgen05.ld/st exist on sm100 only", rule="tcgen05 is sm_100a",
                             ref="PTX ISA 9.0 §9.7.16")
        fp = rec.footprint(int(rec.taddr >> 16) // 32 if rec.lane_base == "absolute" else 0)
        cells = sum(r.lanes * r.cols for r in fp.tmem_reads + fp.tmem_writes)
        cols = math.ceil(cells / 32 / self.p("tcgen05_ldst_columns_per_cycle"))
        return cols, cols + int(self.p(fixed))

    def tmem_ld(self, rec) -> tuple[int, int]:
        return self._ldst(rec, "tcgen05_ld_fixed")

    def tmem_st(self, rec) -> tuple[int, int]:
        return self._ldst(rec, "tcgen05_st_fixed")

    # ---- CUDA cores and shared memory ------------------------------------------------------------
    def cuda_core(self, rec, warp: int = 0) -> int:
        """Cycles a CudaCoreBlock holds its sub-partition's issue slot: sum of count x issue interval."""
        total = 0.0
        for cls, count in rec.counts:
            name = "alu_ii"
            for prefix, pname in _CLASS_II:
                if cls.upper().startswith(prefix):
                    name = pname
                    break
            if not self.has(name) and name == "fma2_ii":  # sm90 has no packed f32x2: two FP32 instructions
                total += count * 2 * self.p("fma_ii")
                continue
            total += count * self.p(name)
        return max(1, math.ceil(total))

    def shared_access(self, rec) -> int:
        """Shared-memory port cycles of an ld/st.shared: wavefronts per 32-thread warp access
        (:func:`simtc.smem.banks.bank_conflicts`; 128 B per wavefront = the port's 128 B/cycle).

        Moving every address of an access by one row of banks (32 banks x 4 B = 128 B) keeps each word's bank
        and the words' distinctness, hence the wavefronts: accesses are costed once per address modulo 128.
        """
        from simtc.smem.banks import BANK_BYTES, NUM_BANKS

        return _wavefronts(rec.addr % (NUM_BANKS * BANK_BYTES), rec.width, tuple(rec.thread_offsets()))

    def shared_latency(self, rec) -> int:
        return int(self.p("smem_ld_latency"))


@functools.lru_cache(maxsize=4096)
def _wavefronts(addr: int, width: int, offsets: tuple[int, ...]) -> int:
    import numpy as np

    from simtc.smem.banks import bank_conflicts

    a = addr + np.asarray(offsets, dtype=np.int64)
    if width < 4:  # sub-word accesses: 4-byte words, same banks
        a = a - a % 4
        width = 4
    return sum(bank_conflicts(a[i:i + 32], width=width).wavefronts for i in range(0, len(a), 32))
