"""``simtc tour``: a narrated replay of FlashMLA's SM100 head64 decode kernel, in a few seconds on a CPU.

It walks through the dual GEMM with numbers from the simulator itself: Q's placement in TMEM by
``tcgen05.cp``, the 128-row aliased view of K, one instruction computing two independent 64x64x16
products, the 18 QK instructions filling the TMEM map, the P_lo/P_hi exchange and its cost on the engine
(with the labelled timing parameters that cost rests on), one replay's timeline with the hazard checker's
findings (FlashMLA's own known race labelled and apart), the comparison with the design alternatives, the replay's
checks (P's placement and layouts bit-exact, O / LSE errors, SASS counts against a recorded build, the A fragment's
column step, duplicated Q refused by the TMEM allocator, no hazard besides the known race) and the predicted
throughput, whole kernel first, each figure saying what it includes, ending with ``PASS`` (exit 0) or ``FAIL``
(exit 1). It answers three questions about the dual GEMM (FlashMLA ``config.h`` lines 196-198, ``TiledMMA_P``
with N = ``B_TOPK*2``, at ``9241ae3``) with the replay's numbers; the exchange's cost is
:func:`simtc.kernels.flashmla.story.exchange_share`'s statement, the one notebook 03 prints. Text follows the
terminal width (``--width`` to force one).
"""

from __future__ import annotations

from simtc.cli._common import int_in

__all__ = ["register", "run", "tour_lines"]


def register(sub) -> None:
    p = sub.add_parser("tour", help="a narrated replay of FlashMLA head64's dual GEMM (a few seconds, CPU only)",
                       description="A narrated replay of FlashMLA's SM100 sparse-decode head64 kernel: Q in TMEM, "
                                   "the aliased K view, the dual GEMM, the exchange, the timeline, the alternatives, "
                                   "and the checks. Exit 0 when every check passes, 1 otherwise.")
    p.add_argument("--width", type=int_in(40, 400, "a width of 40-400 columns"), default=None,
                   help="text width (default: the terminal's)")
    p.add_argument("--blocks", type=int_in(2, 64, "blocks is an integer 2-64"), default=4,
                   help="top-k blocks of the replayed request (default 4)")
    p.set_defaults(handler=run)


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent) or [""]


