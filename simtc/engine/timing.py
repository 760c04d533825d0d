"""The tensor pipe's MMA model: latency and initiation interval of ``tcgen05.mma`` and ``wgmma`` from mechanisms.

The numbers come from the labelled parameter tables of :mod:`simtc.engine.parameters` (re-exported here:
``PARAMETERS``, ``Parameter``, ``parameter``, ``LABELS``, ``ARCHS``); every function takes an optional
:class:`~simtc.engine.parameters.Timing` (overridden values; default: the architecture's table).

The MMA model is built from mechanisms, not from measured rows (each figure with its source in the parameter
table, :mod:`simtc.engine.parameters`; the measured rows it is checked against are in
:mod:`simtc.engine.calibration`):

* **compute**: the tensor datapath does ``512·K`` dense FLOP/cycle/SM, so an MMA of ``rows x N x K``
  takes ``2·rows·N·K / (512·K) = rows·N / 256`` cycles -- independent of K and of the input type.
  A 1-SM non-``.ws`` MMA occupies the 128-row datapath whatever its M (M=64, Layout F, wastes half):
  N/2 cycles, i.e. 2 columns per cycle. ``.ws`` uses M rows (N/8, N/4, N/2 for M = 32, 64, 128);
  ``cta_group::2`` gives each SM M/2 rows.
* **shared-memory port**: 128 B/cycle. Every operand row of a K-slice is 32 bytes (K=16 x 2 B, K=8 x 4 B,
  K=32 x 1 B), so A costs ``M·32`` bytes (SS only), B ``N·32`` bytes per MMA (per SM: halves for
  ``cta_group::2``). In the engine this is the SM's one shared-memory port, which other readers and
  writers share (:mod:`simtc.engine.smem_port`); alone, an MMA sees the whole port.
* **stream**: B is streamed column by column with the computation: ``max(compute, B bytes / 128)``.
* **initiation interval** of a back-to-back chain = the bottleneck: ``max(compute, port bytes / 128,
  .ws B-collector cycle, front-end floor)``.
* **.ws B collector**: with one collector (``b0::discard``) the next MMA's B fill can only begin when the
  current MMA reaches its last 8-column group, and a fill takes a fixed startup before data flows:
  ``stream + startup - group``; two collectors (``b0``/``b1`` ping-pong) halve that cycle; reuse
  removes B traffic.
* **latency** (one MMA + commit + mbarrier wait observed by the issuing warp, as SemiAnalysis measures it):
  ``issue + A fetch (SS: A bytes / 128) + stream + pipeline drain + commit arrive + try_wait observe``;
  the drain is ``mma_fixed_latency_ts - mma_issue - commit_arrive - mbarrier_try_wait`` (the measured
  fixed latency, split by assumption).

>>> t = predict_mma("sm100", 128, 64, operands="SS")
>>> t.latency_cycles, t.ii_cycles          # B200: 168 and 48.02 measured
(168, 48)
>>> t.breakdown["a_fetch"], t.ii_bounds["smem_port"]
(32, 48)
>>> predict_mma("sm100", 64, 128, operands="TS", ws=True).ii_cycles   # GB200: 44.46 (b0::discard)
44
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType

from attrs import field, frozen

from simtc.engine.parameters import ARCHS, LABELS, PARAMETERS, Parameter, Timing, parameter
from simtc.errors import ShapeError, SimtcError

__all__ = [
    "ARCHS",
    "LABELS",
    "PARAMETERS",
    "MmaSpec",
    "MmaTiming",
    "Parameter",
    "Timing",
    "a_fetch_cycles",
    "compute_cycles",
    "drain_cycles",
    "mma_completion_cycles",
    "mma_ii_bounds",
    "mma_latency_breakdown",
    "mma_occupancy_cycles",
    "mma_spec",
    "operand_bytes",
    "parameter",
    "port_bytes_per_mma",
    "predict_mma",
    "stream_cycles",
]


# ---- the instruction being timed ------------------------------------------------------------------
_KIND_OF = {"fp16": "f16", "f16": "f16", "bf16": "f16", "tf32": "tf32", "e4m3": "f8f6f4", "e5m2": "f8f6f4",
            "e2m3": "f8f6f4", "e3m2": "f8f6f4", "e2m1": "f8f6f4", "u8": "i8", "s8": "i8"}
# Dense K per kind and the bytes of one operand row of that K-slice (PTX ISA 9.0 §9.7.16.2.1 Table 39;
# f6/f4 inputs of kind::f8f6f4 sit in 8-bit containers in shared memory).
_KIND_K = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}
_ROW_BYTES = {"f16": 32, "tf32": 32, "f8f6f4": 32, "i8": 32}
_TCGEN05_REF = "PTX ISA 9.0 §9.7.16.10.9"
_WGMMA_REF = "PTX ISA 9.0 §9.7.15.5.2"


@frozen
class MmaSpec:
    """One MMA instruction as the timing model sees it (built and checked by :func:`mma_spec`)."""

    arch: str
    m: int
    n: int
    k: int
    operands: str
    ws: bool
    collector: str
    cta_group: int
    dtype: str
    kind: str

    @property
    def ptx(self) -> str:
        """The instruction's PTX spelling (shape and form)."""
        if self.arch == "sm90":
            return f"wgmma.mma_async m64n{self.n}k{self.k}.{self.dtype} ({self.operands})"
        ws = ".ws" if self.ws else ""
        return f"tcgen05.mma{ws}.cta_group::{self.cta_group}.kind::{self.kind} M={self.m} N={self.n} ({self.operands})"


