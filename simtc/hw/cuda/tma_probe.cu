// TMA probe (simtc): cp.async.bulk.tensor tile loads on a GPU with real cuTensorMapEncodeTiled maps.
// One case per process (a fault is sticky): nvcc -arch=sm_90a -o probe tma_probe.cu -lcuda;
// for i in 0 1 2 3 4 5 6 7 8 9 10 11; do ./probe $i; done > tests/data/h200_tma_probe.txt
// Each case prints "CASE enc=<cuTensorMapEncodeTiled result> err=<kernel error> ... base=<smem address> n=<words>"
// then n+4 shared-memory words after the load (0xDEADBEEF where the load wrote nothing). The global tensor's byte i
// is (uint8)((i * 2654435761) >> 13) (64-bit product). Read by tests/ptx/test_tma.py.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cstdlib>
__global__ void k(const __grid_constant__ CUtensorMap tmap, int rank, int c0, int c1, int c2, unsigned* out, int n) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar;
  unsigned sbar = (unsigned)__cvta_generic_to_shared(&bar), sdst = (unsigned)__cvta_generic_to_shared(smem);
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) ((unsigned*)smem)[i] = 0xDEADBEEF;
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sbar));
    asm volatile("fence.mbarrier_init.release.cluster;");
    asm volatile("fence.proxy.async.shared::cta;");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sbar), "r"(n * 4));
    if (rank == 2)
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        :: "r"(sdst), "l"(&tmap), "r"(c0), "r"(c1), "r"(sbar) : "memory");
    else
      asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
        :: "r"(sdst), "l"(&tmap), "r"(c0), "r"(c1), "r"(c2), "r"(sbar) : "memory");
  }
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n @!p bra W;\n}" :: "r"(sbar));
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) out[i] = ((unsigned*)smem)[i];
  if (threadIdx.x == 0) out[4096] = sdst;
}
int main(int argc, char** argv) {
  int only = atoi(argv[1]);
  cuInit(0); cudaFree(0);
  // cases: dtype, esize, rank, dims[3], box[3], es[3], swizzle, oob, coords[3]
  struct C { int dt, esz, rank; unsigned long long dims[3]; unsigned box[3], es[3]; int sw, oob; int c[3]; };
  std::vector<C> cs = {
    {7,4,2,{100,40,1},{32,8,1},{1,1,1},3,1,{-24,36,0}},
    {7,4,2,{100,40,1},{32,8,1},{1,1,1},3,0,{80,-5,0}},
    {9,2,2,{100,40,1},{32,8,1},{1,1,1},3,0,{0,0,0}},
    {9,2,2,{100,40,1},{16,8,1},{1,1,1},2,0,{3,2,0}},
    {7,4,3,{40,12,6},{16,4,3},{1,2,3},0,0,{30,-3,2}},
    {7,4,2,{100,40,1},{32,8,1},{1,1,1},4,0,{8,4,0}},
    {9,2,2,{100,40,1},{64,4,1},{1,1,1},3,1,{200,100,0}},
    {6,2,2,{100,40,1},{64,4,1},{1,1,1},3,1,{200,100,0}},
    {7,4,2,{100,40,1},{8,8,1},{1,1,1},1,0,{1,1,0}},
    {9,2,2,{100,40,1},{16,8,1},{1,1,1},1,0,{3,2,0}},
    {9,2,2,{100,40,1},{16,8,1},{1,1,1},2,0,{0,2,0}},
    {9,2,2,{100,40,1},{32,8,1},{1,1,1},2,0,{3,2,0}},
  };
  size_t gbytes = 1 << 20; void* g; cudaMalloc(&g, gbytes);
  std::vector<unsigned char> h(gbytes); for (size_t i = 0; i < gbytes; ++i) h[i] = (unsigned char)(i * 2654435761u >> 13);
  cudaMemcpy(g, h.data(), gbytes, cudaMemcpyHostToDevice);
  unsigned* out; cudaMalloc(&out, 4097 * 4);
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 32768);
  { auto& c = cs[only];
    CUtensorMap tm;
    cuuint64_t dims[3] = {c.dims[0], c.dims[1], c.dims[2]};
    cuuint64_t pitch0 = ((c.dims[0] * c.esz + 15) / 16) * 16 + 16;
    cuuint64_t strides[2] = {pitch0, pitch0 * c.dims[1]};
    cuuint32_t box[3] = {c.box[0], c.box[1], c.box[2]}, es[3] = {c.es[0], c.es[1], c.es[2]};
    CUresult r = cuTensorMapEncodeTiled(&tm, (CUtensorMapDataType)c.dt, c.rank, g, dims, strides, box, es,
      CU_TENSOR_MAP_INTERLEAVE_NONE, (CUtensorMapSwizzle)c.sw, CU_TENSOR_MAP_L2_PROMOTION_NONE, (CUtensorMapFloatOOBfill)c.oob);
    int n = c.esz; for (int d = 0; d < c.rank; ++d) n *= (d ? (c.box[d] + c.es[d] - 1) / c.es[d] : c.box[d]);
    n /= 4;
    k<<<1, 128, 32768>>>(tm, c.rank, c.c[0], c.c[1], c.c[2], out, n);
    cudaError_t e = cudaDeviceSynchronize();
    std::vector<unsigned> o(4097); cudaMemcpy(o.data(), out, 4097 * 4, cudaMemcpyDeviceToHost);
    printf("CASE enc=%d err=%d dt=%d rank=%d pitch=%llu base=%u n=%d\n", (int)r, (int)e, c.dt, c.rank, (unsigned long long)pitch0, o[4096], n);
    for (int i = 0; i < n + 4; ++i) printf("%08x%c", o[i], (i % 16 == 15) ? '\n' : ' ');
    printf("\nEND\n");
  }
  return 0;
}
