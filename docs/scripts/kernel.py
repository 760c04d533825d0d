"""The kernel page (``docs/kernel.md``): FlashMLA head64's tables generated from simtc's model, every row with the
FlashMLA source line it rests on, and the check that those lines say what the page says they say.

The tables come from ``simtc.kernels.flashmla`` (``constants.py``, ``plan.py``, ``models.py``, ``head64.py``): the
values, the roles, who arrives on and who waits for each barrier (read from the records of ``head64_program``), the
TMEM and shared-memory plans. Each row also names the source line at FlashMLA commit ``9241ae3`` with a short quote of
it; building a table checks the model against the quote (an ``init(128)`` must be the model's count, an
``arrive_and_expect_tx(B_TOPK*D_NOPE*sizeof(e4m3))`` its transaction bytes, the roles the Program has must be the
roles the source names) and refuses a disagreement.

The quoted lines are recorded in ``tests/data/flashmla_head64_lines.json`` (the lines the page cites, taken from a
FlashMLA checkout with ``git show 9241ae3:<path>``, with each file's git blob id), so the page's citations are
checked without the source at hand: every ``kernel.cuh L<n>`` / ``config.h L<n>`` citation of the page (prose and
tables) must follow, in the same sentence or table cell, a backquoted fragment of the cited line(s).

    python docs/scripts/kernel.py --check               # the page's citations against the recording
    python docs/scripts/kernel.py --record ~/FlashMLA   # rewrite the recording from a checkout (git)
    python docs/scripts/kernel.py --verify ~/FlashMLA   # the recording against a checkout

Only the standard library is imported at module level.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "kernel.md"
RECORDING = ROOT / "tests" / "data" / "flashmla_head64_lines.json"
REPO = "deepseek-ai/FlashMLA"
COMMIT = "9241ae3"
COMMIT_FULL = "9241ae3ef9bac614dd25e45e507e089f888280e0"
FILES = {"kernel.cuh": "csrc/sm100/decode/head64/kernel.cuh", "config.h": "csrc/sm100/decode/head64/config.h"}
FULL_RANGE = 40
"""Ranges of up to this many lines are recorded whole; longer ones (a role's whole body) by their first and last."""

CITATION = re.compile(r"(?P<file>kernel\.cuh|config\.h) (?P<ranges>L\d+(?:-\d+)?(?:, L\d+(?:-\d+)?)*)")
_FRAGMENT = re.compile(r"`([^`\n]+)`")
_BOUNDARY = re.compile(r"\n\s*\n|\|| — |[.;:] (?=[A-Z`(])|\n\* |\n\d+\. ")


def _fail(message: str, rule: str):
    from simtc.errors import SimtcError

    raise SimtcError(message, rule=rule, ref=f"{REPO} {COMMIT} {', '.join(FILES.values())}")


def cite(file: str, *ranges: tuple[int, int] | int) -> str:
    """``kernel.cuh L43-62, L116`` from ``("kernel.cuh", (43, 62), 116)``.

    >>> cite("config.h", (33, 55), 79)
    'config.h L33-55, L79'
    """
    parts = [f"L{r}" if isinstance(r, int) else (f"L{r[0]}-{r[1]}" if r[0] != r[1] else f"L{r[0]}") for r in ranges]
    return f"{file} {', '.join(parts)}"


def parse_ranges(ranges: str) -> list[tuple[int, int]]:
    """``"L43-62, L116"`` -> ``[(43, 62), (116, 116)]``."""
    out = []
    for part in ranges.split(", "):
        a, _, b = part[1:].partition("-")
        out.append((int(a), int(b or a)))
    return out


def lines_to_record(ranges: list[tuple[int, int]]) -> set[int]:
    """The lines of ``ranges`` the recording keeps: all of a short range, the ends of a long one."""
    out: set[int] = set()
    for a, b in ranges:
        out |= set(range(a, b + 1)) if b - a < FULL_RANGE else {a, b}
    return out


# ---- the model's facts, each with its source line ---------------------------------------------------------------
def _sizeof(name: str) -> int:
    return {"bf16": 2, "e4m3": 1, "float": 4, "int": 4}[name]


def _namespace() -> dict:
    """The V32 constants as the model holds them, under the source's names (for evaluating the source's formulas)."""
    from simtc.kernels.flashmla import constants as c
    from simtc.kernels.flashmla.models import V32

    return {"D_Q": V32.d_q, "D_K": V32.d_q, "D_V": V32.d_v, "D_NOPE": V32.d_nope, "D_ROPE": V32.d_rope,
            "QUANT_TILE_SIZE": V32.quant_tile, "NUM_SCALES_EACH_TOKEN": V32.num_scales, "B_H": c.B_H,
            "B_TOPK": c.B_TOPK, "NUM_BUFS": c.NUM_BUFS, "NUM_INDEX_BUFS": c.NUM_INDEX_BUFS,
            "D_Q_SW128": c.D_NOPE, "D_Q_SW64": V32.d_rope, "K_ROPE_SW": int(V32.rope_swizzle[2:]), "sizeof": _sizeof,
            "bf16": "bf16", "e4m3": "e4m3"}


def _eval(expr: str):
    """A C++ constant expression of the source, with the model's values (``/`` of ints is C++'s integer division).

    >>> _eval("256 + B_H*D_NOPE/2/128"), _eval("B_TOPK*D_NOPE*sizeof(e4m3)"), _eval("128*3")
    (384, 32768, 384)
    """
    py = re.sub(r"(?<![/*])/(?![/*])", "//", re.sub(r"(?<=\d)f\b", "", expr))
    return eval(py, {"__builtins__": {}}, _namespace())  # the page's own constant expressions


def constants_rows() -> list[tuple[str, object, str, str, str]]:
    """``(name, model value, where simtc holds it, quote, citation)`` for each constant of the kernel (V32); the
    quote is the source's definition and its value must equal the model's."""
    import numpy as np

    from simtc.kernels.flashmla import constants as c
    from simtc.kernels.flashmla import effects
    from simtc.kernels.flashmla.head64 import PV_IDESC
    from simtc.kernels.flashmla.models import V32
    from simtc.kernels.flashmla.plan import SMEM_V32

    o_stride = (SMEM_V32["o_accum_buf"].size // 4 - c.D_V) // (c.B_H - 1)
    rows = [
        ("D_Q", c.D_Q, "constants.D_Q", "576", "D_Q = MODEL_TYPE == ModelType::V32 ? 576 : 512", cite("config.h", 33)),
        ("D_V", c.D_V, "constants.D_V", "512", "D_V = 512", cite("config.h", 35)),
        ("D_NOPE", c.D_NOPE, "constants.D_NOPE", "512", "D_NOPE = MODEL_TYPE == ModelType::V32 ? 512 : 448",
         cite("config.h", 36)),
        ("D_ROPE", c.D_ROPE, "constants.D_ROPE", "64", "D_ROPE = 64", cite("config.h", 37)),
        ("QUANT_TILE_SIZE", V32.quant_tile, "V32.quant_tile", "128", "QUANT_TILE_SIZE = MODEL_TYPE == ModelType::V32 ? "
         "128 : 64", cite("config.h", 38)),
        ("NUM_SCALES_EACH_TOKEN", V32.num_scales, "V32.num_scales", "4",
         "NUM_SCALES_EACH_TOKEN = MODEL_TYPE == ModelType::V32 ? 4 : 8", cite("config.h", 40)),
        ("TMA_K_STRIDE", V32.tma_k_stride, "V32.tma_k_stride", "D_NOPE+2*D_ROPE+4*(D_NOPE/QUANT_TILE_SIZE)",
         "D_NOPE+2*D_ROPE+4*(D_NOPE/QUANT_TILE_SIZE)", cite("config.h", 41)),
        ("B_H", c.B_H, "constants.B_H", "64", "B_H = 64", cite("config.h", 45)),
        ("B_TOPK", c.B_TOPK, "constants.B_TOPK", "64", "B_TOPK = 64", cite("config.h", 46)),
        ("NUM_BUFS", c.NUM_BUFS, "constants.NUM_BUFS", "2", "NUM_BUFS = 2", cite("config.h", 47)),
        ("NUM_INDEX_BUFS", c.NUM_INDEX_BUFS, "constants.NUM_INDEX_BUFS", "4", "NUM_INDEX_BUFS = 4",
         cite("config.h", 48)),
        ("NUM_THREADS", c.NUM_THREADS, "constants.NUM_THREADS", "128*3", "NUM_THREADS = 128*3", cite("config.h", 49)),
        ("MAX_INIT_VAL", float(effects._MAX_INIT), "effects._MAX_INIT", "-1e30", "MAX_INIT_VAL = -1e30f",
         cite("config.h", 50)),
        ("D_Q_SW128", SMEM_V32["q"].size // (2 * c.B_H), "SMEM_V32['q'].size / (2 B_H)", "512", "D_Q_SW128 = 512",
         cite("config.h", 52)),
        ("D_Q_SW64", SMEM_V32["q_sw64"].size // (2 * c.B_H), "SMEM_V32['q_sw64'].size / (2 B_H)", "64",
         "D_Q_SW64 = MODEL_TYPE == ModelType::V32 ? 64 : 0", cite("config.h", 53)),
        ("K_ROPE_SW", int(V32.rope_swizzle[2:]), "V32.rope_swizzle", "64",
         "K_ROPE_SW = MODEL_TYPE == ModelType::V32 ? 64 : 128", cite("config.h", 55)),
        ("tmem_cols::O", c.O_COLUMN, "constants.O_COLUMN", "0", "static constexpr int O = 0", cite("config.h", 76)),
        ("tmem_cols::Q", c.Q_COLUMN, "constants.Q_COLUMN", "256", "static constexpr int Q = 256", cite("config.h", 77)),
        ("tmem_cols::Q_Tail", c.Q_TAIL_COLUMN, "constants.Q_TAIL_COLUMN", "256 + B_H*D_NOPE/2/128",
         "Q_Tail = 256 + B_H*D_NOPE/2/128", cite("config.h", 78)),
        ("tmem_cols::P", c.P_COLUMN, "constants.P_COLUMN", "400", "static constexpr int P = 400", cite("config.h", 79)),
        ("O staging row stride", o_stride, "SMEM_V32['o_accum_buf'].size", "520", "Stride<Int<520>, _1>",
         cite("config.h", 104)),
        ("QK MMA: M, N", (c.QK_IDESC.m, c.QK_IDESC.n), "constants.QK_IDESC", "(B_H, B_TOPK*2)",
         "B_H, B_TOPK*2, UMMA::Major::K, UMMA::Major::K", cite("config.h", 197)),
        ("PV MMA: M, N", (PV_IDESC.m, PV_IDESC.n), "head64.PV_IDESC", "(B_H, 256)",
         "B_H, 256, UMMA::Major::K, UMMA::Major::MN", cite("config.h", 201)),
        ("TMEM columns allocated", c.TMEM_COLUMNS, "constants.TMEM_COLUMNS", "512",
         "Allocator1Sm().allocate(512, plan.tmem_start_addr.data())", cite("kernel.cuh", 63)),
        ("lazy O rescale threshold (log2 units)", float(effects.RESCALE_THRESHOLD), "effects.RESCALE_THRESHOLD",
         "6.0", "cur_pi_max - mi > 6.0f", cite("kernel.cuh", 231)),
        ("RoPE offset in a KV record (bytes)", V32.rope_offset, "V32.rope_offset", "D_NOPE+16", "(D_NOPE+16)",
         cite("kernel.cuh", 926)),
    ]
    for name, value, _where, expr, quote, _cite in rows:
        if expr.strip("()") not in quote:
            _fail(f"kernel page: the formula {expr!r} of {name} is not in its quote {quote!r}",
                  rule="a constant's formula is the source's")
        got = _eval(expr)
        same = np.float32(got) == np.float32(value) if isinstance(value, float) else got == value
        if not same:
            _fail(f"kernel page: {name} is {value} in simtc but {expr} = {got} in the source",
                  rule="the model's constants are the kernel's")
    return [(name, value, where, quote, where_cite) for name, value, where, _e, quote, where_cite in rows]


# roles: (role, quote of the branch, its lines, registers quote, its line, what it does)
ROLES = (
    ("softmax", "if (warpgroup_idx == 0)", (134, 426), "cutlass::arch::warpgroup_reg_alloc<224>()", 137,
     "waits for P, reads it from TMEM, exchanges half of it with warp w ^ 2, masks, takes the row maximum with the "
     "partner thread t ^ 64, decides the lazy rescale, computes exp2 and S (bf16, into shared memory), rescales O "
     "in TMEM when it must; after the last block: li, the LSE and the epilogue (O out of TMEM, scaled, bf16, "
     "stored by TMA)"),
    ("mma", "warp_idx == 4 && elect_one_sync()", (431, 585), "cutlass::arch::warpgroup_reg_dealloc<72>()", 428,
     "once per request: Q by TMA, then 18 `tcgen05.cp` of Q into TMEM; per block: the QK MMAs (RoPE, then NoPE), "
     "commit to `qk_done`, the PV MMAs once S is ready, commit to `sv_done`"),
    ("raw", "warp_idx == 5 && elect_one_sync()", (586, 615), "cutlass::arch::warpgroup_reg_dealloc<72>()", 428,
     "per block: 16 TMA gather4 of fp8 NoPE rows (4 tokens each) into `raw_nope[b]`, coordinates from `tma_coord`"),
    ("rope", "warp_idx == 6 && elect_one_sync()", (616, 652), "cutlass::arch::warpgroup_reg_dealloc<72>()", 428,
     "per block: 32 TMA gather4 of bf16 RoPE rows (two 32-dim SW64 halves of 4 tokens) into `dequant[b].rope`"),
    ("index", "warp_idx == 7", (653, 743), "cutlass::arch::warpgroup_reg_dealloc<72>()", 428,
     "per block: each lane takes 2 of the 64 top-k indices and writes their TMA row coordinates, their scales "
     "(e8m0) and the valid bits into the index ring"),
    ("dequant", "Dequant warpgroup", (748, 842), "cutlass::arch::warpgroup_reg_alloc<208>()", 749,
     "per block: fp8 NoPE x scale -> bf16 into the SW128 K tiles of `dequant[b].nope` (8 threads per token row), "
     "`fence.proxy.async`, then `nope_ready`"),
)


def _program(blocks: int = 4):
    from simtc.kernels.flashmla.head64 import head64_program

    return head64_program("v32", blocks)


def _records_summary(counts: dict[str, int]) -> str:
    parts = [f"{n} `{op}`" for op, n in counts.items() if not op.startswith("cuda_core") and op != "cuda_core"]
    return ", ".join(parts)


def roles_rows() -> list[tuple[str, str, int, str, str, str, str]]:
    """``(role, warps, threads, registers, what, records per block, source)``: warps and threads from the Program's
    roles (checked against the branch the source takes), records from ``per_block_counts``."""
    from simtc.kernels.flashmla.head64 import ROLE_WARPS, per_block_counts

    prog = _program()
    threads = {r.name: r.threads for r in prog.roles}
    per_block = per_block_counts("v32")
    if set(threads) != {r[0] for r in ROLES}:
        _fail(f"kernel page: roles {sorted(threads)} in the Program, {sorted(r[0] for r in ROLES)} on the page",
              rule="the page's roles are the Program's")
    rows = []
    for role, quote, lines, reg_quote, reg_line, what in ROLES:
        warps = ROLE_WARPS[role]
        m = re.search(r"(warpgroup_idx|warp_idx) == (\d+)", quote)
        want = (tuple(range(4 * int(m.group(2)), 4 * int(m.group(2)) + 4)) if m and m.group(1) == "warpgroup_idx"
                else (int(m.group(2)),) if m else (8, 9, 10, 11))
        elected = "elect_one_sync" in quote
        if warps != want or (threads[role] == 1) != elected:
            _fail(f"kernel page: role {role} runs on warps {warps} with {threads[role]} threads in the Program, the "
                  f"source's branch is {quote!r}", rule="the Program's roles are the kernel's branches")
        w = f"{warps[0]}–{warps[-1]}" if len(warps) > 1 else str(warps[0])
        rows.append((role, w, threads[role], f"`{reg_quote}` {cite('kernel.cuh', reg_line)}", what,
                     _records_summary(per_block[role]), f"`{quote}` {cite('kernel.cuh', lines)}"))
    return rows


# mbarriers: name -> [(operation, role, quote, line), ...]; operation: init, arrive, expect_tx (arrive with the
# transaction count), complete_tx (a TMA copy completing bytes on it), commit (tcgen05.commit), wait
_Q = "plan.bar_{}"
BARRIER_SITES: dict[str, list[tuple[str, str, str, int]]] = {
    "last_store_done": [("init", "", "plan.bar_last_store_done.init(128)", 45),
                        ("arrive", "softmax", "plan.bar_last_store_done.arrive()", 153),
                        ("wait", "raw", "plan.bar_last_store_done.wait(args.bar_phase_batch_rel)", 590),
                        ("wait", "rope", "plan.bar_last_store_done.wait(args.bar_phase_batch_rel)", 620)],
    "q_tma": [("init", "", "plan.bar_q_tma.init(1)", 46),
              ("complete_tx", "mma", "plan.bar_q_tma,", 446),
              ("complete_tx", "mma", "(uint64_t*)&plan.bar_q_tma", 454),
              ("expect_tx", "mma", "plan.bar_q_tma.arrive_and_expect_tx(B_H*D_Q*sizeof(bf16))", 461),
              ("wait", "mma", "plan.bar_q_tma.wait(args.bar_phase_batch_rel)", 462)],
    "q_utccp": [("init", "", "plan.bar_q_utccp.init(1)", 47),
                ("commit", "mma", "ku::umma_arrive_noelect(plan.bar_q_utccp)", 514),
                ("wait", "mma", "plan.bar_q_utccp.wait(args.bar_phase_batch_rel)", 526),
                ("wait", "raw", "plan.bar_q_utccp.wait(args.bar_phase_batch_rel)", 589),
                ("wait", "rope", "plan.bar_q_utccp.wait(args.bar_phase_batch_rel)", 619),
                ("wait", "dequant", "plan.bar_q_utccp.wait(args.bar_phase_batch_rel)", 762)],
    "rope_ready[i]": [("init", "", "plan.bar_rope_ready[i].init(1)", 49),
                      ("complete_tx", "rope", "plan.bar_rope_ready[rs.buf_idx],", 639),
                      ("expect_tx", "rope",
                       "plan.bar_rope_ready[rs.buf_idx].arrive_and_expect_tx(B_TOPK*D_ROPE*sizeof(bf16))", 648),
                      ("wait", "mma", "plan.bar_rope_ready[rs.buf_idx].wait(rs.bar_phase)", 535)],
    "nope_ready[i]": [("init", "", "plan.bar_nope_ready[i].init(128)", 50),
                      ("arrive", "dequant", "plan.bar_nope_ready[rs.buf_idx].arrive()", 837),
                      ("wait", "mma", "plan.bar_nope_ready[rs.buf_idx].wait(rs.bar_phase)", 545)],
    "raw_ready[i]": [("init", "", "plan.bar_raw_ready[i].init(1)", 51),
                     ("complete_tx", "raw", "plan.bar_raw_ready[rs.buf_idx],", 603),
                     ("expect_tx", "raw",
                      "plan.bar_raw_ready[rs.buf_idx].arrive_and_expect_tx(B_TOPK*D_NOPE*sizeof(e4m3))", 611),
                     ("wait", "dequant", "plan.bar_raw_ready[rs.buf_idx].wait(rs.bar_phase)", 767)],
    "raw_free[i]": [("init", "", "plan.bar_raw_free[i].init(128)", 52),
                    ("arrive", "dequant", "plan.bar_raw_free[rs.buf_idx].arrive()", 838),
                    ("wait", "raw", "plan.bar_raw_free[rs.buf_idx].wait(rs.bar_phase^1)", 594)],
    "valid_coord_scale_ready[i]": [
        ("init", "", "plan.bar_valid_coord_scale_ready[i].init(32)", 58),
        ("arrive", "index", "plan.bar_valid_coord_scale_ready[rs.index_buf_idx].arrive()", 730),
        *(("wait", role, "plan.bar_valid_coord_scale_ready[rs.index_buf_idx].wait(rs.index_bar_phase)", line)
          for role, line in (("softmax", 162), ("raw", 593), ("rope", 623), ("dequant", 766)))],
    "valid_coord_scale_free[i]": [
        ("init", "", "plan.bar_valid_coord_scale_free[i].init(128+128+1+1)", 59),
        *(("arrive", role, "plan.bar_valid_coord_scale_free[rs.index_buf_idx].arrive()", line)
          for role, line in (("softmax", 228), ("raw", 612), ("rope", 649), ("dequant", 839))),
        ("wait", "index", "plan.bar_valid_coord_scale_free[rs.index_buf_idx].wait(rs.index_bar_phase^1)", 691)],
    "qk_done[i]": [("init", "", "plan.bar_qk_done[i].init(1)", 53),
                   ("commit", "mma", "ku::umma_arrive_noelect(plan.bar_qk_done[rs.buf_idx])", 573),
                   ("wait", "softmax", "plan.bar_qk_done[rs.buf_idx].wait(rs.bar_phase)", 163),
                   ("wait", "rope", "plan.bar_qk_done[rs.buf_idx].wait(rs.bar_phase^1)", 625)],
    "so_ready[i]": [("init", "", "plan.bar_so_ready[i].init(128)", 54),
                    ("arrive", "softmax", "plan.bar_so_ready[rs.buf_idx].arrive()", 294),
                    ("wait", "mma", "plan.bar_so_ready[rs.buf_idx].wait(rs.bar_phase)", 576)],
    "sv_done[i]": [("init", "", "plan.bar_sv_done[i].init(1)", 55),
                   ("commit", "mma", "ku::umma_arrive_noelect(plan.bar_sv_done[rs.buf_idx])", 581),
                   ("wait", "softmax", "plan.bar_sv_done[rs.buf_idx].wait(rs.bar_phase)", 327),
                   ("wait", "dequant", "plan.bar_sv_done[rs.buf_idx].wait(rs.bar_phase^1)", 768)],
}
_OPS = {"mbarrier.arrive": "arrive", "mbarrier.arrive.expect_tx": "expect_tx", "cp.async.bulk.tensor": "complete_tx",
        "tcgen05.commit": "commit", "mbarrier.try_wait": "wait"}


def _key(bar: str) -> str:
    return re.sub(r"\[\d+\]", "[i]", bar)


def mbarrier_rows() -> list[dict]:
    """One dict per mbarrier (``[i]``: one per ring buffer) with its count, transaction bytes, arrivals per phase
    and the sites of each operation, each checked against the Program: the roles that arrive, complete, commit and
    wait are the Program's, the count the ``init`` names is the model's and the arrivals add up to it, the
    transaction bytes the source's expression gives are the Program's."""
    from simtc.kernels.flashmla.models import V32

    prog = _program()
    threads = {r.name: r.threads for r in prog.roles}
    seen: dict[str, set[tuple[str, str]]] = {}
    tx: dict[str, set[int]] = {}
    for role in prog.roles:
        for rec in role.records:
            bar = getattr(rec, "bar", None)
            if isinstance(bar, str) and bar in V32.mbarriers and rec.opcode in _OPS:
                seen.setdefault(_key(bar), set()).add((_OPS[rec.opcode], role.name))
                if rec.opcode == "mbarrier.arrive.expect_tx":
                    tx.setdefault(_key(bar), set()).add(rec.tx_bytes)
    counts: dict[str, tuple[int, int, int]] = {}
    for name, (addr, count) in V32.mbarriers.items():
        k = _key(name)
        n, first, _ = counts.get(k, (0, addr, count))
        counts[k] = (n + 1, first, count)
    if set(counts) != set(BARRIER_SITES):
        _fail(f"kernel page: mbarriers {sorted(counts)} in the model, {sorted(BARRIER_SITES)} on the page",
              rule="the page's mbarriers are the model's")
    rows = []
    for name, sites in BARRIER_SITES.items():
        n, addr, count = counts[name]
        page_ops = {(op, role) for op, role, _q, _l in sites if op != "init"}
        if page_ops != seen.get(name, set()):
            _fail(f"kernel page: {name}: the source's sites {sorted(page_ops)} but the Program's records "
                  f"{sorted(seen.get(name, set()))}", rule="who arrives and who waits is the same in the Program")
        init = next(q for op, _r, q, _l in sites if op == "init")
        if _eval(re.search(r"init\((.*)\)", init).group(1)) != count:
            _fail(f"kernel page: {name} expects {count} arrivals in the model, the source says {init}",
                  rule="mbarrier counts are the kernel's")
        arrivals = sum(threads[r] for op, r in page_ops if op in ("arrive", "expect_tx")) + sum(
            1 for op, _r in page_ops if op == "commit")
        if arrivals != count:
            _fail(f"kernel page: {name}: {arrivals} arrivals per phase but a count of {count}",
                  rule="one phase completes when every arriving thread has arrived")
        tx_bytes = None
        for op, _r, q, _l in sites:
            if op == "expect_tx":
                tx_bytes = _eval(re.search(r"expect_tx\((.*)\)$", q).group(1))
                if {tx_bytes} != tx.get(name):
                    _fail(f"kernel page: {name}: {tx_bytes} transaction bytes in the source ({q}), "
                          f"{sorted(tx.get(name, ()))} in the Program", rule="transaction bytes are the kernel's")
        rows.append({"name": name, "n": n, "addr": addr, "count": count, "arrivals": arrivals, "tx": tx_bytes,
                     "sites": sites})
    return rows


# named barriers: name -> (value quote, its config.h line, [(quote of a use, kernel.cuh line), ...])
NAMED_SITES = {
    "wg0_sync": ("wg0_sync = 1", 24, [("NamedBarrier::arrive_and_wait(128, NamedBarriers::wg0_sync)", line)
                                      for line in (161, 227, 310, 368, 408)]),
    "wg0_warp02_sync": ("wg0_warp02_sync = 2", 25, [("NamedBarriers::wg0_warp02_sync+(warp_idx&1)", 185)]),
    "wg0_warp13_sync": ("wg0_warp13_sync = 3", 26, [("NamedBarriers::wg0_warp02_sync+(warp_idx&1)", 185)]),
    "everyone_sync": ("everyone_sync = 4", 27,
                      [("NamedBarrier(NUM_THREADS, NamedBarriers::everyone_sync).arrive_and_wait_unaligned()", 116)]),
}


def named_rows() -> list[tuple[str, int, int, str, str, str]]:
    """``(name, hardware id, threads, value source, uses, roles in the Program)``: ids are the enum's value + 8
    (CUTLASS reserves 8), checked against the model's ``NAMED_BARRIERS`` and the Program's ``bar.sync`` records."""
    from simtc.isa.sync import BarSync
    from simtc.kernels.flashmla.models import NAMED_BARRIERS

    prog = _program()
    users: dict[int, set[str]] = {}
    for role in prog.roles:
        for rec in role.records:
            if isinstance(rec, BarSync):
                for i in {rec.id, *(rec.warp_ids or ())}:
                    users.setdefault(i, set()).add(role.name)
    rows = []
    for name, (quote, line, uses) in NAMED_SITES.items():
        hw, threads = NAMED_BARRIERS[name]
        if int(quote.rsplit("= ", 1)[1]) + 8 != hw:
            _fail(f"kernel page: {name} is id {hw} in the model, the source's value is {quote}",
                  rule="a named barrier's hardware id is its value + 8")
        use = "; ".join(f"`{q}` {cite('kernel.cuh', *ln)}" for q, ln in _merge(uses))
        rows.append((name, hw, threads, f"`{quote}` {cite('config.h', line)}", use,
                     ", ".join(sorted(users.get(hw, ()))) or "— (not in the Program: after the request)"))
    return rows


def _merge(uses: list[tuple[str, int]]) -> list[tuple[str, tuple[int, ...]]]:
    out: dict[str, list[int]] = {}
    for q, ln in uses:
        out.setdefault(q, []).append(ln)
    return [(q, tuple(lines)) for q, lines in out.items()]


# TMEM regions: name -> (source constant quote, config.h line, [(writer/reader quote, kernel.cuh lines, what)])
TMEM_SITES = {
    "O": ("static constexpr int O = 0", 76, [
        ("ku::utcmma_ss(tiled_mma_O, sS, sV, tO, block_idx == args.start_block_idx)", (580, 580),
         "accumulated by the PV MMAs"),
        ("ku::tmem_ld_32dp32bNx<CHUNK_SIZE>(tmem_cols::O + chunk_idx*CHUNK_SIZE, o)", (278, 278),
         "rescaled by WG0 (read, then written back at L287)"),
        ("ku::tmem_ld_32dp32bNx<B_EPI>(tmem_cols::O + i*B_EPI, o)", (353, 353), "read by the epilogue")]),
    "Q": ("static constexpr int Q = 256", 77, [
        ("tmem_cols::Q + tile_idx*32 + subtile_idx*8", (484, 484), "written by 16 `tcgen05.cp` (SW128 view)"),
        ("tQ_nope.data().get() = tmem_cols::Q", (550, 550), "A of the 16 NoPE QK MMAs")]),
    "Q_tail": ("Q_Tail = 256 + B_H*D_NOPE/2/128", 78, [
        ("tmem_cols::Q + (B_H*D_Q_SW128/2/128) + tile_idx*16 + subtile_idx*8", (509, 509),
         "written by 2 `tcgen05.cp` (SW64 view)"),
        ("tQ_rope.data().get() = tmem_cols::Q_Tail", (540, 540), "A of the 2 RoPE QK MMAs")]),
    "P": ("static constexpr int P = 400", 79, [
        ("tP.data().get() = tmem_cols::P", (522, 522), "D of the QK MMAs"),
        ("ku::tmem_ld_32dp32bNx<B_TOPK/2>(tmem_cols::P, p)", (169, 169),
         "read by WG0, two 32-column loads per thread (L169-173)")]),
}


def tmem_rows() -> list[tuple[str, str, str, str, str]]:
    """``(region, lanes, columns, what the model says it holds, source)`` for ``TMEM_V32``; each region starts at the
    column the source's constant gives."""
    from simtc.kernels.flashmla.plan import TMEM_V32

    rows = []
    for r in TMEM_V32:
        if r.name not in TMEM_SITES:
            rows.append((r.name, f"{r.lanes[0]}–{r.lanes[1]}", f"{r.columns[0]}–{r.columns[1]}", r.note,
                         "not allocated to anything (`tmem_cols` stops at P)"))
            continue
        quote, line, uses = TMEM_SITES[r.name]
        start = _eval(quote.split("= ", 1)[1])
        if start != r.columns[0]:
            _fail(f"kernel page: TMEM region {r.name} starts at column {r.columns[0]} in the model, {quote} in the "
                  "source", rule="the TMEM column map is the kernel's")
        src = f"`{quote}` {cite('config.h', line)}; " + "; ".join(
            f"{what}: `{q}` {cite('kernel.cuh', lines)}" for q, lines, what in uses)
        rows.append((r.name, f"{r.lanes[0]}–{r.lanes[1]}", f"{r.columns[0]}–{r.columns[1]}", r.note, src))
    return rows


# shared memory: plan buffer -> (member quote, config.h line, size formula)
SMEM_SITES = {
    "q": ("array_aligned<bf16, cosize_v<SmemLayoutQ_SW128>> q;", 162, "B_H*D_Q_SW128*sizeof(bf16)"),
    "q_sw64": ("bf16 q_sw64[B_H*D_Q_SW64];", 163, "B_H*D_Q_SW64*sizeof(bf16)"),
    "o_buf": ("array_aligned<bf16, cosize_v<SmemLayoutOBuf>> o_buf;", 165, "B_H*D_V*sizeof(bf16)"),
    "o_accum_buf": ("array_aligned<float, cosize_v<SmemLayoutOAccumBuf>> o_accum_buf;", 166,
                    "((B_H-1)*520+D_V)*sizeof(float)"),
    "dequant0.nope": ("array_aligned<bf16, B_H*D_NOPE> nope;", 171, "B_H*D_NOPE*sizeof(bf16)"),
    "dequant0.rope": ("array_aligned<bf16, B_H*D_ROPE> rope;", 172, "B_H*D_ROPE*sizeof(bf16)"),
    "dequant1.nope": ("array_aligned<bf16, B_H*D_NOPE> nope;", 171, "B_H*D_NOPE*sizeof(bf16)"),
    "dequant1.rope": ("array_aligned<bf16, B_H*D_ROPE> rope;", 172, "B_H*D_ROPE*sizeof(bf16)"),
    "raw_nope0": ("array_aligned<e4m3, B_H*D_NOPE> raw_nope[NUM_BUFS];", 175, "B_H*D_NOPE*sizeof(e4m3)"),
    "raw_nope1": ("array_aligned<e4m3, B_H*D_NOPE> raw_nope[NUM_BUFS];", 175, "B_H*D_NOPE*sizeof(e4m3)"),
    "p_exchange_buf": ("float4 p_exchange_buf[4][16 * B_TOPK / 4];", 179, "4*(16 * B_TOPK / 4)*16"),
    "s": ("array_aligned<bf16, cosize_v<SmemLayoutS>> s;", 180, "B_H*B_TOPK*sizeof(bf16)"),
    "rowwise_max_buf": ("CUTE_ALIGNAS(16) float rowwise_max_buf[128];", 182, "128*sizeof(float)"),
    "is_token_valid": ("char is_token_valid[NUM_INDEX_BUFS][B_TOPK/8];", 183, "NUM_INDEX_BUFS*(B_TOPK/8)"),
    "tma_coord": ("int tma_coord[NUM_INDEX_BUFS][B_TOPK];", 184, "NUM_INDEX_BUFS*B_TOPK*sizeof(int)"),
    "scales": ("e8m0 scales[NUM_INDEX_BUFS][B_TOPK][NUM_SCALES_EACH_TOKEN];", 185,
               "NUM_INDEX_BUFS*B_TOPK*NUM_SCALES_EACH_TOKEN"),
    "tmem_start_addr": ("array_aligned<uint32_t, 1> tmem_start_addr;", 186, "16"),
    "mbarriers": ("transac_bar_t bar_last_store_done;", 187, "25*8"),
}


def smem_rows() -> list[tuple[str, int, int, str, str, str, str]]:
    """``(buffer, offset, size, shares bytes with, note, size formula, source)`` for ``SMEM_V32``, in the model's
    order; each size is the source's formula with the model's constants."""
    from simtc.kernels.flashmla.plan import SMEM_V32

    if set(SMEM_SITES) != set(SMEM_V32.names):
        _fail(f"kernel page: plan buffers {SMEM_V32.names}, page rows {sorted(SMEM_SITES)}",
              rule="the page's shared-memory plan is the model's")
    rows = []
    for b in SMEM_V32:
        quote, line, formula = SMEM_SITES[b.name]
        size = _eval(formula.replace("sizeof(float)", "4").replace("sizeof(int)", "4"))
        if size != b.size:
            _fail(f"kernel page: {b.name} is {b.size} B in the model, {formula} = {size} B from the source",
                  rule="the shared-memory plan is the kernel's struct")
        last = f"-{line + 6}" if b.name == "mbarriers" else ""
        src = f"`{quote}` config.h L{line}{last}"
        rows.append((b.name, b.offset, b.size, ", ".join(b.unions) or "—", b.note or "", formula, src))
    return rows


# ---- Markdown -----------------------------------------------------------------------------------------------------
def _cell(text) -> str:
    out = str(text).replace("|", "\\|").replace("\n", " ")
    return out


def constants_table() -> str:
    def value(v) -> str:
        return ", ".join(map(str, v)) if isinstance(v, tuple) else f"{v:g}" if isinstance(v, float) else str(v)

    rows = [f"| `{n}` | {value(v)} | `{w}` | `{q}` {c} |" for n, v, w, q, c in constants_rows()]
    return "\n".join(["| constant | value (V32) | in simtc | source |", "|---|---|---|---|", *rows])


def roles_table() -> str:
    rows, notes = [], []
    for role, w, t, reg, what, recs, src in roles_rows():
        regs = re.search(r"<(\d+)>", reg).group(1)
        rows.append(f"| `{role}` | {w} | {t} | {regs} | {recs} |")
        notes.append(f"* `{role}` — {what}. Source: {src}; registers: {reg}.")
    return "\n".join(["| role | warps | threads | registers per thread | records per block (the Program) |",
                      "|---|---|---|---|---|", *rows, "", *notes])


_OP_TEXT = {"arrive": "arrive", "expect_tx": "arrive + expect_tx", "complete_tx": "TMA bytes",
            "commit": "`tcgen05.commit`", "wait": "wait"}


def _phase(quote: str) -> str:
    return "phase ^ 1" if quote.endswith("^1)") else "per request" if "batch_rel" in quote else "phase"


def mbarrier_table() -> str:
    out = ["| mbarrier (buffers) | count | transaction bytes | arrive / complete | waited on by (parity) |",
           "|---|---|---|---|---|"]
    notes = []
    for r in mbarrier_rows():
        by: dict[tuple[str, str], list] = {}
        for op, role, q, ln in r["sites"]:
            by.setdefault((op, role), []).append((q, ln))
        arrive = ", ".join(f"{role} ({_OP_TEXT[op]})" for (op, role) in by if op not in ("init", "wait"))
        wait = ", ".join(f"{role} ({_phase(sites[0][0])})" for (op, role), sites in by.items() if op == "wait")
        tx = f"{r['tx']:,}" if r["tx"] else "—"
        name = f"`{r['name']}` (×{r['n']})" if r["n"] > 1 else f"`{r['name']}`"
        out.append(f"| {name} | {r['count']} | {tx} | {arrive} | {wait} |")
        parts = [f"{'init' if op == 'init' else f'{role} ({_OP_TEXT[op]})'}: " + "; ".join(
            f"`{q}` {cite('kernel.cuh', *lns)}" for q, lns in _merge(sites)) for (op, role), sites in by.items()]
        at = f"at {r['addr']:,}" + (", 8 B apart" if r["n"] > 1 else "")
        notes.append(f"* `{r['name']}` ({at}) — " + "; ".join(parts) + ".")
    return "\n".join([*out, "", "Where each lies in shared memory, and where it is initialised, arrived on and "
                      "waited for:", "", *notes])


def named_table() -> str:
    rows, notes = [], []
    for n, hw, t, val, use, who in named_rows():
        rows.append(f"| `{n}` | {hw} | {t} | {who} |")
        notes.append(f"* `{n}` — value: {val}; used at: {use}.")
    return "\n".join(["| named barrier | hardware id | threads | roles in the Program |", "|---|---|---|---|", *rows,
                      "", *notes])


def tmem_table() -> str:
    rows, notes = [], []
    for n, lanes, cols, desc, src in tmem_rows():
        rows.append(f"| `{n}` | {lanes} | {cols} | {_cell(desc)} |")
        notes.append(f"* `{n}` — {src}.")
    return "\n".join(["| region | lanes | columns | holds (the model's `TMEM_V32`) |", "|---|---|---|---|", *rows, "",
                      *notes])


def smem_table() -> str:
    from simtc.kernels.flashmla.plan import SMEM_V32

    rows, notes = [], []
    for n, off, size, un, note, formula, src in smem_rows():
        rows.append(f"| `{n}` | {off:,} | {size:,} | {_cell(un)} | {_cell(note)} |")
        notes.append(f"* `{n}` — {src}; size `{formula}`.")
    return "\n".join(["| buffer | offset (B) | size (B) | shares bytes with | note |", "|---|---|---|---|---|", *rows,
                      "", f"Total: {SMEM_V32.total:,} B (`constexpr size_t smem_size = sizeof(SharedMemoryPlan)` "
                      "kernel.cuh L954), under the 227 KiB a block may use (`static_assert(smem_size < 227*1024)` "
                      "kernel.cuh L955). Each member's declaration:", "", *notes])


GENERATED = {"kernel_constants": constants_table, "kernel_roles": roles_table, "kernel_mbarriers": mbarrier_table,
             "kernel_named": named_table, "kernel_tmem": tmem_table, "kernel_smem": smem_table}
"""``<!-- generated:NAME -->`` markers of docs/kernel.md (docs/scripts/hooks.py expands them)."""


def page_text(path: Path = PAGE) -> str:
    """docs/kernel.md with its generated tables expanded (what the site shows)."""
    text = path.read_text(encoding="utf-8")
    return re.sub(r"<!-- generated:(\w+) -->", lambda m: GENERATED[m.group(1)]() if m.group(1) in GENERATED
                  else m.group(0), text)


# ---- the citations, against the recording -------------------------------------------------------------------------
def citations(text: str) -> list[tuple[str, list[tuple[int, int]], int, int]]:
    """``(file, ranges, start, end)`` of every ``kernel.cuh L..`` / ``config.h L..`` citation in ``text``."""
    return [(m.group("file"), parse_ranges(m.group("ranges")), m.start(), m.end()) for m in CITATION.finditer(text)]


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", s)


def recording() -> dict:
    return json.loads(RECORDING.read_text(encoding="utf-8"))


def check(text: str, rec: dict | None = None) -> list[str]:
    """Problems with the citations of ``text``: a cited line not in the recording, or a citation with no backquoted
    fragment of its line(s) before it in the same sentence or table cell.

    >>> rec = {"files": {FILES["kernel.cuh"]: {"lines": {"46": "  plan.bar_q_tma.init(1);"}}}}
    >>> check("The Q barrier (`plan.bar_q_tma.init(1)`, kernel.cuh L46) counts one.", rec)
    []
    >>> check("Q's barrier counts `2`, kernel.cuh L46; `x` kernel.cuh L47.", rec)
    ['kernel.cuh L46: none of `2` is in the line(s) cited', 'kernel.cuh L47: line 47 is not recorded']
    """
    rec = rec if rec is not None else recording()
    out = []
    prev_end = 0
    for file, ranges, start, end in citations(text):
        lines = rec["files"][FILES[file]]["lines"]
        label = text[start:end]
        missing = sorted(n for n in lines_to_record(ranges) if str(n) not in lines)
        if missing:
            out.append(f"{label}: line {', '.join(map(str, missing))} is not recorded")
            prev_end = end
            continue
        bounds = [m.end() for m in _BOUNDARY.finditer(text, 0, start)]
        context = text[max([prev_end, *bounds[-1:]]):start]
        frags = _FRAGMENT.findall(context)
        cited = _norm("".join(lines[str(n)] for n in sorted(lines_to_record(ranges))))
        if not any(_norm(f) in cited for f in frags):
            out.append(f"{label}: none of {', '.join(f'`{f}`' for f in frags) or 'no fragment'} is in the line(s) "
                       "cited")
        prev_end = end
    return out


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's object id


def _git_show(checkout: Path, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(checkout), "show", f"{COMMIT_FULL}:{path}"], capture_output=True,
                          check=True).stdout


def record(checkout: Path) -> dict:
    """The recording of every line the page cites, from a FlashMLA git checkout that has commit 9241ae3."""
    wanted: dict[str, set[int]] = {f: set() for f in FILES}
    for file, ranges, _s, _e in citations(page_text()):
        wanted[file] |= lines_to_record(ranges)
    files = {}
    for short, path in FILES.items():
        data = _git_show(checkout, path)
        text = data.decode("utf-8").splitlines()
        files[path] = {"blob": _blob_id(data), "line_count": len(text),
                       "lines": {str(n): text[n - 1] for n in sorted(wanted[short])}}
    return {"repository": REPO, "commit": COMMIT_FULL,
            "what": "the lines of FlashMLA's SM100 head64 decode kernel that docs/kernel.md cites, verbatim",
            "made_by": "python docs/scripts/kernel.py --record <FlashMLA checkout>", "files": files}


def verify(checkout: Path) -> list[str]:
    """Differences between the recording and a FlashMLA checkout at 9241ae3 (git, or files with the same blob)."""
    rec, out = recording(), []
    for path, entry in rec["files"].items():
        try:
            data = _git_show(checkout, path)
        except (subprocess.CalledProcessError, FileNotFoundError):
            data = (checkout / path).read_bytes()
        if _blob_id(data) != entry["blob"]:
            out.append(f"{path}: not the file at {COMMIT} (blob {_blob_id(data)[:12]}, recorded {entry['blob'][:12]})")
            continue
        text = data.decode("utf-8").splitlines()
        out += [f"{path} L{n}: {line!r} recorded, {text[int(n) - 1]!r} in the file"
                for n, line in entry["lines"].items() if text[int(n) - 1] != line]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="the page's citations against the recording (default)")
    group.add_argument("--record", metavar="CHECKOUT", type=Path, help="rewrite the recording from a git checkout")
    group.add_argument("--verify", metavar="CHECKOUT", type=Path, help="the recording against a checkout")
    args = parser.parse_args(argv)
    if args.record:
        RECORDING.write_text(json.dumps(record(args.record), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {RECORDING.relative_to(ROOT)}")
        return 0
    problems = verify(args.verify) if args.verify else check(page_text())
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
