"""Each timing mechanism, shown by the cycles it adds: small Programs whose time is worked out by hand from the
labelled parameters, run with the mechanism on and off (``Timing.without``).

The arithmetic in each test is the mechanism's own definition (module docstrings of simtc.engine.*), so a test
fails when a mechanism is dropped, double-counted or off by a cycle. Parameters are read from the table, so the
tests hold for any calibration.
"""

from __future__ import annotations

import math

import pytest

from simtc.engine import Engine
from simtc.engine.parameters import MECHANISMS, Timing
from simtc.isa import (
    BarSync,
    CpAsyncBulkTensor,
    CudaCoreBlock,
    InstrDescriptor,
    LdShared,
    MbarrierArrive,
    MbarrierArriveExpectTx,
    MbarrierTryWait,
    Mma,
    Program,
    Role,
    SmemDescriptor,
    StShared,
)
from simtc.isa.program import Barrier

T = Timing("sm100")


def _run(roles, timing=T, barriers=()):
    p = Program("mech", tuple(roles), barriers=tuple(barriers))
    e = Engine(p, timing=timing)
    e.run()
    assert e.clean, e.hazards
    return e


def _done(e, role="a", warp=0):
    return next(w.finished_at for w in e.warps if w.role == role and w.warp == warp)


def _lane_ii(t, lanes):
    """Cycles a warp-instruction holds a pipe of ``lanes`` per SM (4 sub-partitions: 32 x 4 / lanes)."""
    return 32 * t["sub_partitions"] / t[lanes]


# ---- issue, pipes, scoreboard ------------------------------------------------------------------------
def test_conversions_run_at_the_conversion_pipe_rate():
    n = 64
    blk = CudaCoreBlock("cvt", (("F2FP.BF16.F32.PACK_AB", n),))
    with_rates = _done(_run([Role("a", (0,), (blk,))]))
    without = _done(_run([Role("a", (0,), (blk,))], T.without("pipe_rates")))
    assert with_rates == n * _lane_ii(T, "cvt_lanes")          # 128: 64 lanes per SM, 2 cycles a warp-instruction
    assert without == n                                         # one per cycle: the issue slot
    assert with_rates - without == n * (_lane_ii(T, "cvt_lanes") - 1)
    faster = Timing("sm100").scaled("cvt_lanes", 2)
    assert _done(_run([Role("a", (0,), (blk,))], faster)) == n * _lane_ii(faster, "cvt_lanes")


def test_each_class_on_its_pipe_and_pipes_overlap():
    mix = CudaCoreBlock("mix", (("MUFU.EX2", 32), ("F2FP.BF16.F32.PACK_AB", 32), ("FFMA", 32)))
    e = _run([Role("a", (0,), (mix,))])
    # MUFU and the conversions each need 32 x 8 = 256 cycles on their own pipes; FFMA 32: all overlap
    assert _done(e) == 32 * _lane_ii(T, "mufu_lanes")
    one_pipe = CudaCoreBlock("one", (("MUFU.EX2", 64),))
    assert _done(_run([Role("a", (0,), (one_pipe,))])) == 64 * _lane_ii(T, "mufu_lanes")


def test_warps_share_their_sub_partition_not_the_others():
    n = 64
    blk = CudaCoreBlock("cvt", (("F2FP.BF16.F32.PACK_AB", n),))
    one = n * _lane_ii(T, "cvt_lanes")
    same = _run([Role("a", (0,), (blk,)), Role("b", (4,), (blk,))])      # warps 0 and 4: sub-partition 0
    other = _run([Role("a", (0,), (blk,)), Role("b", (1,), (blk,))])     # sub-partitions 0 and 1
    assert max(_done(same, "a"), _done(same, "b", 4)) == 2 * one
    assert max(_done(other, "a"), _done(other, "b", 1)) == one
    apart = _run([Role("a", (0,), (blk,)), Role("b", (4,), (blk,))], T.without("issue_contention"))
    assert max(_done(apart, "a"), _done(apart, "b", 4)) == one


def test_a_record_of_another_warp_cuts_into_a_block_on_its_sub_partition():
    blk = CudaCoreBlock("cvt", (("F2FP.BF16.F32.PACK_AB", 64),))
    e = _run([Role("a", (0,), (blk,)), Role("b", (4,), (StShared(0, 4, "r"),) * 8)])
    assert _done(e, "b", 4) <= 8 + 1      # its eight stores issue one per cycle while the block's slices run


