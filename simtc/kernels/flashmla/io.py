"""FlashMLA's own sparse-decode tensors in and out: the ``.npz`` files of ``simtc replay --inputs``.

An **inputs file** holds exactly what FlashMLA's ``flash_mla_with_kvcache`` / ``sparse_attn_decode_interface``
takes for 64 heads (``csrc/api/sparse_decode.h``), as plain numpy arrays (docs: ``flashmla_formats.md``):

* ``q``: uint16 bf16 bit patterns, ``[b, s_q, 64, d_qk]`` (d_qk 576 for V32, 512 for MODEL1);
* ``kv``: uint8 ``[num_blocks, block_stride]``, the paged fp8 cache byte for byte (:func:`kv_layout`);
* ``indices``: int32 ``[b, s_q, topk]``, flat token indices ``block * page_block_size + row``, -1 = invalid;
* ``page_block_size`` (int), ``sm_scale`` (float), ``model`` (``"v32"`` / ``"model1"``); optional
  ``attn_sink`` float32 ``[64]`` and ``topk_length`` int32 ``[b]``.

An **outputs file** holds ``out`` (uint16 bf16 bits ``[b, s_q, 64, 512]``) and ``lse`` (float32 ``[b, s_q, 64]``,
natural log; +inf and O = 0 for a row with no valid token) [kernel] ``kernel.cuh`` epilogue.

Each (batch, query) row is one request of the head64 kernel: :func:`request` converts it into the
replay's :class:`~simtc.kernels.flashmla.replay.Head64Inputs` (Q values, the cache bytes, the row's
indices and the dequantized K of the float64 reference, through :mod:`simtc.numerics.dequant`), and
:func:`replay_inputs` replays every row and gathers the outputs. :func:`make_inputs` writes random
inputs, quantizing a bf16 K the way FlashMLA's ``tests/quant.py`` ``quantize_k_cache`` does, in chunks (peak
memory near its outputs' size). :func:`make_inputs_memory` and :func:`inputs_file_memory` estimate the memory a
request needs from its sizes alone, so that ``simtc`` can refuse one that would not fit before any work. A file
that cannot be read or written raises :class:`FlashMLAFileError` naming it; a truncated or corrupt archive a
:class:`FlashMLAFormatError`.

Sources (``deepseek-ai/FlashMLA``, read at ``9241ae3`` unless another commit is named): ``csrc/api/sparse_decode.h``
(shapes, dtypes, ``bytes_per_token`` 656 / 584, ``kv.stride(1) == bytes_per_token``, ``topk_length`` [b],
``attn_sink`` [h_q]; 4855c77), ``csrc/sm100/decode/head64/kernel.cuh`` (host asserts ``topk % 64 == 0``, ``h_q ==
64``, ``stride_kv_block % TMA_K_STRIDE == 0``; index warp validity ``0 <= idx < num_blocks * page_block_size`` and
position < topk_length; blocks per request ``max(ceil(topk_length / 64), 1)``; absent ``attn_sink`` = -inf;
2c9a673), ``tests/quant.py`` (``quantize_k_cache``: the layouts and power-of-two scales; 520fec6), README "FP8 with
scale" (the 656-byte V32 record, the 584-byte MODEL1 token).

>>> inp = make_inputs("model1", b=1, s_q=2, topk=64, seed=1, empty_rows=1)
>>> inp.kv.shape, kv_layout("model1", 64)
((2, 37440), KvLayout(token_bytes=576, scale_offset=36864, min_block_stride=37376, tma_k_stride=576))
>>> r = request(inp, 0, 1)
>>> r.blocks, int(r.valid.sum())
(1, 0)
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping, Sequence

import attrs
import numpy as np
from attrs import field, frozen

from simtc.errors import SimtcError
from simtc.kernels.flashmla.constants import B_H, B_TOPK, D_V
from simtc.kernels.flashmla.kvcache import KvLayout, dequant_cache_tokens, kv_layout, token_bytes
from simtc.kernels.flashmla.models import MODELS, Head64Model, model
from simtc.numerics.formats import decode_bits, encode_bits

__all__ = [
    "INPUT_KEYS", "OPTIONAL_KEYS", "OUTPUT_KEYS", "FileReplay", "FlashMLAFileError", "FlashMLAFormatError",
    "FlashMLAInputs", "FlashMLAOutputs", "KvLayout", "dequant_tokens", "file_shapes", "inputs_file_memory", "kv_layout",
    "load_inputs", "load_outputs", "make_inputs", "make_inputs_memory", "quantize_kv", "read_npz", "replay_file",
    "replay_inputs",
    "request", "save_inputs", "save_outputs", "validate_inputs", "validate_outputs",
]

INPUT_KEYS = ("q", "kv", "indices", "page_block_size", "sm_scale", "model")
OPTIONAL_KEYS = ("attn_sink", "topk_length")
OUTPUT_KEYS = ("out", "lse")

_API = "FlashMLA csrc/api/sparse_decode.h (sparse_attn_decode_interface)"
_HOST = "FlashMLA csrc/sm100/decode/head64/kernel.cuh (host launcher)"
_INDEX = "FlashMLA csrc/sm100/decode/head64/kernel.cuh L653-743 (index warp)"
_QUANT = "FlashMLA tests/quant.py (quantize_k_cache)"
_DOC = "docs/flashmla_formats.md"
E4M3_MAX = 448.0
"""Largest finite e4m3 (e4m3fn) value; FlashMLA divides amax by 448.0 [kernel] tests/quant.py."""
SCALE_FLOOR = 1e-4
"""``clamp_min(scales_inv, 1e-4)`` before the power-of-two rounding [kernel] tests/quant.py."""


class FlashMLAFormatError(SimtcError, ValueError):
    """A FlashMLA inputs or outputs file (or array set) that breaks a rule of the format."""


class FlashMLAFileError(SimtcError, OSError):
    """A file the user named that cannot be read or written (missing, a directory, no permission, disk full)."""


_FILE_ERRORS: dict[type, type] = {OSError: FlashMLAFileError}


def _file_error(path, e: OSError, reading: bool) -> FlashMLAFileError:
    """``e`` as a :class:`FlashMLAFileError` naming ``path``; also an instance of ``e``'s own class
    (``FileNotFoundError``, ``PermissionError`` ...), with its errno, so that handlers of those keep working."""
    base = type(e)
    cls = _FILE_ERRORS.get(base)
    if cls is None:
        cls = _FILE_ERRORS[base] = type(f"FlashMLA{base.__name__}", (FlashMLAFileError, base), {})
    verb = "read" if reading else "write"
    why = e.strerror or str(e) or type(e).__name__
    err = cls(f"cannot {verb} {os.fspath(path)!r}: {why}",
              rule="an inputs file is an existing, readable .npz file" if reading else
              "an output file goes into an existing, writable directory with room for it")
    err.errno, err.filename = e.errno, os.fspath(path)
    return err


def _bad(message: str, rule: str, ref: str = _DOC) -> FlashMLAFormatError:
    return FlashMLAFormatError(message, rule=rule, ref=ref)


# ---- the KV cache layout ----------------------------------------------------------------------------------
def _default_stride(lay: KvLayout) -> int:
    """The smallest allowed block stride: V32 pbs x 656; MODEL1 pbs x 584 rounded up to a multiple of 576."""
    return -(-lay.min_block_stride // lay.tma_k_stride) * lay.tma_k_stride


# ---- values -----------------------------------------------------------------------------------------------
@frozen(eq=False)
class FlashMLAInputs:
    """One validated inputs set (arrays as stored; build with :func:`validate_inputs` or :func:`make_inputs`)."""

    model: Head64Model
    q: np.ndarray
    """uint16 bf16 bits [b, s_q, 64, d_qk]."""
    kv: np.ndarray
    """uint8 [num_blocks, block_stride]."""
    indices: np.ndarray
    """int32 [b, s_q, topk]."""
    page_block_size: int
    sm_scale: float
    attn_sink: np.ndarray | None = None
    """float32 [64] or None (FlashMLA: no sink term, i.e. -inf)."""
    topk_length: np.ndarray | None = None
    """int32 [b] or None (= topk for every batch)."""

    @property
    def b(self) -> int:
        return int(self.q.shape[0])

    @property
    def s_q(self) -> int:
        return int(self.q.shape[1])

    @property
    def topk(self) -> int:
        return int(self.indices.shape[2])

    @property
    def num_blocks(self) -> int:
        return int(self.kv.shape[0])

    @property
    def block_stride(self) -> int:
        return int(self.kv.shape[1])

    @property
    def layout(self) -> KvLayout:
        return kv_layout(self.model, self.page_block_size)

    def topk_len(self, batch: int) -> int:
        """The valid prefix of row ``batch``'s indices (``topk_length[batch]``, else topk)."""
        return self.topk if self.topk_length is None else int(self.topk_length[batch])

    def valid(self) -> np.ndarray:
        """bool [b, s_q, topk]: the index warp's validity (index >= 0 and position < topk_length)."""
        tl = np.full(self.b, self.topk) if self.topk_length is None else self.topk_length.astype(np.int64)
        return (self.indices >= 0) & (np.arange(self.topk)[None, None, :] < tl[:, None, None])

    def arrays(self) -> dict[str, np.ndarray]:
        """The file's arrays (what :func:`save_inputs` writes)."""
        out = {"q": self.q, "kv": self.kv, "indices": self.indices,
               "page_block_size": np.array(self.page_block_size, np.int64),
               "sm_scale": np.array(self.sm_scale, np.float32), "model": np.array(self.model.name)}
        if self.attn_sink is not None:
            out["attn_sink"] = self.attn_sink
        if self.topk_length is not None:
            out["topk_length"] = self.topk_length
        return out

    def describe(self) -> dict:
        v = self.valid()
        return {"model": self.model.name, "b": self.b, "s_q": self.s_q, "heads": B_H, "d_qk": self.model.d_q,
                "topk": self.topk, "num_blocks": self.num_blocks, "block_stride": self.block_stride,
                "page_block_size": self.page_block_size, "sm_scale": self.sm_scale,
                "attn_sink": self.attn_sink is not None, "topk_length": self.topk_length is not None,
                "valid_tokens": int(v.sum()), "invalid_tokens": int(v.size - v.sum()),
                "empty_rows": [[int(i), int(j)] for i, j in zip(*np.nonzero(~v.any(axis=2)), strict=True)]}


