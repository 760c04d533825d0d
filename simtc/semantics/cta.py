"""``Cta``: the state one CTA's instructions act on, and the one observed access path.

A :class:`Cta` holds shared memory, Tensor Memory, named global tensors (the TMA's source),
mbarriers, named barriers and per-warp registers. It is state only: applying a record to it is
:func:`simtc.semantics.execute` (``execute(record, cta)``), whose module imports this one and not
the other way round. Every shared-memory and TMEM access an instruction makes goes through the
memories' access API (:meth:`simtc.smem.SharedMemory.read` / ``write`` / ``gather`` / ``scatter``,
:meth:`simtc.tmem.TensorMemory.read_cells` / ``write_cells``); while a record executes on a
:class:`Cta` (``Cta.current``), the :class:`Cta` forwards those accesses to its observers
(:meth:`Cta.observe`) as ``callback(kind, record, region)``:

* ``kind``: ``"smem.read"``, ``"smem.write"``, ``"tmem.read"``, ``"tmem.write"``;
* ``region``: :class:`SmemRegion` (the byte addresses) or :class:`TmemRegion` (lanes, columns).

Writes record the executing record itself as each byte's / cell's last writer.

mbarrier state follows PTX ISA 9.0 §9.7.13.15.2 (contents) and §9.7.13.15.6 (phase completion):
a phase completes when its pending arrival
count and its transaction count both reach zero; the count then resets for the next phase.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from attrs import define, field, frozen

from simtc.errors import SimtcError
from simtc.smem.memory import SharedMemory
from simtc.tmem.memory import TensorMemory

__all__ = ["Cta", "MbarrierState", "NamedBarrierState", "SemanticsError", "SmemRegion", "TmemRegion", "WouldBlock"]

_REF_MBAR = "PTX ISA 9.0 §9.7.13.15"


class SemanticsError(SimtcError, ValueError):
    """An instruction that cannot be applied to this CTA state (names the rule)."""


class WouldBlock(SemanticsError):
    """The instruction would wait here (an unfinished mbarrier phase, a named barrier still missing threads).

    The untimed executor cannot wait; a scheduler (:func:`simtc.semantics.run_program`, the engine) turns
    it into a wait and retries the same record later.
    """


@frozen
class SmemRegion:
    """Shared-memory bytes an access touched (``addresses``: byte addresses, int64)."""

    addresses: np.ndarray = field(eq=False)

    @property
    def start(self) -> int:
        return int(self.addresses.min()) if self.addresses.size else 0

    @property
    def stop(self) -> int:
        return int(self.addresses.max()) + 1 if self.addresses.size else 0


@frozen
class TmemRegion:
    """TMEM cells an access touched (``lanes``, ``columns``: int arrays of the same shape)."""

    lanes: np.ndarray = field(eq=False)
    columns: np.ndarray = field(eq=False)


@define
class MbarrierState:
    """One mbarrier: expected arrivals per phase, what is still pending, and completed phases."""

    name: str
    count: int
    pending: int
    tx: int = 0
    phase: int = 0
    """Number of completed phases; the current phase's parity is ``phase % 2``."""

    def arrive(self, n: int = 1) -> None:
        if n > self.pending:
            raise SemanticsError(f"mbarrier {self.name!r}: {n} arrival(s) but only {self.pending} pending in this "
                                 f"phase (count {self.count})", rule="arrivals do not exceed the pending count",
                                 ref=f"{_REF_MBAR}.1")
        self.pending -= n
        self._maybe_complete()

    def expect_tx(self, nbytes: int) -> None:
        self.tx += int(nbytes)

    def complete_tx(self, nbytes: int) -> None:
        # the tx-count may go negative within a phase: a TMA can complete before its expect_tx arrives
        # (PTX ISA 9.0 §9.7.13.15.2: tx-count range -(2^20-1) .. 2^20-1); the phase completes at zero
        self.tx -= int(nbytes)
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def completed(self, parity: int) -> bool:
        """``try_wait.parity(parity)`` succeeds: the phase with that parity has completed (current parity differs)."""
        return self.phase % 2 != parity


