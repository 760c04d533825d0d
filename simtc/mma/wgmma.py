"""``wgmma.mma_async`` (sm_90a) m64nNk16: f32 or f16 accumulators in registers, A from shared memory or registers.

A warpgroup (4 warps, 128 threads) holds the 64 x N accumulator D. Fragment (PTX ISA 9.0 §9.7.15.5.1.1.1
"Matrix Fragments for wgmma.mma_async.m64nNk16", its register fragment figures for A and for the accumulator D, as
encoded in CUTLASS's ``CLayout_64xN``, ``include/cute/atom/mma_traits_sm90_gmma.hpp`` lines 433-435 at ``7107b05``;
run bit for bit on an H200, ``tests/data/h200_crosscheck_seed0.npz``): thread t = 32w + l, element i (0 <= i < N/2)

* row(t, i) = 16 w + l // 4 + 8 ((i // 2) % 2)
* col(t, i) = 8 (i // 4) + 2 (l % 4) + (i % 2)

With an ``.f32`` D element i is register i (N/2 ``.f32`` registers per thread). With an ``.f16`` D the same elements
are packed two to a ``.b32`` register (N/4 ``.f16x2`` registers, elements listed low to high, the same section):
register j holds element 2j in its low half and element 2j+1 (the odd column beside it) in its high half; CUTLASS's
``CLayout`` for the ``F16F16F16`` atoms is the same ``CLayout_64xN`` (``SM90_64x64x16_F16F16F16_SS``'s traits, line
671), its values two to a ``uint32_t`` register (``CRegisters = uint32_t[16]``,
``include/cute/arch/mma_sm90_gmma.hpp`` line 421).

A in registers (the RS form, 16-bit A): four ``.b32`` registers per thread, eight values a0..a7, value i at
(row, col) = the formula above with N = 16 (the same section's figure for matrix A, four ``.f16x2`` registers; CUTLASS
``ALayout_64x16``, ``mma_traits_sm90_gmma.hpp`` lines 451-452 at ``7107b05``, which is ``CLayout_64xN<16>``
stride for stride; the RS atoms' traits use it, e.g. line 698), value 2j in the low half of register j. The RS form
is K-major only (``static_assert(tnspA == GMMA::Major::K)``, ``mma_sm90_gmma.hpp`` line 474). An H200 ran 60 RS
chains bit for bit as simtc computes them (bf16 and fp16 inputs, ``.f32`` and ``.f16`` D:
``tests/data/h200_wgmma_rs.npz``, made by :mod:`simtc.hw.wgmma_rs`).

B (and A in the SS form) comes from shared memory through descriptors (:mod:`simtc.mma.operands`); the arithmetic
is one k16 step of :func:`simtc.numerics.tensor_core_mma` with the sm90 parameters (its
:func:`~simtc.numerics.fused_dot_add`; ``d_dtype="fp16"``: rounded to nearest even to fp16 after every
instruction, reproducing CUTLASS's ``wgmma_sm90.cu`` tutorial on an H200 bit for bit,
``tests/data/h200_cute_tutorials.json``). This is the instruction the H200 cross-check executes.

>>> rows, cols = wgmma_fragment(8)
>>> rows[0].tolist(), cols[0].tolist()   # thread 0: D[0][0], D[0][1], D[8][0], D[8][1]
([0, 0, 8, 8], [0, 1, 0, 1])
>>> d = np.arange(64 * 8, dtype=np.float16).reshape(64, 8)   # D[0][1] = 1.0 (0x3C00), D[0][0] = 0
>>> regs = matrix_to_fragment(d, d_dtype="fp16")             # an .f16 D: two values per .b32 register
>>> regs.shape, hex(int(regs[0, 0]))                          # thread 0, register 0: D[0][1] high, D[0][0] low
((128, 2), '0x3c000000')
"""

from __future__ import annotations

import functools

import numpy as np

from simtc.errors import DtypeError, ShapeError, SimtcError
from simtc.mma.operands import read_operand
from simtc.numerics.fdpa import ARCH_PARAMS, fused_dot_add
from simtc.numerics.formats import decode_bits, encode_bits
from simtc.smem.desc import SmemDescriptor
from simtc.smem.memory import SharedMemory

