"""The timing model: labelled parameter tables (sm100, sm90) and a mechanistic MMA model.

Every number the engine uses is a :class:`Parameter` in ``PARAMETERS[arch]``, labelled

* ``measured`` -- read off real hardware by the cited source;
* ``derived`` -- arithmetic on measured data or documented figures (the source says whose);
* ``assumed`` -- no measurement: a simulator calibration (FlashGPU-Sim's "approximated" values) or our
  own choice, with the rationale in ``source``.

The MMA model is built from mechanisms, not from measured rows (``../shared/spec/timing.md`` §1-§2):

* **compute**: the tensor datapath does ``512·K`` dense FLOP/cycle/SM, so an MMA of ``rows x N x K``
  takes ``2·rows·N·K / (512·K) = rows·N / 256`` cycles -- independent of K and of the input type.
  A 1-SM non-``.ws`` MMA occupies the 128-row datapath whatever its M (M=64, Layout F, wastes half):
  N/2 cycles, i.e. 2 columns per cycle. ``.ws`` uses M rows (N/8, N/4, N/2 for M = 32, 64, 128);
  ``cta_group::2`` gives each SM M/2 rows.
* **shared-memory port**: 128 B/cycle. Every operand row of a K-slice is 32 bytes (K=16 x 2 B, K=8 x 4 B,
  K=32 x 1 B), so A costs ``M·32`` bytes (SS only), B ``N·32`` bytes per MMA (per SM: halves for
  ``cta_group::2``).
* **stream**: B is streamed column by column with the computation: ``max(compute, B bytes / 128)``.
* **initiation interval** of a back-to-back chain = the bottleneck: ``max(compute, port bytes / 128,
  .ws B-collector cycle, front-end floor)``.
* **.ws B collector**: with one collector (``b0::discard``) the next MMA's B fill can only begin when the
  current MMA reaches its last 8-column group, and a fill takes a fixed startup before data flows:
  ``stream + startup - group``; two collectors (``b0``/``b1`` ping-pong) halve that cycle; reuse
  removes B traffic.
* **latency** (one MMA + commit + mbarrier wait observed by the issuing warp, timing.md §1.1):
  ``issue + A fetch (SS: A bytes / 128) + stream + pipeline drain + commit arrive + try_wait observe``.

>>> t = predict_mma("sm100", 128, 64, operands="SS")
>>> t.latency_cycles, t.ii_cycles          # B200: 168 and 48.02 measured
(168, 48)
>>> t.breakdown["a_fetch"], t.ii_bounds["smem_port"]
(32, 48)
>>> predict_mma("sm100", 64, 128, operands="TS", ws=True).ii_cycles   # GB200: 44.46 (b0::discard)
44
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType

from attrs import field, frozen

from simtc.errors import ShapeError, SimtcError

__all__ = [
    "ARCHS",
    "LABELS",
    "PARAMETERS",
    "MmaSpec",
    "MmaTiming",
    "Parameter",
    "a_fetch_cycles",
    "compute_cycles",
    "mma_completion_cycles",
    "mma_ii_bounds",
    "mma_latency_breakdown",
    "mma_occupancy_cycles",
    "mma_spec",
    "operand_bytes",
    "parameter",
    "port_bytes_per_mma",
    "predict_mma",
    "stream_cycles",
]

ARCHS = ("sm100", "sm90")
LABELS = ("measured", "derived", "assumed")


def _check_label(_inst, _attr, value: str) -> None:
    if value not in LABELS:
        raise SimtcError(f"timing parameter label {value!r} is not one of {LABELS}",
                         rule="every timing parameter is measured, derived or assumed")


def _check_source(_inst, _attr, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise SimtcError("a timing parameter needs a source", rule="every timing parameter carries its source")


@frozen
class Parameter:
    """One timing figure: value, unit, label (measured/derived/assumed) and where it comes from.

    >>> p = PARAMETERS["sm100"]["smem_port_bytes_per_cycle"]
    >>> p.value, p.unit, p.label
    (128, 'B/cycle', 'derived')
    """

    name: str
    value: int | float
    unit: str
    label: str = field(validator=_check_label)
    source: str = field(validator=_check_source)

    def as_dict(self) -> dict:
        """``{name, value, unit, label, source}`` (what ``--json`` prints)."""
        return {"name": self.name, "value": self.value, "unit": self.unit, "label": self.label,
                "source": self.source}


# ---- sources ---------------------------------------------------------------------------------------
_SA_FIT = "SemiAnalysisAI/microbench-blackwell umma_latency/fit_results.csv (B200, bd204d8)"
_SA_LAT = "SemiAnalysisAI/microbench-blackwell umma_latency/results.csv (B200, cta_group::2 rows)"
_KZ_WS = "KevinZeng08/microbench-blackwell umma_throughput/tcgen05_mma_ws.md (GB200)"
_KZ_REUSE = "KevinZeng08/microbench-blackwell umma_throughput/ws_reuse.csv (GB200)"
_FGS_B200 = "FlashGPU-Sim configs/SM100_B200/gpgpusim.config ('approximated', timing.md §3)"
_FGS_H100 = "FlashGPU-Sim configs/SM90_H100/gpgpusim.config ('approximated', timing.md §5)"
_HPMLL = "HPMLL/NVIDIA-Hopper-Benchmark (H800 PCIe, timing.md §5)"
_NV_ARCH = ("NVIDIA Hopper / Blackwell architecture documentation: 4 SM sub-partitions, each with one warp "
            "scheduler dispatching one warp-instruction per cycle")


def _table(*rows: tuple) -> Mapping[str, Parameter]:
    params = [Parameter(*r) for r in rows]
    return MappingProxyType({p.name: p for p in params})


_SM100 = _table(
    # -- tensor pipe: tcgen05.mma ------------------------------------------------------------------
    ("smem_port_bytes_per_cycle", 128, "B/cycle", "derived",
     "timing.md §1.2: SS 128x64 moves A 4 KiB + B 2 KiB = 6,144 B per 48.02-cycle II, SS 64x64 4 KiB per 32 "
     f"({_SA_FIT})"),
    ("mma_flop_per_cycle_per_k", 512, "FLOP/cycle per unit of K", "derived",
     "timing.md §1.2: dense peak 512·K FLOP/cycle/SM (bf16 8,192; tf32 4,096; e4m3/s8 16,384), measured 8,153-8,161 "
     f"bf16 (SemiAnalysis umma_throughput/tput_results_max.csv); {_KZ_WS} §2"),
    ("mma_datapath_rows", 128, "rows", "derived",
     "timing.md §1.2: non-.ws M=64 runs at half peak (4,026-4,080 FLOP/cycle) with the same II = N/2 as M=128, so a "
     f"1-SM non-.ws MMA occupies the 128-row datapath ({_SA_FIT}; {_KZ_WS} §3)"),
    ("mma_column_group", 8, "columns", "assumed",
     "N advances in groups of 8 columns (the instruction descriptor encodes N >> 3): the reading of "
     f"{_KZ_WS} §2, 'not spec'; used only for the .ws collector release time"),
    ("mma_issue", 1, "cycles", "assumed", f"tcgen05 MMA issue interval 1 cycle ({_FGS_B200})"),
    ("mma_fixed_latency_ts", 104, "cycles", "derived",
     f"timing.md §1.2: latency = N/2 + 104 for TS, any M ({_SA_FIT}); = mma_issue + tensor_pipe_drain + "
     "commit_arrive + mbarrier_try_wait"),
    ("tensor_pipe_drain", 42, "cycles", "derived",
     "mma_fixed_latency_ts 104 - mma_issue 1 - commit_arrive 29 - mbarrier_try_wait 32: the sum is measured, the "
     "split between the four is assumed (no B200 measurement separates them, timing.md §6)"),
    ("commit_arrive", 29, "cycles", "assumed",
     "tcgen05.commit -> mbarrier arrive taken as one mbarrier arrive (29 cycles, "
     f"{_FGS_B200}); commit visibility on B200 is unknown (timing.md §6)"),
    ("mbarrier_try_wait", 32, "cycles", "assumed",
     f"mbarrier try_wait without hint, provisional ({_FGS_B200}); the warp observes a completed phase this long after "
     "it completes"),
    ("mma_min_ii", 9, "cycles", "derived",
     f"{_KZ_REUSE}: TS 32x64 reuse, a of a + b/D = 9.0 (E4M3 depths 256/512; 9.17 at F4 depth 1,024) above its N/8 = 8 "
     "compute time: a per-MMA front-end floor"),
    ("ws_b_fill_startup", 14, "cycles", "derived",
     f"{_KZ_WS} §3: discard - reuse = 11.96 (M=64), 9.96 (M=128) cycles = startup - one 8-column group "
     "(2 cycles at 4 columns/cycle, 4 cycles at 2 columns/cycle); M=32 follows (B-path bound, same II as M=64)"),
    ("ss_a_fetch_startup", 7, "cycles", "derived",
     f"{_KZ_REUSE}: .ws SS - TS at N=64 with B reuse (M=32/64/128: 15.0/23.0/39.0 vs A bytes/128 = 8/16/32); "
     "exposed only when an MMA fetches A but no B (hidden behind a B fill otherwise)"),
    ("pair_latency_m128", 37, "cycles", "derived",
     f"{_SA_LAT}: TS cta_group::2 M=128 latency - 104 - N/4 = 37 for N = 64..256 (BF16, E4M3, F4)"),
    ("pair_latency_m256", 29, "cycles", "derived",
     f"{_SA_LAT}: TS cta_group::2 M=256 latency - 104 - N/2 = 29 for N = 64..256 (BF16, E4M3, F4)"),
    ("tcgen05_cp_fixed", 42, "cycles", "assumed",
     "tcgen05.cp latency and throughput are unknown (timing.md §6): taken as the MMA pipe drain plus the copied bytes "
     "through the shared-memory port"),
    # -- TMEM load/store path ----------------------------------------------------------------------
    ("tcgen05_ld_fixed", 100, "cycles", "assumed",
     "tcgen05.ld latency is unknown (timing.md §6); chosen so that a 16-column load (100 + 16) matches the "
     "unverified '≈ 120 clk for 16 columns' comment quoted there"),
    ("tcgen05_st_fixed", 100, "cycles", "assumed", "tcgen05.st latency is unknown (timing.md §6); taken equal to ld"),
    ("tcgen05_ldst_columns_per_cycle", 1, "32-bit columns/cycle per warp", "assumed",
     "TMEM bandwidth is unknown (timing.md §6): one 32-lane x 32-bit column (128 B) per cycle per warp assumed"),
    # -- shared memory, TMA, barriers ----------------------------------------------------------------
    ("smem_ld_latency", 19, "cycles", "assumed", f"shared-memory load pipeline ({_FGS_B200})"),
    ("smem_st_visibility", 4, "cycles", "assumed",
     f"shared store visible to a named barrier 4 cycles after leaving LD/ST dispatch ({_FGS_B200})"),
    ("tma_issue_gap", 32, "cycles", "assumed", f"elect + cp.async.bulk issue gap, ≈ 33 measured there ({_FGS_B200})"),
    ("tma_dram_latency", 1802, "cycles", "derived",
     "intercept of a least-squares line through the single cold 2-D TMA loads of timing.md §4 (1-128 KiB, "
     "SemiAnalysisAI/microbench-blackwell tma2d_latency/tma2d_lat_results.csv); residuals up to ±820 cycles"),
    ("tma_load_bytes_per_cycle", 16.7, "B/cycle", "derived", "slope of the same fit (0.0600 cycles per byte)"),
    ("tma_sm_bytes_per_cycle", 24.8, "B/cycle", "derived",
     "timing.md §4: 7.22 TB/s whole chip with 64 KiB in flight per SM / (148 SMs x 1.965 GHz)"),
    ("mbarrier_arrive", 29, "cycles", "assumed", f"mbarrier arrive (arrive_tx shared write) ({_FGS_B200})"),
    ("named_barrier_resume", 18, "cycles", "assumed", f"a warp resumes 18 cycles after its arrive ({_FGS_B200})"),
    ("named_barrier_visible", 24, "cycles", "assumed", f"an arrival is visible after 24 cycles ({_FGS_B200})"),
    # -- CUDA cores --------------------------------------------------------------------------------
    ("sub_partitions", 4, "per SM", "derived", _NV_ARCH),
    ("issue_per_sub_partition", 1, "warp-instructions/cycle", "derived", _NV_ARCH),
    ("fma_latency", 4, "cycles", "assumed", f"FP32 add/mul/fma latency ({_FGS_B200})"),
    ("fma_ii", 1, "cycles per warp-instruction", "assumed", f"FP32 add/mul/fma ({_FGS_B200})"),
    ("fma2_ii", 2, "cycles per warp-instruction", "assumed", f"packed f32x2 ({_FGS_B200})"),
    ("alu_latency", 4, "cycles", "assumed", "integer/logic ALU: no B200 figure; taken equal to the FP32 pipe"),
    ("alu_ii", 1, "cycles per warp-instruction", "assumed",
     "integer/logic ALU: no B200 figure; 32 lanes per sub-partition assumed, like FP32"),
    ("mufu_latency", 18, "cycles", "assumed", f"MUFU.EX2 ({_FGS_B200}; timing.md §6: simulator figure only)"),
    ("mufu_ii", 8, "cycles per warp-instruction", "assumed", f"MUFU.EX2 ({_FGS_B200})"),
)

# sm90: calibrated on our H200 measurements (simtc crosscheck's wgmma timing microbenchmark; the rows, device,
# driver, date and command are in tests/data/h200_wgmma_timing.json and tests/data/README_h200.md). Measured:
# II = max(N/2, (A + B bytes)/128, 13) for SS and max(N/2, 13) for RS at N = 8..256 (the port term is exactly
# SS's 16 + N/4 below N = 64); latency = N/2 + 58 (SS) and N/2 + 48 (RS) at every N. How the fixed latency splits
# into issue and tail is not observable; the issue interval is the measured II floor.
_H200 = "tests/data/h200_wgmma_timing.json (NVIDIA H200, driver 580.159.04, 2026-11-30)"
_SM90 = _table(
    ("smem_port_bytes_per_cycle", 128, "B/cycle", "derived",
     f"SS wgmma II = (A + B bytes) / 128 for N < 64 (16 + N/4 cycles at bf16 m64nNk16), {_H200}"),
    ("wgmma_flop_per_cycle", 4096, "FLOP/cycle", "derived",
     "dense bf16 peak per SM: 989 TFLOP/s / (132 SMs x 1.83 GHz) (NVIDIA H100 SXM datasheet); II = N/2 for "
     f"N >= 64 on the H200 ({_H200})"),
    ("wgmma_issue", 13, "cycles", "measured",
     f"wgmma issue interval: the II floor of RS chains at N = 8..24 ({_H200}); also taken as the issue part of the "
     "latency (the split of the fixed latency is not observable)"),
    ("wgmma_tail_ss", 45, "cycles", "derived",
     f"fixed latency N/2 + 58 of one SS wgmma + commit_group + wait_group(0), minus the issue 13 ({_H200})"),
    ("wgmma_tail_rs", 35, "cycles", "derived",
     f"fixed latency N/2 + 48 of one RS wgmma + commit_group + wait_group(0), minus the issue 13 ({_H200})"),
    ("wgmma_max_outstanding", 8, "wgmma", "assumed", f"per accumulator chain before issue stalls ({_FGS_H100})"),
    ("smem_ld_latency", 29, "cycles", "assumed", f"shared-memory latency ({_FGS_H100})"),
    ("l1_hit_latency", 32, "cycles", "measured",
     f"pointer chase up to ≈ 215 KB, RegularUnits/random_latency/h800_pcie.txt ({_HPMLL})"),
    ("l2_hit_latency", 264, "cycles", "measured", f"RegularUnits/random_latency/h800_pcie.txt ({_HPMLL})"),
    ("tma_latency", 365, "cycles", "measured",
     f"random-access TMA latency, NewFeatures/TMA/Latency/tma_lat_random/h800_tma.txt ({_HPMLL})"),
    ("tma_issue_gap", 32, "cycles", "assumed", f"≈ 33 measured there ({_FGS_H100})"),
    ("mbarrier_arrive", 29, "cycles", "assumed", f"mbarrier arrive ({_FGS_H100})"),
    ("mbarrier_try_wait", 32, "cycles", "assumed", f"mbarrier try_wait ({_FGS_H100})"),
    ("named_barrier_release", 15, "cycles", "assumed", f"release after the last arrival ({_FGS_H100})"),
    ("named_barrier_issue_interval", 2, "cycles", "assumed", f"named CTA barrier ({_FGS_H100})"),
    ("mma_sync_latency", 22, "cycles", "assumed", f"mma.sync m16n8k16 f16 ({_FGS_H100})"),
    ("mma_sync_ii", 6, "cycles", "assumed", f"mma.sync m16n8k16 f16 ({_FGS_H100})"),
    ("sub_partitions", 4, "per SM", "derived", _NV_ARCH),
    ("issue_per_sub_partition", 1, "warp-instructions/cycle", "derived", _NV_ARCH),
    ("fma_latency", 4, "cycles", "assumed",
     "FP32 add/mul/fma: no H200 figure; the B200 simulator value (timing.md §3)"),
    ("fma_ii", 1, "cycles per warp-instruction", "assumed", "FP32: 32 lanes per sub-partition"),
    ("alu_latency", 4, "cycles", "assumed", "integer/logic ALU: no Hopper figure; taken equal to the FP32 pipe"),
    ("alu_ii", 2, "cycles per warp-instruction", "assumed",
     "INT32: 16 lanes per sub-partition on Hopper (64 per SM) assumed"),
    ("mufu_latency", 18.91, "cycles", "measured", f"MUFU.EX2 dependent chain ({_FGS_H100})"),
    ("mufu_ii", 8, "cycles per warp-instruction", "assumed", "16 MUFU lanes per SM (4 per sub-partition) assumed"),
)

PARAMETERS: Mapping[str, Mapping[str, Parameter]] = MappingProxyType({"sm100": _SM100, "sm90": _SM90})
"""``PARAMETERS[arch][name]`` -> :class:`Parameter`."""


def parameter(arch: str, name: str) -> Parameter:
    """One parameter of ``arch``, with a :class:`SimtcError` naming the table when it is missing.

    >>> parameter("sm90", "wgmma_issue").value
    13
    """
    table = PARAMETERS.get(arch)
    if table is None:
        raise SimtcError(f"unknown architecture {arch!r}; modelled: {', '.join(ARCHS)}",
                         rule="timing tables exist for sm100 and sm90")
    if name not in table:
        raise SimtcError(f"{arch} has no timing parameter {name!r}", rule="timing parameters by name")
    return table[name]


# ---- the instruction being timed ------------------------------------------------------------------
_KIND_OF = {"fp16": "f16", "f16": "f16", "bf16": "f16", "tf32": "tf32", "e4m3": "f8f6f4", "e5m2": "f8f6f4",
            "e2m3": "f8f6f4", "e3m2": "f8f6f4", "e2m1": "f8f6f4", "u8": "i8", "s8": "i8"}
# Dense K per kind and the bytes of one operand row of that K-slice (PTX ISA 9.0 §9.7.16.2.1 Table 39;
# f6/f4 inputs of kind::f8f6f4 sit in 8-bit containers in shared memory).
_KIND_K = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}
_ROW_BYTES = {"f16": 32, "tf32": 32, "f8f6f4": 32, "i8": 32}
_TCGEN05_REF = "PTX ISA 9.0 §9.7.16.10.9"
_WGMMA_REF = "PTX ISA 9.0 §9.7.15.5.2"


@frozen
class MmaSpec:
    """One MMA instruction as the timing model sees it (built and checked by :func:`mma_spec`)."""

    arch: str
    m: int
    n: int
    k: int
    operands: str
    ws: bool
    collector: str
    cta_group: int
    dtype: str
    kind: str

    @property
    def ptx(self) -> str:
        """The instruction's PTX spelling (shape and form)."""
        if self.arch == "sm90":
            return f"wgmma.mma_async m64n{self.n}k{self.k}.{self.dtype} ({self.operands})"
        ws = ".ws" if self.ws else ""
        return f"tcgen05.mma{ws}.cta_group::{self.cta_group}.kind::{self.kind} M={self.m} N={self.n} ({self.operands})"


