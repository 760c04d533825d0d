"""A warp-specialised tcgen05 GEMM described as a simtc Program, run with data and checked bit for bit.

D (128 x 256, f32) = A (128 x K, bf16) · Bᵀ (B: 256 x K, bf16, K-major), K = 64 x ``--k-blocks``, one CTA:

* a TMA producer warp (warp 4, one thread) streams A and B k-block by k-block into a 4-stage shared-memory
  ring: per k-block it waits the stage's ``empty`` mbarrier (from the second round on), arms its ``full``
  mbarrier with ``mbarrier.arrive.expect_tx`` (PTX ISA 9.0 §9.7.13.15.13) and issues two
  ``cp.async.bulk.tensor`` loads that complete their bytes on it (§9.7.9.25.5.2, §9.7.13.15.2 tx-count);
* an MMA warp (warp 5; one elected thread issues the MMAs and commits) allocates 256 TMEM columns
  (§9.7.16.7.1), and per k-block waits ``full``, issues ``tcgen05.fence::after_thread_sync`` (§9.7.16.6.4)
  and four ``tcgen05.mma.cta_group::1.kind::f16`` (M=128, N=256, K=16 each, §9.7.16.10.9; bf16 in, f32 D,
  §9.7.16.2.1 Table 39) whose SW128 K-major descriptors come from
  :meth:`simtc.smem.CanonicalLayout.descriptor` (§9.7.16.4.1), then ``tcgen05.commit`` to the stage's
  ``empty`` mbarrier (§9.7.16.12.1): the stage is free once those MMAs have read it. A last commit to
  ``tmem_full`` tells the epilogue that D is complete;
* an epilogue warpgroup (warps 0-3) waits ``tmem_full``, fences, reads its 32 TMEM lanes of D with two
  ``tcgen05.ld.32x32b.x128`` (lane quadrant = warp % 4, §9.7.16.8.1; §9.7.16.8.3), writes D out (a CUDA-core
  block of STG.128, timing only), and releases TMEM to the MMA warp, which deallocates it.

The TMA sources: simtc moves a tile load's bytes as they land in shared memory (the tensor map is not modelled,
:func:`simtc.semantics.execute`), so the global tensors ``A`` and ``B`` hold each k-block's box already in its
SW128 K-major shared-memory image (:func:`tensor_images`, written with :func:`simtc.smem.image.write_tile`, as
the FlashMLA replay writes its Q image), and a load's coordinate is the box's byte offset in that image.

Run: ``python examples/tcgen05_gemm.py`` (D checked against :func:`simtc.numerics.tensor_core_mma` bit for bit
and against float64); ``--write-json FILE`` writes the Program (:meth:`simtc.isa.Program.to_json`, the file
``examples/tcgen05_gemm.json`` is this script's output), ``--write-tensors DIR`` writes ``A.npy`` and ``B.npy``
for ``simtc simulate FILE --tensor A=DIR/A.npy --tensor B=DIR/B.npy``, ``--variant dropped-wait`` /
``missing-fence`` builds a Program with one seeded bug (run it and the checker's grouped report is printed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import simtc.isa as isa
from simtc.smem import CanonicalLayout
from simtc.smem.image import write_tile

M, N, BK = 128, 256, 64  # the CTA tile and one k-block (64 bf16 = 128 bytes: one SW128 row)
STAGES = 4
K_BLOCKS = 8  # K = 512: two rounds of the 4-stage ring
A_BOX = CanonicalLayout("bf16", "K", "SW128", M, BK)  # 16 KiB, one TMA box per k-block
B_BOX = CanonicalLayout("bf16", "K", "SW128", N, BK)  # 32 KiB
STAGE_BYTES = A_BOX.nbytes + B_BOX.nbytes  # 48 KiB: what one stage's full barrier expects
TMEM_ADDR = STAGES * STAGE_BYTES  # where tcgen05.alloc writes the TMEM address (192 KiB)
TMEM_COLS = 256  # D: 128 lanes x 256 f32 columns
MMA_K = 16  # K of one kind::f16 instruction (PTX ISA 9.0 §9.7.16.2.1 Table 39)
IDESC = isa.InstrDescriptor(kind="f16", m=M, n=N, a_format="bf16", b_format="bf16")
WARPS = {"epilogue": (0, 1, 2, 3), "producer": (4,), "mma": (5,)}
VARIANTS = ("dropped-wait", "missing-fence")
"""Seeded bugs: ``dropped-wait`` -- the epilogue does not wait ``tmem_full`` (its tcgen05.ld read TMEM the MMAs
then overwrite); ``missing-fence`` -- the MMA warp waits ``full`` for k-block 5 but issues its MMAs without
``tcgen05.fence::after_thread_sync`` after the wait (PTX ISA 9.0 §9.7.16.6.4)."""
BUG_BLOCK = 5


def a_stage(s: int) -> int:
    """Shared-memory address of stage ``s``'s A box (1024-byte aligned: SW128's base offset is 0)."""
    return s * STAGE_BYTES


def b_stage(s: int) -> int:
    return s * STAGE_BYTES + A_BOX.nbytes


def producer_role(k_blocks: int) -> isa.Role:
    """The TMA warp: per k-block wait the stage free (after the first round), arm ``full[s]``, load A and B."""
    recs: list[isa.Instr] = []
    for kb in range(k_blocks):
        s, rnd = kb % STAGES, kb // STAGES
        if rnd:  # the stage's previous use: the MMAs of k-block kb - STAGES, committed to empty[s]
            recs.append(isa.MbarrierTryWait(f"empty[{s}]", (rnd - 1) & 1, label=f"stage {s} free (k-block {kb})"))
        recs += [isa.MbarrierArriveExpectTx(f"full[{s}]", STAGE_BYTES, label=f"arm stage {s}"),
                 isa.CpAsyncBulkTensor(a_stage(s), A_BOX.nbytes, f"full[{s}]", tensor="A",
                                       coords=(kb * A_BOX.nbytes,), label=f"A k-block {kb}"),
                 isa.CpAsyncBulkTensor(b_stage(s), B_BOX.nbytes, f"full[{s}]", tensor="B",
                                       coords=(kb * B_BOX.nbytes,), label=f"B k-block {kb}")]
    return isa.Role("producer", WARPS["producer"], tuple(recs), threads=1)


def mma_role(k_blocks: int, variant: str | None = None) -> isa.Role:
    """The MMA warp: alloc, then per k-block wait ``full[s]``, fence, 4 MMAs, commit to ``empty[s]``."""
    recs: list[isa.Instr] = [isa.Alloc(TMEM_COLS, TMEM_ADDR), isa.RelinquishAllocPermit(),
                             isa.FenceBeforeThreadSync(), isa.BarSync(1, 160, label="TMEM allocated"),
                             isa.FenceAfterThreadSync()]
    for kb in range(k_blocks):
        s, rnd = kb % STAGES, kb // STAGES
        recs.append(isa.MbarrierTryWait(f"full[{s}]", rnd & 1, label=f"stage {s} loaded (k-block {kb})"))
        if not (kb == BUG_BLOCK and variant == "missing-fence"):
            recs.append(isa.FenceAfterThreadSync())
        for j in range(BK // MMA_K):
            recs.append(isa.Mma(0, A_BOX.descriptor(start=a_stage(s), k_slice=j),
                                B_BOX.descriptor(start=b_stage(s), k_slice=j), IDESC,
                                enable_input_d=kb > 0 or j > 0, label=f"D += A Bᵀ, k = {BK * kb + MMA_K * j}"))
        recs.append(isa.Commit(f"empty[{s}]", label=f"release stage {s}"))
    recs += [isa.Commit("tmem_full", label="D complete"), isa.MbarrierTryWait("epi_done", 0),
             isa.FenceAfterThreadSync(), isa.Dealloc(0, TMEM_COLS)]
    return isa.Role("mma", WARPS["mma"], tuple(recs))  # the whole warp: alloc, bar.sync and dealloc are
    # warp-wide (.sync.aligned); tcgen05.mma and tcgen05.commit are issued by one elected thread (Instr.elected)


def epilogue_role(variant: str | None = None) -> isa.Role:
    """The epilogue warpgroup: wait D, read this warp's 32 lanes (two halves of 128 columns), write D out."""
    half = TMEM_COLS // 2
    wait = () if variant == "dropped-wait" else (isa.MbarrierTryWait("tmem_full", 0, label="D complete"),)
    recs = (isa.BarSync(1, 160, label="TMEM allocated"), isa.FenceAfterThreadSync(), *wait,
            isa.FenceAfterThreadSync(),
            isa.Ld(0, "32x32b", half, "d_lo", label="D columns 0-127 of this warp's lanes"),
            isa.Ld(half, "32x32b", half, "d_hi", label="D columns 128-255"),
            isa.WaitLd(),
            isa.CudaCoreBlock("write D", (("STG.E.128", 2 * half // 4),), regs_read=("d_lo", "d_hi")),
            isa.FenceBeforeThreadSync(), isa.MbarrierArrive("epi_done", label="TMEM free"))
    return isa.Role("epilogue", WARPS["epilogue"], recs)


def gemm_program(k_blocks: int = K_BLOCKS, variant: str | None = None) -> isa.Program:
    """The GEMM as a :class:`simtc.isa.Program`: three roles and the barrier table (the setup code initialises
    every mbarrier before the roles run, so the Program issues no ``mbarrier.init``)."""
    if variant is not None and variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: one of {', '.join(VARIANTS)}")
    if k_blocks <= BUG_BLOCK and variant == "missing-fence":
        raise ValueError(f"the seeded bug is in k-block {BUG_BLOCK}: give {BUG_BLOCK + 1} or more k-blocks")
    bars = [isa.Barrier(f"full[{s}]", "mbarrier", 1) for s in range(STAGES)]
    bars += [isa.Barrier(f"empty[{s}]", "mbarrier", 1) for s in range(STAGES)]
    bars += [isa.Barrier("tmem_full", "mbarrier", 1), isa.Barrier("epi_done", "mbarrier", 128)]
    k = BK * k_blocks
    name = "tcgen05-gemm" + (f"-{variant}" if variant else "")
    meta = (("tensor:A", f"uint8[{k_blocks},{A_BOX.nbytes}]: A ({M} x {k} bf16), k-block by k-block as its "
                         "SW128 K-major box lands in shared memory"),
            ("tensor:B", f"uint8[{k_blocks},{B_BOX.nbytes}]: B ({N} x {k} bf16), the same"))
    return isa.Program(name, (epilogue_role(variant), producer_role(k_blocks), mma_role(k_blocks, variant)),
                       barriers=tuple(bars), meta=meta,
                       description=f"D[{M}x{N}] f32 = A[{M}x{k}] Bᵀ bf16: TMA producer, {STAGES}-stage full/empty "
                                   "mbarrier ring, single-thread tcgen05.mma, tcgen05.ld epilogue warpgroup")


def program_json(program: isa.Program) -> str:
    """The text of the Program's JSON file (:meth:`~simtc.isa.Program.to_json`, two-space indent)."""
    return json.dumps(program.to_json(), indent=2, ensure_ascii=False) + "\n"


def operands(k_blocks: int = K_BLOCKS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random A (128 x K) and B (256 x K), float32 values exactly representable in bf16."""
    from simtc.numerics.cases import mma_operands

    a, b, _ = mma_operands("normal", M, N, BK * k_blocks, seed=seed)
    return a, b


def tensor_images(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """The TMA sources: k-block ``kb`` of A (B) as its SW128 K-major box lands in shared memory, row ``kb``."""
    out = {}
    for name, x, box in (("A", a, A_BOX), ("B", b, B_BOX)):
        blocks = x.shape[1] // BK
        image = np.zeros((blocks, box.nbytes), np.uint8)
        for kb in range(blocks):
            write_tile(image[kb], box, x[:, BK * kb:BK * (kb + 1)])
        out[name] = image
    return out


def run(program: isa.Program, a: np.ndarray, b: np.ndarray, observers=()):
    """Run ``program`` on the engine in semantics mode with A and B as its TMA sources; returns the engine
    (``observers``: more observers of the run, e.g. a :class:`simtc.engine.checker.CheckLog`)."""
    from simtc.engine import Engine
    from simtc.semantics import Cta

    cta = Cta()
    cta.init_barriers(program)
    cta.gmem.update(tensor_images(a, b))
    eng = Engine(program, mode="semantics", cta=cta, observers=observers)
    eng.run()
    return eng


def read_d(eng) -> np.ndarray:
    """D as the epilogue's tcgen05.ld returned it: warp w's registers hold lanes 32w .. 32w + 31."""
    d = np.zeros((M, N), np.float32)
    for w in WARPS["epilogue"]:
        regs = eng.cta.regs[w]
        d[32 * w:32 * w + 32] = np.concatenate([regs["d_lo"], regs["d_hi"]], axis=1).view(np.float32)
    return d


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k-blocks", type=int, default=K_BLOCKS, help=f"k-blocks of 64 (default: {K_BLOCKS})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random A and B (default: 0)")
    parser.add_argument("--variant", choices=VARIANTS, default=None, help="seed a bug (default: none)")
    parser.add_argument("--write-json", metavar="FILE", default=None,
                        help="write the Program's JSON (and, with --write-tensors, its TMA sources) and exit "
                             "(default: none: run it)")
    parser.add_argument("--write-tensors", metavar="DIR", default=None,
                        help="also write the TMA sources A.npy and B.npy into DIR (default: none)")
    args = parser.parse_args(argv)
    if args.k_blocks < 1:
        parser.error("--k-blocks is 1 or more")
    program = gemm_program(args.k_blocks, args.variant)
    a, b = operands(args.k_blocks, args.seed)
    if args.write_json:
        Path(args.write_json).write_text(program_json(program), encoding="utf-8")
        print(f"wrote {args.write_json}: {program.name}, {len(program)} records")
    if args.write_tensors:
        out = Path(args.write_tensors)
        out.mkdir(parents=True, exist_ok=True)
        for name, image in tensor_images(a, b).items():
            np.save(out / f"{name}.npy", image)
        print(f"wrote {out / 'A.npy'} and {out / 'B.npy'}")
    if args.write_json:
        return 0
    from simtc.engine.hazard_groups import group_hazards
    from simtc.numerics import tensor_core_mma

    counts = ", ".join(f"{n} {op}" for op, n in program.counts().items())
    print(f"{program.name}: {len(program.roles)} roles, {len(program)} records ({counts})")
    eng = run(program, a, b)
    print(f"ran {eng.cycles} cycles, {len(eng.trace)} events")
    if eng.hazards or eng.deadlock:
        groups = group_hazards(eng.hazards, eng.checker)
        print(f"{len(eng.hazards)} hazards in {len(groups)} group(s) (root causes):")
        for g in groups:
            print("\n".join(g.lines()))
        return 1
    if eng.semantics_errors:
        print(f"semantics errors: {eng.semantics_errors[:3]}")
        return 1
    d = read_d(eng)
    model = tensor_core_mma(a, b)
    exact = np.array_equal(d.view(np.uint32), model.view(np.uint32))
    print(f"D ({M} x {N} f32, read back by the epilogue's tcgen05.ld) vs simtc.numerics.tensor_core_mma: "
          f"bit-exact: {exact}")
    ref = a.astype(np.float64) @ b.T.astype(np.float64)
    err = float(np.abs(d - ref).max())
    print(f"D vs A·Bᵀ in float64: max |D - A·Bᵀ| = {err:.3e} (|A·Bᵀ| up to {np.abs(ref).max():.1f})")
    return 0 if exact and err < 1e-3 * max(1.0, float(np.abs(ref).max())) else 1


if __name__ == "__main__":
    sys.exit(main())
