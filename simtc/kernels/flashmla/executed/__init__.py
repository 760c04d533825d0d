"""FlashMLA's own SM90 sparse decode, compiled to PTX and executed by simtc: its launches, parameters, comparison.

FlashMLA's ``sparse_attn_decode_interface`` (``csrc/api/sparse_decode.h`` at 9241ae3) makes three launches on an
SM90 GPU, and this module states each as data, the way that host code builds it:

1. ``get_mla_metadata_kernel`` (``csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu`` lines
   109-114): grid 1, 32 threads, ``4 (5 b + 1)`` bytes of dynamic shared memory, one ``GetDecodeSchedMetaParams``
   (:func:`sched_params`; its fields as ``sparse_decode.h`` lines 425-438 fill them);
2. ``flash_fwd_splitkv_mla_fp8_sparse_kernel`` (``csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh`` lines 686-780): grid
   ``(1, s_q, num_sm_parts)``, 384 threads, ``sizeof(SharedMemoryPlan)`` bytes of dynamic shared memory, a
   ``SparseAttnDecodeParams`` (:func:`decode_params`, ``sparse_decode.h`` lines 385-466) and a ``TmaParams``
   (:func:`tma_params`: the bytes FlashMLA's host code builds, with simtc's tensor maps in place of the driver's);
3. ``flash_fwd_mla_combine_kernel`` (``csrc/smxx/decode/combine/combine.cu`` lines 188-213): grid ``(b s_q, 1,
   h_q / 8)``, 256 threads, the instance for ``NUM_SPLITS`` = the smallest of 32, 64, 96, 128, 160 that holds
   ``num_sm_parts`` (:func:`combine_instance`), a ``CombineParams`` (:func:`combine_params`,
   ``sparse_decode.h`` lines 470-488).

The struct layouts are not written here: they are what nvcc makes of ``csrc/params.h``, printed by simtc's
host-side probe ``flashmla_sm90_layout.cu`` (next to this file; :class:`Layouts`), which also prints the
``TmaParams`` object of ``KernelTemplate::run`` and the arguments ``cute::make_tma_copy`` passes to
``cuTensorMapEncodeTiled`` for Q. ``num_sm_parts`` is ``Decode_Sm90_Impl::get_meta``'s (``sparse_decode.h`` lines
59-65) for the H200's 132 SMs (:data:`H200_SMS`).

The comparison (:func:`compare_bits`) counts bit-identical O (bf16) and LSE (float32) values against a recording
and measures the rest in units in the last place.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from attrs import frozen

from simtc.errors import SimtcError

__all__ = ["H200_SMS", "LAYOUT_PROBE", "BitComparison", "Layouts", "combine_instance", "combine_params",
           "compare_bits", "decode_params", "launch_plan", "num_sm_parts", "o_tensor_map_args", "sched_params",
           "tma_params", "ulp_distance"]

LAYOUT_PROBE = Path(__file__).parent / "flashmla_sm90_layout.cu"
"""simtc's host-side probe of FlashMLA's struct layouts and Q tensor-map arguments (simtc code)."""

H200_SMS = 132
"""SMs of the H200 the recording ran on (``tests/data/flashmla_h200_sm90.npz`` meta.json ``device``; NVIDIA H200
product brief: 132 SMs) [measured: the recording's device query]."""

D_V, B_H = 512, 64
BLOCK_SIZE_N, FIXED_OVERHEAD = 64, 5
"""``Decode_Sm90_Impl::get_meta`` (``sparse_decode.h`` lines 59-65): block_size_topk 64, fixed overhead 5 blocks."""
LOG2E = 1.4426950408889634
"""``LOG_2_E`` of ``csrc/api/common.h``: ``sm_scale_div_log2 = sm_scale * LOG_2_E`` (``sparse_decode.h`` line 387)."""
BYTES_PER_TOKEN = {"v32": 512 + 64 * 2 + (512 // 128) * 4, "model1": 448 + 64 * 2 + 448 // 64 + 1}
"""``bytes_per_token`` (``sparse_decode.h`` lines 292-297): the ``stride_kv_row`` FlashMLA passes (656, 584)."""
NUM_THREADS, COMBINE_BLOCK_M = 384, 8
"""``KernelTemplate::NUM_THREADS`` (``config.h`` line 31) and the combine's ``BLOCK_SIZE_M`` (``combine.cu`` line
193, 32 threads per row)."""
COMBINE_SPLITS = (32, 64, 96, 128, 160)
"""``MLA_NUM_SPLITS_SWITCH`` (``combine.cu`` lines 165-185)."""
_RULE = "FlashMLA's SM90 host code (csrc/api/sparse_decode.h, splitkv_mla.cuh, combine.cu at 9241ae3)"


def num_sm_parts(s_q: int, h_q: int = B_H, num_sms: int = H200_SMS) -> int:
    """``Decode_Sm90_Impl::get_meta``: ``max(num_sms / s_q / (h_q / 64), 1)`` in integers.

    >>> num_sm_parts(1), num_sm_parts(2)
    (132, 66)
    """
    return max(num_sms // s_q // (h_q // 64), 1)


def combine_instance(parts: int) -> int:
    """The combine kernel's ``NUM_SPLITS`` for ``num_sm_parts`` (``MLA_NUM_SPLITS_SWITCH``)."""
    for n in COMBINE_SPLITS:
        if parts <= n:
            return n
    raise SimtcError(f"num_sm_parts {parts} > 160: FlashMLA's combine has no instance for it", rule=_RULE)


@frozen
class Layouts:
    """The compiled layouts the probe printed: ``structs[name] = {"sizeof", "alignof", "fields": {field: offset}}``,
    the ``TmaParams`` object (its bytes and tensor-map offsets) and the captured Q ``cuTensorMapEncodeTiled``
    arguments."""

    structs: Mapping
    tma: Mapping
    tma_q_encode: Mapping
    model_type: Mapping
    shared_plan: int
    """``sizeof(SharedMemoryPlan)`` (``config.h`` lines 91-103): the split-KV kernel's dynamic shared memory."""

    @classmethod
    def from_json(cls, text: str) -> Layouts:
        try:
            d = json.loads(text)
            structs = {k: d[k] for k in ("DecodingSchedMeta", "GetDecodeSchedMetaParams", "SparseAttnDecodeParams",
                                         "CombineParams")}
            for s in structs.values():
                s["fields"].pop("_", None)
            return cls(structs, d["TmaParams"], d["tma_Q_encode"], d["ModelType"], int(d["SharedMemoryPlan"]["sizeof"]))
        except (ValueError, KeyError, TypeError) as e:
            raise SimtcError(f"the layout probe's output is not what simtc wrote it to print ({e})",
                             rule="flashmla_sm90_layout.cu prints one JSON object") from None

    def offset(self, struct_name: str, name: str) -> int:
        return int(self.structs[struct_name]["fields"][name])

    def size(self, struct_name: str) -> int:
        return int(self.structs[struct_name]["sizeof"])


_INT = {"i": "<i", "f": "<f", "p": "<Q"}


def _pack(lay: Layouts, name: str, values: Mapping[str, tuple[str, float | int]]) -> bytes:
    """A struct's bytes: every field at its compiled offset, ``values[field] = (kind, value)`` with kind ``i``
    (int32), ``f`` (float32), ``p`` (a pointer, 0 for nullptr); fields not given (``stream``) are zero."""
    buf = bytearray(lay.size(name))
    fields = lay.structs[name]["fields"]
    unknown = set(values) - set(fields)
    if unknown:
        raise SimtcError(f"{name} has no field {', '.join(sorted(unknown))} in this FlashMLA checkout", rule=_RULE)
    for f, (kind, v) in values.items():
        struct.pack_into(_INT[kind], buf, int(fields[f]), v)
    return bytes(buf)


def sched_params(lay: Layouts, inp, *, topk_length: int, meta: int, splits: int, parts: int) -> bytes:
    """``GetDecodeSchedMetaParams`` as ``sparse_decode.h`` lines 425-438 fill it: block_size_n 64, fixed overhead
    5, ``topk``, ``extra_topk`` 0 (no extra cache), the optional ``topk_length``, no seqlens_k (sparse), the metadata
    and num_splits buffers, ``num_sm_parts``. Pointers are device addresses (0: nullptr)."""
    return _pack(lay, "GetDecodeSchedMetaParams", {
        "b": ("i", inp.b), "s_q": ("i", inp.s_q), "block_size_n": ("i", BLOCK_SIZE_N),
        "fixed_overhead_num_blocks": ("i", FIXED_OVERHEAD), "topk": ("i", inp.topk), "extra_topk": ("i", 0),
        "topk_length": ("p", topk_length), "extra_topk_length": ("p", 0), "seqlens_k_ptr": ("p", 0),
        "tile_scheduler_metadata_ptr": ("p", meta), "num_splits_ptr": ("p", splits), "num_sm_parts": ("i", parts)})


def decode_params(lay: Layouts, inp, ptr: Mapping[str, int], parts: int) -> bytes:
    """``SparseAttnDecodeParams`` as ``sparse_decode.h`` lines 385-411 and 450-466 fill it for contiguous tensors
    (strides in elements, bytes for the uint8 cache): ``ptr`` names the device addresses ``q kv indices topk_length
    attn_sink lse out lse_accum o_accum meta splits`` (0: nullptr)."""
    b, s_q, h_q, d_qk = inp.q.shape
    name = inp.model.name
    scale = float(np.float32(inp.sm_scale))
    return _pack(lay, "SparseAttnDecodeParams", {
        "b": ("i", b), "s_q": ("i", s_q), "h_q": ("i", h_q), "h_kv": ("i", 1), "d_qk": ("i", d_qk), "d_v": ("i", D_V),
        "sm_scale": ("f", scale), "sm_scale_div_log2": ("f", float(np.float32(scale) * np.float32(LOG2E))),
        "num_blocks": ("i", inp.num_blocks), "page_block_size": ("i", inp.page_block_size), "topk": ("i", inp.topk),
        "model_type": ("i", int(lay.model_type["MODEL1" if name == "model1" else "V32"])),
        "q": ("p", ptr["q"]), "kv": ("p", ptr["kv"]), "indices": ("p", ptr["indices"]),
        "topk_length": ("p", ptr.get("topk_length", 0)), "attn_sink": ("p", ptr.get("attn_sink", 0)),
        "lse": ("p", ptr["lse"]), "out": ("p", ptr["out"]),
        "extra_num_blocks": ("i", 0), "extra_page_block_size": ("i", 0), "extra_topk": ("i", 0),
        "extra_kv": ("p", 0), "extra_indices": ("p", 0), "extra_topk_length": ("p", 0),
        "stride_q_b": ("i", s_q * h_q * d_qk), "stride_q_s_q": ("i", h_q * d_qk), "stride_q_h_q": ("i", d_qk),
        "stride_kv_block": ("i", inp.block_stride), "stride_kv_row": ("i", BYTES_PER_TOKEN[name]),
        "stride_indices_b": ("i", s_q * inp.topk), "stride_indices_s_q": ("i", inp.topk),
        "stride_lse_b": ("i", s_q * h_q), "stride_lse_s_q": ("i", h_q),
        "stride_o_b": ("i", s_q * h_q * D_V), "stride_o_s_q": ("i", h_q * D_V), "stride_o_h_q": ("i", D_V),
        "stride_extra_kv_block": ("i", 0), "stride_extra_kv_row": ("i", 0), "stride_extra_indices_b": ("i", 0),
        "stride_extra_indices_s_q": ("i", 0),
        "lse_accum": ("p", ptr["lse_accum"]), "o_accum": ("p", ptr["o_accum"]),
        "stride_lse_accum_split": ("i", s_q * h_q), "stride_lse_accum_s_q": ("i", h_q),
        "stride_o_accum_split": ("i", s_q * h_q * D_V), "stride_o_accum_s_q": ("i", h_q * D_V),
        "stride_o_accum_h_q": ("i", D_V),
        "tile_scheduler_metadata_ptr": ("p", ptr["meta"]), "num_splits_ptr": ("p", ptr["splits"]),
        "num_sm_parts": ("i", parts)})


def combine_params(lay: Layouts, inp, ptr: Mapping[str, int], parts: int) -> bytes:
    """``CombineParams`` as ``sparse_decode.h`` lines 470-488 fill it (the split-KV params' pointers and strides)."""
    b, s_q, h_q, _ = inp.q.shape
    return _pack(lay, "CombineParams", {
        "b": ("i", b), "s_q": ("i", s_q), "h_q": ("i", h_q), "d_v": ("i", D_V),
        "lse": ("p", ptr["lse"]), "out": ("p", ptr["out"]), "stride_lse_b": ("i", s_q * h_q),
        "stride_lse_s_q": ("i", h_q), "stride_o_b": ("i", s_q * h_q * D_V), "stride_o_s_q": ("i", h_q * D_V),
        "stride_o_h_q": ("i", D_V), "lse_accum": ("p", ptr["lse_accum"]), "o_accum": ("p", ptr["o_accum"]),
        "stride_lse_accum_split": ("i", s_q * h_q), "stride_lse_accum_s_q": ("i", h_q),
        "stride_o_accum_split": ("i", s_q * h_q * D_V), "stride_o_accum_s_q": ("i", h_q * D_V),
        "stride_o_accum_h_q": ("i", D_V), "tile_scheduler_metadata_ptr": ("p", ptr["meta"]),
        "num_splits_ptr": ("p", ptr["splits"]), "num_sm_parts": ("i", parts),
        "attn_sink": ("p", ptr.get("attn_sink", 0))})


OBUF_SW = 64
"""``KernelTemplate::OBUF_SW`` (``config.h`` line 69)."""


def o_tensor_map_args(inp, out_address: int) -> dict:
    """``cuTensorMapEncodeTiled``'s arguments for ``tensor_map_o`` (``splitkv_mla.cuh`` lines 718-742): bf16, rank 5,
    dims ``(64, h_q, 512 / 64, s_q, b)``, byte strides ``(stride_o_h_q, 64, stride_o_s_q, stride_o_b) x 2``, box
    ``(64, 64, 8, 1, 1)``, 128-byte swizzle (OBUF_SW = 64), L2 promotion 256 B, no OOB fill."""
    b, s_q, h_q, _ = inp.q.shape
    return {"data_type": "BFLOAT16", "rank": 5, "global_address": out_address,
            "global_dim": (OBUF_SW, h_q, D_V // OBUF_SW, s_q, b),
            "global_strides": (D_V * 2, OBUF_SW * 2, h_q * D_V * 2, s_q * h_q * D_V * 2),
            "box_dim": (OBUF_SW, B_H, D_V // OBUF_SW, 1, 1), "element_strides": (1, 1, 1, 1, 1),
            "interleave": 0, "swizzle": "SWIZZLE_128B", "l2_promotion": "L2_PROMOTION_L2_256B", "oob_fill": 0}


def q_tensor_map_args(lay: Layouts) -> dict:
    """The arguments ``cute::make_tma_copy`` passed to ``cuTensorMapEncodeTiled`` for Q (observed by the probe)."""
    e = lay.tma_q_encode
    if e.get("calls") != 1:
        raise SimtcError(f"the probe saw {e.get('calls')} cuTensorMapEncodeTiled calls for Q, not 1", rule=_RULE)
    return {"data_type": int(e["data_type"]), "rank": int(e["rank"]), "global_address": int(e["address"]),
            "global_dim": tuple(e["global_dim"]), "global_strides": tuple(e["global_strides"]),
            "box_dim": tuple(e["box_dim"]), "element_strides": tuple(e["element_strides"]),
            "interleave": int(e["interleave"]), "swizzle": int(e["swizzle"]), "l2_promotion": int(e["l2_promotion"]),
            "oob_fill": int(e["oob_fill"])}


def tma_params(lay: Layouts, q_map: bytes, o_map: bytes) -> bytes:
    """The ``TmaParams`` kernel parameter: the object ``KernelTemplate::run`` builds (the probe's bytes: shape_Q,
    tma_Q with its aux strides) with the two 128-byte tensor maps replaced by simtc's encodings ``q_map`` and
    ``o_map`` (a CUtensorMap is opaque: simtc's executor reads its own layout, :mod:`simtc.ptx.tensor_map`)."""
    raw = bytearray(bytes.fromhex(lay.tma["bytes"]))
    if len(raw) != int(lay.tma["sizeof"]) or len(q_map) != 128 or len(o_map) != 128:
        raise SimtcError("TmaParams bytes or tensor maps of the wrong size", rule=_RULE)
    for at, m in ((int(lay.tma["tma_Q_descriptor"]), q_map), (int(lay.tma["tensor_map_o"]), o_map)):
        raw[at:at + 128] = m
    return bytes(raw)


@frozen
class LaunchPlan:
    """Grid, block and dynamic shared memory of each of the three launches."""

    parts: int
    sched_grid: tuple[int, int, int]
    sched_block: tuple[int, int, int]
    sched_smem: int
    splitkv_grid: tuple[int, int, int]
    splitkv_block: tuple[int, int, int]
    combine_grid: tuple[int, int, int]
    combine_block: tuple[int, int, int]
    combine_splits: int
    total_splits: int
    """``b + num_sm_parts``: the rows of lse_accum / o_accum (``sparse_decode.h`` line 455)."""


def launch_plan(inp, num_sms: int = H200_SMS) -> LaunchPlan:
    """The three launches' shapes for ``inp`` (see the module text)."""
    b, s_q, h_q, _ = inp.q.shape
    parts = num_sm_parts(s_q, h_q, num_sms)
    return LaunchPlan(parts, (1, 1, 1), (32, 1, 1), 4 * (b * 5 + 1), (h_q // B_H, s_q, parts), (NUM_THREADS, 1, 1),
                      (b * s_q, 1, math.ceil(h_q / COMBINE_BLOCK_M)), (COMBINE_BLOCK_M * 32, 1, 1),
                      combine_instance(parts), b + parts)


# ---- comparing with a recording ----------------------------------------------------------------------------

def _ordered(bits: np.ndarray, width: int) -> np.ndarray:
    """Sign-magnitude float bits mapped to integers whose order is the floats' order (+0 and -0 both 0)."""
    b = bits.astype(np.int64)
    sign = (b >> (width - 1)) & 1
    mag = b & ((1 << (width - 1)) - 1)
    return np.where(sign == 1, -mag, mag)


def ulp_distance(a_bits: np.ndarray, b_bits: np.ndarray, width: int) -> np.ndarray:
    """|a - b| in units in the last place of the format (``width`` 16 for bf16 bits, 32 for float32 bits): the
    number of representable values between them.

    >>> int(ulp_distance(np.array([0x3F80], np.uint16), np.array([0x3F81], np.uint16), 16)[0])
    1
    """
    return np.abs(_ordered(a_bits, width) - _ordered(b_bits, width))


@frozen
class BitComparison:
    """Executed vs recorded outputs of one set, value by value."""

    o_values: int
    o_identical: int
    o_max_ulp: int
    o_max_rel: float
    lse_values: int
    lse_identical: int
    lse_max_ulp: int
    lse_max_abs: float

    @property
    def identical(self) -> bool:
        return self.o_identical == self.o_values and self.lse_identical == self.lse_values

    def as_dict(self) -> dict:
        return {"o_values": self.o_values, "o_identical": self.o_identical, "o_max_ulp": self.o_max_ulp,
                "o_max_rel": self.o_max_rel, "lse_values": self.lse_values, "lse_identical": self.lse_identical,
                "lse_max_ulp": self.lse_max_ulp, "lse_max_abs": self.lse_max_abs}


def compare_bits(out: np.ndarray, lse: np.ndarray, rec_out: np.ndarray, rec_lse: np.ndarray) -> BitComparison:
    """Count bit-identical O (uint16 bf16 bits) and LSE (float32) values and measure the others: largest distance in
    ulps and largest relative (O) / absolute (LSE) difference. Infinities count as identical only when equal."""
    from simtc.numerics.formats import decode_bits

    o_a, o_b = np.asarray(out, np.uint16), np.asarray(rec_out, np.uint16)
    l_a = np.asarray(lse, np.float32).view(np.uint32)
    l_b = np.asarray(rec_lse, np.float32).view(np.uint32)
    if o_a.shape != o_b.shape or l_a.shape != l_b.shape:
        raise SimtcError(f"shapes differ: O {o_a.shape} vs {o_b.shape}, LSE {l_a.shape} vs {l_b.shape}",
                         rule="executed and recorded outputs of one inputs set")
    o_ulp = ulp_distance(o_a, o_b, 16)
    l_ulp = ulp_distance(l_a, l_b, 32)
    va, vb = decode_bits(o_a, "bf16").astype(np.float64), decode_bits(o_b, "bf16").astype(np.float64)
    diff = o_a != o_b
    rel = np.abs(va - vb)[diff] / np.maximum(np.abs(vb[diff]), np.finfo(np.float32).tiny) if diff.any() else [0.0]
    fa, fb = l_a.view(np.float32).astype(np.float64), l_b.view(np.float32).astype(np.float64)
    ldiff = (l_a != l_b) & np.isfinite(fa) & np.isfinite(fb)
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite (masked out)
        labs = np.abs(fa - fb)[ldiff] if ldiff.any() else [0.0]
    nonfinite_mismatch = int(((l_a != l_b) & ~(np.isfinite(fa) & np.isfinite(fb))).sum())
    return BitComparison(int(o_a.size), int((~diff).sum()), int(o_ulp.max(initial=0)), float(np.max(rel)),
                         int(l_a.size), int((l_a == l_b).sum()),
                         int(l_ulp.max(initial=0)) if not nonfinite_mismatch else -1, float(np.max(labs)))


# ---- where MUFU enters: the compiled kernels with every MUFU result moved by whole ulps ----------------------

MUFU_OPCODES = ("ex2.approx", "lg2.approx", "rcp.approx", "div.approx", "div.full", "sqrt.approx", "rsqrt.approx")
"""The f32 MUFU approximations (PTX ISA 9.0 §9.7.3: ``ex2``/``lg2``/``rcp``/``sqrt``/``rsqrt`` ``.approx``,
``div.approx``/``div.full``), which simtc models by the correctly rounded value (:mod:`simtc.ptx.alu`): the H200's
MUFU results lie within 1-2 ulps of it (``tests/ptx/test_alu.py``, ``MUFU_BOUNDS``, on
``tests/data/h200_ptx_alu.npz``). The compiled FlashMLA kernels use ``ex2.approx.ftz.f32`` (``exp2f``),
``lg2.approx.ftz.f32`` (``logf``/``log2f`` under ``--use_fast_math``) and ``div.approx.ftz.f32``
(``__fdividef``)."""

_MUFU_LINE = None


def perturb_mufu(ptx: str, ulps: int) -> tuple[str, int]:
    r"""``ptx`` with the f32 result of every MUFU instruction (:data:`MUFU_OPCODES`, ``.f32``) moved by ``ulps`` or
    ``-ulps`` units in the last place (in the bits: away from zero for a positive step), the sign chosen by bit 1 of
    the result (+ when it is set), when the result is a finite normal number; an ``lg2`` result below 1 in magnitude
    moves by ``+-ulps * 2**-22`` instead (the H200's lg2 error is absolute there). By PTX appended after the
    instruction under its guard. Returns the text and the number of instructions changed.

    A uniform step (every result one ulp up) would mostly cancel in the softmax normalisation (P / sum P); the
    data-dependent signs move results against each other, as the hardware's own errors do (they are not uniform).
    The executed kernel's outputs under ``ulps`` = +1 and -1 (the mirrored signs) show which values a MUFU result
    reaches: a value that moves under neither does not depend on a MUFU approximation's last bits there.

    >>> text, n = perturb_mufu("\tex2.approx.ftz.f32 \t%f1, %f2;\n\tadd.f32 %f3, %f1, %f1;\n", 1)
    >>> n, "selp.s32" in text, text.splitlines()[-1].strip()
    (1, True, 'add.f32 %f3, %f1, %f1;')
    """
    import re

    global _MUFU_LINE
    if _MUFU_LINE is None:
        ops = "|".join(re.escape(o) for o in MUFU_OPCODES)
        _MUFU_LINE = re.compile(r"^(?P<indent>\s*)(?P<guard>@!?%\w+\s+)?(?P<op>(?:" + ops +
                                r")(?:\.ftz)?\.f32)\s+(?P<dst>%\w+)\s*,[^;]*;\s*$")
    if not isinstance(ulps, int) or ulps == 0:
        return ptx, 0
    out, n = [], 0
    for line in ptx.splitlines(keepends=True):
        out.append(line)
        m = _MUFU_LINE.match(line.rstrip("\n"))
        if m is None:
            continue
        n += 1
        g, d = m.group("guard") or "", m.group("dst")
        # t = bits(d); k = (t & 2) ? ulps : -ulps; if (0x007fffff < |t| < 0x7f7fffff) t += k; d = t -- each step under
        # the MUFU instruction's own guard (a PTX block takes none). lg2 below 1 in magnitude: d += k * 2**-22
        # instead (its error there is absolute, 2**-22 measured: tests/ptx/test_alu.py)
        steps = ["mov.b32 %simtc_t, {d};", "and.b32 %simtc_a, %simtc_t, 2147483647;",
                 "setp.gt.u32 %simtc_p, %simtc_a, 8388607;", "setp.lt.u32 %simtc_q, %simtc_a, 2139095039;",
                 "and.pred %simtc_p, %simtc_p, %simtc_q;", "and.b32 %simtc_a, %simtc_t, 2;",
                 "setp.ne.u32 %simtc_q, %simtc_a, 0;", "selp.s32 %simtc_a, {k}, {mk}, %simtc_q;"]
        if m.group("op").startswith("lg2"):
            steps += ["cvt.rn.f32.s32 %simtc_f, %simtc_a;", "mul.rn.f32 %simtc_f, %simtc_f, 0f34800000;",
                      "abs.f32 %simtc_g, {d};", "setp.lt.f32 %simtc_q, %simtc_g, 0f3F800000;",
                      "and.pred %simtc_q, %simtc_q, %simtc_p;", "@%simtc_q add.rn.f32 %simtc_f, {d}, %simtc_f;",
                      "@%simtc_q mov.b32 %simtc_t, %simtc_f;", "setp.ge.f32 %simtc_q, %simtc_g, 0f3F800000;",
                      "and.pred %simtc_p, %simtc_p, %simtc_q;"]
        steps += ["@%simtc_p add.s32 %simtc_t, %simtc_t, %simtc_a;", "mov.b32 {d}, %simtc_t;"]
        body = "".join(f"\t{'' if s.startswith('@') else g}{s.format(d=d, k=ulps, mk=-ulps)}\n" for s in steps)
        out.append("\t{ .reg .b32 %simtc_t, %simtc_a; .reg .f32 %simtc_f, %simtc_g; .reg .pred %simtc_p, %simtc_q;\n"
                   + body + "\t}\n")
    return "".join(out), n
