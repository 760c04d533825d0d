// simtc's host-side layout probe for FlashMLA's SM90 sparse decode (simtc code; it includes FlashMLA's headers
// from a user-supplied checkout, as simtc/hw/cuda/flashmla_sm90_entry.cu does). Compiled by nvcc on the development
// machine and run there (no GPU): it prints, as one JSON object,
//   * sizeof / alignof / offsetof of the params structs of csrc/params.h as this compiler lays them out;
//   * for the split-KV kernel's second parameter (TmaParams, csrc/sm90/decode/sparse_fp8/config.h), the bytes of
//     the object FlashMLA's host code builds (csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh, KernelTemplate::run:
//     shape_Q and tma_Q from cute::make_tma_copy, then tensor_map_o), with the offsets of its two tensor maps;
//   * the arguments cute::make_tma_copy passes to cuTensorMapEncodeTiled for tma_Q. This program defines
//     cuTensorMapEncodeTiled itself (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL makes CUTLASS call it by name), so
//     the call is observed, not made: simtc encodes its own tensor map from these arguments.
// Usage: flashmla_sm90_layout MODEL(0=V32,1=MODEL1) h_q d_qk s_q b stride_q_b stride_q_s_q stride_q_h_q q_address
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <cuda.h>

#include "params.h"
#include "sm90/decode/sparse_fp8/config.h"

namespace {
struct Captured {
    int calls = 0;
    int data_type = -1, rank = 0, interleave = -1, swizzle = -1, l2 = -1, oob = -1;
    unsigned long long address = 0;
    unsigned long long dims[5] = {}, strides[4] = {};
    unsigned box[5] = {}, elem[5] = {};
} captured;
}  // namespace

extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType dt, cuuint32_t rank, void *addr,
                                           const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                           const cuuint32_t *elem, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                           CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    captured.calls += 1;
    captured.data_type = (int)dt;
    captured.rank = (int)rank;
    captured.address = (unsigned long long)(uintptr_t)addr;
    for (cuuint32_t i = 0; i < rank && i < 5; ++i) {
        captured.dims[i] = dims[i];
        captured.box[i] = box[i];
        captured.elem[i] = elem[i];
        if (i + 1 < rank) captured.strides[i] = strides[i];
    }
    captured.interleave = (int)il;
    captured.swizzle = (int)sw;
    captured.l2 = (int)l2;
    captured.oob = (int)oob;
    std::memset(map, 0, sizeof(*map));
    return CUDA_SUCCESS;
}

#define FIELD(S, f) std::printf("\"%s\": %zu, ", #f, offsetof(S, f))
#define STRUCT_BEGIN(S) std::printf("\"%s\": {\"sizeof\": %zu, \"alignof\": %zu, \"fields\": {", #S, sizeof(S), alignof(S))
#define STRUCT_END() std::printf("\"_\": 0}}, ")

