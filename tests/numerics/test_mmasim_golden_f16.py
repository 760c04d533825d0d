"""fp16 accumulators: simtc equals MMA-Sim bit for bit (tests/data/mmasim_golden_f16.npz).

1,152 records (both archs x every distribution: 64 single k16 instructions and 8 chains of four),
produced by ``tests/oracle/regen_mmasim_f16.py`` with MMA-Sim 2.1.1. Not measured on hardware.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np

from simtc.numerics import tensor_core_mma

ORACLE = Path(__file__).parents[1] / "oracle" / "regen_mmasim_f16.py"


def _module():
    spec = importlib.util.spec_from_file_location("regen_mmasim_f16", ORACLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["regen_mmasim_f16"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_every_fp16_accumulator_record_is_bit_exact():
    regen = _module()
    with np.load(regen.DATA_FILE) as z:
        d, arch, dist, seed, k = z["d"], z["arch"], z["dist"], z["seed"], z["k"]
    assert len(seed) == 1152 and set(arch) == {"sm100", "sm90"}
    for i in range(len(seed)):
        a, b, c = regen.operands(str(dist[i]), int(seed[i]), int(k[i]))
        got = tensor_core_mma(a, b, c, dtype="fp16", arch=str(arch[i]), d_dtype="fp16")
        want = d[i].view(np.float16).astype(np.float32)
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (str(arch[i]), str(dist[i]), int(seed[i]), np.argwhere(~same)[0])
