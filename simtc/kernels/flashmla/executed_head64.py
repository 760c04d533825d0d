"""FlashMLA's SM100 head64 kernel itself, compiled from a checkout and executed by simtc's PTX executor.

simtc's hand replay (:mod:`simtc.kernels.flashmla.replay`) is a transcription of FlashMLA's
``csrc/sm100/decode/head64/kernel.cuh``; this module runs the real kernel beside it, so that the transcription can
be held against what nvcc compiled, record by record (:mod:`simtc.kernels.flashmla.executed_diff`).

**The kernel** (:func:`head64_ptx`): ``csrc/sm100/decode/head64/instantiations/{v32,model1}.cu`` compiled by a
local ``nvcc -ptx`` for ``sm_100a`` with FlashMLA's nvcc flags (:data:`simtc.hw.flashmla.NVCC_FLAGS`) and
``-lineinfo``, cached under ``$SIMTC_CACHE/flashmla_head64``. ``benchmarks/bench_ptx_parse.py`` times the parse of
this same text.

**Its two parameters, built as FlashMLA's host code builds them.** The kernel is
``flash_fwd_splitkv_mla_fp8_sparse_kernel(__grid_constant__ const SparseAttnDecodeParams params,
__grid_constant__ const TmaParams tma_params)`` (``kernel.cuh`` L883-886 at ``9241ae3``):

* ``SparseAttnDecodeParams`` (``csrc/params.h`` L73-115): filled field by field with the values
  ``sparse_attn_decode_interface`` gives them (``csrc/api/sparse_decode.h`` L385-415 and L441-466: shapes,
  ``sm_scale * LOG_2_E`` in float32 with ``LOG_2_E = 1.44269504f`` (``csrc/api/common.h`` L12), the tensors'
  strides in elements, the split-KV buffers ``lse_accum`` / ``o_accum`` of ``b + num_sm_parts`` splits) at the
  offsets nvcc gives the struct: a small host program (:data:`PROBE_SOURCE`, simtc's own code, compiled here
  against the checkout's headers) prints ``offsetof``/``sizeof`` of every field; a field without a value is an
  error, never a silent zero.
* ``TmaParams`` (``kernel.cuh`` L939-950): the two CuTe TMA copies (``tma_Q_SW128``, ``tma_O``, with their
  ``shape_*`` tuples) are made by CuTe itself: the probe calls ``cute::make_tma_copy`` with the arguments of
  ``kernel.cuh`` L893-917 (the real device addresses and strides) and records each ``cuTensorMapEncodeTiled``
  call it makes instead of calling the driver; its byte image of the struct comes back with the 128 bytes of
  each descriptor left for simtc, which encodes the recorded arguments with
  :func:`simtc.ptx.tensor_map.tensor_map` (simtc's own encoding of the opaque ``CUtensorMap``). The three
  ``ku::make_tensor_map`` maps (Q RoPE SW64, KV NoPE as int64 words, KV RoPE) are encoded here with the
  arguments of ``kernel.cuh`` L919-937 (:func:`kerutils_tensor_maps`); the two "extra" KV maps stay zero
  (no extra cache: ``extra_topk == 0``, L936).
* The scheduler metadata (``tile_scheduler_metadata``, ``num_splits``): ``get_mla_metadata_kernel``'s result
  (:func:`simtc.kernels.flashmla.schedule.sched_meta`, the Python port of
  ``csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu``) for ``num_sm_parts`` parts.
  FlashMLA's own choice is ``max(num_sms / s_q, 1)`` parts (``Decode_Sm100_Head64_Impl::get_meta``,
  ``sparse_decode.h`` L92-98), which splits a request over many CTAs and needs the combine kernel; the API also
  takes the metadata from the caller (``tile_scheduler_metadata``, L419), and simtc's default is one part: each
  CTA (one per query position, grid ``(s_q, num_sm_parts)``, L959) runs its requests whole, as the hand replay
  does.

The launch (:func:`run_head64`) goes through :mod:`simtc.cuda` (device arrays, ``RawModule``, the dynamic shared
memory raised to ``sizeof(SharedMemoryPlan)`` as ``cudaFuncSetAttribute`` does at L955) and, when a CTA is to be
recorded, :class:`simtc.ptx.recording.Recorder`: the recorded CTA becomes an engine Program of the same record
classes the hand Program uses.

Outputs are :class:`simtc.kernels.flashmla.io.FlashMLAOutputs` (``out`` bf16 bits ``[b, s_q, 64, 512]``, ``lse``
float32 ``[b, s_q, 64]``), the replay's format (``simtc replay --save-outputs``).

Layering: this module drives the PTX executor (:mod:`simtc.ptx`), simtc's CuPy-like API (:mod:`simtc.cuda`) and
FlashMLA's build flags (:mod:`simtc.hw.flashmla`); it imports them inside its functions only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from attrs import field, frozen

from simtc.errors import SimtcError
from simtc.kernels.flashmla.constants import B_H, D_V
from simtc.kernels.flashmla.models import Head64Model, model

__all__ = ["KERNEL_SOURCE", "LOG_2_E", "PROBE_SOURCE", "ExecutedHead64", "Head64Launch", "build_launch",
           "checkout_from", "head64_ptx", "kerutils_tensor_maps", "probe", "run_head64", "sched_arrays"]

_RULE = "simtc builds FlashMLA's head64 kernel from a FlashMLA checkout (--flashmla DIR or SIMTC_FLASHMLA_DIR)"
_HOST = "FlashMLA 9241ae3 csrc/sm100/decode/head64/kernel.cuh L888-962 (KernelTemplate::run)"
_API = "FlashMLA 9241ae3 csrc/api/sparse_decode.h L385-466 (sparse_attn_decode_interface)"
LOG_2_E = np.float32(1.44269504)
"""``LOG_2_E`` of FlashMLA ``csrc/api/common.h`` L12 (a float): ``sm_scale_div_log2 = sm_scale * LOG_2_E``."""
KERNEL_SOURCE = "csrc/sm100/decode/head64/kernel.cuh"
NUM_THREADS = 384
"""``NUM_THREADS = 128*3`` (``config.h`` L49): the launch's block (``kernel.cuh`` L959)."""
MODEL_TYPE = {"v32": 0, "model1": 1}
"""``enum class ModelType { V32, MODEL1 }`` (``csrc/params.h`` L5-8)."""


