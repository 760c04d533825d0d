"""Instruction descriptor: worked values, round trips, illegal words."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simtc.cli import main
from simtc.errors import DescriptorError
from simtc.mma.idesc import FORMAT_CODES, InstrDescriptor

# worked values (bf16 x bf16 -> f32), computed from PTX ISA 9.0 §9.7.16.4.2 Table 42 (CUTLASS
# UMMA::InstrDescriptor, include/cute/arch/mma_sm100_desc.hpp line 416 at 7107b05, builds the same words);
# 0x04200490 / 0x04410490 are FlashMLA's QK / PV words (config.h lines 196-202 at 9241ae3; also in its SASS)
GOLDEN = [
    (128, 256, "K", "K", 0x08400490), (128, 128, "K", "K", 0x08200490), (128, 64, "K", "K", 0x08100490),
    (64, 256, "K", "K", 0x04400490), (64, 128, "K", "K", 0x04200490), (64, 64, "K", "K", 0x04100490),
    (64, 8, "K", "K", 0x04020490), (64, 256, "K", "MN", 0x04410490), (32, 256, "K", "K", 0x02400490),
    (128, 128, "MN", "MN", 0x08218490), (256, 256, "K", "K", 0x10400490),
]


@pytest.mark.parametrize("m,n,am,bm,word", GOLDEN)
def test_worked_values(m, n, am, bm, word):
    d = InstrDescriptor(kind="f16", m=m, n=n, a_format="bf16", b_format="bf16", a_major=am, b_major=bm)
    assert d.encode() == word
    assert InstrDescriptor.from_u32(word) == d


@st.composite
def descriptors(draw):
    kind = draw(st.sampled_from(["f16", "tf32", "f8f6f4", "i8"]))
    fmts = list(FORMAT_CODES[kind])
    a = draw(st.sampled_from(fmts))
    b = a if kind in ("f16", "i8") else draw(st.sampled_from(fmts))
    d = {"f16": "fp32" if a == "bf16" else draw(st.sampled_from(["fp16", "fp32"])), "tf32": "fp32",
         "f8f6f4": draw(st.sampled_from(["fp16", "fp32"])), "i8": "s32"}[kind]
    mn_ok = {"fp16", "bf16", "tf32", "e4m3", "e5m2", "u8", "s8"}
    sparse = kind != "tf32" and draw(st.booleans())
    return InstrDescriptor(
        kind=kind, m=draw(st.sampled_from([32, 64, 128, 256])), n=8 * draw(st.integers(1, 32)), a_format=a,
        b_format=b, d_format=d, a_major=draw(st.sampled_from(["K", "MN"])) if a in mn_ok else "K",
        b_major=draw(st.sampled_from(["K", "MN"])) if b in mn_ok else "K",
        negate_a=kind != "i8" and draw(st.booleans()), negate_b=kind != "i8" and draw(st.booleans()),
        sparse=sparse, sparsity_selector=draw(st.integers(0, 3)) if sparse else 0,
        saturate=kind == "i8" and draw(st.booleans()), max_shift=draw(st.sampled_from([0, 8, 16, 32])))


@given(descriptors())
def test_decode_encode_identity(d):
    w = d.encode()
    assert 0 <= w < 1 << 32
    assert InstrDescriptor.from_u32(w, d.kind) == d


@pytest.mark.parametrize("word,match", [
    (0x04200490 | 1 << 6, "reserved bit 6"),
    (0x04200490 | 1 << 23, "reserved bit 23"),
    (0x04200490 | 1 << 29, "reserved bit 29"),
    (0x04200490 & ~(0x1F << 24), "M field 0"),
    (0x04200490 & ~(0x1F << 24) | 3 << 24, "M field 3"),
    (0x04200490 & ~(0x3F << 17), "N field 0"),
    (0x04200490 & ~(0x3F << 17) | 33 << 17, "N field 33"),
    (0x04200490 | 3 << 4, "D format code 3"),
    (0x04200480, "bf16 inputs need an F32"),  # D = F16 with BF16 inputs
    (0x04200090, "A and B of one type"),  # A F16, B BF16
    (0x04200490 & ~(7 << 7) | 6 << 7, "a_format code 6"),
    (1 << 32, "32-bit"),
])
def test_illegal_words(word, match):
    with pytest.raises(DescriptorError, match=match):
        InstrDescriptor.from_u32(word)


def test_illegal_fields():
    with pytest.raises(DescriptorError, match="cannot be MN-major"):
        InstrDescriptor(kind="f8f6f4", m=128, n=128, a_format="e2m1", b_format="e4m3", a_major="MN")
    with pytest.raises(DescriptorError, match="not a kind::tf32 input"):
        InstrDescriptor(kind="tf32", m=128, n=128, a_format="bf16", b_format="bf16")
    with pytest.raises(DescriptorError, match="negate"):
        InstrDescriptor(kind="i8", m=128, n=128, a_format="s8", b_format="s8", d_format="s32", negate_a=True)
    with pytest.raises(DescriptorError, match="unknown kind"):
        InstrDescriptor(kind="f64", m=128, n=128, a_format="bf16", b_format="bf16")


def test_kind_inference_is_stated():
    d = InstrDescriptor.from_u32(0x04200490)
    assert d.kind == "f16" and any("does not encode the kind" in s for s in d.explain())
    assert InstrDescriptor.from_u32(0x04200490, "f8f6f4").a_format == "e5m2"
    assert InstrDescriptor.from_u32(0x08200910).kind == "tf32"


@pytest.mark.parametrize("word,expect", [
    ("0x04200490", {"kind": "f16", "m": 64, "n": 128, "a_format": "bf16", "b_format": "bf16", "d_format": "fp32",
                    "a_major": "K", "b_major": "K", "negate_a": False, "negate_b": False, "sparse": False,
                    "max_shift": 0}),
    ("0x04410490", {"m": 64, "n": 256, "b_major": "MN"}),
    ("0x08200490", {"m": 128, "n": 128, "a_major": "K"}),
    ("0x08218490", {"m": 128, "n": 128, "a_major": "MN", "b_major": "MN"}),
])
def test_cli_decode_idesc(capsys, word, expect):
    assert main(["decode", "idesc", word, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert {k: got[k] for k in expect} == expect
    assert main(["decode", "idesc", word]) == 0
    out = capsys.readouterr().out
    assert f"M = {expect['m']}" in out and "K per instruction is 16" in out


def test_cli_rejects_reserved_bits(capsys):
    assert main(["decode", "idesc", "0x04200450"]) == 2
    assert "reserved bit 6" in capsys.readouterr().err
