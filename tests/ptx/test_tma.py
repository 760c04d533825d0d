"""TMA through simtc.smem.tma and the executor: boxes against an independent numpy construction.

The expected shared-memory image is built here without simtc: the box by numpy slicing of a padded copy of the
tensor (zero or NaN outside it), then each 16-byte chunk moved as PTX ISA 9.0 §5.5.7's tables draw the swizzles
(128-byte lines: chunk c of line r at c ^ (r mod 8) for 128B, c ^ (r mod 4) on the low two chunk bits for 64B,
c ^ (r mod 2) on the lowest for 32B; 32-byte units u at u ^ (r mod 4) for 128B with 32-byte atomicity).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.ptx.errors import KernelFault
from simtc.smem import SharedMemory
from simtc.smem.tma import TensorMap, TensorMapError, gather4_load, numpy_reader, numpy_writer, tile_load, tile_store

SWIZZLE_SPAN = {"none": 256, "32B": 32, "64B": 64, "128B": 128, "128B_atom_32B": 128}


def ptx_table_swizzle(addr: np.ndarray, mode: str) -> np.ndarray:
    """Byte addresses moved as PTX's swizzle tables show (independent of simtc.smem.swizzle)."""
    line, chunk, byte = addr // 128, (addr // 16) % 8, addr % 16
    if mode == "none":
        return addr
    if mode == "128B_atom_32B":
        unit, half = chunk // 2, chunk % 2
        return line * 128 + ((unit ^ (line % 4)) * 2 + half) * 16 + byte
    flip = {"32B": line % 2, "64B": line % 4, "128B": line % 8}[mode]
    return line * 128 + (chunk ^ flip) * 16 + byte