def _tmem_bar(regions, width: int) -> list[str]:
    """The 512 TMEM columns as one bar of letters scaled to ``width`` (O, Q, T = Q RoPE, P, . = free)."""
    cols = max(16, width - 2)
    sym = {"o": "O", "q": "Q", "q_tail": "T", "p": "P"}
    bar = ["."] * cols
    for r in regions:
        s = sym.get(r.name.lower())
        if s is None:
            continue
        for x in range(r.columns[0] * cols // 512, (r.columns[1] + 1) * cols // 512):
            bar[x] = s
    return ["|" + "".join(bar) + "|", "0" + f"{'511':>{cols + 1}}"]


def tour_lines(width: int, blocks: int = 4, progress=None) -> tuple[list[str], bool]:
    """The tour's text and whether every check passed."""
    from itertools import pairwise

    from simtc.hw.flashmla import RECORDED_SM100_SASS, recorded_sass_agreement
    from simtc.isa.tcgen05 import Cp, Mma
    from simtc.kernels.flashmla.alternatives import compare, dup_q_allocation, hbm_bound
    from simtc.kernels.flashmla.constants import P_COLUMN, Q_COLUMN, Q_TAIL_COLUMN
    from simtc.kernels.flashmla.fragment import a_reads_outside, qk_a_addresses, readdress_qk_a, tmem_address
    from simtc.kernels.flashmla.head64 import head64_program
    from simtc.kernels.flashmla.models import V32
    from simtc.kernels.flashmla.plan import NOPE_VIEW
    from simtc.kernels.flashmla.replay import (
        B200_CLOCK_GHZ,
        B200_SMS,
        LSE_TOL,
        O_TOL,
        PUBLISHED_TFLOPS,
        replay,
        split_dims,
    )
    from simtc.kernels.flashmla.story import exchange_share, hazard_counts, hazard_lines, throughput_basis

    out: list[str] = []

    def say(text: str = "", indent: str = "") -> None:
        out.extend(_wrap(text, width, indent))

    sections = [0]
    if progress is not None:  # one step per section (9), drawn by simtc.cli._progress on a terminal
        progress("tour", 0, 9)

    def head(text: str) -> None:
        sections[0] += 1
        if progress is not None:
            progress("tour", sections[0], 9)
        out.append("")
        title = _wrap(text, width)
        out.extend(title)
        out.append("-" * max(len(x) for x in title))

    r = replay("v32", blocks, 0, keep_engine=True)
    prog = head64_program("v32", blocks, [i in r.rescale_blocks for i in range(blocks)])
    mma = prog.role("mma").records
    cps = [x for x in mma if isinstance(x, Cp)]
    qks = [x for x in mma if isinstance(x, Mma) and x.label.startswith("QK")][:V32.qk_mmas]
    lo, hi = split_dims(V32, 0), split_dims(V32, 1)

    say("simtc tour: FlashMLA SM100 sparse decode, head64 V32 (64 heads x 64 tokens per block)")
    say("Three questions about FlashMLA's dual GEMM: why is K halved in the layouts with no loop running twice; "
        "does the dual GEMM add reduction work to the softmax, and why is it still worth it; and does the memory "
        "calculation of tA_frag (the A fragment's TMEM layout) in gemm.cuh matter? Every number below comes from "
        f"one replay of a {blocks}-block request on simtc's engine, with its data.")

    head("1. Q goes into Tensor Memory, split across the lane halves (tcgen05.cp)")
    say(f"{len(cps)} x tcgen05.cp.128x256b copy Q (64 x 576 bf16 = 73,728 B) from shared memory into TMEM columns "
        f"{cps[0].taddr & 0xFFFF}-{(cps[-1].taddr & 0xFFFF) + 7}. Each copy fills 8 columns of all 128 lanes through "
        "a 128-row view of Q whose rows 64-127 are the odd 64-dim chunks:")
    def dims_at(column: int) -> int:
        """Index into split_dims (k order: RoPE k = 0, 1, then NoPE k = 0..15) of the 16 dims at ``column``."""
        if column >= Q_TAIL_COLUMN:
            return 16 * ((column - Q_TAIL_COLUMN) // 8)
        return 16 * (V32.d_rope // 32) + 16 * ((column - Q_COLUMN) // 8)

    for k in (0, 1, len(cps) - 2):
        c = cps[k]
        col = c.taddr & 0xFFFF
        i = dims_at(col)
        say(f"cp #{k:<2} -> columns {col}-{col + 7}: lanes 0-63 hold Q[h][{lo[i]}..{lo[i + 15]}], "
            f"lanes 64-127 hold Q[h][{hi[i]}..{hi[i + 15]}]", "  ")
    say("The TMEM map (512 columns; O = output accumulator, Q, T = Q's RoPE part, P = QK result, . = free):")
    out.extend(_tmem_bar(V32.tmem, width))
    say(f"Used: {r.tmem_columns} of 512 columns (touched by the replay's records).")

    head("2. K in shared memory, seen as 128 rows (the aliased view)")
    d0, d64 = int(NOPE_VIEW.offset(0, 0)), int(NOPE_VIEW.offset(64, 0))
    say(f"The dequant warpgroup writes K (64 tokens x 512 dims bf16) as eight 64x64 SW128 tiles. The MMA's B "
        f"descriptor views the same bytes as 128 rows x 256 columns: row n and row n + 64 start {d64 - d0:,} B apart "
        "(one tile), so rows 64-127 are the odd 64-dim chunks of the same 64 tokens. No copy, no second buffer.")

    head("3. One instruction, two independent 64x64x16 products")
    q = qks[2]
    say(f"{q.ptx()}")
    say(f"tcgen05.mma.ws M=64 N=128 (Layout E): D column n < 64 lands in lanes 0-63, n >= 64 in lanes 64-127, "
        f"both at TMEM column {q.d_taddr & 0xFFFF} + (n mod 64). Each lane half reads A from its own lanes "
        f"(column {q.a & 0xFFFF}):")
    say(f"lanes 0-63 (softmax warps 0, 1): P_lo[h][t] += sum_j Q[h][e_j] K[t][e_j], e = dims {lo[32]}..{lo[47]}",
        "  ")
    say(f"lanes 64-127 (warps 2, 3):      P_hi[h][t] += sum_j Q[h][o_j] K[t][o_j], o = dims {hi[32]}..{hi[47]}",
        "  ")
    say("The second GEMM is the upper N half of every instruction: the halving of K lives in the data placement "
        "(steps 1 and 2), not in control flow. The only loop is the k loop over K/2.")

    head(f"4. The {len(qks)} QK instructions fill P")
    cols = [(x.a & 0xFFFF) for x in qks]
    say(f"A columns read, in issue order: {', '.join(map(str, cols))} (RoPE first). Every instruction accumulates "
        f"into columns {qks[0].d_taddr & 0xFFFF}-{(qks[0].d_taddr & 0xFFFF) + 63}, all 128 lanes. After the last: "
        f"P_lo (lanes 0-63) sums {len(lo)} dims, P_hi (lanes 64-127) the other {len(hi)}; P = P_lo + P_hi = Q K^T.")
    addrs = qk_a_addresses(prog)
    rope_a = [c for lab, _, c in addrs if "RoPE" in lab]
    nope_a = [c for lab, _, c in addrs if "RoPE" not in lab]
    steps = {b - a for part in (rope_a, nope_a) for a, b in pairwise(part)}
    step = next(iter(steps)) if len(steps) == 1 else None
    wide = lambda p: readdress_qk_a(p, lambda k: tmem_address(2 * 16 * k))  # noqa: E731  (16 columns a k-block)
    import numpy as np

    with np.errstate(all="ignore"):  # the wrong A makes P garbage: overflows in the softmax are the point
        broken = replay("v32", 1, 0, transform=wide)
    outside = a_reads_outside(wide(head64_program("v32", 1)))
    say(f"Where A's addresses come from (Q3): FlashMLA makes each A fragment with CuTe, "
        "make_fragment_A(partition_shape_A(...)) (kernel.cuh lines 537-550 at 9241ae3), then overwrites its data "
        f"pointer with tmem_cols::Q_Tail ({Q_TAIL_COLUMN}, RoPE) or tmem_cols::Q ({Q_COLUMN}, NoPE). Each "
        "instruction receives one address: that base plus the fragment's offset of its k-block. The Program issues "
        f"lane {addrs[0][1]}, columns {rope_a[0]} + {step}k and {nope_a[0]} + {step}k: a step of {step} columns "
        f"({2 * step} bf16, one K=16 slice) per k-block. That step is all of the fragment's layout the hardware "
        "sees; the base CuTe computed is replaced, and which lanes hold which rows inside a k-block is never sent "
        "(the .ws instruction reads A's rows from lanes 0-63 and 64-127 by its own layout). So the calculation "
        "matters "
        f"through its stride: with a step of {2 * step} columns instead, P is "
        f"{'still' if broken.p_bit_exact else 'no longer'} bit-exact (the replay's P check) and {len(outside)} "
        f"instructions read columns {outside[0][1]}-{outside[-1][2]}, outside Q's "
        f"{Q_COLUMN}-{P_COLUMN - 1}.")
    say(f"Replay check of the placement and layouts: what the softmax warps' tcgen05.ld returned equals "
        f"tensor_core_mma of each lane half's {len(qks)}-step chain, bit for bit: {r.p_bit_exact}. Both sides use the "
        "same tensor-core arithmetic, so this checks where the data sits and how it is read, not the arithmetic "
        "itself (whose evidence is MMA-Sim and the H200 recordings).")

    rows = compare("v32", blocks, 0)
    base = rows[0]
    dup_chunks, dup_refusal = dup_q_allocation("v32")
    from simtc.kernels.flashmla.alternatives import exchange_band

    eb = exchange_band("v32", blocks, 0)
    share = exchange_share(r)
    head("5. The exchange: the reduction the dual GEMM costs")
    say(f"Warps 0/2 and 1/3 swap half rows through a 16 KiB shared buffer and add: per softmax thread per block "
        f"{base.exchange_instructions} extra instructions (1 LDTM.x32, 8 STS.128, 8 LDS.128, 16 FADD2, one 64-thread "
        "barrier). Their cycles on the engine (a model, not checked on a Blackwell GPU), from the trace: the "
        f"second P load, stores, pair barrier and loads. {share.text()} The exchange's cycles have the band "
        f"{eb['low']:.0f}-{eb['high']:.0f} (each parameter not measured here moved x/÷1.25 if assumed, x/÷1.10 if "
        f"derived, in timing-only replays with no O rescale, where they are {eb['value']:.0f} as well). It rests "
        f"on {eb['parameters']} timing "
        "parameters, "
        f"{eb['measured_on_sm90']} of them measured on the H200 and taken as equal on a B200; the band comes most "
        f"from {', '.join(r['name'] + ' [' + r['label'] + ']' for r in eb['rests_on'][:3])}.")

    head("6. The replay's timeline")
    from simtc.render.export import to_text
    from simtc.render.timeline import TimelineView

    tl = TimelineView(r.engine, width=width, barriers=False, hazards=False)
    out.extend(to_text(tl, width=width).rstrip("\n").split("\n"))
    for line in hazard_lines(r):
        say(line.strip(), "  " if line.startswith("  ") else "")

    head("7. The alternatives, on the same inputs, engine and checker")
    from simtc.cli.compare import table_lines

    table = table_lines(rows, width)
    out.extend(table[:table.index(next(x for x in table if x.startswith("TMEM = columns")))])
    say("exch cyc = the exchange's cycles per block on a softmax warp (engine trace), resting on the parameters "
        "named in step 5.")
    dup, ss, fsplit, ovl, col = rows[1], rows[2], rows[4], rows[5], rows[6]
    say(f"Duplicated Q needs {dup.tmem_columns} TMEM columns: the allocator refuses it (region by region, its last "
        f"{dup_chunks[-1][1]} columns find no free block once 512 are taken). Q resident "
        f"in SMEM needs {ss.smem_bytes:,} B of shared memory (limit 232,448) and reads "
        f"{ss.smem_operand_bytes_per_block:,.0f} B of operands per block vs {base.smem_operand_bytes_per_block:,.0f}. "
        "Non-.ws Layout F fits only with Q split "
        f"again and runs {fsplit.cycles_per_block:.0f} cycles per block (half datapath). Cheap timing variants: "
        f"prefill-style overlap {ovl.cycles_per_block:.0f}, b0/b1 collectors {col.cycles_per_block:.0f} cycles per "
        "block.")

    head("The three answers")
    say(f"Q1: K is halved because each .ws M=64 N=128 instruction computes two 64x64x16 products in its two lane "
        f"halves, fed by where Q (tcgen05.cp) and K (the 128-row view) were placed; {len(qks)} instructions, no "
        "second loop.", "  ")
    say(f"Q2: yes, the softmax pays {base.exchange_instructions} instructions per block for the exchange (their "
        "cycles on the engine, and the parameters these rest on, in step 5). It pays because Q stays in TMEM "
        f"without duplication ({base.tmem_columns} instead of {dup.tmem_columns} columns) and out of shared memory "
        f"(which is full: {base.smem_bytes:,} of 232,448 B), with half the QK instructions ({len(qks)} instead of "
        f"{2 * len(qks)}) and no A traffic from shared memory.", "  ")
    say(f"Q3: yes, through one number: the A fragment's k-block stride, {step} columns per instruction, is the "
        "only part of CuTe's calculation the instructions receive (step 4); the base is replaced by tmem_cols::Q "
        "and tmem_cols::Q_Tail, and the layout inside a k-block is never sent. A wrong stride breaks P.", "  ")

    hb = hbm_bound("v32")
    head("Checks")
    sass = recorded_sass_agreement("v32")
    same = [x for x in sass if x["difference"] == 0]
    differ = [x for x in sass if x["difference"]]
    rec = RECORDED_SM100_SASS
    other, known = hazard_counts(r)
    checks = [
        (f"P placement and layouts: what the softmax warps' tcgen05.ld returned equals tensor_core_mma of each lane "
         f"half's {len(qks)}-step chain in the kernel's order, bit for bit (both sides use simtc's tensor-core "
         "arithmetic; that arithmetic's own evidence is MMA-Sim and the H200 recordings)", bool(r.p_bit_exact)),
        (f"O rel. error {r.o_rel_error:.1e} <= {O_TOL:g} (float64 reference)", r.o_rel_error <= O_TOL),
        (f"LSE max abs error {r.lse_max_abs_error:.1e} <= {LSE_TOL:g} (float64 reference)",
         r.lse_max_abs_error <= LSE_TOL),
        (f"SASS counts: the replay Program's static counts against the recorded build at {rec['flashmla_commit'][:7]} "
         f"({rec['nvcc']}, {rec['arch']}): {len(same)} of {len(sass)} instructions equal ("
         + ", ".join(f"{x['instruction']} {x['program']}" for x in same[:4]) + ", ...); "
         + (", ".join(f"{x['instruction']} {x['recorded']} vs {x['program']}" for x in differ))
         + " differ by code a one-request replay does not run (split-KV epilogue, the P load's second branch)",
         all(x["explained"] for x in sass) and len(same) >= 9),
        (f"TMEM columns touched by the replay {r.tmem_columns} (O 256 + Q 144 + P 64 = 464)", r.tmem_columns == 464),
        (f"A fragment: the {len(addrs)} QK instructions read A at lane 0, columns {rope_a[0]} + {step}k (RoPE) and "
         f"{nope_a[0]} + {step}k (NoPE), inside Q's {Q_COLUMN}-{P_COLUMN - 1}; re-addressed with a {2 * step}-column "
         f"step the replay's P check fails and {len(outside)} of them read outside Q",
         step == 8 and not a_reads_outside(prog) and addrs[0][1] == 0 and not broken.p_bit_exact
         and len(outside) > 0),
        (f"no hazard besides FlashMLA's own known race ({known} of the checker's {other + known} findings, listed "
         "apart in step 6), no deadlock" if known else "no hazards, no deadlock",
         not r.hazards and r.deadlock is None and not r.semantics_errors),
        (f"duplicated Q ({dup.tmem_columns} columns) run through the TMEM allocator region by region: "
         + ", ".join(f"{g} {n} at {c}" for g, n, c in dup_chunks if c is not None)
         + f", then {dup_chunks[-1][0]} {dup_chunks[-1][1]} refused ("
         + (dup_refusal or "accepted").split(" [rule")[0] + "); the dual GEMM fits",
         dup_refusal is not None and not dup.fits and base.fits),
    ]
    for text, ok in checks:
        out.extend(_wrap(f"[{'ok' if ok else 'FAIL'}] {text}", width, "  "))
    say(f"Throughput predicted for a {B200_SMS}-SM B200 at {B200_CLOCK_GHZ} GHz, every SM running such a request: "
        f"{throughput_basis(r)}: whole kernel {r.tflops_whole:.0f} TFLOP/s ({r.cycles_whole:,} cycles for the "
        f"{blocks}-block request, Q load, first block and epilogue included; they weigh less in a longer request, "
        "try --blocks 32); steady state "
        f"{r.tflops_steady:.0f} TFLOP/s ({r.cycles_per_block_steady:.0f} cycles per block; the SM's HBM share of "
        f"{hb['bytes_per_cycle_per_sm']} B/cycle needs at least {hb['min_cycles_per_block']:.0f}). FlashMLA publishes "
        f"up to {PUBLISHED_TFLOPS} for its own benchmark shapes. A model's prediction, not a bound: it includes HBM "
        "and L2 bandwidth and latency, but no B200 measurement checks it, the TMA gather4 throughput is unknown, and "
        "there is no scheduler or combine kernel. Which parameters it rests on: simtc timing sensitivity "
        "flashmla-head64.")
    passed = all(ok for _, ok in checks)
    out.append("")
    out.append(f"{'PASS' if passed else 'FAIL'}: {sum(ok for _, ok in checks)}/{len(checks)} checks"
               f"{'' if passed else ' (see [FAIL] above)'}")
    return out, passed


def run(args) -> int:
    import shutil

    width = args.width or max(40, shutil.get_terminal_size((100, 24)).columns)
    from simtc.cli._progress import progress

    with progress() as update:
        lines, passed = tour_lines(width, args.blocks, progress=update)
    print("\n".join(lines))
    return 0 if passed else 1
