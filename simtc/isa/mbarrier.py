"""mbarrier records (PTX ISA 9.0 §9.7.13.15): init, inval, arrive, arrive.expect_tx, try_wait.

Barriers are named by strings (``"qk_done[0]"``); their shared-memory addresses, where known,
live in the :class:`simtc.isa.Program`'s barrier table.

An arrive may name its ``state`` destination register: the opaque token PTX returns, which captures the phase the
arrival counted towards (PTX ISA 9.0 §9.7.13.15.13, mbarrier.arrive: "state" holds the phase prior to the arrive);
``mbarrier.try_wait`` then waits either on a phase parity (``parity``) or on that token (``token``: the completion
of the phase the token names, §9.7.13.15.16) -- a token wait cannot alias a phase two phases back, a parity wait can.

>>> MbarrierTryWait("full", token="st0").ptx()
'mbarrier.try_wait.shared::cta.b64 p, [full], st0;'

>>> MbarrierArriveExpectTx("q_tma", 73728).ptx()
'mbarrier.arrive.expect_tx.shared::cta.b64 state, [q_tma], 73728;'
"""

from __future__ import annotations

from typing import ClassVar

from attrs import field, frozen

from simtc.isa.base import Instr, as_int, as_opt_int, fail, is_str, name_str, register
from simtc.isa.footprint import Footprint

__all__ = ["MAX_COUNT", "MAX_TX", "MbarrierArrive", "MbarrierArriveExpectTx", "MbarrierInit", "MbarrierInval",
           "MbarrierTryWait"]

MAX_COUNT = (1 << 20) - 1
"""Largest expected-arrival count of an mbarrier: counts are 1 ... 2**20 - 1 (PTX ISA 9.0 §9.7.13.15.2,
"Contents of the mbarrier object")."""
MAX_TX = (1 << 20) - 1
"""Largest pending transaction count (bytes) of one ``expect_tx``: 2**20 - 1, the tx-count maximum (PTX ISA 9.0
§9.7.13.15.2, "Contents of the mbarrier object")."""
_REF = "PTX ISA 9.0 §9.7.13.15"


def _count(inst, attribute, value) -> None:
    if not 1 <= value <= MAX_COUNT:
        fail(f"{inst.op} count = {value}: must be > 0 and <= 2**20 - 1",
             rule="mbarrier counts are 1 ... 2**20 - 1",
             ref="PTX ISA 9.0 §9.7.13.15.2 (counts); §9.7.13.15.9 (mbarrier.init), §9.7.13.15.13 (mbarrier.arrive)")


class _Bar(Instr):
    __slots__ = ()

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(barriers=(self.bar,))


@register
@frozen
class MbarrierInit(_Bar):
    """``mbarrier.init.shared::cta.b64 [bar], count;`` (one elected thread)."""

    op: ClassVar[str] = "mbarrier.init"
    opcode: ClassVar[str] = "mbarrier.init"
    elected: ClassVar[bool] = True
    bar: str = field(validator=name_str)
    count: int = field(converter=as_int, validator=_count)

    def ptx(self) -> str:
        return f"mbarrier.init.shared::cta.b64 [{self.bar}], {self.count};"


@register
@frozen
class MbarrierInval(_Bar):
    """``mbarrier.inval.shared::cta.b64 [bar];`` (one elected thread): the object at ``bar`` stops being an mbarrier.

    PTX ISA 9.0 §9.7.13.15.10: an mbarrier must be invalidated before its memory is used for anything else, an
    ``mbarrier.init`` of a valid object (one initialised and not invalidated) is undefined, and so is any mbarrier
    operation but ``init`` on an invalidated one (the checker's ``mbarrier-init-in-use``,
    ``mbarrier-use-after-inval``, ``mbarrier-inval-in-use``, ``mbarrier-object-overwritten``)."""

    op: ClassVar[str] = "mbarrier.inval"
    opcode: ClassVar[str] = "mbarrier.inval"
    elected: ClassVar[bool] = True
    bar: str = field(validator=name_str)

    def ptx(self) -> str:
        return f"mbarrier.inval.shared::cta.b64 [{self.bar}];"


