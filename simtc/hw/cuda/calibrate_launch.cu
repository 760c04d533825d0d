// simtc calibration: launch overhead and the SM clock (prepended with calibrate_common.cu by simtc.hw.calibrate).

// Three empty kernels (three functions, so that a group of three launches is three different kernels, as a
// FlashMLA call is: metadata, split-KV, combine).
extern "C" __global__ void simtc_cal_empty_a() {}
extern "C" __global__ void simtc_cal_empty_b() {}
extern "C" __global__ void simtc_cal_empty_c() {}

// Thread 0 spins until `ns` nanoseconds of %globaltimer have passed: keeps the stream busy while the host
// queues the launches that are timed after it.
extern "C" __global__ void simtc_cal_spin(u64 ns)
{
    if (threadIdx.x == 0) {
        const u64 g0 = simtc_globaltimer();
        while (simtc_globaltimer() - g0 < ns) {}
    }
}

// The SM clock: thread 0 reads %globaltimer and clock64, spins for `ns` nanoseconds, reads both again.
// out = {g0, c0, g1, c1}; MHz = (c1 - c0) / (g1 - g0) * 1000.
extern "C" __global__ void simtc_cal_clock_probe(u64 ns, u64* __restrict__ out)
{
    if (threadIdx.x == 0) {
        const u64 g0 = simtc_globaltimer();
        const u64 c0 = simtc_clock();
        u64 g1 = g0;
        while (g1 - g0 < ns) g1 = simtc_globaltimer();
        const u64 c1 = simtc_clock();
        out[0] = g0; out[1] = c0; out[2] = g1; out[3] = c1;
    }
}
