"""The sm_100a dual-GEMM kernel builds with the expected tcgen05 SASS; sm_90a rejects it."""

import importlib.util

import numpy as np
import pytest

from simtc.hw.tcgen05 import PARAM_DTYPE, build_checks, kernel_source, pack_params

HAVE = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None


@pytest.mark.skipif(not HAVE, reason="cuda-bindings + nvidia-cuda-nvrtc (dev extra) not installed")
def test_build_and_sass_counts():
    results = {r.check: r for r in build_checks()}
    r = results["build sm_100a tcgen05 dual-GEMM kernel"]
    if r.status == "skipped":
        pytest.skip(r.detail)
    assert r.status == "pass", r.detail
    # 18 MMAs, 18 copies, one commit, 13 x16 loads (208 columns): literals, not the module's own table
    for op, n in {"UTCHMMA.WS": 18, "UTCCP.T.S": 18, "UTCBAR": 1, "LDTM.x16": 13}.items():
        assert f"{op} x{n}" in r.detail
    rej = results["sm_90a rejects tcgen05"]
    assert rej.status == "pass" and "not supported on .target 'sm_90a'" in rej.detail


def test_source_is_header_free():
    src = kernel_source()
    assert "#include" not in src
    assert src.count("tcgen05.mma.ws.cta_group::1.kind::f16") == 1  # unrolled 18 times by the compiler


def test_param_block_matches_the_c_struct():
    # struct SimtcDualQk: u64[18], u32[18], u64[18], u32[18], u32[18], 4 x u32 -> 520 bytes, C alignment
    assert PARAM_DTYPE.itemsize == 520
    assert PARAM_DTYPE.fields["b_desc"][1] == 216 and PARAM_DTYPE.fields["d_col"][1] == 504
    raw = pack_params(cp_desc=np.arange(18), cp_col=256 + 8 * np.arange(18), b_desc=np.arange(18) + 100,
                      a_col=256 + 8 * np.arange(18), enable_d=[0] + [1] * 17, d_col=400, idesc=0x04200490,
                      image_bytes=147456)
    p = np.frombuffer(raw, dtype=PARAM_DTYPE)[0]
    assert p["idesc"] == 0x04200490 and p["image_chunks"] == 9216 and p["bar_offset"] == 147456


def test_kernel_inputs_come_from_the_simulator_records():
    from simtc.hw.tcgen05 import IMAGE_BYTES, dual_qk_inputs, predict_dual_qk
    from simtc.kernels.flashmla import q_copies, qk_mmas
    from simtc.numerics.cases import mma_operands

    q = mma_operands("normal", 64, 64, 576, seed=1)[0]
    k = mma_operands("normal", 64, 64, 576, seed=2)[0]
    image, params = dual_qk_inputs(q, k)
    p = np.frombuffer(params, dtype=PARAM_DTYPE)[0]
    assert image.size == IMAGE_BYTES
    assert [int(x) for x in p["cp_desc"]] == [c.desc.encode() for c in q_copies()]
    assert [int(x) for x in p["b_desc"]] == [m.b_desc.encode() for m in qk_mmas(1)]
    assert list(p["a_col"]) == [m.a for m in qk_mmas(1)]
    assert int(p["idesc"]) == 0x04200490 and list(p["enable_d"]).count(0) == 1
    cells = predict_dual_qk(q, k)
    assert cells.shape == (128, 208) and cells.dtype == np.uint32