@define
class NamedBarrierState:
    """One named barrier (``bar.sync`` / ``bar.arrive``): threads arrived in this generation."""

    id: int
    threads: int = 0
    arrived: int = 0
    generation: int = 0


class _Registers(dict):
    """One warp's register arrays: a missing name is a :class:`SemanticsError` naming the rule."""

    def __init__(self, warp: int):
        super().__init__()
        self.warp = warp

    def __missing__(self, name):
        raise SemanticsError(f"warp {self.warp} has no register array {name!r} (has {sorted(self)})",
                             rule="registers are written before they are read")


@define(eq=False)
class Cta:
    """One CTA's state: memories, global tensors, barriers, registers ``{warp: {name: array}}``."""

    smem: SharedMemory = field(factory=SharedMemory)
    tmem: TensorMemory = field(factory=TensorMemory)
    gmem: dict[str, np.ndarray] = field(factory=dict)
    """Named global tensors: the sources of TMA loads and the destinations of TMA stores."""
    mbarriers: dict[str, MbarrierState] = field(factory=dict)
    named: dict[int, NamedBarrierState] = field(factory=dict)
    regs: dict[int, dict[str, np.ndarray]] = field(factory=dict)
    current: Any = field(default=None)
    """The record being executed (None between records)."""
    _observers: list[Callable] = field(init=False, factory=list)
    _bar_waits: dict[tuple[int, int], int] = field(init=False, factory=dict)

    # ---- observers -------------------------------------------------------------------------------------
    def observe(self, callback: Callable) -> Callable[[], None]:
        """Call ``callback(kind, record, region)`` on every access; returns a function that stops it.

        The memories' ``on_access`` hooks are set while at least one observer is registered (unobserved
        accesses then take the memories' fast paths: no per-byte address lists).
        """
        self._observers.append(callback)
        self._hook()

        def stop() -> None:
            self._observers.remove(callback)
            self._hook()

        return stop

    def _hook(self) -> None:
        on = bool(self._observers)
        self.smem.on_access = self._smem_access if on else None
        self.tmem.on_access = self._tmem_access if on else None

    def _smem_access(self, kind: str, addresses: np.ndarray) -> None:
        if self._observers:
            region = SmemRegion(np.asarray(addresses, dtype=np.int64))
            for cb in list(self._observers):
                cb(kind, self.current, region)

    def _tmem_access(self, kind: str, lanes: np.ndarray, columns: np.ndarray) -> None:
        if self._observers:
            region = TmemRegion(*np.broadcast_arrays(np.asarray(lanes), np.asarray(columns)))
            for cb in list(self._observers):
                cb(kind, self.current, region)

    # ---- registers and barriers ------------------------------------------------------------------------
    def warp_regs(self, warp: int) -> dict[str, np.ndarray]:
        """The warp's register arrays by name; reading one no record wrote raises :class:`SemanticsError` (a
        mutated Program -- a deleted load or wait -- is reported, not a KeyError from inside an effect)."""
        regs = self.regs.get(int(warp))
        if regs is None:
            regs = self.regs[int(warp)] = _Registers(int(warp))
        return regs

    def reg(self, warp: int, name: str) -> np.ndarray:
        try:
            return self.regs[int(warp)][name]
        except KeyError:
            raise SemanticsError(f"warp {warp} has no register array {name!r} (has "
                                 f"{sorted(self.regs.get(int(warp), {}))})",
                                 rule="registers are written before they are read") from None

    def mbarrier(self, name: str) -> MbarrierState:
        try:
            return self.mbarriers[name]
        except KeyError:
            raise SemanticsError(f"mbarrier {name!r} is used before mbarrier.init (known: {sorted(self.mbarriers)})",
                                 rule="mbarriers are initialised before use", ref=f"{_REF_MBAR}.9") from None

    def init_barriers(self, program) -> None:
        """Initialise the mbarriers of a :class:`simtc.isa.Program`'s barrier table (the setup warp's job)."""
        for b in program.barriers:
            if b.kind == "mbarrier":
                self.mbarriers[b.name] = MbarrierState(b.name, b.count, b.count)
