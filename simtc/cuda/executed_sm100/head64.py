"""FlashMLA's SM100 head64 kernel itself, compiled from a checkout and executed by simtc's PTX executor.

simtc's hand replay (:mod:`simtc.kernels.flashmla.replay`) is a transcription of FlashMLA's
``csrc/sm100/decode/head64/kernel.cuh``; this module runs the real kernel beside it, so that the transcription can
be held against what nvcc compiled, record by record (:func:`simtc.kernels.flashmla.executed_head64.diff_programs`).

**The kernel** (:func:`head64_ptx`): ``csrc/sm100/decode/head64/instantiations/{v32,model1}.cu`` compiled by a
local ``nvcc -ptx`` for ``sm_100a`` with FlashMLA's nvcc flags (:data:`simtc.hw.flashmla.NVCC_FLAGS`) and
``-lineinfo``, cached under ``$SIMTC_CACHE/flashmla_head64``. ``benchmarks/bench_ptx_parse.py`` times the parse of
this same text.

**Its two parameters, built as FlashMLA's host code builds them.** The kernel is
``flash_fwd_splitkv_mla_fp8_sparse_kernel(__grid_constant__ const SparseAttnDecodeParams params,
__grid_constant__ const TmaParams tma_params)`` (``kernel.cuh`` L852-853 at ``9241ae3``):

* ``SparseAttnDecodeParams`` (``csrc/params.h`` L63-103): filled field by field with the values
  ``sparse_attn_decode_interface`` gives them (``csrc/api/sparse_decode.h`` L385-415 and L441-466: shapes,
  ``sm_scale * LOG_2_E`` in float32 with ``LOG_2_E = 1.44269504f`` (``csrc/api/common.h`` L12), the tensors'
  strides in elements, the split-KV buffers ``lse_accum`` / ``o_accum`` of ``b + num_sm_parts`` splits) at the
  offsets nvcc gives the struct: a small host program (:data:`PROBE_SOURCE`, simtc's own code, compiled here
  against the checkout's headers) prints ``offsetof``/``sizeof`` of every field; a field without a value is an
  error, never a silent zero.
* ``TmaParams`` (``kernel.cuh`` L939-950): the two CuTe TMA copies (``tma_Q_SW128``, ``tma_O``, with their
  ``shape_*`` tuples) are made by CuTe itself: the probe calls ``cute::make_tma_copy`` with the arguments of
  ``kernel.cuh`` L870-894 (the real device addresses and strides) and records each ``cuTensorMapEncodeTiled``
  call it makes instead of calling the driver; its byte image of the struct comes back with the 128 bytes of
  each descriptor left for simtc, which encodes the recorded arguments with
  :func:`simtc.ptx.tensor_map.tensor_map` (simtc's own encoding of the opaque ``CUtensorMap``). The three
  ``ku::make_tensor_map`` maps (Q RoPE SW64, KV NoPE as int64 words, KV RoPE) are encoded here with the
  arguments of ``kernel.cuh`` L896-933 (:func:`kerutils_tensor_maps`); the two "extra" KV maps stay zero
  (no extra cache: ``extra_topk == 0``, L935-937).
* The scheduler metadata (``tile_scheduler_metadata``, ``num_splits``): ``get_mla_metadata_kernel``'s result
  (:func:`simtc.kernels.flashmla.schedule.sched_meta`, the Python port of
  ``csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu``) for ``num_sm_parts`` parts.
  FlashMLA's own choice is ``max(num_sms / s_q, 1)`` parts (``Decode_Sm100_Head64_Impl::get_meta``,
  ``sparse_decode.h`` L92-98), which splits a request over many CTAs and needs the combine kernel; the API also
  takes the metadata from the caller (``tile_scheduler_metadata``, L419), and simtc's default is one part: each
  CTA (one per query position, grid ``(s_q, num_sm_parts)``, L959) runs its requests whole, as the hand replay
  does.

The launch (:func:`run_head64` for the outputs, :func:`execute_head64` for everything) goes through
:mod:`simtc.cuda` (device arrays, ``RawModule``, the dynamic shared memory raised to ``sizeof(SharedMemoryPlan)`` as
``cudaFuncSetAttribute`` does at L956) and, when a CTA is to be recorded, :class:`simtc.ptx.recording.Recorder`: the
recorded CTA becomes an engine Program of the same record classes the hand Program uses. :func:`diff_programs`
holds it against the hand Program record by record (``simtc program diff flashmla-head64 --executed``), each
residual tied to the explanation in ``docs/kernel.md`` whose claim it satisfies (:func:`explain`);
:func:`engine_comparison` times both on the engine; :func:`record` writes ``tests/data/flashmla_head64_executed.json``.

**What the executor models for it.** The compiled kernel needs the per-request ``everyone_sync`` reached by a
diverged warp (``barrier.sync`` from ``NamedBarrier::arrive_and_wait_unaligned``, ``kernel.cuh`` L116, with warps 4-6
split between the elected lane and the empty ``run_main_loop`` of L745: the first path waits aside and the warp
arrives once, as the recording records it), ``add``/``mul``/``fma.rn`` on ``.f32x2`` (``ku::float2_add/mul/fma``), a
``tcgen05.ld``/``st`` whose address names lane 0 from warps 1-3 (``tmem_cols::P``, L169) and
``st.weak.shared::cta.b128``; the executor models each (commits 76a2cd4 and ee5cb08).

Outputs are :class:`simtc.kernels.flashmla.io.FlashMLAOutputs` (``out`` bf16 bits ``[b, s_q, 64, 512]``, ``lse``
float32 ``[b, s_q, 64]``), the replay's format (``simtc replay --save-outputs``).

Layering: this module drives the PTX executor (:mod:`simtc.ptx`), simtc's CuPy-like API (:mod:`simtc.cuda`) and
FlashMLA's build flags (:mod:`simtc.hw.flashmla`), so it sits in :mod:`simtc.cuda`; what needs none of them (the
parameters' host-side values, the diff, the explanations) is :mod:`simtc.kernels.flashmla.executed_head64`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
from attrs import field, frozen

from simtc.errors import SimtcError
from simtc.kernels.flashmla.constants import B_H, D_V
from simtc.kernels.flashmla.executed_head64 import (
    CASES,
    EXPLANATIONS,
    LOG_2_E,
    MODEL_TYPE,
    NUM_THREADS,
    ExecutedDiff,
    barrier_names,
    diff_programs,
    pack_struct,
    sched_arrays,
)
from simtc.kernels.flashmla.models import Head64Model, model

__all__ = ["KERNEL_SOURCE", "PROBE_SOURCE", "ExecutedHead64", "Head64Launch", "build_launch", "case_result",
           "checkout_from", "engine_comparison", "execute_head64", "executed_diff", "executed_gather_rows",
           "gather_rows", "head64_ptx", "kerutils_tensor_maps", "probe", "record", "run_head64", "tensor_names"]

_RULE = "simtc builds FlashMLA's head64 kernel from a FlashMLA checkout (--flashmla DIR or SIMTC_FLASHMLA_DIR)"
_HOST = "FlashMLA 9241ae3 csrc/sm100/decode/head64/kernel.cuh L858-961 (KernelTemplate::run)"
KERNEL_SOURCE = "csrc/sm100/decode/head64/kernel.cuh"


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

template <ModelType Model>
static void tma_params(SparseAttnDecodeParams const& params) {
    using K = sm100::decode::head64::KernelTemplate<Model>;
    using elem_t = cutlass::bfloat16_t;  // Q and O are bf16
    using namespace cute;
    auto shape_Q_SW128 = make_shape(K::B_H, K::D_Q, params.s_q, params.b);
    auto tma_Q_SW128 = make_tma_copy(SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr((elem_t*)params.q),
        make_layout(shape_Q_SW128, make_stride(params.stride_q_h_q, _1{}, params.stride_q_s_q, params.stride_q_b))),
        typename K::SmemLayoutQ_SW128{});
    auto shape_O = make_shape(K::B_H, K::D_V, params.s_q, params.b);
    auto tma_O = make_tma_copy(SM90_TMA_STORE{}, make_tensor(make_gmem_ptr((elem_t*)params.out),
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
def kerutils_tensor_maps(m: Head64Model, *, q: int, kv: int, s_q: int, b: int, q_strides: tuple[int, int, int],
                         num_blocks: int, stride_kv_block: int) -> dict[str, bytes]:
    """The three maps ``KernelTemplate::run`` makes with ``ku::make_tensor_map`` (``kernel.cuh`` L896-933, strides in
    bytes, element strides 1, interleave none, OOB fill none: kerutils ``host/host.h`` L82-95), encoded by
    :func:`simtc.ptx.tensor_map.tensor_map`; ``q``/``kv``: device addresses, ``q_strides`` in elements."""
    from simtc.ptx.tensor_map import tensor_map

    sqb, sqs, sqh = q_strides
    rows = num_blocks * (stride_kv_block // m.tma_k_stride)
    out = {}
    if m.v32:  # L896-908: D_Q_SW64 = 64 (V32 only; MODEL1 leaves the map zero)
        out["tensor_map_q_sw64"] = tensor_map("BFLOAT16", 5, q + 2 * 512, (64, B_H, 2, s_q, b),
                                              (2 * sqh, 2 * 32, 2 * sqs, 2 * sqb), (32, B_H, 2, 1, 1), (1,) * 5,
                                              swizzle="SWIZZLE_64B", l2_promotion="L2_128B")
    out["tensor_map_kv_nope"] = tensor_map("INT64", 2, kv, (m.d_nope // 8, rows), (m.tma_k_stride,),
                                           (m.d_nope // 8, 1), (1, 1), swizzle="SWIZZLE_NONE", l2_promotion="L2_128B")
    k_rope_sw = 64 if m.v32 else 128  # K_ROPE_SW (config.h L55)
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
    params = pack_struct(pr["params"], values, "SparseAttnDecodeParams")
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
               num_sm_parts: int = 1, max_instructions: int | None = 400_000_000):
    """Run FlashMLA's head64 kernel in simtc on ``inputs`` and return its outputs
    (:class:`~simtc.kernels.flashmla.io.FlashMLAOutputs`: ``out``, ``lse``, the replay's format, for
    :func:`~simtc.kernels.flashmla.io.save_outputs`); the arguments are :func:`execute_head64`'s."""
    return execute_head64(checkout, inputs, model=model, blocks=blocks, seed=seed, num_sm_parts=num_sm_parts,
                          max_instructions=max_instructions).outputs


