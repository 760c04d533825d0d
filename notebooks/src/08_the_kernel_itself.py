# %% [markdown]
# # 08 · The kernel itself: FlashMLA's compiled head64, executed and compared
#
# Notebook 03 answered two of the dual GEMM's questions from simtc's **hand Program**, a transcription of FlashMLA's
# `csrc/sm100/decode/head64/kernel.cuh` at `9241ae3`:
#
# * **Q1.** Why is the QK product's K extent halved with no second loop — where do the "/2"s come from?
# * **Q3.** Of CuTe's computation of the A fragment `tA_frag`, what reaches the hardware?
#
# A transcription can be wrong. This notebook asks the same questions of **the kernel nvcc compiles**: FlashMLA's
# `instantiations/v32.cu` built for `sm_100a` with FlashMLA's flags and `-lineinfo`, its parameters built the way
# FlashMLA's host code builds them, executed instruction by instruction by simtc's PTX executor
# (`simtc.cuda.executed_sm100.head64`), one CTA recorded as a Program of the same record classes the hand Program
# uses, and held against it record by record (`simtc.kernels.flashmla.executed_head64.diff_programs`; in a shell:
# `simtc program diff flashmla-head64 --executed`). `docs/kernel.md` explains each residual.
#
# **Two ways this notebook runs.** The repository does not hold FlashMLA's source, so
#
# * **always** (CI, the documentation site) it reads what the compiled kernel did from the recordings of past runs:
#   `tests/data/flashmla_head64_executed.json` (the executed kernel's output digests, its record-by-record diff
#   against the hand Program, engine figures) and `tests/data/flashmla_sm100_sass.json` (the SASS instruction counts
#   of the same build), and holds them against what it computes here;
# * **with a FlashMLA checkout** (`SIMTC_FLASHMLA_DIR=/path/to/FlashMLA`, its `csrc/cutlass` headers at `147f567`,
#   and nvcc on `PATH`) it also compiles the kernel, executes it (about 5 s), shows the recording is reproduced, finds
#   the lines the questions are about in the executed instructions, and steps through them.
#
# **Sources.** FlashMLA is cited from `deepseek-ai/FlashMLA` at commit `9241ae3` by file and line, CUTLASS from
# `NVIDIA/cutlass` at `147f567`; open them beside the notebook. Tags as in `docs/sources.md`: **[kernel]** FlashMLA
# source, **[doc]** PTX ISA 9.0, **[inferred]** our reading. Nothing here ran on a Blackwell GPU: "executed" means
# executed by simtc's PTX executor, whose semantics are simtc's model of the PTX ISA.

# %%
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
from IPython.display import display
from rich.table import Table

import simtc
from simtc.isa.tcgen05 import Cp, Mma
from simtc.kernels.flashmla import (
    B_H,
    B_TOPK,
    D_NOPE,
    D_Q,
    D_ROPE,
    P_COLUMN,
    Q_COLUMN,
    Q_TAIL_COLUMN,
    QK_IDESC,
    SMEM_V32,
)
from simtc.kernels.flashmla import executed_head64 as ex
from simtc.kernels.flashmla.constants import INSTR_K
from simtc.kernels.flashmla.head64 import head64_program
from simtc.kernels.flashmla.io import make_inputs, replay_inputs
from simtc.kernels.flashmla.models import model
from simtc.kernels.flashmla.plan import NOPE_VIEW, ROPE_VIEW
from simtc.render.mma import InstrDescriptorView

DATA = Path(simtc.__file__).resolve().parents[1] / "tests" / "data"
CHECKOUT = os.environ.get("SIMTC_FLASHMLA_DIR")
LIVE = bool(CHECKOUT) and shutil.which("nvcc") is not None
print("live: FlashMLA at", CHECKOUT, "is compiled and executed below" if LIVE else
      "no: SIMTC_FLASHMLA_DIR is unset or nvcc is not on PATH; the cells marked 'live' skip and the notebook answers "
      "from the recordings")

