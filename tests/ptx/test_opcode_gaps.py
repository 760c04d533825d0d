"""Opcodes the executor gained: cvt.pack, set on f16/bf16 (scalar and packed), brx.idx through a .branchtargets
list, indirect calls through a register with a .callprototype, .b128 loads/stores/moves, and the atomics nvcc 13
emits for sm_90 (atom.cas.b16, atom.add.noftz.bf16x2, atom.add.v2/.v4.f32, atom.exch.b128).

References are independent of simtc: Python integers, numpy float16 comparisons, sequential float additions
rounded by numpy, and the kernels' own semantics written out in numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simtc.errors import HardwareUnavailable
from simtc.ptx import alu, parser
from simtc.ptx.errors import KernelFault, PtxUnsupported
from simtc.ptx.executor import launch
from simtc.ptx.ir import Instruction, Reg
from simtc.ptx.memory import Device

I32 = st.integers(-(2**31), 2**31 - 1)


def _op(name: str, nsrc: int):
    return alu.compile(Instruction(name, (Reg("%d"), *(Reg(f"%s{i}") for i in range(nsrc)))))


def _sat(x: int, kind: str, n: int) -> int:
    lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if kind == "s" else (0, (1 << n) - 1)
    return min(max(x, lo), hi) & ((1 << n) - 1)


# ---- cvt.pack (PTX ISA 9.0 §9.7.9.22) ---------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(I32, I32, st.integers(0, 2**32 - 1)), min_size=1, max_size=32),
       st.sampled_from(["u16", "s16", "u8", "s8", "u4", "s4", "u2", "s2"]))
def test_cvt_pack_saturates_and_packs(vals, kt):
    n = int(kt[1:])
    a = np.array([v[0] for v in vals], np.int64).astype(np.int32).view(np.uint32)
    b = np.array([v[1] for v in vals], np.int64).astype(np.int32).view(np.uint32)
    c = np.array([v[2] for v in vals], np.uint64).astype(np.uint32)
    if n == 16:
        op = _op(f"cvt.pack.sat.{kt}.s32", 2)
        (d,) = op.fn(a, b)
    else:
        op = _op(f"cvt.pack.sat.{kt}.s32.b32", 3)
        (d,) = op.fn(a, b, c)
    for k, (x, y, z) in enumerate(vals):
        want = _sat(y, kt[0], n) | (_sat(x, kt[0], n) << n)
        if n != 16:
            want |= (z << (2 * n)) & 0xFFFFFFFF
        assert int(d[k]) == want & 0xFFFFFFFF


def test_cvt_pack_refuses_other_forms():
    for name, nsrc in (("cvt.pack.sat.u8.s32", 2), ("cvt.pack.sat.u16.s32.b32", 3), ("cvt.pack.u8.s32.b32", 3),
                       ("cvt.pack.sat.u8.u32.b32", 3), ("cvt.pack.sat.u32.s32", 2)):
        with pytest.raises(PtxUnsupported):
            _op(name, nsrc)


# ---- set with f16/bf16 sources or destinations (PTX ISA 9.0 §9.7.7.1, §9.7.6.1) ---------------------------------

_HALF_VALUES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 65504.0, -65504.0, 6e-8, np.inf, -np.inf, np.nan, 2.0, 1.5],
                        np.float16)


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def _ref_cmp(cmp: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    un = np.isnan(x) | np.isnan(y)
    if cmp == "num":
        return ~un
    if cmp == "nan":
        return un
    base = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}[cmp[:2]](x, y)
    return (base | un) if cmp.endswith("u") else (base & ~un)


@pytest.mark.parametrize("cmp", ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu",
                                 "num", "nan"])
@pytest.mark.parametrize(("st_", "dt_"), [("f16x2", "f16x2"), ("f16x2", "u32"), ("bf16x2", "bf16x2"),
                                          ("bf16x2", "s32")])
def test_set_on_packed_halves(cmp, st_, dt_):
    x = np.repeat(_HALF_VALUES, _HALF_VALUES.size)
    y = np.tile(_HALF_VALUES, _HALF_VALUES.size)
    if st_ == "f16x2":
        xb, yb = x.view(np.uint16), y.view(np.uint16)
    else:  # the same values as bf16 (each is exactly representable there, 6e-8 rounding aside)
        xb, yb = _bf16_bits(x.astype(np.float32)), _bf16_bits(y.astype(np.float32))
        x = (xb.astype(np.uint32) << np.uint32(16)).view(np.float32)
        y = (yb.astype(np.uint32) << np.uint32(16)).view(np.float32)
    # element 0 (low half) compares x with y, element 1 y with x
    a = xb.astype(np.uint32) | (yb.astype(np.uint32) << np.uint32(16))
    b = yb.astype(np.uint32) | (xb.astype(np.uint32) << np.uint32(16))
    (d,) = _op(f"set.{cmp}.{dt_}.{st_}", 2).fn(a, b)
    one = {"f16x2": 0x3C00, "bf16x2": 0x3F80}.get(dt_, 0xFFFF)
    want = (np.where(_ref_cmp(cmp, x, y), one, 0).astype(np.uint32)
            | (np.where(_ref_cmp(cmp, y, x), one, 0).astype(np.uint32) << np.uint32(16)))
    assert np.array_equal(d, want)


def test_set_with_half_destinations_and_a_boolean_operator():
    x = np.array([1.0, 2.0, np.nan, -1.0], np.float32)
    y = np.array([2.0, 1.0, 0.0, -1.0], np.float32)
    p = np.array([True, True, False, False])
    (d,) = _op("set.lt.or.f16.f32", 3).fn(x.view(np.uint32), y.view(np.uint32), p)
    assert d.dtype == np.uint16 and list(d) == [0x3C00, 0x3C00, 0, 0]
    (d,) = _op("set.geu.bf16.f32", 2).fn(x.view(np.uint32), y.view(np.uint32))
    assert list(d) == [0, 0x3F80, 0x3F80, 0x3F80]
    (d,) = _op("set.le.u16.f16", 2).fn(x.astype(np.float16).view(np.uint16), y.astype(np.float16).view(np.uint16))
    assert list(d) == [0xFFFF, 0, 0, 0xFFFF]
    with pytest.raises(PtxUnsupported):
        _op("set.lt.bf16x2.f16x2", 2)


# ---- brx.idx, indirect calls, .b128 (a hand-written kernel) --------------------------------------------------------

GAPS_PTX = r"""
.version 8.5
.target sm_90a
.address_size 64