def execute_head64(checkout=None, inputs=None, *, model: str | None = None, blocks: int | None = None, seed: int = 0,
                   num_sm_parts: int = 1, record: tuple[int, int, int] | None = None,
                   max_instructions: int | None = 400_000_000) -> ExecutedHead64:
    """Run FlashMLA's head64 kernel in simtc on ``inputs`` (:class:`~simtc.kernels.flashmla.io.FlashMLAInputs`;
    None: ``make_inputs(model, topk=64 * blocks, seed=seed)``): the outputs, the executor's result and, with
    ``record`` (a CTA's ``%ctaid``), that CTA as a Program (:class:`simtc.ptx.recording.Recorder`).
    ``model``/``blocks`` must agree with ``inputs`` when both are given."""
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


def tensor_names(lau: Head64Launch) -> dict[str, str]:
    """The recording's tensor names (``global@<address>``: each tensor map's global address) -> the hand Program's."""
    m = lau.model
    q, kv, o = (int(lau.arrays[k].data.ptr) for k in ("q", "kv", "out"))
    rope = kv + (m.d_nope + 16 if m.v32 else m.d_nope)
    names = {q: "q_sw128", q + 2 * 512: "q_sw64", kv: "kv_nope", rope: "kv_rope", o: "o"}
    return {f"global@{a:#x}": n for a, n in names.items()}


