#!/usr/bin/env python3
"""Regenerate FlashMLA's SM90 sparse-decode SASS schedule: ``tests/data/flashmla_sm90_sass.json`` and the
generated table module ``simtc/kernels/flashmla/sm90_sass.py``.

Input: the cubins of ``flash_fwd_splitkv_mla_fp8_sparse_kernel`` as ``simtc crosscheck --flashmla`` builds them
(``.flashmla/out/sm90_v32.cubin``, ``sm90_model1.cubin``: FlashMLA 9241ae3, nvcc 13.0, FlashMLA's flags, sm_90a).
Each is disassembled with ``nvdisasm -c`` (:func:`simtc.hw.compile.disassemble`) and walked along the path one
CTA takes for **one split request** (its schedule holds this one (batch, query) row, begin = end request,
``is_no_split`` false, no attention sink, every token index valid, no MODEL1 extra KV):

* ``common`` -- kernel entry to the warpgroup dispatch (``BRX``), as warps 1-11 run it (warp 0's elected lane
  also initialises the mbarriers and issues the Q load: the ``q_load`` part, what warp 0's path adds);
* per warpgroup role (``wg0`` = warps 0-3, ``wg1`` = warps 4-7, ``producer`` = warps 8-11): ``prologue`` (from
  its dispatch target to its block loop), ``block`` (one trip of the block loop: loop head to the back edge,
  ``mbarrier.try_wait`` passing at once) and ``epilogue`` (loop exit to ``EXIT``, the split-KV o_accum path).
  ``wg0``'s epilogue is the path of warp 1 (warp 0 also triggers programmatic completion, ``PREEXIT``: 6 (7) more
  instructions; warps 2-3 skip the LSE store: 18 fewer); conditional branches fall through unless listed in the
  path's ``taken``.

Counts are per thread (per warp-instruction) and include predicated-off instructions (they issue). Each
instruction is either one of the Program's explicit records (a *token*: ``wgmma.qk``, ``mbarrier.wait``,
``bar.sync:9``, ``st.shared:sScale`` ...) or CUDA-core work, grouped into classes by
:func:`simtc.kernels.flashmla.sm90.sass_class`; the CUDA-core instructions between two tokens form one
``CudaCoreBlock`` of the Program, in the compiled order.

Usage::

    python tests/oracle/regen_flashmla_sm90_sass.py [--cubins .flashmla/out]          # rewrite both files
    python tests/oracle/regen_flashmla_sm90_sass.py --check                            # exit 1 if they would change

Needs nvdisasm (``nvidia-cuda-nvdisasm``). Importing this module has no side effects.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import pprint
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA_FILE = ROOT / "tests" / "data" / "flashmla_sm90_sass.json"
TABLE_MODULE = ROOT / "simtc" / "kernels" / "flashmla" / "sm90_sass.py"
GENERATOR = "tests/oracle/regen_flashmla_sm90_sass.py"
ROLES = ("wg0", "wg1", "producer")
PARTS = ("prologue", "block", "epilogue")

# Addresses of the paths in the two cubins (checked against the instruction text: a different build fails loudly).
# prologue: (dispatch target, loop head, taken); block: (loop head, back edge, taken); epilogue: (loop exit, taken)
SPECS = {
    "v32": {
        "brx": 0x870, "common_taken": (0xA0, 0x3E0),
        "wg1": {"prologue": (0x880, 0x1200, ()), "block": (0x1200, 0x1D00, ()), "epilogue": (0x1D10, ())},
        "wg0": {"prologue": (0x4070, 0x4BD0, (0x4100,)), "block": (0x4BD0, 0x7450, ()),
                "epilogue": (0x7460, (0x7490,))},
        "producer": {"prologue": (0xA760, 0xABA0, ()), "block": (0xABA0, 0xEF10, ()), "epilogue": (0xEF20, ())},
    },
    "model1": {
        "brx": 0x840, "common_taken": (0xA0, 0x3E0),
        "wg1": {"prologue": (0x850, 0x1390, ()), "block": (0x1390, 0x1E90, ()), "epilogue": (0x1EA0, ())},
        "wg0": {"prologue": (0x41F0, 0x4AF0, (0x4280,)), "block": (0x4AF0, 0x7210, ()),
                "epilogue": (0x7220, (0x7250,))},
        "producer": {"prologue": (0xA500, 0xABE0, (0xAA20,)), "block": (0xABE0, 0xF0F0, (0xB410,)),
                     "epilogue": (0xF100, (0xF140, 0x13740))},
    },
}
TAKEN_WHY = {
    "common 0xa0, 0x3e0": "warps 1-11 skip warp 0's mbarrier init and Q load (warp_idx != 0)",
    "wg0 prologue": "no attention sink (params.attn_sink == nullptr): the sink loads are skipped",
    "wg0 epilogue": "warp 1's path: warp_idx != 0 skips the next-Q copy / PDL trigger",
    "model1 producer prologue": "the request is the schedule's last (batch == end_req_idx)",
    "model1 producer block": "token index valid: the branch over the scale zeroing is taken",
    "model1 producer epilogue": "no extra KV: the first-extra-block call and the extra-block loop are skipped",
}

# smem plan offsets the tokens are named after (the SASS immediates; tests check them against the Program's plan)
SMEM = {
    "v32": {"o_accum": 0x12000, "is_kv_valid": 0x38000, "sM": 0x38080, "sL": 0x38180, "sScale": 0x38280,
            "sOScale": 0x38380},
    "model1": {"o_accum": 0x10000, "is_kv_valid": 0x32800, "sM": 0x32880, "sL": 0x32980, "sScale": 0x32A80,
               "sOScale": 0x32B80},
}
SMEM_MORE = {"v32": {"q": 0x0, "k0": 0x12000, "k1": 0x24000, "s": 0x36000, "mbarriers": 0x38480},
             "model1": {"q": 0x0, "k0": 0x10000, "k1": 0x20000, "s": 0x30800, "mbarriers": 0x32C80}}
"""More plan offsets the SASS shows (Q TMA destinations, the K buffers' base, sS in WG1's A descriptor, bar_q)."""
_SIZES = {"o_accum": 0x20800, "is_kv_valid": 0x80, "sM": 0x100, "sL": 0x100, "sScale": 0x100, "sOScale": 0x100}

_OP = re.compile(r"^(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)")
_BRA = re.compile(r"^(@!?U?P\w+\s+)?(BRA(?:\.DIV)?)\b.*`\((\.L_x_\d+)\)")
_IMM = re.compile(r"\+(0x[0-9a-f]+)\]")


def parse(sass: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """Instructions ``(address, text)`` of the one kernel in ``sass`` (``nvdisasm -c``) and label -> index."""
    flat: list[tuple[int, str]] = []
    labels: dict[str, int] = {}
    for line in sass.splitlines():
        s = line.strip()
        if re.match(r"^\.L_x_\d+:", s):
            labels[s[:-1]] = len(flat)
            continue
        m = re.match(r"^/\*([0-9a-f]+)\*/\s+(.*?)\s*;?\s*$", s)
        if m:
            flat.append((int(m.group(1), 16), re.sub(r"\s+", " ", m.group(2)).rstrip(" ;")))
    return flat, labels


def opname(text: str) -> str:
    return _OP.match(text).group(1)


def walk(flat, labels, start: int, *, until: int | None = None, last: int | None = None, taken=()) -> list:
    """The path from address ``start``: to ``until`` (exclusive), to ``last`` (inclusive) or to an ``EXIT``.
    Conditional branches (and ``BRA.DIV``) fall through unless their address is in ``taken``."""
    pos = {a: i for i, (a, _) in enumerate(flat)}
    i, out, taken = pos[start], [], set(taken)
    while len(out) < 20000:
        a, t = flat[i]
        if a == until:
            return out
        out.append((a, t))
        if a == last:
            return out
        m = _BRA.match(t)
        if m and ((m.group(1) is None and m.group(2) == "BRA") or a in taken):
            i = labels[m.group(3)]
            continue
        if opname(t) == "EXIT" and not t.startswith("@"):
            return out
        i += 1
    raise RuntimeError(f"path from {start:#x} does not end")


def _buffer(model: str, text: str) -> str:
    m = _IMM.search(text)
    if not m:
        return "stsm" if opname(text).startswith("STSM") else "?"
    off = int(m.group(1), 16)
    for name, base in SMEM[model].items():
        if base <= off < base + _SIZES[name]:
            return name
    return f"{off:#x}"


def token(model: str, role: str, part: str, text: str) -> str | None:
    """The Program record an instruction is (None: CUDA-core work of a CudaCoreBlock)."""
    op = opname(text)
    base = op.split(".")[0]
    if op.startswith("HGMMA.64x64x16"):
        return "wgmma.qk"
    if op.startswith("HGMMA.64x256x16"):
        return "wgmma.pv"
    simple = {"WARPGROUP.ARRIVE": "wgmma.fence", "WARPGROUP.DEPBAR.LE": "wgmma.wait",
              "SYNCS.PHASECHK.TRANS64.TRYWAIT": "mbarrier.wait", "SYNCS.ARRIVE.TRANS64.A1T0": "mbarrier.arrive",
              "SYNCS.ARRIVE.TRANS64": "mbarrier.arrive_tx", "SYNCS.EXCH.64": "mbarrier.init",
              "UCGABAR_WAIT": "bar.cluster", "MEMBAR.ALL.CTA": "fence.proxy_async", "UTMALDG.4D": "tma.load",
              "UBLKCP.G.S": "bulk.copy", "UTMACMDFLUSH": "bulk.commit"}
    if op in simple:
        return simple[op]
    if op == "DEPBAR.LE" and "SB0" in text:
        return "bulk.wait"
    if op in ("BAR.SYNC.DEFER_BLOCKING", "BAR.ARV"):
        bar_id = int(text.split(op)[1].split(",")[0].strip(), 16)
        return f"{'bar.sync' if op.startswith('BAR.SYNC') else 'bar.arrive'}:{bar_id}"
    if role == "producer":
        return "st.shared:is_kv_valid" if op == "STS.U16" else None
    if base in ("LDS", "STS", "STSM"):
        if role == "wg0" and part == "epilogue" and op == "LDS":
            return None  # the LSE's loads of sL / sM stay in its CudaCoreBlock
        return f"{'ld' if base == 'LDS' else 'st'}.shared:{_buffer(model, text)}"
    return None


_NO_DEST = ("ST", "STS", "STG", "STSM", "RED", "BAR", "SYNCS", "BRA", "BRX", "EXIT", "MEMBAR", "FENCE", "DEPBAR",
            "WARPGROUP", "UTMALDG", "UBLKCP", "UTMACMDFLUSH", "UTMASTG", "UCGABAR_ARV", "UCGABAR_WAIT", "NOP", "BSSY",
            "BSYNC", "WARPSYNC", "PREEXIT", "CCTL", "HGMMA")
_REG = re.compile(r"(?<![A-Z_])R(\d+)((?:\.[A-Za-z0-9_]+)*)")


def _operands(text: str) -> tuple[str, list[str]]:
    body = re.sub(r"^@!?U?P\w+\s+", "", text)
    op, _, rest = body.partition(" ")
    return op, [o.strip() for o in rest.split(",")] if rest else []


def _width(op: str) -> int:
    return 4 if ".128" in op else 2 if (".64" in op or ".WIDE" in op) else 1


def regs_of(text: str) -> tuple[set[int], set[int]]:
    """(registers written, registers read) of an instruction (vector loads / stores and ``.64`` addresses cover
    their neighbours)."""
    op, ops = _operands(text)
    base = op.split(".")[0]
    dest: set[int] = set()
    first = 0
    if base not in _NO_DEST and ops and re.fullmatch(r"R\d+", ops[0]):
        r = int(ops[0][1:])
        dest = set(range(r, r + _width(op)))
        first = 1
    src: set[int] = set()
    for k, o in enumerate(ops[first:], first):
        for m in _REG.finditer(o):
            r = int(m.group(1))
            n = 2 if ".64" in m.group(2) else (_width(op) if base in ("STS", "STG", "ST") and k == len(ops) - 1 else 1)
            src |= set(range(r, r + n))
    return dest, src


def _loads(path, wrap: bool) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """Where each global load's registers are first read (the long-scoreboard stall): ``({path index: [load names
    issued there]}, {path index: [load names first read there]})``; with ``wrap`` a load not read before the end
    of the path is read where the next trip of the loop first reads it."""
    issue: dict[int, list[str]] = collections.defaultdict(list)
    use: dict[int, list[str]] = collections.defaultdict(list)
    info = [regs_of(t) for _a, t in path]
    k = 0
    for i, (_a, t) in enumerate(path):
        if not opname(t).startswith("LDG"):
            continue
        name = f"ld{k}"
        k += 1
        issue[i].append(name)
        live = set(info[i][0])
        order = list(range(i + 1, len(path))) + (list(range(0, i)) if wrap else [])
        for j in order:
            dest, src = info[j]
            if src & live:
                use[j].append(name)
                break
            live -= dest
            if not live:
                break
    return issue, use


def schedule(model: str, role: str, part: str, path) -> tuple[list, collections.Counter, list[str]]:
    """The path as Program items: tokens (str) and CUDA-core gaps (Counter of classes); the full histogram; the SASS
    of each token (``""`` for the virtual ones). Virtual tokens: ``wgmma.commit`` (the ``gsb0`` of a group's last
    HGMMA); ``ldg:<names>`` before a run of global loads (the next CudaCoreBlock issues them and writes their
    registers) and ``use:<names>`` before the first instruction reading a load's registers (the next CudaCoreBlock
    reads them: its warp waits for the data)."""
    from simtc.kernels.flashmla.sm90 import sass_class

    items: list = [collections.Counter()]
    sass: list[str] = []  # the SASS of each token ("": none)
    full = collections.Counter()
    prev = None
    issue, use = _loads(path, wrap=part == "block")
    run: list[str] | None = None  # the ldg token being filled while loads follow one another
    for i, (_a, t) in enumerate(path):
        op = opname(t)
        if use.get(i):
            items += [f"use:{','.join(use[i])}", collections.Counter()]
            sass.append("")
            run = None
        if issue.get(i):
            if run is not None and not use.get(i):
                run += issue[i]
                items[-2] = f"ldg:{','.join(run)}"
            else:
                run = list(issue[i])
                items += [f"ldg:{','.join(run)}", collections.Counter()]
                sass.append("")
        elif not op.startswith("LDG"):
            run = None
        full[op] += 1
        if op == "FENCE.VIEW.ASYNC.S" and prev == "MEMBAR.ALL.CTA":
            prev = op  # fence.proxy.async = MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S
            continue
        prev = op
        tok = token(model, role, part, t)
        if tok is None:
            items[-1][sass_class(op)] += 1
            continue
        run = None
        items += [tok, collections.Counter()]
        sass.append(op + (" + FENCE.VIEW.ASYNC.S" if op == "MEMBAR.ALL.CTA" else ""))
        if tok.startswith("wgmma.") and "gsb0" in t and op.startswith("HGMMA"):
            items += ["wgmma.commit", collections.Counter()]  # commit_group: the gsb0 of the group's last HGMMA
            sass.append("")
    out = [x if isinstance(x, str) else tuple(sorted(x.items(), key=lambda kv: (-kv[1], kv[0])))
           for x in items if isinstance(x, str) or x]
    return out, full, sass


def derive(sass: dict[str, str]) -> tuple[dict, dict]:
    """``(data, schedules)`` from the SASS text of each model."""
    from simtc.kernels.flashmla.sm90 import sass_class

    data, scheds = {}, {}
    for model, text in sass.items():
        flat, labels = parse(text)
        by_addr = dict(flat)
        sp = SPECS[model]
        assert by_addr[sp["brx"]].startswith("BRX"), (model, "brx")
        common = walk(flat, labels, 0, last=sp["brx"], taken=sp["common_taken"])
        warp0 = walk(flat, labels, 0, last=sp["brx"])
        seen = collections.Counter(a for a, _ in common)
        q_load = [(a, t) for a, t in warp0 if not seen[a]]
        paths = {("common", "prologue"): ((0, sp["brx"], list(sp["common_taken"])), common),
                 ("q_load", "prologue"): ((0, sp["brx"], []), q_load)}
        for role in ROLES:
            for part in PARTS:
                spec = sp[role][part]
                if part == "prologue":
                    p = walk(flat, labels, spec[0], until=spec[1], taken=spec[2])
                    where = [spec[0], spec[1], list(spec[2])]
                elif part == "block":
                    assert "BRA" in by_addr[spec[1]] and by_addr[spec[1]].startswith("@"), (model, role, "back edge")
                    p = walk(flat, labels, spec[0], last=spec[1], taken=spec[2])
                    where = [spec[0], spec[1], list(spec[2])]
                else:
                    p = walk(flat, labels, spec[0], taken=spec[1])
                    assert opname(p[-1][1]) == "EXIT", (model, role, part)
                    where = [spec[0], p[-1][0], list(spec[1])]
                paths[(role, part)] = (where, p)
        mdata, msched = {}, {}
        for (role, part), (where, p) in paths.items():
            items, full, token_sass = schedule(model, role, part, p)
            classes = collections.Counter()
            for op, n in full.items():
                classes[sass_class(op)] += n
            mdata.setdefault(role, {})[part] = {
                "path": {"start": f"{where[0]:#x}", "end": f"{where[1]:#x}", "taken": [f"{a:#x}" for a in where[2]]},
                "instructions": sum(full.values()), "sass": dict(sorted(full.items())),
                "classes": dict(sorted(classes.items())),
                "tokens": [x for x in items if isinstance(x, str)], "token_sass": token_sass}
            msched.setdefault(role, {})[part] = tuple(items)
        data[model] = mdata
        scheds[model] = msched
    return data, scheds


def _table_module(scheds: dict, meta: dict) -> str:
    body = pprint.pformat(scheds, width=106, compact=True, sort_dicts=False)
    return (f'"""FlashMLA SM90 sparse-decode kernel: the compiled schedule of each role, from its SASS (generated by\n'
            f"``{GENERATOR}``; do not edit).\n\n"
            f"``SCHEDULES[model][role][part]`` lists, in the compiled order, the Program's explicit records (str\n"
            f"tokens) and the CUDA-core instructions between two of them (``((class, count), ...)``: one\n"
            f"``CudaCoreBlock``), per thread. Source: FlashMLA {meta['flashmla_commit'][:7]}, nvcc 13.0, sm_90a;\n"
            f"cubin sha256 v32 {meta['cubin_sha256']['v32'][:16]}, model1 {meta['cubin_sha256']['model1'][:16]}\n"
            f'(``tests/data/flashmla_sm90_sass.json``)."""\n\n'
            f"SCHEDULES = {body}\n")