# %% [markdown]
# ## 1. What the hand Program says the MMA warp issues
#
# The record stream to hold the kernel against: simtc's Program of the V32 kernel over one block of 64 tokens
# (`head64_program("v32", 1)`), role `mma` (warp 4). Per request it copies Q into Tensor Memory (TMEM) with 18
# `tcgen05.cp`; per block it issues 18 QK `tcgen05.mma.ws` (2 RoPE, 16 NoPE) and 8 PV ones. The QK records are
# the ones the questions are about: each carries its D address (P, column 400), its A address in TMEM, its B
# shared-memory descriptor and its instruction descriptor.

# %%
M = model("v32")
hand = head64_program(M, 1, [False])
hand_mma = hand.role("mma").records
hand_cp = [r for r in hand_mma if isinstance(r, Cp)]
hand_qk = [r for r in hand_mma if isinstance(r, Mma) and r.label.startswith("QK")]
hand_pv = [r for r in hand_mma if isinstance(r, Mma) and r.label.startswith("PV")]
nope0, rope0 = SMEM_V32["dequant0.nope"].offset, SMEM_V32["dequant0.rope"].offset
hand_table = Table(title="The hand Program's 18 QK instructions of block 0 (role mma, warp 4)")
for col in ("record", "D (TMEM column)", "A (TMEM column)", "B: descriptor start", "B: swizzle", "idesc"):
    hand_table.add_column(col, justify="left" if col == "record" else "right")
for r in hand_qk:
    hand_table.add_row(r.label, str(r.d_taddr), str(r.a), str(r.b_desc.start), r.b_desc.layout_type.name,
                       r.idesc.hex())
display(hand_table)
hand_a = [r.a for r in hand_qk]
print(f"{len(hand_cp)} tcgen05.cp, {len(hand_qk)} QK + {len(hand_pv)} PV tcgen05.mma.ws per block; A columns "
      f"{hand_a}")

# %% [markdown]
# ## 2. What the recordings say the compiled kernel did
#
# ### 2.1 Its outputs are the hand replay's, bit for bit
#
# `tests/data/flashmla_head64_executed.json` holds, for each recorded run (1, 2 and 4 V32 blocks, 1 and 2 MODEL1
# blocks, a 2 × 2 grid), the SHA-256 of the executed kernel's O (bf16 bits) and LSE, their errors against float64,
# and the same digests of the hand replay at the time. The hand replay runs here, now, on the same seeded request:
# if its O still hashes to what the compiled kernel wrote, the transcription still computes the kernel's bits.

# %%
rec = json.loads((DATA / "flashmla_head64_executed.json").read_text())
sass = json.loads((DATA / "flashmla_sm100_sass.json").read_text())
cases = Table(title=f"The recorded runs of FlashMLA {rec['flashmla_commit'][:7]} ({rec['nvcc']})")
for col in ("model", "blocks", "b x s_q", "O rel. error vs float64", "O = hand replay's", "LSE elements differing",
            "warp instructions"):
    cases.add_column(col, justify="right")
for c in rec["cases"]:
    cases.add_row(c["model"], str(c["blocks"]), f"{c['b']} x {c['s_q']}",
                  f"{max(r['o_rel_error'] for r in c['rows']):.2e}",
                  str(c["out_sha256"] == c["replay_out_sha256"]), str(c["lse_elements_differing_from_replay"]),
                  f"{c['warp_instructions']:,}")
display(cases)


def sha(a) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


case1 = next(c for c in rec["cases"] if (c["model"], c["blocks"], c["b"], c["s_q"]) == ("v32", 1, 1, 1))
replayed = replay_inputs(make_inputs("v32", b=1, s_q=1, topk=64, seed=case1["seed"]))
o_is_kernels = sha(replayed.outputs.out) == case1["out_sha256"]
print(f"the hand replay's O, computed now, hashes to the executed kernel's recorded O: {o_is_kernels}; LSE differs "
      f"in {case1['lse_elements_differing_from_replay']} of 64 elements by at most "
      f"{case1['lse_max_abs_difference_from_replay']:.1e} (fast-math logf is lg2.approx in the kernel)")

