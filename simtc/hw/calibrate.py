"""Microbenchmarks that measure the sm_90a (H100/H200) parameters a cycle model needs: ``simtc calibrate``.

Every benchmark is a header-free CUDA kernel (``simtc/hw/cuda/calibrate_*.cu``, each module prefixed with
``calibrate_common.cu``) compiled by :func:`simtc.hw.compile.compile_cuda` (cached) and run by a thin CuPy
executor (``cupy.RawModule`` loading that cubin). Times are SM clock cycles read with ``clock64`` inside the
kernel; every launch is repeated, the first launches are dropped as warm-up and the median is kept. The SM
clock during the run is measured with ``%globaltimer`` (a kernel that spins ~2 ms reading both counters, before
and after every section; the gather kernels also read both at their start and end).

Each benchmark declares the SASS it measures (:class:`Bench`): per unrolled step, how many instructions of
each SASS mnemonic (``per_step``), and for fixed kernels absolute count ranges (``counts``). :func:`sass_checks`
compiles every kernel and checks, offline, that (1) each declared mnemonic occurs in every variant between
its expected count and that plus ``slack`` (set-up and fold code outside the loop), (2) between the variant
with the fewest and the most steps the count of every declared mnemonic grows by exactly ``per_step`` x the
step difference, every ``glue`` mnemonic by at most its allowed rate, and all other mnemonics together (NOP
padding aside) by at most :data:`OTHER_SLACK` (so nothing else scales with the steps the fit is taken over),
and (3) nothing spills (no ``LDL``/``STL``). A benchmark whose check fails is not run; the recording says why.

Fits. Step-loop benchmarks time ``iters`` iterations of a loop of S unrolled steps, for several S (kernels
that differ only in S). Least squares of cycles = intercept + slope x (S x iters) (:func:`fit_line`) gives the
cycles per step without the loop overhead (in the intercept). With k warps on each of the 4 SM
sub-partitions (one CTA of 128 k threads; warp w runs on sub-partition w % 4), ``slope`` is the cycles for
every warp to make one step, so ``slope / k`` is the cycles per warp-step per sub-partition (the issue
interval when the warps keep the pipe busy) and, for one dependent chain, ``slope`` is the latency.

Latency chases (the ``memory`` section's ``latency``; ``--only memory_latency`` runs them alone). The gathers
above are bounded by their issue loops and the SM's bandwidth; these measure the plain latency of one
dependent global-memory request, one thread (lane 0 of one warp, one CTA on one SM). A pool of 2^b elements
``stride`` bytes apart holds one random cycle through all of them (:func:`chase_slot`, a bijection of
[0, 2^b) computed on the GPU by ``simtc_cal_lat_fill``): element k's first 8 bytes hold the address of
element k + 1, so consecutive accesses land on unrelated lines and pages anywhere in the pool. Every launch
continues the cycle where the previous one stopped (a cursor in global memory), so on the 4 GiB pool no line
is read twice in a run. *LDG*: kernels of S = 8, 16, 24, 32 unrolled ``p = *(u64*)p`` loads in a loop of
``iters`` iterations; ``ld.global.cg`` (``LDG.E.64.STRONG.GPU``: L2, not L1) on the 4 GiB pool (128-byte
stride: 2^25 lines) and the 8 MiB pool (2^16 lines), a plain ``ld.global`` (``LDG.E.64``, L1-cached) on a
64 KiB pool (512 lines, walked once untimed at the start of every launch; the kernel asks for the largest L1
carveout). *Bulk*: one kernel repeats ``count`` times (a runtime argument) mbarrier.arrive.expect_tx, one
``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`` of 64, 512 or 2048 bytes from the
current element (2048-byte stride: 2^21 elements in 4 GiB, 2^12 in 8 MiB), ``mbarrier.try_wait.parity``
until it has arrived (2-second timeout) and ``ld.shared`` of the first 8 bytes that arrived, the next
address (its R2UR to the uniform register that ``UBLKCP`` takes is part of the step). Before the chase the
4 GiB pool is filled, read whole once (TLB entries for as many of its pages as the TLBs hold: the chase's
pages are random, so whatever a TLB miss costs is in its latency) and then a 256 MiB region after it is read,
so none of the pool is in L2; the 8 MiB pool is filled and read once, so all of it is in L2. In the kernels
a shared-memory store of p before each clock64 read makes the thread wait for the value it times, so
cycles = intercept + slope x dependent accesses, over the depths (S x iters, or the counts), with the slope
the cycles per dependent access (per copy: issue -> bytes arrived -> the next address read back).

Quirks recorded rather than hidden:

* ptxas compiles every half-precision FMA-family PTX instruction (``fma/add/mul .f16x2``, ``mul .bf16x2``)
  alternately to the plain form (``HFMA2``, ``HADD2``, ``HMUL2.BF16_V2``) and the ``.MMA`` form
  (``HFMA2.MMA``, ``HFMA2.MMA.BF16_V2``), half each, in throughput and in dependent chains alike (none of the
  forms tried avoids it: ``.sat``, ``.relu``, ``.ftz``, negated or absolute operands, ptxas ``-O1``/``-O2``):
  those classes measure the 50/50 mix ptxas emits, and their SASS group names both forms.
* ``rcp(rcp(x))`` and ``rcp(-rcp(x))`` are folded by ptxas, so the ``MUFU.RCP`` chain negates after each
  reciprocal: the negation folds into the next ``MUFU.RCP`` operand except once per chain per loop
  iteration (an ``FADD`` in the intercept, not the slope).
* The FP8 e4m3 -> f16x2 unpack chain leaves a ``PRMT`` per chain per iteration in the throughput kernels
  (constant in S: in the intercept).
* The dequant step is FlashMLA's ``cvt_fp8x8_bf16x8`` as the CUDA headers lower it (22 SASS instructions per 8
  values, checked) plus one ``LOP3`` that feeds the outputs back into the next step; its kernels unroll a
  quarter of the usual depth and loop four times as often (:attr:`AluOp.shrink`).
* ``fence.proxy.async.shared::cta`` is ``MEMBAR.ALL.CTA`` + ``FENCE.VIEW.ASYNC.S``; ``barrier.cluster.arrive``
  (default ``.release``) + ``wait`` (default ``.acquire``) is ``MEMBAR.ALL.GPU``, ``ERRBAR``, ``CGAERRBAR``,
  ``UCGABAR_ARV``, ``UCGABAR_WAIT``, ``CCTL.IVALL``; with ``arrive.relaxed`` only the last three remain.
  Both are measured and declared as such.

The recording (a JSON object; :func:`save`, :func:`load`)
-----------------------------------------------------------

Top level (every key is present; a section that was not run is ``null``; a section that failed as a whole is
``{status: "error", reason}``, and if its data broke this format through a bug it is kept, unchecked, under
``invalid_<section>``):

* ``format``: ``"simtc-calibration"``; ``version``: 1; ``arch``: ``"sm_90a"``.
* ``command``: the command line; ``date``: UTC, ``YYYY-MM-DD HH:MM:SS UTC``; ``quick``: ``--quick`` or not;
  ``sections``: the sections asked for (``memory_latency`` where only the memory section's latency chases
  ran: ``memory`` then holds ``params: {}``, ``configs: []`` and ``latency``); ``elapsed_s``: wall-clock
  seconds of the whole run.
* ``device``: ``name``, ``arch`` (``sm_90a``), ``sms``, ``driver`` (NVML's driver version, or null),
  ``cuda_driver`` and ``cuda_runtime`` (``major.minor`` from CuPy), ``cupy``, ``numpy``, ``python``, ``compiler``
  (simtc's build route and NVRTC version), ``max_smem_per_block`` (bytes, opt-in), ``describe``
  (:func:`simtc.hw.device.describe`'s line).
* ``clock_mhz``: ``median`` of every probe (MHz, or null), ``probes``: list of ``{section, when ("before" or
  "after"), mhz}``.
* ``sass``: one entry per benchmark (its name, e.g. ``"cuda_core/FFMA/throughput"``): ``section``,
  ``kernels`` (names, fewest steps first), ``steps`` (per kernel), ``ok``, ``problems`` (list of strings),
  ``expected_per_step`` and ``per_step`` (declared and measured SASS per step of the declared and glue
  mnemonics, measured = count difference between the last and first kernel / step difference; ``{}`` for fixed
  kernels), ``other_delta`` (that count difference for every other mnemonic but NOP), ``counts`` (declared
  ``[low, high]`` per mnemonic for fixed kernels), ``histogram`` (full SASS mnemonics of the first kernel).
* ``cuda_core``: per class (keys as sm_90a prints them: ``F2FP.F16.E4M3.UNPACK_B``, ``HADD2.F32``,
  ``F2FP.BF16.F32.PACK_AB``, ``HMUL2.BF16_V2``, ``HFMA2``, ``HADD2``, ``dequant``, ``FFMA``, ``FMUL``,
  ``FADD``, ``FMNMX``, ``FSEL``, ``FSETP+FSEL``, ``MUFU.EX2``, ``MUFU.RCP``, ``SHFL.BFLY``, ``IMAD``, ``LOP3``,
  ``IADD3``): ``ptx`` (what one step is), ``sass`` (the SASS groups of one step, ``{group: count}``; a group
  is mnemonics joined by ``|``), ``unit`` (what one step is: ``instruction``, ``8 values`` or ``FSETP + FSEL``) and two
  measurements, ``throughput`` (16 independent chains a thread, 8 for ``dequant``) and ``latency`` (one
  chain), each a *step-loop measurement*.
* ``cuda_core_pairs``: per pair ``"A + B"``: ``a``, ``b``, ``sass`` and ``throughput`` (8 chains of each
  class, steps interleaved 1:1; a step is one A and one B) as a step-loop measurement.
* A *step-loop measurement* is ``{status, reason, steps, iters, warm, samples, runs}``: ``status`` ``"ok"``,
  ``"sass-failed"``, ``"error"``, ``"timeout"`` or ``"skipped"`` (``reason`` says why; null when ok), ``steps``
  the steps per loop iteration of each kernel, ``iters`` loop iterations, ``warm`` launches dropped,
  ``samples`` launches kept per kernel; ``runs`` one entry per launch shape: ``threads``, ``ctas``,
  ``warps_per_sp`` (threads / 128, or null for fewer than 128 threads), ``cycles`` (median over samples of
  the CTA's span, latest clock64 after the loop minus earliest before it, per kernel), ``slope`` and
  ``intercept`` of the fit, ``cycles_per_step`` (= slope: the time for every warp to make one step) and
  ``cycles_per_step_per_sp`` (= slope / warps_per_sp; null without warps_per_sp).
* ``shared_memory``: ``LDS.32/1-way`` ... ``STS.128/4-way`` (ld/st.volatile.shared of 32, 64, 128 bits a
  thread, conflict-free, 2-way and 4-way): a step-loop measurement (one access a warp per step) plus ``op``,
  ``bits``, ``ways``, and per run ``bytes_per_cycle`` (threads x bytes a thread / slope: requested bytes per
  cycle of the SM); ``LDS.32/latency``: a pointer chase by one warp, a step-loop measurement whose
  ``cycles_per_step`` is the dependent-load latency; ``wgmma_lds`` (run after every other section, so that a
  fault there cannot touch them): one warpgroup runs chains of ``wgmma.mma_async.m64n256k16.f32.bf16.bf16``
  with A and B in shared memory (``n``, ``bytes_per_wgmma`` = 10,240 operand bytes, ``wg_iters`` chains of
  ``depths`` wgmmas each, one commit + wait per chain) while two warpgroups (``lds_warps`` = 8 warps) stream
  conflict-free LDS.128 until it finishes: ``{status, reason, wgmma_alone {cycles (per depth), cycles_per_wgmma
  (slope over the wgmma count), smem_bytes_per_cycle}, lds_alone {bytes_per_cycle}, together {cycles,
  cycles_per_wgmma, wgmma_smem_bytes_per_cycle, lds_bytes_per_cycle, sum_bytes_per_cycle}}``.
* ``memory``: ``params`` (``seed``, ``blocks`` measured and ``warm`` blocks per warpgroup, ``launches``,
  ``pools`` {name: bytes}, ``rows`` {format: {useful, moved per method}}) and ``configs``: one per (method
  ``ldg``/``ldgsts``/``bulk``, format ``v32`` 656 B / ``model1`` 584 B, pool ``hbm`` ~4 GiB / ``l2`` 8 MiB, CTAs,
  blocks in flight per SM): ``status``, ``reason``, ``method``, ``format``, ``row_bytes`` (useful bytes a row),
  ``pool``, ``ctas``, ``inflight``, ``threads``, ``latency_mean``, ``latency_median``, ``latency_p10``,
  ``latency_p90`` (cycles per block of 64 rows, issue -> all bytes arrived, over every measured block of
  every launch), ``bytes_per_cycle_per_sm`` (median over CTAs of useful bytes of the measured blocks / the
  CTA's span from the first measured block's t0 to the last block's t1), ``gbps`` (useful bytes of every
  block of the launch / the launch's time from CUDA events, median over launches), ``kernel_ms``,
  ``clock_mhz`` (clock64 / %globaltimer of CTA 0 over the launch, median over launches), ``nbuf`` (shared-memory
  block buffers the warpgroups share, 0 for ``ldg``), ``bytes_moved_per_row`` (bytes a row's copies request,
  redundant ones included). CTA counts above the SM count are clipped to it. ``latency`` (optional: absent
  from recordings made before it existed; ``{status: "error", reason}`` if it failed as a whole):
  ``params`` (``seed``, ``warm``, ``samples``, ``ldg_steps``, ``ldg_iters``, ``bulk_counts``, ``pools``,
  ``strides``, ``flush_bytes``) and ``chases``, keyed ``ldg/<pool>`` (pools ``hbm``, ``l2``, ``l1``) and
  ``bulk/<pool>/<bytes>`` (pools ``hbm``, ``l2``; 64, 512, 2048 bytes): ``status``, ``reason``, ``method``
  (``ldg``/``bulk``), ``pool``, ``pool_bytes``, ``bytes`` (per access: 8 for ldg), ``stride``, ``elements``,
  ``ptx``, ``sass``, ``pages`` (``"random"``), ``pool_pages_2mib``, ``prepare`` (what was done to the pool
  first), ``warm``, ``samples`` and, when ok, ``depths`` (dependent accesses per timed launch, one fit point
  each), ``cycles`` (median over samples per depth), ``slope`` (cycles per dependent access), ``intercept``,
  ``residual_max`` (largest |cycles - fit|); ldg adds ``steps``, ``iters``, ``warm_loads`` and, for ``l1``,
  ``l1_carveout``.
* ``sync``: ``mbarrier_pingpong`` (round trips between two warps: a *count fit* ``{status, reason, counts,
  cycles, slope, intercept}`` over the number of round trips; ``round_trip_cycles`` = slope,
  ``one_way_cycles`` = slope / 2); ``st_async_pingpong`` (a count fit with ``round_trip_cycles``, across a
  cluster of two CTAs with ``st.async`` + the peer's mbarrier); ``tma_wake`` (``samples`` kept after ``warm``
  dropped, medians and p10/p90 of
  ``issue_to_self_wake`` (16-byte ``cp.async.bulk`` issue -> the issuing warp's try_wait succeeds),
  ``issue_to_other_wake`` (-> a second warp's), ``arrive_to_wake`` (plain mbarrier arrive -> the other warp
  wakes), in cycles); ``bar_sync`` (step-loop measurement of ``bar.sync 0`` with 128, 256, 384 threads:
  cycles per barrier = cycles_per_step); ``fence_proxy_async`` and ``sts_fence_proxy_async`` (``fence.proxy.
  async.shared::cta`` alone and after a 16-byte ``st.shared``, 32 and 128 threads); ``barrier_cluster`` and
  ``barrier_cluster_relaxed`` (``barrier.cluster.arrive[.relaxed]`` + ``wait``, cluster of 2 CTAs of 128).
* ``launch``: ``empty_1cta``, ``empty_132cta`` (µs per launch of an empty kernel of 1 CTA, of one CTA per SM
  (132 on an H200), 128 threads each, back to back on one stream) and ``group_of_3`` (µs per group of three
  dependent launches: 1 CTA, then one per SM, then one per SM): each
  ``{status, reason, launches, repeats, us, us_all}`` (``us`` the median over repeats); ``host_enqueue_us``
  (the host's cost of one CuPy launch call, median). The timed launches are queued while a spin kernel
  keeps the stream busy, so the CUDA-event interval is the GPU's back-to-back time, not the host's.

:func:`summary` derives the numbers a cycle model uses (its docstring lists them).
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import fnmatch
import hashlib
import json
import math
import os
import platform
import re
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path

from attrs import field, frozen

from simtc.errors import ShapeError, SimtcError

__all__ = ["ALU_OPS", "FORMAT", "PAIRS", "PARTS", "SECTIONS", "SELECTABLE", "VERSION", "AluOp", "Bench",
           "CalibrationFormatError", "SassCheck", "benches", "chase_slot", "fit_line", "load", "module_source", "run",
           "sass_by_kernel", "sass_checks", "save", "summary", "validate"]

FORMAT = "simtc-calibration"
VERSION = 1
ARCH = "sm_90a"
SECTIONS = ("cuda_core", "cuda_core_pairs", "shared_memory", "memory", "sync", "launch")
"""The sections of a run (and of the recording), in the order they run."""
PARTS = {"memory_latency": "memory"}
"""Parts of a section that a run can ask for alone (``--only memory_latency``): name -> the section that holds
them (a run of the whole section runs them too)."""
SELECTABLE = SECTIONS + tuple(PARTS)
"""What ``sections`` (``--only``) may name."""
OTHER_SLACK = 8
"""How much the total count of undeclared SASS (NOP padding aside) may differ between a benchmark's first and
last kernel (compiler choices in the set-up code, e.g. VIADD for IADD3, move counts between mnemonics)."""
TIMEOUT_NS = 2_000_000_000
"""mbarrier waits give up (and flag a timeout) after this much %globaltimer time in one launch."""
_DATE = "%Y-%m-%d %H:%M:%S UTC"


class CalibrationFormatError(SimtcError, ValueError):
    """A file that is not a calibration recording as :func:`save` writes it."""


# ---- the benchmarks -------------------------------------------------------------------------------------------

@frozen
class AluOp:
    """One CUDA-core instruction class: the PTX of one step on a chain's state, and the SASS it must become."""

    key: str
    """The class as the recording names it (the SASS mnemonic where there is one)."""
    ptx: str
    """What one step is, in PTX terms (documentation)."""
    bodies: tuple[str, ...]
    """Inline-asm statements of one step; step d uses ``bodies[d % len(bodies)]``. ``S0`` (``S1``) stands for
    the chain's 32-bit state word(s); ``a`` and ``b`` are loop-invariant 32-bit operands."""
    sass: tuple[tuple[str, int], ...]
    """SASS per step: (group, count); a group is full mnemonics joined by ``|`` (``*`` globs allowed)."""
    unit: str = "instruction"
    state: int = 1
    """32-bit words of state per chain (2 for the dequant step)."""
    glue: tuple[tuple[str, float], ...] = ()
    """SASS that may grow with the steps, at most this many per step (e.g. the dequant step's feedback)."""
    shrink: int = 1
    """Unrolled depths divided by this (and loop iterations multiplied by it): keeps a long step's loop body
    small enough for the instruction cache (the dequant step is 23 instructions)."""

    def depths(self, mode: str) -> tuple[int, ...]:
        return tuple(d // self.shrink for d in (TP_DEPTHS if mode == "tp" else LAT_DEPTHS))


def _asm(ptx: str, n_in: int = 2, state: int = 1) -> str:
    outs = '"+r"(S0)' if state == 1 else '"+r"(S0), "+r"(S1)'
    ins = ("", ' : "r"(a)', ' : "r"(a), "r"(b)')[n_in]
    return f'asm volatile("{ptx}" : {outs}{ins});'


def _fp(body: str) -> str:
    """A float step on the chain word: f = chain, p = a, q = b, P a predicate."""
    return _asm("{ .reg .f32 f, p, q; .reg .pred P; mov.b32 f, %0; mov.b32 p, %1; mov.b32 q, %2; " + body
                + " mov.b32 %0, f; }")


_DEQUANT = _asm(
    "{ .reg .b16 l0, h0, l1, h1, e0, e1, e2, e3, e4, e5, e6, e7; .reg .b32 u0, u1, u2, u3, p0, p1, p2, p3, t0, t1; "
    ".reg .f32 f0, f1, f2, f3, f4, f5, f6, f7; "
    "cvt.u16.u32 l0, %0; shr.u32 t0, %0, 16; cvt.u16.u32 h0, t0; "
    "cvt.u16.u32 l1, %1; shr.u32 t1, %1, 16; cvt.u16.u32 h1, t1; "
    "cvt.rn.f16x2.e4m3x2 u0, l0; cvt.rn.f16x2.e4m3x2 u1, h0; cvt.rn.f16x2.e4m3x2 u2, l1; cvt.rn.f16x2.e4m3x2 u3, h1; "
    "mov.b32 {e0, e1}, u0; mov.b32 {e2, e3}, u1; mov.b32 {e4, e5}, u2; mov.b32 {e6, e7}, u3; "
    "cvt.f32.f16 f0, e0; cvt.f32.f16 f1, e1; cvt.f32.f16 f2, e2; cvt.f32.f16 f3, e3; "
    "cvt.f32.f16 f4, e4; cvt.f32.f16 f5, e5; cvt.f32.f16 f6, e6; cvt.f32.f16 f7, e7; "
    "cvt.rn.bf16x2.f32 p0, f1, f0; cvt.rn.bf16x2.f32 p1, f3, f2; cvt.rn.bf16x2.f32 p2, f5, f4; "
    "cvt.rn.bf16x2.f32 p3, f7, f6; "
    "mul.bf16x2 p0, p0, %2; mul.bf16x2 p1, p1, %2; mul.bf16x2 p2, p2, %2; mul.bf16x2 p3, p3, %2; "
    "mov.b32 %0, p0; xor.b32 p1, p1, p2; xor.b32 %1, p1, p3; }", 1, state=2)

_HMUL_BF16 = "HMUL2.BF16_V2|HFMA2.MMA.BF16_V2"

ALU_OPS: dict[str, AluOp] = {op.key: op for op in (
    AluOp("F2FP.F16.E4M3.UNPACK_B", "cvt.rn.f16x2.e4m3x2 of the chain word's low 16 bits",
          (_asm("{ .reg .b16 l, h; mov.b32 {l, h}, %0; cvt.rn.f16x2.e4m3x2 %0, l; }", 0),),
          (("F2FP.F16.E4M3.UNPACK_B", 1),)),
    AluOp("HADD2.F32", "cvt.f32.f16 of the chain word's low 16 bits (ptxas emits HADD2.F32 -RZ, R.H0_H0)",
          (_asm("{ .reg .b16 l, h; .reg .f32 f; mov.b32 {l, h}, %0; cvt.f32.f16 f, l; mov.b32 %0, f; }", 0),),
          (("HADD2.F32", 1),)),
    AluOp("F2FP.BF16.F32.PACK_AB", "cvt.rn.bf16x2.f32 (chain, a)",
          (_asm("{ .reg .f32 f, p; mov.b32 f, %0; mov.b32 p, %1; cvt.rn.bf16x2.f32 %0, f, p; }", 1),),
          (("F2FP.BF16.F32.PACK_AB", 1),)),
    AluOp("HMUL2.BF16_V2", "mul.bf16x2 (what cuda_bf16.h's operator* emits); ptxas alternates HMUL2.BF16_V2 and "
          "HFMA2.MMA.BF16_V2", (_asm("mul.bf16x2 %0, %0, %1;", 1),), ((_HMUL_BF16, 1),)),
    AluOp("HFMA2", "fma.rn.f16x2; ptxas alternates HFMA2 and HFMA2.MMA", (_asm("fma.rn.f16x2 %0, %0, %1, %2;"),),
          (("HFMA2|HFMA2.MMA", 1),)),
    AluOp("HADD2", "add.f16x2; ptxas alternates HADD2 and HFMA2.MMA (x * 1 + a)", (_asm("add.f16x2 %0, %0, %1;", 1),),
          (("HADD2|HFMA2.MMA", 1),)),
    AluOp("dequant", "FlashMLA SM90 cvt_fp8x8_bf16x8 for 8 values, as cuda_fp8.h/cuda_bf16.h lower it: the high "
          "fp8 pair of each word shifted down (shr.u32), 4 cvt.rn.f16x2.e4m3x2, 8 cvt.f32.f16, 4 cvt.rn.bf16x2.f32, "
          "4 mul.bf16x2 by a bf16x2 scale; one 3-input xor feeds the outputs back",
          (_DEQUANT,), (("SHF.R.U32.HI", 2), ("F2FP.F16.E4M3.UNPACK_B", 4), ("HADD2.F32", 8),
                        ("F2FP.BF16.F32.PACK_AB", 4), (_HMUL_BF16, 4)), unit="8 values", state=2,
          glue=(("LOP3.LUT", 1.0),), shrink=4),
    AluOp("FFMA", "fma.rn.f32", (_fp("fma.rn.f32 f, f, p, q;"),), (("FFMA", 1),)),
    AluOp("FMUL", "mul.rn.f32", (_fp("mul.rn.f32 f, f, p;"),), (("FMUL", 1),)),
    AluOp("FADD", "add.rn.f32", (_fp("add.rn.f32 f, f, p;"),), (("FADD", 1),)),
    AluOp("FMNMX", "max.f32 (fmaxf), every other step on the negated chain",
          (_fp("max.f32 f, f, p;"), _fp("neg.f32 f, f; max.f32 f, f, q;")), (("FMNMX", 1),)),
    AluOp("FSEL", "selp.f32 on a loop-invariant predicate, every other step on the negated chain",
          (_fp("setp.lt.f32 P, p, q; selp.f32 f, f, q, P;"),
           _fp("setp.lt.f32 P, p, q; neg.f32 f, f; selp.f32 f, f, p, P;")), (("FSEL", 1),)),
    AluOp("FSETP+FSEL", "setp.lt.f32 on the chain, then selp.f32 choosing the next value",
          (_fp("setp.lt.f32 P, f, p; selp.f32 f, p, q, P;"),), (("FSETP.*", 1), ("FSEL", 1)), unit="FSETP + FSEL"),
    AluOp("MUFU.EX2", "ex2.approx.ftz.f32, every other step on the negated chain",
          (_fp("ex2.approx.ftz.f32 f, f;"), _fp("neg.f32 f, f; ex2.approx.ftz.f32 f, f;")), (("MUFU.EX2", 1),)),
    AluOp("MUFU.RCP", "rcp.approx.ftz.f32 then neg.f32 (ptxas folds rcp(rcp(x)))",
          (_fp("rcp.approx.ftz.f32 f, f; neg.f32 f, f;"),), (("MUFU.RCP", 1),)),
    AluOp("SHFL.BFLY", "shfl.sync.bfly.b32 lane ^ 1, all 32 lanes",
          (_asm("shfl.sync.bfly.b32 %0, %0, 1, 0x1f, 0xffffffff;", 0),), (("SHFL.BFLY", 1),)),
    AluOp("IMAD", "mad.lo.u32", (_asm("mad.lo.u32 %0, %0, %1, %2;"),), (("IMAD", 1),)),
    AluOp("LOP3", "lop3.b32 (xor of three)", (_asm("lop3.b32 %0, %0, %1, %2, 0x96;"),), (("LOP3.LUT", 1),)),
    AluOp("IADD3", "two add.u32 that ptxas fuses into one IADD3",
          (_asm("{ .reg .u32 t; add.u32 t, %0, %1; add.u32 %0, t, %2; }"),), (("IADD3", 1),)),
)}
"""The CUDA-core classes, in the order they run."""

PAIRS = (("F2FP.BF16.F32.PACK_AB", "FFMA"), ("F2FP.BF16.F32.PACK_AB", "MUFU.EX2"),
         ("F2FP.F16.E4M3.UNPACK_B", "F2FP.BF16.F32.PACK_AB"), ("HFMA2", "FFMA"), ("FMNMX", "FFMA"), ("IMAD", "FFMA"))
"""Classes interleaved 1:1 to see which share a pipe."""

TP_CHAINS, TP_DEPTHS = 16, (4, 8, 12, 16)
"""Throughput kernels: independent chains a thread, and unrolled depths (steps = chains x depth)."""
LAT_DEPTHS = (32, 64, 96, 128)
"""Latency kernels: one chain, this many dependent steps per loop iteration."""
PAIR_CHAINS = 8
SMEM_DEPTHS = (8, 16, 24, 32)
CHASE_DEPTHS = (32, 64, 96, 128)
SYNC_DEPTHS = (8, 16, 24, 32)
WARPS_PER_SP = (1, 2, 3, 4)
WGMMA_DEPTHS = (16, 32)
"""wgmma + LDS: back-to-back m64n256k16 per commit group, per kernel."""
WGMMA_BYTES = 64 * 16 * 2 + 256 * 16 * 2
"""Operand bytes one m64n256k16 bf16 SS wgmma reads from shared memory (A 2 KiB + B 8 KiB)."""
LAT_SEED = 0x5EED
"""Seed of the latency chases' cycle order (:func:`chase_slot`)."""
LAT_POOLS = {"hbm": 4 << 30, "l2": 8 << 20, "l1": 64 << 10}
"""Latency pools (bytes): far larger than L2, L2-resident, L1-resident."""
LAT_STRIDE = {"ldg": 128, "bulk": 2048}
"""Bytes between the chase's elements: one 128-byte line per LDG element; 2 KiB per bulk element (the
largest copy)."""
LAT_FLUSH = 256 << 20
"""Bytes read after the 4 GiB latency pool has been touched, so that none of the pool stays in L2."""
LDG_CHASE_STEPS = (8, 16, 24, 32)
"""LDG chase kernels: dependent loads unrolled per loop iteration."""
LDG_CHASE = {"ldg.cg": ("ld.global.cg.u64", "LDG.E.64.STRONG.GPU", "cg"),
             "ldg": ("ld.global.u64", "LDG.E.64", "l1")}
"""LDG chase benchmarks: (PTX of one step, its SASS, kernel tag). ``ld.global.cg`` (cache in L2, not in L1)
serves the HBM and L2 pools; a plain ``ld.global`` (cached in L1) the L1 pool."""
BULK_BYTES = (64, 512, 2048)
"""Sizes of the dependent bulk copies (bytes)."""
_CHASE_MULS = (0x9E3779B1, 0x85EBCA6B, 0xC2B2AE35)
MODULES = ("alu", "pairs", "smem", "wgmma", "sync", "sync_loop", "memory", "latency", "launch")
"""The CUDA modules (one cubin each) holding every benchmark's kernels."""


@frozen
class Variant:
    """One kernel of a benchmark."""

    kernel: str
    steps: int
    """Measured steps a warp makes per loop iteration (0 for a kernel without a step loop)."""


@frozen
class Bench:
    """A benchmark: the kernels that measure one thing, and the SASS they must contain."""

    section: str
    name: str
    module: str
    """Key of the CUDA module holding the kernels (:func:`module_source`)."""
    variants: tuple[Variant, ...]
    per_step: tuple[tuple[str, int], ...] = ()
    counts: tuple[tuple[str, int, int], ...] = ()
    """Fixed kernels: (group, low, high) count of every kernel."""
    slack: int = 64
    glue: tuple[tuple[str, float], ...] = ()
    what: str = ""
    part: str | None = None
    """The part of the section (:data:`PARTS`) the benchmark belongs to, if any."""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _alu_kernel(op_key: str, mode: str, depth: int) -> str:
    return f"simtc_cal_{_slug(op_key)}_{mode}{depth}"


def _pair_key(a: str, b: str) -> str:
    return f"{a} + {b}"


def _smem_name(op: str, bits: int, ways: int) -> str:
    return f"{op}.{bits}/{ways}-way"


_SYNC_LOOPS = {
    "bar_sync": ("", 'asm volatile("bar.sync 0;" ::: "memory");', (("BAR.SYNC.DEFER_BLOCKING", 1),), ()),
    "fence_proxy_async": ("", 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
                          (("MEMBAR.ALL.CTA", 1), ("FENCE.VIEW.ASYNC.S", 1)), ()),
    "sts_fence_proxy_async": (
        "", 'asm volatile("st.volatile.shared.v4.u32 [%0+OFF], {%1, %1, %1, %1};\\n\\tfence.proxy.async.shared::cta;" '
            ':: "r"(buf), "r"(v) : "memory");', (("STS.128", 1), ("MEMBAR.ALL.CTA", 1), ("FENCE.VIEW.ASYNC.S", 1)), ()),
    "barrier_cluster": ("__cluster_dims__(2, 1, 1)",
                        'asm volatile("barrier.cluster.arrive.aligned;\\n\\tbarrier.cluster.wait.aligned;" '
                        '::: "memory");',
                        (("UCGABAR_ARV", 1), ("UCGABAR_WAIT", 1), ("MEMBAR.ALL.GPU", 1), ("ERRBAR", 1),
                         ("CGAERRBAR", 1), ("CCTL.IVALL", 1)), ()),
    "barrier_cluster_relaxed": (
        "__cluster_dims__(2, 1, 1)",
        'asm volatile("barrier.cluster.arrive.relaxed.aligned;\\n\\tbarrier.cluster.wait.aligned;" ::: "memory");',
        (("UCGABAR_ARV", 1), ("UCGABAR_WAIT", 1), ("CCTL.IVALL", 1)), ()),
}
"""Step-loop sync benchmarks: (kernel attribute, one step, SASS per step, glue)."""

_GATHER = {(m, f): f"simtc_cal_gather_{m}_{f}" for m in ("ldg", "ldgsts", "bulk") for f in ("v32", "model1")}


def _ldg_chase_kernel(tag: str, steps: int) -> str:
    return f"simtc_cal_lat_ldg_{tag}_d{steps}"


def chase_slot(k, bits: int, seed: int = LAT_SEED):
    """Slot of element ``k`` of a latency chase's cycle over 2^bits slots: the same bijection of [0, 2^bits) as
    ``simtc_chase_slot`` in ``calibrate_latency.cu`` (``k`` an int or a NumPy unsigned array).

    >>> sorted(chase_slot(k, 4) for k in range(16)) == list(range(16))
    True
    """
    m, h = (1 << bits) - 1, (bits + 1) >> 1
    x = (k + seed) & m
    for a in _CHASE_MULS:
        x = (x * a) & m
        x ^= x >> h
    return x


def benches() -> list[Bench]:
    """Every benchmark, in run order (no GPU, no compiler needed)."""
    out: list[Bench] = []
    for key, op in ALU_OPS.items():
        chains = TP_CHAINS // op.state
        out.append(Bench("cuda_core", f"cuda_core/{key}/throughput", "alu",
                         tuple(Variant(_alu_kernel(key, "tp", d), chains * d) for d in op.depths("tp")), op.sass,
                         glue=op.glue, what=f"{key}: {chains} independent chains a thread"))
        out.append(Bench("cuda_core", f"cuda_core/{key}/latency", "alu",
                         tuple(Variant(_alu_kernel(key, "lat", d), d) for d in op.depths("lat")), op.sass,
                         glue=op.glue, what=f"{key}: one dependent chain"))
    for a, b in PAIRS:
        key = _pair_key(a, b)
        per = collections.Counter()
        for g, n in ALU_OPS[a].sass + ALU_OPS[b].sass:
            per[g] += n
        out.append(Bench("cuda_core_pairs", f"cuda_core_pairs/{key}", "pairs",
                         tuple(Variant(_alu_kernel(f"{a}_{b}", "pair", d), PAIR_CHAINS * d) for d in TP_DEPTHS),
                         tuple(per.items()), what=f"{key}: {PAIR_CHAINS} chains of each, interleaved 1:1"))
    for op in ("LDS", "STS"):
        for bits in (32, 64, 128):
            mnem = op if bits == 32 else f"{op}.{bits}"
            glue = (("LOP3.LUT", 2.0),) if op == "LDS" else ()
            for ways in (1, 2, 4):
                name = _smem_name(op, bits, ways)
                out.append(Bench("shared_memory", f"shared_memory/{name}", "smem",
                                 tuple(Variant(f"simtc_cal_{_slug(name)}_d{d}", d) for d in SMEM_DEPTHS),
                                 ((mnem, 1),), glue=glue, what=f"{name}: one access a warp per step"))
    out.append(Bench("shared_memory", "shared_memory/LDS.32/latency", "smem",
                     tuple(Variant(f"simtc_cal_lds_chase_d{d}", d) for d in CHASE_DEPTHS), (("LDS", 1),),
                     what="pointer chase p = *p, one warp"))
    out.append(Bench("shared_memory", "shared_memory/wgmma+LDS", "wgmma",
                     tuple(Variant(f"simtc_cal_wgmma_lds_d{d}", d) for d in WGMMA_DEPTHS),
                     (("HGMMA.64x256x16.F32.BF16", 1),), slack=0, glue=(("NOP", 1.0),),
                     counts=(("WARPGROUP.ARRIVE", 1, 1), ("WARPGROUP.DEPBAR.LE", 1, 1), ("LDS.128", 16, 16)),
                     what="a wgmma m64n256k16 SS chain on one warpgroup, LDS.128 streams on two others"))
    out.append(Bench("sync", "sync/mbarrier_pingpong", "sync", (Variant("simtc_cal_mbar_pingpong", 0),),
                     counts=(("SYNCS.ARRIVE.TRANS64.A1T0", 2, 8), ("SYNCS.PHASECHK.TRANS64.TRYWAIT", 2, 16)),
                     what="mbarrier arrive -> try_wait ping-pong between two warps"))
    out.append(Bench("sync", "sync/tma_wake", "sync", (Variant("simtc_cal_tma_wake", 0),),
                     counts=(("UBLKCP.S.G", 1, 2), ("SYNCS.ARRIVE.TRANS64", 1, 2),
                             ("SYNCS.ARRIVE.TRANS64.A1T0", 1, 2), ("SYNCS.PHASECHK.TRANS64.TRYWAIT", 3, 12)),
                     what="16-byte cp.async.bulk completion -> waiting warps wake"))
    out.append(Bench("sync", "sync/st_async_pingpong", "sync", (Variant("simtc_cal_st_async_pingpong", 0),),
                     counts=(("STAS", 2, 4), ("UCGABAR_ARV", 2, 2), ("UCGABAR_WAIT", 2, 2)),
                     what="st.async + peer mbarrier ping-pong across a cluster of two"))
    for key, (_, _, per, glue) in _SYNC_LOOPS.items():
        out.append(Bench("sync", f"sync/{key}", "sync_loop",
                         tuple(Variant(f"simtc_cal_{key}_d{d}", d) for d in SYNC_DEPTHS), per, glue=glue,
                         slack=16, what=key))
    ldg = {"v32": (("LDG.E.EL.LTC256B.128.CONSTANT", 16, 16), ("LDG.E.EL.LTC128B.128.CONSTANT", 6, 6)),
           "model1": (("LDG.E.EL.LTC256B.128.CONSTANT", 14, 14), ("LDG.E.EL.LTC128B.128.CONSTANT", 4, 4),
                      ("LDG.E.64.CONSTANT", 2, 2))}
    for (method, fmt), kernel in _GATHER.items():
        if method == "ldg":
            counts = ldg[fmt] + (("STS", 1, 1),)
        elif method == "ldgsts":
            counts = (("LDGSTS.E.BYPASS.128", 2, 22), ("LDGDEPBAR", 1, 1), ("DEPBAR.LE", 1, 1))
            if fmt == "model1":
                counts += (("LDGSTS.E.64", 1, 2),)
        else:
            counts = (("UBLKCP.S.G", 1 if fmt == "v32" else 2, 2), ("SYNCS.ARRIVE.TRANS64", 1, 1))
        out.append(Bench("memory", f"memory/{method}/{fmt}", "memory", (Variant(kernel, 0),),
                         counts=(*counts, ("BAR.SYNC.DEFER_BLOCKING", 4, 4)), what=f"{method} gather of {fmt} rows"))
    out.append(Bench("memory", "memory/touch", "memory", (Variant("simtc_cal_touch", 0),),
                     counts=(("LDG.E.128*", 1, 2),), what="read a pool once (puts a small pool in L2)"))
    for key, (ptx, sass, tag) in LDG_CHASE.items():
        out.append(Bench("memory", f"memory/latency/{key}", "latency",
                         tuple(Variant(_ldg_chase_kernel(tag, d), d) for d in LDG_CHASE_STEPS), ((sass, 1),),
                         counts=(("STS.64", 2, 2), ("CS2R", 2, 2)), slack=2, part="memory_latency",
                         what=f"pointer chase p = *(u64*)p with {ptx}, one thread"))
    out.append(Bench("memory", "memory/latency/bulk", "latency", (Variant("simtc_cal_lat_bulk", 0),),
                     counts=(("UBLKCP.S.G", 1, 1), ("SYNCS.ARRIVE.TRANS64", 1, 1),
                             ("SYNCS.PHASECHK.TRANS64.TRYWAIT", 1, 2), ("LDS.64", 1, 1), ("LDG.E.64", 1, 1),
                             ("STS.64", 2, 2), ("CS2R", 4, 4)), part="memory_latency",
                     what="dependent cp.async.bulk copies (the next address is the first word that arrived)"))
    out.append(Bench("memory", "memory/latency/fill", "latency", (Variant("simtc_cal_lat_fill", 0),),
                     counts=(("STG.E.64", 2, 2),), part="memory_latency", what="write a chase's cycle into a pool"))
    out.append(Bench("memory", "memory/latency/touch", "latency", (Variant("simtc_cal_lat_touch", 0),),
                     counts=(("LDG.E.128*", 1, 2),), part="memory_latency",
                     what="read a pool once (TLB entries; L2-resident small pools; the L2 flush)"))
    out.append(Bench("launch", "launch/empty", "launch",
                     tuple(Variant(f"simtc_cal_empty_{c}", 0) for c in "abc"), counts=(("EXIT", 1, 1),),
                     what="empty kernels"))
    out.append(Bench("launch", "launch/clock_probe", "launch", (Variant("simtc_cal_clock_probe", 0),),
                     counts=(("CS2R", 4, 4),), what="clock64 / %globaltimer over a ~2 ms spin"))
    return out


# ---- CUDA sources ------------------------------------------------------------------------------------------

def _cu(name: str) -> str:
    return resources.files("simtc.hw.cuda").joinpath(name).read_text()


def _fill(text: str, values: dict[str, str]) -> str:
    for k, v in values.items():
        text = text.replace("{{" + k + "}}", v)
    left = re.search(r"\{\{\w+\}\}", text)
    if left:
        raise SimtcError(f"unfilled placeholder {left.group(0)}",
                         rule="calibration kernel templates are filled completely")
    return text


def _alu_source(name: str, what: str, ops: Sequence[AluOp], chains: int, depth: int) -> str:
    lines = []
    for d in range(depth):
        for c in range(chains):
            if len(ops) == 1:
                body = ops[0].bodies[d % len(ops[0].bodies)]
                lines.append("        " + body.replace("S0", f"x[{c}]").replace("S1", f"y[{c}]"))
            else:
                for op, var in zip(ops, ("x", "y"), strict=True):
                    lines.append("        " + op.bodies[d % len(op.bodies)].replace("S0", f"{var}[{c}]"))
    return _fill(_cu("calibrate_alu.cu"), {
        "NAME": name, "WHAT": what, "CHAINS": str(chains), "STEPS": str(depth * chains), "A": "0x3F800001u",
        "B": "0x3C003C00u", "X0": "0x3F800000u", "Y0": "0x40000000u", "BODY": "\n".join(lines), "FOLD": "x[c] ^ y[c]"})


def _smem_source(name: str, what: str, op: str, bits: int, ways: int, depth: int) -> str:
    lines = []
    words = bits // 32
    for j in range(depth):
        off = (j % 16) * 2048
        regs = ", ".join(f"%{i}" for i in range(words))
        vec = {1: "u32", 2: "v2.u32", 4: "v4.u32"}[words]
        if op == "LDS":
            outs = ", ".join(f'"=r"(w{i})' for i in range(words))
            dst = regs if words == 1 else "{" + regs + "}"
            fold = " ^ ".join(f"w{i}" for i in range(words))
            lines.append(f'        {{ u32 {", ".join(f"w{i}" for i in range(words))}; asm volatile("ld.volatile.shared.'
                         f'{vec} {dst}, [%{words}+{off}];" : {outs} : "r"(base)); acc[{j % 8}] ^= {fold}; }}')
        else:
            src = ", ".join(f"%{i + 1}" for i in range(words))
            src = src if words == 1 else "{" + src + "}"
            ins = ", ".join(f'"r"(v{i})' for i in range(words))
            lines.append(f'        asm volatile("st.volatile.shared.{vec} [%0+{off}], {src};" :: "r"(base), {ins} '
                         f': "memory");')
    return _fill(_cu("calibrate_smem.cu"), {"NAME": name, "WHAT": what, "LANE_STRIDE": str(bits // 8 * ways),
                                            "FILL": "seed + i", "BODY": "\n".join(lines)})


def _chase_source(name: str, depth: int) -> str:
    body = "\n".join('        asm volatile("ld.volatile.shared.u32 %0, [%0];" : "+r"(p));' for _ in range(depth))
    return _fill(_cu("calibrate_smem.cu"), {"NAME": name, "WHAT": "pointer chase: p = *(u32*)p, lane l in bank l",
                                            "LANE_STRIDE": "4", "FILL": "buf + ((i + 32u) & 8191u) * 4u", "BODY": body})


def _ldg_chase_source(name: str, key: str, ptx: str, steps: int) -> str:
    body = "\n".join(f'        asm volatile("{ptx} %0, [%0];" : "+l"(p) :: "memory");' for _ in range(steps))
    return _fill(_cu("calibrate_latency_chase.cu"), {"NAME": name, "WHAT": f"{key}: pointer chase with {ptx}",
                                                     "LD": ptx, "STEPS": str(steps), "BODY": body})


def _wgmma_source(name: str, depth: int) -> str:
    lds = []
    for j in range(16):
        lds.append(f'            {{ u32 w0, w1, w2, w3; asm volatile("ld.volatile.shared.v4.u32 {{%0, %1, %2, %3}}, '
                   f'[%4+{j * 2048}];" : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "r"(p)); '
                   'acc ^= w0 ^ w1 ^ w2 ^ w3; }')
    return _fill(_cu("calibrate_wgmma.cu"), {
        "NAME": name, "DEPTH": str(depth), "ACC_LIST": ", ".join(f"%{i}" for i in range(128)),
        "ACC_BIND": ", ".join(f'"+f"(ACC[{i}])' for i in range(128)), "LDS_BODY": "\n".join(lds)})


def _sync_loop_source(name: str, key: str, depth: int) -> str:
    attr, step, _, _ = _SYNC_LOOPS[key]
    body = "\n".join("        " + step.replace("+OFF", f"+{(j % 64) * 16}") for j in range(depth))
    return _fill(_cu("calibrate_sync_loop.cu"), {"NAME": name, "WHAT": key, "ATTR": attr, "STEPS": str(depth),
                                                 "BODY": body})


def module_source(module: str) -> str:
    """The CUDA source of a module (one of :data:`MODULES`): the prelude, then its kernels."""
    parts = [_cu("calibrate_common.cu")]
    if module == "alu":
        for key, op in ALU_OPS.items():
            for d in op.depths("tp"):
                parts.append(_alu_source(_alu_kernel(key, "tp", d), f"{key} throughput", [op], TP_CHAINS // op.state,
                                         d))
            for d in op.depths("lat"):
                parts.append(_alu_source(_alu_kernel(key, "lat", d), f"{key} latency", [op], 1, d))
    elif module == "pairs":
        for a, b in PAIRS:
            for d in TP_DEPTHS:
                parts.append(_alu_source(_alu_kernel(f"{a}_{b}", "pair", d), f"{_pair_key(a, b)} interleaved",
                                         [ALU_OPS[a], ALU_OPS[b]], PAIR_CHAINS, d))
    elif module == "smem":
        for op in ("LDS", "STS"):
            for bits in (32, 64, 128):
                for ways in (1, 2, 4):
                    name = _smem_name(op, bits, ways)
                    for d in SMEM_DEPTHS:
                        parts.append(_smem_source(f"simtc_cal_{_slug(name)}_d{d}", name, op, bits, ways, d))
        for d in CHASE_DEPTHS:
            parts.append(_chase_source(f"simtc_cal_lds_chase_d{d}", d))
    elif module == "wgmma":
        for d in WGMMA_DEPTHS:
            parts.append(_wgmma_source(f"simtc_cal_wgmma_lds_d{d}", d))
    elif module == "sync_loop":
        for key in _SYNC_LOOPS:
            for d in SYNC_DEPTHS:
                parts.append(_sync_loop_source(f"simtc_cal_{key}_d{d}", key, d))
    elif module == "latency":
        parts.append(_cu("calibrate_latency.cu"))
        for key, (ptx, _, tag) in LDG_CHASE.items():
            for d in LDG_CHASE_STEPS:
                parts.append(_ldg_chase_source(_ldg_chase_kernel(tag, d), key, ptx, d))
    elif module in ("memory", "sync", "launch"):
        parts.append(_cu(f"calibrate_{module}.cu"))
    else:
        raise SimtcError(f"no calibration module {module!r}", rule=f"calibration modules: {', '.join(MODULES)}")
    return "\n".join(parts)


def _cubin(module: str) -> bytes:
    from simtc.hw.compile import compile_cuda

    return compile_cuda(module_source(module), arch=ARCH, name=f"calibrate_{_slug(module)}.cu")


# ---- SASS checks --------------------------------------------------------------------------------------------

def sass_by_kernel(sass: str) -> dict[str, collections.Counter]:
    """Full-mnemonic histograms of each kernel of a disassembled cubin (``nvdisasm -c``), by function name."""
    from simtc.hw.compile import sass_histogram

    blocks: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        m = re.match(r"^\s*\.text\.([A-Za-z_]\w*):", line)
        if m:
            current = m.group(1)
            blocks[current] = []
        elif current is not None:
            blocks[current].append(line)
    return {k: sass_histogram("\n".join(v), full=True) for k, v in blocks.items()}


def _group_count(hist: collections.Counter, group: str) -> int:
    return sum(n for m, n in hist.items() if any(fnmatch.fnmatchcase(m, p) for p in group.split("|")))


def _in_group(mnemonic: str, groups: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(mnemonic, p) for g in groups for p in g.split("|"))


@frozen
class SassCheck:
    """The offline SASS check of one benchmark."""

    bench: Bench
    ok: bool
    problems: tuple[str, ...]
    histogram: dict = field(factory=dict)
    """Full SASS mnemonics of the first kernel."""
    per_step: dict = field(factory=dict)
    """Measured SASS per step of the declared and glue mnemonics (count difference between the last and first
    kernel / step difference), non-zero entries."""
    other_delta: dict = field(factory=dict)
    """Count differences (last - first kernel) of every other mnemonic but NOP, non-zero entries."""

    def as_dict(self) -> dict:
        b = self.bench
        return {"section": b.section, "kernels": [v.kernel for v in b.variants], "steps": [v.steps for v in b.variants],
                "ok": self.ok, "problems": list(self.problems), "expected_per_step": dict(b.per_step),
                "per_step": self.per_step, "other_delta": self.other_delta,
                "counts": {g: [lo, hi] for g, lo, hi in b.counts},
                "histogram": dict(sorted(self.histogram.items()))}


def check_bench(bench: Bench, hists: dict[str, collections.Counter]) -> SassCheck:
    """Check one benchmark's kernels against what it declares (see the module docstring)."""
    problems = []
    for v in bench.variants:
        h = hists.get(v.kernel)
        if h is None:
            problems.append(f"{v.kernel}: not in the cubin")
            continue
        for group, per in bench.per_step:
            n, want = _group_count(h, group), per * v.steps
            if not want <= n <= want + bench.slack:
                problems.append(f"{v.kernel}: {n} x {group}, expected {want}..{want + bench.slack}")
        for group, lo, hi in bench.counts:
            n = _group_count(h, group)
            if not lo <= n <= hi:
                problems.append(f"{v.kernel}: {n} x {group}, expected {lo}..{hi}")
        for spill in ("LDL*", "STL*"):
            if _group_count(h, spill):
                problems.append(f"{v.kernel}: register spills ({spill.rstrip('*')})")
    per_step: dict = {}
    other_delta: dict = {}
    first, last = bench.variants[0], bench.variants[-1]
    if not problems and last.steps > first.steps:
        h0, h1 = hists[first.kernel], hists[last.kernel]
        ds = last.steps - first.steps
        delta = {m: h1.get(m, 0) - h0.get(m, 0) for m in set(h0) | set(h1)}
        declared = [g for g, _ in bench.per_step]
        counted = declared + [g for g, _ in bench.glue]
        per_step = {m: round(d / ds, 4) for m, d in sorted(delta.items()) if d and _in_group(m, counted)}
        for group, per in bench.per_step:
            d = sum(n for m, n in delta.items() if _in_group(m, [group]))
            if d != per * ds:
                problems.append(f"{group}: {d / ds:g} per step between {first.kernel} and {last.kernel}, "
                                f"expected {per}")
        other = {}
        for m, d in delta.items():
            if _in_group(m, declared):
                continue
            rate = next((r for g, r in bench.glue if _in_group(m, [g])), None)
            if rate is not None:
                if d > rate * ds:
                    problems.append(f"{m}: {d / ds:g} per step, at most {rate:g} allowed")
            elif m != "NOP":  # NOPs pad the code after EXIT
                other[m] = d
        other_delta = {m: d for m, d in sorted(other.items()) if d}
        net = sum(other.values())
        if abs(net) > OTHER_SLACK:
            grew = ", ".join(f"{m} {d:+d}" for m, d in sorted(other.items()) if d)
            problems.append(f"other SASS changes by {net:+d} between {first.kernel} and {last.kernel} ({grew}): "
                            f"it scales with the steps, and only the measured SASS may")
    return SassCheck(bench, not problems, tuple(problems), dict(hists.get(first.kernel, {})), per_step, other_delta)


def sass_checks(sections: Iterable[str] = SECTIONS,
                progress: Callable[[str], None] | None = None) -> dict[str, SassCheck]:
    """Compile every benchmark of ``sections`` for sm_90a and check its SASS (no GPU). Keyed by benchmark name.

    A module that does not compile fails each of its benchmarks with the compiler's first message; a missing
    ``nvdisasm`` raises :class:`~simtc.errors.HardwareUnavailable`.
    """
    from simtc.hw.compile import CompileError

    wanted = set(_check_sections(sections))
    by_module: dict[str, list[Bench]] = collections.defaultdict(list)
    for b in benches():
        if b.section in wanted or b.part in wanted:
            by_module[b.module].append(b)
    out: dict[str, SassCheck] = {}
    for module, group in by_module.items():
        if progress:
            progress(module)
        try:
            hists = _kernel_histograms(_cubin(module))
        except CompileError as e:
            first = next((ln for ln in e.log.splitlines() if "error" in ln), e.log[:200])
            for b in group:
                out[b.name] = SassCheck(b, False, (f"module {module} does not compile: {first.strip()}",))
            continue
        for b in group:
            out[b.name] = check_bench(b, hists)
    return out


def _kernel_histograms(cubin: bytes) -> dict[str, collections.Counter]:
    """:func:`sass_by_kernel` of a cubin, cached in simtc's build cache by the cubin's SHA-256."""
    from simtc.hw.compile import cache_dir, disassemble

    path = cache_dir() / f"{hashlib.sha256(cubin).hexdigest()[:24]}.sass-histograms.json"
    if path.exists():
        try:
            return {k: collections.Counter(v) for k, v in json.loads(path.read_text()).items()}
        except (OSError, ValueError):  # a damaged cache entry is rebuilt
            pass
    hists = sass_by_kernel(disassemble(cubin))
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({k: dict(v) for k, v in hists.items()}))
    tmp.replace(path)
    return hists


def _check_sections(sections: Iterable[str]) -> list[str]:
    """The sections and parts asked for, in run order (a part at its section's place; a part whose whole
    section is asked for too is dropped: the section runs it)."""
    sections = list(sections)
    bad = [s for s in sections if s not in SELECTABLE]
    if bad or not sections:
        raise SimtcError(f"unknown section(s) {', '.join(map(repr, bad)) or '(none given)'}; "
                         f"sections are {', '.join(SELECTABLE)}", rule="calibration sections")
    out = []
    for s in SECTIONS:
        if s in sections:
            out.append(s)
        else:
            out += [part for part, sec in PARTS.items() if sec == s and part in sections]
    return out


# ---- fits and statistics ------------------------------------------------------------------------------------

def fit_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares line y = intercept + slope x; returns (slope, intercept).

    >>> fit_line([64, 128, 192, 256], [100 + 4 * v for v in (64, 128, 192, 256)])
    (4.0, 100.0)
    """
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    if len(xs) != len(ys) or len(set(xs)) < 2 or not all(map(math.isfinite, xs + ys)):
        raise ShapeError(f"a line fit needs at least two distinct x with one finite y each (x={xs}, y={ys})",
                         rule="cycles = intercept + slope x steps, over several step counts")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((v - mx) ** 2 for v in xs)
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True)) / sxx
    return round(slope, 6), round(my - slope * mx, 6)


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    if not s:
        raise ShapeError("median of nothing", rule="a statistic needs samples")
    m = len(s) // 2
    return float(s[m]) if len(s) % 2 else (s[m - 1] + s[m]) / 2.0


def _num(v) -> float | None:
    return None if v is None or not math.isfinite(float(v)) else round(float(v), 6)


# ---- the GPU side -------------------------------------------------------------------------------------------

@frozen
class Params:
    """How much a run measures (full or ``--quick``)."""

    quick: bool
    warm: int
    samples: int
    tp_iters: int
    lat_iters: int
    smem_iters: int
    sync_iters: int
    rounds: tuple[int, ...]
    wake_samples: int
    mem_ctas: tuple[int, ...]
    mem_inflight: tuple[int, ...]
    mem_blocks: int
    mem_warm: int
    mem_launches: int
    chase_iters: int
    """LDG chases: loop iterations of every kernel (depths = unrolled steps x this)."""
    bulk_counts: tuple[int, ...]
    """Bulk chases: dependent copies per launch, one fit point each."""
    launches: int
    launch_repeats: int
    budget_s: float
    """Wall-clock seconds after which the remaining benchmarks are skipped (the run always ends in time)."""

    @classmethod
    def make(cls, quick: bool) -> Params:
        if quick:
            return cls(quick=True, warm=1, samples=3, tp_iters=16, lat_iters=8, smem_iters=16, sync_iters=16,
                       rounds=(64, 256), wake_samples=64, mem_ctas=(1, 132), mem_inflight=(1, 4), mem_blocks=48,
                       mem_warm=4, mem_launches=1, chase_iters=16, bulk_counts=(64, 128, 192, 256), launches=100,
                       launch_repeats=3, budget_s=150.0)
        return cls(quick=False, warm=2, samples=9, tp_iters=32, lat_iters=16, smem_iters=32, sync_iters=32,
                   rounds=(64, 128, 256, 512), wake_samples=256, mem_ctas=(1, 8, 33, 66, 132),
                   mem_inflight=(1, 2, 4, 8), mem_blocks=256, mem_warm=8, mem_launches=3, chase_iters=32,
                   bulk_counts=(128, 256, 384, 512), launches=200, launch_repeats=5, budget_s=330.0)


_LAT_PREPARE = {
    "hbm": f"filled with the cycle, read once whole (TLB entries for as many of its 2 MiB pages as the TLBs "
           f"hold), then a {LAT_FLUSH >> 20} MiB region after it read (none of the pool left in L2); launches "
           f"continue the cycle, so no line is read twice",
    "l2": "filled with the cycle and read once whole (all of it in L2)",
    "l1": "filled with the cycle; every launch first walks the whole cycle untimed (all of it in L1)",
}


def _lat_fit(depths: Sequence[int], cycles: Sequence[float]) -> dict:
    """A latency chase's fit: cycles = intercept + slope x dependent accesses (slope: cycles per access)."""
    slope, intercept = fit_line(depths, cycles)
    if not slope > 0:
        raise _Skip("error", f"the cycles do not grow with the chase depth (slope {slope}): {list(cycles)}")
    resid = max(abs(c - (intercept + slope * d)) for d, c in zip(depths, cycles, strict=True))
    return {"depths": list(depths), "cycles": list(cycles), "slope": slope, "intercept": intercept,
            "residual_max": _num(resid)}


class _Skip(Exception):
    """A measurement that is not taken (time budget, failed SASS check)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@contextlib.contextmanager
def _outcome(rec: dict):
    """Run one measurement: a :class:`_Skip` or any other exception becomes ``rec``'s status and reason (the run goes
    on with the next measurement)."""
    try:
        yield
    except _Skip as s:
        rec.update(status=s.status, reason=s.reason)
    except Exception as e:
        rec.update(status="error", reason=f"{type(e).__name__}: {e}")


class _Runner:
    """Loads the modules and runs the benchmarks (cupy imported here)."""

    def __init__(self, params: Params, checks: dict[str, SassCheck], progress: Callable[[str], None]):
        import cupy
        import numpy

        self.cp, self.np = cupy, numpy
        self.p = params
        self.checks = checks
        self.progress = progress
        self.modules: dict[str, object] = {}
        self.t_start = time.monotonic()
        self.clock_probes: list[dict] = []
        props = cupy.cuda.runtime.getDeviceProperties(0)
        self.sms = int(props["multiProcessorCount"])
        self.max_smem = int(props.get("sharedMemPerBlockOptin", 232448))
        self.sink = cupy.zeros(1 << 20, dtype=cupy.uint32)

    # -- plumbing
    def fn(self, module: str, kernel: str):
        if module not in self.modules:
            from simtc.hw.compile import cache_dir

            if os.environ.get("SIMTC_COMPILER", "auto") == "cupy":
                mod = self.cp.RawModule(code=module_source(module), options=("-std=c++17", f"-arch={ARCH}"),
                                        backend="nvrtc")
            else:
                cubin = _cubin(module)
                path = cache_dir() / f"{hashlib.sha256(cubin).hexdigest()[:24]}.load.cubin"
                if not path.exists():
                    path.write_bytes(cubin)
                mod = self.cp.RawModule(path=str(path))
            self.modules[module] = mod
        return self.modules[module].get_function(kernel)

    def gate(self, bench_name: str) -> None:
        """Raise _Skip when the benchmark's SASS check failed or the time budget is spent."""
        c = self.checks.get(bench_name)
        if c is None or not c.ok:
            why = "; ".join(c.problems[:3]) if c is not None else "not checked"
            raise _Skip("sass-failed", f"SASS check failed: {why}")
        if time.monotonic() - self.t_start > self.p.budget_s:
            raise _Skip("skipped", f"time budget of {self.p.budget_s:.0f} s spent")

    def clock(self, section: str, when: str) -> None:
        out = self.cp.zeros(4, dtype=self.cp.uint64)
        try:
            self.fn("launch", "simtc_cal_clock_probe")((1,), (32,), (self.np.uint64(2_000_000), out))
            g0, c0, g1, c1 = (int(v) for v in out.get())
            mhz = _num((c1 - c0) / (g1 - g0) * 1000.0) if g1 > g0 else None
        except Exception as e:  # a broken context must not stop the run from reporting
            mhz = None
            self.progress(f"clock probe failed: {type(e).__name__}: {e}")
        self.clock_probes.append({"section": section, "when": when, "mhz": mhz})

    # -- step loops
    def step_loop(self, bench: Bench, *, iters: int, shapes: Sequence[tuple[int, int]], per_sp: bool = True,
                  extra: Callable[[dict, int], None] | None = None) -> dict:
        """Run every kernel of a step-loop benchmark for each (ctas, threads) shape; fit cycles over steps."""
        cp, np = self.cp, self.np
        steps = [v.steps for v in bench.variants]
        rec = {"status": "ok", "reason": None, "steps": steps, "iters": iters, "warm": self.p.warm,
               "samples": self.p.samples, "runs": []}
        with _outcome(rec):
            self.gate(bench.name)
            launches = self.p.warm + self.p.samples
            for ctas, threads in shapes:
                warps = threads // 32
                cycles = []
                for v in bench.variants:
                    fn = self.fn(bench.module, v.kernel)
                    times = cp.zeros((launches, 2 * warps + 1), dtype=cp.uint64)
                    for i in range(launches):
                        fn((ctas,), (threads,), (np.uint32(0), np.uint32(iters), times[i], self.sink))
                    t = times.get().astype(np.int64)[self.p.warm:]
                    if bench.module == "sync_loop" and ctas > 1 and not (t[:, -1] == ctas).all():
                        raise _Skip("error", f"the launch did not form a cluster of {ctas} CTAs "
                                             f"(%cluster_nctarank = {int(t[0, -1])})")
                    spans = t[:, 1:-1:2].max(axis=1) - t[:, 0:-1:2].min(axis=1)
                    cycles.append(float(np.median(spans)))
                slope, intercept = fit_line([s * iters for s in steps], cycles)
                k = threads / 128 if per_sp and threads >= 128 else None
                run = {"threads": threads, "ctas": ctas, "warps_per_sp": k, "cycles": cycles, "slope": slope,
                       "intercept": intercept, "cycles_per_step": slope,
                       "cycles_per_step_per_sp": _num(slope / k) if k else None}
                if extra:
                    extra(run, threads)
                rec["runs"].append(run)
            self.progress(bench.name)
        return rec

    def count_fit(self, bench: Bench, kernel_args: Callable[[int, object, object], tuple], *, grid: int,
                  threads: int, out_index: int = 0) -> dict:
        """Kernels timed over a runtime count of round trips: fit cycles over the counts."""
        cp, np = self.cp, self.np
        rec = {"status": "ok", "reason": None, "counts": list(self.p.rounds), "cycles": [], "slope": None,
               "intercept": None}
        with _outcome(rec):
            self.gate(bench.name)
            fn = self.fn(bench.module, bench.variants[0].kernel)
            flag = cp.zeros(1, dtype=cp.uint32)
            for n in self.p.rounds:
                outs = cp.zeros((self.p.warm + self.p.samples, 2), dtype=cp.uint64)
                for i in range(self.p.warm + self.p.samples):
                    fn((grid,), (threads,), kernel_args(n, outs[i], flag))
                rec["cycles"].append(float(np.median(outs.get().astype(np.int64)[self.p.warm:, out_index])))
            f = int(flag.get()[0])
            if f & 2:
                raise _Skip("error", "the launch did not form a cluster of two CTAs")
            if f:
                raise _Skip("timeout", "an mbarrier wait timed out")
            rec["slope"], rec["intercept"] = fit_line(rec["counts"], rec["cycles"])
            self.progress(bench.name)
        return rec

    # -- sections
    def cuda_core(self) -> dict:
        out = {}
        shapes = [(1, 128 * k) for k in WARPS_PER_SP]
        by_name = {b.name: b for b in benches()}
        for key, op in ALU_OPS.items():
            out[key] = {"ptx": op.ptx, "sass": dict(op.sass), "unit": op.unit,
                        "throughput": self.step_loop(by_name[f"cuda_core/{key}/throughput"],
                                                     iters=self.p.tp_iters * op.shrink, shapes=shapes),
                        "latency": self.step_loop(by_name[f"cuda_core/{key}/latency"],
                                                  iters=self.p.lat_iters * op.shrink, shapes=shapes)}
        return out

    def cuda_core_pairs(self) -> dict:
        out = {}
        shapes = [(1, 128 * k) for k in WARPS_PER_SP]
        by_name = {b.name: b for b in benches()}
        for a, b in PAIRS:
            key = _pair_key(a, b)
            bench = by_name[f"cuda_core_pairs/{key}"]
            out[key] = {"a": a, "b": b, "sass": dict(bench.per_step),
                        "throughput": self.step_loop(bench, iters=self.p.tp_iters, shapes=shapes)}
        return out

    def shared_memory(self) -> dict:
        out = {}
        shapes = [(1, 128 * k) for k in WARPS_PER_SP]
        by_name = {b.name: b for b in benches()}
        for op in ("LDS", "STS"):
            for bits in (32, 64, 128):
                for ways in (1, 2, 4):
                    name = _smem_name(op, bits, ways)

                    def bw(run, threads, _bits=bits):
                        run["bytes_per_cycle"] = _num(threads * _bits / 8 / run["slope"]) if run["slope"] > 0 else None

                    rec = self.step_loop(by_name[f"shared_memory/{name}"], iters=self.p.smem_iters, shapes=shapes,
                                         extra=bw)
                    out[name] = {"op": op, "bits": bits, "ways": ways, **rec}
        out["LDS.32/latency"] = self.step_loop(by_name["shared_memory/LDS.32/latency"], iters=self.p.lat_iters,
                                               shapes=[(1, 32)], per_sp=False)
        return out

    def wgmma_lds(self) -> dict:
        """A wgmma SS chain alone, LDS.128 streams alone, and both at once (run after every other section)."""
        cp, np = self.cp, self.np
        bench = next(b for b in benches() if b.name == "shared_memory/wgmma+LDS")
        # LDS alone: about as long as the wgmma chains; together: until the wgmma warpgroup raises its flag (the cap,
        # 16 rounds per wgmma, is only a bound: a round of 8 warps x 16 LDS.128 takes far less than 16 wgmmas)
        wg_iters, lds_iters, lds_warps = self.p.tp_iters, 8 * self.p.tp_iters, 8
        rec: dict = {"status": "ok", "reason": None, "n": 256, "bytes_per_wgmma": WGMMA_BYTES, "lds_warps": lds_warps,
                     "wg_iters": wg_iters, "depths": list(WGMMA_DEPTHS), "warm": self.p.warm, "samples": self.p.samples}
        with _outcome(rec):
            self.gate(bench.name)
            from simtc.hw.timing import timing_image

            image, a_desc, b_desc = timing_image(256)
            img = cp.asarray(image.view(np.uint32))
            smem = 1024 + 16384 + 32768 + 128
            wg_cycles: dict = {1: [], 3: []}
            lds_bpc: dict = {2: [], 3: []}
            for v in bench.variants:
                fn = self.fn(bench.module, v.kernel)
                fn.max_dynamic_shared_size_bytes = smem
                for mode in (1, 2, 3):
                    out = cp.zeros((self.p.warm + self.p.samples, 2 + 3 * lds_warps), dtype=cp.uint64)
                    for i in range(self.p.warm + self.p.samples):
                        fn((1,), (384,), (img, np.uint32(image.size // 16), np.uint64(a_desc), np.uint64(b_desc),
                                          np.uint32(mode), np.uint32(wg_iters),
                                          np.uint32(lds_iters if mode == 2 else 16 * wg_iters * v.steps), out[i],
                                          self.sink),
                           shared_mem=smem)
                    o = out.get().astype(np.int64)[self.p.warm:]
                    if mode & 1:
                        wg_cycles[mode].append(float(np.median(o[:, 1] - o[:, 0])))
                    if mode & 2:
                        w = o[:, 2:].reshape(-1, lds_warps, 3)
                        bpc = w[:, :, 2].sum(axis=1) * 16 * 512 / (w[:, :, 1].max(axis=1) - w[:, :, 0].min(axis=1))
                        lds_bpc[mode].append(float(np.median(bpc)))
            x = [wg_iters * d for d in WGMMA_DEPTHS]
            alone, together = fit_line(x, wg_cycles[1])[0], fit_line(x, wg_cycles[3])[0]
            lds_alone, lds_together = _median(lds_bpc[2]), _median(lds_bpc[3])
            rec.update(
                wgmma_alone={"cycles": wg_cycles[1], "cycles_per_wgmma": alone,
                             "smem_bytes_per_cycle": _num(WGMMA_BYTES / alone)},
                lds_alone={"bytes_per_cycle": _num(lds_alone)},
                together={"cycles": wg_cycles[3], "cycles_per_wgmma": together,
                          "wgmma_smem_bytes_per_cycle": _num(WGMMA_BYTES / together),
                          "lds_bytes_per_cycle": _num(lds_together),
                          "sum_bytes_per_cycle": _num(WGMMA_BYTES / together + lds_together)})
            bad = [f"{part}.{k}" for part in ("wgmma_alone", "lds_alone", "together") for k, v in rec[part].items()
                   if v is None]
            if bad:
                raise _Skip("error", f"non-finite {', '.join(bad)}")
            self.progress(bench.name)
        return rec

    def sync(self) -> dict:
        np = self.np
        by_name = {b.name: b for b in benches()}
        out: dict = {}
        t = np.uint64(TIMEOUT_NS)
        rec = self.count_fit(by_name["sync/mbarrier_pingpong"],
                             lambda n, o, f: (np.uint32(n), t, o, f), grid=1, threads=64)
        rec["round_trip_cycles"] = rec["slope"]
        rec["one_way_cycles"] = _num(rec["slope"] / 2) if rec["slope"] is not None else None
        out["mbarrier_pingpong"] = rec
        rec = self.count_fit(by_name["sync/st_async_pingpong"],
                             lambda n, o, f: (np.uint32(n), t, o, f), grid=2, threads=32)
        rec["round_trip_cycles"] = rec["slope"]
        out["st_async_pingpong"] = rec
        out["tma_wake"] = self._tma_wake(by_name["sync/tma_wake"])
        out["bar_sync"] = self.step_loop(by_name["sync/bar_sync"], iters=self.p.sync_iters,
                                         shapes=[(1, 128), (1, 256), (1, 384)])
        for key in ("fence_proxy_async", "sts_fence_proxy_async"):
            out[key] = self.step_loop(by_name[f"sync/{key}"], iters=self.p.sync_iters, shapes=[(1, 32), (1, 128)])
        for key in ("barrier_cluster", "barrier_cluster_relaxed"):
            out[key] = self.step_loop(by_name[f"sync/{key}"], iters=self.p.sync_iters, shapes=[(2, 128)])
        return out

    def _tma_wake(self, bench: Bench) -> dict:
        cp, np = self.cp, self.np
        warm = 16
        rec: dict = {"status": "ok", "reason": None, "samples": self.p.wake_samples, "warm": warm}
        with _outcome(rec):
            self.gate(bench.name)
            n = warm + self.p.wake_samples
            src = cp.arange(64, dtype=cp.uint32)
            out = cp.zeros(5 * n, dtype=cp.uint64)
            flag = cp.zeros(1, dtype=cp.uint32)
            self.fn(bench.module, bench.variants[0].kernel)((1,), (64,), (src, np.uint32(n), np.uint64(TIMEOUT_NS),
                                                                          out, flag))
            o = out.get().astype(np.int64).reshape(n, 5)[warm:]
            if int(flag.get()[0]):
                raise _Skip("timeout", "an mbarrier wait timed out")
            for key, d in (("issue_to_self_wake", o[:, 1] - o[:, 0]), ("issue_to_other_wake", o[:, 2] - o[:, 0]),
                           ("arrive_to_wake", o[:, 4] - o[:, 3])):
                rec[key] = {"median": _num(np.median(d)), "p10": _num(np.percentile(d, 10)),
                            "p90": _num(np.percentile(d, 90))}
            self.progress(bench.name)
        return rec

    def memory_latency(self) -> dict:
        """The memory section with only its latency part (``--only memory_latency``)."""
        return {"params": {}, "configs": [], "latency": self.latency()}

    def latency(self) -> dict:
        """Dependent-access chases by one thread: LDG over the HBM, L2 and L1 pools, bulk copies of each size
        over the HBM and L2 pools (see the module docstring)."""
        cp = self.cp
        p = self.p
        params = {"seed": LAT_SEED, "warm": p.warm, "samples": p.samples, "ldg_steps": list(LDG_CHASE_STEPS),
                  "ldg_iters": p.chase_iters, "bulk_counts": list(p.bulk_counts), "pools": dict(LAT_POOLS),
                  "strides": dict(LAT_STRIDE), "flush_bytes": LAT_FLUSH}
        by_name = {b.name: b for b in benches()}
        cursor = cp.zeros(1, dtype=cp.uint64)
        arrays: dict = {}
        why = None
        try:
            arrays["hbm"] = cp.empty(LAT_POOLS["hbm"] + LAT_FLUSH, dtype=cp.uint8)
        except Exception as e:  # out of memory: the L2 and L1 pools only
            why = f"cannot allocate the 4 GiB pool ({type(e).__name__}: {e})"
        arrays["l2"] = cp.empty(LAT_POOLS["l2"], dtype=cp.uint8)
        arrays["l1"] = cp.empty(LAT_POOLS["l1"], dtype=cp.uint8)
        plan = [("ldg", pool, 8) for pool in ("hbm", "l2", "l1")]
        plan += [("bulk", pool, n) for pool in ("hbm", "l2") for n in BULK_BYTES]
        chases: dict = {}
        prepared = None
        for method, pool, nbytes in plan:
            key = _lat_key(method, pool, nbytes)
            stride = LAT_STRIDE[method]
            bench = by_name["memory/latency/" + ("bulk" if method == "bulk" else "ldg" if pool == "l1" else "ldg.cg")]
            ptx, sass = (("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                          "UBLKCP.S.G + SYNCS.PHASECHK.TRANS64.TRYWAIT + LDS.64") if method == "bulk"
                         else LDG_CHASE[bench.name.rsplit("/", 1)[1]][:2])
            m = {"status": "ok", "reason": None, "method": method, "pool": pool, "pool_bytes": LAT_POOLS[pool],
                 "bytes": nbytes, "stride": stride, "elements": LAT_POOLS[pool] // stride, "ptx": ptx, "sass": sass,
                 "pages": "random", "pool_pages_2mib": max(1, LAT_POOLS[pool] >> 21),
                 "prepare": _LAT_PREPARE[pool], "warm": p.warm, "samples": p.samples}
            try:
                if pool == "hbm" and why:
                    raise _Skip("error", why)
                self.gate(bench.name)
                if prepared != (method, pool):  # every size of a pool continues the same cycle
                    self.gate("memory/latency/fill")
                    self.gate("memory/latency/touch")
                    prepared = None
                    self._lat_prepare(arrays[pool], pool, stride, cursor)
                    prepared = (method, pool)
                if method == "ldg":
                    m.update(self._ldg_chase(bench, cursor, warm=m["elements"] if pool == "l1" else 0))
                else:
                    m.update(self._bulk_chase(bench, cursor, nbytes))
                self.progress(f"memory/latency/{key}")
            except _Skip as e:
                m.update(status=e.status, reason=e.reason)
            except Exception as e:
                m.update(status="error", reason=f"{type(e).__name__}: {e}")
            chases[key] = m
        arrays.clear()
        cp.get_default_memory_pool().free_all_blocks()
        return {"params": params, "chases": chases}

    def _lat_prepare(self, pool, name: str, stride: int, cursor) -> None:
        """Write the cycle into the pool and point the cursor at its first element; then, for the HBM pool, read
        it once (TLB) and read the flush region after it (so none of it is in L2); for the L2 pool, read it once
        (so all of it is in L2)."""
        np = self.np
        size = LAT_POOLS[name]
        bits = (size // stride).bit_length() - 1
        fill = self.fn("latency", "simtc_cal_lat_fill")
        fill((min(self.sms * 8, max(1, (1 << bits) // 256)),), (256,),
             (pool, np.uint32(bits), np.uint32(stride), np.uint32(LAT_SEED), cursor))
        touch = self.fn("latency", "simtc_cal_lat_touch")
        if name in ("hbm", "l2"):
            touch((self.sms,), (256,), (pool, np.uint64(size // 16), self.sink))
        if name == "hbm":
            touch((self.sms,), (256,), (pool[size:], np.uint64(LAT_FLUSH // 16), self.sink))
        self.cp.cuda.runtime.deviceSynchronize()

    def _ldg_chase(self, bench: Bench, cursor, *, warm: int) -> dict:
        cp, np = self.cp, self.np
        p = self.p
        launches = p.warm + p.samples
        depths, cycles = [], []
        carveout = None
        for v in bench.variants:
            fn = self.fn(bench.module, v.kernel)
            if warm:  # the L1 pool: ask for the largest L1 (the kernel uses 8 bytes of shared memory)
                try:
                    fn.preferred_shared_memory_carveout = 0
                    carveout = "0 % shared memory (largest L1) requested"
                except Exception as e:  # a hint only: the driver picks the split when it is not taken
                    carveout = f"not set ({type(e).__name__}: {e})"
            times = cp.zeros((launches, 1), dtype=cp.uint64)
            for i in range(launches):
                fn((1,), (32,), (cursor, np.uint32(warm), np.uint32(p.chase_iters), times[i]))
            t = times.get().astype(np.int64)[p.warm:, 0]
            depths.append(v.steps * p.chase_iters)
            cycles.append(float(np.median(t)))
        out = {"steps": [v.steps for v in bench.variants], "iters": p.chase_iters, "warm_loads": warm,
               **_lat_fit(depths, cycles)}
        if carveout is not None:
            out["l1_carveout"] = carveout
        return out

    def _bulk_chase(self, bench: Bench, cursor, nbytes: int) -> dict:
        cp, np = self.cp, self.np
        p = self.p
        launches = p.warm + p.samples
        fn = self.fn(bench.module, bench.variants[0].kernel)
        flag = cp.zeros(1, dtype=cp.uint32)
        cycles = []
        for n in p.bulk_counts:
            times = cp.zeros((launches, 1), dtype=cp.uint64)
            for i in range(launches):
                fn((1,), (32,), (cursor, np.uint32(nbytes), np.uint32(n), np.uint64(TIMEOUT_NS), times[i], flag))
            cycles.append(float(np.median(times.get().astype(np.int64)[p.warm:, 0])))
        if int(flag.get()[0]):
            raise _Skip("timeout", "an mbarrier wait timed out")
        return _lat_fit(list(p.bulk_counts), cycles)

    def memory(self) -> dict:
        try:  # first, before the gathers' pool is allocated
            latency = self.latency()
        except Exception as e:  # recorded; the gathers still run
            latency = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
        cp, np = self.cp, self.np
        p = self.p
        seed = 20260101
        pools = {"hbm": 4 << 30, "l2": 8 << 20}
        rows = {"v32": {"useful": 656, "ldg": 704, "ldgsts": 656, "bulk": 656},
                "model1": {"useful": 584, "ldg": 608, "ldgsts": 584, "bulk": 592}}
        out = {"params": {"seed": seed, "blocks": p.mem_blocks, "warm": p.mem_warm, "launches": p.mem_launches,
                          "pools": pools, "rows": rows}, "configs": [], "latency": latency}
        pool, why = None, None
        try:
            pool = cp.empty(pools["hbm"], dtype=cp.uint8)
        except Exception as e:  # out of memory: gather from an 8 MiB pool only
            why = f"cannot allocate the 4 GiB pool ({type(e).__name__}: {e})"
            pool = cp.empty(pools["l2"], dtype=cp.uint8)
        touch_bench = next(b for b in benches() if b.name == "memory/touch")
        ctas_list = sorted({min(c, self.sms) for c in p.mem_ctas})
        for method in ("ldg", "ldgsts", "bulk"):
            for fmt in ("v32", "model1"):
                bench_name = f"memory/{method}/{fmt}"
                for pool_name in ("hbm", "l2"):
                    size = pools[pool_name]
                    n_tokens = size // 656 if fmt == "v32" else (size // 37440) * 64
                    for ctas in ctas_list:
                        for f in p.mem_inflight:
                            cfg = {"status": "ok", "reason": None, "method": method, "format": fmt,
                                   "row_bytes": rows[fmt]["useful"], "pool": pool_name, "ctas": ctas, "inflight": f,
                                   "threads": 128 * f}
                            with _outcome(cfg):
                                if pool_name == "hbm" and why:
                                    raise _Skip("error", why)
                                if method == "ldg" and f > 4:
                                    raise _Skip("skipped", "LDG keeps a block's 16-byte loads in registers: 8 "
                                                           "warpgroups x 128 threads x ~100 registers exceed the "
                                                           "65,536-register file")
                                self.gate(bench_name)
                                if pool_name == "l2":
                                    self.gate(touch_bench.name)
                                    self.fn("memory", "simtc_cal_touch")((self.sms,), (256,), (
                                        pool, np.uint64(size // 16), self.sink))
                                cfg.update(self._gather(method, fmt, pool, n_tokens, ctas, f, seed, rows[fmt]))
                            out["configs"].append(cfg)
                self.progress(bench_name)
        del pool
        cp.get_default_memory_pool().free_all_blocks()
        return out

    def _gather(self, method: str, fmt: str, pool, n_tokens: int, ctas: int, f: int, seed: int, rows: dict) -> dict:
        cp, np = self.cp, self.np
        p = self.p
        fn = self.fn("memory", _GATHER[(method, fmt)])
        block_bytes = 64 * (656 if fmt == "v32" else 592)
        nbuf = 0 if method == "ldg" else max(1, min(f, (self.max_smem - 128) // block_bytes))
        smem = 128 + nbuf * block_bytes
        if smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem
        nb = p.mem_blocks
        lat = cp.zeros(ctas * f * nb, dtype=cp.uint64)
        span = cp.zeros(ctas * f * 2, dtype=cp.uint64)
        clk = cp.zeros(4, dtype=cp.uint64)
        flag = cp.zeros(1, dtype=cp.uint32)
        args = (pool, np.uint32(n_tokens), np.uint32(nb), np.uint32(p.mem_warm), np.uint32(seed), np.uint32(nbuf),
                np.uint64(TIMEOUT_NS), lat, span, clk, flag, self.sink)
        fn((ctas,), (128 * f,), args, shared_mem=smem)  # warm-up launch
        lats, bpc, gbps, ms, mhz = [], [], [], [], []
        useful = rows["useful"] * 64
        for _ in range(p.mem_launches):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fn((ctas,), (128 * f,), args, shared_mem=smem)
            e1.record()
            e1.synchronize()
            t_ms = cp.cuda.get_elapsed_time(e0, e1)
            if int(flag.get()[0]):
                raise _Skip("timeout", "an mbarrier wait timed out")
            lats.append(lat.get().astype(np.int64))
            s = span.get().astype(np.int64).reshape(ctas, f, 2)
            cta_span = s[:, :, 1].max(axis=1) - s[:, :, 0].min(axis=1)
            bpc.append(float(np.median(f * nb * useful / np.maximum(cta_span, 1))))
            gbps.append(ctas * f * (nb + p.mem_warm) * useful / (t_ms * 1e6))
            ms.append(t_ms)
            g0, c0, g1, c1 = (int(v) for v in clk.get())
            if g1 > g0:
                mhz.append((c1 - c0) / (g1 - g0) * 1000.0)
        all_lat = np.concatenate(lats)
        out = {"latency_mean": _num(all_lat.mean()), "latency_median": _num(np.median(all_lat)),
                "latency_p10": _num(np.percentile(all_lat, 10)), "latency_p90": _num(np.percentile(all_lat, 90)),
                "bytes_per_cycle_per_sm": _num(_median(bpc)), "gbps": _num(_median(gbps)),
                "kernel_ms": _num(_median(ms)),
                "clock_mhz": _num(_median(mhz)) if mhz else None, "nbuf": nbuf, "bytes_moved_per_row": rows[method]}
        bad = [k for k, v in out.items() if v is None and k != "clock_mhz"]
        if bad:
            raise _Skip("error", f"non-finite {', '.join(bad)} (clock64 spans or event times of zero)")
        return out

    def launch(self) -> dict:
        cp = self.cp
        p = self.p
        out: dict = {}
        bench = next(b for b in benches() if b.name == "launch/empty")
        try:
            self.gate(bench.name)
        except _Skip as s:
            out = {k: {"status": s.status, "reason": s.reason} for k in ("empty_1cta", "empty_132cta", "group_of_3")}
            return {**out, "host_enqueue_us": None}
        ea, eb, ec = (self.fn("launch", f"simtc_cal_empty_{c}") for c in "abc")
        spin = self.fn("launch", "simtc_cal_spin")
        big = self.sms
        kinds = {"empty_1cta": [(ea, 1)], "empty_132cta": [(ea, big)], "group_of_3": [(ea, 1), (eb, big), (ec, big)]}
        host = []
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            for key, seq in kinds.items():
                rec = {"status": "ok", "reason": None, "launches": p.launches, "repeats": p.launch_repeats}
                with _outcome(rec):
                    if time.monotonic() - self.t_start > p.budget_s:
                        raise _Skip("skipped", f"time budget of {p.budget_s:.0f} s spent")
                    t = time.perf_counter()  # the host's own rate, measured without a spin in front
                    for _ in range(p.launches):
                        for k, g in seq:
                            k((g,), (128,), ())
                    stream.synchronize()
                    per_call = (time.perf_counter() - t) / (p.launches * len(seq))
                    host.append(per_call * 1e6)
                    spin_ns = int(max(3 * per_call * p.launches * len(seq), 1e-3) * 1e9)
                    us = []
                    for r in range(p.launch_repeats + 1):
                        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                        spin((1,), (32,), (self.np.uint64(spin_ns),))
                        e0.record(stream)
                        for _ in range(p.launches):
                            for k, g in seq:
                                k((g,), (128,), ())
                        e1.record(stream)
                        e1.synchronize()
                        if r:  # the first repeat is a warm-up
                            us.append(cp.cuda.get_elapsed_time(e0, e1) * 1000.0 / p.launches)
                    rec["us"] = _num(_median(us))
                    rec["us_all"] = [_num(v) for v in us]
                out[key] = rec
        out["host_enqueue_us"] = _num(_median(host)) if host else None
        self.progress("launch")
        return out


def _device() -> dict:
    import sys

    import numpy

    from simtc.hw.device import describe, probe

    info = probe()
    d: dict = {"name": info.name, "arch": info.arch, "sms": info.sms, "driver": None, "cuda_driver": None,
               "cuda_runtime": None, "cupy": None, "numpy": numpy.__version__, "python": sys.version.split()[0],
               "compiler": os.environ.get("SIMTC_COMPILER", "auto"), "max_smem_per_block": None,
               "describe": describe()}
    try:
        import cupy

        d["cupy"] = cupy.__version__
        v = cupy.cuda.runtime.driverGetVersion()
        d["cuda_driver"] = f"{v // 1000}.{v % 1000 // 10}"
        v = cupy.cuda.runtime.runtimeGetVersion()
        d["cuda_runtime"] = f"{v // 1000}.{v % 1000 // 10}"
        d["max_smem_per_block"] = int(cupy.cuda.runtime.getDeviceProperties(0).get("sharedMemPerBlockOptin", 0))
    except Exception:  # fields stay null
        pass
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        d["driver"] = v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # NVML is optional
        pass
    try:
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        d["compiler"] += f", NVRTC {major}.{minor}"
    except Exception:  # no cuda-bindings: nvcc builds
        pass
    d["platform"] = platform.platform()
    return d


def empty_recording(*, command: str = "", sections: Iterable[str] = SECTIONS, quick: bool = False) -> dict:
    """A recording with every key and no measurements (each section ``null``)."""
    return {"format": FORMAT, "version": VERSION, "arch": ARCH, "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime(_DATE), "quick": bool(quick),
            "sections": _check_sections(sections), "elapsed_s": 0.0, "device": {},
            "clock_mhz": {"median": None, "probes": []}, "sass": {}, **{s: None for s in SECTIONS}}


def run(sections: Iterable[str] = SECTIONS, *, quick: bool = False, command: str = "",
        checks: dict[str, SassCheck] | None = None, progress: Callable[[str], None] | None = None,
        on_section: Callable[[dict], None] | None = None) -> dict:
    """Measure ``sections`` on the sm_90a GPU here; returns the recording (see the module docstring).

    ``checks`` are the :func:`sass_checks` of those sections (computed when not given); a benchmark whose
    check failed is not run. ``on_section`` receives the recording after every section (to save partial
    results). Raises :class:`~simtc.errors.HardwareUnavailable` without cupy or an sm_90a device.
    """
    from simtc.hw.device import require

    sections = _check_sections(sections)
    require(ARCH)
    progress = progress or (lambda s: None)
    t0 = time.monotonic()
    checks = checks if checks is not None else sass_checks(sections)
    rec = empty_recording(command=command, sections=sections, quick=quick)
    rec["device"] = _device()
    rec["sass"] = {k: c.as_dict() for k, c in checks.items()}
    runner = _Runner(Params.make(quick), checks, progress)
    for section in sections:
        key = PARTS.get(section, section)  # a part alone fills its section's key
        runner.clock(section, "before")
        try:
            rec[key] = getattr(runner, section)()
        except Exception as e:  # one section's failure is recorded; the others still run
            rec[key] = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
        _keep_valid(rec, key)
        runner.clock(section, "after")
        mhz = [p["mhz"] for p in runner.clock_probes if p["mhz"] is not None]
        rec["clock_mhz"] = {"median": _num(_median(mhz)) if mhz else None, "probes": list(runner.clock_probes)}
        rec["elapsed_s"] = round(time.monotonic() - t0, 3)
        if on_section:
            on_section(rec)
    if isinstance(rec["shared_memory"], dict) and "status" not in rec["shared_memory"]:
        # last, so that a fault of the tensor-core kernel cannot touch the other sections' measurements
        runner.clock("shared_memory/wgmma+LDS", "before")
        rec["shared_memory"]["wgmma_lds"] = runner.wgmma_lds()
        _keep_valid(rec, "shared_memory")
        runner.clock("shared_memory/wgmma+LDS", "after")
        mhz = [p["mhz"] for p in runner.clock_probes if p["mhz"] is not None]
        rec["clock_mhz"] = {"median": _num(_median(mhz)) if mhz else None, "probes": list(runner.clock_probes)}
        rec["elapsed_s"] = round(time.monotonic() - t0, 3)
        if on_section:
            on_section(rec)
    return rec


def _keep_valid(rec: dict, section: str) -> None:
    """A section whose data breaks the format (a bug, not a measurement) moves to ``invalid_<section>`` and is
    replaced by an error, so that the recording stays loadable and nothing measured is lost."""
    try:
        validate(rec)
    except CalibrationFormatError as e:
        rec[f"invalid_{section}"] = rec[section]
        rec[section] = {"status": "error", "reason": f"the measurements do not fit the recording format: {e}"}


# ---- the recording: save, load, validate ----------------------------------------------------------------------

def save(recording: dict, path: str | os.PathLike) -> None:
    """Write a recording as JSON (validated first; the file is replaced whole; NaN/inf in unchecked ``invalid_*``
    data are written as null)."""
    validate(recording)
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(_finite(recording), indent=1, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(p)


def _finite(obj):
    """``obj`` with every non-finite float (possible only in unchecked ``invalid_*`` data) replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def load(path: str | os.PathLike) -> dict:
    """Read a recording written by :func:`save`; a file that is not one raises :class:`CalibrationFormatError`."""
    p = Path(path)
    rule = "calibration recordings as simtc.hw.calibrate.save writes them"
    if not p.is_file():
        raise CalibrationFormatError(f"{str(p)!r} {'does not exist' if not p.exists() else 'is not a file'}",
                                     rule=rule)
    try:
        data = json.loads(p.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
        raise CalibrationFormatError(f"{str(p)!r} is not JSON ({e})", rule=rule) from None
    validate(data)
    return data


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _bad(where: str, what: str):
    raise CalibrationFormatError(f"{where}: {what}", rule="calibration recordings as simtc.hw.calibrate.save "
                                                          "writes them (fields: simtc.hw.calibrate docstring)")


def _get(d: dict, key: str, types, where: str, *, nullable: bool = False):
    if not isinstance(d, dict):
        _bad(where, f"expected an object, got {type(d).__name__}")
    if key not in d:
        _bad(f"{where}.{key}" if where else key, "missing")
    v = d[key]
    if v is None and nullable:
        return v
    number = types == "number"
    ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)) if number else \
        isinstance(v, types) and not (isinstance(v, bool) and types in (int, float, (int, float)))
    if not ok:
        want = "a number" if number else getattr(types, "__name__", str(types))
        _bad(f"{where}.{key}" if where else key, f"expected {want}{' or null' if nullable else ''}, got {v!r:.60}")
    return v


_STATUSES = ("ok", "sass-failed", "error", "timeout", "skipped")


def _check_status(m: dict, where: str) -> bool:
    status = _get(m, "status", str, where)
    if status not in _STATUSES:
        _bad(f"{where}.status", f"{status!r} is not one of {', '.join(_STATUSES)}")
    if status != "ok":
        _get(m, "reason", str, where)
    return status == "ok"


def _check_step_loop(m, where: str) -> None:
    if not _check_status(m, where):
        return
    steps = _get(m, "steps", list, where)
    for i, run in enumerate(_get(m, "runs", list, where)):
        w = f"{where}.runs[{i}]"
        cycles = _get(run, "cycles", list, w)
        if len(cycles) != len(steps) or not all(isinstance(c, (int, float)) and not isinstance(c, bool)
                                                for c in cycles):
            _bad(f"{w}.cycles", f"expected {len(steps)} numbers (one per kernel), got {cycles!r:.60}")
        for k in ("threads", "ctas"):
            _get(run, k, int, w)
        for k in ("slope", "intercept", "cycles_per_step"):
            _get(run, k, "number", w)
        for k in ("warps_per_sp", "cycles_per_step_per_sp", "bytes_per_cycle"):
            if k in run:
                _get(run, k, "number", w, nullable=True)


def _lat_key(method: str, pool: str, nbytes: int) -> str:
    return f"ldg/{pool}" if method == "ldg" else f"bulk/{pool}/{nbytes}"


def _check_latency(lat, where: str) -> None:
    if not isinstance(lat, dict):
        _bad(where, f"expected an object, got {type(lat).__name__}")
    if "status" in lat and not _check_status(lat, where):  # the latency part failed as a whole
        return
    _get(lat, "params", dict, where)
    for key, m in _get(lat, "chases", dict, where).items():
        w = f"{where}.chases.{key}"
        method, pool = _get(m, "method", str, w), _get(m, "pool", str, w)
        if method not in ("ldg", "bulk"):
            _bad(f"{w}.method", f"{method!r:.40} is not one of ldg, bulk")
        if pool not in LAT_POOLS or (method == "bulk" and pool == "l1"):
            _bad(f"{w}.pool", f"{pool!r:.40} is not one of {', '.join(LAT_POOLS) if method == 'ldg' else 'hbm, l2'}")
        _get(m, "pool_bytes", int, w)
        nbytes = _get(m, "bytes", int, w)
        if key != _lat_key(method, pool, nbytes):
            _bad(w, f"the key does not name its method, pool and bytes ({_lat_key(method, pool, nbytes)!r})")
        if not _check_status(m, w):
            continue
        depths = _get(m, "depths", list, w)
        if len(depths) < 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in depths):
            _bad(f"{w}.depths", f"expected at least two positive integers, got {depths!r:.60}")
        cycles = _get(m, "cycles", list, w)
        if len(cycles) != len(depths) or not all(isinstance(c, (int, float)) and not isinstance(c, bool)
                                                 and math.isfinite(c) for c in cycles):
            _bad(f"{w}.cycles", f"expected {len(depths)} numbers (one per depth), got {cycles!r:.60}")
        for k in ("slope", "intercept"):
            _get(m, k, "number", w)


def validate(recording) -> None:
    """Raise :class:`CalibrationFormatError` naming the first field that breaks the format."""
    if not isinstance(recording, dict):
        _bad("the file", f"expected a JSON object, got {type(recording).__name__}")
    fmt = recording.get("format")
    if fmt != FORMAT:
        _bad("format", f"expected {FORMAT!r}, got {fmt!r:.60} (not a simtc calibration recording)")
    if recording.get("version") != VERSION:
        _bad("version", f"this simtc reads version {VERSION}, got {recording.get('version')!r:.60}")
    for key in ("command", "date", "arch"):
        _get(recording, key, str, "")
    _get(recording, "quick", bool, "")
    secs = _get(recording, "sections", list, "")
    if any(s not in SELECTABLE for s in secs):
        _bad("sections", f"unknown section in {secs!r:.80}")
    _get(recording, "elapsed_s", "number", "")
    _get(recording, "device", dict, "")
    clock = _get(recording, "clock_mhz", dict, "")
    _get(clock, "median", "number", "clock_mhz", nullable=True)
    _get(clock, "probes", list, "clock_mhz")
    for name, s in _get(recording, "sass", dict, "").items():
        _get(s, "ok", bool, f"sass.{name}")
        _get(s, "problems", list, f"sass.{name}")
    for section in SECTIONS:
        value = _get(recording, section, dict, "", nullable=True)
        if value is None:
            continue
        if "status" in value and not _check_status(value, section):
            continue
        if section == "cuda_core":
            for key, c in value.items():
                for mode in ("throughput", "latency"):
                    _check_step_loop(_get(c, mode, dict, f"cuda_core.{key}"), f"cuda_core.{key}.{mode}")
        elif section == "cuda_core_pairs":
            for key, c in value.items():
                _check_step_loop(_get(c, "throughput", dict, f"cuda_core_pairs.{key}"),
                                 f"cuda_core_pairs.{key}.throughput")
        elif section == "shared_memory":
            for key, c in value.items():
                if key != "wgmma_lds":
                    _check_step_loop(c, f"shared_memory.{key}")
                elif _check_status(c, "shared_memory.wgmma_lds"):
                    for part, k in (("wgmma_alone", "cycles_per_wgmma"), ("lds_alone", "bytes_per_cycle"),
                                    ("together", "cycles_per_wgmma"), ("together", "lds_bytes_per_cycle")):
                        _get(_get(c, part, dict, "shared_memory.wgmma_lds"), k, "number",
                             f"shared_memory.wgmma_lds.{part}")
        elif section == "memory":
            _get(value, "params", dict, "memory")
            for i, cfg in enumerate(_get(value, "configs", list, "memory")):
                w = f"memory.configs[{i}]"
                for k in ("method", "format", "pool"):
                    _get(cfg, k, str, w)
                for k in ("ctas", "inflight", "row_bytes"):
                    _get(cfg, k, int, w)
                if _check_status(cfg, w):
                    for k in ("latency_mean", "latency_median", "latency_p10", "latency_p90",
                              "bytes_per_cycle_per_sm", "gbps", "kernel_ms"):
                        _get(cfg, k, "number", w)
            if "latency" in value:  # optional: recordings made before it existed have none
                _check_latency(value["latency"], "memory.latency")
        elif section == "sync":
            for key, m in value.items():
                w = f"sync.{key}"
                if key in ("mbarrier_pingpong", "st_async_pingpong"):
                    if _check_status(m, w):
                        _get(m, "slope", "number", w)
                        _get(m, "round_trip_cycles", "number", w)
                elif key == "tma_wake":
                    if _check_status(m, w):
                        for k in ("issue_to_self_wake", "issue_to_other_wake", "arrive_to_wake"):
                            _get(_get(m, k, dict, w), "median", "number", f"{w}.{k}")
                else:
                    _check_step_loop(m, w)
        elif section == "launch":
            for key in ("empty_1cta", "empty_132cta", "group_of_3"):
                m = _get(value, key, dict, "launch")
                if _check_status(m, f"launch.{key}"):
                    _get(m, "us", "number", f"launch.{key}")
            _get(value, "host_enqueue_us", "number", "launch", nullable=True)


# ---- the summary ------------------------------------------------------------------------------------------

def _ok(m) -> bool:
    return isinstance(m, dict) and m.get("status") == "ok"


def _run_at(m, **match) -> dict | None:
    if not _ok(m):
        return None
    return next((r for r in m.get("runs", []) if all(r.get(k) == v for k, v in match.items())), None)


def summary(recording: dict) -> dict:
    """The numbers a cycle model takes from a recording (only from benchmarks whose SASS check passed and
    that ran; missing ones are absent or null):

    * ``issue_interval``: per CUDA-core class, cycles per warp-step per sub-partition with 4 warps on every
      sub-partition (``cycles_per_step_per_sp`` of the throughput run at warps_per_sp 4); ``latency``: cycles
      per dependent step (one chain, one warp per sub-partition); ``units``: what a step is per class;
      ``pairs``: cycles per interleaved pair per sub-partition at 4 warps per sub-partition;
    * ``smem_bytes_per_cycle``: requested bytes per SM cycle of each LDS/STS form at 4 warps per sub-partition;
      ``smem_bytes_per_cycle_best``: the largest of them; ``lds_latency``: the pointer chase's cycles per load;
      ``wgmma_lds``: cycles per m64n256k16 SS wgmma and shared-memory bytes per cycle of the wgmma chain and of
      the LDS.128 streams, each alone and together, and their sum together (null when not measured);
    * ``memory``: per ``method/format`` — ``unloaded_latency`` (median cycles per block, 1 CTA, 1 block in
      flight, the 4 GiB pool), ``l2_hit_latency`` (the same on the 8 MiB pool), ``loaded`` (every (ctas,
      inflight) of the 4 GiB pool: latency_median, bytes_per_cycle_per_sm, gbps), ``per_sm_bytes_per_cycle``
      and ``chip_gbps`` (the most over blocks in flight, at the largest CTA count);
    * ``memory_latency`` (null when the recording has no latency chases): cycles per dependent access of one
      thread, ``ldg`` {``hbm``, ``l2``, ``l1``} (LDG pointer chase) and ``bulk`` {``hbm``, ``l2``} {``"64"``,
      ``"512"``, ``"2048"``} (dependent ``cp.async.bulk`` copies of that many bytes), and ``bulk_per_byte``
      {``hbm``, ``l2``}: ``cycles_per_byte`` and ``cycles_at_0_bytes`` of a line through the bulk sizes;
    * ``mbarrier_round_trip`` and ``mbarrier_one_way``, ``tma_wake`` (the three medians), ``st_async_round_trip``,
      ``bar_sync`` (cycles per barrier by thread count), ``fence_proxy_async`` (cycles per fence by thread
      count), ``barrier_cluster`` and ``barrier_cluster_relaxed`` (cycles per cluster barrier);
    * ``launch_us``: ``empty_1cta``, ``empty_132cta``, ``group_of_3``, ``host_enqueue``;
    * ``clock_mhz`` (median of the probes), ``device`` (its name), ``sass_failed`` (benchmarks whose SASS
      check failed) and ``not_measured`` (measurements whose status is not ok, with it).
    """
    validate(recording)
    r = recording
    out: dict = {"device": r["device"].get("name"), "clock_mhz": r["clock_mhz"]["median"],
                 "sass_failed": sorted(k for k, v in r["sass"].items() if not v["ok"]), "not_measured": {}}

    def missing(where: str, m) -> None:
        if isinstance(m, dict) and m.get("status") not in (None, "ok"):
            out["not_measured"][where] = m["status"]

    for section in SECTIONS:  # a section that failed as a whole
        missing(section, r[section])
        if isinstance(r[section], dict) and "status" in r[section]:
            r = {**r, section: None}
    cc = r["cuda_core"] or {}
    out["issue_interval"], out["latency"], out["units"] = {}, {}, {}
    for key, c in cc.items():
        missing(f"cuda_core.{key}.throughput", c["throughput"])
        missing(f"cuda_core.{key}.latency", c["latency"])
        run = _run_at(c["throughput"], warps_per_sp=4)
        if run is not None:
            out["issue_interval"][key] = run.get("cycles_per_step_per_sp")
        run = _run_at(c["latency"], warps_per_sp=1)
        if run is not None:
            out["latency"][key] = run["cycles_per_step"]
        out["units"][key] = c.get("unit", "instruction")
    out["pairs"] = {}
    for key, c in (r["cuda_core_pairs"] or {}).items():
        missing(f"cuda_core_pairs.{key}", c["throughput"])
        run = _run_at(c["throughput"], warps_per_sp=4)
        if run is not None:
            out["pairs"][key] = run.get("cycles_per_step_per_sp")
    sm = r["shared_memory"] or {}
    out["smem_bytes_per_cycle"] = {}
    for key, m in sm.items():
        missing(f"shared_memory.{key}", m)
        run = _run_at(m, warps_per_sp=4) if key != "wgmma_lds" else None
        if run is not None and "bytes_per_cycle" in run:
            out["smem_bytes_per_cycle"][key] = run["bytes_per_cycle"]
    best = [v for v in out["smem_bytes_per_cycle"].values() if v is not None]
    out["smem_bytes_per_cycle_best"] = max(best) if best else None
    run = _run_at(sm.get("LDS.32/latency"), threads=32)
    out["lds_latency"] = run["cycles_per_step"] if run else None
    wl = sm.get("wgmma_lds")
    out["wgmma_lds"] = {
        "wgmma_alone_cycles": wl["wgmma_alone"]["cycles_per_wgmma"],
        "wgmma_alone_smem_bytes_per_cycle": wl["wgmma_alone"]["smem_bytes_per_cycle"],
        "lds_alone_bytes_per_cycle": wl["lds_alone"]["bytes_per_cycle"],
        "wgmma_together_cycles": wl["together"]["cycles_per_wgmma"],
        "lds_together_bytes_per_cycle": wl["together"]["lds_bytes_per_cycle"],
        "sum_together_bytes_per_cycle": wl["together"]["sum_bytes_per_cycle"]} if _ok(wl) else None
    out["memory"] = _memory_summary(r["memory"], missing)
    out["memory_latency"] = _latency_summary(r["memory"], missing)
    sy = r["sync"] or {}
    for key, m in sy.items():
        missing(f"sync.{key}", m)
    mp = sy.get("mbarrier_pingpong")
    out["mbarrier_round_trip"] = mp["round_trip_cycles"] if _ok(mp) else None
    out["mbarrier_one_way"] = mp.get("one_way_cycles") if _ok(mp) else None
    sa = sy.get("st_async_pingpong")
    out["st_async_round_trip"] = sa["round_trip_cycles"] if _ok(sa) else None
    tw = sy.get("tma_wake")
    out["tma_wake"] = {k: tw[k]["median"] for k in ("issue_to_self_wake", "issue_to_other_wake", "arrive_to_wake")} \
        if _ok(tw) else None
    out["bar_sync"] = {str(run["threads"]): run["cycles_per_step"] for run in sy.get("bar_sync", {}).get("runs", [])} \
        if _ok(sy.get("bar_sync")) else {}
    out["fence_proxy_async"] = {str(run["threads"]): run["cycles_per_step"]
                                for run in sy.get("fence_proxy_async", {}).get("runs", [])} \
        if _ok(sy.get("fence_proxy_async")) else {}
    for key in ("barrier_cluster", "barrier_cluster_relaxed"):
        run = _run_at(sy.get(key), ctas=2)
        out[key] = run["cycles_per_step"] if run else None
    la = r["launch"] or {}
    out["launch_us"] = {k: (la[k].get("us") if _ok(la.get(k)) else None)
                        for k in ("empty_1cta", "empty_132cta", "group_of_3") if k in la}
    for k in ("empty_1cta", "empty_132cta", "group_of_3"):
        missing(f"launch.{k}", la.get(k))
    if la:
        out["launch_us"]["host_enqueue"] = la.get("host_enqueue_us")
    return out


def _latency_summary(mem, missing) -> dict | None:
    lat = mem.get("latency") if isinstance(mem, dict) else None
    if lat is None:  # not measured, or a recording made before the latency chases existed
        return None
    missing("memory.latency", lat)
    if "status" in lat:
        return None
    out: dict = {"ldg": {pool: None for pool in ("hbm", "l2", "l1")},
                 "bulk": {pool: {str(n): None for n in BULK_BYTES} for pool in ("hbm", "l2")}}
    for key, m in lat["chases"].items():
        missing(f"memory.latency.{key}", m)
        v = m["slope"] if _ok(m) else None
        if m["method"] == "ldg":
            out["ldg"][m["pool"]] = v
        else:
            out["bulk"].setdefault(m["pool"], {})[str(m["bytes"])] = v
    out["bulk_per_byte"] = {}
    for pool, by in out["bulk"].items():
        pts = [(int(n), v) for n, v in by.items() if v is not None]
        fit = fit_line(*zip(*pts, strict=True)) if len(pts) >= 2 else None
        out["bulk_per_byte"][pool] = {"cycles_per_byte": fit[0], "cycles_at_0_bytes": fit[1]} if fit else None
    return out


def _memory_summary(mem, missing) -> dict:
    out: dict = {}
    if not mem or "configs" not in mem:
        return out
    by: dict = collections.defaultdict(list)
    for cfg in mem["configs"]:
        by[f"{cfg['method']}/{cfg['format']}"].append(cfg)
        if cfg["status"] != "ok":
            missing(f"memory.{cfg['method']}/{cfg['format']}/{cfg['pool']}/{cfg['ctas']}x{cfg['inflight']}", cfg)
    for key, cfgs in by.items():
        ok = [c for c in cfgs if c["status"] == "ok"]
        hbm = [c for c in ok if c["pool"] == "hbm"]

        def at(pool, ctas, f, _ok=ok):
            return next((c for c in _ok if c["pool"] == pool and c["ctas"] == ctas and c["inflight"] == f), None)

        u, l2 = at("hbm", 1, 1), at("l2", 1, 1)
        top = max((c["ctas"] for c in hbm), default=None)
        at_top = [c for c in hbm if c["ctas"] == top]
        out[key] = {
            "unloaded_latency": u["latency_median"] if u else None,
            "l2_hit_latency": l2["latency_median"] if l2 else None,
            "loaded": [{"ctas": c["ctas"], "inflight": c["inflight"], "latency_median": c["latency_median"],
                        "bytes_per_cycle_per_sm": c["bytes_per_cycle_per_sm"], "gbps": c["gbps"]}
                       for c in sorted(hbm, key=lambda c: (c["ctas"], c["inflight"]))],
            "per_sm_bytes_per_cycle": max((c["bytes_per_cycle_per_sm"] for c in at_top), default=None),
            "chip_gbps": max((c["gbps"] for c in at_top), default=None),
            "at_ctas": top,
        }
    return out
