"""The H200 record of ``wgmma.mma_async`` with A from registers (the RS form): cases, kernel, launch, recording.

Each :class:`RsCase` is a chain of four ``wgmma.mma_async.sync.aligned.m64nNk16.<d>.<t>.<t> d, {a0, a1, a2, a3},
b-desc, p, imm-scale-a, imm-scale-b, imm-trans-b`` (K = 64) on one accumulator: A's registers packed by
:func:`simtc.mma.wgmma.matrix_to_a_fragment`, B's tile written into a shared-memory image by :mod:`simtc.smem` and
read through sm90 descriptors, the accumulator loaded from C (:func:`simtc.mma.wgmma.matrix_to_fragment`). The
kernel is ``simtc/hw/cuda/wgmma_rs_record.cu`` (one per N, types, B major and scales; it holds no layout logic).

The same :func:`launch` runs it on a GPU through CuPy and in simtc's PTX executor through :mod:`simtc.cuda`
(``launch(cupy, ...)`` / ``launch(simtc.cuda, ...)``), so a recording checks the executor's register gathering and
the wgmma model together; :func:`predict` is the model alone (:func:`simtc.mma.wgmma.wgmma_mma_async_rs`).

Recording on an sm_90a GPU (numpy, attrs and CuPy; writes every case's inputs and the raw output registers)::

    PYTHONPATH=$PWD python3 -P -m simtc.hw.wgmma_rs record OUT.npz

``tests/ptx/test_wgmma_rs.py`` compares simtc with ``tests/data/h200_wgmma_rs.npz`` (skipped while it is absent).
"""

from __future__ import annotations

import json
import sys
from importlib import resources

import numpy as np
from attrs import frozen

from simtc.errors import SimtcError
from simtc.mma.wgmma import matrix_to_a_fragment, matrix_to_fragment, wgmma_mma_async_rs
from simtc.numerics.cases import mma_operands
from simtc.smem import CanonicalLayout, SharedMemory

__all__ = ["CASES", "INSTRUCTIONS", "RsCase", "RsInputs", "build", "kernel_name", "kernel_source", "launch",
           "predict", "read_record", "record"]

INSTRUCTIONS = 4
"""Instructions per case (K = 64)."""
_PTX_T = {"bf16": "bf16", "fp16": "f16", "fp32": "f32"}
_SWIZZLES = ("SW128", "SW64", "SW32", "INTERLEAVE")


@frozen
class RsCase:
    """One recorded chain: N, input and accumulator types, B's major, the operands' distribution and seed, the
    immediate scales. Odd seeds start with scale-d = 0 (the loaded accumulator ignored)."""

    n: int
    dtype: str
    d_dtype: str
    b_major: str
    dist: str
    seed: int
    scale_a: int = 1
    scale_b: int = 1

    @property
    def key(self) -> str:
        return (f"m64n{self.n}k16_{_PTX_T[self.d_dtype]}_{_PTX_T[self.dtype]}_B{self.b_major}_{self.dist}{self.seed}"
                f"_sa{'n' if self.scale_a < 0 else 'p'}_sb{'n' if self.scale_b < 0 else 'p'}")

    @property
    def swizzle(self) -> str:
        return _SWIZZLES[self.seed % len(_SWIZZLES)]

    @property
    def nreg(self) -> int:
        return self.n // 2 if self.d_dtype == "fp32" else self.n // 4


def _cases() -> tuple[RsCase, ...]:
    out = []
    for dtype, d_dtype in (("bf16", "fp32"), ("fp16", "fp32"), ("fp16", "fp16")):
        for n in (64, 128):
            for b_major in ("K", "MN"):
                out += [RsCase(n, dtype, d_dtype, b_major, "normal", 0),
                        RsCase(n, dtype, d_dtype, b_major, "wide", 1),
                        RsCase(n, dtype, d_dtype, b_major, "wide", 2, scale_a=-1),
                        RsCase(n, dtype, d_dtype, b_major, "cancel", 3, scale_b=-1),
                        RsCase(n, dtype, d_dtype, b_major, "overflow", 5)]
    return tuple(out)


