// simtc calibration: LDG pointer chase (double-brace placeholders are filled by simtc.hw.calibrate; the pool
// and its cycle come from simtc_cal_lat_fill in calibrate_latency.cu).
//
// {{NAME}}: {{WHAT}}
// One thread (lane 0 of the only warp) follows p = *(u64*)p with `{{LD}}`: `warm` loads untimed (they fill
// the L1 for the L1 pool), then `iters` iterations of {{STEPS}} unrolled dependent loads between two clock64
// reads. A shared-memory store of p before each clock read makes the thread wait until p has arrived, so
// the span holds exactly iters x {{STEPS}} load latencies plus a constant. times[0] = that span; the chase
// continues from *cursor and leaves it there for the next launch.
extern "C" __global__ void __launch_bounds__(32, 1)
{{NAME}}(u64* __restrict__ cursor, u32 warm, u32 iters, u64* __restrict__ times)
{
    __shared__ __align__(8) u64 simtc_seen;
    if (threadIdx.x != 0) return;
    const u32 seen = simtc_smem(&simtc_seen);
    u64 p = cursor[0];
#pragma unroll 1
    for (u32 i = 0; i < warm; ++i)
        asm volatile("{{LD}} %0, [%0];" : "+l"(p) :: "memory");
    asm volatile("st.volatile.shared.u64 [%0], %1;" :: "r"(seen), "l"(p) : "memory");  // p has arrived
    const u64 t0 = simtc_clock();
#pragma unroll 1
    for (u32 it = 0; it < iters; ++it) {
{{BODY}}
    }
    asm volatile("st.volatile.shared.u64 [%0], %1;" :: "r"(seen), "l"(p) : "memory");  // the last load arrived
    const u64 t1 = simtc_clock();
    times[0] = t1 - t0;
    cursor[0] = p;
}