def test_dependent_chain_costs_its_latency():
    k = 32
    chain = CudaCoreBlock("max", (("FMNMX", k),), chain=(("FMNMX", k),))
    free = CudaCoreBlock("max", (("FMNMX", k),))
    alu = _lane_ii(T, "alu_lanes")
    assert _done(_run([Role("a", (0,), (free,))])) == k * alu                 # throughput: 2 cycles each
    assert _done(_run([Role("a", (0,), (chain,))])) == k * T["alu_latency"]   # latency: 4 cycles each
    assert _done(_run([Role("a", (0,), (chain,))], T.without("latency"))) == k * alu


def test_a_register_is_ready_after_its_producers_latency():
    recs = (LdShared(0, 4, "r"), StShared(128, 4, "r"))
    e = _run([Role("a", (0,), recs)])
    store = next(ev for ev in e.trace if ev.kind == "issue" and ev.index == 1)
    assert store.cycle == 1 + T["smem_ld_latency"]        # the load's one wavefront, then its latency
    e0 = _run([Role("a", (0,), recs)], T.without("latency"))
    assert next(ev for ev in e0.trace if ev.kind == "issue" and ev.index == 1).cycle == 1
    waits = [ev.detail for ev in e.trace if ev.kind == "wait"]
    assert waits == ["registers r"]


# ---- the shared-memory port ----------------------------------------------------------------------------
def _pv():
    a = SmemDescriptor(start=0, lbo=1024, sbo=128, layout_type="INTERLEAVE")
    b = SmemDescriptor(start=65536, lbo=8192, sbo=1024, layout_type="SW128")
    idesc = InstrDescriptor(kind="f16", m=64, n=256, a_format="bf16", b_format="bf16", b_major="MN")
    return Mma(0, a, b, idesc, True, ws=True)


def test_one_shared_memory_bandwidth_for_mmas_and_warps():
    """The tensor pipe's operand stream keeps its pace; the warps' loads take the port cycles it leaves (measured
    on the H200: an SS wgmma chain unchanged beside LDS.128 streams, which got the rest)."""
    n_mma, n_ld = 10, 40
    mma = Role("m", (4,), (_pv(),) * n_mma, threads=1)
    wait = CudaCoreBlock("first", (("FFMA", 16),))       # the loads start at cycle 16, once every MMA is issued
    lds = Role("l", (1,), (wait, *(LdShared(131072, 16, f"x{i}") for i in range(n_ld)),
                          StShared(196608, 16, f"x{n_ld - 1}")))

    def last_load_ready(e):  # the store of the last loaded register issues when it is ready
        return next(ev.cycle for ev in e.trace if ev.role == "l" and ev.kind == "issue" and ev.index == n_ld + 1)
    alone = _run([lds])
    both = _run([mma, lds])
    apart = _run([mma, lds], T.without("shared_port"))
    per_mma = 10240 // T["smem_port_bytes_per_cycle"]      # S 2 KiB + V 8 KiB through the port: 80 cycles = the II
    assert both.unit_busy["tensor_pipe"] == apart.unit_busy["tensor_pipe"] == n_mma * per_mma
    lat = T["smem_ld_latency"]
    assert last_load_ready(alone) == last_load_ready(apart) == 16 + 4 * n_ld + lat   # 160 wavefronts, the latency
    # the MMAs entered at cycle 1 and keep the port until 801: the loads' wavefronts come after them
    assert last_load_ready(both) == 1 + n_mma * per_mma + 4 * n_ld + lat
    assert both.unit_busy["smem_port"] == n_mma * per_mma + 4 * n_ld + 4    # and the final store


def test_tma_bytes_are_written_through_the_port():
    load = CpAsyncBulkTensor(0, 8192, "bar")
    recs = (MbarrierArriveExpectTx("bar", 8192), load, MbarrierTryWait("bar", 0))
    e = _run([Role("a", (0,), recs, threads=1)], barriers=(Barrier("bar", "mbarrier", 1),))
    assert e.unit_busy["smem_port"] == 8192 // T["smem_port_bytes_per_cycle"]


# ---- the memory system ------------------------------------------------------------------------------------
def _gathers(n):
    recs = [MbarrierArriveExpectTx("bar", n * 2048)]
    recs += [CpAsyncBulkTensor(2048 * i, 2048, "bar", mode="gather4", rows=4) for i in range(n)]
    return (*recs, MbarrierTryWait("bar", 0))


def _data_in(e):
    return max(ev.cycle for ev in e.trace if ev.kind == "complete")


