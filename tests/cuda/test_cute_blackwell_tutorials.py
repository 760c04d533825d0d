"""CUTLASS's CuTe Blackwell tutorials 02-05, unmodified: 02 (TMA loads) launched and checked bit for bit, 03-05
(clusters, TMA multicast, 2-CTA MMA) refused at launch with the feature and its PTX line, by the API and by
``simtc run``.

The tutorials come from ``SIMTC_CUTLASS_DIR`` (a CUTLASS checkout, 7107b05: ``include/``, ``tools/util/include/``
and ``examples/cute/tutorial/blackwell/``); without it, or without ``nvcc``, these tests skip saying why. Each
``.cu`` is compiled as ``simtc run FILE.cu --backend nvcc --arch sm_100a`` compiles it (:func:`simtc.cli.run.
load_kernel`, cached by source and options under ``$SIMTC_CACHE``), with the options of a plain nvcc build of the
tutorial (``-std=c++17 --expt-relaxed-constexpr``, nvcc's default ``-ftz=false``). The first compile of each takes
about a minute; the tests are slow.

The kernels' parameters are the bytes the tutorials' host code passes (``gemm_host_f16xf16_f32_f32_tnt``), built
with :class:`simtc.cuda.cute_params.StructArg` from the PTX declarations: a TMA tensor ``mA_tma`` is its two
dynamic extents (``Layout<Shape<int,int>, Stride<E<1>,E<0>>>``: the kernel's ``ld.param.u32 [p]``, ``[p+4]``; the
iterator ``ArithmeticTuple<_0,_0>`` is empty), ``mC``/``mD`` are the extents, the dynamic stride and the pointer (at
16), the tilers and the cluster shape are empty, the ``TiledMMA`` is its instruction descriptor and
``accumulate_``, and each TMA atom is a 256-byte ``.align 128`` parameter with its ``CUtensorMap`` at offset 0
(:mod:`simtc.cuda.cute_params` cites where CuTe puts it). The maps are what ``make_tma_atom`` asks the driver for
(``include/cute/atom/copy_traits_sm90_tma.hpp:1038-1059`` at 7107b05): rank 2 (the TMA coordinates are
``(k, m)``, ``tAgA: ArithTuple(_0,0) o (((_64,_128),_1),4):(((_1@0,_1@1),_0),_64@0)``, tutorial 02 line 279),
``globalDim = (K, M)``, ``globalStrides = (2K,)`` bytes (A is (M,K):(K,1), host code lines 613-614), the box
``(64, 128)`` for A and ``(64, 256)`` for B (one 128x64 / 256x64 MMA tile, lines 427-430, 491-512), element
strides 1, ``SWIZZLE_128B`` (``Layout_K_SW128_Atom``, lines 471-472), ``L2_PROMOTION_L2_128B``, no OOB fill.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.cuda.cute_params import StructArg
from simtc.isa.idesc import InstrDescriptor
from simtc.numerics.fdpa import tensor_core_mma
from simtc.ptx.errors import KernelFault, PtxUnsupported

CUTLASS = os.environ.get("SIMTC_CUTLASS_DIR")
NVCC = shutil.which("nvcc")

pytestmark = [
    pytest.mark.skipif(not CUTLASS, reason="SIMTC_CUTLASS_DIR is not set: these tests need a CUTLASS checkout "
                                            "(include/, tools/util/include/, examples/cute/tutorial/blackwell/)"),
    pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH: the tutorials' host code needs the CUDA "
                                            "toolkit's headers to compile"),
    pytest.mark.slow,
]

TUTORIALS = Path(CUTLASS or ".") / "examples" / "cute" / "tutorial" / "blackwell"
OPTIONS = ("-std=c++17", "--expt-relaxed-constexpr", "-ftz=false", f"-I{Path(CUTLASS or '.') / 'include'}",
           f"-I{Path(CUTLASS or '.') / 'tools' / 'util' / 'include'}", f"-I{TUTORIALS}")
SMEM = 49280
"""``sizeof(SharedStorage)`` (derived): A's 128x64 and B's 256x64 halfs (the layouts the tutorials print, e.g.
tutorial 02 lines 475-476), each ``alignas(128)``, then two 16-aligned mbarriers and the TMEM address (lines
120-132), rounded up to the struct's 128-byte alignment: 16384 + 32768 + 36 -> 49280. 03 and 04 print the same
layouts (03:513-514, 04:515-516); in 05 the C and D epilogue tiles share a union with A and B (05:130-145)."""

_KERNELS: dict[str, object] = {}


def _source(name: str) -> Path:
    """A copy of the tutorial in simtc's build cache (its includes still come from SIMTC_CUTLASS_DIR through
    ``-I``): compiling a file by its path writes the source there (simtc.hw.compile's nvcc route), which must not
    touch the checkout, and a fixed path keeps the compile cached across sessions."""
    from simtc.hw.compile import cache_dir

    src = TUTORIALS / f"{name}.cu"
    if not src.exists():
        pytest.skip(f"{src} is not in SIMTC_CUTLASS_DIR")
    copy = cache_dir() / "cutlass_tutorials" / src.name
    text = src.read_text()
    if not copy.exists() or copy.read_text() != text:
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(text)
    return copy


def _kernel(name: str):
    """The tutorial's ``gemm_device``, compiled as ``simtc run`` compiles it (so the CLI tests reuse the cache)."""
    if name not in _KERNELS:
        from simtc.cli.run import load_kernel

        _KERNELS[name] = load_kernel(str(_source(name)), "gemm_device", OPTIONS, "sm_100a", "nvcc")[0]
    return _KERNELS[name]


def _idesc() -> int:
    """``make_instr_desc`` of ``SM100_MMA_F16BF16_SS<half, half, float, 128, 256, K, K>``."""
    return InstrDescriptor(kind="f16", m=128, n=256, a_format="fp16", b_format="fp16", d_format="fp32").encode()


def _tma_atom(kernel, index: int, tensor, rows: int, k: int, box_rows: int, *, dtype: str = "FLOAT16",
              box_inner: int = 64):
    """A TMA atom over a K-major ``tensor`` (rows, k): its ``CUtensorMap`` at offset 0, ``aux_params_`` empty."""
    elem = 2 if dtype == "FLOAT16" else 4
    return StructArg.of(kernel, index).put_tensor_map(
        0, dtype, 2, tensor, (k, rows), (k * elem,), (box_inner, box_rows), (1, 1), interleave="INTERLEAVE_NONE",
        swizzle="SWIZZLE_128B", l2_promotion="L2_PROMOTION_L2_128B", oob_fill="FLOAT_OOB_FILL_NONE").value()


def _extents(kernel, index: int, s0: int, s1: int):
    """A TMA coordinate tensor ``ArithmeticTuple<_0,_0> o (s0, s1):(_1@1, _1@0)``: its two int extents."""
    return StructArg.of(kernel, index).put(0, np.int32(s0)).put(4, np.int32(s1)).value()


def _gmem(kernel, index: int, arr, s0: int, s1: int):
    """``gmem_ptr<T> o (s0, s1):(s1, _1)``: the extents, the dynamic stride, then the pointer."""
    return StructArg.of(kernel, index).put(0, np.int32(s0)).put(4, np.int32(s1)).put(8, np.int32(s1)) \
        .put(16, arr).value()


def _mma(kernel, index: int):
    return StructArg.of(kernel, index).put(0, np.uint32(_idesc())).put(4, np.uint32(1)).value()  # ScaleOut::One


def _empty(kernel, index: int):
    return StructArg.of(kernel, index).value()


def _args_02(kernel, da, db, dc, dd, m: int, n: int, k: int, *, box_a: int = 128, alpha=1.0, beta=0.0):
    return (_extents(kernel, 0, m, k), _extents(kernel, 1, n, k), _gmem(kernel, 2, dc, m, n),
            _gmem(kernel, 3, dd, m, n), _empty(kernel, 4), _mma(kernel, 5), _empty(kernel, 6),
            _tma_atom(kernel, 7, da, m, k, box_a), _tma_atom(kernel, 8, db, n, k, 256), np.float32(alpha),
            np.float32(beta))


def _inputs(m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)  # A (M,K):(K,1)
    b = rng.standard_normal((n, k)).astype(np.float16)  # B (N,K):(K,1)
    c = rng.standard_normal((m, n)).astype(np.float32)  # C (M,N):(N,1)
    return a, b, c


def test_02_mma_tma_equals_tensor_core_mma_chained_in_k_order():
    """``02_mma_tma_sm100.cu``: TMA loads A and B tiles (SW128) into shared memory, four ``tcgen05.mma
    kind::f16`` per 64-wide K tile accumulate in TMEM, the epilogue computes ``alpha * acc + beta * C``. With
    main()'s ``alpha = 1``, ``beta = 0`` (lines 651-654) D is the accumulator, which must equal
    :func:`~simtc.numerics.fdpa.tensor_core_mma` chained in the kernel's K order (k tiles in order, 16 at a time)
    bit for bit on random fp16 inputs -- and differ from the same chain in another order, so the order is seen.

    The problem is the smallest with two tiles in every mode (256x512x128: a 2x2 grid of CTAs, two K tiles, so
    the mbarrier phases flip): the tutorial's tile is 128x256x64 and its host code refuses sizes it does not
    divide (lines 438-446)."""
    kernel = _kernel("02_mma_tma_sm100")
    m, n, k = 256, 512, 128
    a, b, c = _inputs(m, n, k)
    da, db, dc, dd = xp.asarray(a), xp.asarray(b), xp.asarray(c), xp.zeros((m, n), np.float32)
    kernel.max_dynamic_shared_size_bytes = SMEM
    kernel((m // 128, n // 256, 1), (128, 1, 1), _args_02(kernel, da, db, dc, dd, m, n, k), shared_mem=SMEM)
    got = dd.get()
    acc = tensor_core_mma(a.astype(np.float32), b.astype(np.float32), dtype="fp16")
    ref = np.float32(1.0) * acc + np.float32(0.0) * c
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    chunks = np.arange(k).reshape(-1, 16)[::-1].ravel()  # the same 16-wide MMAs, last K first
    other = tensor_core_mma(a[:, chunks].astype(np.float32), b[:, chunks].astype(np.float32), dtype="fp16")
    assert not np.array_equal(other, got)
    # the kernel's own prints: the parameter bytes as CuTe reads them back, and the TMA transaction bytes it
    # expects per K tile (sizeof of the two shared-memory boxes), which the two maps' boxes deliver
    out = "".join(kernel.last_result.printf)
    assert f"mA:\tArithTuple(_0,_0) o ({m},{k}):(_1@1,_1@0)" in out
    assert f"mC:\tgmem_ptr[32b]({hex(dc.data.ptr)}) o ({m},{n}):({n},_1)" in out
    assert f"TmaBytes: {(128 + 256) * 64 * 2}" in out


def test_02_with_a_box_short_of_the_tile_never_completes_its_mbarrier():
    """A map whose box covers half of A's tile (64 of 128 rows) delivers 8192 bytes (64 x 64 halfs) fewer than the
    kernel expects on its mbarrier: the wait never completes, and simtc reports the deadlock with the bytes still
    pending (the descriptor's content matters)."""
    kernel = _kernel("02_mma_tma_sm100")
    m, n, k = 128, 256, 64
    a, b, c = _inputs(m, n, k, seed=1)
    da, db, dc, dd = xp.asarray(a), xp.asarray(b), xp.asarray(c), xp.zeros((m, n), np.float32)
    kernel.max_dynamic_shared_size_bytes = SMEM
    with pytest.raises(KernelFault, match=r"deadlock.*\(0 of 1 arrivals and 8192 tx bytes pending\)"):
        kernel((1, 1, 1), (128, 1, 1), _args_02(kernel, da, db, dc, dd, m, n, k, box_a=64), shared_mem=SMEM)
    assert not dd.get().any()


# ---- 03-05: clusters --------------------------------------------------------------------------------------

M, N, K = 512, 1024, 256
"""main()'s problem in 03-05 (03:623-633): their cluster of 4x4 CTAs makes the grid (M/128, N/256)."""

CLUSTER = {
    "03_mma_tma_multicast_sm100": ("TMA multicast (.multicast::cluster)", "tcgen05 multicast (.multicast::cluster)"),
    "04_mma_tma_2sm_sm100": ("2-CTA MMA (.cta_group::2, a CTA pair)", "TMA multicast (.multicast::cluster)"),
    "05_mma_tma_epi_sm100": ("2-CTA MMA (.cta_group::2, a CTA pair)", "TMA multicast (.multicast::cluster)"),
}


def _first_line(ptx_module, kernel_name: str, needle: str) -> int:
    return min(i.line for i in ptx_module.functions[kernel_name].body if needle in i.name)


def _cluster_args(name: str, kernel):
    """03-05's arguments as their host code passes them. The maps hold the tensors (address, extents, strides) with
    one MMA tile's box; their multicast boxes (the box divided among the CTAs it is multicast to, lines 996-1002 of
    copy_traits_sm90_tma.hpp) are not derived here, because the launch is refused before any CTA reads them."""
    a, b, c = _inputs(M, N, K)
    da, db, dc, dd = xp.asarray(a), xp.asarray(b), xp.asarray(c), xp.zeros((M, N), np.float32)
    if name != "05_mma_tma_epi_sm100":
        return _args_02(kernel, da, db, dc, dd, M, N, K), dd
    # 05: mA, mB, mC, mD are all TMA tensors; the epilogue tiler; four TMA atoms (C and D: f32, 32x128 boxes)
    return ((_extents(kernel, 0, M, K), _extents(kernel, 1, N, K), _extents(kernel, 2, M, N),
             _extents(kernel, 3, M, N), _empty(kernel, 4), _empty(kernel, 5), _mma(kernel, 6), _empty(kernel, 7),
             _tma_atom(kernel, 8, da, M, K, 128), _tma_atom(kernel, 9, db, N, K, 256),
             _tma_atom(kernel, 10, dc, M, N, 128, dtype="FLOAT32", box_inner=32),
             _tma_atom(kernel, 11, dd, M, N, 128, dtype="FLOAT32", box_inner=32),
             np.float32(1.0), np.float32(0.0)), dd)


@pytest.mark.parametrize("name", sorted(CLUSTER))
def test_cluster_tutorials_are_refused_at_launch_naming_the_feature_and_line(name):
    """03 multicasts its TMA loads and MMA commits over a 4x4 cluster, 04 and 05 issue 2-CTA MMAs: simtc.cuda
    launches clusters of one CTA, so the launch is one PtxUnsupported naming each feature and its first PTX line,
    raised before any CTA runs (nothing printed, nothing stored)."""
    kernel = _kernel(name)
    args, dd = _cluster_args(name, kernel)
    kernel.max_dynamic_shared_size_bytes = SMEM
    kernel.last_result = None
    with pytest.raises(PtxUnsupported) as e:
        kernel((M // 128, N // 256, 1), (128, 1, 1), args, shared_mem=SMEM)
    msg = e.value.message
    assert msg.startswith("kernel gemm_device needs a cluster of several CTAs")
    fn = kernel.function
    for feature in CLUSTER[name]:
        assert feature in msg
    needle = "cta_group::2" if "cta_group::2" in CLUSTER[name][0] else "multicast::cluster"
    assert f"at PTX line {_first_line(kernel.module, fn.name, needle)} (" in msg
    assert f", {name}.cu:" in msg  # the tutorial's own line (-lineinfo), where a CuTe call was inlined
    assert e.value.rule.startswith("simtc.cuda launches clusters of one CTA")
    assert kernel.last_result is None and not dd.get().any()


@pytest.mark.parametrize("name", sorted(CLUSTER))
def test_simtc_run_refuses_the_cluster_tutorials_in_one_line(name, tmp_path, capsys):
    """``simtc run FILE.cu --kernel gemm_device ...``: one ``simtc: error: ... [rule: ...]`` line, exit 2 -- the
    kernel is valid, simtc does not execute what it needs (exit 1 is for a fault of the kernel). The struct
    arguments are files of their bytes (the pointers and maps zero: refused before any is read)."""
    from simtc.cli import main

    kernel = _kernel(name)
    argv = ["run", str(_source(name)), "--backend", "nvcc", "--arch", "sm_100a",
            *[f"-O={o}" for o in OPTIONS], "--kernel", "gemm_device", "--grid", f"{M // 128},{N // 256}",
            "--block", "128", "--smem", str(SMEM), "--out", str(tmp_path / "out")]
    for i, p in enumerate(kernel.function.params):
        if p.shape:
            np.save(tmp_path / f"p{i}.npy", np.zeros(p.size, np.uint8))
            argv += ["--arg", f"{i}={tmp_path / f'p{i}.npy'}"]
        else:
            argv += ["--arg", f"{i}=1.0"]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("simtc: error: kernel gemm_device needs a cluster of several CTAs")
    assert CLUSTER[name][0] in err[0] and "[rule: simtc.cuda launches clusters of one CTA" in err[0]
