"""Bad inputs to the Python API: each raises the SimtcError subclass naming the rule, never a bare numpy error."""

import numpy as np
import pytest

from simtc.errors import (
    BankError,
    DtypeError,
    LaneQuadrantError,
    ShapeError,
    SimtcError,
    SwizzleError,
    TmemAccessError,
    TmemAllocError,
    TmemError,
)
from simtc.numerics import fused_dot_add, tensor_core_mma
from simtc.numerics.formats import decode_bits, encode_bits
from simtc.smem import swizzle
from simtc.smem.banks import bank_conflicts, bank_of
from simtc.tmem import LdStOp, TensorMemory, datapath_layout
from simtc.tmem.address import TmemAddress

ONE = np.ones((2, 16), np.float32)


def _tm() -> TensorMemory:
    tm = TensorMemory()
    tm.alloc(512)
    return tm


def _regs(value, dtype=None) -> np.ndarray:
    return np.full((32, 1), value, dtype=dtype)


BAD = {
    # tcgen05.st: registers are 32-bit bit patterns; nothing is converted silently
    "st float64 1.5": (lambda: _tm().st(0, _regs(1.5), warp=0), TmemError, "32-bit bit patterns"),
    "st float32 without dtype": (lambda: _tm().st(0, _regs(1.0, np.float32), warp=0), TmemError, "bit patterns"),
    "st 2**40": (lambda: _tm().st(0, _regs(2**40), warp=0), TmemError, "integers 0..2**32-1"),
    "st -1 as u32": (lambda: _tm().st(0, _regs(-1), warp=0), TmemError, "integers 0..2**32-1"),
    "st 2**31 as s32": (lambda: _tm().st(0, _regs(2**31), warp=0, dtype="s32"), TmemError, "explicit dtype"),
    "st 0.1 as f32": (lambda: _tm().st(0, _regs(0.1), warp=0, dtype="f32"), TmemError, "explicit dtype"),
    "st unknown dtype": (lambda: _tm().st(0, _regs(1), warp=0, dtype="bf16"), TmemError, "u32, s32, f32"),
    "st strings": (lambda: _tm().st(0, [["a"]] * 32, warp=0), TmemError, "bit patterns"),
    "st booleans": (lambda: _tm().st(0, _regs(True), warp=0), TmemError, "bit patterns"),
    "st ragged": (lambda: _tm().st(0, [[1], [1, 2]], warp=0), TmemError, "bit patterns"),
    "st wrong shape": (lambda: _tm().st(0, np.zeros(32, np.uint32), warp=0), TmemError, "registers per thread"),
    "st warp 32": (lambda: _tm().st(0, _regs(1, np.uint32), warp=32), LaneQuadrantError, "CTA warp index 0-31"),
    # the allocator and the lane quadrants: a CTA has warps 0-31
    "alloc warp 40": (lambda: TensorMemory().alloc(32, warp=40), TmemAllocError, "CTA warp index 0-31"),
    "alloc warp -1": (lambda: TensorMemory().alloc(32, warp=-1), TmemAllocError, "CTA warp index 0-31"),
    "alloc warp 1.0": (lambda: TensorMemory().alloc(32, warp=1.0), TmemAllocError, "CTA warp index 0-31"),
    "alloc 48 columns": (lambda: TensorMemory().alloc(48), TmemAllocError, "power of two"),
    "dealloc warp 99": (lambda: _tm().dealloc(0, 512, warp=99), TmemAllocError, "CTA warp index 0-31"),
    "ld warp 99": (lambda: _tm().ld(0, warp=99), LaneQuadrantError, "CTA warp index 0-31"),
    "ld .x3": (lambda: LdStOp("32x32b", 3), TmemError, ".num is a power of two"),
    "datapath M=96": (lambda: datapath_layout(96, 128), ShapeError, "M in {64, 128}"),
    # tensor_core_mma: instr_k is what one kind::f16 instruction consumes (16); K a positive multiple of it
    "mma instr_k=7": (lambda: tensor_core_mma(ONE, ONE, instr_k=7), ShapeError, "instr_k is the K one instruction"),
    "mma instr_k=32": (lambda: tensor_core_mma(ONE, ONE, instr_k=32), ShapeError, "kind::f16: 16"),
    "mma instr_k=True": (lambda: tensor_core_mma(ONE, ONE, instr_k=True), ShapeError, "kind::f16: 16"),
    "mma K=0": (lambda: tensor_core_mma(ONE[:, :0], ONE[:, :0]), ShapeError, "M, N, K >= 1"),
    "mma M=0": (lambda: tensor_core_mma(ONE[:0], ONE), ShapeError, "M, N, K >= 1"),
    "mma K=24": (lambda: tensor_core_mma(ONE[:, :8].repeat(3, 1), ONE[:, :8].repeat(3, 1)), ShapeError,
                 "positive multiple of instr_k"),
    "mma 1-D A": (lambda: tensor_core_mma(ONE[0], ONE), ShapeError, "A is (M, K)"),
    "mma strings": (lambda: tensor_core_mma("a", "b"), DtypeError, "numeric arrays"),
    "mma float64": (lambda: tensor_core_mma(ONE.astype(np.float64), ONE), DtypeError, "operands as float32"),
    "mma C shape": (lambda: tensor_core_mma(ONE, ONE, np.zeros((3, 3), np.float32)), ShapeError, "C is (M, N)"),
    "mma arch": (lambda: tensor_core_mma(ONE, ONE, arch="sm80"), SimtcError, "modelled architectures"),
    "mma not bf16": (lambda: tensor_core_mma(ONE + np.float32(2**-12), ONE), DtypeError, "values of the input type"),
    # fused_dot_add: the same shape and type rules (before they were numpy broadcast errors and KeyErrors)
    "fdpa K mismatch": (lambda: fused_dot_add(ONE, ONE[:, :8], np.zeros((2, 2))), ShapeError, "B is (N, K)"),
    "fdpa C shape": (lambda: fused_dot_add(ONE, ONE, np.zeros((3, 3))), ShapeError, "C is (M, N)"),
    "fdpa 1-D": (lambda: fused_dot_add(ONE[0], ONE, np.zeros((1, 2))), ShapeError, "A is (M, K)"),
    "fdpa fmt": (lambda: fused_dot_add(ONE, ONE, np.zeros((2, 2)), fmt="e4m3"), DtypeError, "f16 or bf16"),
    "fdpa strings": (lambda: fused_dot_add("a", ONE, np.zeros((2, 2))), DtypeError, "numeric arrays"),
    # shared memory
    "swizzle negative": (lambda: swizzle(-16, "SW128"), SwizzleError, "unsigned"),
    "swizzle float": (lambda: swizzle(1.5, "SW128"), SwizzleError, "integers"),
}


