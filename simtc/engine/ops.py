"""Records compiled for the engine: their kind, cached footprint pieces and costs (one :class:`Op` per record,
shared by every position and warp it can be), and the interned footprints the checker compares.

Shared-memory byte-range sets and TMEM rectangles get small int ids (``ranges[...]``, ``rects[...]``), so
the checker's dictionaries hash ints; overlaps between ids are computed once (:class:`RangeSetOverlaps`, a
vectorised sweep; :class:`Overlaps`, a sorted sweep).
"""

from __future__ import annotations

import itertools
from typing import Any

from simtc.errors import SimtcError

__all__ = [
    "KIND_OF_CLASS",
    "SMEM_ASYNC_READERS",
    "SMEM_GENERIC_READERS",
    "UNIT_OF_KIND",
    "EngineError",
    "FootprintIndex",
    "Keys",
    "Op",
    "Overlaps",
    "RangeSetOverlaps",
]



class EngineError(SimtcError, RuntimeError):
    """A Program the engine cannot run (unknown record, unknown barrier, bad mode); :mod:`simtc.engine.core`
    re-exports it."""


(K_SYNC, K_MMA, K_CP, K_COMMIT, K_LD, K_ST, K_WAIT_LD, K_WAIT_ST, K_FENCE_BEFORE, K_FENCE_AFTER, K_INIT, K_ARRIVE,
 K_ARRIVE_TX, K_TRY_WAIT, K_TMA_LOAD, K_TMA_STORE, K_BULK_COMMIT, K_BULK_WAIT, K_BAR_SYNC, K_BAR_ARRIVE,
 K_PROXY_FENCE, K_LD_SHARED, K_ST_SHARED, K_CUDA, K_ALLOC, K_DEALLOC, K_RELINQUISH, K_WGMMA, K_WGMMA_COMMIT,
 K_WGMMA_WAIT, K_WGMMA_FENCE, K_INVAL, K_ELECT, K_SHIFT) = range(34)

KIND_OF_CLASS = {
    "Mma": K_MMA, "Cp": K_CP, "Commit": K_COMMIT, "Ld": K_LD, "St": K_ST, "WaitLd": K_WAIT_LD, "WaitSt": K_WAIT_ST,
    "FenceBeforeThreadSync": K_FENCE_BEFORE, "FenceAfterThreadSync": K_FENCE_AFTER, "MbarrierInit": K_INIT,
    "MbarrierArrive": K_ARRIVE, "MbarrierArriveExpectTx": K_ARRIVE_TX, "MbarrierTryWait": K_TRY_WAIT,
    "CpAsyncBulkTensor": K_TMA_LOAD, "CpAsyncBulkTensorStore": K_TMA_STORE, "CpAsyncBulk": K_TMA_STORE,
    "BulkCommitGroup": K_BULK_COMMIT, "BulkWaitGroupRead": K_BULK_WAIT, "BarSync": K_BAR_SYNC,
    "BarArrive": K_BAR_ARRIVE, "FenceProxyAsync": K_PROXY_FENCE, "LdShared": K_LD_SHARED, "StShared": K_ST_SHARED,
    "CudaCoreBlock": K_CUDA, "Alloc": K_ALLOC, "Dealloc": K_DEALLOC, "RelinquishAllocPermit": K_RELINQUISH,
    "WgmmaMmaAsync": K_WGMMA, "WgmmaCommitGroup": K_WGMMA_COMMIT, "WgmmaWaitGroup": K_WGMMA_WAIT,
    "WgmmaFence": K_WGMMA_FENCE, "MbarrierInval": K_INVAL, "ElectSync": K_ELECT, "Shift": K_SHIFT,
}
"""Record class name -> the kind the engine dispatches on."""

UNIT_OF_KIND = {K_MMA: "tensor_pipe", K_CP: "tensor_pipe", K_WGMMA: "tensor_pipe", K_LD: "tmem_path",
                K_ST: "tmem_path", K_TMA_LOAD: "tma", K_TMA_STORE: "tma", K_SHIFT: "tensor_pipe"}
