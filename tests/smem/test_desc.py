"""Shared-memory descriptors: golden words, encode/decode laws, every illegal encoding."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simtc.errors import DescriptorError
from simtc.smem import CanonicalLayout, SmemDescriptor, SwizzleMode

# (layout, sm100 word, sm90 word): issue #2 golden values; CuTe make_umma_desc / make_gmma_desc print the
# SW128 pair for a 64x16 bf16 K-slice (tests/data/cute_smem_layouts.json.gz, tests/data/README.md).
GOLDEN = [
    (("bf16", "K", "SW128", 64, 64), 0x4000404000010000, 0x4000004000010000),
    (("bf16", "K", "SW64", 64, 32), 0x8000402000010000, 0x8000002000010000),
    (("bf16", "K", "SW32", 64, 16), 0xC000401000010000, 0xC000001000010000),
]


@pytest.mark.parametrize("shape,w100,w90", GOLDEN)
def test_golden_descriptors_from_tiles(shape, w100, w90):
    d = CanonicalLayout(*shape).descriptor()
    assert d.encode() == w100
    assert d.to_arch("sm90").encode() == w90
    assert SmemDescriptor.from_u64(w100).to_arch("sm90").encode() == w90


def test_worked_descriptor_values():
    # worked out from PTX ISA 9.0 §9.7.16.4.1 Table 40 / §9.7.15.5.1.2.2; FlashMLA's S, V and dequant[1] K
    # operands (config.h lines 107-111, 127-134, 159-194 at 9241ae3) give the second to fourth
    cases = [
        (dict(start=0, lbo=128, sbo=256, layout_type="INTERLEAVE"), 0x0000401000080000, 0x0000001000080000),
        (dict(start=0, lbo=1024, sbo=128, layout_type="INTERLEAVE"), 0x0000400800400000, 0x0000000800400000),
        (dict(start=0, lbo=8192, sbo=1024, layout_type="SW128"), 0x4000404002000000, None),
        (dict(start=73728, lbo=16, sbo=1024, layout_type="SW128"), 0x4000404000011200, None),
    ]
    for f, w100, w90 in cases:
        d = SmemDescriptor(**f)
        assert d.encode() == w100
        if w90 is not None:
            assert d.to_arch("sm90").encode() == w90
    assert SmemDescriptor(start=0, lbo=16, sbo=512, layout_type="SW64").encode() >> 32 == 0x80004020


def test_k_stepping_advances_the_start_like_cutlass():
    t = CanonicalLayout("bf16", "K", "SW128", 128, 256)  # FlashMLA's dual 128-row view of K NoPE
    starts = [t.descriptor(k_slice=k).start for k in range(16)]
    assert starts == [16384 * (k // 4) + 32 * (k % 4) for k in range(16)]  # FlashMLA's QK NoPE B starts
    d = t.descriptor()
    assert d.advance(32).encode() - d.encode() == 2  # descriptor low word += 2 per K step
    mn = CanonicalLayout("bf16", "MN", "SW128", 64, 64)
    assert [mn.descriptor(k_slice=k).start for k in range(4)] == [0, 2048, 4096, 6144]  # start += 2*SBO


fields = st.fixed_dictionaries({
    "start": st.integers(0, (1 << 14) - 1).map(lambda x: x << 4),
    "lbo": st.integers(0, (1 << 14) - 1).map(lambda x: x << 4),
    "sbo": st.integers(0, (1 << 14) - 1).map(lambda x: x << 4),
    "layout_type": st.sampled_from(list(SwizzleMode)),
    "base_offset": st.integers(0, 7),
    "lbo_mode": st.integers(0, 1),
})


@given(fields)
def test_decode_encode_is_identity_sm100(f):
    if f["layout_type"] is SwizzleMode.INTERLEAVE:
        f["base_offset"] = 0
    d = SmemDescriptor(**f)
    w = d.encode()
    assert 0 <= w < 1 << 64
    assert SmemDescriptor.from_u64(w) == d
    assert SmemDescriptor.from_u64(w).encode() == w


@given(fields)
def test_decode_encode_is_identity_sm90(f):
    if f["layout_type"] is SwizzleMode.SW128_32B:
        f["layout_type"] = SwizzleMode.SW128
    if f["layout_type"] is SwizzleMode.INTERLEAVE:
        f["base_offset"] = 0
    f["lbo_mode"] = 0
    d = SmemDescriptor(arch="sm90", **f)
    assert SmemDescriptor.from_u64(d.encode(), "sm90") == d


@pytest.mark.parametrize("word,match", [
    (0x6000404000010000, "layout type 3"),
    (0xA000404000010000, "layout type 5"),
    (0xE000404000010000, "layout type 7"),
    (0x4000004000010000, "bits 46-48"),  # an sm90 word decoded as sm100
    (0x4000C04000010000, "bits 46-48"),
    (0x4000404000014000, "reserved bits 14-15"),
    (0x40004040C0010000, "reserved bits 30-31"),
    (0x4020404000010000, "reserved bits 53-60"),
    (1 << 64, "64-bit"),
    (-1, "64-bit"),
])
def test_illegal_sm100_words(word, match):
    with pytest.raises(DescriptorError, match=match) as e:
        SmemDescriptor.from_u64(word)
    assert e.value.rule and "PTX" in (e.value.ref or "PTX")


@pytest.mark.parametrize("word,match", [
    (0x4000404000010000, "reserved bits 46-48.*sm100"),
    (0x4010004000010000, "reserved bits 52-61"),
])
def test_illegal_sm90_words(word, match):
    with pytest.raises(DescriptorError, match=match):
        SmemDescriptor.from_u64(word, "sm90")


@pytest.mark.parametrize("kw,match", [
    (dict(start=8), "16-byte aligned"),
    (dict(lbo=24), "16-byte aligned"),
    (dict(sbo=1 << 18), "does not fit the 14-bit field"),
    (dict(lbo=-16), "does not fit"),
    (dict(base_offset=8), "base_offset must be 0..7"),
    (dict(layout_type="INTERLEAVE", base_offset=1), "without a swizzle"),
    (dict(layout_type="SW128_32B", arch="sm90"), "does not exist on sm90"),
    (dict(lbo_mode=1, arch="sm90"), "no LBO mode"),
    (dict(arch="sm80"), "unknown architecture"),
])
def test_illegal_fields(kw, match):
    f = dict(start=0, lbo=16, sbo=1024, layout_type="SW128") | kw
    with pytest.raises(DescriptorError, match=match):
        SmemDescriptor(**f)


def test_base_offset_rule():
    d = SmemDescriptor(start=1024 + 256, lbo=16, sbo=1024, layout_type="SW128")
    d.check_base_offset(2048)  # pattern on its boundary: 0 is right
    with pytest.raises(DescriptorError, match="must be 2"):
        d.check_base_offset(1024 + 256)
    SmemDescriptor(start=256, lbo=16, sbo=1024, layout_type="SW128", base_offset=2).check_base_offset(256)
    SmemDescriptor(start=512 + 128, lbo=16, sbo=512, layout_type="SW64", base_offset=5).check_base_offset(640)


def test_explain_mentions_every_field():
    text = " ".join(SmemDescriptor.from_u64(0x4000404000011200).explain())
    for word in ("73728", "SWIZZLE_128B", "1024", "Base offset 0"):
        assert word in text
    text = " ".join(SmemDescriptor(start=256, lbo=16, sbo=1024, layout_type="SW128", base_offset=2).explain())
    assert "measured on an H200" in text
