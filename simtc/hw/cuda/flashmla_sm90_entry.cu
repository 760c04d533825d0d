// simtc's C entry point to FlashMLA's SM90 sparse FP8 decode (64 heads): scheduler metadata, split-KV kernel,
// combine -- the three launches FlashMLA's own `sparse_attn_decode_interface` (csrc/api/sparse_decode.h) makes,
// without torch. All buffers are device pointers allocated by the caller (CuPy); this file only fills the params
// structs of csrc/params.h and calls FlashMLA's launchers. It is compiled against a user-supplied FlashMLA
// checkout (simtc.hw.flashmla); no FlashMLA code is part of simtc.
#include <cstdio>
#include <cstring>
#include <exception>

#include "params.h"
#include "sm90/decode/sparse_fp8/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

namespace {

void set_error(char *err, int err_len, const char *what) {
    if (err != nullptr && err_len > 0) {
        std::snprintf(err, (size_t)err_len, "%s", what);
    }
}

}  // namespace

#define SIMTC_ARGS                                                                                        \
    int model1, int b, int s_q, int h_q, int d_qk, int topk, int num_blocks, int page_block_size,            \
        int block_stride_bytes, int bytes_per_token, float sm_scale, void *q, void *kv, void *indices,       \
        void *topk_length, void *attn_sink, void *out, void *lse, void *sched_meta, void *num_splits,        \
        void *lse_accum, void *o_accum, int num_sm_parts, void *stream, char *err, int err_len
#define SIMTC_PASS                                                                                        \
    model1, b, s_q, h_q, d_qk, topk, num_blocks, page_block_size, block_stride_bytes, bytes_per_token,       \
        sm_scale, q, kv, indices, topk_length, attn_sink, out, lse, sched_meta, num_splits, lse_accum,       \
        o_accum, num_sm_parts, stream, err, err_len

namespace {

// The three launches, asynchronous on `stream`; with `ev` (4 events) recorded before the scheduler, between the
// launches and after the combine. Returns 0, or writes a message to err (a host-side refusal or a launch error).
int launch_all(SIMTC_ARGS, cudaEvent_t const *ev) {
    try {
        cudaStream_t st = (cudaStream_t)stream;
        if (ev != nullptr) cudaEventRecord(ev[0], st);
        const int d_v = 512;
        const float log2e = 1.4426950408889634f;  // LOG_2_E of csrc/api/common.h
        GetDecodeSchedMetaParams meta = {};
        meta.b = b;
        meta.s_q = s_q;
        meta.block_size_n = 64;
        meta.fixed_overhead_num_blocks = 5;
        meta.topk = topk;
        meta.extra_topk = 0;
        meta.topk_length = (int *)topk_length;
        meta.extra_topk_length = nullptr;
        meta.seqlens_k_ptr = nullptr;
        meta.tile_scheduler_metadata_ptr = (DecodingSchedMeta *)sched_meta;
        meta.num_splits_ptr = (int *)num_splits;
        meta.num_sm_parts = num_sm_parts;
        meta.stream = st;
        smxx::decode::run_get_decoding_sched_meta_kernel(meta);
        if (ev != nullptr) cudaEventRecord(ev[1], st);

        SparseAttnDecodeParams p = {};
        p.b = b;
        p.s_q = s_q;
        p.h_q = h_q;
        p.h_kv = 1;
        p.d_qk = d_qk;
        p.d_v = d_v;
        p.sm_scale = sm_scale;
        p.sm_scale_div_log2 = sm_scale * log2e;
        p.num_blocks = num_blocks;
        p.page_block_size = page_block_size;
        p.topk = topk;
        p.model_type = model1 ? ModelType::MODEL1 : ModelType::V32;
        p.q = (cutlass::bfloat16_t *)q;
        p.kv = (cutlass::bfloat16_t *)kv;
        p.indices = (int *)indices;
        p.topk_length = (int *)topk_length;
        p.attn_sink = (float *)attn_sink;
        p.lse = (float *)lse;
        p.out = (cutlass::bfloat16_t *)out;
        p.extra_num_blocks = 0;
        p.extra_page_block_size = 0;
        p.extra_topk = 0;
        p.extra_kv = nullptr;
        p.extra_indices = nullptr;
        p.extra_topk_length = nullptr;
        // Contiguous tensors, strides in elements (bytes for the uint8 cache), as the interface passes them.
        p.stride_q_b = s_q * h_q * d_qk;
        p.stride_q_s_q = h_q * d_qk;
        p.stride_q_h_q = d_qk;
        p.stride_kv_block = block_stride_bytes;
        p.stride_kv_row = bytes_per_token;
        p.stride_indices_b = s_q * topk;
        p.stride_indices_s_q = topk;
        p.stride_lse_b = s_q * h_q;
        p.stride_lse_s_q = h_q;
        p.stride_o_b = s_q * h_q * d_v;
        p.stride_o_s_q = h_q * d_v;
        p.stride_o_h_q = d_v;
        p.stride_extra_kv_block = 0;
        p.stride_extra_kv_row = 0;
        p.stride_extra_indices_b = 0;
        p.stride_extra_indices_s_q = 0;
        p.stream = st;
        // lse_accum [b + num_sm_parts, s_q, h_q], o_accum [b + num_sm_parts, s_q, h_q, d_v], contiguous.
        p.lse_accum = (float *)lse_accum;
        p.o_accum = (float *)o_accum;
        p.stride_lse_accum_split = s_q * h_q;
        p.stride_lse_accum_s_q = h_q;
        p.stride_o_accum_split = s_q * h_q * d_v;
        p.stride_o_accum_s_q = h_q * d_v;
        p.stride_o_accum_h_q = d_v;
        p.tile_scheduler_metadata_ptr = (DecodingSchedMeta *)sched_meta;
        p.num_splits_ptr = (int *)num_splits;
        p.num_sm_parts = num_sm_parts;
        if (h_q != 64) {
            set_error(err, err_len, "this entry point is built for 64 heads only");
            return 2;
        }
        if (model1) {
            sm90::decode::sparse_fp8::run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::MODEL1, 64>(p);
        } else {
            sm90::decode::sparse_fp8::run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::V32, 64>(p);
        }
        if (ev != nullptr) cudaEventRecord(ev[2], st);

        CombineParams c = {};
        c.b = b;
        c.s_q = s_q;
        c.h_q = h_q;
        c.d_v = d_v;
        c.lse = p.lse;
        c.out = p.out;
        c.stride_lse_b = p.stride_lse_b;
        c.stride_lse_s_q = p.stride_lse_s_q;
        c.stride_o_b = p.stride_o_b;
        c.stride_o_s_q = p.stride_o_s_q;
        c.stride_o_h_q = p.stride_o_h_q;
        c.lse_accum = p.lse_accum;
        c.o_accum = p.o_accum;
        c.stride_lse_accum_split = p.stride_lse_accum_split;
        c.stride_lse_accum_s_q = p.stride_lse_accum_s_q;
        c.stride_o_accum_split = p.stride_o_accum_split;
        c.stride_o_accum_s_q = p.stride_o_accum_s_q;
        c.stride_o_accum_h_q = p.stride_o_accum_h_q;
        c.tile_scheduler_metadata_ptr = p.tile_scheduler_metadata_ptr;
        c.num_splits_ptr = p.num_splits_ptr;
        c.num_sm_parts = num_sm_parts;
        c.attn_sink = p.attn_sink;
        c.stream = st;
        smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(c);
        if (ev != nullptr) cudaEventRecord(ev[3], st);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            set_error(err, err_len, cudaGetErrorString(e));
            return 1;
        }
        return 0;
    } catch (const std::exception &ex) {
        set_error(err, err_len, ex.what());
        return 1;
    } catch (...) {
        set_error(err, err_len, "unknown C++ exception");
        return 1;
    }
}