# %% [markdown]
# ### 2.2 The build's instruction counts
#
# `tests/data/flashmla_sm100_sass.json` counts the SASS instructions of the same build (nvcc 13.0, `sm_100a`,
# disassembled with `nvdisasm`): `UTCHMMA.WS` is `tcgen05.mma.ws` with A in TMEM, `UTCCP.T.S` is `tcgen05.cp`. The
# loops are unrolled, so a static count is an issued count per block (MMAs) or per request (copies):

# %%
counts = sass["sass"]["v32"]
print(f"SASS of {sass['sources']['v32']}: UTCHMMA.WS x {counts['UTCHMMA.WS']} (the hand Program: "
      f"{len(hand_qk)} QK + {len(hand_pv)} PV per block), UTCCP.T.S x {counts['UTCCP.T.S']} (the hand Program: "
      f"{len(hand_cp)} per request)")

# %% [markdown]
# ### 2.3 Its asynchronous records are the hand Program's, but for explained kinds
#
# For each recorded run of one request, the recording holds the diff of the executed CTA's records against the hand
# Program's: per role, warp and record, in order, every field of every tcgen05, mbarrier, TMA and named-barrier
# record (`executed_head64.COMPARED`), each difference tied to an explanation or counted as unexplained. The
# hand side's record counts are recomputed here from the Program built above.

# %%
diff1 = case1["diff"]
streams = ex.hand_streams(hand, M)
hand_counts = {role.name: sum(len(ex._compared(streams[(role.name, w)], {}, warp=w)) for w in role.warps)
               for role in hand.roles}     # the diff's own selection: compared classes, a poll loop counted once
kinds = Table(title="The recorded differences, V32, 1 block (role | kind | record | field | explanation)")
kinds.add_column("difference")
kinds.add_column("count", justify="right")
for k, n in diff1["by_kind"].items():
    kinds.add_row(k, str(n))
display(kinds)
mma_ops = {k.split("|")[2] for k in diff1["by_kind"] if k.startswith("mma|")}
print("compared records per role (hand / executed): "
      + ", ".join(f"{r} {c['hand']}/{c['executed']}" for r, c in diff1["compared"].items())
      + f"; the hand side recomputed now: {hand_counts}")
print(f"unexplained: {diff1['unexplained']}; record classes with a difference in the MMA warp: {sorted(mma_ops)} "
      f"-- so no Cp, Mma or Commit of the executed MMA warp differs from the hand Program's in any field")
for key, text in rec["explanations"].items():
    print(f"  {key}: {text[:150]}...")

# %% [markdown]
# Read together: the compiled kernel's MMA warp issued the same `tcgen05.cp` and `tcgen05.mma.ws` records as the hand
# Program, in the same order and with every field equal — D and A addresses, descriptors, instruction descriptor,
# accumulate flag. Its only differences are how TMA copies name their coordinates and boxes (the hand Program names a
# tile by its byte offset and leaves the box to the tensor map) and, in a recording made by an executor that kept
# both paths' `bar.sync` for one arrival of a diverged warp, that extra record (the table shows which). So the
# table of section 1 *is* what the compiled kernel issues, and Q1 and Q3 can be answered from it — section 4. With a
# checkout, section 3 sees it directly.

# %% [markdown]
# ## 3. Live: compile, run, find the lines, step (needs `SIMTC_FLASHMLA_DIR`)
#
# ### 3.1 Compile and execute; the recording reproduced
#
# `executed_diff` compiles `instantiations/v32.cu` to PTX (cached), builds both kernel parameters as
# `KernelTemplate::run` does (`kernel.cuh` lines 858-961 at `9241ae3` [kernel]), launches the kernel in simtc's
# executor on the same seeded request, records CTA (0, 0, 0) and diffs it against the hand Program. The digests must
# be the recording's; the field residuals too; a residual the recording explains may be gone where the executor has
# since learnt to say the thing the hand Program's way (the diverged warp's one arrival, for one).