.func (.param .b32 r) f_add(.param .b32 x, .param .b32 y)
{
  .reg .b32 %a<4>;
  ld.param.b32 %a1, [x];
  ld.param.b32 %a2, [y];
  add.s32 %a3, %a1, %a2;
  st.param.b32 [r], %a3;
  ret;
}

.func (.param .b32 r) f_mul(.param .b32 x, .param .b32 y)
{
  .reg .b32 %a<4>;
  ld.param.b32 %a1, [x];
  ld.param.b32 %a2, [y];
  mul.lo.s32 %a3, %a1, %a2;
  st.param.b32 [r], %a3;
  ret;
}

.visible .entry gaps(.param .u64 out, .param .u64 inp)
{
  .reg .pred %p<3>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<12>;
  .reg .b128 %q<3>;
  .shared .align 16 .b8 sh[512];
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [inp];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd2, %rd3;
  add.s64 %rd5, %rd1, %rd3;
  // .b128 through global and shared, split and joined
  ld.global.b128 %q1, [%rd4];
  mov.u32 %r2, sh;
  mul.lo.u32 %r3, %r1, 16;
  add.u32 %r4, %r2, %r3;
  st.shared.b128 [%r4], %q1;
  bar.sync 0;
  xor.b32 %r5, %r1, 1;
  mul.lo.u32 %r6, %r5, 16;
  add.u32 %r7, %r2, %r6;
  ld.shared.b128 %q2, [%r7];
  mov.b128 {%rd6, %rd7}, %q2;
  add.s64 %rd7, %rd7, 1;
  mov.b128 %q2, {%rd7, %rd6};
  st.global.b128 [%rd5], %q2;
  // brx.idx: lane i jumps to label i % 3
  rem.u32 %r8, %r1, 3;
  ts: .branchtargets L0, L1, L2;
  brx.idx %r8, ts;
L0:
  mov.u32 %r9, 100;
  bra JOIN;
L1:
  mov.u32 %r9, 200;
  bra JOIN;
L2:
  mov.u32 %r9, 300;
JOIN:
  add.u32 %r9, %r9, %r1;
  // indirect call: even lanes f_add, odd lanes f_mul
  and.b32 %r10, %r1, 1;
  setp.eq.u32 %p1, %r10, 0;
  mov.u64 %rd8, f_add;
  mov.u64 %rd9, f_mul;
  selp.b64 %rd10, %rd8, %rd9, %p1;
  {
  .reg .b32 %t;
  .param .b32 pa;
  .param .b32 pb;
  .param .b32 pr;
  st.param.b32 [pa], %r9;
  st.param.b32 [pb], 3;
  proto: .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _);
  call (pr), %rd10, (pa, pb), proto;
  ld.param.b32 %t, [pr];
  mov.u32 %r11, %t;
  }
  mul.wide.u32 %rd11, %r1, 4;
  add.s64 %rd11, %rd11, %rd1;
  st.global.u32 [%rd11+512], %r11;
  ret;
}
"""


def _put(dev: Device, a: np.ndarray) -> int:
    a = np.ascontiguousarray(a)
    p = dev.memory.alloc(a.nbytes)
    dev.memory.view(p, a.nbytes)[:] = a.reshape(-1).view(np.uint8)
    return p


@pytest.mark.parametrize("block", [32, 20, 7])
def test_brx_idx_indirect_calls_and_b128_moves(block):
    """Lane i: its 16 bytes through global and shared memory as one .b128 (read back from lane i^1's slot, split
    with mov.b128, the halves swapped and the high one incremented, joined again); brx.idx to label i % 3 of a
    .branchtargets list (the warp diverges three ways and reconverges at JOIN); then an indirect call through a
    .callprototype, f_add for even lanes and f_mul for odd ones (two callees in one warp)."""
    m = parser.parse(GAPS_PTX, name="gaps.ptx")
    dev = Device()
    n = block
    pairs = n + (n & 1)
    inp = (np.arange(2 * pairs, dtype=np.uint64) * np.uint64(0x100000001)) ^ np.uint64(0xF0F0_0000_0000_F0F0)
    pi = _put(dev, inp)
    po = _put(dev, np.zeros(1024, np.uint8))
    r = launch(m, "gaps", grid=(1, 1, 1), block=(n, 1, 1), args=[po, pi], device=dev)
    out = dev.memory.view(po, 1024).copy()
    # the warp reconverges: each of the three paths once, the code after JOIN once; one call per callee
    def line(start):
        return next(ins.line for ins in m.functions["gaps"].body if ins.text.startswith(start))

    assert r.by_line[line("brx.idx")] == 1 and r.by_line[line("add.u32 %r9, %r9, %r1")] == 1
    assert r.by_line[line("call")] == (2 if n > 1 else 1)
    i = np.arange(n)
    src = inp.reshape(-1, 2)
    got = out[:512].view(np.uint64).reshape(32, 2)[:n]
    partner = i ^ 1
    ok = partner < n  # lane n-1's partner past the block (n odd) reads a slot no lane wrote: not checked
    want = np.stack([src[partner, 1] + np.uint64(1), src[partner, 0]], axis=1)
    assert np.array_equal(got[ok], want[ok])
    r9 = np.array([100, 200, 300])[i % 3] + i
    assert np.array_equal(out[512:512 + 4 * n].view(np.uint32), np.where(i % 2 == 0, r9 + 3, r9 * 3))


def test_brx_idx_past_its_list_is_a_fault_naming_the_thread():
    bad = GAPS_PTX.replace("rem.u32 %r8, %r1, 3;", "add.u32 %r8, %r1, 0;")
    m = parser.parse(bad, name="bad.ptx")
    dev = Device()
    pi = _put(dev, np.zeros(64, np.uint64))
    po = _put(dev, np.zeros(1024, np.uint8))
    with pytest.raises(KernelFault, match=r"brx.idx by thread \(3,0,0\) in block \(0,0,0\): index 3 is past the "
                                          r"3 labels of ts"):
        launch(m, "gaps", grid=(1, 1, 1), block=(32, 1, 1), args=[po, pi], device=dev)


def test_indirect_call_to_no_function_is_a_fault():
    bad = GAPS_PTX.replace("selp.b64 %rd10, %rd8, %rd9, %p1;", "selp.b64 %rd10, %rd8, %rd4, %p1;")
    m = parser.parse(bad, name="bad.ptx")
    dev = Device()
    pi = _put(dev, np.zeros(64, np.uint64))
    po = _put(dev, np.zeros(1024, np.uint8))
    with pytest.raises(KernelFault, match=r"indirect call through %rd10 by thread \(1,0,0\) in block \(0,0,0\): "
                                          r"address 0x[0-9a-f]+ is no function that proto allows"):
        launch(m, "gaps", grid=(1, 1, 1), block=(32, 1, 1), args=[po, pi], device=dev)


# ---- what nvcc 13 emits for sm_90: 16-bit CAS, bf16x2 and vector float atomics, 128-bit exchange, __int128 ----------

ATOMICS_CU = r"""
#include <cuda_bf16.h>
struct alignas(16) P { unsigned long long a, b; };
extern "C" __global__ void k(unsigned short *s, __nv_bfloat162 *bb, float2 *f2, float4 *f4, P *r, __int128 *w,
                             float *sh_out) {
  __shared__ float acc[4];
  int i = threadIdx.x;
  if (i < 4) acc[i] = 1e-40f;                 // a subnormal: shared-memory atom.add.f32 keeps it
  __syncthreads();
  atomicCAS(s + (i % 8), (unsigned short)(i % 8), (unsigned short)(100 + i));
  atomicAdd(bb + (i % 4), bb[4 + i]);
  atomicAdd(f2 + i, make_float2(1.f, 2.f));
  atomicAdd(f4 + (i % 2), make_float4(1.f, 2.f, 3.f, 4.f + i));
  atomicAdd(acc + (i % 4), 1e-41f);
  P v; v.a = i; v.b = 1000 + i;
  P old = atomicExch(r + i, v);
  r[32 + i] = old;
  w[i] = w[i] * (__int128)3 + (__int128)1;
  __syncthreads();
  if (i < 4) sh_out[i] = acc[i];
}
"""


def _bf16_add(x: int, y: int) -> int:
    """bf16 + bf16 rounded to nearest even, through exact float64 (independent of simtc)."""
    s = float(np.uint32(x << 16).view(np.float32)) + float(np.uint32(y << 16).view(np.float32))
    b = int(np.float64(s).view(np.uint64))
    keep = b >> 45  # float64's top 19 bits: sign, exponent, 7 fraction bits
    rem = b & ((1 << 45) - 1)
    keep += rem > (1 << 44) or (rem == (1 << 44) and keep & 1)
    return int(np.float32(np.uint64(keep << 45).view(np.float64)).view(np.uint32)) >> 16


def test_atomics_and_int128_as_nvcc_emits_them():
    compile_mod = pytest.importorskip("simtc.hw.compile")
    try:
        ptx = compile_mod.compile_cuda(ATOMICS_CU, arch="sm_90a", output="ptx",
                                       options=("-I/usr/local/cuda/include", "--device-int128")).decode()
    except (HardwareUnavailable, compile_mod.CompileError) as err:
        pytest.skip(f"no CUDA compiler with cuda_bf16.h here: {err}")
    for form in ("atom.global.cas.b16", "atom.add.noftz.bf16x2", "atom.global.add.v2.f32", "atom.global.add.v4.f32",
                 "atom.global.exch.b128", "mov.b128", "ld.global.v2.u64"):
        assert form in ptx, form
    m = parser.parse(ptx, name="atomics.ptx")
    dev = Device()
    rng = np.random.default_rng(5)
    s = np.arange(8, dtype=np.uint16)
    bb = _bf16_bits(rng.standard_normal(72).astype(np.float32) * 4)
    r = rng.integers(0, 2**63, (64, 2), dtype=np.uint64)
    w = rng.integers(0, 2**62, (32, 2), dtype=np.uint64)
    bufs = [s, bb, np.zeros((32, 2), np.float32), np.zeros((2, 4), np.float32), r, w, np.zeros(4, np.float32)]
    ptrs = [_put(dev, b) for b in bufs]
    launch(m, "k", grid=(1, 1, 1), block=(32, 1, 1), args=ptrs, device=dev)
    got = [dev.memory.view(p, b.nbytes).view(b.dtype).reshape(b.shape).copy() for p, b in zip(ptrs, bufs, strict=True)]
    # atomicCAS on 16 bits: the first lane of each slot (its old value equals i % 8) swaps in 100 + i
    assert np.array_equal(got[0], 100 + np.arange(8))
    # bf16x2 adds in lane order (simtc's order), each half rounded to nearest even
    want = bb.copy()
    for i in range(32):
        j = i % 4
        for h in range(2):
            want[2 * j + h] = _bf16_add(int(want[2 * j + h]), int(bb[8 + 2 * i + h]))
    assert np.array_equal(got[1][:8], want[:8])
    assert np.array_equal(got[2], np.tile([1.0, 2.0], (32, 1)).astype(np.float32))
    f4 = np.zeros((2, 4), np.float32)
    for i in range(32):
        f4[i % 2] += np.array([1, 2, 3, 4 + i], np.float32)
    assert np.array_equal(got[3], f4)
    # 128-bit exchange: the new pair in, the old pair returned; __int128 arithmetic through v2.u64
    assert np.array_equal(got[4][:32], np.stack([np.arange(32), 1000 + np.arange(32)], axis=1).astype(np.uint64))
    assert np.array_equal(got[4][32:], r[:32])
    wi = [(int(lo) | (int(hi) << 64)) * 3 + 1 for lo, hi in w]
    assert [int(lo) | (int(hi) << 64) for lo, hi in got[5]] == [x & (2**128 - 1) for x in wi]
    # shared-memory atom.add.f32 keeps subnormals (global memory's flushes them): 1e-40 + 8 x 1e-41, rounded
    # after each add
    acc = np.float32(1e-40)
    for _ in range(8):
        acc = np.float32(acc + np.float32(1e-41))
    assert np.array_equal(got[6], np.full(4, acc, np.float32)) and acc > np.float32(1e-40)


RED_PTX = r"""
.version 8.5
.target sm_90a
.address_size 64