def expected_box(g: np.ndarray, coords, box, estrides, fill) -> np.ndarray:
    """The box of tensor ``g`` (numpy order: last axis = dimension 0), elements outside it ``fill``."""
    idx = [coords[d] + np.arange(-(-box[d] // estrides[d]) if d else box[d]) * (estrides[d] if d else 1)
           for d in reversed(range(len(coords)))]
    grids = np.meshgrid(*idx, indexing="ij")
    inside = np.ones(grids[0].shape, bool)
    for gi, n in zip(grids, g.shape, strict=True):
        inside &= (gi >= 0) & (gi < n)
    out = np.full(grids[0].shape, fill, g.dtype)
    out[inside] = g[tuple(gi[inside] for gi in grids)]
    return out


def smem_image(box_bytes: np.ndarray, dst: int, mode: str, size: int, row: int | None = None,
               fill: int = 0) -> np.ndarray:
    """Box bytes placed as TMA places them: inner rows of ``row`` bytes, each starting a new swizzle span when
    swizzled and shorter than it, then moved as PTX's tables show."""
    img = np.full(size, fill, np.uint8)
    b = np.arange(box_bytes.size)
    row = row or box_bytes.size
    pitch = max(row, SWIZZLE_SPAN[mode]) if mode != "none" else row
    img[ptx_table_swizzle(dst + (b // row) * pitch + b % row, mode)] = box_bytes
    return img


CASES = [  # (dims dim0 first, box, element strides, coords): inside, straddling each side, fully outside
    ((96, 40), (32, 8), (1, 1), (16, 4)),
    ((96, 40), (32, 8), (1, 1), (-8, -3)),
    ((96, 40), (32, 8), (1, 1), (80, 36)),
    ((96, 40), (32, 8), (1, 1), (200, 5)),
    ((96, 40), (32, 8), (1, 1), (-40, -20)),
    ((40, 12, 6), (16, 4, 3), (1, 2, 3), (28, -3, 2)),
]
NAN32 = np.frombuffer(np.uint32(0x7FF77FF7).tobytes(), np.float32)[0]  # an H200 OOB-NaN (h200_tma_probe.txt)


@pytest.mark.parametrize("narrow", [False, True])
@pytest.mark.parametrize("mode", list(SWIZZLE_SPAN))
@pytest.mark.parametrize("case", CASES)
def test_tile_load_matches_numpy(case, mode, narrow):
    dims, box, es, coords = case
    dt = np.float32
    span = SWIZZLE_SPAN[mode]
    box = (min(box[0], span // 4) // (2 if narrow and span > 16 else 1), *box[1:])
    rng = np.random.default_rng(len(dims) * 100 + coords[0])
    g = rng.standard_normal(dims[::-1]).astype(dt)
    strides = tuple(int(np.prod(dims[:i])) * 4 for i in range(1, len(dims)))
    for fill in ("zero", "nan"):
        tm = TensorMap("f32", 0, dims=dims, strides=strides, box=box, element_strides=es, swizzle=mode, oob_fill=fill)
        smem = SharedMemory(size=64 * 1024)
        dst = 8192
        n = tile_load(tm, coords, numpy_reader(g), smem, dst)
        want = expected_box(g, coords, box, es, NAN32 if fill == "nan" else 0).view(np.uint8).reshape(-1)
        assert n == want.size
        np.testing.assert_array_equal(smem.data, smem_image(want, dst, mode, smem.size, row=4 * box[0]))


def test_a_box_off_a_16_byte_boundary_is_refused():
    tm = TensorMap("f32", 0, dims=(64, 8), strides=(256,), box=(32, 8), swizzle="128B")
    with pytest.raises(TensorMapError, match="the bounding box's address is 16-byte aligned"):
        tile_load(tm, (2, 0), numpy_reader(np.zeros(512, np.float32)), SharedMemory(size=8192), 1024)


def test_gather4_rows_and_their_out_of_bound_rows():
    g = np.arange(50 * 64, dtype=np.uint16).reshape(50, 64)
    tm = TensorMap("u16", 0, dims=(64, 50), strides=(128,), box=(64, 1), swizzle="128B")
    smem = SharedMemory(size=16 * 1024)
    rows = (7, -1, 49, 50)
    n = gather4_load(tm, 0, rows, numpy_reader(g), smem, 1024)
    want = np.stack([g[r] if 0 <= r < 50 else np.zeros(64, np.uint16) for r in rows]).view(np.uint8).reshape(-1)
    assert n == 512
    np.testing.assert_array_equal(smem.data, smem_image(want, 1024, "128B", smem.size))
    with pytest.raises(TensorMapError, match="box size 1 in dimension 1"):
        gather4_load(TensorMap("u16", 0, dims=(64, 50), strides=(128,), box=(64, 2)), 0, rows, numpy_reader(g),
                     smem, 1024)


@pytest.mark.parametrize("reduce", [None, "add", "max"])
def test_tile_store_writes_only_inside_the_tensor(reduce):
    g = np.arange(20 * 48, dtype=np.int32).reshape(20, 48) - 300
    box = np.random.default_rng(1).integers(-1000, 1000, (8, 32)).astype(np.int32)
    tm = TensorMap("s32", 0, dims=(48, 20), strides=(192,), box=(32, 8), swizzle="128B")
    smem = SharedMemory(size=16 * 1024)
    smem.data[ptx_table_swizzle(2048 + np.arange(box.nbytes), "128B")] = box.view(np.uint8).reshape(-1)
    out = g.copy()
    tile_store(tm, (24, 16), smem, 2048, numpy_writer(out), read=numpy_reader(out), reduce=reduce)
    want = g.copy()
    part = box[:4, :24]
    want[16:20, 24:48] = part if reduce is None else (want[16:20, 24:48] + part if reduce == "add"
                                                      else np.maximum(want[16:20, 24:48], part))
    np.testing.assert_array_equal(out, want)


# ---- executed kernels (NVRTC-compiled CUDA with inline PTX) --------------------------------------------------

PRELUDE = r"""
struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };
__device__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ void bar_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
               :: "r"(bar), "r"(parity));
}
"""

LOAD = PRELUDE + r"""
extern "C" __global__ void tma_load(const __grid_constant__ CUtensorMap tmap, int c0, int c1, unsigned* out, int n,
                                    unsigned* base) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar;
  unsigned sbar = smem_u32(&bar), sdst = smem_u32(smem);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sbar));
    asm volatile("fence.mbarrier_init.release.cluster;");
    asm volatile("prefetch.tensormap [%0];" :: "l"(&tmap) : "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sbar), "r"(n * 4));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" :: "r"(sdst), "l"(&tmap), "r"(c0), "r"(c1), "r"(sbar) : "memory");
  }
  __syncthreads();
  bar_wait(sbar, 0);
  if (threadIdx.x == 0) *base = sdst;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(sdst + 4 * i));
    out[i] = v;
  }
}
"""


@pytest.fixture(scope="module")
def load_kernel():
    return xp.RawModule(code=LOAD, options=("-arch=sm_90a",)).get_function("tma_load")


@pytest.mark.parametrize(("coords", "fill"), [((32, 8), "NONE"), ((-24, 36), "NONE"),
                                              ((80, -5), "NAN_REQUEST_ZERO_FMA"), ((100, 50), "NAN_REQUEST_ZERO_FMA")])
def test_compiled_tma_load_into_sw128_smem(load_kernel, coords, fill):
    g = np.random.default_rng(3).standard_normal((40, 100)).astype(np.float32)
    pitch = 416  # 104 floats: a 16-byte multiple
    gp = np.zeros((40, 104), np.float32)
    gp[:, :100] = g
    G = xp.asarray(gp)
    tm = xp.tensor_map("FLOAT32", 2, G, (100, 40), (pitch,), (32, 8), (1, 1), "INTERLEAVE_NONE", "SWIZZLE_128B",
                       "L2_PROMOTION_L2_128B", fill)
    n = 32 * 8
    out = xp.zeros(n, dtype=xp.uint32)
    where = xp.zeros(1, dtype=xp.uint32)
    load_kernel((1,), (64,), (tm, np.int32(coords[0]), np.int32(coords[1]), out, np.int32(n), where),
                shared_mem=2048)
    box = expected_box(g, coords, (32, 8), (1, 1), NAN32 if fill != "NONE" else 0).view(np.uint8).reshape(-1)
    base = int(where.get()[0])  # the swizzle follows the absolute shared address
    img = smem_image(box, base, "128B", base + box.size)[base:]
    np.testing.assert_array_equal(out.get().view(np.uint8), img)
    if coords == (100, 50):  # fully outside: every element is the fill
        assert (out.get() == (0x7FF77FF7 if fill != "NONE" else 0)).all()


def test_a_map_reaching_past_its_allocation_is_a_fault(load_kernel):
    G = xp.zeros((8, 64), dtype=xp.float32)
    tm = xp.tensor_map("FLOAT32", 2, G, (64, 16), (256,), (32, 8), (1, 1))
    out = xp.zeros(256, dtype=xp.uint32)
    with pytest.raises(KernelFault) as e:
        load_kernel((1,), (64,), (tm, np.int32(0), np.int32(4), out, np.int32(256), out), shared_mem=2048)
    assert "out of bounds" in str(e.value) and "2048" in str(e.value), str(e.value)


def test_a_parameter_that_is_no_tensor_map_is_a_fault(load_kernel):
    out = xp.zeros(256, dtype=xp.uint32)
    with pytest.raises(KernelFault, match=r"not a tensor map made by simtc\.cuda\.tensor_map"):
        load_kernel((1,), (64,), (bytes(128), np.int32(0), np.int32(0), out, np.int32(256), out), shared_mem=2048)


MOVES = PRELUDE + r"""
extern "C" __global__ void moves(const __grid_constant__ CUtensorMap rows, const __grid_constant__ CUtensorMap dst,
                                 const int* idx, const unsigned* src, unsigned* copy, unsigned* small) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bar;
  unsigned sbar = smem_u32(&bar), s0 = smem_u32(smem);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(sbar));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(sbar), "r"(512 + 256));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
                 :: "r"(s0), "l"(&rows), "r"(0), "r"(idx[0]), "r"(idx[1]), "r"(idx[2]), "r"(idx[3]), "r"(sbar)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 256, [%2];"
                 :: "r"(s0 + 1024), "l"(src), "r"(sbar) : "memory");
  }
  bar_wait(sbar, 0);
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 256;" :: "l"(copy), "r"(s0 + 1024));
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(&dst), "r"(-16), "r"(0), "r"(s0) : "memory");
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(&dst), "r"(0), "r"(2), "r"(s0) : "memory");
    asm volatile("cp.async.bulk.commit_group;");
    asm volatile("cp.async.bulk.wait_group.read 0;");
  }
  __syncthreads();
  unsigned d = s0 + 2048 + 16 * threadIdx.x;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src + 4 * threadIdx.x),
               "r"(4 * (threadIdx.x % 5)));
  asm volatile("cp.async.commit_group;");
  asm volatile("cp.async.wait_group 0;");
  for (int i = 0; i < 4; ++i) {
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(d + 4 * i));
    small[4 * threadIdx.x + i] = v;
  }
}
"""


def test_gather4_bulk_copies_stores_reductions_and_cp_async():
    k = xp.RawModule(code=MOVES, options=("-arch=sm_100a",)).get_function("moves")
    rng = np.random.default_rng(5)
    table = rng.integers(0, 2**31, (30, 32), dtype=np.uint32)
    T = xp.asarray(table)
    rows = xp.tensor_map("UINT32", 2, T, (32, 30), (128,), (32, 1), (1, 1), 0, "SWIZZLE_128B")
    D = xp.zeros((4, 32), dtype=xp.uint32)
    dst = xp.tensor_map("UINT32", 2, D, (32, 4), (128,), (32, 4), (1, 1), 0, "SWIZZLE_128B")
    idx = xp.asarray(np.array([3, -2, 29, 11], np.int32))
    src = xp.asarray(rng.integers(0, 2**31, 128, dtype=np.uint32))
    copy = xp.zeros(64, dtype=xp.uint32)
    small = xp.zeros(32 * 4, dtype=xp.uint32)
    k((1,), (32,), (rows, dst, idx, src, copy, small), shared_mem=4096)
    np.testing.assert_array_equal(copy.get(), src.get()[:64])
    gathered = np.stack([table[r] if 0 <= r < 30 else np.zeros(32, np.uint32) for r in (3, -2, 29, 11)])
    want = np.zeros((4, 32), np.uint32)
    want[:, :16] = gathered[:, 16:]  # the store at column -16: its first 16 columns fall outside
    want[2:, :] += gathered[:2, :]  # the add at row 2: rows 2 and 3 of the box fall outside
    np.testing.assert_array_equal(D.get(), want)
    s = src.get()
    got = small.get().reshape(32, 4)
    for t in range(32):
        n = t % 5
        np.testing.assert_array_equal(got[t, :n], s[4 * t:4 * t + n], err_msg=f"thread {t}")
        assert (got[t, n:] == 0).all()
    notes = " ".join(xp.last_launch().notes)
    assert "cp.async.bulk.commit_group" in notes and "untimed" in notes


# ---- an H200's TMA (tests/data/h200_tma_probe.txt, made by simtc/hw/cuda/tma_probe.cu) ---------------------

PROBE = Path(__file__).parents[1] / "data" / "h200_tma_probe.txt"
PROBE_CASES = [  # tma_probe.cu's table: CUtensorMapDataType, dims, box, element strides, swizzle enum, NaN fill, coords
    ("f32", (100, 40), (32, 8), (1, 1), 3, True, (-24, 36)), ("f32", (100, 40), (32, 8), (1, 1), 3, False, (80, -5)),
    ("bf16", (100, 40), (32, 8), (1, 1), 3, False, (0, 0)), ("bf16", (100, 40), (16, 8), (1, 1), 2, False, (3, 2)),
    ("f32", (40, 12, 6), (16, 4, 3), (1, 2, 3), 0, False, (30, -3, 2)),
    ("f32", (100, 40), (32, 8), (1, 1), 4, False, (8, 4)), ("bf16", (100, 40), (64, 4), (1, 1), 3, True, (200, 100)),
    ("f16", (100, 40), (64, 4), (1, 1), 3, True, (200, 100)), ("f32", (100, 40), (8, 8), (1, 1), 1, False, (1, 1)),
    ("bf16", (100, 40), (16, 8), (1, 1), 1, False, (3, 2)), ("bf16", (100, 40), (16, 8), (1, 1), 2, False, (0, 2)),
    ("bf16", (100, 40), (32, 8), (1, 1), 2, False, (3, 2)),
]
SWIZZLE_ENUM = ["none", "32B", "64B", "128B", "128B_atom_32B"]


def test_the_model_reproduces_an_h200s_tma_loads():
    text = PROBE.read_text()
    runs = re.findall(r"CASE (.*?)\n(.*?)\nEND", text, re.S)
    assert len(runs) == len(PROBE_CASES)
    i = np.arange(1 << 20, dtype=np.uint64)
    g = ((i * np.uint64(2654435761)) >> np.uint64(13)).astype(np.uint8)
    seen = {"match": 0, "fault": 0}
    for (head, body), (dt, dims, box, es, sw, nan, coords) in zip(runs, PROBE_CASES, strict=True):
        meta = dict(kv.split("=") for kv in head.split())
        words = np.array([int(x, 16) for x in body.split()], np.uint32)
        if meta["enc"] != "0":  # the driver refused the map (128B_atom_32B is not offered on sm_90)
            assert SWIZZLE_ENUM[sw] == "128B_atom_32B"
            continue
        pitch = int(meta["pitch"])
        tm = TensorMap(dt, 0, dims=dims, strides=(pitch, pitch * dims[1])[:len(dims) - 1], box=box,
                       element_strides=es, swizzle=SWIZZLE_ENUM[sw], oob_fill="nan" if nan else "zero")
        smem = SharedMemory(size=32 * 1024)
        smem.data[:] = np.full(smem.size // 4, 0xDEADBEEF, np.uint32).view(np.uint8)
        if meta["err"] != "0":  # the GPU stopped the kernel: the box was not 16-byte aligned
            with pytest.raises(TensorMapError, match="16-byte aligned"):
                tile_load(tm, coords, numpy_reader(g), smem, 2048)
            seen["fault"] += 1
            continue
        base, n = int(meta["base"]), int(meta["n"])
        assert tile_load(tm, coords, numpy_reader(g), smem, base) == 4 * n
        np.testing.assert_array_equal(smem.data[base:base + 4 * (n + 4)].view(np.uint32), words, err_msg=head)
        seen["match"] += 1
    assert seen == {"match": 6, "fault": 5}