# %%
live = None
if LIVE:
    from simtc.cuda.executed_sm100.head64 import executed_diff, head64_ptx

    live = executed_diff(CHECKOUT, "v32", 1, seed=case1["seed"])
    run = live.run
    live_kinds = Counter(f"{x['role']}|{x['kind']}|{x['op']}|{x['field'] or ''}|{x['why'] or 'UNEXPLAINED'}"
                         for x in live.differences)
    fields = {k: n for k, n in live_kinds.items() if k.split("|")[1] == "field"}
    reproduced = {"O digest": sha(run.outputs.out) == case1["out_sha256"],
                  "LSE digest": sha(run.outputs.lse) == case1["lse_sha256"],
                  "field differences by kind": fields == {k: n for k, n in diff1["by_kind"].items()
                                                          if k.split("|")[1] == "field"},
                  "every other residual a recorded kind": set(live_kinds) <= set(diff1["by_kind"]),
                  "hand side of the comparison": all(live.counts()[r]["hand"] == c["hand"]
                                                     for r, c in diff1["compared"].items()),
                  "nothing unexplained": "UNEXPLAINED" not in "".join(live_kinds)}
    print(f"executed {sum(run.result.warp_instructions.values()):,} warp instructions in "
          f"{run.result.seconds:.1f} s; the recording reproduced: {reproduced}")
    gone = sorted(set(diff1["by_kind"]) - set(live_kinds))
    print("recorded residuals this executor no longer shows:", gone or "none")
else:
    print("skipped (no FlashMLA checkout): the recording of section 2 stands for this run")

# %% [markdown]
# ### 3.2 The executed MMA warp's instructions and the CUDA lines they came from
#
# With `-lineinfo` every PTX instruction follows a `.loc` directive naming its CUDA file and line; an inlined function's
# `.loc` also names the position it was inlined at (PTX ISA 9.0 §11.5 [doc], `.loc ... inlined_at FILE LINE COL`),
# and that position has its own `.loc` with its own `inlined_at`, up to the kernel. `call_chain` below follows that
# chain from an instruction's PTX line up to the kernel's source: for a QK MMA it runs from kerutils'
# `gemm.cuh` (the `tcgen05.mma` inline assembly) through CuTe's `gemm` to `utcmma_ts` (`helpers.cuh` line 68, the
# one loop over k-blocks) and the kernel line that called it. The A operand is a register; `defining` finds the PTX
# instruction that set it.

# %%
LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:,\s*function_name\s+\S+?)?(?:,\s*inlined_at\s+(\d+)\s+(\d+)"
                 r"\s+(\d+))?\s*$")
FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')


def call_chains(ptx: str, lines: set[int]) -> dict[int, list[str]]:
    """PTX line -> ``["file:line", ...]``: the instruction's source position, then each position it was inlined at."""
    text = ptx.splitlines()
    files = {int(m[1]): m[2].rsplit("/", 1)[-1] for m in map(FILE.match, text) if m}
    parent: dict[tuple, tuple | None] = {}
    last, out = None, {}
    for n, s in enumerate(text, start=1):
        m = LOC.match(s)
        if m:
            last = tuple(map(int, m.groups()[:3]))
            parent[last] = tuple(map(int, m.groups()[3:])) if m[4] else None
        elif n in lines:
            chain, at = [], last
            while at is not None and len(chain) < 32:
                chain.append(f"{files[at[0]]}:{at[1]}")
                at = parent.get(at)
            out[n] = chain
    return out


def defining(ptx: str, line: int, reg: str) -> str:
    """The last PTX instruction before ``line`` whose destination is ``reg``."""
    text = ptx.splitlines()
    dest = re.compile(rf"^\s*[a-z][\w.:]*\s+{re.escape(reg)},")
    return next(text[i].strip() for i in range(line - 2, -1, -1) if dest.match(text[i]))