"""The unit an asynchronous record occupies until its ``complete`` event (what a stepper or trace viewer draws)."""
SMEM_ASYNC_READERS = frozenset((K_MMA, K_CP, K_WGMMA, K_TMA_STORE))
"""Records whose shared-memory reads stay in flight after issue (the checker keeps them as readers)."""
SMEM_GENERIC_READERS = frozenset((K_LD_SHARED, K_CUDA))
"""Records that read shared memory through the generic proxy (the checker keeps them as readers a later write of
another warp must be ordered after)."""


def per_warp(kind: int, rec) -> bool:
    """Whether a record's footprint depends on the executing warp (TMEM quadrant; warp_offsets; warp_ids;
    a store issued by one warp of the role)."""
    return (kind in (K_LD, K_ST) or bool(getattr(rec, "warp_offsets", ()) or getattr(rec, "warp_ids", ()))
            or getattr(rec, "issuing_warp", None) is not None)


class Op:
    """One compiled record of one warp: kind, record, cached footprint pieces and costs. Shared by every
    position of the role (and every warp, unless ``per_warp``) holding this record or an equal one: the
    position (record index) travels beside it."""

    __slots__ = ("arg", "bar", "cells", "cost", "handler", "kind", "name", "per_warp", "proxy_async", "quad_bad", "rec",
                 "regs_r", "regs_w", "smem_r", "smem_w", "sync", "tmem_r", "tmem_w", "wavefronts")

    def __init__(self, kind: int, rec: Any):
        self.kind = kind
        self.rec = rec
        self.smem_r = self.smem_w = self.tmem_r = self.tmem_w = ()
        self.regs_r = self.regs_w = ()
        self.bar = None
        self.arg = None
        self.quad_bad = None
        self.name = ""
        self.proxy_async = False
        self.per_warp = False
        self.cells = 0
        self.wavefronts = 0
        self.handler = None
        self.cost = None
        self.sync = not rec.is_async


class FootprintIndex:
    """The interned footprints of a compiled Program and their overlaps (what the checker compares)."""

    def __init__(self, rects, ranges, ops):
        self.rect_of, self.ranges_of = rects.of, ranges.of
        self.rect_over = Interned(rects, Overlaps(rects.of, _rect_overlap))
        range_over = RangeSetOverlaps(ranges.of)
        # the overlapping ids that can hold a writer / an in-flight reader (the same ids in the same order, less
        # those no record writes / reads asynchronously: their lookups always miss)
        self.range_over_w = Subset(range_over, {q for op in ops for q in op.smem_w})
        self.range_over_r = Subset(range_over, {q for op in ops if op.kind in SMEM_ASYNC_READERS
                                                for q in op.smem_r})
        self.range_over_g = Subset(range_over, {q for op in ops if op.kind in SMEM_GENERIC_READERS
                                                for q in op.smem_r})


def _rect_overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


class Keys(dict):
    """key -> a small int id, in first-seen order (``of[id]`` gives the key back)."""

    def __init__(self):
        super().__init__()
        self.of: list = []

    def __missing__(self, key) -> int:
        self.of.append(key)
        i = self[key] = len(self.of) - 1
        return i


class Interned(dict):
    """id of a registered key -> the ids of the registered keys overlapping it, in ``over``'s order
    (``over`` maps a key to its overlapping keys; computed on first use)."""

    def __init__(self, ids: Keys, over: dict):
        super().__init__()
        self._ids, self._over = ids, over

    def __missing__(self, i: int) -> tuple[int, ...]:
        ids = self._ids
        res = self[i] = tuple(ids[k] for k in self._over[ids.of[i]])
        return res