def executed_diff(checkout=None, model_name: str = "v32", blocks: int = 2, seed: int = 0) -> ExecutedDiff:
    """Run the kernel on ``make_inputs(model, topk=64 * blocks, seed)`` recording block (0,0,0), build the hand
    Program for the same request (its rescale flags from the replay's own decision,
    :func:`simtc.kernels.flashmla.replay.rescale_blocks`) and diff them (:func:`diff_programs`)."""
    from simtc.kernels.flashmla.head64 import head64_program
    from simtc.kernels.flashmla.io import make_inputs, request
    from simtc.kernels.flashmla.replay import rescale_blocks

    m = model(model_name)
    inp = make_inputs(m, topk=64 * blocks, seed=seed)
    run = execute_head64(checkout, inp, record=(0, 0, 0))
    rescale = tuple(rescale_blocks(request(inp, 0, 0)))
    hand = head64_program(m, blocks, rescale)
    rec = run.recorded
    diffs = diff_programs(hand, rec.program, rec.sources, m=m, tensors=tensor_names(run.launch))
    return ExecutedDiff(m.name, blocks, seed, rescale, diffs, hand, rec.program, run)


def engine_comparison(checkout=None, model_name: str = "v32", blocks: int = 4, seed: int = 0) -> dict:
    """The executed kernel's recorded block (0,0,0) on the engine (:func:`simtc.ptx.recording.run_engine`: timing
    mode, the hazard checker on) beside the hand Program's replay of the same request: whole-kernel cycles, steady
    cycles per block (the mean interval between ``sv_done`` phases: :func:`simtc.kernels.flashmla.replay._steady`'s
    definition), and the hazards each reports (the known races of :data:`simtc.kernels.flashmla.head64.KNOWN_RACES`
    named)."""
    from simtc.engine.trace import mean_interval
    from simtc.kernels.flashmla.head64 import head64_program
    from simtc.kernels.flashmla.io import make_inputs, request
    from simtc.kernels.flashmla.replay import replay, rescale_blocks, sv_done_cycles
    from simtc.ptx.recording import run_engine

    m = model(model_name)
    inp = make_inputs(m, topk=64 * blocks, seed=seed)
    run = execute_head64(checkout, inp, record=(0, 0, 0))
    er = run_engine(run.recorded)
    req = request(inp, 0, 0)
    hand = replay(m, inputs=req, keep_engine=True)
    hp = head64_program(m, blocks, tuple(rescale_blocks(req)))
    names = barrier_names(hp, run.recorded.program)
    sv = sorted(c for n, h in names.items() if h.startswith("sv_done") for c in er.engine.trace.phase_cycles(n))
    hand_sv = sv_done_cycles(hand.engine)

    def hazards(hs) -> list[dict]:
        return [{"rule": h.rule, "first": list(h.first) if h.first else None,
                 "second": list(h.second) if h.second else None} for h in hs]

    return {"model": m.name, "blocks": blocks, "seed": seed,
            "executed": {"cycles": er.cycles, "steady_cycles_per_block": mean_interval(sv, er.cycles),
                         "sv_done": sv, "hazards": hazards(er.hazards), "deadlock": bool(er.summary().get("deadlock"))},
            "hand": {"cycles": int(hand.cycles), "steady_cycles_per_block": float(hand.cycles_per_block_steady),
                     "sv_done": list(hand_sv), "hazards": list(hand.hazards),
                     "known_races": list(hand.known_races)}}