@frozen(eq=False)
class FlashMLAOutputs:
    """The kernel's outputs: ``out`` uint16 bf16 bits [b, s_q, 64, 512], ``lse`` float32 [b, s_q, 64]."""

    out: np.ndarray
    lse: np.ndarray

    def o_values(self) -> np.ndarray:
        """``out`` as float32 values."""
        return decode_bits(self.out, "bf16")

    def arrays(self) -> dict[str, np.ndarray]:
        return {"out": self.out, "lse": self.lse}


# ---- reading and checking ---------------------------------------------------------------------------------
def read_npz(path: str | os.PathLike, what: str, rule: str | None = None) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``path`` (a FlashMLA ``what`` file: inputs, outputs, a recording), read with
    ``allow_pickle=False``. A missing or unreadable file raises :class:`FlashMLAFileError`; a truncated, garbled
    or foreign one :class:`FlashMLAFormatError` naming it (what counts as damaged:
    :func:`simtc.isa.files.damaged_errors`, the one list of every simtc reader)."""
    name = os.fspath(path)
    rule = rule or f"a FlashMLA {what} file is an .npz archive (numpy.savez), complete"
    with contextlib.ExitStack() as stack:
        try:  # opened here: numpy leaves its own file open when the archive is corrupt
            fh = stack.enter_context(open(path, "rb"))
        except OSError as e:  # the file itself: missing, a directory, no permission
            raise _file_error(path, e, reading=True) from None
        return _read_npz(fh, name, what, rule)


def _read_npz(fh, name: str, what: str, rule: str) -> dict[str, np.ndarray]:
    from simtc.isa.files import damaged_errors, reading

    path = name
    with reading(name, rule, what=".npz archive", ref=_DOC, error=FlashMLAFormatError):
        try:
            f = np.load(fh, allow_pickle=False)
        except OSError as e:
            if e.errno is not None:  # an I/O error while reading
                raise _file_error(path, e, reading=True) from None
            raise
    if not isinstance(f, np.lib.npyio.NpzFile):
        raise _bad(f"{name!r} holds a single .npy array, not an .npz archive of named arrays", rule)
    out = {}
    with f:
        for k in f.files:
            try:
                out[k] = f[k]
            except ValueError as e:
                if "allow_pickle" in str(e):  # object arrays need pickle, which is refused
                    raise _bad(f"{what} array {k!r} is an object array",
                               "no pickled or object arrays (files are read with allow_pickle=False)") from None
                raise _bad(f"{name!r}: array {k!r} cannot be read ({e}); the file may be truncated or corrupt",
                           rule) from None
            except OSError as e:
                if e.errno is not None:
                    raise _file_error(path, e, reading=True) from None
                raise _bad(f"{name!r}: array {k!r} cannot be read ({e}); the file may be truncated or corrupt",
                           rule) from None
            except damaged_errors() as e:
                raise _bad(f"{name!r}: array {k!r} cannot be read ({type(e).__name__}: {e}); the file may be "
                           "truncated or corrupt", rule) from None
    return out


def _array(arrays: Mapping, key: str, kind: str, itemsize: int, ndim: int, what: str, ref: str = _API) -> np.ndarray:
    a = np.asarray(arrays[key])
    if a.dtype.hasobject:
        raise _bad(f"{key!r} is an object array", "no pickled or object arrays (files are read with "
                                                  "allow_pickle=False)")
    if a.dtype.kind != kind or a.dtype.itemsize != itemsize:
        raise _bad(f"{key!r} has dtype {a.dtype}, expected {what}", f"{key} is {what}", ref)
    if a.ndim != ndim:
        raise _bad(f"{key!r} has shape {a.shape} ({a.ndim}-D), expected {ndim}-D", f"{key} is {ndim}-D", ref)
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))


def _scalar(arrays: Mapping, key: str, kinds: str, what: str):
    a = np.asarray(arrays[key])
    if a.dtype.hasobject:
        raise _bad(f"{key!r} is an object array", "no pickled or object arrays (files are read with "
                                                  "allow_pickle=False)")
    if a.size != 1 or a.ndim > 1 or a.dtype.kind not in kinds:
        raise _bad(f"{key!r} = {a!r:.80} is not one {what}", f"{key} is a single {what}")
    return a.reshape(()).item()


def _check_keys(arrays: Mapping, required: Sequence[str], optional: Sequence[str], what: str) -> None:
    missing = [k for k in required if k not in arrays]
    if missing:
        have = ", ".join(sorted(arrays)) or "none"
        raise _bad(f"{what} missing key(s) {', '.join(map(repr, missing))} (has: {have})",
                   f"a FlashMLA {what} file holds {', '.join(required)}")
    unknown = sorted(set(arrays) - set(required) - set(optional))
    if unknown:
        raise _bad(f"{what} has unknown key(s) {', '.join(map(repr, unknown))}; known: "
                   f"{', '.join((*required, *optional))}", f"a FlashMLA {what} file holds only the format's keys")


def _where(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(x) for x in np.argwhere(mask)[0])


def validate_inputs(arrays: Mapping[str, np.ndarray]) -> FlashMLAInputs:
    """Check ``arrays`` against every rule of the inputs format; the :class:`FlashMLAInputs`, or an error naming
    the first rule broken."""
    _check_keys(arrays, INPUT_KEYS, OPTIONAL_KEYS, "inputs")
    name = _scalar(arrays, "model", "US", "string")
    name = name.decode("ascii", "replace") if isinstance(name, bytes) else str(name)
    if name not in MODELS:
        raise _bad(f"model {name!r} is unknown; use 'v32' or 'model1'", "model is 'v32' or 'model1'",
                   "FlashMLA csrc/sm100/decode/head64/config.h L33-55 (ModelType V32, MODEL1)")
    m = MODELS[name]
    pbs = _scalar(arrays, "page_block_size", "iu", "integer")
    if pbs < 1:
        raise _bad(f"page_block_size = {pbs}", "page_block_size >= 1", _API)
    sm_scale = float(np.float32(_scalar(arrays, "sm_scale", "iuf", "real number")))
    if not (math.isfinite(sm_scale) and sm_scale > 0):
        raise _bad(f"sm_scale = {sm_scale} (as float32)", "sm_scale is a finite positive float32", _API)

    q = _array(arrays, "q", "u", 2, 4, "uint16 (bf16 bit patterns)")
    b, s_q, h, d = q.shape
    if b < 1 or s_q < 1:
        raise _bad(f"q has shape {q.shape}", "b >= 1 and s_q >= 1", _API)
    if h != B_H:
        raise _bad(f"q has {h} heads (shape {q.shape})", f"the head64 kernel takes h_q = {B_H} per launch "
                   "(KU_ASSERT(params.h_q == B_H); 128 heads run as two launches)", _HOST)
    if d != m.d_q:
        raise _bad(f"q has d_qk = {d} for model {name} (shape {q.shape})",
                   "d_qk is 576 for V32 and 512 for MODEL1", _API)
    bad = (q & 0x7F80) == 0x7F80
    if bad.any():
        raise _bad(f"q{list(_where(bad))} = 0x{int(q[_where(bad)]):04X} is not finite",
                   "Q holds finite bf16 values (no Inf or NaN codes)")

    kv = _array(arrays, "kv", "u", 1, 2, "uint8 (the cache's bytes)")
    nb, stride = kv.shape
    lay = kv_layout(m, pbs)
    if nb < 1:
        raise _bad(f"kv has shape {kv.shape}: no page block", "num_blocks >= 1", _API)
    if stride % lay.tma_k_stride:
        raise _bad(f"kv block stride {stride} B is not a multiple of TMA_K_STRIDE = {lay.tma_k_stride} ({name})",
                   "k_cache.stride(0) is a multiple of TMA_K_STRIDE (KU_ASSERT; padding might be necessary)", _HOST)
    if stride < lay.min_block_stride:
        per = "656" if m.v32 else "584 (576 record + 8 scale bytes)"
        raise _bad(f"kv block stride {stride} B cannot hold page_block_size = {pbs} tokens of {per} B "
                   f"(needs >= {lay.min_block_stride} B)",
                   "page_block_size x bytes per token fits in kv's block stride", _API)

    idx = _array(arrays, "indices", "i", 4, 3, "int32")
    if idx.shape[:2] != (b, s_q):
        raise _bad(f"indices has shape {idx.shape}, q has [b, s_q] = {[b, s_q]}",
                   "indices is [b, s_q, topk] with q's b and s_q", _API)
    topk = idx.shape[2]
    if topk < B_TOPK or topk % B_TOPK:
        raise _bad(f"topk = {topk}", f"topk is a positive multiple of B_TOPK = {B_TOPK} "
                   "(KU_ASSERT(params.topk % B_TOPK == 0))", _HOST)
    ntok = nb * pbs
    bad = (idx < -1) | (idx >= ntok)
    if bad.any():
        at = _where(bad)
        raise _bad(f"indices{list(at)} = {int(idx[at])} is outside -1..{ntok - 1} ({nb} blocks x {pbs} tokens)",
                   "an index is -1 (invalid) or a token of the cache: 0 <= index < num_blocks x page_block_size",
                   _INDEX)

    sink = None
    if "attn_sink" in arrays:
        sink = _array(arrays, "attn_sink", "f", 4, 1, "float32")
        if sink.shape != (B_H,):
            raise _bad(f"attn_sink has shape {sink.shape}", f"attn_sink is float32 [{B_H}] (one per head)", _API)
        if np.isnan(sink).any():
            raise _bad(f"attn_sink[{int(np.argmax(np.isnan(sink)))}] is NaN", "attn_sink holds no NaN")
    tl = None
    if "topk_length" in arrays:
        tl = _array(arrays, "topk_length", "i", 4, 1, "int32")
        if tl.shape != (b,):
            raise _bad(f"topk_length has shape {tl.shape}", "topk_length is int32 [b] (one per batch)", _API)
        bad = (tl < 0) | (tl > topk)
        if bad.any():
            raise _bad(f"topk_length[{_where(bad)[0]}] = {int(tl[bad][0])}", f"0 <= topk_length <= topk = {topk}",
                       _INDEX)
    inp = FlashMLAInputs(m, q, kv, idx, int(pbs), sm_scale, sink, tl)
    _check_tokens(inp)
    return inp


def _token_bytes(inp: FlashMLAInputs, tokens: np.ndarray):
    """(NoPE e4m3 codes [n, d_nope], raw scales [n, tiles], RoPE bf16 bits [n, 64]) of flat tokens ``tokens``."""
    return token_bytes(inp.model, inp.kv, inp.page_block_size, tokens)


def _check_tokens(inp: FlashMLAInputs) -> None:
    """The referenced token records carry no code the format forbids (unreferenced bytes may hold anything).
    Read in groups of tokens (bounded memory); the first bad NoPE byte is reported before the first bad scale,
    and that before the first bad RoPE value, as one pass over all tokens would."""
    v = inp.valid()
    if not v.any():
        return
    toks, first = np.unique(inp.indices[v], return_index=True)
    pos = np.stack(np.unravel_index(np.flatnonzero(v)[first], v.shape), axis=1)  # (batch, query, position) of each
    # token's first reference (np.argwhere(v)[first], without a row of three int64 per valid index)
    m = inp.model
    found: dict[int, tuple[int, str, str, str]] = {}  # check -> (token number, what, rule, ref) of its first hit

    def note(check: int, t0: int, bad: np.ndarray, text, rule: str, ref: str = _DOC) -> None:
        if check not in found and bad.any():
            i = int(np.argmax(bad.any(axis=1)))
            found[check] = (t0 + i, text(i), rule, ref)

    for t0 in range(0, len(toks), _CHUNK_TOKENS):
        nope, scales, rope = _token_bytes(inp, toks[t0:t0 + _CHUNK_TOKENS])
        bad = (nope & 0x7F) == 0x7F
        note(0, t0, bad, lambda i, bad=bad, nope=nope: f"NoPE byte {int(np.argmax(bad[i]))} is the e4m3 NaN code "
             f"0x{int(nope[i][bad[i]][0]):02X}",
             "NoPE bytes are finite e4m3 codes (0x7F and 0xFF are NaN; FlashMLA's quantizer never writes them)", _QUANT)
        if m.v32:
            exp = (scales >> 23) & 0xFF
            bad = (scales >> 31 != 0) | (scales & 0x7FFFFF != 0) | (exp == 0) | (exp == 0xFF)
            note(1, t0, bad, lambda i, bad=bad, scales=scales: f"scale {int(np.argmax(bad[i]))} = "
                 f"{float(scales[i].view(np.float32)[bad[i]][0])!r}",
                 "V32 scales are finite positive powers of two (FlashMLA's quantizer rounds them up to 2^k; the head64 "
                 "kernel converts them to e8m0 (round toward zero) or bf16: both exact only for powers of two)",
                 _QUANT)
        else:
            bad = scales == 0xFF
            note(1, t0, bad, lambda i, bad=bad: f"ue8m0 scale {int(np.argmax(bad[i]))} is 0xFF (NaN)",
                 "MODEL1 scales are ue8m0 codes 0x00-0xFE (0xFF is NaN)", _QUANT)
        bad = (rope & 0x7F80) == 0x7F80
        note(2, t0, bad, lambda i, bad=bad, rope=rope: f"RoPE value {int(np.argmax(bad[i]))} is bf16 Inf/NaN "
             f"0x{int(rope[i][bad[i]][0]):04X}", "RoPE holds finite bf16 values")
    for check in sorted(found):
        i, text, rule, ref = found[check]
        t = int(toks[i])
        raise _bad(f"kv token {t} (block {t // inp.page_block_size}, row {t % inp.page_block_size}), referenced "
                   f"by indices{list(int(x) for x in pos[i])}: {text}", rule, ref)


def validate_outputs(arrays: Mapping[str, np.ndarray], inputs: FlashMLAInputs | None = None) -> FlashMLAOutputs:
    """Check an outputs array set (and, given ``inputs``, that its [b, s_q] match)."""
    _check_keys(arrays, OUTPUT_KEYS, (), "outputs")
    out = _array(arrays, "out", "u", 2, 4, "uint16 (bf16 bit patterns)")
    lse = _array(arrays, "lse", "f", 4, 3, "float32")
    if out.shape[2:] != (B_H, D_V) or lse.shape != out.shape[:3]:
        raise _bad(f"out has shape {out.shape}, lse {lse.shape}",
                   f"out is [b, s_q, {B_H}, {D_V}] and lse is [b, s_q, {B_H}]", _API)
    if inputs is not None and out.shape[:2] != (inputs.b, inputs.s_q):
        raise _bad(f"outputs are for [b, s_q] = {list(out.shape[:2])}, the inputs have {[inputs.b, inputs.s_q]}",
                   "outputs and inputs have the same [b, s_q]")
    return FlashMLAOutputs(out, lse)


def load_inputs(path: str | os.PathLike) -> FlashMLAInputs:
    """Read and validate an inputs ``.npz`` (``allow_pickle=False``)."""
    return validate_inputs(read_npz(path, "inputs"))


def load_outputs(path: str | os.PathLike, inputs: FlashMLAInputs | None = None) -> FlashMLAOutputs:
    """Read and validate an outputs ``.npz`` (``allow_pickle=False``)."""
    return validate_outputs(read_npz(path, "outputs"), inputs)


def _save(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to exactly ``path``; an OSError names the file, and a regular file this call created is
    removed again rather than left half written."""
    existed = os.path.lexists(path)
    try:
        with open(path, "wb") as f:  # a file object: numpy.savez would append ".npz" to a name without it
            np.savez(f, **arrays)
    except OSError as e:
        if not existed and os.path.isfile(path):
            with contextlib.suppress(OSError):
                os.remove(path)
        raise _file_error(path, e, reading=False) from None


