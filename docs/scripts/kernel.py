"""The kernel page (``docs/kernel.md``): FlashMLA head64's tables generated from simtc's model, every row citing the
FlashMLA source line it rests on, and the checks that those lines say what the page says they say.

The tables come from ``simtc.kernels.flashmla`` (``constants.py``, ``plan.py``, ``models.py``, ``head64.py``): the
values, the roles, who arrives on and who waits for each barrier (read from the records of ``head64_program``), the
TMEM and shared-memory plans. Each row cites the line of ``deepseek-ai/FlashMLA`` at commit ``9241ae3`` it rests on
(``kernel.cuh L46``) and holds the facts simtc reads from that line as data: a barrier's arrival count, a transaction
byte count's formula, a constant's value, the warp a role runs on, a member's name. Building a table checks the model
against those facts (an arrival count must be the model's count, a byte formula the Program's transaction bytes,
the roles the Program has the branches the kernel takes) and refuses a disagreement.

The repository holds no FlashMLA text. ``tests/data/flashmla_head64_digests.json`` records, for every line the page
cites, its SHA-256 digest (with each file's path, git blob id and line count at the commit), so a citation moved to
another line, or a FlashMLA that changed under it, is caught against a checkout without storing the line. With a
checkout (``SIMTC_FLASHMLA_DIR`` in the tests) the facts are checked against the lines themselves: every citation of
the page follows, in the same sentence or table cell, a backquoted name or short expression that the cited line(s)
contain, and every table fact is on its line.

    python docs/scripts/kernel.py --check               # the page's citations are recorded, its quotes short
    python docs/scripts/kernel.py --verify ~/FlashMLA   # the digests, the citations and the facts against a checkout
    python docs/scripts/kernel.py --record ~/FlashMLA   # rewrite the digests from a checkout (git)

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
RECORDING = ROOT / "tests" / "data" / "flashmla_head64_digests.json"
REPO = "deepseek-ai/FlashMLA"
COMMIT = "9241ae3"
COMMIT_FULL = "9241ae3ef9bac614dd25e45e507e089f888280e0"
FILES = {"kernel.cuh": "csrc/sm100/decode/head64/kernel.cuh", "config.h": "csrc/sm100/decode/head64/config.h"}
FULL_RANGE = 40
"""Ranges of up to this many lines are recorded whole; longer ones (a role's whole body) by their first and last."""
MAX_QUOTE = 45
"""The longest backquoted text a citation may follow: a name or a formula (the longest, ``TMA_K_STRIDE``'s, has 42
characters), never a line of the source."""

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


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", s)


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


# constants: (name, source name, V32 formula, file, line, the model's value, where simtc holds it)
def _constants() -> list[tuple[str, str, str, str, int, object, str]]:
    from simtc.kernels.flashmla import constants as c
    from simtc.kernels.flashmla import effects
    from simtc.kernels.flashmla.head64 import PV_IDESC
    from simtc.kernels.flashmla.models import V32
    from simtc.kernels.flashmla.plan import SMEM_V32

    o_stride = (SMEM_V32["o_accum_buf"].size // 4 - c.D_V) // (c.B_H - 1)
    return [
        ("D_Q", "D_Q", "576", "config.h", 33, c.D_Q, "constants.D_Q"),
        ("D_V", "D_V", "512", "config.h", 35, c.D_V, "constants.D_V"),
        ("D_NOPE", "D_NOPE", "512", "config.h", 36, c.D_NOPE, "constants.D_NOPE"),
        ("D_ROPE", "D_ROPE", "64", "config.h", 37, c.D_ROPE, "constants.D_ROPE"),
        ("QUANT_TILE_SIZE", "QUANT_TILE_SIZE", "128", "config.h", 38, V32.quant_tile, "V32.quant_tile"),
        ("NUM_SCALES_EACH_TOKEN", "NUM_SCALES_EACH_TOKEN", "4", "config.h", 40, V32.num_scales, "V32.num_scales"),
        ("TMA_K_STRIDE", "TMA_K_STRIDE", "D_NOPE+2*D_ROPE+4*(D_NOPE/QUANT_TILE_SIZE)", "config.h", 41,
         V32.tma_k_stride, "V32.tma_k_stride"),
        ("B_H", "B_H", "64", "config.h", 45, c.B_H, "constants.B_H"),
        ("B_TOPK", "B_TOPK", "64", "config.h", 46, c.B_TOPK, "constants.B_TOPK"),
        ("NUM_BUFS", "NUM_BUFS", "2", "config.h", 47, c.NUM_BUFS, "constants.NUM_BUFS"),
        ("NUM_INDEX_BUFS", "NUM_INDEX_BUFS", "4", "config.h", 48, c.NUM_INDEX_BUFS, "constants.NUM_INDEX_BUFS"),
        ("NUM_THREADS", "NUM_THREADS", "128*3", "config.h", 49, c.NUM_THREADS, "constants.NUM_THREADS"),
        ("MAX_INIT_VAL", "MAX_INIT_VAL", "-1e30", "config.h", 50, float(effects._MAX_INIT), "effects._MAX_INIT"),
        ("D_Q_SW128", "D_Q_SW128", "512", "config.h", 52, SMEM_V32["q"].size // (2 * c.B_H),
         "SMEM_V32['q'].size / (2 B_H)"),
        ("D_Q_SW64", "D_Q_SW64", "64", "config.h", 53, SMEM_V32["q_sw64"].size // (2 * c.B_H),
         "SMEM_V32['q_sw64'].size / (2 B_H)"),
        ("K_ROPE_SW", "K_ROPE_SW", "64", "config.h", 55, int(V32.rope_swizzle[2:]), "V32.rope_swizzle"),
        ("tmem_cols::O", "O", "0", "config.h", 76, c.O_COLUMN, "constants.O_COLUMN"),
        ("tmem_cols::Q", "Q", "256", "config.h", 77, c.Q_COLUMN, "constants.Q_COLUMN"),
        ("tmem_cols::Q_Tail", "Q_Tail", "256 + B_H*D_NOPE/2/128", "config.h", 78, c.Q_TAIL_COLUMN,
         "constants.Q_TAIL_COLUMN"),
        ("tmem_cols::P", "P", "400", "config.h", 79, c.P_COLUMN, "constants.P_COLUMN"),
        ("O staging row stride", "Stride", "520", "config.h", 104, o_stride, "SMEM_V32['o_accum_buf'].size"),
        ("QK MMA: M, N", "WS_TS", "B_H, B_TOPK*2", "config.h", 197, (c.QK_IDESC.m, c.QK_IDESC.n),
         "constants.QK_IDESC"),
        ("PV MMA: M, N", "WS_SS", "B_H, 256", "config.h", 201, (PV_IDESC.m, PV_IDESC.n), "head64.PV_IDESC"),
        ("TMEM columns allocated", "allocate", "512", "kernel.cuh", 63, c.TMEM_COLUMNS, "constants.TMEM_COLUMNS"),
        ("lazy O rescale threshold (log2 units)", "should_scale_o", "6.0", "kernel.cuh", 231,
         float(effects.RESCALE_THRESHOLD), "effects.RESCALE_THRESHOLD"),
        ("RoPE offset in a KV record (bytes)", "k_ptr", "D_NOPE+16", "kernel.cuh", 926, V32.rope_offset,
         "V32.rope_offset"),
    ]


def constants_rows() -> list[tuple[str, object, str, str, str]]:
    """``(name, model value, where simtc holds it, V32 formula, citation)`` for each constant of the kernel; the
    formula, evaluated with the model's constants, must give the model's value."""
    import numpy as np

    rows = []
    for name, _token, expr, file, line, value, where in _constants():
        got = _eval(expr)
        same = np.float32(got) == np.float32(value) if isinstance(value, float) else got == value
        if not same:
            _fail(f"kernel page: {name} is {value} in simtc but {expr} = {got} in the source",
                  rule="the model's constants are the kernel's")
        rows.append((name, value, where, expr, cite(file, line)))
    return rows


# roles: (role, branch: ("warpgroup" | "warp" | "else", index), elected, lines, registers: ("alloc" | "dealloc", n),
# the setmaxnreg line, what it does)
ROLES = (
    ("softmax", ("warpgroup", 0), False, (134, 426), ("alloc", 224), 137,
     "waits for P, reads it from TMEM, exchanges half of it with warp w ^ 2, masks, takes the row maximum with the "
     "partner thread t ^ 64, decides the lazy rescale, computes exp2 and S (bf16, into shared memory), rescales O "
     "in TMEM when it must; after the last block: li, the LSE and the epilogue (O out of TMEM, scaled, bf16, "
     "stored by TMA)"),
    ("mma", ("warp", 4), True, (431, 585), ("dealloc", 72), 428,
     "once per request: Q by TMA, then 18 `tcgen05.cp` of Q into TMEM; per block: the QK MMAs (RoPE, then NoPE), "
     "commit to `qk_done`, the PV MMAs once S is ready, commit to `sv_done`"),
    ("raw", ("warp", 5), True, (586, 615), ("dealloc", 72), 428,
     "per block: 16 TMA gather4 of fp8 NoPE rows (4 tokens each) into `raw_nope[b]`, coordinates from `tma_coord`"),
    ("rope", ("warp", 6), True, (616, 652), ("dealloc", 72), 428,
     "per block: 32 TMA gather4 of bf16 RoPE rows (two 32-dim SW64 halves of 4 tokens) into `dequant[b].rope`"),
    ("index", ("warp", 7), False, (653, 743), ("dealloc", 72), 428,
     "per block: each lane takes 2 of the 64 top-k indices and writes their TMA row coordinates, their scales "
     "(e8m0) and the valid bits into the index ring"),
    ("dequant", ("else", 2), False, (747, 842), ("alloc", 208), 749,
     "per block: fp8 NoPE x scale -> bf16 into the SW128 K tiles of `dequant[b].nope` (8 threads per token row), "
     "`fence.proxy.async`, then `nope_ready`"),
)


def _branch_text(branch: tuple[str, int], elected: bool) -> tuple[str, str]:
    """The branch in simtc's words and the short expression its source line holds."""
    kind, i = branch
    if kind == "else":
        return f"the remaining warpgroup, {i}", "else"
    words = f"{kind} {i}" + (", one elected lane" if elected else "")
    return words, f"{kind}_idx == {i}"


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
    for role, branch, elected, lines, (op, regs), reg_line, what in ROLES:
        warps = ROLE_WARPS[role]
        kind, i = branch
        want = (tuple(range(4 * i, 4 * i + 4)) if kind in ("warpgroup", "else") else (i,))
        if warps != want or (threads[role] == 1) != elected:
            _fail(f"kernel page: role {role} runs on warps {warps} with {threads[role]} threads in the Program, the "
                  f"source's branch is {kind} {i}{' (elected)' if elected else ''}",
                  rule="the Program's roles are the kernel's branches")
        w = f"{warps[0]}–{warps[-1]}" if len(warps) > 1 else str(warps[0])
        words, expr = _branch_text(branch, elected)
        reg = f"`warpgroup_reg_{op}<{regs}>` {cite('kernel.cuh', reg_line)}"
        rows.append((role, w, threads[role], reg, what, _records_summary(per_block[role]),
                     f"the branch on {words} (`{expr}` {cite('kernel.cuh', lines)})"))
    return rows


# mbarriers: name -> [(operation, role, line, detail), ...]; operation: init (detail: the count's expression),
# arrive, expect_tx (an arrive with the transaction bytes; detail: their expression), complete_tx (a TMA copy
# completing bytes on it), commit (tcgen05.commit), wait (detail: the parity asked for: "phase", "phase ^ 1" or
# "request", the per-request phase)
BARRIER_SITES: dict[str, list[tuple[str, str, int, str | None]]] = {
    "last_store_done": [("init", "", 45, "128"), ("arrive", "softmax", 153, None),
                        ("wait", "raw", 590, "request"), ("wait", "rope", 620, "request")],
    "q_tma": [("init", "", 46, "1"), ("complete_tx", "mma", 446, None), ("complete_tx", "mma", 454, None),
              ("expect_tx", "mma", 461, "B_H*D_Q*sizeof(bf16)"), ("wait", "mma", 462, "request")],
    "q_utccp": [("init", "", 47, "1"), ("commit", "mma", 514, None), ("wait", "mma", 526, "request"),
                ("wait", "raw", 589, "request"), ("wait", "rope", 619, "request"),
                ("wait", "dequant", 762, "request")],
    "rope_ready[i]": [("init", "", 49, "1"), ("complete_tx", "rope", 639, None),
                      ("expect_tx", "rope", 648, "B_TOPK*D_ROPE*sizeof(bf16)"), ("wait", "mma", 535, "phase")],
    "nope_ready[i]": [("init", "", 50, "128"), ("arrive", "dequant", 837, None), ("wait", "mma", 545, "phase")],
    "raw_ready[i]": [("init", "", 51, "1"), ("complete_tx", "raw", 603, None),
                     ("expect_tx", "raw", 611, "B_TOPK*D_NOPE*sizeof(e4m3)"), ("wait", "dequant", 767, "phase")],
    "raw_free[i]": [("init", "", 52, "128"), ("arrive", "dequant", 838, None), ("wait", "raw", 594, "phase ^ 1")],
    "valid_coord_scale_ready[i]": [
        ("init", "", 58, "32"), ("arrive", "index", 730, None),
        *(("wait", role, line, "phase") for role, line in (("softmax", 162), ("raw", 593), ("rope", 623),
                                                            ("dequant", 766)))],
    "valid_coord_scale_free[i]": [
        ("init", "", 59, "128+128+1+1"),
        *(("arrive", role, line, None) for role, line in (("softmax", 228), ("raw", 612), ("rope", 649),
                                                           ("dequant", 839))),
        ("wait", "index", 691, "phase ^ 1")],
    "qk_done[i]": [("init", "", 53, "1"), ("commit", "mma", 573, None), ("wait", "softmax", 163, "phase"),
                   ("wait", "rope", 625, "phase ^ 1")],
    "so_ready[i]": [("init", "", 54, "128"), ("arrive", "softmax", 294, None), ("wait", "mma", 576, "phase")],
    "sv_done[i]": [("init", "", 55, "1"), ("commit", "mma", 581, None), ("wait", "softmax", 327, "phase"),
                   ("wait", "dequant", 768, "phase ^ 1")],
}
_OPS = {"mbarrier.arrive": "arrive", "mbarrier.arrive.expect_tx": "expect_tx", "cp.async.bulk.tensor": "complete_tx",
        "tcgen05.commit": "commit", "mbarrier.try_wait": "wait"}
_SOURCE_OPS = {"init": ".init(", "arrive": ".arrive()", "expect_tx": ".arrive_and_expect_tx(", "commit": "umma_arrive",
               "wait": ".wait(", "complete_tx": ""}
"""What each operation's line calls (checked against a checkout)."""


def _key(bar: str) -> str:
    return re.sub(r"\[\d+\]", "[i]", bar)


def _member(bar: str) -> str:
    """The shared-memory member a barrier is (``raw_free[i]`` -> ``bar_raw_free``)."""
    return "bar_" + bar.split("[")[0]


def _site_quote(bar: str, op: str, detail: str | None) -> str:
    """The short expression of a barrier site's line the page shows before its citation."""
    if op == "init":
        return f"init({detail})"
    if op == "expect_tx":
        return detail or ""
    if op == "wait" and detail == "request":
        return "bar_phase_batch_rel"
    if op == "wait" and detail == "phase ^ 1":
        return "bar_phase^1"
    return _member(bar)


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
        page_ops = {(op, role) for op, role, _l, _d in sites if op != "init"}
        if page_ops != seen.get(name, set()):
            _fail(f"kernel page: {name}: the source's sites {sorted(page_ops)} but the Program's records "
                  f"{sorted(seen.get(name, set()))}", rule="who arrives and who waits is the same in the Program")
        init = next(d for op, _r, _l, d in sites if op == "init")
        if _eval(init) != count:
            _fail(f"kernel page: {name} expects {count} arrivals in the model, the source's init says {init}",
                  rule="mbarrier counts are the kernel's")
        arrivals = sum(threads[r] for op, r in page_ops if op in ("arrive", "expect_tx")) + sum(
            1 for op, _r in page_ops if op == "commit")
        if arrivals != count:
            _fail(f"kernel page: {name}: {arrivals} arrivals per phase but a count of {count}",
                  rule="one phase completes when every arriving thread has arrived")
        tx_bytes = None
        for op, _r, _l, d in sites:
            if op == "expect_tx":
                tx_bytes = _eval(d)
                if {tx_bytes} != tx.get(name):
                    _fail(f"kernel page: {name}: {tx_bytes} transaction bytes in the source ({d}), "
                          f"{sorted(tx.get(name, ()))} in the Program", rule="transaction bytes are the kernel's")
        rows.append({"name": name, "n": n, "addr": addr, "count": count, "arrivals": arrivals, "tx": tx_bytes,
                     "sites": sites})
    return rows


# named barriers: name -> (its value, the config.h line of the enum entry, [(what a use's line holds, kernel.cuh
# line), ...])
NAMED_SITES = {
    "wg0_sync": (1, 24, [("wg0_sync", line) for line in (161, 227, 310, 368, 408)]),
    "wg0_warp02_sync": (2, 25, [("wg0_warp02_sync+(warp_idx&1)", 185)]),
    "wg0_warp13_sync": (3, 26, [("wg0_warp02_sync+(warp_idx&1)", 185)]),
    "everyone_sync": (4, 27, [("everyone_sync", 116)]),
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
    for name, (value, line, uses) in NAMED_SITES.items():
        hw, threads = NAMED_BARRIERS[name]
        if value + 8 != hw:
            _fail(f"kernel page: {name} is id {hw} in the model, the source's value is {value}",
                  rule="a named barrier's hardware id is its value + 8")
        use = "; ".join(f"`{q}` {cite('kernel.cuh', *ln)}" for q, ln in _merge(uses))
        rows.append((name, hw, threads, f"`{name} = {value}` {cite('config.h', line)}", use,
                     ", ".join(sorted(users.get(hw, ()))) or "— (not in the Program: after the request)"))
    return rows


def _merge(uses: list[tuple[str, int]]) -> list[tuple[str, tuple[int, ...]]]:
    out: dict[str, list[int]] = {}
    for q, ln in uses:
        out.setdefault(q, []).append(ln)
    return [(q, tuple(lines)) for q, lines in out.items()]


# TMEM regions: name -> (the tmem_cols constant, its expression, its config.h line, [(what the line holds,
# kernel.cuh lines, what the use is)])
TMEM_SITES = {
    "O": ("O", "0", 76, [("utcmma_ss", (580, 580), "accumulated by the PV MMAs"),
                         ("tmem_cols::O", (278, 278), "rescaled by WG0 (read, then written back at L287)"),
                         ("tmem_cols::O", (353, 353), "read by the epilogue")]),
    "Q": ("Q", "256", 77, [("tmem_cols::Q", (484, 484), "written by 16 `tcgen05.cp` (SW128 view)"),
                           ("tmem_cols::Q", (550, 550), "A of the 16 NoPE QK MMAs")]),
    "Q_tail": ("Q_Tail", "256 + B_H*D_NOPE/2/128", 78, [
        ("B_H*D_Q_SW128/2/128", (509, 509), "written by 2 `tcgen05.cp` (SW64 view)"),
        ("tmem_cols::Q_Tail", (540, 540), "A of the 2 RoPE QK MMAs")]),
    "P": ("P", "400", 79, [("tmem_cols::P", (522, 522), "D of the QK MMAs"),
                           ("tmem_cols::P", (169, 169), "read by WG0, two 32-column loads per thread (L169-173)")]),
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
        const, expr, line, uses = TMEM_SITES[r.name]
        if _eval(expr) != r.columns[0]:
            _fail(f"kernel page: TMEM region {r.name} starts at column {r.columns[0]} in the model, "
                  f"tmem_cols::{const} = {expr} in the source", rule="the TMEM column map is the kernel's")
        src = f"starts at `{const} = {expr}` {cite('config.h', line)}; " + "; ".join(
            f"{what}: `{q}` {cite('kernel.cuh', lines)}" for q, lines, what in uses)
        rows.append((r.name, f"{r.lanes[0]}–{r.lanes[1]}", f"{r.columns[0]}–{r.columns[1]}", r.note, src))
    return rows


# shared memory: plan buffer -> (the member's name in the struct, its config.h line, size formula)
SMEM_SITES = {
    "q": ("q", 162, "B_H*D_Q_SW128*sizeof(bf16)"),
    "q_sw64": ("q_sw64", 163, "B_H*D_Q_SW64*sizeof(bf16)"),
    "o_buf": ("o_buf", 165, "B_H*D_V*sizeof(bf16)"),
    "o_accum_buf": ("o_accum_buf", 166, "((B_H-1)*520+D_V)*sizeof(float)"),
    "dequant0.nope": ("nope", 171, "B_H*D_NOPE*sizeof(bf16)"),
    "dequant0.rope": ("rope", 172, "B_H*D_ROPE*sizeof(bf16)"),
    "dequant1.nope": ("nope", 171, "B_H*D_NOPE*sizeof(bf16)"),
    "dequant1.rope": ("rope", 172, "B_H*D_ROPE*sizeof(bf16)"),
    "raw_nope0": ("raw_nope", 175, "B_H*D_NOPE*sizeof(e4m3)"),
    "raw_nope1": ("raw_nope", 175, "B_H*D_NOPE*sizeof(e4m3)"),
    "p_exchange_buf": ("p_exchange_buf", 179, "4*(16 * B_TOPK / 4)*16"),
    "s": ("s", 180, "B_H*B_TOPK*sizeof(bf16)"),
    "rowwise_max_buf": ("rowwise_max_buf", 182, "128*sizeof(float)"),
    "is_token_valid": ("is_token_valid", 183, "NUM_INDEX_BUFS*(B_TOPK/8)"),
    "tma_coord": ("tma_coord", 184, "NUM_INDEX_BUFS*B_TOPK*sizeof(int)"),
    "scales": ("scales", 185, "NUM_INDEX_BUFS*B_TOPK*NUM_SCALES_EACH_TOKEN"),
    "tmem_start_addr": ("tmem_start_addr", 186, "16"),
    "mbarriers": ("bar_last_store_done", 187, "25*8"),
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
        member, line, formula = SMEM_SITES[b.name]
        size = _eval(formula.replace("sizeof(float)", "4").replace("sizeof(int)", "4"))
        if size != b.size:
            _fail(f"kernel page: {b.name} is {b.size} B in the model, {formula} = {size} B from the source",
                  rule="the shared-memory plan is the kernel's struct")
        last = f"-{line + 6}" if b.name == "mbarriers" else ""
        src = f"member `{member}` config.h L{line}{last}"
        rows.append((b.name, b.offset, b.size, ", ".join(b.unions) or "—", b.note or "", formula, src))
    return rows


def site_problems(lines: dict[str, list[str]]) -> list[str]:
    """Each table fact against the cited line of a checkout (``lines``: file -> its lines, ``FILES``' short names):
    a constant's name and formula, a role's branch and register count, a barrier's member, operation, count, bytes
    and parity, a named barrier's value and uses, a TMEM region's constant and uses, a struct member's name.

    >>> site_problems({"kernel.cuh": [""] * 1000, "config.h": [""] * 300})[0]
    'config.h L33: D_Q = 576 is not on the line'
    """
    out: list[str] = []

    def has(file: str, line: int, *texts: str, what: str) -> None:
        text = _norm(lines[file][line - 1]) if 0 < line <= len(lines[file]) else ""
        if not all(_norm(t) in text for t in texts):
            out.append(f"{file} L{line}: {what} is not on the line")

    for name, token, expr, file, line, _v, _w in _constants():
        has(file, line, token, expr, what=f"{name} = {expr}")
    for role, branch, elected, (a, _b), (op, regs), reg_line, _what in ROLES:
        _words, expr = _branch_text(branch, elected)
        has("kernel.cuh", a, expr, *(["elect_one_sync"] if elected else []), what=f"the {role} branch ({expr})")
        has("kernel.cuh", reg_line, f"warpgroup_reg_{op}<{regs}>", what=f"the {role} registers")
    for bar, sites in BARRIER_SITES.items():
        for op, role, line, detail in sites:
            texts = [_member(bar), _SOURCE_OPS[op]]
            if op == "init":
                texts.append(f".init({detail})")
            elif op == "expect_tx":
                texts.append(f"({detail})")
            elif op == "wait":
                text = _norm(lines["kernel.cuh"][line - 1])
                parity = ("request" if "bar_phase_batch_rel" in text else "phase ^ 1" if "^1)" in text
                          else "phase")
                if parity != detail:
                    out.append(f"kernel.cuh L{line}: {bar} {role} waits for the {parity} parity, the page says "
                               f"{detail}")
            has("kernel.cuh", line, *texts, what=f"{bar} {op} by {role or 'warp 0'}")
    for name, (value, line, uses) in NAMED_SITES.items():
        has("config.h", line, f"{name} = {value}", what=f"{name} = {value}")
        for q, use in uses:
            has("kernel.cuh", use, q, "NamedBarrier", what=f"a use of {name}")
    for name, (const, expr, line, uses) in TMEM_SITES.items():
        has("config.h", line, f"{const} = {expr}", what=f"TMEM region {name}'s column")
        for q, (a, b), _what in uses:
            for n in range(a, b + 1):
                has("kernel.cuh", n, q, what=f"TMEM region {name}'s use")
    for name, (member, line, _f) in SMEM_SITES.items():
        text = lines["config.h"][line - 1] if line <= len(lines["config.h"]) else ""
        if not re.search(rf"\b{re.escape(member)}\b", text):
            out.append(f"config.h L{line}: member {member} of {name} is not on the line")
    return out


# ---- Markdown -----------------------------------------------------------------------------------------------------
def _cell(text) -> str:
    out = str(text).replace("|", "\\|").replace("\n", " ")
    return out


def constants_table() -> str:
    def value(v) -> str:
        return ", ".join(map(str, v)) if isinstance(v, tuple) else f"{v:g}" if isinstance(v, float) else str(v)

    rows = [f"| `{n}` | {value(v)} | `{w}` | `{e}` {c} |" for n, v, w, e, c in constants_rows()]
    return "\n".join(["| constant | value (V32) | in simtc | the source's V32 formula |", "|---|---|---|---|", *rows])


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


def _phase(detail: str) -> str:
    return "per request" if detail == "request" else detail


def mbarrier_table() -> str:
    out = ["| mbarrier (buffers) | count | transaction bytes | arrive / complete | waited on by (parity) |",
           "|---|---|---|---|---|"]
    notes = []
    for r in mbarrier_rows():
        by: dict[tuple[str, str], list] = {}
        for op, role, ln, detail in r["sites"]:
            by.setdefault((op, role), []).append((_site_quote(r["name"], op, detail), ln, detail))
        arrive = ", ".join(f"{role} ({_OP_TEXT[op]})" for (op, role) in by if op not in ("init", "wait"))
        wait = ", ".join(f"{role} ({_phase(sites[0][2])})" for (op, role), sites in by.items() if op == "wait")
        tx = f"{r['tx']:,}" if r["tx"] else "—"
        name = f"`{r['name']}` (×{r['n']})" if r["n"] > 1 else f"`{r['name']}`"
        out.append(f"| {name} | {r['count']} | {tx} | {arrive} | {wait} |")
        parts = [f"{'init' if op == 'init' else f'{role} ({_OP_TEXT[op]})'}: " + "; ".join(
            f"`{q}` {cite('kernel.cuh', *lns)}" for q, lns in _merge([s[:2] for s in sites]))
            for (op, role), sites in by.items()]
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
                      "", f"Total: {SMEM_V32.total:,} B (the launch's dynamic shared memory is "
                      "`sizeof(SharedMemoryPlan)` kernel.cuh L954), under the 227 KiB a block may use (asserted "
                      "against `227*1024` kernel.cuh L955). Each member's declaration:", "", *notes])


GENERATED = {"kernel_constants": constants_table, "kernel_roles": roles_table, "kernel_mbarriers": mbarrier_table,
             "kernel_named": named_table, "kernel_tmem": tmem_table, "kernel_smem": smem_table}
"""``<!-- generated:NAME -->`` markers of docs/kernel.md (docs/scripts/hooks.py expands them)."""


def page_text(path: Path = PAGE) -> str:
    """docs/kernel.md with its generated tables expanded (what the site shows)."""
    text = path.read_text(encoding="utf-8")
    return re.sub(r"<!-- generated:(\w+) -->", lambda m: GENERATED[m.group(1)]() if m.group(1) in GENERATED
                  else m.group(0), text)


# ---- the citations: digests in the repository, lines only in a checkout --------------------------------------------
def citations(text: str) -> list[tuple[str, list[tuple[int, int]], int, int]]:
    """``(file, ranges, start, end)`` of every ``kernel.cuh L..`` / ``config.h L..`` citation in ``text``."""
    return [(m.group("file"), parse_ranges(m.group("ranges")), m.start(), m.end()) for m in CITATION.finditer(text)]


def digest(line: str) -> str:
    """The SHA-256 of a source line's text (without its end of line), as the recording stores it.

    >>> digest("")[:12]
    'e3b0c44298fc'
    """
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def recording() -> dict:
    return json.loads(RECORDING.read_text(encoding="utf-8"))


def _quotes(text: str, start: int, prev_end: int) -> list[str]:
    """The backquoted fragments of the sentence or table cell before a citation at ``start``."""
    bounds = [m.end() for m in _BOUNDARY.finditer(text, 0, start)]
    return _FRAGMENT.findall(text[max([prev_end, *bounds[-1:]]):start])


def check(text: str, rec: dict | None = None, lines: dict[str, list[str]] | None = None) -> list[str]:
    """Problems with the citations of ``text``: a cited line the recording does not hold, a citation with no
    backquoted fragment before it in the same sentence or table cell, or one whose fragments are all longer than
    :data:`MAX_QUOTE` (a quote of the source, not a name); with ``lines`` (a checkout's, by short file name) also a
    citation none of whose fragments is in the line(s) it cites.

    >>> rec = {"files": {FILES["kernel.cuh"]: {"lines": {"46": digest("a line of kernel.cuh")}}}}
    >>> check("The Q barrier (`bar_q_tma`, kernel.cuh L46) counts one.", rec)
    []
    >>> check("Q's barrier counts `2`, kernel.cuh L46; `x` kernel.cuh L47.", rec, {"kernel.cuh": ["", ""] * 30})
    ['kernel.cuh L46: none of `2` is in the line(s) cited', 'kernel.cuh L47: line 47 is not recorded']
    """
    rec = rec if rec is not None else recording()
    out = []
    prev_end = 0
    for file, ranges, start, end in citations(text):
        recorded = rec["files"][FILES[file]]["lines"]
        label = text[start:end]
        wanted = sorted(lines_to_record(ranges))
        missing = [n for n in wanted if str(n) not in recorded]
        frags = _quotes(text, start, prev_end)
        prev_end = end
        if missing:
            out.append(f"{label}: line {', '.join(map(str, missing))} is not recorded")
            continue
        if not frags:
            out.append(f"{label}: no fragment is in the line(s) cited")
            continue
        if all(len(f) > MAX_QUOTE for f in frags):
            out.append(f"{label}: `{frags[-1][:40]}…` is longer than {MAX_QUOTE} characters (say it in simtc's "
                       "words and name the line)")
            continue
        if lines is not None:
            cited = _norm("".join(lines[file][n - 1] for n in wanted if n <= len(lines[file])))
            if not any(_norm(f) in cited for f in frags if len(f) <= MAX_QUOTE):
                out.append(f"{label}: none of {', '.join(f'`{f}`' for f in frags)} is in the line(s) cited")
    return out


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's object id


def _git_show(checkout: Path, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(checkout), "show", f"{COMMIT_FULL}:{path}"], capture_output=True,
                          check=True).stdout


def _read(checkout: Path, path: str) -> bytes:
    """A file at commit 9241ae3 from a git checkout, or the file itself from a copy of the tree."""
    try:
        return _git_show(checkout, path)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return (checkout / path).read_bytes()


def source_lines(checkout: Path) -> dict[str, list[str]]:
    """The cited files' lines from a checkout, by short name (``kernel.cuh``, ``config.h``); each must be the file at
    commit 9241ae3 (its git blob id is the recording's)."""
    rec, out = recording(), {}
    for short, path in FILES.items():
        data = _read(checkout, path)
        if _blob_id(data) != rec["files"][path]["blob"]:
            _fail(f"{checkout}/{path} is not the file at {COMMIT} (blob {_blob_id(data)[:12]})",
                  rule="the page cites FlashMLA at one commit")
        out[short] = data.decode("utf-8").splitlines()
    return out


def record(checkout: Path) -> dict:
    """The digests of every line the page cites, from a FlashMLA git checkout that has commit 9241ae3."""
    wanted: dict[str, set[int]] = {f: set() for f in FILES}
    for file, ranges, _s, _e in citations(page_text()):
        wanted[file] |= lines_to_record(ranges)
    files = {}
    for short, path in FILES.items():
        data = _git_show(checkout, path)
        text = data.decode("utf-8").splitlines()
        files[path] = {"blob": _blob_id(data), "line_count": len(text),
                       "lines": {str(n): digest(text[n - 1]) for n in sorted(wanted[short])}}
    return {"repository": REPO, "commit": COMMIT_FULL,
            "what": "the SHA-256 digest of each line of FlashMLA's SM100 head64 decode kernel that docs/kernel.md "
                    "cites (the line's text without its end of line; the text itself is not stored)",
            "made_by": "python docs/scripts/kernel.py --record <FlashMLA checkout>", "files": files}


def verify(checkout: Path) -> list[str]:
    """Differences between the recording and a FlashMLA checkout at 9241ae3 (git, or files with the same blob), then
    the page's citations and table facts against the checkout's lines."""
    rec, out = recording(), []
    for path, entry in rec["files"].items():
        data = _read(checkout, path)
        if _blob_id(data) != entry["blob"]:
            out.append(f"{path}: not the file at {COMMIT} (blob {_blob_id(data)[:12]}, recorded {entry['blob'][:12]})")
            continue
        text = data.decode("utf-8").splitlines()
        out += [f"{path} L{n}: the recorded digest is not the line's" for n, d in entry["lines"].items()
                if int(n) > len(text) or digest(text[int(n) - 1]) != d]
    if out:
        return out
    lines = source_lines(checkout)
    return check(page_text(), rec, lines) + site_problems(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="the page's citations against the recording (default)")
    group.add_argument("--record", metavar="CHECKOUT", type=Path, help="rewrite the digests from a git checkout")
    group.add_argument("--verify", metavar="CHECKOUT", type=Path, help="the digests, citations and facts against a "
                                                                      "checkout")
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
