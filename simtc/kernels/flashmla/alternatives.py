"""FlashMLA head64's design alternatives side by side, on the same inputs, engine and checker.

Each variant is the kernel's Program transformed (a function Program -> Program given to
:func:`~simtc.kernels.flashmla.replay.replay`), or, where it cannot be built because it does not fit, the
refusal simtc gives with the rule it breaks. The variants are simtc's own design study [inferred]; each
names the source it starts from (FlashMLA at ``9241ae3`` unless another commit is named):

* ``dual-gemm`` -- the kernel as it is (baseline): 18 (16) ``.ws`` TS QK MMAs of N=128, Q split over
  the two lane halves, the P_lo/P_hi exchange; semantics mode, every check.
* ``duplicated-q`` -- CUTLASS's intended ``.ws`` TS use (``TmemAllocMode::Duplicated``,
  ``include/cute/atom/mma_traits_sm100_frag.hpp`` line 71 at ``7107b05``; FlashMLA ``gemm.cuh`` line 59: A
  "should be duplicated"): Q in both lane halves (288 columns), 36 QK MMAs
  of N=64, P 32 columns, no exchange. O 256 + Q 288 + P 32 = 576 > 512 columns: run through the TMEM
  allocator (:class:`simtc.tmem.memory.TensorMemory`) and the ``tcgen05.cp`` record, both refuse.
* ``ss-q-smem`` -- the earlier SM100 decode kernel (FlashMLA ``csrc/sm100/decode/sparse_fp8/splitkv_mla.cu``
  lines 102-105 at ``fd249aa``: an SS ``.ws`` QK of N = B_TOPK, "TODO Use TS?"): Q resident
  in shared memory, 36 SS ``.ws`` QK MMAs of N=64 (A = Q, B = K, 2 KiB each per instruction), no exchange.
  Q can no longer alias ``dequant[0]``: the plan needs 232,192 + 73,728 B > 227 KiB. Timing mode with
  the checker off (the plan has no room for a resident Q, so its aliasing is not a valid schedule): the
  tensor pipe's cycles and the shared-memory bytes per instruction (from the records' footprints).
* ``layout-f`` -- non-``.ws`` M=64 (Layout F, half datapath, II = N/2): a TS A must sit at D's lane
  alignment, so Q in one F slab takes 288 columns; with O as two interleaved N=256 accumulators (256
  columns; 512 in one slab) and P 64 columns: 608 > 512, refused. The placement that fits interleaves
  the Q halves over the L0 = 0 / 16 slabs (a dual GEMM again, 464 columns): 36 QK + 8 PV F MMAs, run
  in timing mode with the checker on (the softmax's exchange would become an intra-warp shuffle; its
  records are kept as they are, so that variant is timing only).
* ``prefill-overlap`` -- the prefill kernel's schedule (``csrc/sm100/prefill/sparse/common_subroutine.h``
  lines 75-96, ``csrc/sm100/prefill/sparse/fwd/head64/phase1.cuh`` lines 474-523): the softmax frees P
  right after its TMEM loads (``p_free``, 128 arrivals, in the plan's 8 bytes of tail padding) and the MMA thread
  issues QK(i+1) before PV(i). Because S shares its bytes with the exchange buffer, block i+1's
  exchange must now wait PV(i) (``sv_done``) explicitly; semantics mode, every check.
* ``b0-b1-collectors`` -- consecutive ``.ws`` MMAs alternate ``collector::b0::discard`` /
  ``b1::discard`` (II N/4 + 12 -> N/4 on GB200:
  KevinZeng08/microbench-blackwell umma_throughput/tcgen05_mma_ws.md); semantics mode, every check.

:func:`compare` returns one :class:`Variant` per design: TMEM columns, shared-memory bytes, whether it
fits, MMAs per block, tensor-pipe busy cycles and cycles per block from the engine, the exchange's cost
(instructions per thread and cycles per block, from the Program and the trace), and why it fits or not.
"""

from __future__ import annotations

import attrs
from attrs import frozen

