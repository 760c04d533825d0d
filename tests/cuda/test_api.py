"""simtc.cuda: CuPy's raw-kernel API over simtc's executor.

The same script (examples/cuda_kernels.py: ``vector_add``, ``block_sum``) runs with ``xp = simtc.cuda`` here and
with ``xp = cupy`` in tests/hw/test_cuda_api_gpu.py; here its results are compared with numpy. Argument packing, the
compiler options, ``max_dynamic_shared_size_bytes`` and the ndarray are checked on their own too.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.cuda import compiler
from simtc.cuda._kernel import DEFAULT_MAX_DYNAMIC_SHARED, cxx_base_name, pack_args, parse_dims
from simtc.hw.compile import CompileError
from simtc.ptx import ir
from simtc.ptx.errors import LaunchError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VECTOR_ADD = (EXAMPLES / "vector_add.cu").read_text()
BLOCK_SUM = (EXAMPLES / "block_sum.cu").read_text()


# ---- the script both sides run (examples/cuda_kernels.py; with CuPy in tests/hw/test_cuda_api_gpu.py) -------

def _example():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_simtc_example_cuda_kernels", EXAMPLES / "cuda_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


EXAMPLE = _example()


# ---- launches through the executor ------------------------------------------------------------------------

def test_vector_add_equals_numpy():
    a, b, c = EXAMPLE.vector_add(xp, 1000)
    np.testing.assert_array_equal(c, a + b)  # one float32 add per element: bit-exact
    res = xp.last_launch()
    assert res is not None


def test_block_sum_equals_numpy():
    x, out = EXAMPLE.block_sum(xp, 3, 128)
    # small integers: every partial sum is exact in float32, whatever the order
    np.testing.assert_array_equal(out, x.reshape(3, -1).sum(axis=1))


def test_kernel_last_result_is_the_last_launch():
    kernel = xp.RawKernel(VECTOR_ADD, "vector_add")
    a = xp.ones(64, dtype=xp.float32)
    c = xp.empty_like(a)
    kernel((1,), (64,), (a, a, c, 64))  # a Python int fits the .u32 parameter
    assert kernel.last_result is xp.last_launch()
    np.testing.assert_array_equal(c.get(), np.full(64, 2, np.float32))


def test_views_pass_their_own_address():
    kernel = xp.RawKernel(VECTOR_ADD, "vector_add")
    a = xp.arange(64, dtype=xp.float32)
    c = xp.zeros(64, dtype=xp.float32)
    kernel((1,), (32,), (a[32:], a[32:], c[16:], np.int32(32)))
    expect = np.zeros(64, np.float32)
    expect[16:48] = 2 * np.arange(32, 64, dtype=np.float32)
    np.testing.assert_array_equal(c.get(), expect)


def test_name_expressions_give_a_template_instance():
    mod = xp.RawModule(code=BLOCK_SUM + "\ntemplate <typename T> __global__ void fill(T* p, T v) "
                       "{ p[threadIdx.x] = v; }\n", name_expressions=("fill<int>",))
    k = mod.get_function("fill<int>")
    assert k.name.startswith("_Z") and cxx_base_name(k.name) == "fill"
    p = xp.zeros(32, dtype=xp.int32)
    k((1,), (32,), (p, np.int32(-7)))
    np.testing.assert_array_equal(p.get(), np.full(32, -7, np.int32))


def test_ptx_file_module(tmp_path):
    ptx, _ = compiler.compile_to_ptx(VECTOR_ADD)
    path = tmp_path / "va.ptx"
    path.write_text(ptx)
    k = xp.RawModule(path=str(path)).get_function("vector_add")
    a = xp.full(8, 1.5, dtype=xp.float32)
    c = xp.zeros(8, dtype=xp.float32)
    k((1,), (8,), (a, a, c, np.int32(8)))
    np.testing.assert_array_equal(c.get(), np.full(8, 3, np.float32))


def test_get_global_reaches_the_kernel():
    mod = xp.RawModule(code='__constant__ float scale[4];\n__device__ int counter;\n'
                            'extern "C" __global__ void k(float* out) { out[threadIdx.x] = scale[threadIdx.x]; '
                            'if (threadIdx.x == 0) counter = 7; }')
    s = xp.ndarray((4,), xp.float32, mod.get_global("scale"))
    s.set(np.array([1, 2, 3, 4], np.float32))
    out = xp.zeros(4, dtype=xp.float32)
    mod.get_function("k")((1,), (4,), (out,))
    np.testing.assert_array_equal(out.get(), [1, 2, 3, 4])
    assert xp.ndarray((), xp.int32, mod.get_global("counter")).item() == 7
    with pytest.raises(LaunchError, match=r"no __device__ or __constant__ variable 'nope'.*scale"):
        mod.get_global("nope")


# ---- max_dynamic_shared_size_bytes ---------------------------------------------------------------------

DYN = 'extern "C" __global__ void dyn(float* out) { extern __shared__ float s[]; s[threadIdx.x] = threadIdx.x; ' \
      '__syncthreads(); out[threadIdx.x] = s[31 - threadIdx.x]; }'
STATIC = 'extern "C" __global__ void stat(float* out) { __shared__ float t[1024]; t[threadIdx.x] = 1; ' \
         '__syncthreads(); out[threadIdx.x] = t[threadIdx.x]; }'


def test_max_dynamic_shared_defaults_to_48k_less_static():
    assert xp.RawKernel(DYN, "dyn").max_dynamic_shared_size_bytes == DEFAULT_MAX_DYNAMIC_SHARED == 49152
    k = xp.RawKernel(STATIC, "stat")
    assert k.shared_size_bytes == 4096
    assert k.max_dynamic_shared_size_bytes == 49152 - 4096
    assert k.attributes["shared_size_bytes"] == 4096


def test_more_than_48k_needs_the_opt_in():
    k = xp.RawKernel(DYN, "dyn")
    out = xp.zeros(32, dtype=xp.float32)
    with pytest.raises(LaunchError, match=r"more than the kernel's max_dynamic_shared_size_bytes \(49152\)"):
        k((1,), (32,), (out,), shared_mem=64 * 1024)
    k.max_dynamic_shared_size_bytes = 64 * 1024
    k((1,), (32,), (out,), shared_mem=64 * 1024)
    np.testing.assert_array_equal(out.get(), np.arange(31, -1, -1, dtype=np.float32))
    k((1,), (32,), (out,), shared_mem=49152)  # at the default limit: no opt-in needed


def test_opt_in_limit_is_227k_less_static():
    k = xp.RawKernel(STATIC, "stat")
    k.max_dynamic_shared_size_bytes = 227 * 1024 - 4096
    with pytest.raises(LaunchError, match="at most 228352 bytes"):
        k.max_dynamic_shared_size_bytes = 227 * 1024
    with pytest.raises(LaunchError, match="opt-in limit"):
        k.max_dynamic_shared_size_bytes = -1


# ---- arguments ---------------------------------------------------------------------------------------------

FN = ir.Function("k", True, params=(
    ir.Param("k_param_0", "u64"), ir.Param("k_param_1", "f32"), ir.Param("k_param_2", "u32"),
    ir.Param("k_param_3", "f64"), ir.Param("k_param_4", "u8"), ir.Param("k_param_5", "b8", shape=(8,), align=4)))


def _args(**over):
    base = [None, np.float32(1.5), np.int32(-1), 2.5, True, np.zeros(1, dtype="i4,f4")]
    for k, v in over.items():
        base[int(k[1:])] = v
    return base


def test_pack_args_bytes():
    a = xp.zeros(4, dtype=xp.float32)
    packed = pack_args(FN, _args(p0=a))
    assert packed[0] == struct.pack("<Q", a.data.ptr) and a.data.ptr != 0
    assert packed[1] == struct.pack("<f", 1.5)
    assert packed[2] == b"\xff\xff\xff\xff"
    assert packed[3] == struct.pack("<d", 2.5)
    assert packed[4] == b"\x01"
    assert packed[5] == bytes(8)
    assert pack_args(FN, _args(p2=4294967295))[2] == b"\xff\xff\xff\xff"
    assert pack_args(FN, _args(p2=-2147483648))[2] == b"\x00\x00\x00\x80"
    assert pack_args(FN, _args(p0=None))[0] == bytes(8)


@pytest.mark.parametrize(("over", "match"), [
    ({"p1": 1.5}, r"Python float for parameter 1 .*pass numpy.float32\(x\)"),
    ({"p2": 1.0}, "Python float for parameter 2"),
    ({"p1": 3}, r"Python int for parameter 1 .*numpy.float32\(3\)"),
    ({"p2": 2**32}, "4294967296 does not fit parameter 2"),
    ({"p2": -(2**31) - 1}, "does not fit parameter 2"),
    ({"p1": np.float64(1)}, r"numpy.float64 \(8 bytes\) for parameter 1"),
    ({"p1": np.int32(1)}, "numpy.int32 for parameter 1 .*read its bits as .f32"),
    ({"p2": np.float32(1)}, "numpy.float32 for parameter 2 .*pass an integer"),
    ({"p2": xp.zeros(2)}, r"a device array for parameter 2 \(k_param_2: .u32, 4 bytes\)"),
    ({"p0": np.zeros(3, np.float32)}, r"numpy.ndarray of shape \(3,\).*only numpy arrays of size one"),
    ({"p0": 1.0}, "Python float for parameter 0"),
    ({"p4": 300}, "300 does not fit parameter 4"),
    ({"p2": True}, "Python bool for parameter 2"),
    ({"p5": np.zeros(1, "i4")}, r"numpy array of 4 bytes \(int32\) for parameter 5"),
    ({"p5": 1}, "Python int for parameter 5"),
    ({"p0": "x"}, "str 'x' for parameter 0"),
])
def test_pack_args_refuses(over, match):
    with pytest.raises(LaunchError, match=match):
        pack_args(FN, _args(**over))


def test_pack_args_count_names_the_parameters():
    with pytest.raises(LaunchError, match=r"takes 6 argument\(s\), 2 given; its parameters: k_param_0 \(.u64\)"):
        pack_args(FN, [None, None])
    with pytest.raises(LaunchError, match="args must be a tuple"):
        pack_args(FN, None)


def test_launch_checks_arguments_against_the_ptx():
    kernel = xp.RawKernel(VECTOR_ADD, "vector_add")
    a = xp.zeros(4, dtype=xp.float32)
    with pytest.raises(LaunchError, match="takes 4 argument"):
        kernel((1,), (4,), (a, a, a))
    with pytest.raises(LaunchError, match=r"a Python float for parameter 3 \(vector_add_param_3: .u32"):
        kernel((1,), (4,), (a, a, a, 4.0))
    with pytest.raises(LaunchError, match="a device array for parameter 3"):
        kernel((1,), (4,), (a, a, a, a))


@pytest.mark.parametrize(("dims", "match"), [
    (4, r"must be a tuple such as \(4,\)"), ((1, 2, 3, 4), "has 4 dimensions"), ((), "has 0 dimensions"),
    ((0,), "at least 1"), ((-2,), "at least 1"), ((1.5,), "not an integer"), ((True,), "not an integer"),
])
def test_grid_and_block_as_cupy_takes_them(dims, match):
    with pytest.raises(LaunchError, match=match):
        parse_dims(dims, "grid")
    assert parse_dims((5,), "grid") == (5, 1, 1) and parse_dims((2, np.int64(3)), "block") == (2, 3, 1)


# ---- modules, kernels, compilation ------------------------------------------------------------------------

def test_unknown_kernel_lists_the_known_ones():
    mod = xp.RawModule(code="__global__ void vecadd(float* p) {}\n" + VECTOR_ADD)
    with pytest.raises(LaunchError, match=r"no kernel 'nope' in the module; it has: _Z6vecaddPf \(C\+\+ vecadd\), "
                                          r"vector_add"):
        mod.get_function("nope")
    with pytest.raises(LaunchError, match=r"vecadd is a C\+\+ kernel.*use '_Z6vecaddPf'.*extern \"C\""):
        mod.get_function("vecadd")
    assert mod.get_function("_Z6vecaddPf").name == "_Z6vecaddPf"


def test_compile_error_carries_the_log():
    k = xp.RawKernel('extern "C" __global__ void bad() { not_declared(); }', "bad")
    with pytest.raises(xp.CompileException, match='identifier "not_declared" is undefined') as e:
        k.compile()
    assert 'not_declared' in e.value.log and e.value.rule
    assert xp.cuda.compiler.CompileException is CompileError


def test_cubin_is_refused(tmp_path):
    p = tmp_path / "k.cubin"
    p.write_bytes(b"\x7fELF" + bytes(60))
    with pytest.raises(LaunchError, match="simtc executes PTX"):
        _ = xp.RawModule(path=str(p)).module


def test_module_arguments_as_cupy():
    with pytest.raises(TypeError, match="Exactly one of `code` and `path`"):
        xp.RawModule()
    with pytest.raises(ValueError, match="only nvrtc"):
        xp.RawModule(code="", name_expressions=["f<int>"], backend="nvcc")
    with pytest.raises(LaunchError, match="jitify=True is not supported"):
        xp.RawModule(code="", jitify=True)


def test_options_as_cupy_assembles_them():
    arch, opts = compiler.assemble_options(("-DN=4",), "nvrtc")
    assert arch == "sm_90a"
    assert opts[0] == "-DN=4" and "-ftz=true" in opts and "--device-as-default-execution-space" in opts
    assert "-lineinfo" in opts and any(o.startswith("-I") for o in opts)
    assert compiler.assemble_options(("-arch", "sm_100a"), "nvcc") == ("sm_100a", ("-ftz=true", "-lineinfo"))
    assert compiler.assemble_options(("--gpu-architecture=compute_90a", "-ftz=false", "-G"), "nvcc") == \
        ("sm_90a", ("-ftz=false", "-G"))
    with pytest.raises(compiler.OptionError, match="two targets"):
        compiler.assemble_options(("-arch=sm_90a", "-arch=sm_100a"), "nvrtc")
    with pytest.raises(compiler.OptionError, match="tuple of str"):
        compiler.assemble_options(["-DN=4"], "nvrtc")
    with pytest.raises(compiler.OptionError, match="not an architecture"):
        compiler.assemble_options(("-arch=hopper",), "nvrtc")
    with pytest.raises(compiler.OptionError, match="backend 'clang'"):
        compiler.assemble_options((), "clang")


def test_nvcc_backend_and_arch_option():
    ptx, _ = compiler.compile_to_ptx(VECTOR_ADD, backend="nvcc", options=("-arch=sm_100a",))
    assert ".target sm_100a" in ptx and ".loc" in ptx
    ptx, _ = compiler.compile_to_ptx(VECTOR_ADD)
    assert ".target sm_90a" in ptx and "vector_add" in ptx


# ---- ndarray -----------------------------------------------------------------------------------------------

def test_ndarray_basics():
    h = np.arange(12, dtype=np.int32).reshape(3, 4)
    a = xp.asarray(h)
    assert (a.shape, a.dtype, a.strides, a.size, a.nbytes, a.ndim) == ((3, 4), np.int32, (16, 4), 12, 48, 2)
    assert xp.asarray(a) is a and xp.asnumpy(a).tolist() == h.tolist()
    row = a[1]
    assert row.data.ptr == a.data.ptr + 16 and row.shape == (4,)
    el = a[2, 3]
    assert el.shape == () and el.data.ptr == a.data.ptr + 44 and int(el) == 11
    col = a[:, 2]
    col.fill(-1)
    assert a.get()[:, 2].tolist() == [-1, -1, -1]
    t = a.T
    assert t.strides == (4, 16) and t.data.ptr == a.data.ptr
    assert t.__cuda_array_interface__["strides"] == (4, 16)
    cai = a.__cuda_array_interface__
    assert cai["data"] == (a.data.ptr, False) and cai["typestr"] == "<i4" and cai["strides"] is None
    c = a.copy()
    assert c.data.ptr != a.data.ptr and c.get().tolist() == a.get().tolist()
    r = a.reshape(4, 3)
    assert r.data.ptr == a.data.ptr and r.shape == (4, 3)
    v = a.view(np.uint32)
    assert v.data.ptr == a.data.ptr and v.get()[0, 2] == 0xFFFFFFFF
    f = a.astype(np.float32)
    assert f.dtype == np.float32 and f.data.ptr != a.data.ptr
    a.set(np.zeros((3, 4), np.int32))
    assert not a.any()
    with pytest.raises(ValueError, match="shape mismatch"):
        a.set(np.zeros(3, np.int32))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    sel = a[xp.asarray(np.array([0, 2]))]
    assert sel.shape == (2, 4)


def test_creation_functions():
    assert xp.zeros((2, 3), dtype=xp.float16).get().tolist() == [[0, 0, 0], [0, 0, 0]]
    assert xp.ones(3, dtype=xp.int8).get().tolist() == [1, 1, 1]
    assert xp.full((2,), 7, dtype=xp.uint16).get().tolist() == [7, 7]
    e = xp.empty((5,), dtype=xp.float64)
    assert e.shape == (5,) and e.dtype == np.float64
    z = xp.zeros_like(e)
    assert z.shape == (5,) and z.data.ptr != e.data.ptr
    assert xp.empty_like(e, dtype=xp.int32).dtype == np.int32
    assert xp.arange(2, 8, 2, dtype=xp.int64).get().tolist() == [2, 4, 6]
    assert xp.array([[1, 2]], dtype=xp.float32).shape == (1, 2)
    f = xp.zeros((2, 3), order="F")
    assert f.strides == (8, 16)
    assert bool(xp.allclose(xp.asarray([1.0]), xp.asarray([1.0 + 1e-9])))
    assert bool(xp.array_equal(xp.arange(3), xp.arange(3)))
    with pytest.raises(ValueError, match="negative dimensions"):
        xp.zeros(-1)


def test_arithmetic_makes_device_arrays():
    a = xp.arange(4, dtype=xp.float32)
    b = a * 2 + 1
    assert isinstance(b, xp.ndarray) and b.get().tolist() == [1, 3, 5, 7]
    assert (2 - a).get().tolist() == [2, 1, 0, -1]
    assert bool((a == a).all()) and float(a.sum()) == 6
    a += 1
    assert a.get().tolist() == [1, 2, 3, 4]
    with pytest.raises(TypeError, match="move it to the device first"):
        _ = a + np.ones(4)


def test_runtime_no_ops_and_one_device():
    xp.cuda.Device(0).synchronize()
    xp.cuda.Device().use()
    with xp.cuda.Device(0):
        xp.cuda.runtime.deviceSynchronize()
    xp.cuda.Stream.null.synchronize()
    xp.cuda.get_current_stream().synchronize()
    ev = xp.cuda.Event()
    ev.record()
    ev.synchronize()
    assert xp.cuda.runtime.getDeviceCount() == 1 and xp.cuda.Device().compute_capability == "90"
    with pytest.raises(Exception, match="one device, 0"):
        xp.cuda.Device(1)
    with pytest.raises(Exception, match="not time executed kernels yet"):
        xp.cuda.get_elapsed_time(ev, ev)
