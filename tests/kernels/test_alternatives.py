"""FlashMLA head64's design alternatives: fits, refusals, counts and engine measurements."""

import pytest

from simtc.kernels.flashmla import alternatives as alt
from simtc.kernels.flashmla.head64 import head64_program


@pytest.fixture(scope="module")
def rows():
    return {v.name: v for v in alt.compare("v32", 4, 0)}


def test_dual_gemm_fits_duplicated_q_does_not(rows):
    base, dup = rows["dual-gemm"], rows["duplicated-q"]
    assert base.fits and base.tmem_columns == 464 and base.ok and base.mma_per_block == 26
    assert not dup.fits and dup.tmem_columns == 576 and "would block" in dup.why  # the allocator's own refusal
    assert len(rows) >= 5 and all(v.ok is not False for v in rows.values())


def test_ss_variant_budget_and_traffic(rows):
    ss = rows["ss-q-smem"]
    assert ss.smem_bytes == 232192 + 73728 and not ss.fits and ss.mma_per_block == 36 + 8
    assert ss.smem_bytes_per_qk_mma == 4096 and ss.smem_operand_bytes_per_block == 36 * 4096 + 8 * 10240
    assert rows["dual-gemm"].smem_operand_bytes_per_block == 18 * 4096 + 8 * 10240  # 72 KiB + 80 KiB
    assert ss.tensor_pipe_busy_per_block > rows["dual-gemm"].tensor_pipe_busy_per_block


def test_layout_f(rows):
    one, split = rows["layout-f-one-slab"], rows["layout-f-split"]
    assert not one.fits and one.tmem_columns == 256 + 288 + 64
    assert split.fits and split.ok and split.tmem_columns == 464 and split.mma_per_block == 44
    assert split.tensor_pipe_busy_per_block > rows["dual-gemm"].tensor_pipe_busy_per_block  # II = N/2


def test_timing_variants_keep_the_numerics(rows):
    for name in ("prefill-overlap", "b0-b1-collectors"):
        assert rows[name].ok and rows[name].checks.startswith("semantics")
    assert rows["prefill-overlap"].cycles_per_block < rows["dual-gemm"].cycles_per_block
    assert rows["b0-b1-collectors"].tensor_pipe_busy_per_block < rows["dual-gemm"].tensor_pipe_busy_per_block


def test_exchange_instructions_are_the_kernels():
    p = head64_program("v32", 2)
    assert alt.exchange_instructions(p) == {"LDTM.x32 (extra)": 1, "STS.128": 8, "LDS.128": 8, "FADD2": 16,
                                            "BAR.SYNC (pair)": 1}
    assert sum(alt.exchange_instructions(alt.ss_q_smem(p)).values()) == 0


def test_model1_duplicated_q_needs_544():
    need, why = alt._dup_q_refusals(alt.model("model1"))
    assert need == 544 and "544 > 512" in why


def test_hbm_bound():
    hb = alt.hbm_bound("v32")
    # the SM's share of the B200's measured 7.22 TB/s at 1.965 GHz over 148 SMs: 3,674 / 148 B/cycle
    assert hb["bytes_per_block"] == 64 * (656 + 4) and hb["bytes_per_cycle_per_sm"] == round(3674 / 148, 2)
    assert hb["min_cycles_per_block"] == round(64 * 660 / (3674 / 148), 1)
