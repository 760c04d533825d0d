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

The package, one module per concern:

* :mod:`~simtc.hw.calibrate.benchmarks`: the sections, the instruction classes and every benchmark
  (:func:`benches`);
* :mod:`~simtc.hw.calibrate.sources`: the CUDA source of each module (:func:`module_source`) and its cubin;
* :mod:`~simtc.hw.calibrate.sass`: the offline SASS checks (:func:`sass_checks`);
* :mod:`~simtc.hw.calibrate.fits`: the line fit and the statistics;
* :mod:`~simtc.hw.calibrate.gpu`, :mod:`~simtc.hw.calibrate.compute`, :mod:`~simtc.hw.calibrate.memory`,
  :mod:`~simtc.hw.calibrate.sync`: the GPU runner's plumbing and its sections;
* :mod:`~simtc.hw.calibrate.runner`: a whole run (:func:`run`);
* :mod:`~simtc.hw.calibrate.recording`: the recording's format (its docstring lists every field), :func:`save`,
  :func:`load`, :func:`validate`;
* :mod:`~simtc.hw.calibrate.summary`: what a cycle model takes from a recording (:func:`summary`).

The public names are re-exported here (``from simtc.hw.calibrate import run, summary``), and so are the few
private ones the command line and the tests reach (``name as name``).
"""

from __future__ import annotations

from simtc.hw.calibrate.benchmarks import (
    _CHASE_MULS as _CHASE_MULS,
)
from simtc.hw.calibrate.benchmarks import (
    _GATHER as _GATHER,
)
from simtc.hw.calibrate.benchmarks import (
    ALU_OPS,
    ARCH,
    BULK_BYTES,
    CHASE_DEPTHS,
    LAT_DEPTHS,
    LAT_FLUSH,
    LAT_POOLS,
    LAT_SEED,
    LAT_STRIDE,
    LDG_CHASE,
    LDG_CHASE_STEPS,
    MODULES,
    PAIR_CHAINS,
    PAIRS,
    PARTS,
    SECTIONS,
    SELECTABLE,
    SMEM_DEPTHS,
    SYNC_DEPTHS,
    TIMEOUT_NS,
    TP_CHAINS,
    TP_DEPTHS,
    WARPS_PER_SP,
    WGMMA_BYTES,
    WGMMA_DEPTHS,
    AluOp,
    Bench,
    Variant,
    benches,
    chase_slot,
)
from simtc.hw.calibrate.benchmarks import (
    _check_sections as _check_sections,
)
from simtc.hw.calibrate.benchmarks import (
    _ldg_chase_kernel as _ldg_chase_kernel,
)
from simtc.hw.calibrate.fits import fit_line
from simtc.hw.calibrate.gpu import Params
from simtc.hw.calibrate.gpu import _Skip as _Skip
from simtc.hw.calibrate.memory import _lat_fit as _lat_fit
from simtc.hw.calibrate.recording import FORMAT, VERSION, CalibrationFormatError, load, save, validate
from simtc.hw.calibrate.runner import _Runner as _Runner
from simtc.hw.calibrate.runner import empty_recording, run
from simtc.hw.calibrate.sass import OTHER_SLACK, SassCheck, check_bench, sass_by_kernel, sass_checks
from simtc.hw.calibrate.sources import _cu as _cu
from simtc.hw.calibrate.sources import module_source
from simtc.hw.calibrate.summary import summary

__all__ = ["ALU_OPS", "ARCH", "BULK_BYTES", "CHASE_DEPTHS", "FORMAT", "LAT_DEPTHS", "LAT_FLUSH", "LAT_POOLS",
           "LAT_SEED", "LAT_STRIDE", "LDG_CHASE", "LDG_CHASE_STEPS", "MODULES", "OTHER_SLACK", "PAIRS", "PAIR_CHAINS",
           "PARTS", "SECTIONS", "SELECTABLE", "SMEM_DEPTHS", "SYNC_DEPTHS", "TIMEOUT_NS", "TP_CHAINS", "TP_DEPTHS",
           "VERSION", "WARPS_PER_SP", "WGMMA_BYTES", "WGMMA_DEPTHS", "AluOp", "Bench", "CalibrationFormatError",
           "Params", "SassCheck", "Variant", "benches", "chase_slot", "check_bench", "empty_recording", "fit_line",
           "load", "module_source", "run", "sass_by_kernel", "sass_checks", "save", "summary", "validate"]
