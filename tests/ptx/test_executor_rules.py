"""The executor's rules on hand-written PTX: reconvergence (post-dominators, nested divergence, divergent ret in a
.func, exit inside a .func), membermask rules, elect/match/vote forms, atomics in lane order, barrier counts,
printf formatting, and global-memory bookkeeping."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from simtc.ptx.cfg import reconvergence
from simtc.ptx.errors import KernelFault, LaunchError
from simtc.ptx.executor import launch
from simtc.ptx.memory import Device, GlobalMemory
from simtc.ptx.printf import format_printf

parser = pytest.importorskip("simtc.ptx.parser")

HEAD = ".version 9.0\n.target sm_90a\n.address_size 64\n"


def _run(body: str, threads: int = 32, nout: int = 64, dtype=np.uint32, extra: str = "", regs: str = ""):
    """Run kernel ``k(out)`` whose body is ``body`` (``%rd1`` = out as a global address, ``%r0`` = %tid.x)."""
    text = HEAD + extra + (
        ".visible .entry k(.param .u64 out)\n{\n"
        "  .reg .pred %p<8>;\n  .reg .b32 %r<32>;\n  .reg .b64 %rd<8>;\n  .reg .b16 %h<8>;\n" + regs +
        "  ld.param.u64 %rd1, [out];\n  cvta.to.global.u64 %rd1, %rd1;\n  mov.u32 %r0, %tid.x;\n"
        "  mul.wide.u32 %rd2, %r0, 4;\n  add.s64 %rd3, %rd1, %rd2;\n" + body + "\n  ret;\n}\n")
    m = parser.parse(text)
    dev = Device()
    p = dev.memory.alloc(nout * np.dtype(dtype).itemsize)
    r = launch(m, "k", grid=(1, 1, 1), block=(threads, 1, 1), args=[p], device=dev)
    return dev.memory.view(p, nout * np.dtype(dtype).itemsize).view(dtype).copy(), r


def test_reconvergence_points_of_nested_ifs_and_a_loop():
    m = parser.parse(HEAD + """.visible .entry k()
{
  .reg .pred %p<4>;
  .reg .b32 %r<4>;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra A;
  setp.lt.u32 %p2, %r1, 24;
  @%p2 bra B;
  add.u32 %r2, %r1, 1;
B:
  add.u32 %r2, %r1, 2;
  bra.uni C;
A:
  add.u32 %r2, %r1, 3;
C:
  add.u32 %r1, %r1, 1;
  setp.lt.u32 %p3, %r1, 40;
  @%p3 bra C;
  ret;
}
""")
    fn = m.functions["k"]
    rc = reconvergence(fn.body, fn.labels)
    c = fn.labels["C"]
    assert rc == {2: c, 4: fn.labels["B"], c + 2: c + 3}  # outer if -> C, inner if -> B, loop -> after it


def test_nested_divergence_reconverges_before_a_full_warp_shuffle():
    out, r = _run("""
  and.b32 %r1, %r0, 3;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra L0;
  setp.eq.u32 %p2, %r1, 1;
  @%p2 bra L1;
  mul.lo.u32 %r2, %r0, 100;
  bra.uni J;
L1:
  mul.lo.u32 %r2, %r0, 10;
  bra.uni J;
L0:
  mov.u32 %r2, %r0;
J:
  shfl.sync.idx.b32 %r3|%p3, %r2, 5, 31, -1;
  add.u32 %r4, %r2, %r3;
  st.global.u32 [%rd3], %r4;
""")
    t = np.arange(32)
    v = np.where(t % 4 == 0, t, np.where(t % 4 == 1, 10 * t, 100 * t))
    assert out[:32].tolist() == (v + v[5]).tolist()
    assert r.warp_instructions["shfl"] == 1  # executed once, by the whole reconverged warp


def test_divergent_ret_and_exit_inside_a_func():
    extra = """.func (.param .b32 res) f(.param .b32 x)
{
  .reg .pred %q<3>;
  .reg .b32 %s<4>;
  ld.param.b32 %s1, [x];
  setp.gt.u32 %q1, %s1, 20;
  @%q1 bra BIG;
  st.param.b32 [res], %s1;
  setp.lt.u32 %q2, %s1, 8;
  @%q2 ret;
  add.u32 %s2, %s1, 1000;
  st.param.b32 [res], %s2;
  ret;
BIG:
  exit;
}
"""
    out, _ = _run("""
  st.global.u32 [%rd3], 7;
  {
  .param .b32 a0;
  st.param.b32 [a0], %r0;
  .param .b32 r0;
  call (r0), f, (a0);
  ld.param.b32 %r5, [r0];
  }
  st.global.u32 [%rd3], %r5;
""", extra=extra)
    t = np.arange(32)
    assert out[:32].tolist() == np.where(t > 20, 7, np.where(t < 8, t, t + 1000)).tolist()


def test_membermask_naming_a_diverged_lane_is_reported():
    with pytest.raises(KernelFault, match=r"membermask 0xffffffff names lanes 16,.*,31.*diverged") as ei:
        _run("""
  setp.lt.u32 %p1, %r0, 16;
  @!%p1 bra END;
  shfl.sync.bfly.b32 %r2, %r0, 1, 31, -1;
END:
  st.global.u32 [%rd3], %r0;