# ---- the checkout and the kernel's PTX ------------------------------------------------------------------------
def checkout_from(checkout=None):
    """A :class:`simtc.hw.flashmla.FlashMLACheckout`: ``checkout`` itself, a path, or ``$SIMTC_FLASHMLA_DIR``."""
    from simtc.hw import flashmla

    if isinstance(checkout, flashmla.FlashMLACheckout):
        return checkout
    root = checkout if checkout is not None else os.environ.get("SIMTC_FLASHMLA_DIR")
    if not root:
        raise SimtcError("no FlashMLA checkout: give --flashmla DIR or set SIMTC_FLASHMLA_DIR", rule=_RULE)
    return flashmla.find_checkout(root, cutlass=os.environ.get("SIMTC_FLASHMLA_CUTLASS"))


def _nvcc() -> str:
    from simtc.errors import HardwareUnavailable

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise HardwareUnavailable("nvcc not found: FlashMLA's head64 kernel is compiled with a local nvcc "
                                  "(CUDA 12.9 or later)", rule="compiling FlashMLA needs nvcc on PATH")
    return nvcc


def _cached(args: list[str], tag: str, suffix: str, extra: bytes = b"") -> Path:
    """Run ``nvcc ARGS -o OUT`` once per (nvcc version, arguments, ``extra``); the cached output's path."""
    from simtc.hw.compile import CompileError, cache_dir

    nvcc = _nvcc()
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256("\0".join([version, *args]).encode() + extra).hexdigest()[:24]
    out = cache_dir() / "flashmla_head64" / f"{tag}-{key}{suffix}"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
        proc = subprocess.run([nvcc, *args, "-o", str(tmp)], capture_output=True, text=True)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            log = (proc.stderr or proc.stdout)[-4000:]
            raise CompileError(f"nvcc could not build {tag}:\n{log}", log)
        tmp.replace(out)
    return out