def _nvdisasm_version() -> str:
    try:
        from importlib.metadata import version

        return f"nvidia-cuda-nvdisasm {version('nvidia-cuda-nvdisasm')} (nvdisasm -c)"
    except Exception:  # an nvdisasm from a CUDA toolkit
        return "nvdisasm -c"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cubins", default=str(ROOT / ".flashmla" / "out"), help="folder with sm90_{v32,model1}.cubin")
    ap.add_argument("--check", action="store_true", help="exit 1 if the files would change")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from simtc.hw.compile import disassemble

    folder = Path(args.cubins)
    cubins = {m: (folder / f"sm90_{m}.cubin").read_bytes() for m in ("v32", "model1")}
    build = json.loads((folder / "build.json").read_text()) if (folder / "build.json").is_file() else {}
    data, scheds = derive({m: disassemble(b) for m, b in cubins.items()})
    meta = {
        "format": "simtc-flashmla-sm90-sass", "version": 1,
        "flashmla_commit": build.get("flashmla_commit", "9241ae3ef9bac614dd25e45e507e089f888280e0"),
        "nvcc": build.get("nvcc", "Build cuda_13.0.r13.0/compiler.36424714_0"),
        "nvcc_flags": build.get("nvcc_flags", []), "arch": "sm_90a", "nvdisasm": _nvdisasm_version(),
        "kernel": "flash_fwd_splitkv_mla_fp8_sparse_kernel<KernelTemplate<V32|MODEL1, 64>> "
                  "(csrc/sm90/decode/sparse_fp8/instantiations/{v32,model1}_persistent_h64.cu)",
        "cubin_sha256": {m: hashlib.sha256(b).hexdigest() for m, b in cubins.items()},
        "command": f"python {GENERATOR} --cubins .flashmla/out",
        "method": " ".join(__doc__.split("Usage::")[0].split("\n", 2)[2].split()),
        "taken_branches": TAKEN_WHY,
        "smem_offsets": {m: {k: f"{v:#x}" for k, v in {**SMEM[m], **SMEM_MORE[m]}.items()} for m in SMEM},
    }
    text = json.dumps({**meta, "models": data}, indent=1, sort_keys=False) + "\n"
    module = _table_module(scheds, meta)
    if args.check:
        same = DATA_FILE.read_text() == text and TABLE_MODULE.read_text() == module
        print("up to date" if same else "would change")
        return 0 if same else 1
    DATA_FILE.write_text(text)
    TABLE_MODULE.write_text(module)
    print(f"wrote {DATA_FILE.relative_to(ROOT)} and {TABLE_MODULE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