CASES = _cases()
"""bf16 and fp16 inputs with an f32 D, fp16 inputs with an f16 D; N = 64 and 128; B K- and MN-major; normal, wide
(two seeds, one with imm-scale-a = -1), cancelling (imm-scale-b = -1) and near-overflow operands: 60 chains."""


@frozen(eq=False)
class RsInputs:
    """What the kernel is given: the image (B's tile), A's registers (INSTRUCTIONS, 128, 4), B's descriptors, scale-d
    per instruction and the accumulator's raw words (128, nreg); and the matrices they were made from."""

    image: np.ndarray
    a_regs: np.ndarray
    b_descs: np.ndarray
    scale_d: np.ndarray
    acc_in: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray


def build(case: RsCase) -> RsInputs:
    """The case's inputs (deterministic: :func:`simtc.numerics.cases.mma_operands`)."""
    k = 16 * INSTRUCTIONS
    a, b, c = mma_operands(case.dist, 64, case.n, k, dtype=case.dtype, seed=case.seed)
    if case.d_dtype == "fp16":  # an f16 accumulator holds f16 values
        c = np.clip(c, -65504, 65504).astype(np.float16).astype(np.float32)
    tile = CanonicalLayout(case.dtype, case.b_major, case.swizzle, case.n, k)
    size = -(-tile.nbytes // 1024) * 1024
    sm = SharedMemory(arch="sm90", size=size)
    sm.write_tile(tile, b, 0)
    descs = np.array([tile.descriptor(arch="sm90", start=0, k_slice=i).encode() for i in range(INSTRUCTIONS)],
                     np.uint64)
    a_regs = np.stack([matrix_to_a_fragment(a[:, 16 * i:16 * i + 16], case.dtype) for i in range(INSTRUCTIONS)])
    scale_d = np.ones(INSTRUCTIONS, np.uint32)
    scale_d[0] = 0 if case.seed % 2 else 1
    acc = matrix_to_fragment(c, d_dtype=case.d_dtype)
    acc = acc.view(np.uint32) if case.d_dtype == "fp32" else acc
    return RsInputs(np.array(sm.data[:size]), a_regs, descs, scale_d, np.ascontiguousarray(acc), a, b, c)


def kernel_name(case: RsCase) -> str:
    sa, sb = ("n" if s < 0 else "p" for s in (case.scale_a, case.scale_b))
    return (f"simtc_wgmma_rs_m64n{case.n}k16_{_PTX_T[case.d_dtype]}_{_PTX_T[case.dtype]}_B{case.b_major}_{sa}{sb}")


def kernel_source(case: RsCase) -> str:
    """CUDA source of the case's kernel (``simtc/hw/cuda/wgmma_rs_record.cu`` filled in)."""
    text = resources.files("simtc.hw.cuda").joinpath("wgmma_rs_record.cu").read_text()
    nreg = case.nreg
    fill = {
        "NAME": kernel_name(case), "N": str(case.n), "NREG": str(nreg), "T": _PTX_T[case.dtype],
        "D": _PTX_T[case.d_dtype], "TB": "1" if case.b_major == "MN" else "0", "SA": str(case.scale_a),
        "SB": str(case.scale_b), "ACC_LIST": ", ".join(f"%{i}" for i in range(nreg)),
        "ACC_BIND": ", ".join(f'"+r"(d[{i}])' for i in range(nreg)),
        **{f"A_IDX{j}": str(nreg + j) for j in range(4)}, "B_IDX": str(nreg + 4), "SD_IDX": str(nreg + 5),
    }
    for key, value in fill.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def launch(xp, case: RsCase, inputs: RsInputs) -> np.ndarray:
    """Run the case's kernel with ``xp`` (``cupy`` on a GPU, :mod:`simtc.cuda` in simtc): the (128, nreg) uint32
    accumulator registers after the chain."""
    if xp.__name__.split(".")[0] == "cupy":  # the route the H200 cross-check uses (simtc.hw.compile)
        from simtc.hw.compile import load_kernel

        fn = load_kernel(kernel_source(case), kernel_name(case), arch="sm_90a")
    else:
        fn = xp.RawKernel(kernel_source(case), kernel_name(case), options=("-arch=sm_90a",))
    img = inputs.image
    d_image = xp.asarray(img.view(np.uint32))
    d_a = xp.asarray(np.ascontiguousarray(inputs.a_regs).reshape(-1))
    d_b = xp.asarray(inputs.b_descs)
    d_sd = xp.asarray(inputs.scale_d)
    d_acc = xp.asarray(inputs.acc_in.reshape(-1))
    d_out = xp.zeros(128 * case.nreg, dtype=np.uint32)
    smem = img.size + 1024
    fn.max_dynamic_shared_size_bytes = smem
    fn((1,), (128,), (d_image, np.uint32(img.size // 16), d_a, d_b, d_sd, np.uint32(len(inputs.scale_d)), d_acc,
                      d_out), shared_mem=smem)
    return np.asarray(d_out.get()).reshape(128, case.nreg)


def predict(case: RsCase, inputs: RsInputs) -> np.ndarray:
    """simtc's model alone on the case's inputs: the (128, nreg) uint32 registers."""
    sm = SharedMemory(arch="sm90", size=inputs.image.size)
    sm.data[:] = inputs.image
    acc = inputs.acc_in.view(np.float32) if case.d_dtype == "fp32" else inputs.acc_in
    for regs, desc, sd in zip(inputs.a_regs, inputs.b_descs, inputs.scale_d, strict=True):
        acc = wgmma_mma_async_rs(sm, regs, int(desc), n=case.n, dtype=case.dtype, b_major=case.b_major, acc=acc,
                                 scale_d=bool(sd), negate_a=case.scale_a < 0, negate_b=case.scale_b < 0,
                                 d_dtype=case.d_dtype)
    return np.ascontiguousarray(acc).view(np.uint32)


_FIELDS = ("image", "a_regs", "b_descs", "scale_d", "acc_in")


def record(path, cases=CASES, xp=None) -> dict:
    """Run every case with ``xp`` (default: CuPy) and save inputs and outputs to ``path`` (``.npz``); returns
    {key: whether simtc's model gave the same registers} (printed, so a run's log says it too)."""
    if xp is None:
        import cupy as xp
    arrays: dict[str, np.ndarray] = {}
    same = {}
    for case in cases:
        inputs = build(case)
        out = launch(xp, case, inputs)
        for f in _FIELDS:
            arrays[f"{case.key}__{f}"] = getattr(inputs, f)
        arrays[f"{case.key}__out"] = out
        same[case.key] = bool(np.array_equal(out, predict(case, inputs)))
        print(f"{case.key}: {'same as simtc' if same[case.key] else 'DIFFERS from simtc'}", flush=True)
    meta = {"cases": [{"key": c.key, "n": c.n, "dtype": c.dtype, "d_dtype": c.d_dtype, "b_major": c.b_major,
                       "dist": c.dist, "seed": c.seed, "scale_a": c.scale_a, "scale_b": c.scale_b} for c in cases]}
    try:
        props = xp.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        meta["device"] = name.decode() if isinstance(name, bytes) else str(name)
        meta["driver"] = int(xp.cuda.runtime.driverGetVersion())
    except AttributeError:  # not CuPy
        meta["device"] = "simtc"
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(path, **arrays)
    print(f"{sum(same.values())} of {len(same)} cases equal simtc's model bit for bit", flush=True)
    return same


def read_record(path) -> list[tuple[RsCase, RsInputs, np.ndarray]]:
    """A recording's cases: (case, its inputs as recorded, the recorded registers)."""
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        out = []
        for m in meta["cases"]:
            case = RsCase(m["n"], m["dtype"], m["d_dtype"], m["b_major"], m["dist"], m["seed"], m["scale_a"],
                          m["scale_b"])
            if case.key != m["key"]:
                raise SimtcError(f"recorded case {m['key']!r} reads back as {case.key!r}", rule="recording keys")
            k = case.key
            fields = {f: z[f"{k}__{f}"] for f in _FIELDS}
            empty = np.zeros(0, np.float32)
            out.append((case, RsInputs(**fields, a=empty, b=empty, c=empty), z[f"{k}__out"]))
    return out


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "record":
        print("usage: python -m simtc.hw.wgmma_rs record OUT.npz", file=sys.stderr)
        return 2
    same = record(argv[1])
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