from simtc.errors import SimtcError
from simtc.isa.footprint import descriptor_ranges
from simtc.isa.idesc import InstrDescriptor
from simtc.isa.mbarrier import MbarrierArrive, MbarrierTryWait
from simtc.isa.program import Barrier, Program
from simtc.isa.shared import LdShared, StShared
from simtc.isa.sync import BarSync
from simtc.isa.tcgen05 import Cp, FenceAfterThreadSync, FenceBeforeThreadSync, Ld, Mma, WaitLd
from simtc.kernels.flashmla.constants import B_H, B_TOPK, O_COLUMN, P_COLUMN
from simtc.kernels.flashmla.head64 import ring_state
from simtc.kernels.flashmla.models import Head64Model, model
from simtc.kernels.flashmla.plan import NOPE_TILE, ROPE_TILE
from simtc.kernels.flashmla.replay import hbm_bound, make_inputs, reference_p, replay, rescale_blocks
from simtc.smem.memory import SMEM_CAPACITY

__all__ = ["DUP_Q_REGIONS", "VARIANTS", "Variant", "compare", "dup_q_allocation", "dup_q_regions", "exchange_band",
           "exchange_cost", "exchange_parameters", "exchange_records", "hbm_bound", "no_exchange",
           "smem_bytes_per_mma"]

SMEM_LIMIT = SMEM_CAPACITY["sm100"]
"""227 KiB a block may use on sm_100 (FlashMLA asserts ``sizeof(SharedMemoryPlan) < 227*1024``, ``kernel.cuh``
line 955)."""
QK64_IDESC = InstrDescriptor(kind="f16", m=B_H, n=B_TOPK, a_format="bf16", b_format="bf16")
"""A non-dual QK instruction: M=64, N=64, bf16 (one 64x64x16 product)."""
_L16 = 16 << 16  # TMEM address lane field 16 (Layout F's second slab, L0 = 16)


# ---- helpers ---------------------------------------------------------------------------------------------
def _edit(program: Program, role: str, fn, *, name: str, barriers=None) -> Program:
    roles = tuple(attrs.evolve(r, records=tuple(fn(list(r.records)))) if r.name == role else r
                  for r in program.roles)
    return attrs.evolve(program, roles=roles, name=name,
                        barriers=program.barriers if barriers is None else barriers)


def _is_add(r) -> bool:
    """The softmax's CUDA-core block that adds the P halves, masks and takes the row max."""
    return getattr(r, "name", "") == "add, mask, row max" and r.opcode == "cuda_core"


def _blocks(program: Program) -> int:
    return int(dict(program.meta)["blocks"])


def _model_of(program: Program) -> Head64Model:
    return model(program.name.split("-")[2])


def _replace_mmas(recs: list, make) -> list:
    """Replace each run of consecutive QK / PV MMAs with ``make(kind, block, run)`` (block = the KV block index;
    V32's QK of a block is two runs: RoPE before ``nope_ready``, then NoPE)."""
    out, seen = [], {"QK": 0, "PV": 0}
    i = 0
    while i < len(recs):
        r = recs[i]
        if not isinstance(r, Mma):
            out.append(r)
            i += 1
            continue
        kind = "PV" if r.label.startswith("PV") else "QK"
        j = i
        while j < len(recs) and isinstance(recs[j], Mma) and recs[j].label.startswith(kind):
            j += 1
        out += make(kind, seen[kind], recs[i:j])
        if kind == "PV" or r.label == "QK k=0":
            seen[kind] += 1
        i = j
    return out


# ---- the variants as Program transforms --------------------------------------------------------------------
def collectors(program: Program) -> Program:
    """Alternate ``collector::b0::discard`` / ``b1::discard`` on consecutive ``.ws`` MMAs (measured faster on GB200 by
    KevinZeng08/microbench-blackwell umma_throughput/tcgen05_mma_ws.md)."""
    def edit(recs: list) -> list:
        n = 0
        out = []
        for r in recs:
            if isinstance(r, Mma) and r.ws:
                r = attrs.evolve(r, collector=f"b{n % 2}::discard")
                n += 1
            out.append(r)
        return out
    return _edit(program, "mma", edit, name=program.name + "-b0b1")


