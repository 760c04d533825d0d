// Records CUTLASS's CuTe Hopper tutorials' C on a GPU (tests/data/README_h200.md, h200_cute_tutorials.json).
// The tutorial is included unmodified (its main renamed by -Dmain=tutorial_main); this main calls the tutorial's own
// host gemm() (gemm_nt / gemm_tn: CuTe params, TMA descriptors, the launch) on inputs given by a formula that
// tests/cuda/test_cute_tutorials.py reproduces, and writes C's bytes to <outdir>/C_<trans>.bin.
// Build: nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -I<cutlass>/include -I<cutlass>/tools/util/include
//        -Dmain=tutorial_main -DTUTORIAL='"<path>/wgmma_sm90.cu"' h200_cute_tutorials_record.cu
#include TUTORIAL
#undef main
#include <cstdio>
#include <vector>

// x(i) = ((i * 2654435761) mod 2^32 >> 20) mod 17 - 8, divided by 8: multiples of 1/8 in [-1, 1], exact in fp16
static float input_value(unsigned i, unsigned salt) {
  unsigned h = (i + salt) * 2654435761u;
  return float(int((h >> 20) % 17u) - 8) / 8.0f;
}

int main(int argc, char** argv) {
  const char* outdir = argc > 1 ? argv[1] : ".";
  int m = 256, n = 128, k = 512;
  using T = cute::half_t;
  std::vector<T> hA(m * k), hB(n * k), hC(m * n);
  for (int i = 0; i < m * k; ++i) hA[i] = T(input_value(i, 0));
  for (int i = 0; i < n * k; ++i) hB[i] = T(input_value(i, 977));
  T *A, *B, *C;
  cudaMalloc(&A, m * k * sizeof(T)); cudaMalloc(&B, n * k * sizeof(T)); cudaMalloc(&C, m * n * sizeof(T));
  cudaMemcpy(A, hA.data(), m * k * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB.data(), n * k * sizeof(T), cudaMemcpyHostToDevice);
  const char* cases[2] = {"NT", "TN"};
  for (const char* tr : cases) {
    cudaMemset(C, 0, m * n * sizeof(T));
    int ldA = tr[0] == 'N' ? m : k, ldB = tr[0] == 'N' ? n : k;
    gemm(tr[0], tr[1], m, n, k, T(1.0f), A, ldA, B, ldB, T(0.0f), C, m);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { printf("%s: %s\n", tr, cudaGetErrorString(e)); return 1; }
    cudaMemcpy(hC.data(), C, m * n * sizeof(T), cudaMemcpyDeviceToHost);
    char path[512]; snprintf(path, sizeof path, "%s/C_%s.bin", outdir, tr);
    FILE* f = fopen(path, "wb"); fwrite(hC.data(), sizeof(T), m * n, f); fclose(f);
    printf("%s: C[0]=%f C[last]=%f\n", tr, float(hC[0]), float(hC[m * n - 1]));
  }
  return 0;
}