def gather_rows(inputs, batch: int = 0, query: int = 0) -> np.ndarray:
    """int64 [blocks * 64]: the row coordinate of each top-k position of request (batch, query) in the KV tensor
    maps, as the index warp computes it (``kernel.cuh`` L703: ``block * (stride_kv_block / TMA_K_STRIDE) +
    row_in_block * tma_coords_step_per_token`` (L657: 1 for both models) for a valid token, -1 for an invalid one
    or a position past ``topk_length``)."""
    m = inputs.model
    tl = inputs.topk_len(batch)
    blocks = max(-(-tl // 64), 1)
    idx = np.asarray(inputs.indices[batch, query, :64 * blocks], np.int64)
    valid = (idx >= 0) & (np.arange(idx.size) < tl)
    per_block = inputs.block_stride // m.tma_k_stride
    step = {"v32": 656, "model1": 576}[m.name] // m.tma_k_stride
    rows = (idx // inputs.page_block_size) * per_block + (idx % inputs.page_block_size) * step
    return np.where(valid, rows, -1)


def executed_gather_rows(program, warp: int) -> list[list[int]]:
    """The four row coordinates of each ``tile::gather4`` copy warp ``warp`` of a recorded Program issued, in order."""
    role = next(r for r in program.roles if warp in r.warps)
    return [list(r.coords[1:]) for r in role.records
            if type(r).__name__ == "CpAsyncBulkTensor" and r.mode == "gather4"]


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def case_result(checkout, model_name: str, blocks: int, b: int = 1, s_q: int = 1, seed: int = 0) -> dict:
    """One recorded case: O and LSE against float64 and against the hand replay (digests, differing elements), the
    executed instruction counts, and for block (0,0,0) the record-by-record diff summary."""
    from collections import Counter

    from simtc.kernels.flashmla.head64 import head64_program
    from simtc.kernels.flashmla.io import make_inputs, replay_inputs, request
    from simtc.kernels.flashmla.replay import reference_attention, rescale_blocks

    m = model(model_name)
    inp = make_inputs(m, b=b, s_q=s_q, topk=64 * blocks, seed=seed)
    run = execute_head64(checkout, inp, record=(0, 0, 0))
    rep = replay_inputs(inp)
    o = run.outputs.o_values()
    rows = []
    for i in range(b):
        for j in range(s_q):
            o_ref, lse_ref = reference_attention(request(inp, i, j))
            rows.append({"batch": i, "query": j,
                         "o_rel_error": float(np.linalg.norm(o[i, j] - o_ref) / np.linalg.norm(o_ref)),
                         "lse_max_abs_error": float(np.abs(run.outputs.lse[i, j] - lse_ref).max())})
    rescale = tuple(rescale_blocks(request(inp, 0, 0)))
    diff = None
    if b == 1:  # the hand Program is one request; with b > 1 each CTA runs b of them, one after the other
        hand = head64_program(m, blocks, rescale)
        diffs = diff_programs(hand, run.recorded.program, run.recorded.sources, m=m,
                              tensors=tensor_names(run.launch))
        d = ExecutedDiff(m.name, blocks, seed, rescale, diffs, hand, run.recorded.program, run)
        kinds = Counter(f"{x['role']}|{x['kind']}|{x['op']}|{x['field'] or ''}|{x['why'] or 'UNEXPLAINED'}"
                        for x in diffs)
        want = gather_rows(inp).reshape(-1, 4)
        per = {5: 1, 6: m.rope_gathers // m.nope_gathers}  # gathers per 4 tokens: raw 1, RoPE 2 (V32) or 1
        gathers = {w: executed_gather_rows(run.recorded.program, w) for w in per}
        match = {f"warp{w}": sum(got == list(want[k // n]) for k, got in enumerate(gathers[w]))
                 for w, n in per.items()}
        diff = {"compared": d.counts(), "differences": len(diffs),
                "unexplained": sum(1 for x in diffs if x["why"] is None), "by_kind": dict(sorted(kinds.items())),
                "gather4_rows_as_computed_from_the_indices": match,
                "gather4_copies": {f"warp{w}": len(g) for w, g in gathers.items()}}
    return {"model": m.name, "blocks": blocks, "b": b, "s_q": s_q, "seed": seed, "grid": list(run.launch.grid),
            "rescale_blocks": [i for i, r in enumerate(rescale) if r], "rows": rows,
            "out_sha256": _sha(run.outputs.out), "lse_sha256": _sha(run.outputs.lse),
            "replay_out_sha256": _sha(rep.outputs.out), "replay_lse_sha256": _sha(rep.outputs.lse),
            "out_elements_differing_from_replay": int((rep.outputs.out != run.outputs.out).sum()),
            "lse_elements_differing_from_replay": int((rep.outputs.lse != run.outputs.lse).sum()),
            "lse_max_abs_difference_from_replay": float(np.abs(rep.outputs.lse - run.outputs.lse).max()),
            "warp_instructions": int(sum(run.result.warp_instructions.values())),
            "thread_instructions": int(sum(run.result.thread_instructions.values())),
            "seconds": round(float(run.result.seconds), 1),
            "diff": diff}


def record(checkout, path, *, cases=CASES, engine_blocks=(1, 4, 12)) -> dict:
    """Run every case of ``cases`` and the engine comparison for V32 at ``engine_blocks``; write the JSON."""
    import subprocess as sp

    from simtc.hw import flashmla

    co = checkout_from(checkout)
    nvcc = sp.run([_nvcc(), "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    data = {"what": "FlashMLA's SM100 head64 kernel compiled from a checkout and executed by simtc's PTX executor "
                    "(simtc.cuda.executed_sm100.head64), against float64, the hand replay and the hand Program",
            "flashmla_commit": co.commit, "cutlass_commit": co.cutlass_commit, "nvcc": nvcc,
            "nvcc_flags": [*flashmla.NVCC_FLAGS, "-lineinfo", "-arch=sm_100a"],
            "explanations": EXPLANATIONS,
            "cases": [case_result(co, *c) for c in cases],
            "engine": [engine_comparison(co, "v32", n) for n in engine_blocks]}
    for e in data["engine"]:
        for side in ("executed", "hand"):
            e[side].pop("sv_done", None)
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    return data


if __name__ == "__main__":  # python -P -m simtc.cuda.executed_sm100.head64 OUT.json (SIMTC_FLASHMLA_DIR set)
    import sys

    record(None, sys.argv[1] if len(sys.argv) > 1 else "flashmla_head64_executed.json")