def test_gathered_rows_share_the_sms_bandwidth_and_queue():
    n = 16
    bars = (Barrier("bar", "mbarrier", 1),)
    on = _run([Role("a", (0,), _gathers(n), threads=1)], barriers=bars)
    off = _run([Role("a", (0,), _gathers(n), threads=1)], T.without("memory"), barriers=bars)
    share = T["hbm_bytes_per_cycle"] / T["sm_count"]
    link = math.ceil(512 / share)                            # one 512-byte row on the SM's share of HBM
    gap = T["tma_issue_gap"]
    # gather k issues at 1 + k * gap (after the expect_tx at cycle 0)
    # with the memory system: 64 rows queue on the link; the last row's data arrives dram_latency after it crossed
    assert on.unit_busy["memory"] == 4 * n * link
    last_row_crossed = 1 + 4 * n * link
    assert _data_in(on) == math.ceil(max(1 + (n - 1) * gap + 512 / T["request_bytes_per_cycle"], last_row_crossed)
                                     + T["dram_latency"]) + 512 // T["smem_port_bytes_per_cycle"]
    # without it every row takes the unloaded time: the last gather's four rows arrive together and are written
    # one after the other (4 port cycles each)
    assert _data_in(off) == (1 + (n - 1) * gap + math.ceil(T["dram_latency"] + 512 / T["request_bytes_per_cycle"])
                             + 4 * 4)
    assert _data_in(on) > _data_in(off)


def test_latency_grows_with_the_bytes_in_flight():
    def last_latency(n):
        e = _run([Role("a", (0,), _gathers(n), threads=1)], barriers=(Barrier("bar", "mbarrier", 1),))
        return _data_in(e) - (n - 1) * T["tma_issue_gap"]
    lat = [last_latency(n) for n in (1, 8, 32, 64)]
    assert lat == sorted(lat) and lat[-1] > lat[0] + 1000


def test_a_scattered_row_moves_whole_sectors():
    from simtc.engine.memory import MemorySystem

    m = MemorySystem(T)
    assert m.sectors_bytes(64 * 16, rows=64) == 64 * T["sector_bytes"]   # 16 B per row: one 32-B sector each
    assert m.sectors_bytes(2048, rows=1) == 2048
    assert m.sectors_bytes(4 * 100, rows=4) == 4 * 128


def test_l2_resident_tensors_skip_hbm():
    bars = (Barrier("bar", "mbarrier", 1),)
    recs = (MbarrierArriveExpectTx("bar", 8192), CpAsyncBulkTensor(0, 8192, "bar", tensor="q"),
            MbarrierTryWait("bar", 0))
    p = Program("l2", (Role("a", (0,), recs, threads=1),), barriers=bars)
    hbm = Engine(p).run()
    l2 = Engine(p, l2_resident=("q",)).run()
    # issued at cycle 1 (after the expect_tx), streamed over the link at the L2 rate, answered l2_hit_latency after
    # its last byte crossed, then 64 port cycles into shared memory
    assert _data_in(l2) == 1 + math.ceil(8192 / T["l2_bytes_per_cycle"]) + T["l2_hit_latency"] + 64
    assert l2.unit_busy["memory"] == math.ceil(8192 / T["l2_bytes_per_cycle"])          # the SM's link at L2 rate
    share = min(T["hbm_bytes_per_cycle"] / T["sm_count"], T["sm_bytes_per_cycle"])
    assert hbm.unit_busy["memory"] == math.ceil(8192 / share)                           # at its share of HBM


# ---- copy engine, barriers ------------------------------------------------------------------------------------
def test_each_tma_instruction_holds_its_thread():
    n = 8
    bars = (Barrier("bar", "mbarrier", 1),)
    on = _run([Role("a", (0,), _gathers(n)[:-1], threads=1)], barriers=bars)
    off = _run([Role("a", (0,), _gathers(n)[:-1], threads=1)], T.without("copy_engine"), barriers=bars)
    assert _done(on) - _done(off) == n * (T["tma_issue_gap"] - 1)


def test_named_barrier_releases_after_the_last_arrival():
    recs = (BarSync(1, 64),)
    e = _run([Role("a", (0, 1), recs)])          # both arrive at cycle 0 (sub-partitions 0 and 1)
    assert _done(e) == T["named_barrier_release"] + 2 * T["named_barrier_per_warp"]
    e0 = _run([Role("a", (0, 1), recs)], T.without("barriers"))
    assert _done(e0) == 0


def test_an_arrival_waits_for_the_warps_stores_to_be_visible():
    bars = (Barrier("bar", "mbarrier", 32),)
    stores = tuple(StShared(512 * i, 16, "r") for i in range(8))     # 8 x 4 wavefronts
    recs = (*stores, MbarrierArrive("bar"), MbarrierTryWait("bar", 0))
    e = _run([Role("a", (0,), recs)], barriers=bars)
    arrival = next(ev for ev in e.trace if ev.kind == "arrive")
    assert arrival.cycle == 8 * 4 + T["smem_st_visibility"] + T["mbarrier_arrive"]
    assert _done(e) == arrival.cycle + T["mbarrier_try_wait"]