def _state(inst, attribute, value) -> None:
    if value and not value.isidentifier():
        fail(f"{inst.op}: state register {value!r} is not a register name", rule="mbarrier state is a register")


class _Arrival(_Bar):
    __slots__ = ()

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(barriers=(self.bar,), regs_written=(self.state,) if self.state else ())


@register
@frozen
class MbarrierArrive(_Arrival):
    """``mbarrier.arrive.shared::cta.b64 state, [bar][, count];`` (every executing thread arrives); ``state``
    names the register receiving the token (``""``: not kept)."""

    op: ClassVar[str] = "mbarrier.arrive"
    opcode: ClassVar[str] = "mbarrier.arrive"
    bar: str = field(validator=name_str)
    count: int = field(default=1, converter=as_int, validator=_count)
    state: str = field(default="", kw_only=True, validator=[is_str, _state])

    def ptx(self) -> str:
        tail = "" if self.count == 1 else f", {self.count}"
        return f"mbarrier.arrive.shared::cta.b64 {self.state or 'state'}, [{self.bar}]{tail};"


@register
@frozen
class MbarrierArriveExpectTx(_Arrival):
    """``mbarrier.arrive.expect_tx.shared::cta.b64 state, [bar], tx_bytes;`` (one elected thread).

    Raises the barrier's pending transaction count by ``tx_bytes`` and arrives once; the TMA
    loads completing on ``bar`` count the bytes down (``complete_tx``).
    """

    op: ClassVar[str] = "mbarrier.arrive.expect_tx"
    opcode: ClassVar[str] = "mbarrier.arrive.expect_tx"
    elected: ClassVar[bool] = True
    bar: str = field(validator=name_str)
    tx_bytes: int = field(converter=as_int)
    state: str = field(default="", kw_only=True, validator=[is_str, _state])

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.tx_bytes <= MAX_TX:
            fail(f"expect_tx of {self.tx_bytes} bytes: the tx-count is 0 ... 2**20 - 1",
                 rule="mbarrier tx-count range",
                 ref="PTX ISA 9.0 §9.7.13.15.2 (tx-count range); §9.7.13.15.13 (mbarrier.arrive.expect_tx)")

    def ptx(self) -> str:
        return f"mbarrier.arrive.expect_tx.shared::cta.b64 {self.state or 'state'}, [{self.bar}], {self.tx_bytes};"


@register
@frozen
class MbarrierTryWait(_Bar):
    """``mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;`` -- the warp loops until the phase
    with this parity has completed (CUTLASS ``ClusterBarrier::wait``); or, with ``token`` (the ``state`` register
    of an earlier arrive of the role on ``bar``), ``mbarrier.try_wait.shared::cta.b64 p, [bar], token;``: until the
    phase the token names has completed (PTX ISA 9.0 §9.7.13.15.16). Exactly one of the two is given."""

    op: ClassVar[str] = "mbarrier.try_wait"
    opcode: ClassVar[str] = "mbarrier.try_wait"
    bar: str = field(validator=name_str)
    parity: int | None = field(default=None, converter=as_opt_int)
    token: str = field(default="", kw_only=True, validator=[is_str, _state])

    def __attrs_post_init__(self) -> None:
        if (self.parity is None) == (not self.token):
            fail(f"mbarrier.try_wait on {self.bar}: give a phase parity or a state token (one of the two)",
                 rule="try_wait waits on a parity or on a state token", ref=f"{_REF}.16")
        if self.parity is not None and self.parity not in (0, 1):
            fail(f"phase parity must be 0 or 1, got {self.parity}", rule="try_wait.parity takes 0 or 1",
                 ref=f"{_REF}.16")

    def ptx(self) -> str:
        if self.token:
            return f"mbarrier.try_wait.shared::cta.b64 p, [{self.bar}], {self.token};"
        return f"mbarrier.try_wait.parity.shared::cta.b64 p, [{self.bar}], {self.parity};"

    def footprint(self, warp: int = 0) -> Footprint:
        return Footprint(barriers=(self.bar,), regs_read=(self.token,) if self.token else ())