static void print_structs() {
    STRUCT_BEGIN(DecodingSchedMeta);
    FIELD(DecodingSchedMeta, begin_req_idx); FIELD(DecodingSchedMeta, end_req_idx);
    FIELD(DecodingSchedMeta, begin_block_idx); FIELD(DecodingSchedMeta, end_block_idx);
    FIELD(DecodingSchedMeta, begin_split_idx); FIELD(DecodingSchedMeta, is_first_req_splitted);
    FIELD(DecodingSchedMeta, is_last_req_splitted);
    STRUCT_END();
    STRUCT_BEGIN(GetDecodeSchedMetaParams);
    FIELD(GetDecodeSchedMetaParams, b); FIELD(GetDecodeSchedMetaParams, s_q);
    FIELD(GetDecodeSchedMetaParams, block_size_n); FIELD(GetDecodeSchedMetaParams, fixed_overhead_num_blocks);
    FIELD(GetDecodeSchedMetaParams, topk); FIELD(GetDecodeSchedMetaParams, extra_topk);
    FIELD(GetDecodeSchedMetaParams, topk_length); FIELD(GetDecodeSchedMetaParams, extra_topk_length);
    FIELD(GetDecodeSchedMetaParams, seqlens_k_ptr); FIELD(GetDecodeSchedMetaParams, tile_scheduler_metadata_ptr);
    FIELD(GetDecodeSchedMetaParams, num_splits_ptr); FIELD(GetDecodeSchedMetaParams, num_sm_parts);
    FIELD(GetDecodeSchedMetaParams, stream);
    STRUCT_END();
    STRUCT_BEGIN(SparseAttnDecodeParams);
    FIELD(SparseAttnDecodeParams, b); FIELD(SparseAttnDecodeParams, s_q); FIELD(SparseAttnDecodeParams, h_q);
    FIELD(SparseAttnDecodeParams, h_kv); FIELD(SparseAttnDecodeParams, d_qk); FIELD(SparseAttnDecodeParams, d_v);
    FIELD(SparseAttnDecodeParams, sm_scale); FIELD(SparseAttnDecodeParams, sm_scale_div_log2);
    FIELD(SparseAttnDecodeParams, num_blocks); FIELD(SparseAttnDecodeParams, page_block_size);
    FIELD(SparseAttnDecodeParams, topk); FIELD(SparseAttnDecodeParams, model_type);
    FIELD(SparseAttnDecodeParams, q); FIELD(SparseAttnDecodeParams, kv); FIELD(SparseAttnDecodeParams, indices);
    FIELD(SparseAttnDecodeParams, topk_length); FIELD(SparseAttnDecodeParams, attn_sink);
    FIELD(SparseAttnDecodeParams, lse); FIELD(SparseAttnDecodeParams, out);
    FIELD(SparseAttnDecodeParams, extra_num_blocks); FIELD(SparseAttnDecodeParams, extra_page_block_size);
    FIELD(SparseAttnDecodeParams, extra_topk); FIELD(SparseAttnDecodeParams, extra_kv);
    FIELD(SparseAttnDecodeParams, extra_indices); FIELD(SparseAttnDecodeParams, extra_topk_length);
    FIELD(SparseAttnDecodeParams, stride_q_b); FIELD(SparseAttnDecodeParams, stride_q_s_q);
    FIELD(SparseAttnDecodeParams, stride_q_h_q); FIELD(SparseAttnDecodeParams, stride_kv_block);
    FIELD(SparseAttnDecodeParams, stride_kv_row); FIELD(SparseAttnDecodeParams, stride_indices_b);
    FIELD(SparseAttnDecodeParams, stride_indices_s_q); FIELD(SparseAttnDecodeParams, stride_lse_b);
    FIELD(SparseAttnDecodeParams, stride_lse_s_q); FIELD(SparseAttnDecodeParams, stride_o_b);
    FIELD(SparseAttnDecodeParams, stride_o_s_q); FIELD(SparseAttnDecodeParams, stride_o_h_q);
    FIELD(SparseAttnDecodeParams, stride_extra_kv_block); FIELD(SparseAttnDecodeParams, stride_extra_kv_row);
    FIELD(SparseAttnDecodeParams, stride_extra_indices_b); FIELD(SparseAttnDecodeParams, stride_extra_indices_s_q);
    FIELD(SparseAttnDecodeParams, stream); FIELD(SparseAttnDecodeParams, lse_accum);
    FIELD(SparseAttnDecodeParams, o_accum); FIELD(SparseAttnDecodeParams, stride_lse_accum_split);
    FIELD(SparseAttnDecodeParams, stride_lse_accum_s_q); FIELD(SparseAttnDecodeParams, stride_o_accum_split);
    FIELD(SparseAttnDecodeParams, stride_o_accum_s_q); FIELD(SparseAttnDecodeParams, stride_o_accum_h_q);
    FIELD(SparseAttnDecodeParams, tile_scheduler_metadata_ptr); FIELD(SparseAttnDecodeParams, num_splits_ptr);
    FIELD(SparseAttnDecodeParams, num_sm_parts);
    STRUCT_END();
    STRUCT_BEGIN(CombineParams);
    FIELD(CombineParams, b); FIELD(CombineParams, s_q); FIELD(CombineParams, h_q); FIELD(CombineParams, d_v);
    FIELD(CombineParams, lse); FIELD(CombineParams, out); FIELD(CombineParams, stride_lse_b);
    FIELD(CombineParams, stride_lse_s_q); FIELD(CombineParams, stride_o_b); FIELD(CombineParams, stride_o_s_q);
    FIELD(CombineParams, stride_o_h_q); FIELD(CombineParams, lse_accum); FIELD(CombineParams, o_accum);
    FIELD(CombineParams, stride_lse_accum_split); FIELD(CombineParams, stride_lse_accum_s_q);
    FIELD(CombineParams, stride_o_accum_split); FIELD(CombineParams, stride_o_accum_s_q);
    FIELD(CombineParams, stride_o_accum_h_q); FIELD(CombineParams, tile_scheduler_metadata_ptr);
    FIELD(CombineParams, num_splits_ptr); FIELD(CombineParams, num_sm_parts); FIELD(CombineParams, attn_sink);
    FIELD(CombineParams, stream);
    STRUCT_END();
}