.visible .entry r(.param .u64 p, .param .u64 q, .param .u64 o)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<12>;
  .reg .b128 %q<4>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [q];
  ld.param.u64 %rd9, [o];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd7, %r1, 4;
  add.s64 %rd8, %rd2, %rd7;
  ld.global.b32 %r2, [%rd8];
  red.global.add.noftz.bf16x2 [%rd1], %r2;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd1, 16;
  add.s64 %rd4, %rd4, %rd3;
  ld.global.b128 %q1, [%rd4];
  mov.b128 {%rd5, %rd6}, %q1;
  mov.b128 %q2, {%rd6, %rd5};
  and.b32 %r3, %r1, 1;
  setp.eq.u32 %p1, %r3, 0;
  @%p1 atom.global.cas.b128 %q3, [%rd4], %q1, %q2;
  @!%p1 atom.global.cas.b128 %q3, [%rd4], %q2, %q1;
  add.s64 %rd10, %rd9, %rd3;
  st.global.b128 [%rd10], %q3;
  ret;
}
"""


def test_red_bf16x2_on_one_address_and_cas_b128():
    """32 lanes' red.global.add.noftz.bf16x2 on one word (in lane order, each half rounded to nearest even), and
    atom.cas.b128: even lanes compare with the value in memory (the swap happens), odd lanes with its halves
    swapped (no swap); every lane gets the old 16 bytes."""
    m = parser.parse(RED_PTX, name="red.ptx")
    dev = Device()
    rng = np.random.default_rng(9)
    vals = _bf16_bits(rng.standard_normal(64).astype(np.float32))
    start = _bf16_bits(np.array([1.5, -2.0], np.float32))
    words = rng.integers(0, 2**63, (32, 2), dtype=np.uint64)
    mem = np.concatenate([start.view(np.uint8), np.zeros(12, np.uint8), words.view(np.uint8).reshape(-1)])
    pp = _put(dev, mem)
    pq = _put(dev, vals)
    po = _put(dev, np.zeros((32, 2), np.uint64))
    launch(m, "r", grid=(1, 1, 1), block=(32, 1, 1), args=[pp, pq, po], device=dev)
    got = dev.memory.view(pp, mem.nbytes).copy()
    acc = [int(start[0]), int(start[1])]
    for i in range(32):
        for h in range(2):
            acc[h] = _bf16_add(acc[h], int(vals[2 * i + h]))
    assert list(got[:4].view(np.uint16)) == acc
    after = got[16:].view(np.uint64).reshape(32, 2)
    even = np.arange(32) % 2 == 0
    assert np.array_equal(after[even], words[even][:, ::-1]) and np.array_equal(after[~even], words[~even])
    assert np.array_equal(dev.memory.view(po, 512).view(np.uint64).reshape(32, 2), words)


def test_vector_atomics_outside_their_forms_are_refused():
    for body in ("atom.shared.add.v2.f32 {%f1, %f2}, [%r1], {%f3, %f4};",
                 "atom.global.add.v2.f64 {%fd1, %fd2}, [%rd1], {%fd3, %fd4};",
                 "atom.global.add.b128 %q1, [%rd1], %q2;", "atom.global.add.u16 %rs1, [%rd1], %rs2;"):
        ptx = f"""
.version 8.5
.target sm_90a
.address_size 64
.visible .entry v(.param .u64 p)
{{
  .reg .b16 %rs<3>; .reg .b32 %r<2>; .reg .f32 %f<5>; .reg .f64 %fd<5>; .reg .b64 %rd<2>; .reg .b128 %q<3>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 0;
  {body}
  ret;
}}
"""
        m = parser.parse(ptx, name="v.ptx")
        dev = Device()
        with pytest.raises(PtxUnsupported, match="rule: atomic"):
            launch(m, "v", grid=(1, 1, 1), block=(32, 1, 1), args=[_put(dev, np.zeros(64, np.uint8))], device=dev)
