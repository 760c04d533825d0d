"""Launches simtc refuses, each in one error naming its rule: kernels that need a cluster of several CTAs, more
shared memory than a block has, tensor maps ``cuTensorMapEncodeTiled`` would not encode, struct arguments whose
members do not fit their parameter -- through :mod:`simtc.cuda` and through ``simtc run``.

What tests elsewhere already show is not repeated: argument count, an array for a scalar, a scalar too wide, a
float for an int (tests/cuda/test_api.py ``test_pack_args_refuses``, ``test_launch_checks_arguments_against_the_ptx``;
tests/cli/test_run.py), the 48 KiB default and the sm_90a opt-in limit (test_api.py), the driver's tensor-map rules
(tests/ptx/test_tensor_map.py ``test_each_driver_rule_is_refused_by_name``), a map reaching past its allocation and
bytes that are no map (tests/ptx/test_tma.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import simtc.cuda as xp
from simtc.cli import main
from simtc.cuda.cute_params import StructArg
from simtc.ptx.errors import KernelFault, LaunchError, PtxUnsupported
from simtc.smem.tma import TensorMapError

HEAD = ".version 9.0\n.target {target}\n.address_size 64\n"

STORE = """
.visible .entry k(.param .u64 k_out)
{directives}
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [k_out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 7;
    st.global.u32 [%rd2], %r1;
    {more}
    ret;
}}
"""


def _ptx(tmp_path: Path, directives: str = "", more: str = "", target: str = "sm_100a") -> Path:
    p = tmp_path / "k.ptx"
    p.write_text(HEAD.format(target=target) + STORE.format(directives=directives, more=more))
    return p


def _line(path: Path, needle: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if needle in t)


# ---- kernels that need a cluster of several CTAs ------------------------------------------------------------

@pytest.mark.parametrize(("directives", "shown"), [
    (".reqnctapercluster 2, 1, 1", "a cluster launch (.reqnctapercluster 2,1,1 on the .entry at PTX line {}"),
    (".explicitcluster", "a cluster launch (.explicitcluster on the .entry at PTX line {}"),
])
def test_cluster_directives_are_refused_before_the_kernel_runs(tmp_path, directives, shown):
    path = _ptx(tmp_path, directives)
    out = xp.zeros(1, dtype=xp.uint32)
    k = xp.RawModule(path=str(path)).get_function("k")
    with pytest.raises(PtxUnsupported) as e:
        k((2,), (1,), (out,))
    msg = e.value.message
    assert shown.format(_line(path, ".entry")) in msg and "its cluster shape is part of the kernel" in msg
    assert e.value.rule.startswith("simtc.cuda launches clusters of one CTA") and "§11.7" in e.value.ref
    assert out.get()[0] == 0 and k.last_result is None  # no CTA ran


@pytest.mark.parametrize("directives", [".reqnctapercluster 1, 1, 1", ".maxclusterrank 8"])
def test_a_cluster_of_one_and_a_cluster_bound_launch(tmp_path, directives):
    """``.maxclusterrank`` only bounds the cluster (PTX ISA 9.0 §11.7): one CTA meets it, as it meets a required
    cluster of one."""
    out = xp.zeros(1, dtype=xp.uint32)
    xp.RawModule(path=str(_ptx(tmp_path, directives))).get_function("k")((1,), (1,), (out,))
    assert out.get()[0] == 7


def test_cluster_dims_from_cuda_cpp_are_refused():
    """``__cluster_dims__(2, 1, 1)`` compiles to ``.explicitcluster`` and ``.reqnctapercluster 2, 1, 1``."""
    k = xp.RawKernel('extern "C" __global__ void __cluster_dims__(2, 1, 1) k(unsigned* out) { out[0] = 7; }', "k",
                     options=("-arch=sm_100a",))
    out = xp.zeros(1, dtype=xp.uint32)
    with pytest.raises(PtxUnsupported, match=r"kernel k needs a cluster of several CTAs.*\.reqnctapercluster 2,1,1"):
        k((2,), (1,), (out,))
    assert out.get()[0] == 0


def test_a_cta_pair_instruction_in_cuda_cpp_names_its_source_line():
    src = ('extern "C" __global__ void k(unsigned* out) {\n'
           '  __shared__ unsigned slot;\n'
           '  out[0] = 7;\n'
           '  asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 32;"'
           ' :: "r"((unsigned)__cvta_generic_to_shared(&slot)));\n'  # line 4
           '}\n')
    k = xp.RawKernel(src, "k", options=("-arch=sm_100a",))
    out = xp.zeros(1, dtype=xp.uint32)
    with pytest.raises(PtxUnsupported, match=r"2-CTA MMA \(.cta_group::2, a CTA pair\) at PTX line \d+ \("
                                             r"tcgen05[.]alloc.cta_group::2.sync.aligned.shared::cta.b32, "
                                             r"kernel[.]cu:4\)"):
        k((1,), (32,), (out,))
    assert out.get()[0] == 0


CTA_PAIR = """
    .shared .align 8 .b32 slot;
    mov.u32 %r2, slot;
    tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r2], 32;
