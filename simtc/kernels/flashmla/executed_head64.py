"""FlashMLA's compiled SM100 head64 kernel held against simtc's hand Program: the parts below the executor.

simtc's hand replay (:mod:`simtc.kernels.flashmla.replay`) is a transcription of FlashMLA's
``csrc/sm100/decode/head64/kernel.cuh`` at ``9241ae3``; :mod:`simtc.cuda.executed_sm100.head64` compiles and runs the
kernel itself in simtc's PTX executor and records one CTA as a Program. This module holds what needs no executor:

* the host-side values of the kernel's parameters that FlashMLA's API computes (:data:`LOG_2_E`,
  :data:`MODEL_TYPE`, :func:`pack_struct`: a C struct's bytes at the offsets nvcc gives it, every field given,
  :func:`sched_arrays`: ``get_mla_metadata_kernel``'s ``tile_scheduler_metadata`` and ``num_splits``);
* the record-by-record comparison of an executed Program with the hand Program (:func:`diff_programs`, per role,
  warp and record; :func:`normalized` keeps one of the two ways a thing is said where both Programs say it
  differently; :func:`hand_streams` frames the hand Program with its setup and teardown as the replay runs them);
* the residuals ``docs/kernel.md`` explains (:data:`EXPLANATIONS`), each granted only where its claim holds for the
  two values (:func:`explain`), and :class:`ExecutedDiff`, what ``simtc program diff flashmla-head64 --executed``
  prints.

>>> explain({"kind": "field", "op": "CpAsyncBulkTensor", "role": "mma", "field": "coords",
...          "hand_value": [8192], "executed_value": [64, 0, 0, 0]})
'tma-coordinates'
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from attrs import field, frozen

from simtc.errors import SimtcError
from simtc.kernels.flashmla.constants import B_H
from simtc.kernels.flashmla.models import Head64Model, model

__all__ = ["CASES", "COMPARED", "EXPLANATIONS", "LOG_2_E", "MODEL_TYPE", "NUM_THREADS", "ExecutedDiff",
           "barrier_names", "diff_programs", "explain", "hand_streams", "normalized", "pack_struct", "sched_arrays"]

_API = "FlashMLA 9241ae3 csrc/api/sparse_decode.h L385-466 (sparse_attn_decode_interface)"
LOG_2_E = np.float32(1.44269504)
"""``LOG_2_E`` of FlashMLA ``csrc/api/common.h`` L12 (a float): ``sm_scale_div_log2 = sm_scale * LOG_2_E``."""
NUM_THREADS = 384
"""``NUM_THREADS = 128*3`` (``config.h`` L49): the launch's block (``kernel.cuh`` L959)."""
MODEL_TYPE = {"v32": 0, "model1": 1}
"""``enum class ModelType { V32, MODEL1 }`` (``csrc/params.h`` L5-8)."""


# ---- host-side values -----------------------------------------------------------------------------------------
def pack_struct(layout: Mapping, values: Mapping[str, object], what: str) -> bytes:
    """The struct's bytes: each field of ``layout`` (``{"size", "fields": {name: [offset, size]}}``) from
    ``values`` (ints as little-endian integers of the field's size, floats as float32); every field needs a value."""
    fields = layout["fields"]
    missing = sorted(set(fields) - set(values))
    extra = sorted(set(values) - set(fields))
    if missing or extra:
        raise SimtcError(f"{what}: no value for {', '.join(missing) or '-'}; not a field: {', '.join(extra) or '-'}",
                         rule=f"every field of {what} is given its host-side value", ref=_API)
    buf = bytearray(int(layout["size"]))
    for name, (off, size) in fields.items():
        v = values[name]
        if isinstance(v, float | np.floating):
            if size != 4:
                raise SimtcError(f"{what}.{name}: a float for a {size}-byte field", rule="float fields are float32")
            raw = np.float32(v).tobytes()
        else:
            raw = int(v).to_bytes(size, "little", signed=int(v) < 0)
        buf[off:off + size] = raw
    return bytes(buf)