def prefill_overlap(program: Program) -> Program:
    """QK(i+1) before PV(i), P freed after its TMEM loads (``p_free``), exchange(i+1) after PV(i)."""
    m, blocks = _model_of(program), _blocks(program)
    mb = m.smem["mbarriers"]
    p_free = Barrier("p_free", "mbarrier", 128, addr=mb.offset + mb.size)  # the plan's 8 B of tail padding
    mma = list(program.role("mma").records)
    first_block = next(i for i, r in enumerate(mma) if isinstance(r, MbarrierTryWait) and r.bar.startswith("rope_"))
    head = mma[:first_block]
    per_block: list[list] = []
    cur: list = []
    for r in mma[first_block:]:
        cur.append(r)
        if getattr(r, "bar", "").startswith("sv_done") and r.opcode == "tcgen05.commit":
            per_block.append(cur)
            cur = []
    qk = [blk[:next(k for k, r in enumerate(blk) if r.opcode == "tcgen05.commit") + 1] for blk in per_block]
    pv = [blk[len(q):] for q, blk in zip(qk, per_block, strict=True)]
    rec = head + qk[0]
    for i in range(blocks):
        if i + 1 < blocks:
            rec += [MbarrierTryWait("p_free", i % 2), *qk[i + 1]]
        rec += pv[i]

    def soft(recs: list) -> list:
        out, blk = [], -1
        for r in recs:
            if isinstance(r, StShared) and r.label.startswith("p_peer[0:4]") and blk >= 1:
                b, ph, _, _ = ring_state(blk - 1)
                out += [MbarrierTryWait(f"sv_done[{b}]", ph), FenceAfterThreadSync()]
            out.append(r)
            if isinstance(r, MbarrierTryWait) and r.bar.startswith("qk_done"):
                blk += 1
            if isinstance(r, FenceBeforeThreadSync) and isinstance(out[-2], WaitLd) and isinstance(out[-3], Ld):
                out.append(MbarrierArrive("p_free", label=f"P free, block {blk}"))
        return out
    p = _edit(program, "mma", lambda _: rec, name=program.name + "-overlap",
              barriers=(*program.barriers, p_free))
    return _edit(p, "softmax", soft, name=p.name)


def _no_exchange_softmax(recs: list) -> list:
    """The softmax without the exchange: one P load (x32), no exchange stores/loads/pair barrier, 16 FADD2 less."""
    out = []
    for r in recs:
        if isinstance(r, Ld) and r.label == "P columns 432-463":
            continue
        if isinstance(r, StShared) and r.label.startswith("p_peer"):
            continue
        if isinstance(r, LdShared) and r.label.startswith("slot"):
            continue
        if isinstance(r, BarSync) and "pair" in r.label:
            continue
        if _is_add(r):
            counts = tuple(x for x in ((c, n - 16 if c == "FADD2" else n) for c, n in r.counts) if x[1])
            left = dict(counts)
            r = attrs.evolve(r, counts=counts, chain=tuple(x for x in r.chain if x[0] in left),
                             regs_read=tuple(x for x in r.regs_read if not x.startswith("pin")))
        out.append(r)
    return out


def no_exchange(program: Program) -> Program:
    """The kernel's Program without the P_lo/P_hi exchange (:func:`exchange_records`: no second P load, exchange
    stores and loads or pair barrier, the add block without its 16 FADD2): not a kernel that computes P right,
    the time a lane holding full scores would take -- a timing-only replay's ``transform``."""
    return _edit(program, "softmax", _no_exchange_softmax, name=program.name + "-no-exchange")