"""
MULTICAST = """
    .shared .align 8 .b64 bar;
    .shared .align 1024 .b8 buf[1024];
    .reg .b16 %rs<2>;
    mov.u32 %r2, bar;
    mov.u32 %r3, buf;
    mov.u16 %rs1, 3;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
        [%r3], [%rd1, {%r1}], [%r2], %rs1;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r2], %rs1;
"""


@pytest.mark.parametrize(("more", "needles"), [
    (CTA_PAIR, [("2-CTA MMA (.cta_group::2, a CTA pair)", "tcgen05.alloc.cta_group::2")]),
    (MULTICAST, [("TMA multicast (.multicast::cluster)", "cp.async.bulk.tensor"),
                 ("tcgen05 multicast (.multicast::cluster)", "tcgen05.commit")]),
])
def test_cluster_instructions_are_refused_at_launch_with_their_lines(tmp_path, more, needles):
    """The refusal comes before any CTA runs, although the kernel stores before it reaches them (executed, the
    instruction would be refused there: simtc.ptx.async_ops / async_tma); each feature names its first line."""
    path = _ptx(tmp_path, more=more)
    out = xp.zeros(1, dtype=xp.uint32)
    k = xp.RawModule(path=str(path)).get_function("k")
    with pytest.raises(PtxUnsupported) as e:
        k((1,), (32,), (out,))
    for feature, needle in needles:
        assert f"{feature} at PTX line {_line(path, needle)} (" in e.value.message
    assert "on a GPU its host code launches it with a cluster dimension" in e.value.message
    assert out.get()[0] == 0


def test_simtc_run_refuses_a_cluster_kernel_in_one_line_exit_2(tmp_path, capsys):
    """Exit 2: the kernel is valid, simtc does not execute what it needs (1 is for a fault of the kernel)."""
    path = _ptx(tmp_path, ".reqnctapercluster 4, 1, 1")
    np.save(tmp_path / "out.npy", np.zeros(1, np.uint32))
    rc = main(["run", str(path), "--grid", "4", "--block", "1", "--arg", f"0={tmp_path / 'out.npy'}", "--out",
               str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1 and err[0].startswith("simtc: error: kernel k needs a cluster of several CTAs, which simtc "
                                               "does not execute: a cluster launch (.reqnctapercluster 4,1,1")
    assert "[rule: simtc.cuda launches clusters of one CTA" in err[0] and not list((tmp_path / "o").glob("*"))


# ---- shared memory ------------------------------------------------------------------------------------------

DYN = """
.visible .entry k(.param .u64 k_out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    .extern .shared .align 16 .b8 dyn[];
    mov.u32 %r1, dyn;
    mov.u32 %r2, 5;
    st.shared.u32 [%r1], %r2;
    ld.shared.u32 %r2, [%r1];
    ld.param.u64 %rd1, [k_out];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r2;
    ret;
}
"""


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_dynamic_shared_memory_past_the_227_kib_opt_in_limit(tmp_path, target):
    """227 KiB of shared memory per block on compute capability 9.0 and 10.0 (CUDA C++ Programming Guide,
    technical specifications per compute capability: maximum shared memory per thread block; opted in with
    ``cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, n)``): the limit itself runs, one byte
    more is refused when set and when launched."""
    p = tmp_path / "dyn.ptx"
    p.write_text(HEAD.format(target=target) + DYN)
    k = xp.RawModule(path=str(p)).get_function("k")
    out = xp.zeros(1, dtype=xp.uint32)
    limit = 227 * 1024
    with pytest.raises(LaunchError, match=rf"at most {limit} bytes") as e:
        k.max_dynamic_shared_size_bytes = limit + 1
    assert e.value.rule == "dynamic + static shared memory <= the opt-in limit per block"
    with pytest.raises(LaunchError, match=rf"shared_mem={limit + 1} bytes .*more than the kernel's "
                                          r"max_dynamic_shared_size_bytes \(49152\)"):
        k((1,), (1,), (out,), shared_mem=limit + 1)
    k.max_dynamic_shared_size_bytes = limit
    k((1,), (1,), (out,), shared_mem=limit)
    assert out.get()[0] == 5
    with pytest.raises(LaunchError, match=r"more than the kernel's max_dynamic_shared_size_bytes \(232448\)"):
        k((1,), (1,), (out,), shared_mem=limit + 1)


def test_simtc_run_smem_past_the_limit_is_one_line_exit_2(tmp_path, capsys):
    p = tmp_path / "dyn.ptx"
    p.write_text(HEAD.format(target="sm_100a") + DYN)
    np.save(tmp_path / "out.npy", np.zeros(1, np.uint32))
    rc = main(["run", str(p), "--grid", "1", "--block", "1", "--smem", str(227 * 1024 + 1), "--arg",
               f"0={tmp_path / 'out.npy'}", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1 and err[0].startswith("simtc: error: max_dynamic_shared_size_bytes = 232449")
    assert "[rule: dynamic + static shared memory <= the opt-in limit per block" in err[0]


# ---- tensor maps: the driver's rules not covered in tests/ptx/test_tensor_map.py ------------------------------

BASE = 0x7F00_0000_0000
OK = dict(data_type="BFLOAT16", rank=2, global_address=BASE, global_dim=(64, 64), global_strides=(128,),
          box_dim=(64, 8), element_strides=(1, 1))
IL32 = dict(rank=3, global_dim=(16, 4, 4), global_strides=(32, 128), box_dim=(16, 4, 4), element_strides=(1, 1, 1),
            interleave="INTERLEAVE_32B", swizzle="SWIZZLE_32B")


@pytest.mark.parametrize(("change", "rule"), [
    ({**IL32, "global_address": BASE + 16}, "globalAddress is 32-byte aligned (interleave 32B)"),
    ({**IL32, "global_strides": (48, 192)}, "globalStrides are multiples of 32 and < 2^40"),
    (dict(interleave=3), "interleave is a CUtensorMap enum value"),
    (dict(l2_promotion="L2_512B"), "l2Promotion is a CUtensorMap enum value"),
    (dict(oob_fill=2), "oobFill is a CUtensorMap enum value"),
    (dict(global_address=np.zeros(4, np.float32)), "globalAddress is a device address"),
    (dict(global_address=None), "globalAddress is a device address"),
    (dict(global_dim=(64.5, 64)), "globalDim is an array of integers"),
    (dict(global_strides=128), "globalStrides is an array of integers"),
    (dict(box_dim=(64, True)), "boxDim is an array of integers"),
    (dict(element_strides=(1, 1.0)), "elementStrides is an array of integers"),
    (dict(rank=True), "tensorRank is non-zero and at most 5"),
])
def test_more_tensor_map_rules_are_refused_by_name(change, rule):
    a = {**OK, **change}
    with pytest.raises(TensorMapError) as e:
        xp.tensor_map(**a)
    assert e.value.rule == rule and "cuTensorMapEncodeTiled" in e.value.ref


MISALIGNED = """
.visible .entry k(.param .align 8 .b8 k_p[136], .param .u64 k_out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .shared .align 8 .b64 bar;
    .shared .align 1024 .b8 buf[1024];
    mov.b64 %rd1, k_p;
    cvta.param.u64 %rd2, %rd1;
    add.s64 %rd3, %rd2, 8;
    mov.u32 %r1, bar;
    mov.u32 %r2, buf;
    mov.u32 %r3, 0;
    mbarrier.init.shared::cta.b64 [%r1], 1;
    cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd3, {%r3}], [%r1];
    ret;
}
"""


def test_a_tensor_map_read_at_an_address_off_64_bytes_is_a_fault(tmp_path):
    """The copy names its map 8 bytes into a by-value parameter: the map's address must be 64-byte aligned (CUDA
    13.0 cuda.h, cuTensorMapEncodeTiled: "tensorMap address must be aligned to 64 bytes"), so the copy faults at
    its PTX line, whatever the bytes."""
    p = tmp_path / "k.ptx"
    p.write_text(HEAD.format(target="sm_100a") + MISALIGNED)
    k = xp.RawModule(path=str(p)).get_function("k")
    g = xp.zeros(64, dtype=xp.float32)
    arg = bytes(8) + xp.tensor_map("FLOAT32", 1, g, (64,), (), (64,), (1,))
    with pytest.raises(KernelFault, match=r"tensor map address 0x[0-9a-f]+8 of lane 0 is not 64-byte aligned") as e:
        k((1,), (1,), (arg, g))
    assert e.value.line == _line(p, "cp.async.bulk.tensor")


# ---- struct arguments (simtc.cuda.cute_params.StructArg) ---------------------------------------------------------

FN_PARAMS = """
.visible .entry k(.param .align 4 .b8 k_shape[12], .param .align 128 .b8 k_atom[256], .param .align 8 .b8 k_small[144],
                  .param .u32 k_n)
{
    ret;
}
"""


@pytest.fixture
def params_kernel(tmp_path):
    p = tmp_path / "params.ptx"
    p.write_text(HEAD.format(target="sm_100a") + FN_PARAMS)
    return xp.RawModule(path=str(p)).get_function("k")


def _map():
    return xp.tensor_map("FLOAT32", 1, BASE, (64,), (), (64,), (1,))


@pytest.mark.parametrize(("build", "match"), [
    (lambda k: StructArg.of(k, 3), r"parameter 3 \(k_n: .u32\) is a scalar, not a by-value struct"),
    (lambda k: StructArg.of(k, 4), "k has 4 parameters; there is no parameter 4"),
    (lambda k: StructArg.of(k, 0).put(12, np.int32(1)), r"numpy.int32 \(4 bytes\) at byte 12 runs past the end of "
                                                        r"parameter 0 \(k_shape: .align 4 .b8\[12\]\) \(12 bytes\)"),
    (lambda k: StructArg.of(k, 0).put(2, np.int32(1)), "numpy.int32 at byte 2 of parameter 0 .* not 4-byte aligned"),
    (lambda k: StructArg.of(k, 0).put(0, np.int64(1)).put(4, np.int32(1)), "overlaps a member written before"),
    (lambda k: StructArg.of(k, 0).put(0, 1), "int 1 as a member of parameter 0"),
    (lambda k: StructArg.of(k, 0).put(0, 1.5), "float 1.5 as a member"),
    (lambda k: StructArg.of(k, 0).put(4, None), "a pointer at byte 4 .* not 8-byte aligned"),
    (lambda k: StructArg.of(k, 1).put_tensor_map(32, _map()), "a tensor map at byte 32 .* not 64-byte aligned"),
    (lambda k: StructArg.of(k, 1).put_tensor_map(192, _map()), "a tensor map at byte 192 of a 256-byte parameter "
                                                               "runs past its end"),
    (lambda k: StructArg.of(k, 2).put_tensor_map(0, _map()), r"a tensor map in parameter 2 .* whose alignment is 8"),
    (lambda k: StructArg.of(k, 1).put_tensor_map(0, bytes(64)), "a tensor map of 64 bytes"),
])
def test_struct_members_that_do_not_fit_their_parameter_are_refused(params_kernel, build, match):
    with pytest.raises(LaunchError, match=match):
        build(params_kernel)


def test_struct_arguments_are_their_members_bytes(params_kernel):
    """The bytes are the members at their offsets and zeros elsewhere; a tensor map's rules still apply inside."""
    a = StructArg.of(params_kernel, 1).put_tensor_map(0, _map()).put(128, np.uint32(9)).value()
    raw = bytes(a)
    assert len(raw) == 256 and raw[:128] == _map() and raw[128:132] == b"\x09\0\0\0" and not any(raw[132:])
    with pytest.raises(TensorMapError, match="boxDim is non-zero and <= 256"):
        StructArg.of(params_kernel, 1).put_tensor_map(0, "FLOAT32", 1, BASE, (64,), (), (512,), (1,))
    shape, small = StructArg.of(params_kernel, 0).value(), StructArg.of(params_kernel, 2).value()
    params_kernel((1,), (1,), (shape, a, small, np.uint32(1)))
    with pytest.raises(LaunchError, match=r"numpy.void96 \(12 bytes\) for parameter 1 \(k_atom: .b8\[256\]"):
        params_kernel((1,), (1,), (shape, shape, small, np.uint32(1)))  # another parameter's struct
