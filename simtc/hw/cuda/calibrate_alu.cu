// simtc calibration: CUDA-core instruction classes (double-brace placeholders are filled by simtc.hw.calibrate).
//
// {{NAME}}: {{WHAT}}
// One CTA of 128*k threads on one SM (warp w runs on sub-partition w % 4). Every thread carries {{CHAINS}}
// chain(s) of 32-bit state; the loop body is {{STEPS}} unrolled steps (the PTX of one step is written out
// by the generator, so a step is exactly the instructions it claims). `iters` iterations of the body are
// timed with clock64 by lane 0 of every warp; the state is folded into `sink` at the end so that nothing
// is dead code. A fit over kernels that differ only in the number of unrolled steps removes the loop
// overhead (simtc.hw.calibrate.fit_line).
extern "C" __global__ void __launch_bounds__(512, 1)
{{NAME}}(u32 seed, u32 iters, u64* __restrict__ times, u32* __restrict__ sink)
{
    const u32 a = seed + {{A}}, b = seed + {{B}};
    u32 x[{{CHAINS}}], y[{{CHAINS}}];
#pragma unroll
    for (int c = 0; c < {{CHAINS}}; ++c) {
        x[c] = seed + {{X0}} + (threadIdx.x << 4) + (u32)c * 0x00010001u;
        y[c] = seed + {{Y0}} + (threadIdx.x << 3) + (u32)c * 0x00020002u;
    }
    (void)a; (void)b;
    __syncthreads();
    const u64 t0 = simtc_clock();
#pragma unroll 1
    for (u32 it = 0; it < iters; ++it) {
{{BODY}}
    }
    const u64 t1 = simtc_clock();
    simtc_store_warp_times(times, t0, t1);
    u32 acc = 0;
#pragma unroll
    for (int c = 0; c < {{CHAINS}}; ++c) acc ^= {{FOLD}};
    sink[threadIdx.x] = acc;
}
