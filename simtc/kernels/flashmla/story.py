"""What the tour and the notebooks say about one head64 replay, each statement computed in one place.

Three statements recur in ``simtc tour`` and notebooks 03 and 04, and each needs its basis said with it:

* :func:`hazard_lines` -- the hazard checker's findings, the kernel's own known race
  (:data:`~simtc.kernels.flashmla.head64.KNOWN_RACES`: the formal write-after-read on ``rowwise_max_buf``,
  FlashMLA ``kernel.cuh`` lines 229 and 309 at ``9241ae3``) labelled as such and apart from any other hazard;
* :func:`throughput_basis` -- what a TFLOP/s figure includes: how many blocks, with data or timing only, and in
  which blocks the lazy O rescale ran (decided by the data, or assumed when there is none);
* :func:`exchange_share` -- the P_lo/P_hi exchange's cost as fractions, each naming its whole: its cycles on a
  softmax warp against the steady-state block, and what removing it saves the steady-state block and the whole
  request (a timing-only replay of the same Program without the exchange, with the same O rescale).

>>> from simtc.kernels.flashmla.replay import replay
>>> throughput_basis(replay("v32", 4, 0, timing_only=True))
'4-block request, timing only (no data: O rescale assumed in no block)'
"""

from __future__ import annotations

from attrs import frozen

__all__ = ["ExchangeShare", "exchange_share", "hazard_counts", "hazard_lines", "rescale_basis", "throughput_basis"]


def _blocks_text(blocks) -> str:
    blocks = list(blocks)
    if not blocks:
        return "no block"
    return f"block{'s' if len(blocks) > 1 else ''} {', '.join(map(str, blocks))}"


def rescale_basis(r) -> str:
    """Whether the replay ``r`` (:class:`~simtc.kernels.flashmla.replay.Head64Replay`) ran with data and where O
    was rescaled: ``"with data (O rescaled in block 2, as the data decides)"``, or timing only with the assumed
    pattern."""
    where = _blocks_text(r.rescale_blocks)
    if r.o_rel_error is None:
        return f"timing only (no data: O rescale assumed in {where})"
    how = "as the data decides" if r.rescale_source == "data" else "as given, checked against the data"
    return f"with data (O rescaled in {where}, {how})"


def throughput_basis(r) -> str:
    """What a throughput figure of replay ``r`` includes: ``"4-block request, with data (O rescaled in block 2,
    as the data decides)"``."""
    return f"{r.blocks}-block request, {rescale_basis(r)}"


def hazard_counts(r) -> tuple[int, int]:
    """(hazards the Program introduced, hazards that are the kernel's known race) of replay ``r``."""
    return len(r.hazards), len(r.known_races)


def _who(rec) -> str:
    return "-" if rec is None else f"{rec['role']}[w{rec['warp']}]#{rec['index']}"


def hazard_lines(r, *, each: int = 4) -> list[str]:
    """The checker's findings on replay ``r`` as paragraphs: the kernel's known race, named and apart (with up to
    ``each`` of its hazards), then every other hazard (the ones :attr:`Head64Replay.ok` counts)."""
    other, known = hazard_counts(r)
    out = [f"The hazard checker reports {other + known} hazard(s): {known} of them FlashMLA's own known race "
           f"(a finding about the kernel's source, listed apart and not counted against the replay), {other} "
           "other." if known else f"The hazard checker reports {other} hazard(s)."]
    groups: dict[tuple[str, str], list[dict]] = {}
    for h in r.known_races:
        groups.setdefault((h["rule"], h["known"]["title"]), []).append(h)
    for (rule, title), hs in groups.items():
        out.append(f"Known race of the kernel: {len(hs)} x {rule}, {title}: "
                   + "; ".join(f"cycle {h['cycle']} {_who(h['first'])} -> {_who(h['second'])}" for h in hs[:each])
                   + ("; ..." if len(hs) > each else "") + ".")
    if r.hazards:
        out.append(f"Other hazards ({other}):")
        out += [f"  cycle {h['cycle']}: {h['rule']}: {_who(h['first'])} -> {_who(h['second'])}: {h['message']} "
                f"[{h['ref']}]" for h in r.hazards[:each]]
        if other > each:
            out.append(f"  ... and {other - each} more")
    else:
        out.append("Other hazards: none.")
    return out


@frozen
class ExchangeShare:
    """The exchange's cost in one replay, with the wholes its fractions are of (:func:`exchange_share`)."""

    blocks: int
    basis: str
    """:func:`throughput_basis` of the replay: blocks, data or not, where O was rescaled."""
    exchange_cycles: float
    """Cycles per block the exchange adds to a softmax warp (:func:`~simtc.kernels.flashmla.alternatives.
    exchange_cost`: mean over warps 0-3 and the blocks)."""
    steady_cycles: float
    """The steady-state block: mean cycles between consecutive ``sv_done`` phases (blocks 1 .. blocks-1)."""
    steady_cycles_without: float
    """The same, for the same Program without the exchange (timing only, the same O rescale)."""
    whole_cycles: int
    whole_cycles_without: int

    @property
    def warp_share(self) -> float:
        """The exchange's cycles on a softmax warp / the steady-state block."""
        return self.exchange_cycles / self.steady_cycles

    @property
    def saved_per_block(self) -> float:
        return self.steady_cycles - self.steady_cycles_without

    @property
    def steady_share(self) -> float:
        """What removing the exchange saves the steady-state block / that block."""
        return self.saved_per_block / self.steady_cycles

    @property
    def whole_share(self) -> float:
        """What removing the exchange saves the whole request / the whole request."""
        return (self.whole_cycles - self.whole_cycles_without) / self.whole_cycles

    def text(self) -> str:
        """The statement the tour and notebook 03 both print."""
        last = self.blocks - 1
        span = f"block {last}" if last == 1 else f"blocks 1-{last}"
        return (f"The exchange takes {self.exchange_cycles:.0f} cycles per block on each softmax warp, "
                f"{self.warp_share:.0%} of the steady-state block: {self.steady_cycles:,.0f} cycles, the mean of "
                f"{span} of the {self.basis}. The kernel's time shows {self.saved_per_block:.0f} of them: without "
                f"the exchange (timing only, same O rescale) the steady-state block takes "
                f"{self.steady_cycles_without:,.0f} cycles ({self.steady_share:.0%} less) and the whole request "
                f"{self.whole_cycles_without:,} instead of {self.whole_cycles:,} cycles ({self.whole_share:.0%} less).")


def exchange_share(r) -> ExchangeShare:
    """The exchange's share of replay ``r`` (kept engine; blocks >= 2), against a timing-only replay of the same
    request and O rescale pattern with :func:`~simtc.kernels.flashmla.alternatives.no_exchange`."""
    from simtc.errors import SimtcError
    from simtc.kernels.flashmla.alternatives import exchange_cost, no_exchange
    from simtc.kernels.flashmla.replay import replay

    if r.engine is None or r.blocks < 2:
        raise SimtcError("the exchange's share needs a replay of 2 or more blocks with its engine kept "
                         "(replay(..., keep_engine=True))", rule="exchange share: steady state of >= 2 blocks")
    without = replay(r.model, r.blocks, r.seed, timing_only=True, rescale=list(r.rescale_blocks),
                     transform=no_exchange, timing=r.engine.timing)
    return ExchangeShare(r.blocks, throughput_basis(r), exchange_cost(r.engine), r.cycles_per_block_steady,
                         without.cycles_per_block_steady, r.cycles_whole, without.cycles_whole)