class RangeSetOverlaps(dict):
    """id of a registered shared-memory range-set key -> the ids of the registered keys sharing at least one
    byte with it, all computed at once (vectorised; a sorted sweep over every byte range of every key).

    Order: first seen when scanning the key's ranges in order, each range's overlapping ranges sorted by
    ``(start, stop)``, and the keys holding each of those in id order (the order the checker reports hazards
    in). Ids without any overlap (empty ranges only) give ``()``.

    >>> over = RangeSetOverlaps([((0, 16), (64, 80)), ((70, 90),), ((16, 32),), ((8, 24), (100, 104))])
    >>> over[0], over[1], over[2], over[3], over[9]
    ((0, 3, 1), (0, 1), (3, 2), (0, 3, 2), ())
    """

    def __init__(self, keys: list):
        super().__init__()
        import numpy as np

        lens = np.fromiter((len(k) for k in keys), np.int64, len(keys))
        total = int(lens.sum())
        if not total:
            return
        chain = itertools.chain.from_iterable
        se = np.fromiter(chain(chain(keys)), np.int64, 2 * total).reshape(total, 2)
        kid = np.repeat(np.arange(len(keys), dtype=np.int64), lens)
        pos = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        order = np.argsort(se[:, 0], kind="stable")
        starts = se[order, 0]
        lo = np.searchsorted(starts, starts, "left")
        hi = np.searchsorted(starts, se[order, 1], "left")
        n = hi - lo  # the ranges starting inside range s: every overlapping pair is among them, seen at least
        s_idx = np.repeat(np.arange(order.size), n)  # from the side of the earlier start
        t_idx = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
        a, b = order[s_idx], order[t_idx]
        hit = (se[a, 0] < se[b, 1]) & (se[b, 0] < se[a, 1])  # [a0, a1) and [b0, b1) share a byte, or an
        a, b = a[hit], b[hit]  # empty range lies strictly inside the other
        qa, ka = np.concatenate([a, b]), np.concatenate([b, a])  # (query occurrence, candidate occurrence)
        # the first occurrence of each (query key, candidate key) pair in (query range position, candidate range
        # in (start, stop) order) -- found with one sort of int64 keys, then the pairs in that order per query
        rank = np.unique(se[:, 0] * (int(se[:, 1].max()) + 1) + se[:, 1], return_inverse=True)[1].reshape(-1)
        nk, nsub = len(keys), int(lens.max()) * (int(rank.max()) + 1)
        sub = pos[qa] * (nsub // int(lens.max())) + rank[ka]
        pair = kid[qa] * nk + kid[ka]
        if nk * nk * nsub < 2**62:
            c = np.sort(pair * nsub + sub)
            pair, sub = np.divmod(c, nsub)
        else:  # pragma: no cover - a Program of very many shared-memory keys
            srt = np.lexsort((sub, pair))
            pair, sub = pair[srt], sub[srt]
        first = np.ones(pair.size, bool)
        first[1:] = pair[1:] != pair[:-1]
        q, k = np.divmod(pair[first], nk)
        srt = np.lexsort((k, sub[first], q))  # each query's candidates by first sight
        q, k = q[srt], k[srt]
        out: dict[int, list[int]] = {}
        for qi, ki in zip(q.tolist(), k.tolist(), strict=True):
            out.setdefault(qi, []).append(ki)
        for qi, ks in out.items():
            self[qi] = tuple(ks)

    def __missing__(self, i: int) -> tuple[int, ...]:
        return ()


class Subset(dict):
    """id -> the ids of ``over[id]`` that lie in ``keep``, in ``over``'s order (computed on first use)."""

    def __init__(self, over: dict, keep: set):
        super().__init__()
        self._over, self._keep = over, keep

    def __missing__(self, i: int) -> tuple[int, ...]:
        keep = self._keep
        res = self[i] = tuple(r for r in self._over[i] if r in keep)
        return res


class Overlaps(dict):
    """item -> the registered items overlapping it; computed on first use (a sorted sweep on the
    first coordinate pair, so compiling a long Program stays linear-ish)."""

    def __init__(self, items: list, fn):
        super().__init__()
        import bisect

        self._bisect = bisect.bisect_left
        self._items = sorted(items)
        self._starts = [it[0] for it in self._items]
        self._maxlen = max((it[1] - it[0] for it in self._items), default=0)
        self._fn = fn

    def __missing__(self, key):
        lo = self._bisect(self._starts, key[0] - self._maxlen)
        hi = self._bisect(self._starts, key[1])
        out = [b for b in self._items[lo:hi] if self._fn(key, b)]
        self[key] = out
        return out
