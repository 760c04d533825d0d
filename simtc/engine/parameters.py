"""Every number the engine's time rests on: labelled parameter tables (sm100, sm90) and the set a run uses.

A :class:`Parameter` carries its value, unit, **label** and **source**, and the mechanisms that read it
(``used_by``):

* ``measured`` -- read off real hardware, by the cited source (a third party's published data, or a
  recording in this repository): a reading, the intercept / slope of a line fitted to one recording's readings, or
  the difference of two such (the source names both; a parameter is measured when no document or assumption enters);
* ``documented`` -- stated by a vendor document (NVIDIA's programming guide, architecture whitepapers,
  datasheets);
* ``derived`` -- arithmetic on measured or documented figures (the source says whose);
* ``assumed`` -- no measurement and no document: a simulator's calibration (FlashGPU-Sim's
  "approximated" values) or our own choice, with the rationale in ``source``.

:class:`Timing` is what an :class:`~simtc.engine.core.Engine` runs with: an architecture's table, any
overridden values (``Timing("sm100").scaled("cvt_lanes", 0.5)``: what :mod:`simtc.engine.sensitivity`
does) and any mechanisms switched off (``Timing("sm100").without("pipe_rates")``: what the tests do to
show that each mechanism moves the cycles by the amount it explains).

>>> p = PARAMETERS["sm100"]["smem_port_bytes_per_cycle"]
>>> p.value, p.unit, p.label
(128, 'B/cycle', 'derived')
>>> t = Timing("sm100").scaled("mufu_lanes", 2)
>>> t["mufu_lanes"], Timing("sm100")["mufu_lanes"]
(32, 16)
>>> Timing("sm100").without("pipe_rates").enabled("pipe_rates")
False
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from attrs import field, frozen

from simtc.errors import SimtcError

__all__ = ["ARCHS", "LABELS", "MECHANISMS", "PARAMETERS", "Parameter", "Timing", "parameter"]

ARCHS = ("sm100", "sm90")
LABELS = ("measured", "documented", "derived", "assumed")

MECHANISMS = {
    "tensor_pipe": "tcgen05.mma / tcgen05.cp / wgmma in issue order on the tensor pipe (simtc.engine.tensor_pipe)",
    "tmem_path": "tcgen05.ld / tcgen05.st through the TMEM load/store path (simtc.engine.tmem_path)",
    "shared_port": "one shared-memory bandwidth per SM that every reader and writer draws from "
                   "(simtc.engine.smem_port); off: each kind of consumer has a port of its own",
    "copy_engine": "TMA loads, stores and bulk copies through the SM's copy engine (simtc.engine.copy_engine)",
    "memory": "L2 and HBM: per-SM share of the chip's bandwidth, latency that grows with the bytes queued "
              "(simtc.engine.memory); off: every request takes the unloaded latency, no bandwidth limit",
    "l1": "a warp's global loads leave the SM through the L1's miss path at a cost per 128-byte line they touch, "
          "no more of their sectors in flight than the L1's window of misses holds (l1_miss_window of the L1 the "
          "CTA's shared memory leaves, simtc.engine.memory.MissWindow), and their data comes back through the L1 "
          "data pipe in wavefronts set by their rows' bank conflicts (simtc.engine.l1); off: no miss-path cost, no "
          "window, one wavefront per 128 bytes",
    "pipe_rates": "CUDA-core instruction classes at their own pipe rates per sub-partition "
                  "(simtc.engine.issue); off: every class at one warp-instruction per cycle",
    "latency": "dependent-instruction latency: a CUDA-core block's dependent chain, registers ready after "
               "their producer's latency (the scoreboard, simtc.engine.issue); off: results ready at issue",
    "issue_contention": "warps share their sub-partition's issue slot and pipes (simtc.engine.issue); off: "
                        "every warp has a sub-partition of its own",
    "barriers": "mbarrier arrive / try_wait and named-barrier latencies (simtc.engine.barriers); off: 0 cycles",
}
"""The mechanisms a :class:`Timing` can switch off (name -> what it models and where)."""


def _check_label(_inst, _attr, value: str) -> None:
    if value not in LABELS:
        raise SimtcError(f"timing parameter label {value!r} is not one of {LABELS}",
                         rule="every timing parameter is measured, documented, derived or assumed")


def _check_source(_inst, _attr, value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise SimtcError("a timing parameter needs a source", rule="every timing parameter carries its source")


def _check_used_by(_inst, _attr, value: tuple) -> None:
    if not value or any(v not in USED_BY for v in value):
        raise SimtcError(f"used_by {value!r}: one or more of {sorted(USED_BY)}",
                         rule="every timing parameter names the mechanisms that read it")


USED_BY = {
    "mma model": "the closed-form MMA latency / II model (simtc.engine.timing; also the tensor pipe's costs)",
    "tensor pipe": "simtc.engine.tensor_pipe",
    "tmem path": "simtc.engine.tmem_path",
    "shared-memory port": "simtc.engine.smem_port",
    "copy engine": "simtc.engine.copy_engine",
    "L1 miss path": "simtc.engine.l1",
    "memory system": "simtc.engine.memory",
    "issue": "simtc.engine.issue (sub-partition issue slot, pipes, scoreboard)",
    "mbarrier": "simtc.engine.barriers (mbarrier arrive, try_wait, tcgen05.commit)",
    "named barrier": "simtc.engine.barriers (bar.sync / bar.arrive)",
}


@frozen
class Parameter:
    """One timing figure: value, unit, label, where it comes from and which mechanisms read it."""

    name: str
    value: int | float
    unit: str
    label: str = field(validator=_check_label)
    source: str = field(validator=_check_source)
    used_by: tuple[str, ...] = field(converter=tuple, validator=_check_used_by)

    def as_dict(self, arch: str | None = None) -> dict:
        """``{name, [arch], value, unit, label, source, used_by}`` (what ``simtc timing params --json`` prints)."""
        d = {"name": self.name}
        if arch is not None:
            d["arch"] = arch
        d.update(value=self.value, unit=self.unit, label=self.label, source=self.source, used_by=list(self.used_by))
        return d


# ---- sources ---------------------------------------------------------------------------------------
_SA_FIT = "SemiAnalysisAI/microbench-blackwell umma_latency/fit_results.csv (B200, commit bd204d8)"
_SA_LAT = "SemiAnalysisAI/microbench-blackwell umma_latency/results.csv (B200, cta_group::2 rows)"
_SA_TMA = ("SemiAnalysisAI/microbench-blackwell tma2d_latency/tma2d_lat_results.csv (B200: one cold 2-D TMA load per "
           "CTA, one CTA per SM, 1-128 KiB boxes)")
_SA_TPUT = ("SemiAnalysisAI/microbench-blackwell tma2d_throughput/tma2d_tput_results.csv (B200 whole chip: 7.22 TB/s "
            "with 64 KiB in flight per SM)")
_KZ_WS = "KevinZeng08/microbench-blackwell umma_throughput/tcgen05_mma_ws.md (GB200)"
_KZ_REUSE = "KevinZeng08/microbench-blackwell umma_throughput/ws_reuse.csv (GB200)"
_FGS_B200 = "FlashGPU-Sim configs/SM100_B200/gpgpusim.config (values that project calls 'approximated')"
_FGS_H100 = "FlashGPU-Sim configs/SM90_H100/gpgpusim.config (values that project calls 'approximated')"
_HPMLL = "HPMLL/NVIDIA-Hopper-Benchmark RegularUnits/random_latency/h800_pcie.txt (H800 PCIe, 1,755 MHz)"
_H200_WGMMA = "tests/data/h200_wgmma_timing.json (simtc's wgmma microbenchmark, NVIDIA H200, 2026-11-30)"
_CUDA_TABLE = ("NVIDIA CUDA C++ Programming Guide, 'Arithmetic Instructions', table 'Throughput of Native Arithmetic "
               "Instructions' (results per clock per SM), compute capability 9.0")
_WHITEPAPER = ("NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), 'H100 SM Architecture': four processing "
               "blocks (sub-partitions) per SM, each with one warp scheduler and a dispatch unit of 32 threads/clock; "
               "the Blackwell SM keeps the four partitions (NVIDIA Blackwell architecture technical brief)")
_SECTOR = ("NVIDIA CUDA C++ Best Practices Guide, 'Coalesced Access to Global Memory': global memory is accessed in "
           "32-byte sectors")
_NCU_PIPES = ("the class -> pipe map follows Nsight Compute's pipeline list (Kernel Profiling Guide, 'Pipelines': alu, "
              "fma, fp16, xu, lsu)")
_SM90_EQUAL = "no B200 figure: the sm90 (compute capability 9.0) value, assumed equal on sm100"

_TP, _MM = ("tensor pipe", "mma model"), ("mma model",)


def _table(*rows: tuple) -> Mapping[str, Parameter]:
    params = [Parameter(*r) for r in rows]
    return MappingProxyType({p.name: p for p in params})


_H200_LAT = ("tests/data/h200_memory_latency.json (simtc calibrate --only memory_latency on an NVIDIA H200, 1,980 MHz, "
             "2026-12-01; simtc.engine.calibration.H200)")
_H200_LAT_HBM = ("one thread's LDG.E.64.STRONG.GPU pointer chase through a 4 GiB pool (random lines, TLB warmed, "
                 "none in L2): 691 cycles per dependent load, the unloaded round trip of a request that misses L2; a "
                 "cp.async.bulk chase of 64-B rows through the same pool steps 432 cycles slower than through an "
                 "L2-resident one (771 vs 339), as dram_latency - l2_hit_latency = 442 predicts")
_H200_L1 = ("tests/data/h200_l1_probe.json (python -m simtc.hw.l1_probe on an NVIDIA H200, 2026-12-01; "
            "Nsight Compute counts in tests/data/ncu/h200_l1_probe.csv)")
_L1_PROBE_TEXT = ("one CTA of 32 warps issuing scattered 128-bit loads from an L2-resident pool with 200 KiB of shared "
                  "memory held (the small L1 FlashMLA's kernels leave): 6.1 / 7.2 / 14.5 / 26.8 / 61.8 / 19.5 / 14.2 "
                  "cycles per warp-instruction touching 4 / 4 / 8 / 16 / 32 / 11 / 8 lines (1 row of 512 B, 4 of "
                  "128, 8 of 64 in one line and straddling two, 32 of 16, 8 at FlashMLA's V32 and MODEL1 pitches): "
                  "the median cycles per line, 1.78 (residuals -8% to +17%); with the L1 free (no shared memory) it "
                  "is 1.01 per line, a case the engine does not model")
_L1_WAVE_TEXT = ("Nsight Compute's L1 data-pipe wavefronts per 128-bit load of FlashMLA's SM90 producer pattern "
                 "(8 rows, lane l on row l % 8) with rows 512 to 1,024 B apart: 32.3 / 25.1 / 21.5 / 19.3 when rows "
                 "start on every 128 / 64 / 32 / 16 B of a line; least squares over the 11 pitches of 4 x (a x 8 rows "
                 "+ b x the expected rows on the busiest bank) gives a = 0.407, b = 0.601 (residuals under 1%); the "
                 "same two numbers give the probe's other lane order within 1% (1 to 32 rows on a line start) and "
                 "-22% (V32 pitch)")
_H200 = ("tests/data/h200_calibration.json (simtc calibrate on an NVIDIA H200, 1,980 MHz, 2026-12-01; "
         "simtc.engine.calibration.H200)")


_H200_LAT_CHASE = ("tests/data/h200_memory_latency.json (simtc calibrate --only memory_latency on an NVIDIA H200, "
                   "1,980 MHz, 2026-12-01)")
_REF_L2 = ("NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 50 MB of L2 cache on the H100 SXM5, the GH100 "
           "configuration the H200 keeps")
_H200_EXEC = ("tests/data/h200_exec_timing.json (benchmarks/bench_exec_timing.py --gpu on an NVIDIA H200, 2026-12-03): "
              "a one-thread chase over 100 distinct lines of a table the host has just copied steps 338 cycles (an LDG "
              "L2 hit, ldg_l2_latency 324, and its address arithmetic), 655 after a 256 MiB write pushed it out of L2")
_REF_UNIFIED = ("NVIDIA Hopper Tuning Guide, 'Increased L1 Capacity' / CUDA C++ Programming Guide, compute capability "
                "9.0 'Shared Memory': one 256 KB data cache per SM holds L1 and shared memory, shared memory takes "
                "0, 8, 16, 32, 64, 100, 132, 164, 196 or 228 KB of it")


_LDG_DRAM = (
    "a warp's HBM load's round trip while other SMs load too (one SM alone: dram_latency, the lone chase): the LDG "
    "gather of tests/data/h200_calibration.json (memory, L1 free, one block in flight) takes the same time from HBM "
    "as from L2 on 1 SM, and more on 8 / 33 / 66 SMs, V32 2,750 / 2,775 / 2,842 against 2,092 / 2,097 / 2,095 cycles "
    "(MODEL1 2,902 / 2,924 / 2,985 against 2,286 / 2,291 / 2,289), far below any bandwidth limit (14 B/cycle an SM): "
    "the HBM round trip is the L2 one (ldg_l2_latency 324) plus those differences, 982 / 1,002 / 1,071 (940 / 957 / "
    "1,020), median 991, taken as 1,000; at 132 SMs the share's queue adds the rest (1,472)")
_MISS_WINDOW = (
    "a warp's load that misses L1 is admitted only while the SM's misses in flight, each held from its request until "
    "its data is back, leave room for its sectors; the room is this share of the sectors of the L1 beside shared "
    "memory (proportional to the L1's size: assumed, a fill needs a line of the L1 to land in; the recordings "
    "show the limit at the 28 KiB L1 and no limit below 27 B/cycle with the L1 free). Derived from "
    "tests/data/h200_gather_regime.json (python -m simtc.hw.calibrate.gather_regime on an NVIDIA H200, 2026-12-03): "
    "FlashMLA's producer loads, one warpgroup a CTA, the kernel's 28 KiB L1 (200 KiB of shared memory held), 8 / 33 / "
    "66 CTAs from HBM, 3,460-3,572 (V32) and 3,551-3,642 (MODEL1) cycles from a block's first load to its barrier; "
    "the same loop in the engine (simtc.kernels.gathers.gather_program, ldg_dram_latency 1,000) is within 5% at all "
    "six with 0.56 of the 896 sectors (502 in flight; 0.52: 20%, 0.60: 7%). Checked, not fitted, on "
    "tests/data/h200_gather_inflight.json (--set inflight, 1 to 4 warpgroups): the small L1 caps one SM at 17-20 "
    "B/cycle from HBM (V32; 15-17 MODEL1) however many warpgroups, Little's law 502 x 32 B / 1,000 cycles = 16 "
    "B/cycle,"
    " and at 24 / 20 B/cycle from L2")


def _cache_rows(arch: str) -> tuple[tuple, ...]:
    """The L1 and L2 as tag stores (:class:`simtc.engine.l1.GlobalCaches`): measured on the H200, assumed equal on
    sm100."""
    sm90 = arch == "sm90"
    lab = "measured" if sm90 else "assumed"

    def src(text: str) -> str:
        return f"{text} ({_H200_LAT_CHASE})" if sm90 else \
            f"measured on the H200 (sm90), assumed equal on sm100: {text} ({_H200_LAT_CHASE})"

    return (
        ("ldg_l1_latency", 32, "cycles", lab,
         src("an ld.global.u64 pointer chase through a 64 KiB pool the launch first walks untimed (all of it in L1, "
             "0 % shared-memory carve-out requested): 32.0 cycles per dependent load (chases ldg/l1, residual 0)"),
         ("L1 miss path",)),
        ("ldg_l2_latency", 324, "cycles", lab,
         src("an ld.global.cg.u64 pointer chase through an 8 MiB pool read once whole before (all of it in L2): 323.8 "
             "cycles per dependent load (chases ldg/l2); the bulk-copy path's l2_hit_latency (250) lacks the load's "
             "L1 and LSU stages"), ("memory system",)),
        ("l2_bytes", 50 * 1024 * 1024, "B", "documented" if sm90 else "assumed",
         (_REF_L2 if sm90 else f"the H200's figure, assumed (no B200 figure used): {_REF_L2}")
         + f"; a launch whose device allocations fit in it starts with them in L2, as the host's copies leave them: "
           f"{_H200_EXEC}", ("memory system",)),
        ("ldg_dram_latency", 1000 if sm90 else 691, "cycles", "measured" if sm90 else "assumed",
         _LDG_DRAM if sm90 else "no B200 measurement of a warp's loaded HBM round trip: taken as dram_latency (691, "
                                f"the lone chase's, itself the H200's); the H200's loaded figure is 1,000: {_LDG_DRAM}",
         ("memory system",)),
        ("l1_miss_window", 0.56, "of the L1's sectors", "derived" if sm90 else "assumed",
         _MISS_WINDOW if sm90 else f"the sm90 figure, assumed equal on sm100: {_MISS_WINDOW}", ("memory system",)),
        ("l1_unified_bytes", 256 * 1024, "B", "documented" if sm90 else "assumed",
         _REF_UNIFIED if sm90 else f"the sm90 figure, assumed equal on sm100 (the Blackwell SM keeps a unified "
                                   f"L1/shared data cache of the same size): {_REF_UNIFIED}", ("L1 miss path",)),
    )


def _shared_rows(arch: str) -> tuple[tuple, ...]:
    """Rows of the mechanisms both generations share (CUDA cores, shared-memory latency, named barriers, fences):
    measured on the H200 (sm90); on sm100 the same values, assumed equal (no B200 measurement of them)."""
    sm90 = arch == "sm90"
    lab = "measured" if sm90 else "assumed"

    def src(text: str) -> str:
        return f"{text} ({_H200})" if sm90 else f"measured on the H200 (sm90), assumed equal on sm100: {text} ({_H200})"

    return (
        ("sub_partitions", 4, "per SM", "documented", _WHITEPAPER, ("issue",)),
        ("issue_per_sub_partition", 1, "warp-instructions/cycle", "documented", _WHITEPAPER, ("issue",)),
        ("warp_interleave", 32, "instructions", "assumed",
         "a CUDA-core block issues in slices of this many warp-instructions, so that warps sharing a sub-partition "
         "interleave (the scheduler picks a ready warp every cycle; simtc takes turns per slice: the error is at "
         "most one slice's duration per switch)", ("issue",)),
        ("fp32_lanes", 128, "lanes/SM", lab,
         src("FFMA, FMUL, FADD one warp-instruction per 0.99 cycles per sub-partition with 4 warps on each = 128 "
             f"lanes per SM, as documented ({_CUDA_TABLE}); packed FFMA2/FMUL2/FADD2 (sm100) do 2 per lane"),
         ("issue",)),
        ("fp16_lanes", 128, "lanes/SM", lab,
         src("HFMA2, HADD2, HMUL2.BF16_V2 one per 1.00 cycle per sub-partition (ptxas issues half of them as the "
             ".MMA forms); HADD2.F32, the f16 -> f32 conversion, at half that rate (2.00)"), ("issue",)),
        ("alu_lanes", 64, "lanes/SM", lab,
         src("FMNMX, FSEL, LOP3, IADD3 one per 2.0 cycles per sub-partition; FMNMX and FFMA interleaved 1.99 cycles "
             "per pair: separate pipes"), ("issue",)),
        ("imad_lanes", 64, "lanes/SM", lab,
         src("IMAD one per 2.0 cycles per sub-partition; IMAD and FFMA interleaved 2.12 cycles per pair: a pipe of "
             "its own"), ("issue",)),
        ("cvt_lanes", 64, "lanes/SM", lab,
         src("F2FP.F16.E4M3.UNPACK_B 2.01 and F2FP.BF16.F32.PACK_AB 2.00 cycles per sub-partition, 4.00 interleaved "
             "(one pipe), 2.01 beside FFMA and 8.0 beside MUFU.EX2 (neither of those pipes): 4x the 16 per clock "
             f"per SM the CUDA table gives 'all other type conversions' ({_CUDA_TABLE})"), ("issue",)),
        ("mufu_lanes", 16, "lanes/SM", lab,
         src(f"MUFU.EX2, MUFU.RCP one per 8.0 cycles per sub-partition ({_CUDA_TABLE}: 16 per clock per SM)"),
         ("issue",)),
        ("shfl_lanes", 32, "lanes/SM", lab, src("SHFL.BFLY one per 4.0 cycles per sub-partition"), ("issue",)),
        ("fp32_latency", 4, "cycles", lab, src("FFMA dependent chain: 4 cycles per instruction; IMAD the same"),
         ("issue",)),
        ("fp16_latency", 8, "cycles", lab, src("HFMA2 dependent chain: 8 cycles (the .MMA forms included)"),
         ("issue",)),
        ("alu_latency", 4, "cycles", lab, src("FMNMX, LOP3, IADD3 dependent chains: 4 cycles"), ("issue",)),
        ("cvt_latency", 4, "cycles", lab, src("F2FP.*.UNPACK_B / PACK_AB dependent chains: 4 cycles (HADD2.F32: 5)"),
         ("issue",)),
        ("mufu_latency", 17, "cycles", lab, src("MUFU.EX2 / MUFU.RCP dependent chains: 17 cycles"), ("issue",)),
        ("shfl_latency", 24, "cycles", lab, src("SHFL.BFLY dependent chain: 24 cycles"), ("issue",)),
        ("smem_ld_latency", 23, "cycles", lab,
         src("LDS.32 pointer chase: 23 cycles per dependent load (an ld.shared's register is ready this long after "
             "its data left the port)"), ("shared-memory port",)),
        ("named_barrier_release", 11, "cycles", lab,
         src("bar.sync in a loop: 20 / 28 / 36 cycles per barrier for 128 / 256 / 384 threads = 1 issue cycle + "
             "11 + 2 per participating warp; this is the 11"), ("named barrier",)),
        ("named_barrier_per_warp", 2, "cycles per warp", lab,
         src("the same line's slope: the release comes 2 cycles later per participating warp"), ("named barrier",)),
        ("proxy_fence", 9, "cycles", lab, src("fence.proxy.async.shared::cta by one warp: 9.0 cycles per fence "
                                              "(MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S)"), ("issue",)),
        ("mbarrier_try_wait", 44, "cycles", lab,
         src("two warps waking each other through mbarriers: 74.75 cycles one way = 1 issue + mbarrier_arrive + the "
             "wait; with the arrive's measured 30 (tests/data/h200_l1_probe.json, chains), the waiter sees a "
             "completed phase 44 cycles after it completes"),
         ("mbarrier", "mma model")),
        ("sm_bytes_per_cycle", 34, "B/cycle", lab,
         src("one SM pulling scattered 656-byte rows from a 4 GiB pool with cp.async.bulk, 4-8 blocks in flight: "
             "34.4 / 34.3 B/cycle (the SM's own limit; the chip's share binds when many SMs run)"),
         ("memory system",)),
        ("l2_bytes_per_cycle", 44.6, "B/cycle", lab,
         src("the same from an 8 MiB pool (L2-resident): 44.6 B/cycle per SM"), ("memory system",)),
        ("l2_hit_latency", 250, "cycles", lab,
         src("a 16-byte cp.async.bulk of L2-resident data, issue to the issuing warp's wake: 296 cycles = 1 issue + "
             "the L2 round trip + 1 port cycle + mbarrier_try_wait 44; a bulk chase through an L2-resident pool steps "
             "339 cycles, 43 more (the chase's LDS of the next address, 23, and its move to uniform registers)"),
         ("memory system",)),
    )


_SM100 = _table(
    # -- tensor pipe: tcgen05.mma ------------------------------------------------------------------
    ("smem_port_bytes_per_cycle", 128, "B/cycle", "derived",
     "SS 128x64 moves A 4 KiB + B 2 KiB = 6,144 B per 48.02-cycle II, SS 64x64 4 KiB per 32 "
     f"({_SA_FIT}); the one shared-memory bandwidth every reader and writer of the SM draws from",
     ("shared-memory port", "mma model")),
    ("mma_flop_per_cycle_per_k", 512, "FLOP/cycle per unit of K", "derived",
     "dense peak 512·K FLOP/cycle/SM (bf16 8,192; tf32 4,096; e4m3/s8 16,384), measured 8,153-8,161 "
     f"bf16 (SemiAnalysis umma_throughput/tput_results_max.csv); {_KZ_WS} §2", _TP),
    ("mma_datapath_rows", 128, "rows", "derived",
     "non-.ws M=64 runs at half peak (4,026-4,080 FLOP/cycle) with the same II = N/2 as M=128, so a "
     f"1-SM non-.ws MMA occupies the 128-row datapath ({_SA_FIT}; {_KZ_WS} §3)", _TP),
    ("mma_column_group", 8, "columns", "assumed",
     "N advances in groups of 8 columns (the instruction descriptor encodes N >> 3): the reading of "
     f"{_KZ_WS} §2, 'not spec'; used only for the .ws collector release time", _TP),
    ("mma_issue", 1, "cycles", "assumed", f"tcgen05 MMA issue interval 1 cycle ({_FGS_B200})", _TP),
    ("mma_fixed_latency_ts", 104, "cycles", "derived",
     f"latency = N/2 + 104 for TS, any M ({_SA_FIT}); = mma_issue + pipe drain + commit_arrive + "
     "mbarrier_try_wait: the drain is what remains of the 104 (the split between the four is assumed)", _TP),
    ("commit_arrive", 29, "cycles", "assumed",
     f"tcgen05.commit -> mbarrier arrive taken as one mbarrier arrive (29 cycles, {_FGS_B200}); commit visibility on "
     "B200 is unknown", ("mbarrier", "mma model")),
    ("mma_min_ii", 9, "cycles", "derived",
     f"{_KZ_REUSE}: TS 32x64 reuse, a of a + b/D = 9.0 (E4M3 depths 256/512; 9.17 at F4 depth 1,024) above its N/8 = 8 "
     "compute time: a per-MMA front-end floor", _TP),
    ("ws_b_fill_startup", 14, "cycles", "derived",
     f"{_KZ_WS} §3: discard - reuse = 11.96 (M=64), 9.96 (M=128) cycles = startup - one 8-column group "
     "(2 cycles at 4 columns/cycle, 4 cycles at 2 columns/cycle); M=32 follows (B-path bound, same II as M=64)", _TP),
    ("ss_a_fetch_startup", 7, "cycles", "derived",
     f"{_KZ_REUSE}: .ws SS - TS at N=64 with B reuse (M=32/64/128: 15.0/23.0/39.0 vs A bytes/128 = 8/16/32); "
     "exposed only when an MMA fetches A but no B (hidden behind a B fill otherwise)", _TP),
    ("pair_latency_m128", 37, "cycles", "derived",
     f"{_SA_LAT}: TS cta_group::2 M=128 latency - 104 - N/4 = 37 for N = 64..256 (BF16, E4M3, F4); the engine runs "
     "cta_group::1 only, so only the closed-form model reads it", _MM),
    ("pair_latency_m256", 29, "cycles", "derived",
     f"{_SA_LAT}: TS cta_group::2 M=256 latency - 104 - N/2 = 29 for N = 64..256 (BF16, E4M3, F4); closed-form "
     "model only", _MM),
    ("tcgen05_cp_fixed", 42, "cycles", "assumed",
     "tcgen05.cp latency and throughput are unknown: taken as the MMA pipe drain (104 - 1 - 29 - 32) "
     "after the copied bytes stream through the shared-memory port", ("tensor pipe",)),
    # -- TMEM load/store path ----------------------------------------------------------------------
    ("tcgen05_ld_fixed", 100, "cycles", "assumed",
     "tcgen05.ld latency is unknown (no public measurement): a round figure, so that a 16-column load takes "
     "116 cycles, about the MMA's fixed latency", ("tmem path",)),
    ("tcgen05_st_fixed", 100, "cycles", "assumed", "tcgen05.st latency is unknown; taken equal to ld",
     ("tmem path",)),
    ("tcgen05_ldst_columns_per_cycle", 1, "32-bit columns/cycle per warp", "assumed",
     "TMEM bandwidth is unknown: one 32-lane x 32-bit column (128 B) per cycle assumed",
     ("tmem path",)),
    # -- shared memory -------------------------------------------------------------------------------
    ("smem_st_visibility", 4, "cycles", "assumed",
     f"a shared store is visible to a barrier 4 cycles after leaving the load/store path ({_FGS_B200}): an arrival "
     "after stores counts only once they are visible", ("shared-memory port",)),
    # -- copy engine and memory ------------------------------------------------------------------------
    ("tma_issue_gap", 32, "cycles", "assumed",
     f"elect + cp.async.bulk issue gap, ≈ 33 measured there ({_FGS_B200}); the copy engine takes one TMA instruction "
     "per gap (a gather4's four rows go to memory together)", ("copy engine",)),
    ("sm_count", 148, "SMs", "derived",
     "B200 SMs: FlashMLA's own B200 benchmark sizes its peak-performance batch as 74*2 = 148 requests, one per SM "
     "(deepseek-ai/FlashMLA tests/test_flash_mla_sparse_decoding.py at 9241ae3), and SemiAnalysis converts with "
     "148 SMs; the SM's share of HBM is hbm_bytes_per_cycle / sm_count when every SM runs", ("memory system",)),
    ("hbm_bytes_per_cycle", 3674, "B/cycle (chip)", "derived",
     f"7.22 TB/s measured ({_SA_TPUT}) / 1.965 GHz (the SM clock SemiAnalysis converts with)", ("memory system",)),
    ("dram_latency", 691, "cycles", "assumed",
     f"measured on the H200 (sm90), assumed equal on sm100: {_H200_LAT_HBM} ({_H200_LAT}). The one B200 figure, the "
     f"intercept of a line through the cold single loads of {_SA_TMA} (1,802 cycles, residuals up to ±820), times a "
     "first touch (TLB and DRAM page misses) that a running kernel's stream of loads does not pay on every request",
     ("memory system",)),
    ("request_bytes_per_cycle", 16.7, "B/cycle", "derived",
     "slope of the same B200 fit (0.0600 cycles per byte): the rate one request streams at when it is alone "
     f"({_SA_TMA})",
     ("memory system",)),
    ("sector_bytes", 32, "B", "documented",
     f"{_SECTOR}; a scattered row of b bytes moves ceil(b / 32) sectors", ("memory system",)),
    ("ldg_hbm_bytes_per_cycle", 2841, "B/cycle (chip)", "assumed",
     f"no B200 figure: hbm_bytes_per_cycle x 2,956 / 3,823, the ratio of LDG to bulk-copy gathers of the same rows "
     f"measured on the H200 ({_H200})", ("memory system",)),
    # -- barriers ------------------------------------------------------------------------------------
    ("l1_line_cycles", 1.78, "cycles per 128-B line", "assumed",
     f"measured on the H200 (sm90), assumed equal on sm100: {_L1_PROBE_TEXT} ({_H200_L1})", ("L1 miss path",)),
    ("l1_wavefronts_per_row", 0.407, "wavefronts per row and quarter-warp", "assumed",
     f"measured on the H200 (sm90), assumed equal on sm100: {_L1_WAVE_TEXT} ({_H200_L1})", ("shared-memory port",)),
    ("l1_wavefronts_per_conflict", 0.601, "wavefronts per row on the busiest bank", "assumed",
     f"measured on the H200 (sm90), assumed equal on sm100: {_L1_WAVE_TEXT} ({_H200_L1})", ("shared-memory port",)),
    ("mbarrier_arrive", 29, "cycles", "assumed",
     f"mbarrier arrive (arrive_tx shared write) lands this long after issue ({_FGS_B200})", ("mbarrier",)),
    ("named_barrier_arrive", 18, "cycles", "assumed",
     f"bar.arrive: the arriving warp resumes 18 cycles after its arrive ({_FGS_B200})", ("named barrier",)),
    # -- CUDA cores ----------------------------------------------------------------------------------
    *_shared_rows("sm100"),
    *_cache_rows("sm100"),
)

# sm90: the wgmma rows are calibrated on our H200 measurements (simtc crosscheck's wgmma timing microbenchmark; the
# rows, device, driver, date and command are in tests/data/h200_wgmma_timing.json and tests/data/README_h200.md).
_SM90 = _table(
    ("smem_port_bytes_per_cycle", 128, "B/cycle", "measured",
     f"LDS/STS of 32, 64, 128 bits without bank conflicts: 127.5-128.3 B/cycle per SM ({_H200}); SS wgmma II = "
     f"(A + B bytes) / 128 for N < 64 ({_H200_WGMMA}); an SS wgmma chain kept its pace beside LDS.128 streams, which "
     "took 33.5 B/cycle of what it left: the one shared-memory bandwidth every reader and writer draws from",
     ("shared-memory port", "mma model")),
    ("wgmma_flop_per_cycle", 4096, "FLOP/cycle", "measured",
     f"II = N/2 cycles for m64nNk16 bf16 at N >= 64 on the H200 ({_H200_WGMMA}): 64 x N x 16 x 2 FLOP / (N / 2) = "
     "4,096 per cycle per SM; the datasheet's dense bf16 peak agrees (989 TFLOP/s / (132 SMs x 1.83 GHz), NVIDIA "
     "H100 SXM datasheet)", _TP),
    ("wgmma_issue", 13, "cycles", "measured",
     f"wgmma issue interval: the II floor of RS chains at N = 8..24 ({_H200_WGMMA}); also taken as the issue part of "
     "the latency (the split of the fixed latency is not observable)", _TP),
    ("wgmma_tail_ss", 45, "cycles", "measured",
     f"fixed latency N/2 + 58 of one SS wgmma + commit_group + wait_group(0), minus the issue 13 ({_H200_WGMMA})", _TP),
    ("wgmma_tail_rs", 35, "cycles", "measured",
     f"fixed latency N/2 + 48 of one RS wgmma + commit_group + wait_group(0), minus the issue 13 ({_H200_WGMMA})", _TP),
    ("wgmma_max_outstanding", 8, "wgmma", "assumed",
     f"wgmma a warp may have in flight before its issue stalls ({_FGS_H100}: per accumulator chain)",
     ("tensor pipe",)),
    ("smem_st_visibility", 4, "cycles", "assumed",
     f"a shared store is visible to a barrier 4 cycles after leaving the load/store path (the B200 value of "
     f"{_FGS_B200}; no Hopper figure)", ("shared-memory port",)),
    ("tma_issue_gap", 33, "cycles", "measured",
     f"64 one-row cp.async.bulk issued by one thread took 2,113 cycles from HBM and 2,106 from L2: 33 cycles per "
     f"instruction, whatever the memory ({_H200}); FlashGPU-Sim's H100 figure is ≈ 33 too ({_FGS_H100})",
     ("copy engine",)),
    ("sm_count", 132, "SMs", "documented", "NVIDIA H200 SXM: 132 SMs (the H100 SXM5 configuration; datasheet)",
     ("memory system",)),
    ("hbm_bytes_per_cycle", 1931, "B/cycle (chip)", "measured",
     f"scattered 656-byte rows by cp.async.bulk from a 4 GiB pool, 132 SMs with 4 blocks in flight each: 3,823 GB/s "
     f"/ 1,980 MHz ({_H200}); the datasheet's 4.8 TB/s is the peak of streaming access", ("memory system",)),
    ("dram_latency", 691, "cycles", "measured",
     f"{_H200_LAT_HBM} ({_H200_LAT})", ("memory system",)),
    ("request_bytes_per_cycle", 20.8, "B/cycle", "measured",
     "a cp.async.bulk pointer chase over the same pool, rows of 64 / 512 / 2,048 B: 771 / 832 / 879 cycles per step, "
     f"least squares 785 + 0.048 per byte: one request alone streams at 1 / 0.048 = 20.8 B/cycle ({_H200_LAT})",
     ("memory system",)),
    ("sector_bytes", 32, "B", "documented", f"{_SECTOR}", ("memory system",)),
    ("ldg_hbm_bytes_per_cycle", 1493, "B/cycle (chip)", "measured",
     f"scattered 656-byte rows gathered with 128-bit LDG from a 4 GiB pool, 132 SMs with 4 blocks in flight each: "
     f"2,956 GB/s / 1,980 MHz ({_H200}); bulk copies of the same rows reach 3,823 GB/s", ("memory system",)),
    ("l1_line_cycles", 1.78, "cycles per 128-B line", "measured",
     f"{_L1_PROBE_TEXT} ({_H200_L1})", ("L1 miss path",)),
    ("l1_wavefronts_per_row", 0.407, "wavefronts per row and quarter-warp", "measured",
     f"{_L1_WAVE_TEXT} ({_H200_L1})", ("shared-memory port",)),
    ("l1_wavefronts_per_conflict", 0.601, "wavefronts per row on the busiest bank", "measured",
     f"{_L1_WAVE_TEXT} ({_H200_L1})", ("shared-memory port",)),
    ("mbarrier_arrive", 30, "cycles", "measured",
     "mbarrier.arrive's state comes back 30 cycles after issue: a dependent chain of arrives on one thread (each "
     "returned state feeding the next arrive's address through ISETP, ISETP.EX, SEL) steps 43.3 cycles, the same "
     "chain through ld.shared.b64 36.4, of which 23 are the LDS latency (the LDS.32 pointer chase of "
     f"{_H200}; LDS.64 taken to be as fast), so 13.4 are the select's: 43.3 - 13.4 = 29.9 "
     f"({_H200_L1}, chains); FlashGPU-Sim's H100 figure is 29 ({_FGS_H100})", ("mbarrier",)),
    ("named_barrier_arrive", 2, "cycles", "assumed", f"named CTA barrier issue interval ({_FGS_H100})",
     ("named barrier",)),
    *_shared_rows("sm90"),
    *_cache_rows("sm90"),
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
        close = [n for n in table if name.split("_")[0] in n][:5]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise SimtcError(f"{arch} has no timing parameter {name!r}{hint}", rule="timing parameters by name")
    return table[name]


def _overrides(value) -> tuple[tuple[str, float], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), v) for k, v in items))


@frozen
class Timing:
    """The parameter values and mechanisms a run uses: ``arch``'s table, ``overrides``, ``disabled`` mechanisms.

    Hashable (a cache key of the cost functions); ``t[name]`` is a value, :meth:`param` the labelled row.
    """

    arch: str = "sm100"
    overrides: tuple[tuple[str, float], ...] = field(default=(), converter=_overrides)
    disabled: frozenset[str] = field(default=frozenset(), converter=frozenset)

    def __attrs_post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise SimtcError(f"unknown architecture {self.arch!r}; modelled: {', '.join(ARCHS)}",
                             rule="timing tables exist for sm100 and sm90")
        for name, value in self.overrides:
            parameter(self.arch, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise SimtcError(f"timing parameter {name} = {value!r}: a positive number",
                                 rule="timing parameters are positive")
        bad = sorted(self.disabled - set(MECHANISMS))
        if bad:
            raise SimtcError(f"unknown mechanism(s) {bad}; known: {', '.join(MECHANISMS)}",
                             rule="mechanisms a Timing can switch off")

    def __getitem__(self, name: str) -> int | float:
        for k, v in self.overrides:
            if k == name:
                return v
        return parameter(self.arch, name).value

    def param(self, name: str) -> Parameter:
        """The labelled table row (its value is the table's, not an override)."""
        return parameter(self.arch, name)

    @property
    def table(self) -> Mapping[str, Parameter]:
        return PARAMETERS[self.arch]

    def scaled(self, name: str, factor: float) -> Timing:
        """The same Timing with parameter ``name`` multiplied by ``factor`` (integers stay integers, at least 1)."""
        v = self[name] * factor
        base = parameter(self.arch, name).value
        if isinstance(base, int) and not isinstance(base, bool):
            v = max(1, round(v))
        rest = [(k, x) for k, x in self.overrides if k != name]
        return Timing(self.arch, (*rest, (name, v)), self.disabled)

    def with_values(self, **values: float) -> Timing:
        """The same Timing with these parameter values."""
        rest = [(k, x) for k, x in self.overrides if k not in values]
        return Timing(self.arch, (*rest, *values.items()), self.disabled)

    def without(self, *mechanisms: str) -> Timing:
        """The same Timing with these mechanisms switched off (see :data:`MECHANISMS`)."""
        return Timing(self.arch, self.overrides, self.disabled | set(mechanisms))

    def enabled(self, mechanism: str) -> bool:
        return mechanism not in self.disabled