def head64_ptx(checkout=None, model_name: str | Head64Model = "v32", *, lineinfo: bool = True) -> str:
    """The PTX of FlashMLA's head64 kernel for ``model_name`` (``instantiations/{v32,model1}.cu``), compiled for
    ``sm_100a`` with FlashMLA's nvcc flags (and ``-lineinfo``: CUDA source lines for every record); cached."""
    return _ptx_file(checkout_from(checkout), model(model_name), lineinfo=lineinfo).read_text()


def _ptx_file(co, m: Head64Model, *, lineinfo: bool = True) -> Path:
    from simtc.hw import flashmla

    args = [*flashmla.NVCC_FLAGS, *(["-lineinfo"] if lineinfo else []), "-arch=sm_100a", *co.includes(),
            "-ptx", str(co.root / flashmla.SM100_SOURCES[m.name])]
    return _cached(args, f"head64-{m.name}", ".ptx")


# ---- the host-side probe ----------------------------------------------------------------------------------------
PROBE_SOURCE = r"""// simtc's probe of FlashMLA head64's kernel parameters (host code only).
// It prints, as JSON: offsetof/sizeof of every field of SparseAttnDecodeParams and DecodingSchedMeta
// (csrc/params.h), sizeof(SharedMemoryPlan), and the TmaParams the kernel's host code builds (kernel.cuh
// KernelTemplate::run): CuTe's two TMA copies made by cute::make_tma_copy from the arguments given on the command
// line, as a byte image, with each cuTensorMapEncodeTiled call CuTe makes recorded (not made: no driver is needed)
// and its 128 bytes left as "simtcENC" + the call's index, for simtc to encode.
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <string>
#include "sm100/decode/head64/config.h"

static int g_encodes = 0;
static std::string g_json;

extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType dt, cuuint32_t rank, void* addr,
        const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t* es,
        CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s{\"index\": %d, \"data_type\": %d, \"rank\": %u, \"address\": %llu, "
                     "\"dims\": [", g_encodes ? ", " : "", g_encodes, (int)dt, rank,
                     (unsigned long long)(uintptr_t)addr);
    for (cuuint32_t i = 0; i < rank; ++i)
        n += snprintf(buf + n, sizeof buf - n, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    n += snprintf(buf + n, sizeof buf - n, "], \"strides\": [");
    for (cuuint32_t i = 0; i + 1 < rank; ++i)
        n += snprintf(buf + n, sizeof buf - n, "%s%llu", i ? ", " : "", (unsigned long long)strides[i]);
    n += snprintf(buf + n, sizeof buf - n, "], \"box\": [");
    for (cuuint32_t i = 0; i < rank; ++i) n += snprintf(buf + n, sizeof buf - n, "%s%u", i ? ", " : "", box[i]);
    n += snprintf(buf + n, sizeof buf - n, "], \"element_strides\": [");
    for (cuuint32_t i = 0; i < rank; ++i) n += snprintf(buf + n, sizeof buf - n, "%s%u", i ? ", " : "", es[i]);
    snprintf(buf + n, sizeof buf - n, "], \"interleave\": %d, \"swizzle\": %d, \"l2_promotion\": %d, "
             "\"oob_fill\": %d}", (int)il, (int)sw, (int)l2, (int)oob);
    g_json += buf;
    memset(map, 0, sizeof(CUtensorMap));
    memcpy(map, "simtcENC", 8);
    memcpy(reinterpret_cast<char*>(map) + 8, &g_encodes, 4);
    ++g_encodes;
    return CUDA_SUCCESS;
}

#define FIELD(s, f) printf("%s\"%s\": [%zu, %zu]", first ? "" : ", ", #f, offsetof(s, f), \
                           sizeof(((s*)nullptr)->f)); first = false;

static void params_layout() {
    bool first = true;
    using P = SparseAttnDecodeParams;
    printf("\"params\": {\"size\": %zu, \"align\": %zu, \"fields\": {", sizeof(P), alignof(P));
    FIELD(P, b) FIELD(P, s_q) FIELD(P, h_q) FIELD(P, h_kv) FIELD(P, d_qk) FIELD(P, d_v) FIELD(P, sm_scale)
    FIELD(P, sm_scale_div_log2) FIELD(P, num_blocks) FIELD(P, page_block_size) FIELD(P, topk) FIELD(P, model_type)
    FIELD(P, q) FIELD(P, kv) FIELD(P, indices) FIELD(P, topk_length) FIELD(P, attn_sink) FIELD(P, lse) FIELD(P, out)
    FIELD(P, extra_num_blocks) FIELD(P, extra_page_block_size) FIELD(P, extra_topk) FIELD(P, extra_kv)
    FIELD(P, extra_indices) FIELD(P, extra_topk_length) FIELD(P, stride_q_b) FIELD(P, stride_q_s_q)
    FIELD(P, stride_q_h_q) FIELD(P, stride_kv_block) FIELD(P, stride_kv_row) FIELD(P, stride_indices_b)
    FIELD(P, stride_indices_s_q) FIELD(P, stride_lse_b) FIELD(P, stride_lse_s_q) FIELD(P, stride_o_b)
    FIELD(P, stride_o_s_q) FIELD(P, stride_o_h_q) FIELD(P, stride_extra_kv_block) FIELD(P, stride_extra_kv_row)
    FIELD(P, stride_extra_indices_b) FIELD(P, stride_extra_indices_s_q) FIELD(P, stream) FIELD(P, lse_accum)
    FIELD(P, o_accum) FIELD(P, stride_lse_accum_split) FIELD(P, stride_lse_accum_s_q) FIELD(P, stride_o_accum_split)
    FIELD(P, stride_o_accum_s_q) FIELD(P, stride_o_accum_h_q) FIELD(P, tile_scheduler_metadata_ptr)
    FIELD(P, num_splits_ptr) FIELD(P, num_sm_parts)
    first = true;
    using M = DecodingSchedMeta;
    printf("}}, \"sched_meta\": {\"size\": %zu, \"fields\": {", sizeof(M));
    FIELD(M, begin_req_idx) FIELD(M, end_req_idx) FIELD(M, begin_block_idx) FIELD(M, end_block_idx)
    FIELD(M, begin_split_idx) FIELD(M, is_first_req_splitted) FIELD(M, is_last_req_splitted)
    printf("}}");
}

template<ModelType MODEL_TYPE>
static void tma_params(SparseAttnDecodeParams const& params) {
    using K = sm100::decode::head64::KernelTemplate<MODEL_TYPE>;
    using bf16 = cutlass::bfloat16_t;
    using namespace cute;
    auto shape_Q_SW128 = make_shape(K::B_H, K::D_Q, params.s_q, params.b);
    auto tma_Q_SW128 = make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr((bf16*)params.q),
        make_layout(shape_Q_SW128, make_stride(params.stride_q_h_q, _1{}, params.stride_q_s_q, params.stride_q_b))),
        typename K::SmemLayoutQ_SW128{});
    auto shape_O = make_shape(K::B_H, K::D_V, params.s_q, params.b);
    auto tma_O = make_tma_copy(SM90_TMA_STORE{}, make_tensor(make_gmem_ptr((bf16*)params.out),
        make_layout(shape_O, make_stride(params.stride_o_h_q, _1{}, params.stride_o_s_q, params.stride_o_b))),
        typename K::SmemLayoutOBuf_TMA{});
    using T = typename K::template TmaParams<decltype(shape_Q_SW128), decltype(tma_Q_SW128), decltype(shape_O),
                                             decltype(tma_O)>;
    T t{};
    t.shape_Q_SW128 = shape_Q_SW128; t.tma_Q_SW128 = tma_Q_SW128; t.shape_O = shape_O; t.tma_O = tma_O;
    bool first = true;
    printf(", \"shared_memory_plan\": %zu", sizeof(typename K::SharedMemoryPlan));
    printf(", \"tma_params\": {\"size\": %zu, \"align\": %zu, \"fields\": {", sizeof(T), alignof(T));
    FIELD(T, shape_Q_SW128) FIELD(T, tma_Q_SW128) FIELD(T, shape_O) FIELD(T, tma_O) FIELD(T, tensor_map_q_sw64)
    FIELD(T, tensor_map_kv_nope) FIELD(T, tensor_map_kv_rope) FIELD(T, tensor_map_extra_kv_nope)
    FIELD(T, tensor_map_extra_kv_rope)
    printf("}, \"image\": \"");
    unsigned char const* p = reinterpret_cast<unsigned char const*>(&t);
    for (size_t i = 0; i < sizeof(T); ++i) printf("%02x", p[i]);
    printf("\", \"encodes\": [%s]}", g_json.c_str());
}

int main(int argc, char** argv) {
    if (argc != 12) {
        fprintf(stderr, "usage: probe v32|model1 q out s_q b stride_q_b stride_q_s_q stride_q_h_q stride_o_b "
                        "stride_o_s_q stride_o_h_q\n");
        return 2;
    }
    SparseAttnDecodeParams params{};
    params.q = (cutlass::bfloat16_t*)(uintptr_t)strtoull(argv[2], nullptr, 0);
    params.out = (cutlass::bfloat16_t*)(uintptr_t)strtoull(argv[3], nullptr, 0);
    params.s_q = atoi(argv[4]); params.b = atoi(argv[5]);
    params.stride_q_b = atoi(argv[6]); params.stride_q_s_q = atoi(argv[7]); params.stride_q_h_q = atoi(argv[8]);
    params.stride_o_b = atoi(argv[9]); params.stride_o_s_q = atoi(argv[10]); params.stride_o_h_q = atoi(argv[11]);
    printf("{");
    params_layout();
    if (strcmp(argv[1], "v32") == 0) tma_params<ModelType::V32>(params);
    else tma_params<ModelType::MODEL1>(params);
    printf("}\n");
    return 0;
}
"""