__all__ = ["WGMMA_M", "a_fragment_to_matrix", "fragment_to_matrix", "matrix_to_a_fragment", "matrix_to_fragment",
           "wgmma_a_fragment", "wgmma_fragment", "wgmma_mma_async", "wgmma_mma_async_rs"]

WGMMA_M = 64
WGMMA_K = 16
_REF = "PTX ISA 9.0 §9.7.15.5.2"
_REF_FRAG = "PTX ISA 9.0 §9.7.15.5.1.1.1 (matrix fragments for wgmma.mma_async.m64nNk16)"
_INPUTS = ("bf16", "fp16")
_D_TYPES = ("fp32", "fp16")
_SM90 = ARCH_PARAMS["sm90"]


def _check_n(n: int) -> None:
    if not isinstance(n, int) or not (8 <= n <= 256 and n % 8 == 0):
        raise ShapeError(f"wgmma N = {n!r}: must be a multiple of 8 from 8 to 256", rule="m64nNk16 shapes", ref=_REF)


def _check_d_dtype(d_dtype: str, dtype: str | None = None) -> None:
    if d_dtype not in _D_TYPES:
        raise DtypeError(f"wgmma accumulator type {d_dtype!r}: 'fp32' (.f32) or 'fp16' (.f16)",
                         rule="wgmma accumulator types", ref=_REF)
    if dtype == "bf16" and d_dtype == "fp16":
        raise DtypeError("wgmma with .bf16 inputs accumulates into .f32 only, not .f16",
                         rule="wgmma .bf16 needs an .f32 accumulator", ref=_REF)