def mma_spec(arch: str, m: int, n: int, k: int | None = None, operands: str = "SS", ws: bool = False,
             collector: str = "discard", cta_group: int = 1, dtype: str = "bf16") -> MmaSpec:
    """Check an MMA's legality and return its :class:`MmaSpec`; illegal forms raise naming the rule.

    ``k`` defaults to the kind's dense K (16 for bf16/f16); ``collector`` is the ``.ws`` B collector
    usage (``discard`` = ``b0::discard`` on every MMA, ``pingpong`` = alternating ``b0``/``b1``
    ``::discard``, ``reuse`` = ``fill``/``use``/``lastuse``); without ``.ws`` only ``discard``
    (the default ``collector::a::discard``) and ``reuse`` (``collector::a`` reuse of an SS A) exist.

    >>> mma_spec("sm100", 64, 128, ws=True).ptx
    'tcgen05.mma.ws.cta_group::1.kind::f16 M=64 N=128 (SS)'
    >>> mma_spec("sm100", 64, 64, ws=True, cta_group=2)
    Traceback (most recent call last):
    ...
    simtc.errors.ShapeError: tcgen05.mma.ws has no cta_group::2 form [rule: .ws is cta_group::1 only; PTX ISA 9.0 \
§9.7.16.4.2 Table 42, §9.7.16.10.9]
    """
    if arch not in ARCHS:
        raise SimtcError(f"unknown architecture {arch!r}; modelled: {', '.join(ARCHS)}",
                         rule="timing tables exist for sm100 and sm90")
    for name, v in (("m", m), ("n", n), ("cta_group", cta_group)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ShapeError(f"{name} must be an integer, got {v!r}", rule="integer MMA shape")
    kind = _KIND_OF.get(dtype)
    if kind is None:
        raise SimtcError(f"input type {dtype!r} is not modelled; known: {', '.join(sorted(_KIND_OF))}",
                         rule="dense kinds f16, tf32, f8f6f4, i8 (block-scaled kinds are not modelled)",
                         ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
    if k is None:
        k = _KIND_K[kind]
    if k != _KIND_K[kind]:
        raise ShapeError(f"K = {k} for kind::{kind}: a dense MMA of this kind has K = {_KIND_K[kind]}",
                         rule=f"K is implicit: {_KIND_K[kind]} for dense kind::{kind}",
                         ref="PTX ISA 9.0 §9.7.16.2.1 Table 39")
    if collector not in ("discard", "pingpong", "reuse"):
        raise SimtcError(f"collector must be discard, pingpong or reuse, got {collector!r}",
                         rule="collector usages", ref=_TCGEN05_REF)
    if arch == "sm90":
        return _wgmma_spec(m, n, k, operands, ws, collector, cta_group, dtype, kind)
    if operands == "RS":
        raise ShapeError("tcgen05.mma has no register A operand: A comes from shared memory (SS) or TMEM (TS)",
                         rule="tcgen05.mma A is a shared-memory descriptor or a TMEM address", ref=_TCGEN05_REF)
    if operands not in ("SS", "TS"):
        raise ShapeError(f"operands must be SS or TS on sm100, got {operands!r}", rule="tcgen05.mma operand forms",
                         ref=_TCGEN05_REF)
    if ws and cta_group != 1:
        raise ShapeError("tcgen05.mma.ws has no cta_group::2 form", rule=".ws is cta_group::1 only",
                         ref="PTX ISA 9.0 §9.7.16.4.2 Table 42, §9.7.16.10.9")
    if collector == "pingpong" and not ws:
        raise SimtcError("b0/b1 collector ping-pong needs .ws (collector::b0..b3 are .ws qualifiers)",
                         rule=".collector::b* is .ws only", ref=_TCGEN05_REF)
    from simtc.tmem.layouts import datapath_layout  # legality lives with the data-path layouts

    try:
        datapath_layout(m, n, ws=ws, cta_group=cta_group)
    except SimtcError as e:
        raise ShapeError(f"tcgen05.mma{'.ws' if ws else ''} M={m} N={n}: {e.message}", rule=e.rule,
                         ref=e.ref or "PTX ISA 9.0 §9.7.16.2.1 Table 39") from None
    return MmaSpec("sm100", m, n, k, operands, bool(ws), collector, cta_group, dtype, kind)


def _wgmma_spec(m, n, k, operands, ws, collector, cta_group, dtype, kind) -> MmaSpec:
    if operands == "TS":
        raise ShapeError("wgmma has no TMEM operand: A comes from shared memory (SS) or registers (RS)",
                         rule="wgmma A is a shared-memory descriptor or registers", ref=_WGMMA_REF)
    if operands not in ("SS", "RS"):
        raise ShapeError(f"operands must be SS or RS on sm90, got {operands!r}", rule="wgmma operand forms",
                         ref=_WGMMA_REF)
    if ws or collector != "discard" or cta_group != 1:
        raise ShapeError("wgmma has no .ws, collector or cta_group qualifiers (those are tcgen05.mma's)",
                         rule="wgmma.mma_async qualifiers", ref=_WGMMA_REF)
    if kind != "f16":
        raise SimtcError(f"wgmma timing is modelled for bf16/f16 only, got {dtype!r}",
                         rule="modelled wgmma input types", ref=_WGMMA_REF)
    if m != 64:
        raise ShapeError(f"wgmma M is 64 (m64nNk16), got {m}", rule="m64nNk16 shapes", ref=_WGMMA_REF)
    from simtc.mma.wgmma import _check_n  # the one N rule for wgmma

    _check_n(n)
    return MmaSpec("sm90", m, n, k, operands, False, "discard", 1, dtype, kind)


# ---- component functions (what the engine's tensor-pipe unit composes) ---------------------------
def _v(spec: MmaSpec, name: str, used: list | None, timing: Timing | None = None) -> int | float:
    p = parameter(spec.arch, name)
    if used is not None and p not in used:
        used.append(p)
    return p.value if timing is None else timing[name]


def _cycles(x: Fraction) -> int:
    """Whole cycles (time in the engine is an integer cycle); exact for every legal shape."""
    return math.ceil(x)


def operand_bytes(spec: MmaSpec) -> tuple[int, int]:
    """Bytes of A and of B one SM reads for one MMA: ``(rows of A, columns of B) x 32 B``.

    ``cta_group::2``: each CTA supplies M/2 rows of A and N/2 columns of B. A is counted whatever
    its source (see :func:`port_bytes_per_mma` for what passes the shared-memory port).

    >>> operand_bytes(mma_spec("sm100", 128, 64))
    (4096, 2048)
    """
    row = _ROW_BYTES[spec.kind]
    split = spec.cta_group
    return spec.m // split * row, spec.n // split * row


def _datapath_rows(spec: MmaSpec, used: list | None, timing: Timing | None = None) -> int:
    if spec.arch == "sm90":
        return spec.m
    if spec.cta_group == 2:
        return spec.m // 2
    return spec.m if spec.ws else int(_v(spec, "mma_datapath_rows", used, timing))


def compute_cycles(spec: MmaSpec, used: list | None = None, timing: Timing | None = None) -> int:
    """Datapath time of one MMA: ``2·rows·N·K / peak`` (peak = 512·K on sm100, 4,096 bf16 on sm90).

    >>> [compute_cycles(mma_spec("sm100", m, 256, ws=True)) for m in (32, 64, 128)]
    [32, 64, 128]
    >>> compute_cycles(mma_spec("sm100", 64, 256)), compute_cycles(mma_spec("sm90", 64, 256))
    (128, 128)
    """
    rows = _datapath_rows(spec, used, timing)
    if spec.arch == "sm90":
        peak = Fraction(_v(spec, "wgmma_flop_per_cycle", used, timing))
    else:
        peak = Fraction(_v(spec, "mma_flop_per_cycle_per_k", used, timing)) * spec.k
    return _cycles(Fraction(2 * rows * spec.n * spec.k) / peak)


def _port(spec: MmaSpec, nbytes: int, used: list | None, timing: Timing | None = None) -> Fraction:
    return Fraction(nbytes) / Fraction(_v(spec, "smem_port_bytes_per_cycle", used, timing))


def a_fetch_cycles(spec: MmaSpec, used: list | None = None, timing: Timing | None = None) -> int:
    """Time to bring A through the shared-memory port before the columns stream (SS only; 0 for TS/RS).

    The mechanism behind the SS latency offsets: SS M=64 reads 2 KiB (16 cycles = 120 - 104),
    M=128 4 KiB (32 = 136 - 104).

    >>> a_fetch_cycles(mma_spec("sm100", 64, 64)), a_fetch_cycles(mma_spec("sm100", 128, 64, operands="TS"))
    (16, 0)
    """
    if spec.operands != "SS" or spec.arch == "sm90":  # sm90: the operand-specific tail holds it
        return 0
    return _cycles(_port(spec, operand_bytes(spec)[0], used))


def stream_cycles(spec: MmaSpec, used: list | None = None, timing: Timing | None = None) -> int:
    """N columns streamed with B through the port: ``max(compute, B bytes / 128)``.

    >>> stream_cycles(mma_spec("sm100", 32, 256, ws=True))    # B-path bound: N/4, not N/8
    64
    """
    return max(compute_cycles(spec, used, timing), _cycles(_port(spec, operand_bytes(spec)[1], used)))


def port_bytes_per_mma(spec: MmaSpec) -> int:
    """Bytes through the shared-memory port per MMA of a long chain on the same operands.

    A (SS only) is read again by every MMA unless it is reused (non-``.ws`` ``collector::a`` reuse);
    B is read by every MMA unless the ``.ws`` B collector is reused.

    >>> port_bytes_per_mma(mma_spec("sm100", 128, 64)), port_bytes_per_mma(mma_spec("sm100", 128, 64, operands="TS"))
    (6144, 2048)
    """
    a, b = operand_bytes(spec)
    reuse = spec.collector == "reuse"
    a_read = a if spec.operands == "SS" and not (reuse and not spec.ws) else 0
    b_read = 0 if (reuse and spec.ws) else b
    return a_read + b_read


def mma_ii_bounds(spec: MmaSpec, used: list | None = None, timing: Timing | None = None) -> dict[str, int]:
    """Each resource's time per MMA in a back-to-back chain; the II is their maximum.

    Keys: ``compute``, ``smem_port``, ``front_end`` (sm100 floor / sm90 issue interval) and, for
    ``.ws``, ``b_collector``.

    >>> mma_ii_bounds(mma_spec("sm100", 128, 64, ws=True, operands="TS"))
    {'compute': 32, 'smem_port': 16, 'front_end': 9, 'b_collector': 42}
    """
    comp = compute_cycles(spec, used, timing)
    nbytes = port_bytes_per_mma(spec)
    port = _port(spec, nbytes, used, timing)
    a = operand_bytes(spec)[0]
    if spec.arch == "sm100" and spec.operands == "SS" and nbytes == a:  # A fetched, no B fill to hide behind
        port += _v(spec, "ss_a_fetch_startup", used, timing)
    front = "wgmma_issue" if spec.arch == "sm90" else "mma_min_ii"
    bounds = {"compute": comp, "smem_port": _cycles(port), "front_end": int(_v(spec, front, used, timing))}
    if spec.ws:
        if spec.collector == "reuse":
            bounds["b_collector"] = comp
        else:
            stream = Fraction(stream_cycles(spec, used, timing))
            # time of the last column group; with one collector the next fill starts after its release
            group = stream * int(_v(spec, "mma_column_group", used, timing)) / spec.n
            cycle = stream + int(_v(spec, "ws_b_fill_startup", used, timing)) - group
            bounds["b_collector"] = _cycles(cycle if spec.collector == "discard" else max(stream, cycle / 2))
    return bounds


def mma_occupancy_cycles(spec: MmaSpec, used: list | None = None, timing: Timing | None = None) -> int:
    """How long one MMA holds the tensor pipe in a chain (the II): ``max(mma_ii_bounds(spec))``.

    Without ``used`` the answer is cached per :class:`MmaSpec` (the engine asks once per MMA).

    >>> mma_occupancy_cycles(mma_spec("sm100", 64, 128, ws=True, collector="pingpong", operands="TS"))
    32
    """
    if used is None:
        return _occupancy_cached(spec, timing)
    return max(mma_ii_bounds(spec, used, timing).values())


@functools.cache
def _occupancy_cached(spec: MmaSpec, timing: Timing | None) -> int:
    return max(mma_ii_bounds(spec, None, timing).values())


def drain_cycles(spec: MmaSpec, used: list | None = None, timing: Timing | None = None) -> int:
    """The tensor pipe's drain after the last column (sm100): what remains of the measured fixed latency
    ``mma_fixed_latency_ts`` after ``mma_issue``, ``commit_arrive`` and ``mbarrier_try_wait`` (the split of the
    measured sum is assumed; at least 0).

    >>> drain_cycles(mma_spec("sm100", 64, 64))       # 104 - 1 - 29 - 44
    30
    """
    rest = (_v(spec, "mma_fixed_latency_ts", used, timing) - _v(spec, "mma_issue", used, timing)
            - _v(spec, "commit_arrive", used, timing) - _v(spec, "mbarrier_try_wait", used, timing))
    return max(0, math.ceil(rest))


def mma_latency_breakdown(spec: MmaSpec, used: list | None = None, timing: Timing | None = None) -> dict[str, int]:
    """The components of one MMA + commit + mbarrier wait, in the order they happen (sum = latency).

    sm100: ``issue, a_fetch, stream, drain, [pair], commit_arrive, mbarrier_observe``;
    sm90: ``issue, stream, tail`` (``tail`` holds commit_group/wait_group; calibrated on the H200).

    >>> mma_latency_breakdown(mma_spec("sm100", 128, 128))
    {'issue': 1, 'a_fetch': 32, 'stream': 64, 'drain': 30, 'commit_arrive': 29, 'mbarrier_observe': 44}
    """
    if spec.arch == "sm90":
        tail = "wgmma_tail_ss" if spec.operands == "SS" else "wgmma_tail_rs"
        return {"issue": int(_v(spec, "wgmma_issue", used, timing)), "stream": stream_cycles(spec, used, timing),
                "tail": int(_v(spec, tail, used, timing))}
    parts = {"issue": int(_v(spec, "mma_issue", used, timing)), "a_fetch": a_fetch_cycles(spec, used, timing),
             "stream": stream_cycles(spec, used, timing), "drain": drain_cycles(spec, used, timing)}
    if spec.cta_group == 2:
        parts["pair"] = int(_v(spec, f"pair_latency_m{spec.m}", used, timing))
    parts["commit_arrive"] = int(_v(spec, "commit_arrive", used, timing))
    parts["mbarrier_observe"] = int(_v(spec, "mbarrier_try_wait", used, timing))
    return parts


def mma_completion_cycles(spec: MmaSpec, used: list | None = None, timing: Timing | None = None) -> int:
    """Issue to completion of the MMA (D written; what a later ``tcgen05.commit`` waits for).

    The latency the microbenchmark reports adds ``commit_arrive`` and ``mbarrier_observe`` (sm100).

    Without ``used`` the answer is cached per :class:`MmaSpec`.

    >>> mma_completion_cycles(mma_spec("sm100", 64, 64, operands="TS"))
    63
    """
    if used is None:
        return _completion_cached(spec, timing)
    return _completion(spec, used, timing)


@functools.cache
def _completion_cached(spec: MmaSpec, timing: Timing | None) -> int:
    return _completion(spec, None, timing)


def _completion(spec: MmaSpec, used: list | None, timing: Timing | None = None) -> int:
    parts = mma_latency_breakdown(spec, used, timing)
    return sum(v for k, v in parts.items() if k not in ("commit_arrive", "mbarrier_observe"))


@frozen
class MmaTiming:
    """What :func:`predict_mma` returns: latency, II, their components and the parameters used."""

    spec: MmaSpec
    latency_cycles: int
    ii_cycles: int
    breakdown: Mapping[str, int] = field(hash=False, eq=False)
    """Latency components in order (:func:`mma_latency_breakdown`); they sum to ``latency_cycles``."""
    ii_bounds: Mapping[str, int] = field(hash=False, eq=False)
    """Per-resource time per MMA (:func:`mma_ii_bounds`); ``ii_cycles`` is the largest."""
    parameters: tuple[Parameter, ...]

    @property
    def bottleneck(self) -> str:
        """The resource that sets the II (the first of equals, in ``ii_bounds`` order)."""
        return max(self.ii_bounds, key=lambda k: self.ii_bounds[k])

    def as_dict(self) -> dict:
        """``{"latency_cycles", "ii_cycles", "breakdown", "ii_bounds", "parameters": [...]}`` for ``--json``."""
        return {"instruction": self.spec.ptx, "latency_cycles": self.latency_cycles, "ii_cycles": self.ii_cycles,
                "breakdown": dict(self.breakdown), "ii_bounds": dict(self.ii_bounds),
                "parameters": [p.as_dict() for p in self.parameters]}


def predict_mma(arch: str, m: int, n: int, k: int | None = None, operands: str = "SS", ws: bool = False,
                collector: str = "discard", cta_group: int = 1, dtype: str = "bf16",
                timing: Timing | None = None) -> MmaTiming:
    """Latency (one MMA + commit + mbarrier wait) and II (back-to-back chain) of an MMA.

    ``timing``: the parameter values to use (default: ``arch``'s table); it must be of ``arch``.

    >>> t = predict_mma("sm100", 64, 256, operands="TS")
    >>> t.latency_cycles, t.ii_cycles, t.bottleneck        # B200: 232 and 128.03
    (232, 128, 'compute')
    >>> predict_mma("sm90", 64, 256).latency_cycles        # H200: 186 = 128 + 58
    186
    >>> predict_mma("sm100", 64, 64, operands="RS")
    Traceback (most recent call last):
    ...
    simtc.errors.ShapeError: tcgen05.mma has no register A operand: A comes from shared memory (SS) or TMEM (TS) \
[rule: tcgen05.mma A is a shared-memory descriptor or a TMEM address; PTX ISA 9.0 §9.7.16.10.9]
    """
    spec = mma_spec(arch, m, n, k, operands, ws, collector, cta_group, dtype)
    if timing is not None and timing.arch != arch:
        raise SimtcError(f"a {timing.arch} Timing cannot time an {arch} MMA", rule="one architecture per Timing")
    used: list[Parameter] = []
    breakdown = mma_latency_breakdown(spec, used, timing)
    bounds = mma_ii_bounds(spec, used, timing)
    return MmaTiming(spec, sum(breakdown.values()), max(bounds.values()), MappingProxyType(breakdown),
                     MappingProxyType(bounds), tuple(used))
