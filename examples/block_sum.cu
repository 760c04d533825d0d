// out[blockIdx.x] = the sum of the block's 2 * blockDim.x elements of x (those below n).
// A tree in dynamic shared memory (blockDim.x floats: launch with shared_mem = 4 * blockDim.x) down to 32
// partial sums, then the first warp adds those with shuffles. blockDim.x: a power of two, at least 64.
extern "C" __global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, unsigned int n) {
    extern __shared__ float partial[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x * 2 + tid;
    float v = 0.0f;
    if (i < n) v = x[i];
    if (i + blockDim.x < n) v += x[i + blockDim.x];
    partial[tid] = v;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s >= 32; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    if (tid < 32) {
        v = partial[tid];
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
        if (tid == 0) out[blockIdx.x] = v;
    }
}