def sched_arrays(b: int, topk: int, num_sm_parts: int, topk_length=None,
                 fields: Mapping | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``tile_scheduler_metadata`` (int32 ``[num_sm_parts, 8]``, ``DecodingSchedMeta`` each) and ``num_splits``
    (int32 ``[b + 1]``) as ``get_mla_metadata_kernel`` writes them (:func:`~simtc.kernels.flashmla.schedule.
    sched_meta`; ``num_splits[i+1] - num_splits[i]``: the parts request i is spread over)."""
    from simtc.kernels.flashmla.schedule import sched_meta

    parts = sched_meta(b, topk, num_sm_parts, topk_length)
    meta = np.zeros((num_sm_parts, 8), np.int32)
    order = ("begin_req_idx", "end_req_idx", "begin_block_idx", "end_block_idx", "begin_split_idx",
             "is_first_req_splitted", "is_last_req_splitted")
    for i, p in enumerate(parts):
        vals = (p.begin_req, p.end_req, p.begin_block, p.end_block, p.begin_split, int(p.first_split),
                int(p.last_split))
        for name, v in zip(order, vals, strict=True):
            col = (fields[name][0] // 4) if fields else order.index(name)
            meta[i, col] = v
    per_req = np.zeros(b, np.int64)
    for p in parts:
        for r in range(p.begin_req, p.end_req + 1):
            per_req[r] += 1
    splits = np.concatenate([[0], np.cumsum(per_req)]).astype(np.int32)
    return meta, splits


# ---- the executed kernel's records against the hand Program's ---------------------------------------------------
COMPARED = ("Alloc", "Dealloc", "RelinquishAllocPermit", "Cp", "Mma", "Commit", "Ld", "St", "WaitLd", "WaitSt",
            "FenceBeforeThreadSync", "FenceAfterThreadSync", "MbarrierInit", "MbarrierArrive",
            "MbarrierArriveExpectTx", "MbarrierTryWait", "CpAsyncBulkTensor", "CpAsyncBulkTensorStore", "CpAsyncBulk",
            "BulkCommitGroup", "BulkWaitGroupRead", "BarSync", "BarArrive", "FenceProxyAsync")
"""The record classes compared, per role and in order: every asynchronous, tensor-memory and synchronising
operation. CUDA-core work (:class:`~simtc.isa.cuda_core.CudaCoreBlock`) and the hand Program's explicit
shared-memory loads and stores (:class:`~simtc.isa.shared.LdShared` / ``StShared``, which the recording keeps inside
its CUDA-core blocks as byte ranges) are not compared record by record."""
_IGNORED_FIELDS = frozenset(("label",))


def _value(v, bars: Mapping[str, str]):
    """A record field as plain JSON: descriptors as their fields and their encoded word, barriers by name."""
    import attrs

    from simtc.isa.idesc import InstrDescriptor
    from simtc.smem.desc import SmemDescriptor

    if isinstance(v, SmemDescriptor):
        return {"word": v.hex(), **{a.name: getattr(v, a.name) for a in attrs.fields(SmemDescriptor)}}
    if isinstance(v, InstrDescriptor):
        return {"word": v.hex(), **{a.name: getattr(v, a.name) for a in attrs.fields(InstrDescriptor)}}
    if isinstance(v, str):
        return bars.get(v, v)
    if isinstance(v, tuple):
        return [_value(x, bars) for x in v]
    if isinstance(v, np.integer | np.floating | np.bool_):
        return v.item()
    return v


def normalized(rec, bars: Mapping[str, str] | None = None, *, warp: int = 0,
               tensors: Mapping[str, str] | None = None) -> dict:
    """A record as ``{"op": class name, field: value ...}`` (see :func:`_value`) for warp ``warp`` of its role:
    ``bars`` renames barriers (the recording's ``mbar@<address>`` to the hand Program's names), ``tensors`` the
    recording's tensors (``global@<address>``) to the hand Program's. Where the two Programs say one thing two ways,
    one way is kept: a ``tcgen05.ld``/``st`` by the absolute first TMEM lane the warp touches (``lane0``; the
    register names are the replay's own), a named barrier by the id this warp gives (the hand Program's
    ``warp_ids``), a one-thread ``mbarrier.arrive`` (the recording's zero-byte ``arrive.expect_tx``, as the engine
    counts arrivals) as an arrival of count 1, a TMA store without its ``issuing_warp`` (kept only for that warp)."""
    import attrs

    bars = bars or {}
    op = type(rec).__name__
    out = {"op": op}
    for a in attrs.fields(type(rec)):
        if a.name not in _IGNORED_FIELDS:
            out[a.name] = _value(getattr(rec, a.name), bars)
    if op in ("Ld", "St"):
        out["lane0"] = rec.lane0(warp)
        for k in ("dst", "src", "lane_base"):
            out.pop(k, None)
    elif op in ("BarSync", "BarArrive"):
        ids = out.pop("warp_ids", None) or ()
        if ids:
            out["id"] = ids[warp % len(ids)]
    elif op == "MbarrierArriveExpectTx" and out.get("tx_bytes") == 0:
        out = {"op": "MbarrierArrive", "bar": out["bar"], "count": 1, "state": out.get("state", "")}
    elif op == "CpAsyncBulkTensorStore":
        out.pop("issuing_warp", None)
    if tensors and isinstance(out.get("tensor"), str):
        out["tensor"] = tensors.get(out["tensor"], out["tensor"])
    return out


def barrier_names(hand, executed) -> dict[str, str]:
    """The recording's mbarrier names (``mbar@0x...``, by shared-memory address) -> the hand Program's names (its
    barrier table's addresses; FlashMLA's dynamic shared memory starts at shared address 0, no static shared)."""
    by_addr = {b.addr: b.name for b in hand.barriers if b.kind == "mbarrier" and b.addr is not None}
    out = {}
    for b in executed.barriers:
        if b.kind == "mbarrier" and b.addr is not None and b.addr in by_addr:
            out[b.name] = by_addr[b.addr]
    return out


_PER_LANE = frozenset(("MbarrierTryWait", "BulkCommitGroup", "BulkWaitGroupRead"))
"""Records that repeat in the recording for one operation: the polls of an ``mbarrier.try_wait`` loop, and the
per-thread copies of a warp-wide bulk-group instruction (``cp.async.bulk.commit_group`` / ``wait_group.read``,
which the recording keeps once per executing lane). Consecutive identical ones count once."""


def _compared(records, bars, *, warp: int = 0, tensors=None) -> list[tuple[int, dict]]:
    """(index in the role, normalized record) of the compared records of warp ``warp`` (see :data:`_PER_LANE`); a
    run of ``mbarrier.init`` is sorted by barrier (the kernel's init order is not the plan's address order)."""
    out: list[tuple[int, dict]] = []
    for i, r in enumerate(records):
        if type(r).__name__ not in COMPARED:
            continue
        iw = getattr(r, "issuing_warp", None)
        if iw is not None and iw != warp:
            continue
        n = normalized(r, bars, warp=warp, tensors=tensors)
        if n["op"] in _PER_LANE and out and out[-1][1] == n:
            continue
        out.append((i, n))
    k = 0
    while k < len(out):
        j = k
        while j < len(out) and out[j][1]["op"] == "MbarrierInit":
            j += 1
        if j > k + 1:
            out[k:j] = sorted(out[k:j], key=lambda x: x[1]["bar"])
        k = j + 1 if j == k else j
    return out


def _key(n: dict) -> tuple:
    return (n["op"], n.get("bar", ""))


def hand_streams(hand, m: Head64Model) -> dict[tuple[str, int], list]:
    """Per (role, warp), the hand Program's records framed as the replay runs them (``head64.py`` module text): warp
    0's setup first (``mbarrier.init`` of the barrier table, :func:`~simtc.kernels.flashmla.head64.setup_records`),
    the CTA barrier after it (``__syncthreads``, ``kernel.cuh`` L67) for every warp, and after the roles the
    per-request ``everyone_sync`` (L116) for every warp and warp 0's ``tcgen05.dealloc`` (L425)."""
    from simtc.isa.mbarrier import MbarrierInit
    from simtc.isa.sync import BarSync
    from simtc.isa.tcgen05 import Dealloc
    from simtc.kernels.flashmla.constants import TMEM_COLUMNS
    from simtc.kernels.flashmla.head64 import setup_records
    from simtc.kernels.flashmla.models import NAMED_BARRIERS

    everyone = BarSync(*NAMED_BARRIERS["everyone_sync"])
    out = {}
    for role in hand.roles:
        for w in role.warps:
            pre, post = [BarSync(0, NUM_THREADS)], [everyone]
            if w == 0:
                inits = [MbarrierInit(b.name, b.count) for b in hand.barriers if b.kind == "mbarrier"]
                pre = [*inits, *setup_records(m), *pre]
                post = [*post, Dealloc(0, TMEM_COLUMNS)]
            out[(role.name, w)] = [*pre, *role.records, *post]
    return out


def diff_programs(hand, executed, sources: Mapping | None = None, *, m: Head64Model | None = None,
                  tensors: Mapping[str, str] | None = None) -> list:
    """Per role of ``hand`` and warp of the role, against that warp's executed records, the differences of the two
    record streams in order (:func:`hand_streams`, :func:`normalized`): each is ``{"role", "warp", "kind": "field" |
    "only_hand" | "only_executed", "op", "hand", "executed", "field", "hand_value", "executed_value", "source",
    "why"}`` (indices into each side's stream; ``source``: the executed record's PTX and CUDA lines; ``why``: the
    ``docs/kernel.md`` explanation that covers it, :func:`explain`, or None)."""
    import difflib

    m = model(m or hand.name.rsplit("-", 1)[-1])
    bars = barrier_names(hand, executed)
    streams = hand_streams(hand, m)
    out = []
    for role, w in ((r, w) for r in hand.roles for w in r.warps):
        ex = next((r for r in executed.roles if w in r.warps), None)
        if ex is None:
            out.append({"role": role.name, "warp": w, "kind": "only_hand", "op": "(role)", "hand": None,
                        "executed": None, "field": None, "hand_value": None,
                        "executed_value": f"warp {w} issued nothing", "source": None, "why": None})
            continue
        a = _compared(streams[(role.name, w)], bars, warp=w)
        b = _compared(ex.records, bars, warp=w, tensors=tensors)
        sm = difflib.SequenceMatcher(a=[_key(n) for _, n in a], b=[_key(n) for _, n in b], autojunk=False)

        def src(j, ex=ex, b=b):
            s = (sources or {}).get((ex.name, b[j][0]))
            return s.to_json() if s is not None and hasattr(s, "to_json") else None

        def add(d):
            d["why"] = explain(d)
            out.append(d)

        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                for k in range(i2 - i1):
                    (ia, na), (jb, nb) = a[i1 + k], b[j1 + k]
                    for f in sorted(set(na) | set(nb)):
                        if na.get(f) != nb.get(f):
                            add({"role": role.name, "warp": w, "executed_role": ex.name, "kind": "field",
                                 "op": na["op"], "hand": ia, "executed": jb, "field": f, "hand_value": na.get(f),
                                 "executed_value": nb.get(f), "source": src(j1 + k)})
                continue
            for k in range(i1, i2):
                add({"role": role.name, "warp": w, "executed_role": ex.name, "kind": "only_hand", "op": a[k][1]["op"],
                     "hand": a[k][0], "executed": None, "field": None, "hand_value": a[k][1],
                     "executed_value": None, "source": None})
            for k in range(j1, j2):
                add({"role": role.name, "warp": w, "executed_role": ex.name, "kind": "only_executed",
                     "op": b[k][1]["op"], "hand": None, "executed": b[k][0], "field": None, "hand_value": None,
                     "executed_value": b[k][1], "source": src(k)})
    return out


EXPLANATIONS = {
    "tma-coordinates": "A TMA copy's coordinates: the hand Program names a tile by its byte offset in the tensor "
                       "(column x 64 rows x 2 B: the executed first coordinate x 128) and a gather4 by its column, "
                       "its four rows left to the register read from tma_coord (the executed copy carries the four "
                       "row coordinates the index warp wrote); the executed coordinates of the higher dimensions "
                       "(query position, batch) are the block's own",
    "tma-box": "A tile copy's box rows and swizzle: the hand Program leaves them to the tensor map (rows 0, no "
               "swizzle named); the executed copy carries its map's (Q NoPE: 64 rows, SW128; the 5-D Q RoPE box "
               "{32, 64, 2}: 128 rows, SW64)",
}
"""The residual kinds ``docs/kernel.md`` ("FlashMLA's compiled head64 kernel against the hand Program") explains,
each checked where it is claimed (:func:`explain`)."""


def explain(d: Mapping) -> str | None:
    """The :data:`EXPLANATIONS` key covering difference ``d`` when its claim holds for the two values, or None."""
    hv, xv, f = d.get("hand_value"), d.get("executed_value"), d.get("field")
    if d["kind"] == "field" and d["op"] in ("CpAsyncBulkTensor", "CpAsyncBulkTensorStore"):
        if f == "coords" and isinstance(hv, list) and isinstance(xv, list) and len(hv) == 1 and xv:
            gather = len(xv) == 5 and d["op"] == "CpAsyncBulkTensor" and d["role"] in ("raw", "rope")
            if gather and hv[0] == xv[0]:
                return "tma-coordinates"
            if not gather and hv[0] == 128 * xv[0] and all(v == 0 for v in xv[1:]):
                return "tma-coordinates"
            return None
        if f == "coord_reg" and isinstance(hv, str) and hv.startswith("coord") and xv == "":
            return "tma-coordinates"
        if f == "rows" and hv == 0 and xv in (B_H, 2 * B_H):
            return "tma-box"
        if f == "swizzle" and hv == "" and xv in ("SW128", "SW64"):
            return "tma-box"
        return None
    return None


@frozen(eq=False)
class ExecutedDiff:
    """The executed kernel's records against the hand Program's, for one request (:func:`executed_diff`)."""

    model: str
    blocks: int
    seed: int
    rescale: tuple[bool, ...]
    differences: list
    hand: object = field(repr=False)
    executed: object = field(repr=False)
    run: object = field(repr=False)
    """The :class:`simtc.cuda.executed_sm100.head64.ExecutedHead64` it came from."""

    def counts(self) -> dict[str, dict[str, int]]:
        """Per role, the compared records of each side (summed over the role's warps)."""
        bars = barrier_names(self.hand, self.executed)
        streams = hand_streams(self.hand, model(self.model))
        out = {}
        for role in self.hand.roles:
            c = {"hand": 0, "executed": 0}
            for w in role.warps:
                ex = next((r for r in self.executed.roles if w in r.warps), None)
                c["hand"] += len(_compared(streams[(role.name, w)], bars, warp=w))
                c["executed"] += len(_compared(ex.records, bars, warp=w)) if ex is not None else 0
            out[role.name] = c
        return out

    def to_json(self) -> dict:
        return {"model": self.model, "blocks": self.blocks, "seed": self.seed,
                "rescale_blocks": [i for i, r in enumerate(self.rescale) if r], "compared": self.counts(),
                "differences": self.differences}

    def lines(self) -> list[str]:
        head = (f"FlashMLA head64 {self.model.upper()}, {self.blocks} block(s), seed {self.seed}: the executed "
                f"kernel's block (0,0,0) against the hand Program, {len(self.differences)} difference(s)")
        out = [head]
        for role, c in self.counts().items():
            n = sum(1 for d in self.differences if d["role"] == role)
            out.append(f"  {role:8s} {c['hand']:5d} hand / {c['executed']:5d} executed records compared, {n} differ")
        for d in self.differences:
            where = ""
            if d.get("source"):
                s = d["source"]
                where = f"  [PTX {s['ptx_lines'][0]}" + (f" | {s['cuda']}" if s.get("cuda") else "") + "]"
            if d["kind"] == "field":
                out.append(f"  {d['role']} w{d['warp']}: {d['op']} (hand #{d['hand']}, executed #{d['executed']}) "
                           f"{d['field']}: {d['hand_value']!r} -> {d['executed_value']!r}{where}")
            elif d["kind"] == "only_hand":
                out.append(f"  {d['role']} w{d['warp']}: only in the hand Program: #{d['hand']} {d['hand_value']}")
            else:
                out.append(f"  {d['role']} w{d['warp']}: only executed: #{d['executed']} {d['executed_value']}{where}")
        return out


# ---- the recorded cases (tests/data/flashmla_head64_executed.json) ----------------------------------------------
CASES = (("v32", 1, 1, 1), ("v32", 2, 1, 1), ("v32", 4, 1, 1), ("model1", 1, 1, 1), ("model1", 2, 1, 1),
         ("v32", 2, 2, 2))
"""(model, blocks, b, s_q) of the recorded runs: one CTA over 1, 2 and 4 blocks, and a small grid (2 query positions
x 2 requests: 2 CTAs, each running 2 requests one after the other)."""