""")
    assert ei.value.rule.startswith("all threads named in membermask") and ei.value.line > 0
    with pytest.raises(KernelFault, match="are not in membermask"):
        _run("vote.sync.any.pred %p1, 1, 0x0000ffff;")


def test_elect_match_all_vote_uni_and_activemask():
    out, _ = _run("""
  setp.ge.u32 %p1, %r0, 4;
  @!%p1 bra END;
  elect.sync %r2|%p2, 0xfffffff0;
  selp.u32 %r3, 1, 0, %p2;
  shr.u32 %r4, %r0, 4;
  match.all.sync.b32 %r5|%p3, %r4, 0xfffffff0;
  selp.u32 %r6, 1, 0, %p3;
  setp.lt.u32 %p4, %r0, 100;
  vote.sync.uni.pred %p5, %p4, 0xfffffff0;
  selp.u32 %r7, 1, 0, %p5;
  activemask.b32 %r8;
  mad.lo.u32 %r9, %r2, 1000, %r3;
  mad.lo.u32 %r9, %r6, 100, %r9;
  mad.lo.u32 %r9, %r7, 10, %r9;
  st.global.u32 [%rd3], %r9;
  add.s64 %rd4, %rd3, 128;
  st.global.u32 [%rd4], %r8;
END:
""")
    t = np.arange(4, 32)
    assert out[4:32].tolist() == (4000 + (t == 4) + 0 + 10).tolist()  # leader lane 4; not all r4 equal; uni
    assert (out[36:64] == 0xFFFFFFF0).all()


def test_atomics_on_one_address_go_in_lane_order():
    extra = ".shared .align 4 .b32 cnt[2];\n"
    out, _ = _run("""
  setp.eq.u32 %p1, %r0, 0;
  @%p1 st.shared.u32 [cnt], 5;
  @%p1 st.shared.u32 [cnt+4], 0;
  bar.sync 0;
  atom.shared.inc.u32 %r2, [cnt], 9;
  atom.shared.cas.b32 %r3, [cnt+4], %r0, 99;
  st.global.u32 [%rd3], %r2;
  add.s64 %rd4, %rd3, 128;
  st.global.u32 [%rd4], %r3;
""", extra=extra)
    # inc wraps to 0 after 9: lane order 5,6,7,8,9,0,1,...
    assert out[:32].tolist() == [(5 + i) % 10 for i in range(32)]
    # cas: lane 0 finds 0 == 0 and stores 99; every later lane sees 99
    assert out[32:64].tolist() == [0] + [99] * 31


def test_f16x2_atomic_add_and_f32_flushes_subnormals():
    extra = ".global .align 4 .b32 acc[2];\n"
    out, _ = _run("""
  mov.u64 %rd5, acc;
  mov.b32 %r2, 0x3C003800;
  atom.global.add.noftz.f16x2 %r3, [%rd5], %r2;
  mov.b32 %r4, 0x00000001;
  red.global.add.f32 [%rd5+4], %r4;
  bar.sync 0;
  ld.global.u32 %r5, [%rd5];
  ld.global.u32 %r6, [%rd5+4];
  st.global.u32 [%rd1], %r5;
  st.global.u32 [%rd1+4], %r6;
""", threads=32, nout=2, extra=extra)
    lo, hi = np.array([out[0] & 0xFFFF, out[0] >> 16], np.uint16).view(np.float16)
    assert (lo, hi) == (16.0, 32.0)  # 32 lanes of (0.5, 1.0)
    assert out[1] == 0  # a subnormal f32 added by atom/red.add.f32 is flushed to zero


def test_barrier_counts_must_agree():
    with pytest.raises(KernelFault, match="expects 64 threads at barrier 3, other warps 96"):
        _run("""
  setp.lt.u32 %p1, %r0, 32;
  @%p1 bra A;
  bar.sync 3, 64;
  bra.uni E;
A:
  bar.sync 3, 96;
E:
""", threads=96)


def test_printf_specifiers():
    args = struct.pack("<ixxxxqIxxxxd", -5, 2**40, 0xBEEF, -0.000123) + struct.pack("<QQi", 0, 0x10, 65)
    text, n = format_printf(b"%+04d|%lld|%#X|%.3e|%s|%p|%c|%%", args, lambda a: b"")
    assert text == "-005|1099511627776|0XBEEF|-1.230e-04|(null)|0x10|A|%" and n == 7


def test_global_memory_faults_and_bookkeeping():
    g = GlobalMemory()
    a = g.alloc(100, name="a")
    b = g.alloc(8, name="b")
    assert g.allocation_of(a + 99).name == "a" and g.allocation_of(a + 100) is None
    assert g.nearest(b - 4)[1] == f"; it is 4 bytes before the nearest allocation 'b' at {b:#x} of size 8 bytes"
    with pytest.raises(KernelFault, match="misaligned") as ei:
        g.store(np.array([a + 2], np.uint64), np.zeros((1, 4), np.uint8), 4, np.array([True]))
    assert ei.value.lane == 0 and ei.value.allocation.startswith("'a'")
    g.free(b)
    with pytest.raises(LaunchError, match="not the start of an allocation"):
        g.free(b)
    with pytest.raises(LaunchError, match="not inside one allocation"):
        g.view(a + 96, 8)
