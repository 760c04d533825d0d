// c[i] = a[i] + b[i] for i < n: one thread per element.
// Run it with simtc (no GPU needed):
//   simtc run examples/vector_add.cu --grid 4 --block 256 --arg a=a.npy --arg b=b.npy --arg c=c.npy --arg n=1000 --out out/
// or from Python with simtc.cuda or CuPy (examples/cuda_kernels.py).
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
