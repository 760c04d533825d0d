"""simtc's tensor-core numerics equal MMA-Sim bit for bit on the committed golden data.

``tests/data/mmasim_golden.npz`` was produced by MMA-Sim 2.1.1 (``tests/oracle/regen_mmasim.py``;
provenance in ``tests/data/README_mmasim.md``): 13,056 records / 14,592 k16 instructions over
every operand distribution, bf16 and fp16, tcgen05 (sm100) and wgmma (sm90), chains of four
instructions, and hand-built special-value edge cases. MMA-Sim itself is not needed here.
"""

import collections
import importlib.util
import sys
from pathlib import Path

import pytest

from simtc.numerics import tensor_core_mma

ORACLE = Path(__file__).parents[1] / "oracle" / "regen_mmasim.py"


@pytest.fixture(scope="module")
def regen():
    spec = importlib.util.spec_from_file_location("regen_mmasim", ORACLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["regen_mmasim"] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("regen_mmasim", None)


def test_every_golden_record_is_bit_exact(regen):
    counts = collections.Counter()
    instructions = 0
    failures = []
    for case in regen.golden_cases():
        a, b, c = regen.case_operands(case)
        d = tensor_core_mma(a, b, c, dtype=case.dtype, instr_k=16, arch=case.arch)
        msg = regen.compare(case, d)
        counts[(case.kind, case.arch, case.dtype)] += 1
        instructions += a.shape[1] // 16
        if msg is not None:
            failures.append(msg)
    assert not failures, f"{len(failures)} mismatches; first: {failures[0]}"
    assert sum(counts.values()) >= 10_000 and instructions >= 10_000
    assert {k[0] for k in counts} == {"full", "digest", "chain", "edge"}
    assert {(k[1], k[2]) for k in counts} == {(a, d) for a in ("sm100", "sm90") for d in ("bf16", "fp16")}