def _probe_binary(co) -> Path:
    from simtc.hw import flashmla
    from simtc.hw.compile import cache_dir

    src = cache_dir() / "flashmla_head64" / "probe.cu"
    src.parent.mkdir(parents=True, exist_ok=True)
    if not src.is_file() or src.read_text() != PROBE_SOURCE:
        src.write_text(PROBE_SOURCE)
    args = [*flashmla.NVCC_FLAGS, "-O1", "-arch=sm_100a", "-Xcompiler", "-Wno-invalid-offsetof", *co.includes(),
            str(src)]
    return _cached(args, "probe", "", extra=PROBE_SOURCE.encode())


def probe(checkout, model_name: str | Head64Model, *, q: int, out: int, s_q: int, b: int,
          q_strides: tuple[int, int, int], o_strides: tuple[int, int, int]) -> dict:
    """The probe's JSON (see :data:`PROBE_SOURCE`) for these addresses, sizes and element strides (b, s_q, h_q)."""
    co = checkout_from(checkout)
    exe = _probe_binary(co)
    m = model(model_name)
    argv = [str(exe), m.name, hex(q), hex(out), str(s_q), str(b), *map(str, q_strides), *map(str, o_strides)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SimtcError(f"the head64 parameter probe failed: {proc.stderr.strip()[-400:]}", rule=_RULE)
    return json.loads(proc.stdout)


# ---- parameters ------------------------------------------------------------------------------------------------
def _pack(layout: Mapping, values: Mapping[str, object], what: str) -> bytes:
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


def kerutils_tensor_maps(m: Head64Model, *, q: int, kv: int, s_q: int, b: int, q_strides: tuple[int, int, int],
                         num_blocks: int, stride_kv_block: int) -> dict[str, bytes]:
    """The three maps ``KernelTemplate::run`` makes with ``ku::make_tensor_map`` (``kernel.cuh`` L919-934, strides in
    bytes, element strides 1, interleave none, OOB fill none: kerutils ``host/host.h`` L82-95), encoded by
    :func:`simtc.ptx.tensor_map.tensor_map`; ``q``/``kv``: device addresses, ``q_strides`` in elements."""
    from simtc.ptx.tensor_map import tensor_map

    sqb, sqs, sqh = q_strides
    rows = num_blocks * (stride_kv_block // m.tma_k_stride)
    out = {}
    if m.v32:  # L921-931: D_Q_SW64 = 64 (V32 only; MODEL1 leaves the map zero)
        out["tensor_map_q_sw64"] = tensor_map("BFLOAT16", 5, q + 2 * 512, (64, B_H, 2, s_q, b),
                                              (2 * sqh, 2 * 32, 2 * sqs, 2 * sqb), (32, B_H, 2, 1, 1), (1,) * 5,
                                              swizzle="SWIZZLE_64B", l2_promotion="L2_128B")
    out["tensor_map_kv_nope"] = tensor_map("INT64", 2, kv, (m.d_nope // 8, rows), (m.tma_k_stride,),
                                           (m.d_nope // 8, 1), (1, 1), swizzle="SWIZZLE_NONE", l2_promotion="L2_128B")
    k_rope_sw = 64 if m.v32 else 128  # K_ROPE_SW (config.h L62)
    out["tensor_map_kv_rope"] = tensor_map("BFLOAT16", 2, kv + (m.d_nope + 16 if m.v32 else m.d_nope),
                                           (64, rows), (m.tma_k_stride,), (k_rope_sw // 2, 1), (1, 1),
                                           swizzle="SWIZZLE_64B" if m.v32 else "SWIZZLE_128B", l2_promotion="L2_128B")
    return out


def _tma_image(pr: dict, maps: dict[str, bytes]) -> bytes:
    """The probe's TmaParams image with CuTe's recorded encodings and the kerutils maps filled in."""
    from simtc.ptx.tensor_map import tensor_map

    t = pr["tma_params"]
    img = bytearray(bytes.fromhex(t["image"]))
    for e in t["encodes"]:
        marker = b"simtcENC" + int(e["index"]).to_bytes(4, "little")
        at = bytes(img).find(marker)
        if at < 0 or at % 64:
            raise SimtcError(f"CuTe's tensor map {e['index']} is not in the TmaParams image",
                             rule="each recorded cuTensorMapEncodeTiled call leaves its descriptor in the image")
        img[at:at + 128] = tensor_map(e["data_type"], e["rank"], e["address"], e["dims"], e["strides"], e["box"],
                                      e["element_strides"], e["interleave"], e["swizzle"], e["l2_promotion"],
                                      e["oob_fill"])
    for name, raw in maps.items():
        off, size = t["fields"][name]
        if size != 128 or any(img[off:off + size]):
            raise SimtcError(f"TmaParams.{name}: {size} bytes, not zero before it is filled",
                             rule="a CUtensorMap member is 128 zero bytes until encoded", ref=_HOST)
        img[off:off + size] = raw
    return bytes(img)


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


@frozen(eq=False)
class Head64Launch:
    """Everything one launch of the kernel needs (and what it writes), in simtc's device memory."""

    model: Head64Model
    kernel: object
    """The :class:`simtc.cuda.RawKernel`."""
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    params: bytes
    tma_params: bytes
    arrays: dict = field(repr=False)
    """Name -> :class:`simtc.cuda.ndarray` (q, kv, indices, lse, out, lse_accum, o_accum, sched, num_splits ...)."""
    probe: dict = field(repr=False)

    def args(self) -> tuple:
        p = np.frombuffer(self.params, dtype=np.dtype((np.void, len(self.params))))
        t = np.frombuffer(self.tma_params, dtype=np.dtype((np.void, len(self.tma_params))))
        return (p, t)


def build_launch(checkout, inputs, *, num_sm_parts: int = 1) -> Head64Launch:
    """Allocate ``inputs`` (:class:`~simtc.kernels.flashmla.io.FlashMLAInputs`) in simtc's device memory and build
    both kernel parameters as FlashMLA's host code does (see the module text)."""
    import simtc.cuda as xp

    co = checkout_from(checkout)
    m = inputs.model
    b, s_q, topk = inputs.b, inputs.s_q, inputs.topk
    if isinstance(num_sm_parts, bool) or not isinstance(num_sm_parts, int) or num_sm_parts < 1:
        raise SimtcError(f"num_sm_parts = {num_sm_parts!r}", rule="a decode call has at least one part")
    lay = inputs.layout
    arr = {
        "q": xp.asarray(np.ascontiguousarray(inputs.q)),
        "kv": xp.asarray(np.ascontiguousarray(inputs.kv)),
        "indices": xp.asarray(np.ascontiguousarray(inputs.indices, np.int32)),
        "lse": xp.zeros((b, s_q, B_H), np.float32),
        "out": xp.zeros((b, s_q, B_H, D_V), np.uint16),
        "lse_accum": xp.zeros((b + num_sm_parts, s_q, B_H), np.float32),
        "o_accum": xp.zeros((b + num_sm_parts, s_q, B_H, D_V), np.float32),
    }
    if inputs.attn_sink is not None:
        arr["attn_sink"] = xp.asarray(np.ascontiguousarray(inputs.attn_sink, np.float32))
    if inputs.topk_length is not None:
        arr["topk_length"] = xp.asarray(np.ascontiguousarray(inputs.topk_length, np.int32))
    q_str = (s_q * B_H * m.d_q, B_H * m.d_q, m.d_q)
    o_str = (s_q * B_H * D_V, B_H * D_V, D_V)
    pr = probe(co, m, q=arr["q"].data.ptr, out=arr["out"].data.ptr, s_q=s_q, b=b, q_strides=q_str, o_strides=o_str)
    meta, splits = sched_arrays(b, topk, num_sm_parts, inputs.topk_length, pr["sched_meta"]["fields"])
    arr["sched"] = xp.asarray(meta)
    arr["num_splits"] = xp.asarray(splits)

    def ptr(name: str) -> int:
        a = arr.get(name)
        return 0 if a is None else int(a.data.ptr)

    sm_scale = np.float32(inputs.sm_scale)
    values = {
        "b": b, "s_q": s_q, "h_q": B_H, "h_kv": 1, "d_qk": m.d_q, "d_v": D_V, "sm_scale": sm_scale,
        "sm_scale_div_log2": np.float32(sm_scale * LOG_2_E), "num_blocks": inputs.num_blocks,
        "page_block_size": inputs.page_block_size, "topk": topk, "model_type": MODEL_TYPE[m.name],
        "q": ptr("q"), "kv": ptr("kv"), "indices": ptr("indices"), "topk_length": ptr("topk_length"),
        "attn_sink": ptr("attn_sink"), "lse": ptr("lse"), "out": ptr("out"),
        "extra_num_blocks": 0, "extra_page_block_size": 0, "extra_topk": 0, "extra_kv": 0, "extra_indices": 0,
        "extra_topk_length": 0,
        "stride_q_b": q_str[0], "stride_q_s_q": q_str[1], "stride_q_h_q": q_str[2],
        "stride_kv_block": inputs.block_stride, "stride_kv_row": lay.token_bytes,
        "stride_indices_b": s_q * topk, "stride_indices_s_q": topk,
        "stride_lse_b": s_q * B_H, "stride_lse_s_q": B_H,
        "stride_o_b": o_str[0], "stride_o_s_q": o_str[1], "stride_o_h_q": o_str[2],
        "stride_extra_kv_block": 0, "stride_extra_kv_row": 0, "stride_extra_indices_b": 0,
        "stride_extra_indices_s_q": 0, "stream": 0,
        "lse_accum": ptr("lse_accum"), "o_accum": ptr("o_accum"),
        "stride_lse_accum_split": s_q * B_H, "stride_lse_accum_s_q": B_H,
        "stride_o_accum_split": s_q * B_H * D_V, "stride_o_accum_s_q": B_H * D_V, "stride_o_accum_h_q": D_V,
        "tile_scheduler_metadata_ptr": ptr("sched"), "num_splits_ptr": ptr("num_splits"),
        "num_sm_parts": num_sm_parts,
    }
    params = _pack(pr["params"], values, "SparseAttnDecodeParams")
    maps = kerutils_tensor_maps(m, q=ptr("q"), kv=ptr("kv"), s_q=s_q, b=b, q_strides=q_str,
                                num_blocks=inputs.num_blocks, stride_kv_block=inputs.block_stride)
    tma = _tma_image(pr, maps)
    module = xp.RawModule(path=str(_ptx_file(co, m)))
    names = module.module.kernels()
    if len(names) != 1:
        raise SimtcError(f"the head64 PTX has {len(names)} kernels", rule="one kernel per instantiation")
    kernel = module.get_function(names[0])
    smem = int(pr["shared_memory_plan"])
    kernel.max_dynamic_shared_size_bytes = smem
    return Head64Launch(m, kernel, (s_q, num_sm_parts, 1), (NUM_THREADS, 1, 1), smem, params, tma, arr, pr)


# ---- the run ---------------------------------------------------------------------------------------------------
@frozen(eq=False)
class ExecutedHead64:
    """One executed launch: the outputs (the replay's format), the executor's result, the recorded CTA."""

    outputs: object
    """:class:`~simtc.kernels.flashmla.io.FlashMLAOutputs`."""
    result: object = field(repr=False)
    """The executor's :class:`~simtc.ptx.executor.LaunchResult`."""
    recorded: object = field(default=None, repr=False)
    """:class:`simtc.ptx.recording.Recorded` of the recorded CTA, or None."""
    launch: Head64Launch | None = field(default=None, repr=False)


def run_head64(checkout=None, inputs=None, *, model: str | None = None, blocks: int | None = None, seed: int = 0,
               num_sm_parts: int = 1, record: tuple[int, int, int] | None = None,
               max_instructions: int | None = 400_000_000) -> ExecutedHead64:
    """Run FlashMLA's head64 kernel in simtc on ``inputs`` (:class:`~simtc.kernels.flashmla.io.FlashMLAInputs`;
    None: ``make_inputs(model, topk=64 * blocks, seed=seed)``) and return its outputs (``out``, ``lse``, the
    replay's format). ``model``/``blocks`` must agree with ``inputs`` when both are given; ``record``: a CTA
    (``%ctaid``) to record as a Program (:class:`simtc.ptx.recording.Recorder`)."""
    from simtc.kernels.flashmla.io import FlashMLAOutputs, make_inputs

    if inputs is None:
        n = 1 if blocks is None else blocks
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise SimtcError(f"blocks = {blocks!r}", rule="a request has at least one block of 64 tokens")
        inputs = make_inputs(model or "v32", topk=64 * n, seed=seed)
    else:
        if model is not None and model != inputs.model.name:
            raise SimtcError(f"--model {model} contradicts the inputs ({inputs.model.name})",
                             rule="the inputs fix the model")
        if blocks is not None and blocks * 64 != inputs.topk:
            raise SimtcError(f"--blocks {blocks} contradicts the inputs' topk {inputs.topk}",
                             rule="the inputs fix the blocks (topk / 64)")
    lau = build_launch(checkout, inputs, num_sm_parts=num_sm_parts)
    result, recorded = _execute(lau, record, max_instructions)
    out = FlashMLAOutputs(lau.arrays["out"].get(), lau.arrays["lse"].get())
    return ExecutedHead64(out, result, recorded, lau)


def _execute(lau: Head64Launch, record, max_instructions):
    from simtc.cuda._kernel import pack_args
    from simtc.cuda._memory import default_device
    from simtc.ptx.executor import LaunchOptions, launch
    from simtc.ptx.recording import Recorder, arch_of

    k = lau.kernel
    fn = k.function
    packed = pack_args(fn, lau.args())
    opts = dict(max_instructions=max_instructions)
    if record is None:
        res = launch(k.module, fn.name, grid=lau.grid, block=lau.block, args=packed, shared_mem=lau.shared_mem,
                     device=default_device(), options=LaunchOptions(**opts))
        return res, None
    with Recorder(tuple(record), arch=arch_of(k.module), kernel=fn.name) as rec:
        res = launch(k.module, fn.name, grid=lau.grid, block=lau.block, args=packed, shared_mem=lau.shared_mem,
                     device=default_device(), options=LaunchOptions(recorder=rec, **opts))
    return res, rec.program(f"flashmla-head64-{lau.model.name}-executed")