@pytest.mark.parametrize("case", BAD, ids=str)
def test_bad_input_names_the_rule(case):
    call, error, rule = BAD[case]
    with pytest.raises(SimtcError) as info:  # anything else (IndexError, numpy's ValueError) fails the test
        call()
    err = info.value
    assert isinstance(err, error), f"{type(err).__name__} is not a {error.__name__}"
    assert err.rule and "[rule: " in str(err) and rule in err.rule, str(err)


def test_bad_input_count():
    assert len(BAD) >= 15


def test_st_stores_exactly_what_it_is_told():
    tm = _tm()
    tm.st(0, _regs(0xFFFFFFFF, np.uint32), warp=0)  # uint32 bit patterns
    assert int(tm.cells[0, 0]) == 0xFFFFFFFF
    tm.st(0, [[7]] * 32, warp=0)  # plain integers that fit
    assert int(tm.cells[31, 0]) == 7
    tm.st(0, _regs(1.5, np.float32), warp=0, dtype="f32")  # the float's bits, not int(1.5)
    assert int(tm.cells[0, 0]) == 0x3FC00000
    tm.st(0, _regs(1.5), warp=0, dtype="fp32")  # float64 values exact in fp32
    assert float(tm.ld(0, warp=0).view(np.float32)[5, 0]) == 1.5
    tm.st(0, _regs(-2), warp=0, dtype="s32")  # two's complement
    assert int(tm.cells[0, 0]) == 0xFFFFFFFE
    tm.st(0, _regs(np.nan, np.float32), warp=0, dtype="f32")
    assert np.isnan(tm.ld(0, warp=0).view(np.float32)).all()
    with pytest.raises(TmemError):
        tm.st(0, _regs(2**32), warp=0)
    assert int(tm.cells[0, 0]) == np.float32(np.nan).view(np.uint32)  # a refused store writes nothing


def test_warp_31_is_the_last_legal_warp():
    tm = TensorMemory()
    tm.alloc(32, warp=31)
    tm.st(3 * 32 << 16, _regs(5, np.uint32), warp=31)  # warp 31 -> quadrant 3, lanes 96-127
    assert int(tm.ld(3 * 32 << 16, warp=31)[0, 0]) == 5


def test_instr_k_16_is_accepted():
    assert tensor_core_mma(ONE, ONE, instr_k=16)[0, 0] == 16.0


# --- bit patterns, TMEM addresses, bank addresses -------------------------------------------------------------

@pytest.mark.parametrize(("call", "err"), [
    (lambda: decode_bits(70000, "bf16"), DtypeError),
    (lambda: decode_bits(-1, "bf16"), DtypeError),
    (lambda: decode_bits(1.5, "fp16"), DtypeError),
    (lambda: decode_bits("x", "fp16"), DtypeError),
    (lambda: encode_bits("x", "bf16"), DtypeError),
    (lambda: TmemAddress.from_taddr(1.5), TmemAccessError),
    (lambda: TmemAddress.from_taddr("0"), TmemAccessError),
    (lambda: bank_of(-4), BankError),
    (lambda: bank_of(1.5), BankError),
    (lambda: bank_conflicts([0, -8, 16], 4), BankError),
], ids=["decode-wide", "decode-negative", "decode-float", "decode-str", "encode-str", "taddr-float", "taddr-str",
        "bank-negative", "bank-float", "conflicts-negative"])
def test_bits_and_addresses_refused(call, err):
    with pytest.raises(err) as info:
        call()
    assert info.value.rule


def test_bit_pattern_inputs_still_accepted():
    assert decode_bits(np.array([0x3F80], dtype=np.int64), "bf16")[0] == 1.0
    assert decode_bits([0x3C00], "fp16")[0] == 1.0
    assert int(bank_of(np.int32(260))) == 1
    assert bank_conflicts([0, -1, 8], 4).wavefronts == 1