def save_inputs(path: str | os.PathLike, inputs: FlashMLAInputs) -> None:
    """Write ``inputs`` as an uncompressed ``.npz`` (exactly the given path)."""
    _save(path, inputs.arrays())


def save_outputs(path: str | os.PathLike, outputs: FlashMLAOutputs) -> None:
    """Write ``outputs`` as an uncompressed ``.npz`` (exactly the given path)."""
    _save(path, outputs.arrays())


# ---- dequantization and the replay's per-request inputs -----------------------------------------------------
def dequant_tokens(inp: FlashMLAInputs, tokens) -> np.ndarray:
    """float32 [n, d_qk]: K of flat tokens ``tokens`` as the kernel sees it -- NoPE through FlashMLA's dequant
    chain (:func:`simtc.numerics.dequant.dequant_e4m3`, scales as ue8m0) and the bf16 RoPE."""
    return dequant_cache_tokens(inp.model, inp.kv, inp.page_block_size, tokens)


def request(inp: FlashMLAInputs, batch: int, query: int):
    """Row (``batch``, ``query``) as the replay's :class:`~simtc.kernels.flashmla.replay.Head64Inputs`.

    Blocks: ``max(ceil(topk_length / 64), 1)`` (kernel.cuh ``orig_topk_padded``); the cache is shared (a flat
    view, ``block_stride / TMA_K_STRIDE`` rows per page block); K is dequantized for the float64 reference.
    """
    from simtc.kernels.flashmla.replay import Head64Inputs

    if not (0 <= batch < inp.b and 0 <= query < inp.s_q):
        raise _bad(f"row ({batch}, {query}) is outside [b, s_q] = {[inp.b, inp.s_q]}", "0 <= batch < b, "
                   "0 <= query < s_q")
    m = inp.model
    tl = inp.topk_len(batch)
    blocks = max(-(-tl // B_TOPK), 1)
    idx = np.ascontiguousarray(inp.indices[batch, query, :B_TOPK * blocks], np.int32)
    valid = (idx >= 0) & (np.arange(idx.size) < tl)
    k = np.zeros((idx.size, m.d_q), np.float32)
    if valid.any():
        k[valid] = dequant_tokens(inp, idx[valid])
    q = decode_bits(inp.q[batch, query], "bf16").astype(np.float32)
    sink = inp.attn_sink if inp.attn_sink is not None else np.full(B_H, -np.inf, np.float32)
    return Head64Inputs(m, blocks, 0, q, inp.kv.reshape(-1), inp.block_stride // m.tma_k_stride, inp.num_blocks,
                        idx, tl, sink.astype(np.float32), inp.sm_scale, k, valid,
                        page_block_size=inp.page_block_size)


# ---- writing: FlashMLA's quantization ---------------------------------------------------------------------
def quantize_kv(k_bits, m: str | Head64Model, *, block_stride: int | None = None,
                out: np.ndarray | None = None) -> np.ndarray:
    """FlashMLA's ``quantize_k_cache`` in numpy: bf16 K bits [num_blocks, page_block_size, d_qk] -> the cache bytes.

    Per token and quant tile (128 dims V32, 64 MODEL1): ``scale = 2^ceil(log2(max(amax / 448, 1e-4)))`` (float32),
    NoPE = e4m3(x / scale) (round to nearest even; |x / scale| <= 448 so no saturation is hit), RoPE copied as bf16.
    V32 stores the scales as fp32 in the record, MODEL1 as ue8m0 codes in the block's tail (pad byte untouched).
    ``out``: an existing [num_blocks, block_stride] uint8 array to write into (its other bytes are kept).
    """
    m = model(m)
    k_bits = np.asarray(k_bits, np.uint16)
    if k_bits.ndim != 3 or k_bits.shape[2] != m.d_q:
        raise _bad(f"K has shape {k_bits.shape}", f"K is [num_blocks, page_block_size, {m.d_q}] bf16 bits ({m.name})")
    nb, pbs, _ = k_bits.shape
    lay = kv_layout(m, pbs)
    stride = block_stride if block_stride is not None else (out.shape[1] if out is not None else _default_stride(lay))
    if stride % lay.tma_k_stride or stride < lay.min_block_stride:
        raise _bad(f"block stride {stride} B", f"a multiple of {lay.tma_k_stride} B of at least "
                   f"{lay.min_block_stride} B", _HOST)
    if out is None:
        out = np.zeros((nb, stride), np.uint8)
    elif out.shape != (nb, stride) or out.dtype != np.uint8:
        raise _bad(f"out has shape {out.shape} / {out.dtype}", f"out is uint8 [{nb}, {stride}]")
    x = decode_bits(k_bits, "bf16")
    tiles, tile = m.d_nope // m.quant_tile, m.quant_tile
    xt = x[..., :m.d_nope].reshape(nb, pbs, tiles, tile)
    amax = np.abs(xt).max(axis=-1).astype(np.float32)
    scale = np.exp2(np.ceil(np.log2(np.maximum(amax / np.float32(E4M3_MAX), np.float32(SCALE_FLOOR))))) \
        .astype(np.float32)
    fp8 = encode_bits((xt / scale[..., None]).astype(np.float32), "e4m3").reshape(nb, pbs, m.d_nope)
    rope = np.ascontiguousarray(k_bits[..., m.d_nope:]).astype("<u2").view(np.uint8)
    if m.v32:
        rec = np.concatenate([fp8, np.ascontiguousarray(scale.astype("<f4")).view(np.uint8), rope], axis=2)
        out[:, :pbs * lay.token_bytes] = rec.reshape(nb, -1)
    else:
        out[:, :pbs * lay.token_bytes] = np.concatenate([fp8, rope], axis=2).reshape(nb, -1)
        tail = out[:, lay.scale_offset:lay.scale_offset + 8 * pbs].reshape(nb, pbs, 8)
        tail[..., :tiles] = encode_bits(scale, "ue8m0", rounding="rz")  # a power of two: exact
        out[:, lay.scale_offset:lay.scale_offset + 8 * pbs] = tail.reshape(nb, -1)
    return out


_CHUNK_TOKENS = 4096
"""Tokens (rows of 576 or 512 values) per draw in :func:`make_inputs`: the same stream as one draw, bounded memory."""


def make_inputs(model_name: str | Head64Model = "v32", b: int = 1, s_q: int = 1, topk: int = 128, *, seed: int = 0,
                invalid_frac: float = 0.05, attn_sink: bool = False, page_block_size: int = 64,
                num_blocks: int | None = None, block_stride: int | None = None, empty_rows: int = 0,
                hot_scale: int = 3, topk_length: Sequence[int] | None = None, progress=None) -> FlashMLAInputs:
    """Random inputs in FlashMLA's format (validated before they are returned).

    K ~ N(0, 1) rounded to bf16, quantized by :func:`quantize_kv`; the cache's padding (and MODEL1's pad byte)
    holds random bytes, as an uninitialised ``torch.empty`` cache would. Each row draws ``topk`` distinct
    tokens; a fraction ``invalid_frac`` of positions becomes -1; the last ``empty_rows`` rows (in (batch, query)
    order) are all -1. ``hot_scale``: with two or more blocks, positions 0-3 of the middle block of every row
    are 4 hot tokens whose K is scaled by ``2**hot_scale`` before quantization -- large scores that force the
    kernel's lazy O rescale (threshold 2^6 on exp2 values) for ``hot_scale`` >= 3 (0: none). ``progress``: None,
    or ``progress("make", step, 5)`` after each of its five steps (:func:`make_inputs_memory` estimates its peak).
    """
    m = model(model_name)
    for nm, v, lo in (("b", b, 1), ("s_q", s_q, 1), ("page_block_size", page_block_size, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
            raise _bad(f"{nm} = {v!r}", f"{nm} is an integer >= {lo}")
    if topk < B_TOPK or topk % B_TOPK:
        raise _bad(f"topk = {topk}", f"topk is a positive multiple of B_TOPK = {B_TOPK}", _HOST)
    if not 0.0 <= invalid_frac <= 1.0 or not 0 <= empty_rows <= b * s_q or not 0 <= hot_scale <= 20:
        raise _bad(f"invalid_frac = {invalid_frac}, empty_rows = {empty_rows}, hot_scale = {hot_scale}",
                   "0 <= invalid_frac <= 1, 0 <= empty_rows <= b x s_q, 0 <= hot_scale <= 20")
    rng = np.random.default_rng(seed)
    n_hot = 4 if hot_scale and topk >= 2 * B_TOPK else 0
    if num_blocks is None:
        num_blocks = max(2, -(-(2 * topk + n_hot) // page_block_size))
    ntok = num_blocks * page_block_size
    if ntok < topk + n_hot:
        raise _bad(f"{num_blocks} blocks x {page_block_size} tokens < topk {topk} (+ {n_hot} hot tokens)",
                   "the cache holds at least topk distinct tokens")
    lay = kv_layout(m, page_block_size)
    stride = block_stride if block_stride is not None else _default_stride(lay)
    tell = progress or (lambda phase, done, total: None)
    tell("make", 0, 5)
    kv = rng.integers(0, 256, size=(num_blocks, stride), dtype=np.uint8)
    # Every draw below is made in chunks (the same random stream as one draw) so that the peak stays near the
    # outputs' size: K is kept as bf16 bits; the hot tokens are scaled after rounding, which gives the same bits
    # as scaling first (a power of two, on normal floats far from overflow, commutes with rounding to bf16).
    k_bits = np.empty((ntok, m.d_q), np.uint16)
    for t0 in range(0, ntok, _CHUNK_TOKENS):
        t1 = min(ntok, t0 + _CHUNK_TOKENS)
        k_bits[t0:t1] = encode_bits(rng.normal(size=(t1 - t0, m.d_q)).astype(np.float32), "bf16")
    tell("make", 1, 5)
    perm = rng.permutation(ntok)
    hot, cold = perm[:n_hot], perm[n_hot:]
    del perm
    if n_hot:
        k_bits[hot] = encode_bits(decode_bits(k_bits[hot], "bf16") * np.float32(2.0 ** hot_scale), "bf16")
    k_bits = k_bits.reshape(num_blocks, page_block_size, m.d_q)
    step = max(1, _CHUNK_TOKENS // page_block_size)
    for b0 in range(0, num_blocks, step):
        quantize_kv(k_bits[b0:b0 + step], m, out=kv[b0:b0 + step])
    del k_bits
    tell("make", 2, 5)
    rows = b * s_q
    idx = np.empty((rows, topk), np.int32)
    for r in range(rows):
        idx[r] = rng.choice(cold, size=topk, replace=False)
    if n_hot:
        mid = B_TOPK * (topk // B_TOPK // 2)
        idx[:, mid:mid + n_hot] = hot
    per = max(1, _CHUNK_TOKENS * 64 // topk)  # rows per draw of the invalid positions
    for r0 in range(0, rows, per):
        chunk = idx[r0:r0 + per]
        chunk[rng.random(chunk.shape) < invalid_frac] = -1
    if empty_rows:
        idx[rows - empty_rows:] = -1
    tell("make", 3, 5)
    q = np.empty((rows, B_H, m.d_q), np.uint16)
    per = max(1, _CHUNK_TOKENS // B_H)
    for r0 in range(0, rows, per):
        n = min(rows, r0 + per) - r0
        q[r0:r0 + n] = encode_bits(rng.normal(size=(n, B_H, m.d_q)).astype(np.float32), "bf16")
    q = q.reshape(b, s_q, B_H, m.d_q)
    tell("make", 4, 5)
    sink = rng.normal(size=B_H).astype(np.float32) if attn_sink else None
    tl = None if topk_length is None else np.asarray(topk_length, np.int32).reshape(-1)
    arrays = {"q": q, "kv": kv, "indices": idx.reshape(b, s_q, topk), "page_block_size": np.int64(page_block_size),
              "sm_scale": np.float32(1.0 / math.sqrt(m.d_q)), "model": np.array(m.name)}
    if sink is not None:
        arrays["attn_sink"] = sink
    if tl is not None:
        arrays["topk_length"] = tl
    out = validate_inputs(arrays)
    tell("make", 5, 5)
    return out


# ---- memory estimates (for refusing what would not fit) -----------------------------------------------------
_FIXED_BYTES = 80 << 20
"""The interpreter, numpy and simtc (measured ~60 MiB), rounded up."""
BYTES_PER_VALUE = 36
"""Peak bytes per value of one drawing chunk (float64 draw, float32, bf16 bits, the quantizer's temporaries):
:func:`make_inputs` draws ``_CHUNK_TOKENS`` rows of K or Q at a time."""
BYTES_PER_INDEX = 36
"""Peak bytes per top-k index in the validation: the index itself, the validity mask, the referenced tokens and
their sort (measured 14-25)."""


def make_inputs_memory(model_name: str | Head64Model = "v32", b: int = 1, s_q: int = 1, topk: int = 128, *,
                       page_block_size: int = 64, num_blocks: int | None = None, block_stride: int | None = None,
                       hot_scale: int = 3) -> int:
    """Bytes :func:`make_inputs` needs at its peak for these arguments (an upper estimate from the sizes alone, for
    refusing a request before any of it is drawn): the cache, plus the largest of its three phases -- K drawn in
    chunks and kept as bf16 bits (2 bytes a value), Q drawn in chunks with the indices kept, and the validation
    (Q's finiteness test, 3 more bytes a value, and :data:`BYTES_PER_INDEX`).

    >>> round(make_inputs_memory("v32", 1, 1, 1000064) / 2**30, 2)   # 2,000,128 cache tokens of 576 dims
    3.56
    """
    m = model(model_name)
    n_hot = 4 if hot_scale and topk >= 2 * B_TOPK else 0
    if num_blocks is None:
        num_blocks = max(2, -(-(2 * topk + n_hot) // page_block_size))
    lay = kv_layout(m, page_block_size)
    stride = block_stride if block_stride is not None else _default_stride(lay)
    ntok, rows = num_blocks * page_block_size, b * s_q
    q_values = rows * B_H * m.d_q
    chunk = BYTES_PER_VALUE * _CHUNK_TOKENS * m.d_q
    phases = (2 * ntok * m.d_q + 16 * ntok + chunk + (4 << 20), 2 * q_values + 8 * rows * topk + chunk,
              5 * q_values + (4 + BYTES_PER_INDEX) * rows * topk + (50 << 20))
    return _FIXED_BYTES + num_blocks * stride + max(phases)


def file_shapes(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], np.dtype]] | None:
    """``{name: (shape, dtype)}`` of the arrays of an ``.npz`` file, read from the headers alone (no array is
    loaded); None when the file is not a readable archive (:func:`load_inputs` then says what is wrong)."""
    import zipfile

    from numpy.lib import format as npy

    from simtc.isa.files import damaged_errors

    out = {}
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                with z.open(info) as f:
                    version = npy.read_magic(f)
                    read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
                    shape, _, dtype = read(f)
                out[info.filename.removesuffix(".npy")] = (tuple(shape), dtype)
    except (OSError, *damaged_errors()):
        return None
    return out


def inputs_file_memory(path: str | os.PathLike, *, replay: bool = False) -> int | None:
    """Bytes :func:`load_inputs` (``replay``: :func:`replay_file`) needs for the inputs file ``path`` at its peak
    (an estimate from the arrays' shapes, None when they cannot be read): the arrays and the validation
    (:data:`BYTES_PER_INDEX` per index); for a replay also the outputs and one row's replay (its dequantized K and
    :func:`simtc.kernels.flashmla.replay.memory_estimate` less the seeded cache it does not build)."""
    from simtc.kernels.flashmla.replay import BASE_BYTES, RUN_BYTES_PER_BLOCK

    shapes = file_shapes(path)
    if shapes is None or "indices" not in shapes or "q" not in shapes:
        return None
    arrays = sum(math.prod(shape) * dtype.itemsize for shape, dtype in shapes.values())
    idx = shapes["indices"][0]
    rows, topk = math.prod(idx[:-1]) if idx else 0, idx[-1] if idx else 0
    d_q = shapes["q"][0][-1] if shapes["q"][0] else 0
    if not replay:
        return _FIXED_BYTES + arrays + BYTES_PER_INDEX * rows * topk
    blocks = max(-(-topk // B_TOPK), 1)
    row = BASE_BYTES + B_TOPK * blocks * (4 * d_q + 8) + RUN_BYTES_PER_BLOCK * blocks
    outputs = rows * B_H * (2 * D_V + 4)
    return arrays + BYTES_PER_INDEX * rows * topk + outputs + row


# ---- replaying a file -------------------------------------------------------------------------------------
@frozen
class FileReplay:
    """Every row of an inputs set replayed: the outputs, and each row's :class:`Head64Replay`."""

    inputs: FlashMLAInputs = field(eq=False, repr=False)
    outputs: FlashMLAOutputs = field(eq=False, repr=False)
    rows: tuple = field(repr=False)
    """((batch, query, Head64Replay), ...) in (batch, query) order."""

    @property
    def ok(self) -> bool:
        return all(r.ok for _, _, r in self.rows)

    def to_json(self) -> dict:
        return {"inputs": self.inputs.describe(), "ok": self.ok,
                "rows": [{"batch": i, "query": j, **r.to_json()} for i, j, r in self.rows]}

    def summary(self) -> str:
        d = self.inputs.describe()
        lines = [f"FlashMLA head64 {d['model'].upper()} inputs: b={d['b']}, s_q={d['s_q']}, topk={d['topk']}, "
                 f"{d['num_blocks']} cache blocks of {d['page_block_size']} tokens, "
                 f"attn_sink {'yes' if d['attn_sink'] else 'no'}: {'OK' if self.ok else 'FAILED'}"]
        for i, j, r in self.rows:
            num = ("no valid token: LSE +inf, O = 0" if not self.inputs.valid()[i, j].any() else
                   f"O rel. error {r.o_rel_error:.2e}, LSE max abs error {r.lse_max_abs_error:.2e}")
            lines.append(f"  row ({i}, {j}): {'OK' if r.ok else 'FAILED'}, {r.blocks} block(s), {num}, P bit-exact "
                         f"{r.p_bit_exact}, rescaled blocks {r.rescale_blocks or 'none'}, {r.cycles} cycles, "
                         f"hazards {len(r.hazards)}")
        return "\n".join(lines)


def replay_inputs(inp: FlashMLAInputs, *, check: bool = True, transform=None, progress=None) -> FileReplay:
    """Replay every (batch, query) row on the engine (:func:`simtc.kernels.flashmla.replay.replay` with the row
    as ``inputs``); the kernel's outputs are read back from each row's global ``o`` / ``lse`` tensors.
    ``progress``: None, or a ``progress(phase, done, total)`` callback: phase "rows", then each row's replay
    phases."""
    from simtc.kernels.flashmla.replay import read_o, replay

    out = np.zeros((inp.b, inp.s_q, B_H, D_V), np.uint16)
    lse = np.zeros((inp.b, inp.s_q, B_H), np.float32)
    rows = []
    if progress is not None:
        progress("rows", 0, inp.b * inp.s_q)
    for i in range(inp.b):
        for j in range(inp.s_q):
            r = replay(inp.model, inputs=request(inp, i, j), check=check, transform=transform, keep_engine=True,
                       progress=progress)
            g = r.engine.cta.gmem
            out[i, j] = encode_bits(read_o(g["o"]), "bf16")  # read_o's values are bf16: exact
            lse[i, j] = g["lse"]
            rows.append((i, j, attrs.evolve(r, engine=None)))  # the engine is dropped: rows stay small
            if progress is not None:
                progress("rows", len(rows), inp.b * inp.s_q)
    return FileReplay(inp, FlashMLAOutputs(out, lse), tuple(rows))


def replay_file(path: str | os.PathLike, save_outputs_to: str | os.PathLike | None = None, **kw) -> FileReplay:
    """:func:`load_inputs` + :func:`replay_inputs` (+ :func:`save_outputs` when ``save_outputs_to`` is given)."""
    res = replay_inputs(load_inputs(path), **kw)
    if save_outputs_to is not None:
        save_outputs(save_outputs_to, res.outputs)
    return res
