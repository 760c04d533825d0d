"""tcgen05.ld/st maps against CuTe's own trait definitions, read from the nvidia-cutlass wheel's headers.

A second, independent derivation next to the C++-generated table (``test_ldst_oracle.py``):
for every ``Copy_Traits<SM100_TMEM_LOAD_*>`` in ``cute/atom/copy_traits_sm100.hpp`` this test
parses ``DstLayout`` ((thread, register bit) -> logical bit) and ``ValID`` (logical bit ->
TMEM bit address, lane stride ``TMEM::DP_b`` = 2**21 bits), evaluates them as CuTe layouts
(colexicographic, hierarchical) for every thread and every register bit, and compares the
TMEM lane, column and bit with simtc's map. Every ``SM100_TMEM_STORE_*`` trait must be the
load's with source and destination swapped (st = inverse of ld). Skipped when the wheel's
headers are not installed.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from simtc.tmem import LdStOp, all_ops

DP_B = 1 << 21  # cute/arch/tmem_allocator_sm100.hpp: TMEM::DP_b


def _header() -> Path | None:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(next(iter(spec.submodule_search_locations))) / "source/include/cute/atom/copy_traits_sm100.hpp"
    return p if p.exists() else None


HEADER = _header()
pytestmark = pytest.mark.skipif(HEADER is None, reason="nvidia-cutlass wheel (cutlass_library CuTe headers) "
                                                      "not installed")


def _parse_layout(text: str):
    """'Layout<Shape <...>, Stride<...>>' -> (shape, stride) as nested tuples of ints."""
    t = text.replace("TMEM::DP_b", str(DP_B))
    t = re.sub(r"\b_(\d+)\b", r"\1", t)
    t = re.sub(r"\b(Layout|Shape|Stride)\s*<", "(", t).replace(">", ",)")
    val = ast.literal_eval(t)                 # (shape, stride) or (shape,) for Layout<_32>
    shape = val[0]
    stride = val[1] if len(val) > 1 else None
    return shape, stride


def _flatten(shape, stride):
    if isinstance(shape, tuple):
        out = []
        for i, s in enumerate(shape):
            out += _flatten(s, stride[i] if stride is not None else None)
        return out
    return [(shape, stride)]


def _eval_mode(shape, stride, x: np.ndarray) -> np.ndarray:
    """One mode of a CuTe layout on integer coordinates x (colexicographic within the mode)."""
    out = np.zeros_like(x)
    for s, d in _flatten(shape, stride):
        out += (x % s) * d
        x = x // s
    return out


def _traits() -> dict[str, dict[str, str]]:
    src = HEADER.read_text()
    out = {}
    for m in re.finditer(r"struct Copy_Traits<(SM100_TMEM_(?:LOAD|STORE)_\w+)>\s*\{(.*?)\n\};", src, re.S):
        body = {k: v for k, v in re.findall(r"using (\w+)\s*=\s*(.*?);", m.group(2), re.S)}
        out[m.group(1)] = body
    return out


TRAITS = _traits() if HEADER is not None else {}


def test_every_load_and_store_trait_is_covered():
    loads = {k for k in TRAITS if "_LOAD_" in k}
    assert loads == {op.cutlass for op in all_ops()}
    assert {k.replace("_STORE_", "_LOAD_") for k in TRAITS if "_STORE_" in k} == loads


@pytest.mark.parametrize("op", all_ops(), ids=lambda op: op.cutlass)
def test_load_map_matches_cute_traits_bit_for_bit(op: LdStOp):
    tr = TRAITS[op.cutlass]
    (t_shape, v_shape), (t_stride, v_stride) = _parse_layout(tr["DstLayout"])
    val_shape, val_stride = _parse_layout(tr["ValID"])
    nbits = 32 * op.nregs
    t = np.arange(32)[:, None]
    v = np.arange(nbits)[None, :]
    logical = _eval_mode(t_shape, t_stride, t + 0 * v) + _eval_mode(v_shape, v_stride, v + 0 * t)
    addr = _eval_mode(val_shape, val_stride, logical)                         # TMEM bit address
    lane, col, bit = addr // DP_B, (addr % DP_B) // 32, addr % 32
    reg, rbit = v // 32, v % 32
    cells = op.columns()                                                     # (32, nregs, halves)
    half = rbit // 16 if op.pack else 0 * rbit
    want_col = cells[t, reg, half]
    want_bit = rbit % 16 if op.pack else rbit
    assert (lane == op.lane_offsets()[t, reg]).all()
    assert (col == want_col).all()
    assert (bit == want_bit).all()


@pytest.mark.parametrize("op", all_ops(), ids=lambda op: op.cutlass)
def test_store_trait_is_the_load_trait_reversed(op: LdStOp):
    st = TRAITS[op.cutlass.replace("_LOAD_", "_STORE_")]
    name = op.cutlass
    assert re.sub(r"\s", "", st["SrcLayout"]) == f"typenameCopy_Traits<{name}>::DstLayout"
    assert re.sub(r"\s", "", st["DstLayout"]) == f"typenameCopy_Traits<{name}>::SrcLayout"
    assert re.sub(r"\s", "", st["ValID"]) == f"typenameCopy_Traits<{name}>::ValID"