template <ModelType MODEL>
static int print_tma_params(int h_q, int d_qk, int s_q, int b, int sqb, int sqs, int sqh, unsigned long long q) {
    using Kernel = sm90::decode::sparse_fp8::KernelTemplate<MODEL, 64>;
    // As KernelTemplate::run builds them (FlashMLA csrc/sm90/decode/sparse_fp8/splitkv_mla.cuh lines 705-716 and
    // 745-750 at 9241ae3).
    auto shape_Q = make_shape(h_q, d_qk, s_q, b);
    auto q_copy = cute::make_tma_copy(SM90_TMA_LOAD{},
        make_tensor(make_gmem_ptr((bf16 *)(uintptr_t)q), make_layout(shape_Q, make_stride(sqh, _1{}, sqs, sqb))),
        typename Kernel::SmemLayoutQ{});
    using Tma = typename Kernel::template TmaParams<decltype(shape_Q), decltype(q_copy)>;
    alignas(Tma) static unsigned char raw_buf[sizeof(Tma)] = {};  // zeroed, so padding bytes print as 0
    Tma &params = *new (raw_buf) Tma{shape_Q, q_copy, CUtensorMap{}};
    const unsigned char *raw = raw_buf;
    std::printf("\"SharedMemoryPlan\": {\"sizeof\": %zu}, ", sizeof(typename Kernel::SharedMemoryPlan));
    std::printf("\"TmaParams\": {\"sizeof\": %zu, \"alignof\": %zu, \"tma_Q_descriptor\": %td, "
                "\"tensor_map_o\": %zu, \"bytes\": \"",
                sizeof(Tma), alignof(Tma),
                reinterpret_cast<const unsigned char *>(params.tma_Q.get_tma_descriptor()) - raw,
                offsetof(Tma, tensor_map_o));
    for (size_t i = 0; i < sizeof(Tma); ++i) std::printf("%02x", raw[i]);
    std::printf("\"}, \"tma_Q_encode\": {\"calls\": %d, \"data_type\": %d, \"rank\": %d, \"address\": %llu, "
                "\"interleave\": %d, \"swizzle\": %d, \"l2_promotion\": %d, \"oob_fill\": %d, ",
                captured.calls, captured.data_type, captured.rank, captured.address, captured.interleave,
                captured.swizzle, captured.l2, captured.oob);
    auto arr = [](const char *name, const unsigned long long *v, int n, const char *tail) {
        std::printf("\"%s\": [", name);
        for (int i = 0; i < n; ++i) std::printf("%s%llu", i ? ", " : "", v[i]);
        std::printf("]%s", tail);
    };
    unsigned long long box[5], elem[5];
    for (int i = 0; i < 5; ++i) {
        box[i] = captured.box[i];
        elem[i] = captured.elem[i];
    }
    arr("global_dim", captured.dims, captured.rank, ", ");
    arr("global_strides", captured.strides, captured.rank > 0 ? captured.rank - 1 : 0, ", ");
    arr("box_dim", box, captured.rank, ", ");
    arr("element_strides", elem, captured.rank, "}");
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        std::fprintf(stderr, "usage: %s MODEL h_q d_qk s_q b stride_q_b stride_q_s_q stride_q_h_q q_address\n", argv[0]);
        return 2;
    }
    int model = std::atoi(argv[1]);
    int v[7];
    for (int i = 0; i < 7; ++i) v[i] = std::atoi(argv[2 + i]);
    unsigned long long q = std::strtoull(argv[9], nullptr, 0);
    std::printf("{");
    print_structs();
    std::printf("\"ModelType\": {\"V32\": %d, \"MODEL1\": %d}, ", (int)ModelType::V32, (int)ModelType::MODEL1);
    if (model == 0) {
        print_tma_params<ModelType::V32>(v[0], v[1], v[2], v[3], v[4], v[5], v[6], q);
    } else {
        print_tma_params<ModelType::MODEL1>(v[0], v[1], v[2], v[3], v[4], v[5], v[6], q);
    }
    std::printf("}\n");
    return 0;
}