# ---- every mechanism moves the kernel ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def head64_cycles():
    from simtc.kernels.flashmla.replay import steady_cycles_per_block

    base = steady_cycles_per_block("v32", 10, T)
    return base, {m: steady_cycles_per_block("v32", 10, T.without(m)) for m in MECHANISMS}


def test_every_mechanism_moves_flashmla_head64(head64_cycles):
    base, without = head64_cycles
    unmoved = [m for m, c in without.items() if c == base]
    assert not unmoved, f"mechanisms that do not move the kernel: {unmoved}"
    # the dependent latencies cost the kernel cycles; the memory system moves it either way (head64 is bound by the
    # shared-memory port: data that arrives sooner and in bursts can crowd the port)
    assert without["latency"] < base


def test_the_memory_system_bounds_flashmlas_sm90_kernel():
    """FlashMLA's SM90 kernel gathers K with LDG and waits for it: without the memory system's share and queueing
    it is faster (by about 3%: what bounds it is mostly the small L1's window of misses in flight, each held for a
    warp's HBM round trip, and the L1 data pipe, which stay with the l1 mechanism); with LDG's chip bandwidth raised
    to the bulk copies' it is faster too (by about 1%: the share's queue lengthens the round trip the window holds)."""
    from simtc.kernels.flashmla.sm90 import steady_cycles_per_block_sm90

    t = Timing("sm90")
    base = steady_cycles_per_block_sm90("v32", 8, t)
    assert steady_cycles_per_block_sm90("v32", 8, t.without("memory")) < 0.98 * base
    assert steady_cycles_per_block_sm90("v32", 8, t.with_values(ldg_hbm_bytes_per_cycle=t["hbm_bytes_per_cycle"])) \
        < 0.995 * base
    assert steady_cycles_per_block_sm90("v32", 8, t.with_values(ldg_hbm_bytes_per_cycle=t["hbm_bytes_per_cycle"])) \
        > 0.95 * base


def test_the_l1_moves_flashmlas_sm90_kernel():
    """The producer's gathers pay the L1 per line: the kernel is slower with the miss path than without, and slower
    still with a dearer line."""
    from simtc.kernels.flashmla.sm90 import steady_cycles_per_block_sm90

    t = Timing("sm90")
    base = steady_cycles_per_block_sm90("v32", 8, t)
    assert steady_cycles_per_block_sm90("v32", 8, t.without("l1")) < base
    assert steady_cycles_per_block_sm90("v32", 8, t.scaled("l1_line_cycles", 4.0)) > base


# ---- the hazard checker is an observer: it can run on a recorded run ------------------------------------------
def _hazard_programs():
    """The catalogue's seeded bugs."""
    from simtc.kernels.hazards import EXPECTED

    return sorted(n for n, r in EXPECTED.items() if r is not None)


@pytest.mark.parametrize("name", _hazard_programs())
def test_checker_replays_a_recorded_run_with_the_same_hazards(name):
    """A CheckLog records what the engine told its observers; a fresh HazardChecker run over the recording, with no
    engine, reports exactly the live checker's hazards (the allocation-dependent rules get the run's final table
    only when nothing was allocated, so for those the replay is given none and sees the state machines' reports)."""
    from simtc.engine.checker import CheckLog, HazardChecker
    from simtc.kernels.hazards import build

    log = CheckLog()
    eng = Engine(build(name), observers=[log]).run()
    assert eng.hazards, name
    again = HazardChecker.replay(log, eng.warps, eng.index)
    assert [str(h) for h in again.hazards] == [str(h) for h in eng.hazards]


def test_a_global_loads_data_crosses_the_l1_data_pipe():
    """LDG data comes back through the SM's L1 data pipe, the same port as shared memory: a 512-byte warp load of
    one row holds the port 512 / smem_port_bytes_per_cycle cycles after it arrived; one of 32 scattered rows, a
    wavefront per row (32 cycles)."""
    blk = CudaCoreBlock("ldg", (("LDG.E.128", 1),), chain=(("LDG.E.128", 1),))
    base = _done(_run([Role("a", (0,), (blk,))]))
    slow = T.scaled("smem_port_bytes_per_cycle", 0.5)
    assert _done(_run([Role("a", (0,), (blk,))], slow)) - base == 512 // 64 - 512 // 128
    # and the port counts those cycles as busy
    assert _run([Role("a", (0,), (blk,))]).unit_busy["smem_port"] == 512 // T["smem_port_bytes_per_cycle"]
    gather = CudaCoreBlock("ldg", (("LDG.E.128", 1),), gmem="scattered", chain=(("LDG.E.128", 1),))
    assert _run([Role("a", (0,), (gather,))]).unit_busy["smem_port"] == 32   # 32 rows on a line start, 1 bank