int synchronize(cudaStream_t st, char *err, int err_len) {
    cudaError_t e = cudaStreamSynchronize(st);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        set_error(err, err_len, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

}  // namespace

extern "C" {

// Sizes FlashMLA's interface asks for (csrc/api/sparse_decode.h, Decode_Sm90_Impl::get_meta):
// block_size_topk 64, fixed_overhead_num_blocks 5. Returns 0 on success, otherwise writes a message to err.
int simtc_flashmla_sm90_sparse_decode(SIMTC_ARGS) {
    int rc = launch_all(SIMTC_PASS, nullptr);
    return rc ? rc : synchronize((cudaStream_t)stream, err, err_len);
}

// The same call timed: `warmup` untimed calls, then `repeats` calls, each preceded (outside the timed span) by a
// cudaMemsetAsync of `flush_bytes` at `flush` (an L2 flush; none when flush is null), with CUDA events recorded on
// the stream before the scheduler, between the launches and after the combine -- no host synchronisation inside a
// span. ms[3 r + k]: milliseconds of kernel k (scheduler, split-KV, combine; each from the event before its launch
// to the one after it) of repeat r. One synchronisation at the end.
int simtc_flashmla_sm90_sparse_decode_timed(SIMTC_ARGS, int warmup, int repeats, void *flush,
                                            long long flush_bytes, float *ms) {
    cudaStream_t st = (cudaStream_t)stream;
    if (repeats < 1 || warmup < 0 || ms == nullptr) {
        set_error(err, err_len, "timed run: repeats >= 1, warmup >= 0 and an output array");
        return 2;
    }
    for (int i = 0; i < warmup; ++i) {
        int rc = launch_all(SIMTC_PASS, nullptr);
        if (rc) return rc;
    }
    cudaEvent_t *ev = new cudaEvent_t[4 * (size_t)repeats];
    for (int i = 0; i < 4 * repeats; ++i) cudaEventCreate(&ev[i]);
    int rc = 0;
    for (int r = 0; r < repeats && rc == 0; ++r) {
        if (flush != nullptr && flush_bytes > 0) cudaMemsetAsync(flush, r & 0xff, (size_t)flush_bytes, st);
        rc = launch_all(SIMTC_PASS, ev + 4 * r);
    }
    if (rc == 0) rc = synchronize(st, err, err_len);
    for (int r = 0; r < repeats && rc == 0; ++r)
        for (int k = 0; k < 3; ++k) cudaEventElapsedTime(&ms[3 * r + k], ev[4 * r + k], ev[4 * r + k + 1]);
    for (int i = 0; i < 4 * repeats; ++i) cudaEventDestroy(ev[i]);
    delete[] ev;
    return rc;
}

}  // extern "C"