if LIVE:
    recorded = run.recorded
    warp4 = recorded.program.role("warp4")
    ex_cp = [(i, r) for i, r in enumerate(warp4.records) if isinstance(r, Cp)]
    ex_mma = [(i, r) for i, r in enumerate(warp4.records) if isinstance(r, Mma)]
    ex_qk = [(i, r) for i, r in ex_mma if isinstance(r.a, int)]          # A in TMEM: the QK instructions
    ptx = head64_ptx(CHECKOUT, "v32")
    src = {i: recorded.source("warp4", i) for i, _ in ex_cp + ex_mma}
    chains = call_chains(ptx, {s.ptx_first for s in src.values()})
    kernel_line = {i: next(c for c in chains[s.ptx_first] if c.startswith("kernel.cuh:")) for i, s in src.items()}
    a_def = {i: defining(ptx, src[i].ptx_first, src[i].ptx_text.split("[")[2].split("]")[0]) for i, _ in ex_qk}
    qk_table = Table(title="The executed MMA warp's 18 QK instructions of block 0 (PTX lines of the compiled kernel)")
    for col in ("PTX line", "A set by", "A", "D", "B start", "idesc", "called from", "inlined through"):
        qk_table.add_column(col, justify="left" if col in ("A set by", "inlined through") else "right")
    for i, r in ex_qk:
        c = chains[src[i].ptx_first]
        qk_table.add_row(str(src[i].ptx_first), a_def[i], str(r.a), str(r.d_taddr), str(r.b_desc.start),
                         r.idesc.hex(), kernel_line[i], " <- ".join(x for x in c if not x.startswith("kernel.cuh")))
    display(qk_table)
    print("the Q copies come from:", dict(Counter(kernel_line[i] for i, _ in ex_cp)),
          "| the QK MMAs from:", dict(Counter(kernel_line[i] for i, _ in ex_qk)),
          "| the PV MMAs from:", dict(Counter(kernel_line[i] for i, r in ex_mma if not isinstance(r.a, int))))
else:
    print("skipped (no FlashMLA checkout)")

# %% [markdown]
# Where the learner's lines are, in what the kernel executed (`kernel.cuh` lines 537-552 at `9241ae3` [kernel]):
#
# * **the two `utcmma_ts` calls** (line 542, RoPE, and line 552, NoPE) are the last links of the QK instructions'
#   chains: 2 instructions are inlined from line 542 and 16 from line 552, all through the same `helpers.cuh` line 68.
#   Two calls, one unrolled loop each, no second pass over K;
# * **the fragments' shapes** `Shape<Int<B_H>, Int<D_ROPE/2>>` (line 538) and `Shape<Int<B_H>, Int<D_NOPE/2>>`
#   (line 548) are those counts: `utcmma_ts` issues one instruction per k-block of 16 (`size<2>(tA_frag)`), so
#   D_ROPE/2/16 = 2 and D_NOPE/2/16 = 16;
# * **`tmem_cols::Q_Tail`** (line 540; `config.h` lines 71-80) and **`tmem_cols::Q`** (line 550) are the A operands:
#   each is a `mov.b32` of a constant into the register the instruction reads — 384 and 392 for the RoPE pair,
#   256 + 8k for NoPE k. nvcc folded the whole fragment computation into 18 literals;
# * **the `SmemLayoutKTiles_DualGemm_*` views** (lines 541, 551; `config.h` lines 120-125 and 143-148) are the B
#   descriptors: the RoPE pair reads one 128-row SW64 view (`<2/2>` = 1 tile), the NoPE instructions four SW128
#   views of 128 rows (`<512/64/2>` = 4), 16 KiB apart, each read at four K offsets of 32 bytes;
# * the Q copies (`kernel.cuh` lines 482 and 507) are 16 NoPE and 2 RoPE `tcgen05.cp.128x256b`, filling TMEM columns
#   256-399 of all 128 lanes.