def ss_q_smem(program: Program) -> Program:
    """Q resident in shared memory, 36 (32) SS ``.ws`` QK MMAs of N=64, no Q copies, no exchange (timing only)."""
    m = _model_of(program)
    q0 = m.smem["q"].offset
    qr = m.smem["q_sw64"].offset if m.v32 else None

    def mmas(kind, block, run):
        if kind == "PV":
            return run
        b = block % 2
        nope0 = m.smem[f"dequant{b}.nope"].offset
        out = []
        if m.v32:
            rope0 = m.smem[f"dequant{b}.rope"].offset
            out += [Mma(P_COLUMN, ROPE_TILE.descriptor(start=qr + 4096 * h, k_slice=s),
                        ROPE_TILE.descriptor(start=rope0 + 4096 * h, k_slice=s), QK64_IDESC,
                        enable_input_d=bool(h or s), ws=True, label=f"QK RoPE h={h} s={s}")
                    for h in range(2) for s in range(2)]
            if run[0].label.startswith("QK RoPE"):  # the RoPE part of the block (before nope_ready)
                return out
            out = []
        for t in range(m.d_nope // 64 + (0 if m.v32 else 1)):
            out += [Mma(P_COLUMN, NOPE_TILE.descriptor(start=q0 + 8192 * t, k_slice=s),
                        NOPE_TILE.descriptor(start=nope0 + 8192 * t, k_slice=s), QK64_IDESC,
                        enable_input_d=m.v32 or bool(t or s), ws=True, label=f"QK t={t} s={s}")
                    for s in range(4)]
        return out

    def edit(recs: list) -> list:
        return [r for r in _replace_mmas(recs, mmas) if not isinstance(r, Cp)]
    p = _edit(program, "mma", edit, name=program.name + "-ss")
    return _edit(p, "softmax", _no_exchange_softmax, name=p.name)


def layout_f(program: Program) -> Program:
    """Non-``.ws`` M=64 (Layout F): each dual QK step as two F MMAs of N=64 (L0 = 0 even chunks, L0 = 16 odd),
    PV as N=256 F MMAs at L0 = 0 (V dims 0-255) and L0 = 16 (256-511) in columns 0-255 (timing only)."""
    m = _model_of(program)

    def mmas(kind, block, run):
        b = block % 2
        out = []
        if kind == "PV":
            for r in run:  # n-block n of O (V dims 256n ...): L0 = 16n, columns 0-255
                n = int(r.label.split("n=")[1])
                out.append(Mma((_L16 if n else 0) | O_COLUMN, r.a, r.b_desc, r.idesc, enable_input_d=r.enable_input_d,
                               ws=False, label=f"{r.label} F L0={16 * n}"))
            return out
        nope0 = m.smem[f"dequant{b}.nope"].offset
        for r in run:
            if r.label.startswith("QK RoPE"):
                k = int(r.label.split("k=")[1])
                rope0 = m.smem[f"dequant{b}.rope"].offset
                descs = [ROPE_TILE.descriptor(start=rope0 + 4096 * h, k_slice=k) for h in (0, 1)]
            else:
                k = int(r.label.split("k=")[1])
                descs = [NOPE_TILE.descriptor(start=nope0 + 8192 * (2 * (k // 4) + h), k_slice=k % 4) for h in (0, 1)]
            col = r.a & 0xFFFF
            out += [Mma((_L16 if h else 0) | P_COLUMN, (_L16 if h else 0) | col, descs[h], QK64_IDESC,
                        enable_input_d=r.enable_input_d, ws=False, label=f"{r.label} F L0={16 * h}")
                    for h in (0, 1)]
        return out
    return _edit(program, "mma", lambda recs: _replace_mmas(recs, mmas), name=program.name + "-layout-f")


# ---- measurements --------------------------------------------------------------------------------------------
def exchange_instructions(program: Program) -> dict[str, int]:
    """Per softmax thread per block, the exchange's instructions in ``program`` (``kernel.cuh`` lines 166-195):
    the extra LDTM.x32, the STS.128 / LDS.128 of the P halves, the FADD2 that add them and the pair barrier."""
    blocks = _blocks(program)
    c = {"LDTM.x32 (extra)": 0, "STS.128": 0, "LDS.128": 0, "FADD2": 0, "BAR.SYNC (pair)": 0}
    for r in program.role("softmax").records:
        if isinstance(r, Ld) and r.label == "P columns 432-463":
            c["LDTM.x32 (extra)"] += 1
        elif isinstance(r, StShared) and r.label.startswith("p_peer"):
            c["STS.128"] += 1
        elif isinstance(r, LdShared) and r.label.startswith("slot"):
            c["LDS.128"] += 1
        elif isinstance(r, BarSync) and "pair" in r.label:
            c["BAR.SYNC (pair)"] += 1
        elif _is_add(r):
            c["FADD2"] += dict(r.counts).get("FADD2", 0)
    return {k: v // blocks for k, v in c.items()}


def exchange_cost(engine) -> float:
    """Cycles per block the exchange adds to a softmax warp, from the trace: the extra LDTM (its completion after
    the first P load's) and first exchange store issued -> the add's block issued (stores, pair barrier, loads);
    the mean over warps 0-3 and the blocks. What these cycles rest on: :func:`exchange_parameters`."""
    recs = engine.program.role("softmax").records
    starts = {i for i, r in enumerate(recs) if isinstance(r, StShared) and r.label.startswith("p_peer[0:4]")}
    ends = {i for i, r in enumerate(recs) if _is_add(r)}
    if not starts:
        return 0.0
    t0: dict = {}
    spans = []
    for e in engine.trace:
        if e.role != "softmax" or e.kind != "issue":
            continue
        if e.index in starts:
            t0[e.warp] = e.cycle
        elif e.index in ends and e.warp in t0:
            spans.append(e.cycle - t0.pop(e.warp))
    lds = [i for i, r in enumerate(recs) if isinstance(r, Ld) and r.label.startswith("P columns")]
    done: dict = {}
    for e in engine.trace:  # the extra LDTM: its completion after the first one's, on the softmax's wait::ld
        if e.role == "softmax" and e.kind == "complete" and e.index in lds:
            done.setdefault((e.warp, e.index), []).append(e.cycle)
    first, second = lds[0::2], lds[1::2]
    late = [b - a for w in range(4) for i, j in zip(first, second, strict=True)
            for a, b in zip(done.get((w, i), []), done.get((w, j), []), strict=False)]
    return sum(spans) / max(len(spans), 1) + sum(late) / max(len(late), 1)


def exchange_records(program: Program) -> list:
    """The softmax's records of the P_lo/P_hi exchange (``kernel.cuh`` lines 166-195): the extra LDTM, the
    STS/LDS of the halves, the pair barrier, and the block that adds them."""
    def part(r) -> bool:
        return ((isinstance(r, Ld) and r.label == "P columns 432-463")
                or (isinstance(r, StShared) and r.label.startswith("p_peer"))
                or (isinstance(r, LdShared) and r.label.startswith("slot"))
                or (isinstance(r, BarSync) and "pair" in r.label) or _is_add(r))
    return list({id(r): r for r in program.role("softmax").records if part(r)}.values())


def exchange_parameters(program: Program, arch: str = "sm100") -> list[dict]:
    """The timing parameters the exchange's cycles rest on: ``{name, value, label}`` for every parameter the
    exchange's records read (:func:`simtc.engine.handlers.parameters_of`)."""
    from simtc.engine.handlers import parameters_of
    from simtc.engine.parameters import PARAMETERS

    names = dict.fromkeys(n for r in exchange_records(program) for n in parameters_of(r, arch))
    return [{"name": n, "value": PARAMETERS[arch][n].value, "label": PARAMETERS[arch][n].label} for n in names]


def exchange_band(model_name: str | Head64Model = "v32", blocks: int = 4, seed: int = 0) -> dict:
    """The exchange's cycles per block (:func:`exchange_cost`) with the band of the parameters it rests on
    (:func:`exchange_parameters`; :func:`simtc.engine.sensitivity.band`: assumed ones x/÷ 1.25, derived x/÷ 1.10),
    from timing-only replays of ``blocks`` blocks. Adds ``"measured_on_sm90"``: how many of those parameters are
    H200 measurements taken as equal on sm100 (labelled assumed there)."""
    from simtc.engine.parameters import Timing
    from simtc.engine.sensitivity import band

    timing = Timing("sm100")
    m = model(model_name)

    def measure(t) -> float:
        return exchange_cost(replay(m, blocks, seed, timing_only=True, keep_engine=True, timing=t).engine)

    program = replay(m, blocks, seed, timing_only=True, keep_engine=True).engine.program
    names = [p["name"] for p in exchange_parameters(program)]
    out = band(measure, timing, names)
    out["parameters"] = len(names)
    out["measured_on_sm90"] = sum(1 for n in names if timing.param(n).label == "assumed"
                                  and timing.param(n).source.startswith("measured on the H200"))
    return out


def tensor_pipe_per_block(engine) -> float:
    """Tensor-pipe busy cycles per block: the pipe's spans after Q's copies completed (q_utccp), / blocks."""
    t = next((e.cycle for e in engine.trace if e.kind == "phase" and e.detail.startswith("q_utccp")), 0)
    busy = sum(b - a for a, b, _ in engine.unit_spans["tensor_pipe"] if a >= t)
    return busy / _blocks(engine.program)


def _operand_bytes(r: Mma) -> int:
    """Shared-memory bytes one MMA reads: B (N rows x 32 B per K=16 step), plus A in the SS form (M rows),
    each from its descriptor's byte ranges (A and B counted separately even where they alias)."""
    d = r.idesc
    n = sum(x.stop - x.start for x in descriptor_ranges(r.b_desc.encode(), "sm100", d.b_major, 2, d.n, 16))
    if r.form == "SS":
        n += sum(x.stop - x.start for x in descriptor_ranges(r.a.encode(), "sm100", d.a_major, 2, r.layout.rows, 16))
    return n


def smem_bytes_per_mma(program: Program) -> dict[str, float]:
    """Shared-memory operand bytes (A + B) per QK and per PV MMA, and per block."""
    out = {"qk": 0, "pv": 0, "qk_n": 0, "pv_n": 0}
    for r in program.role("mma").records:
        if isinstance(r, Mma):
            k = "pv" if r.label.startswith("PV") else "qk"
            out[k] += _operand_bytes(r)
            out[k + "_n"] += 1
    blocks = _blocks(program)
    return {"qk_per_mma": out["qk"] / max(out["qk_n"], 1), "pv_per_mma": out["pv"] / max(out["pv_n"], 1),
            "per_block": (out["qk"] + out["pv"]) / blocks}


def _refusal(fn) -> str:
    try:
        fn()
    except SimtcError as e:
        return str(e)
    return "accepted"


DUP_Q_REGIONS = ("O", "Q (both lane halves)", "P")
"""The duplicated-Q variant's TMEM regions, in the order :func:`dup_q_allocation` allocates them."""


def dup_q_regions(m: Head64Model | str = "v32") -> tuple[tuple[str, int], ...]:
    """(region, TMEM columns) of the duplicated-Q variant: O 256 (512 fp32 per lane over the two lane halves), Q
    with both lane halves holding all ``d_q`` bf16 dims (``d_q / 2`` columns), P ``B_TOPK / 2`` (N = 64 per half)."""
    m = model(m)
    return tuple(zip(DUP_Q_REGIONS, (256, m.d_q // 2, B_TOPK // 2), strict=True))


def dup_q_allocation(m: Head64Model | str = "v32") -> tuple[list[tuple[str, int, int | None]], str | None]:
    """The duplicated-Q variant's TMEM regions (:func:`dup_q_regions`) run through the allocator
    (:class:`simtc.tmem.memory.TensorMemory`): each is allocated as power-of-two ``tcgen05.alloc`` chunks, largest
    first (sizes never increase, as PTX asks). Returns the chunks ``(region, columns, first column or None where
    refused)`` up to the first refusal, and the allocator's refusal (``None`` if everything fitted)."""
    from simtc.tmem.memory import TensorMemory

    tm = TensorMemory()
    out: list[tuple[str, int, int | None]] = []
    for region, cols in dup_q_regions(m):
        while cols > 0:
            chunk = max(32, 1 << (cols.bit_length() - 1))
            try:
                addr = tm.alloc(chunk)
            except SimtcError as e:
                out.append((region, chunk, None))
                return out, str(e)
            out.append((region, chunk, addr.column))
            cols -= chunk
    return out, None


def _dup_q_refusals(m: Head64Model) -> tuple[int, str]:
    from simtc.kernels.flashmla.plan import NOPE_VIEW

    regions = dup_q_regions(m)
    chunks, refusal = dup_q_allocation(m)
    need = sum(n for _, n in regions)
    placed = ", ".join(f"{r} {n} at {c}-{c + n - 1}" for r, n, c in chunks if c is not None)
    refused = next(((r, n) for r, n, c in chunks if c is None), None)
    alloc = f"{placed}; then {refused[0]} {refused[1]} is refused: {refusal}" if refused else f"{placed}: all fit"
    why = (f"needs {' + '.join(f'{r} {n}' for r, n in regions)} = {need} > 512 columns. The TMEM allocator, region "
           f"by region: {alloc}.")
    last = 256 + m.d_q // 2 - 8  # the last duplicated Q copy (8 columns) starts here
    cp = _refusal(lambda: Cp(last, NOPE_VIEW.descriptor(start=0, k_slice=0)))
    if cp != "accepted":
        why += f" With all 512 allocated at once, the last Q copy (columns {last}-{last + 7}) is refused: {cp}"
    return need, why


def _f_slab_refusal(m: Head64Model) -> tuple[int, str]:
    need = 256 + m.d_q // 2 + B_TOPK
    last = 256 + m.d_q // 2 - 8
    cp = _refusal(lambda: Mma(last, last, NOPE_TILE.descriptor(start=0), QK64_IDESC, enable_input_d=True))
    return need, (f"a TS A sits at D's lane alignment, so Q in one F slab takes {m.d_q // 2} columns: O 256 (two "
                  f"N=256 accumulators interleaved at L0 = 0 / 16; 512 in one slab) + Q {m.d_q // 2} + P 64 = "
                  f"{need} > 512 columns; an MMA reading A at column {last}: {cp}")


def _refused_bytes(m: Head64Model) -> float:
    """SMEM operand bytes per block of a variant with 2 x qk_mmas TS QK MMAs of N=64 (B only: 64 rows x 32 B)
    and the kernel's 8 PV MMAs (S 2 KiB + V 8 KiB each)."""
    return float(2 * m.qk_mmas * B_TOPK * 32 + 8 * (2048 + 8192))


@frozen
class Variant:
    """One row of :func:`compare` (see :meth:`to_json`)."""

    name: str
    design: str
    tmem_columns: int
    smem_bytes: int
    fits: bool
    mma_per_block: int
    tensor_pipe_busy_per_block: float | None
    cycles_per_block: float | None
    exchange_instructions: int
    exchange_cycles_per_block: float | None
    smem_bytes_per_qk_mma: float | None
    smem_operand_bytes_per_block: float | None
    checks: str
    ok: bool | None
    why: str
    exchange_rests_on: tuple[str, ...] = ()
    """The timing parameters the exchange's cycles rest on (:func:`exchange_parameters`), ``name [label]``."""

    def to_json(self) -> dict:
        return attrs.asdict(self)


def _row(name, design, program, r, fits, why, checks, smem_bytes=None, tmem=None) -> Variant:
    eng = r.engine
    ex = exchange_instructions(program)
    mmas = sum(1 for x in program.role("mma").records if isinstance(x, Mma)) // _blocks(program)
    return Variant(name, design, tmem if tmem is not None else r.tmem_columns,
                   smem_bytes if smem_bytes is not None else r.smem_bytes, fits, mmas,
                   round(tensor_pipe_per_block(eng), 1), round(r.cycles_per_block, 1), sum(ex.values()),
                   round(exchange_cost(eng), 1) if sum(ex.values()) else 0.0,
                   smem_bytes_per_mma(program)["qk_per_mma"], smem_bytes_per_mma(program)["per_block"], checks, r.ok,
                   why, tuple(f"{p['name']} [{p['label']}]" for p in exchange_parameters(program)) if sum(ex.values())
                   else ())


VARIANTS = ("dual-gemm", "duplicated-q", "ss-q-smem", "layout-f-one-slab", "layout-f-split", "prefill-overlap",
            "b0-b1-collectors")


def compare(model_name: str | Head64Model = "v32", blocks: int = 4, seed: int = 0, progress=None) -> list[Variant]:
    """Every variant of :data:`VARIANTS` on the same inputs (seed), engine and checker. ``progress(phase, done,
    total)`` is told of each of the 5 replays."""
    from simtc.kernels.flashmla.head64 import head64_program

    m = model(model_name)
    inp = make_inputs(m, blocks, seed)
    resc = rescale_blocks(inp, reference_p(inp))
    base = head64_program(m, blocks, resc)
    rows: list[Variant] = []

    runs = [0]

    def run(fn, **kw):  # timing-only rows assume the data's rescale pattern (same Program as the checked rows)
        if progress is not None:
            progress("variants", runs[0], 5)
        runs[0] += 1
        if kw.get("timing_only"):
            kw["rescale"] = [i for i, r in enumerate(resc) if r]
        return replay(m, blocks, seed, transform=fn, keep_engine=True, **kw)

    r = run(None)
    limit = f"{SMEM_LIMIT:,} B (227 KiB)"
    rows.append(_row("dual-gemm", f"the kernel: {m.qk_mmas} .ws TS QK MMAs N=128 (Q split over the lane halves) + 8 "
                     "PV; P_lo/P_hi exchange", base, r, True,
                     f"O 256 + Q {m.d_q // 4} + P 64 = {r.tmem_columns} <= 512 columns; {m.smem.total:,} B <= {limit}",
                     "semantics: P, O, LSE, counts, hazards"))
    need, why = _dup_q_refusals(m)
    rows.append(Variant("duplicated-q", f"Q in both lane halves, {2 * m.qk_mmas} .ws TS QK MMAs N=64 + 8 PV, P 32 "
                        "columns, no exchange", need, m.smem.total, False, 2 * m.qk_mmas + 8, None, None, 0, None,
                        float(B_TOPK * 32), _refused_bytes(m), "refused (not built)", None, why))
    ss = ss_q_smem(base)
    smem = m.smem.total + m.q_tma_bytes
    r = run(ss_q_smem, timing_only=True, check=False)
    rows.append(_row("ss-q-smem", f"earlier kernel: Q resident in SMEM, {2 * m.qk_mmas} .ws SS QK MMAs N=64 + 8 PV, "
                     "no Q copies, no exchange", ss, r, False,
                     f"Q can no longer alias dequant[0]: {m.smem.total:,} + {m.q_tma_bytes:,} = {smem:,} B > {limit}; "
                     "A + B read from SMEM by every QK instruction", "timing only, checker off (does not fit)",
                     smem_bytes=smem, tmem=256 + B_TOPK // 2))
    need, why = _f_slab_refusal(m)
    rows.append(Variant("layout-f-one-slab", f"non-.ws M=64 (Layout F, II = N/2), Q in one slab: {2 * m.qk_mmas} QK "
                        "N=64 + 8 PV N=256", need, m.smem.total, False, 2 * m.qk_mmas + 8, None, None, 0, None,
                        float(B_TOPK * 32), _refused_bytes(m), "refused (not built)", None, why))
    f = layout_f(base)
    r = run(layout_f, timing_only=True)
    rows.append(_row("layout-f-split", f"non-.ws M=64 (Layout F), Q halves in the L0 = 0 / 16 slabs: "
                     f"{2 * m.qk_mmas} QK N=64 + 8 PV N=256 (a dual GEMM again)", f, r, True,
                     f"fits ({r.tmem_columns} columns) only by splitting Q over the two F slabs, which needs the "
                     "exchange again (as an intra-warp shuffle: softmax records kept, timing only); half datapath: "
                     "II = N/2", "timing, checker on"))
    o = prefill_overlap(base)
    r = run(prefill_overlap)
    rows.append(_row("prefill-overlap", "P freed after its TMEM loads (p_free), QK(i+1) before PV(i); exchange(i+1) "
                     "waits PV(i) (S shares the exchange buffer)", o, r, True,
                     "same TMEM and SMEM (p_free in the plan's 8 B of tail padding)",
                     "semantics: P, O, LSE, counts, hazards"))
    c = collectors(base)
    r = run(collectors)
    rows.append(_row("b0-b1-collectors", "consecutive .ws MMAs alternate collector::b0/b1::discard", c, r, True,
                     "same TMEM and SMEM; only the B-collector usage changes", "semantics: P, O, LSE, counts, hazards"))
    return rows