def wgmma_fragment(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of D element i held by thread t: two read-only int arrays of shape (128, n // 2).

    For an ``.f32`` D element i is register i; for an ``.f16`` D it is half ``i % 2`` of register ``i // 2``.
    """
    _check_n(n)
    return _fragment(n)


@functools.cache
def _fragment(n: int) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = t // 32, t % 32
    rows = 16 * w + lane // 4 + 8 * ((i // 2) % 2) + 0 * i
    cols = 8 * (i // 4) + 2 * (lane % 4) + (i % 2) + 0 * t
    rows.flags.writeable = False
    cols.flags.writeable = False
    return rows, cols


def wgmma_a_fragment() -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of A value i (0-7) held by thread t in the RS form: (128, 8) int arrays (value i in half ``i % 2``
    of register ``i // 2``). The same map as D's with N = 16 (CUTLASS ``ALayout_64x16`` = ``CLayout_64xN<16>``)."""
    return wgmma_fragment(WGMMA_K)


def _pack16(bits: np.ndarray) -> np.ndarray:
    """(128, 2j) 16-bit patterns -> (128, j) ``.b32`` registers, value 2j in the low half."""
    return np.ascontiguousarray(bits, dtype="<u2").view("<u4").astype(np.uint32)


def _unpack16(regs: np.ndarray) -> np.ndarray:
    """(128, j) ``.b32`` registers -> (128, 2j) 16-bit patterns (low half first)."""
    return np.ascontiguousarray(regs, dtype="<u4").view("<u2")


def _exact(values: np.ndarray, dtype: str, what: str) -> np.ndarray:
    """Bit patterns of ``values`` in ``dtype`` (bf16 / fp16), refusing a value the type does not hold exactly."""
    v = np.asarray(values)
    if v.dtype == np.float16 and dtype == "fp16":
        return v.view(np.uint16)
    v32 = v.astype(np.float32)
    bits = encode_bits(v32, dtype)
    back = decode_bits(bits, dtype)
    bad = ~((back == v32) | (np.isnan(back) & np.isnan(v32)))
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        raise DtypeError(f"{what}{list(i)} = {float(v32[i])!r} is not a {dtype} value", rule=f"{what} holds {dtype} "
                         "values", ref=_REF_FRAG)
    return bits


def fragment_to_matrix(regs: np.ndarray, *, d_dtype: str = "fp32") -> np.ndarray:
    """Registers -> D (64, N).

    ``d_dtype="fp32"``: (128, N/2) registers of any dtype -> (64, N) of that dtype. ``"fp16"``: (128, N/4) ``.b32``
    registers (uint32, two f16 each) -> (64, N) float16.
    """
    _check_d_dtype(d_dtype)
    regs = np.asarray(regs)
    per = 2 if d_dtype == "fp32" else 4
    if regs.ndim != 2 or regs.shape[0] != 128:
        raise ShapeError(f"accumulator registers must be (128, N/{per}), got {regs.shape}", rule="wgmma fragment",
                         ref=_REF_FRAG)
    if d_dtype == "fp16":
        if regs.dtype.kind not in "iu" or regs.dtype.itemsize != 4:
            raise DtypeError(f".f16 accumulator registers are 32-bit words (two f16 each), got {regs.dtype}",
                             rule="an .f16 D is N/4 .f16x2 registers", ref=_REF_FRAG)
        regs = _unpack16(regs.astype(np.uint32, copy=False)).view(np.float16)
    rows, cols = wgmma_fragment(2 * regs.shape[1])
    d = np.empty((WGMMA_M, 2 * regs.shape[1]), dtype=regs.dtype)
    d[rows, cols] = regs
    return d


def matrix_to_fragment(d: np.ndarray, *, d_dtype: str = "fp32") -> np.ndarray:
    """D (64, N) -> registers: (128, N/2) of D's dtype (``"fp32"``), or (128, N/4) uint32 with two f16 each
    (``"fp16"``; D's values must be fp16 values)."""
    _check_d_dtype(d_dtype)
    d = np.asarray(d)
    if d.ndim != 2 or d.shape[0] != WGMMA_M:
        raise ShapeError(f"D must be (64, N), got {d.shape}", rule="wgmma fragment", ref=_REF_FRAG)
    rows, cols = wgmma_fragment(d.shape[1])
    if d_dtype == "fp32":
        return d[rows, cols]
    return _pack16(_exact(d, "fp16", "D")[rows, cols])


def a_fragment_to_matrix(regs: np.ndarray, dtype: str = "bf16") -> np.ndarray:
    """The RS form's A registers (128, 4) ``.b32`` (two ``dtype`` values each) -> A (64, 16) float32 values."""
    _check_input(dtype)
    regs = np.asarray(regs)
    if regs.shape != (128, 4) or regs.dtype.kind not in "iu" or regs.dtype.itemsize != 4:
        raise ShapeError(f"A registers must be (128, 4) 32-bit words, got {regs.shape} {regs.dtype}",
                         rule="A from registers is four .b32 registers per thread", ref=_REF_FRAG)
    rows, cols = wgmma_a_fragment()
    bits = np.empty((WGMMA_M, WGMMA_K), np.uint16)
    bits[rows, cols] = _unpack16(regs.astype(np.uint32, copy=False))
    return decode_bits(bits, dtype)


def matrix_to_a_fragment(a: np.ndarray, dtype: str = "bf16") -> np.ndarray:
    """A (64, 16) of ``dtype`` values -> the RS form's (128, 4) uint32 registers."""
    _check_input(dtype)
    a = np.asarray(a)
    if a.shape != (WGMMA_M, WGMMA_K):
        raise ShapeError(f"A must be (64, 16), got {a.shape}", rule="m64nNk16: A is 64 x 16", ref=_REF_FRAG)
    rows, cols = wgmma_a_fragment()
    return _pack16(_exact(a, dtype, "A")[rows, cols])


def _check_input(dtype: str) -> None:
    if dtype not in _INPUTS:
        raise SimtcError(f"wgmma with {dtype!r} inputs is not modelled (bf16 and fp16 are)",
                         rule="modelled wgmma input types", ref=_REF)


def _check_smem(smem: SharedMemory) -> None:
    if smem.arch != "sm90":
        raise SimtcError("wgmma needs sm90 shared memory (SharedMemory(arch='sm90'))", rule="wgmma is sm_90a only",
                         ref=_REF)


def _accumulate(a: np.ndarray, b: np.ndarray, *, n: int, dtype: str, d_dtype: str, acc, scale_d: bool,
                negate_a: bool, negate_b: bool) -> np.ndarray:
    """One m64nNk16 step on values A (64, 16), B (N, 16) and the accumulator registers; returns the new registers."""
    a, b = (-a if negate_a else a), (-b if negate_b else b)
    if acc is None or not scale_d:
        c = np.zeros((WGMMA_M, n), np.float32)
    else:
        acc = np.asarray(acc)
        want = (128, n // 2) if d_dtype == "fp32" else (128, n // 4)
        if acc.shape != want:
            raise ShapeError(f"the .{'f32' if d_dtype == 'fp32' else 'f16'} accumulator of m64n{n}k16 is {want} "
                             f"registers, got {acc.shape}", rule="wgmma fragment", ref=_REF_FRAG)
        c = fragment_to_matrix(acc, d_dtype=d_dtype).astype(np.float32)
    # one k16 step of tensor_core_mma(a, b, c, dtype=dtype, arch="sm90", d_dtype=d_dtype): its fused_dot_add, whose
    # operand checks hold by construction here (A, B and C are decoded from their bit patterns)
    d = fused_dot_add(a, b, c, fmt=dtype, params=_SM90, out=d_dtype)
    if d_dtype == "fp32":
        return matrix_to_fragment(d)
    return matrix_to_fragment(d.astype(np.float16), d_dtype="fp16")


def wgmma_mma_async(smem: SharedMemory, a_desc: SmemDescriptor | int, b_desc: SmemDescriptor | int, *, n: int,
                    dtype: str = "bf16", a_major: str = "K", b_major: str = "K", acc: np.ndarray | None = None,
                    scale_d: bool = True, negate_a: bool = False, negate_b: bool = False,
                    d_dtype: str = "fp32") -> np.ndarray:
    """Execute one ``wgmma.mma_async.sync.aligned.m64nNk16.{d_dtype}.{dtype}.{dtype}`` with A from shared memory (SS).

    ``acc`` is the register fragment (None = zeros): (128, N/2) float32 for ``d_dtype="fp32"``, (128, N/4) uint32
    (``.f16x2`` words) for ``"fp16"`` (fp16 inputs only). With ``scale_d`` false the accumulator is ignored
    (D = A·B). ``negate_a`` / ``negate_b`` are the ``imm-scale-a`` / ``imm-scale-b`` = -1 operands. Returns the new
    register fragment, in ``acc``'s form.
    """
    _check_n(n)
    _check_input(dtype)
    _check_d_dtype(d_dtype, dtype)
    _check_smem(smem)
    a = read_operand(smem, a_desc, major=a_major, dtype=dtype, rows=WGMMA_M, k=WGMMA_K)
    b = read_operand(smem, b_desc, major=b_major, dtype=dtype, rows=n, k=WGMMA_K)
    return _accumulate(a, b, n=n, dtype=dtype, d_dtype=d_dtype, acc=acc, scale_d=scale_d, negate_a=negate_a,
                       negate_b=negate_b)


def wgmma_mma_async_rs(smem: SharedMemory, a_regs: np.ndarray, b_desc: SmemDescriptor | int, *, n: int,
                       dtype: str = "bf16", b_major: str = "K", acc: np.ndarray | None = None, scale_d: bool = True,
                       negate_a: bool = False, negate_b: bool = False, d_dtype: str = "fp32") -> np.ndarray:
    """Execute one ``wgmma.mma_async.sync.aligned.m64nNk16.{d_dtype}.{dtype}.{dtype} d, {a0,a1,a2,a3}, b-desc, ...``
    with A from registers (RS).

    ``a_regs`` is the warpgroup's (128, 4) ``.b32`` A registers (:func:`matrix_to_a_fragment`); A from registers is
    always K-major (the form has no ``imm-trans-a``), B is read through ``b_desc``. Everything else as
    :func:`wgmma_mma_async`.
    """
    _check_n(n)
    _check_input(dtype)
    _check_d_dtype(d_dtype, dtype)
    _check_smem(smem)
    a = a_fragment_to_matrix(a_regs, dtype)
    b = read_operand(smem, b_desc, major=b_major, dtype=dtype, rows=n, k=WGMMA_K)
    return _accumulate(a, b, n=n, dtype=dtype, d_dtype=d_dtype, acc=acc, scale_d=scale_d, negate_a=negate_a,
                       negate_b=negate_b)