def mma_spec(arch: str, m: int, n: int, k: int | None = None, operands: str = "SS", ws: bool = False,
             collector: str = "discard", cta_group: int = 1, dtype: str = "bf16") -> MmaSpec:
    """Check an MMA's legality and return its :class:`MmaSpec`; illegal forms raise naming the rule.

    ``k`` defaults to the kind's dense K (16 for bf16/f16); ``collector`` is the ``.ws`` B collector
    usage (``discard`` = ``b0::discard`` on every MMA, ``pingpong`` = alternating ``b0``/``b1``
    ``::discard``, ``reuse`` = ``fill``/``use``/``lastuse``); without ``.ws`` only ``discard``
    (the default ``collector::a::discard``) and ``reuse`` (``collector::a`` reuse of an SS A) exist.

    >>> mma_spec("sm100", 64, 128, ws=True).ptx
    'tcgen05.mma.ws.cta_group::1.kind::f16 M=64 N=128 (SS)'
    >>> mma_spec("sm100", 64, 64, ws=True, cta_group=2)
    Traceback (most recent call last):
    ...
    simtc.errors.ShapeError: tcgen05.mma.ws has no cta_group::2 form [rule: .ws is cta_group::1 only; PTX ISA 9.0 \
§9.7.16.4.2 Table 42, §9.7.16.10.9]
    """
    if arch not in ARCHS:
        raise SimtcError(f"unknown architecture {arch!r}; modelled: {', '.join(ARCHS)}",
                         rule="timing tables exist for sm100 and sm90")
    for name, v in (("m", m), ("n", n), ("cta_group", cta_group)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ShapeError(f"{name} must be an integer, got {v!r}", rule="integer MMA shape")
    kind = _KIND_OF.get(dtype)
    if kind is None:
        raise SimtcError(f"input type {dtype!r} is not modelled; known: {', '.join(sorted(_KIND_OF))}",
                         rule="dense kinds f16, tf32, f8f6f4, i8 (block-scaled kinds are not modelled)",
                         ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
    if k is None:
        k = _KIND_K[kind]
    if k != _KIND_K[kind]:
        raise ShapeError(f"K = {k} for kind::{kind}: a dense MMA of this kind has K = {_KIND_K[kind]}",
                         rule=f"K is implicit: {_KIND_K[kind]} for dense kind::{kind}",
                         ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
    if collector not in ("discard", "pingpong", "reuse"):
        raise SimtcError(f"collector must be discard, pingpong or reuse, got {collector!r}",
                         rule="collector usages", ref=_TCGEN05_REF)
    if arch == "sm90":
        return _wgmma_spec(m, n, k, operands, ws, collector, cta_group, dtype, kind)
    if operands == "RS":
        raise ShapeError("tcgen05.mma has no register A operand: A comes from shared memory (SS) or TMEM (TS)",
                         rule="tcgen05.mma A is a shared-memory descriptor or a TMEM address", ref=_TCGEN05_REF)
    if operands not in ("SS", "TS"):
        raise ShapeError(f"operands must be SS or TS on sm100, got {operands!r}", rule="tcgen05.mma operand forms",
                         ref=_TCGEN05_REF)
    if ws and cta_group != 1:
        raise ShapeError("tcgen05.mma.ws has no cta_group::2 form", rule=".ws is cta_group::1 only",
                         ref="PTX ISA 9.0 §9.7.16.4.2 Table 42, §9.7.16.10.9")
    if collector == "pingpong" and not ws:
        raise SimtcError("b0/b1 collector ping-pong needs .ws (collector::b0..b3 are .ws qualifiers)",
                         rule=".collector::b* is .ws only", ref=_TCGEN05_REF)
    from simtc.tmem.layouts import datapath_layout  # legality lives with the data-path layouts

    try:
        datapath_layout(m, n, ws=ws, cta_group=cta_group)
    except SimtcError as e:
        raise ShapeError(f"tcgen05.mma{'.ws' if ws else ''} M={m} N={n}: {e.message}", rule=e.rule,
                         ref=e.ref or "PTX ISA 9.0 §9.7.16.2.1 Table 39") from None
    return MmaSpec("sm100", m, n, k, operands, bool(ws), collector, cta_group, dtype, kind)


def _wgmma_spec(m, n, k, operands, ws, collector, cta_group, dtype, kind) -> MmaSpec:
    if operands == "TS":
        raise ShapeError("wgmma has no TMEM operand: A comes from shared memory (SS) or registers (RS)",
                         rule="wgmma A is a shared-memory descriptor or registers", ref=_WGMMA_REF)
    if operands not in ("SS", "RS"):
        raise ShapeError(f"operands must be SS or RS on sm90, got {operands!r}", rule="wgmma operand forms",
                         ref=_WGMMA_REF)
    if ws or collector != "discard" or cta_group != 1:
        raise ShapeError("wgmma has no .ws, collector or cta_group qualifiers (those are tcgen05.mma's)",
                         rule="wgmma.mma_async qualifiers", ref=_WGMMA_REF)
    if kind != "f16":
        raise SimtcError(f"wgmma timing is modelled for bf16/f16 only, got {dtype!r}",
                         rule="modelled wgmma input types", ref=_WGMMA_REF)
    if m != 64:
        raise ShapeError(f"wgmma M is 64 (m64nNk16), got {m}", rule="m64nNk16 shapes", ref=_WGMMA_REF)
    from simtc.mma.wgmma import _check_n  # the one N rule for wgmma

    _check_n(n)
    return MmaSpec("sm90", m, n, k, operands, False, "discard", 1, dtype, kind)


# ---- component functions (what the engine's tensor-pipe unit composes) ---------------------------
def _v(spec: MmaSpec, name: str, used: list | None) -> int | float:
    p = parameter(spec.arch, name)
    if used is not None and p not in used:
        used.append(p)
    return p.value


def _cycles(x: Fraction) -> int:
    """Whole cycles (time in the engine is an integer cycle); exact for every legal shape."""
    return math.ceil(x)


def operand_bytes(spec: MmaSpec) -> tuple[int, int]:
    """Bytes of A and of B one SM reads for one MMA: ``(rows of A, columns of B) x 32 B``.

    ``cta_group::2``: each CTA supplies M/2 rows of A and N/2 columns of B. A is counted whatever
    its source (see :func:`port_bytes_per_mma` for what passes the shared-memory port).

    >>> operand_bytes(mma_spec("sm100", 128, 64))
    (4096, 2048)
    """
    row = _ROW_BYTES[spec.kind]
    split = spec.cta_group
    return spec.m // split * row, spec.n // split * row


def _datapath_rows(spec: MmaSpec, used: list | None) -> int:
    if spec.arch == "sm90":
        return spec.m
    if spec.cta_group == 2:
        return spec.m // 2
    return spec.m if spec.ws else int(_v(spec, "mma_datapath_rows", used))


def compute_cycles(spec: MmaSpec, used: list | None = None) -> int:
    """Datapath time of one MMA: ``2·rows·N·K / peak`` (peak = 512·K on sm100, 4,096 bf16 on sm90).

    >>> [compute_cycles(mma_spec("sm100", m, 256, ws=True)) for m in (32, 64, 128)]
    [32, 64, 128]
    >>> compute_cycles(mma_spec("sm100", 64, 256)), compute_cycles(mma_spec("sm90", 64, 256))
    (128, 128)
    """
    rows = _datapath_rows(spec, used)
    if spec.arch == "sm90":
        peak = Fraction(_v(spec, "wgmma_flop_per_cycle", used))
    else:
        peak = Fraction(_v(spec, "mma_flop_per_cycle_per_k", used)) * spec.k
    return _cycles(Fraction(2 * rows * spec.n * spec.k) / peak)


def _port(spec: MmaSpec, nbytes: int, used: list | None) -> Fraction:
    return Fraction(nbytes) / Fraction(_v(spec, "smem_port_bytes_per_cycle", used))


def a_fetch_cycles(spec: MmaSpec, used: list | None = None) -> int:
    """Time to bring A through the shared-memory port before the columns stream (SS only; 0 for TS/RS).

    The mechanism behind the SS latency offsets: SS M=64 reads 2 KiB (16 cycles = 120 - 104),
    M=128 4 KiB (32 = 136 - 104).

    >>> a_fetch_cycles(mma_spec("sm100", 64, 64)), a_fetch_cycles(mma_spec("sm100", 128, 64, operands="TS"))
    (16, 0)
    """
    if spec.operands != "SS" or spec.arch == "sm90":  # sm90: the operand-specific tail holds it
        return 0
    return _cycles(_port(spec, operand_bytes(spec)[0], used))


def stream_cycles(spec: MmaSpec, used: list | None = None) -> int:
    """N columns streamed with B through the port: ``max(compute, B bytes / 128)``.

    >>> stream_cycles(mma_spec("sm100", 32, 256, ws=True))    # B-path bound: N/4, not N/8
    64
    """
    return max(compute_cycles(spec, used), _cycles(_port(spec, operand_bytes(spec)[1], used)))


def port_bytes_per_mma(spec: MmaSpec) -> int:
    """Bytes through the shared-memory port per MMA of a long chain on the same operands.

    A (SS only) is read again by every MMA unless it is reused (non-``.ws`` ``collector::a`` reuse);
    B is read by every MMA unless the ``.ws`` B collector is reused.

    >>> port_bytes_per_mma(mma_spec("sm100", 128, 64)), port_bytes_per_mma(mma_spec("sm100", 128, 64, operands="TS"))
    (6144, 2048)
    """
    a, b = operand_bytes(spec)
    reuse = spec.collector == "reuse"
    a_read = a if spec.operands == "SS" and not (reuse and not spec.ws) else 0
    b_read = 0 if (reuse and spec.ws) else b
    return a_read + b_read


def mma_ii_bounds(spec: MmaSpec, used: list | None = None) -> dict[str, int]:
    """Each resource's time per MMA in a back-to-back chain; the II is their maximum.

    Keys: ``compute``, ``smem_port``, ``front_end`` (sm100 floor / sm90 issue interval) and, for
    ``.ws``, ``b_collector``.

    >>> mma_ii_bounds(mma_spec("sm100", 128, 64, ws=True, operands="TS"))
    {'compute': 32, 'smem_port': 16, 'front_end': 9, 'b_collector': 42}
    """
    comp = compute_cycles(spec, used)
    nbytes = port_bytes_per_mma(spec)
    port = _port(spec, nbytes, used)
    a = operand_bytes(spec)[0]
    if spec.arch == "sm100" and spec.operands == "SS" and nbytes == a:  # A fetched, no B fill to hide behind
        port += _v(spec, "ss_a_fetch_startup", used)
    front = "wgmma_issue" if spec.arch == "sm90" else "mma_min_ii"
    bounds = {"compute": comp, "smem_port": _cycles(port), "front_end": int(_v(spec, front, used))}
    if spec.ws:
        if spec.collector == "reuse":
            bounds["b_collector"] = comp
        else:
            stream = Fraction(stream_cycles(spec, used))
            group = stream * int(_v(spec, "mma_column_group", used)) / spec.n  # time of the last column group
            cycle = stream + int(_v(spec, "ws_b_fill_startup", used)) - group  # one collector: fill after release
            bounds["b_collector"] = _cycles(cycle if spec.collector == "discard" else max(stream, cycle / 2))
    return bounds


def mma_occupancy_cycles(spec: MmaSpec, used: list | None = None) -> int:
    """How long one MMA holds the tensor pipe in a chain (the II): ``max(mma_ii_bounds(spec))``.

    Without ``used`` the answer is cached per :class:`MmaSpec` (the engine asks once per MMA).

    >>> mma_occupancy_cycles(mma_spec("sm100", 64, 128, ws=True, collector="pingpong", operands="TS"))
    32
    """
    if used is None:
        return _occupancy_cached(spec)
    return max(mma_ii_bounds(spec, used).values())


@functools.cache
def _occupancy_cached(spec: MmaSpec) -> int:
    return max(mma_ii_bounds(spec).values())


def mma_latency_breakdown(spec: MmaSpec, used: list | None = None) -> dict[str, int]:
    """The components of one MMA + commit + mbarrier wait, in the order they happen (sum = latency).

    sm100: ``issue, a_fetch, stream, drain, [pair], commit_arrive, mbarrier_observe``;
    sm90: ``issue, stream, tail`` (``tail`` holds commit_group/wait_group; calibrated on the H200).

    >>> mma_latency_breakdown(mma_spec("sm100", 128, 128))
    {'issue': 1, 'a_fetch': 32, 'stream': 64, 'drain': 42, 'commit_arrive': 29, 'mbarrier_observe': 32}
    """
    if spec.arch == "sm90":
        tail = "wgmma_tail_ss" if spec.operands == "SS" else "wgmma_tail_rs"
        return {"issue": int(_v(spec, "wgmma_issue", used)), "stream": stream_cycles(spec, used),
                "tail": int(_v(spec, tail, used))}
    parts = {"issue": int(_v(spec, "mma_issue", used)), "a_fetch": a_fetch_cycles(spec, used),
             "stream": stream_cycles(spec, used), "drain": int(_v(spec, "tensor_pipe_drain", used))}
    if spec.cta_group == 2:
        parts["pair"] = int(_v(spec, f"pair_latency_m{spec.m}", used))
    parts["commit_arrive"] = int(_v(spec, "commit_arrive", used))
    parts["mbarrier_observe"] = int(_v(spec, "mbarrier_try_wait", used))
    return parts


def mma_completion_cycles(spec: MmaSpec, used: list | None = None) -> int:
    """Issue to completion of the MMA (D written; what a later ``tcgen05.commit`` waits for).

    The latency the microbenchmark reports adds ``commit_arrive`` and ``mbarrier_observe`` (sm100).

    Without ``used`` the answer is cached per :class:`MmaSpec`.

    >>> mma_completion_cycles(mma_spec("sm100", 64, 64, operands="TS"))
    75
    """
    if used is None:
        return _completion_cached(spec)
    return _completion(spec, used)


@functools.cache
def _completion_cached(spec: MmaSpec) -> int:
    return _completion(spec, None)


def _completion(spec: MmaSpec, used: list | None) -> int:
    parts = mma_latency_breakdown(spec, used)
    return sum(v for k, v in parts.items() if k not in ("commit_arrive", "mbarrier_observe"))


@frozen
class MmaTiming:
    """What :func:`predict_mma` returns: latency, II, their components and the parameters used."""

    spec: MmaSpec
    latency_cycles: int
    ii_cycles: int
    breakdown: Mapping[str, int] = field(hash=False, eq=False)
    """Latency components in order (:func:`mma_latency_breakdown`); they sum to ``latency_cycles``."""
    ii_bounds: Mapping[str, int] = field(hash=False, eq=False)
    """Per-resource time per MMA (:func:`mma_ii_bounds`); ``ii_cycles`` is the largest."""
    parameters: tuple[Parameter, ...]

    @property
    def bottleneck(self) -> str:
        """The resource that sets the II (the first of equals, in ``ii_bounds`` order)."""
        return max(self.ii_bounds, key=lambda k: self.ii_bounds[k])

    def as_dict(self) -> dict:
        """``{"latency_cycles", "ii_cycles", "breakdown", "ii_bounds", "parameters": [...]}`` for ``--json``."""
        return {"instruction": self.spec.ptx, "latency_cycles": self.latency_cycles, "ii_cycles": self.ii_cycles,
                "breakdown": dict(self.breakdown), "ii_bounds": dict(self.ii_bounds),
                "parameters": [p.as_dict() for p in self.parameters]}


def predict_mma(arch: str, m: int, n: int, k: int | None = None, operands: str = "SS", ws: bool = False,
                collector: str = "discard", cta_group: int = 1, dtype: str = "bf16") -> MmaTiming:
    """Latency (one MMA + commit + mbarrier wait, timing.md §1.1) and II (back-to-back chain) of an MMA.

    >>> t = predict_mma("sm100", 64, 256, operands="TS")
    >>> t.latency_cycles, t.ii_cycles, t.bottleneck        # B200: 232 and 128.03
    (232, 128, 'compute')
    >>> predict_mma("sm90", 64, 256).latency_cycles        # H200: 186 = 128 + 58
    186
    >>> predict_mma("sm100", 64, 64, operands="RS")
    Traceback (most recent call last):
    ...
    simtc.errors.ShapeError: tcgen05.mma has no register A operand: A comes from shared memory (SS) or TMEM (TS) \
[rule: tcgen05.mma A is a shared-memory descriptor or a TMEM address; PTX ISA 9.0 §9.7.16.10.9]
    """
    spec = mma_spec(arch, m, n, k, operands, ws, collector, cta_group, dtype)
    used: list[Parameter] = []
    breakdown = mma_latency_breakdown(spec, used)
    bounds = mma_ii_bounds(spec, used)
    return MmaTiming(spec, sum(breakdown.values()), max(bounds.values()), MappingProxyType(breakdown),
                     MappingProxyType(bounds), tuple(used))