# %%
if LIVE:
    qk_from = Counter(kernel_line[i] for i, _ in ex_qk)
    views = {"RoPE": sorted({r.b_desc.start for i, r in ex_qk if kernel_line[i] == "kernel.cuh:542"}),
             "NoPE": sorted({r.b_desc.start for i, r in ex_qk if kernel_line[i] == "kernel.cuh:552"})}
    nope_views = sorted({(s - nope0) // NOPE_VIEW.nbytes for s in views["NoPE"]})
    rope_views = sorted({(s - rope0) // ROPE_VIEW.nbytes for s in views["RoPE"]})
    literal_a = [int(a_def[i].rstrip(";").split(",")[1]) if a_def[i].startswith("mov.b32") else None
                 for i, _ in ex_qk]
    print(f"QK MMAs per utcmma_ts call: {dict(qk_from)}; A operands as PTX literals: {literal_a}; NoPE B descriptor "
          f"starts {views['NoPE'][:4]}... = view tiles {nope_views} of {NOPE_VIEW.nbytes} B; RoPE starts "
          f"{views['RoPE']} = view tile {rope_views}")
    display(InstrDescriptorView(ex_qk[0][1].idesc))

# %% [markdown]
# ### 3.3 Step through them
#
# The recorded CTA is a Program like any other, so the engine runs it and `Stepper` walks it one event at a time
# (timing mode: the recording carries each record's operands, not the cells' bits). The 18 QK issues of block 0, with
# the TMEM cells each reads as A and writes as D — the same picture as notebook 03's §3, now of the compiled kernel:

# %%
if LIVE:
    from simtc.engine.stepper import Stepper
    from simtc.render.step import EventView

    s = Stepper(lambda: recorded.engine(), title=recorded.program.name)
    issues, n = [], 0
    while len(issues) < 18:
        n = s.find(warp=4, opcode="tcgen05.mma", kind="issue", start=n)
        issues.append(s.event(n))
    steps = Table(title="Block 0's QK issues in the executed kernel (stepper events)")
    for col in ("step", "cycle", "PTX", "reads TMEM: A", "and D", "writes TMEM: D"):
        steps.add_column(col, justify="right" if col in ("step", "cycle") else "left")
    for e in issues:
        a, d, (p,) = e.reads["tmem"][0], e.reads["tmem"][1:], e.writes["tmem"]
        steps.add_row(str(e.step), str(e.cycle), e.label.split("`")[0].strip(),
                      f"lanes {a['lanes'][0]}-{a['lanes'][1]}, columns {a['columns'][0]}-{a['columns'][1]}",
                      "P" if d else "-", f"lanes {p['lanes'][0]}-{p['lanes'][1]}, columns "
                      f"{p['columns'][0]}-{p['columns'][1]}")
    display(steps)
    stepped_a = [e.reads["tmem"][0]["columns"] for e in issues]
    display(EventView(issues[2], total=len(s)))
else:
    print("skipped (no FlashMLA checkout)")

# %% [markdown]
# ## 4. The answers, from what the compiled kernel issues
#
# **Q1 — where the "/2"s are.** The compiled kernel issues, per block, 18 QK `tcgen05.mma.ws`: 2 from the `utcmma_ts`
# call of line 542 and 16 from that of line 552 (the fragments' D_ROPE/2 and D_NOPE/2 dims in k-blocks of 16). Each
# carries the instruction descriptor 0x04200490: M = 64 = B_H, **N = 128 = B_TOPK × 2** (two products, P_lo and P_hi,
# in the two lane halves), K = 16 (kind::f16). 18 × 16 = 288 = D_Q/2: the other half of Q's dims is in the other
# lane half of the same TMEM columns, put there by the 18 copies of 128 lanes, and read by the same instructions. The
# A addresses walk Q_Tail (384, 392) and then Q (256 ... 376), 144 columns = 64·D_Q/256; the B descriptors walk the
# 128-row dual-GEMM views. There is no second loop because the halving is in the data's placement, not the loop.
#
# **Q3 — what of CuTe's `tA_frag` reaches the hardware.** One 32-bit TMEM address per instruction, and in the
# compiled kernel not even a computation: a literal in the PTX. The base is the kernel's `tmem_cols::Q_Tail` /
# `tmem_cols::Q`; what CuTe's layout contributes is the step between k-blocks, **8 columns** (16 bf16, two per 32-bit
# cell), lane 0. The fragment's row layout is not sent: the `.ws` M = 64 instruction reads its rows where its own
# data-path layout says (notebook 02 §7 [inferred]).
#
# The checks: always from the recordings and the hand Program; with a checkout, from the executed records themselves.

# %%
# The hand Program, what the kernel is held to (notebook 03's answers): 18 QK = D_ROPE/2/16 + D_NOPE/2/16, N = 2 B_TOPK
assert (len(hand_qk), len(hand_pv), len(hand_cp)) == (D_ROPE // 2 // INSTR_K + D_NOPE // 2 // INSTR_K, 8, 18)
assert (QK_IDESC.m, QK_IDESC.n, QK_IDESC.hex()) == (B_H, 2 * B_TOPK, "0x04200490")
assert len(hand_qk) * INSTR_K == D_Q // 2
assert hand_a == [Q_TAIL_COLUMN, Q_TAIL_COLUMN + 8] + [Q_COLUMN + 8 * k for k in range(16)]
assert Q_TAIL_COLUMN == Q_COLUMN + B_H * D_NOPE // 2 // 128 == 384 and P_COLUMN == 400
assert all(r.d_taddr == P_COLUMN and r.idesc == QK_IDESC for r in hand_qk)
# The compiled kernel, from the recordings: its O is the hand replay's, computed now; the build has 26 UTCHMMA.WS and
# 18 UTCCP; the record diff of the MMA warp touches only TMA coordinates/boxes and the diverged barrier, nothing else
assert o_is_kernels and all(c["out_sha256"] == c["replay_out_sha256"] for c in rec["cases"])
assert (counts["UTCHMMA.WS"], counts["UTCCP.T.S"]) == (len(hand_qk) + len(hand_pv), len(hand_cp))
assert diff1["unexplained"] == 0 and mma_ops <= {"CpAsyncBulkTensor", "BarSync"}
assert all(diff1["compared"][r]["hand"] == n for r, n in hand_counts.items())
assert diff1["compared"]["mma"]["executed"] - diff1["compared"]["mma"]["hand"] == sum(   # only the extra bar.sync
    n for k, n in diff1["by_kind"].items() if k.startswith("mma|only_executed|BarSync"))
if LIVE:
    # the recording reproduced, and the executed records themselves: Q1 and Q3 from the compiled kernel's instructions
    assert all(reproduced.values()), reproduced
    assert [r.a for _, r in ex_qk] == hand_a and literal_a == hand_a                   # Q3: 18 literals, 8 apart
    assert [ex.normalized(r) for _, r in ex_qk] == [ex.normalized(r) for r in hand_qk]  # every field the hand's
    assert [ex.normalized(r) for _, r in ex_cp] == [ex.normalized(r) for r in hand_cp]
    assert qk_from == {"kernel.cuh:542": D_ROPE // 2 // INSTR_K, "kernel.cuh:552": D_NOPE // 2 // INSTR_K}
    assert all("helpers.cuh:68" in chains[src[i].ptx_first] for i, _ in ex_qk)          # the one utcmma_ts loop
    assert Counter(kernel_line[i] for i, _ in ex_cp) == {"kernel.cuh:482": 16, "kernel.cuh:507": 2}
    assert all(r.idesc == QK_IDESC and r.d_taddr == P_COLUMN for _, r in ex_qk)         # Q1: N = B_TOPK*2, into P
    assert nope_views == list(range(512 // 64 // 2)) and rope_views == list(range(2 // 2))
    assert stepped_a == [[a, a + 7] for a in hand_a]                                     # stepped: 8 columns each
print("all facts of notebook 08 hold" + ("" if LIVE else " (from the recordings; set SIMTC_FLASHMLA_DIR to execute)"))
