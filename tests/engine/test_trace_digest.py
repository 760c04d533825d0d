"""Pinned traces: the engine's event list (and hazard reports) of fixed Programs, as sha256 digests.

A speed change of the engine must leave every trace identical; these digests catch any change of
event order, cycle, detail text or causal link. A deliberate change of the timing model or of the
event vocabulary changes them too: then the new digests (printed by the failing assertion) are
pinned after checking the traces by hand.
"""

import hashlib

import pytest

from simtc.engine.core import Engine
from simtc.kernels.flashmla.programs import qk_loop
from simtc.kernels.hazards import EXPECTED, build
from simtc.kernels.registry import build as build_registered


def _digest(engine: Engine) -> str:
    h = hashlib.sha256()
    for e in engine.trace:
        h.update(repr(tuple(e)).encode())
    for z in engine.hazards:
        h.update(str(z).encode())
    h.update(repr(engine.deadlock).encode())
    return h.hexdigest()[:16]


PINNED = {
    "flashmla-qk": "9572a7f685900ee9",
    "qk-loop-20": "19e9cae3b0a703ec",
    "hazard-catalogue": "2edb277bf4a0bcda",
    "hazard-catalogue-2": "abb25e959808b21e",
}

_FIRST = ("alloc-after-relinquish", "alloc-over-512", "deadlock-missing-arrive", "deadlock-named-barrier",
          "dealloc-unallocated", "lane-quadrant", "ld-before-commit", "ld-st-no-wait-ld", "missing-after-fence",
          "missing-before-fence", "missing-proxy-fence", "mma-after-tma-no-fence", "over-arrival",
          "overwrite-before-ld-done", "parity-not-flipped", "smem-overwrite-in-flight", "tma-wrong-parity",
          "tx-underflow")
FIRST_CATALOGUE = sorted(f"hazard/{n}{s}" for n in _FIRST for s in ("", "-fixed"))
"""The catalogue's first 36 programs (pinned as "hazard-catalogue"; the later entries as "hazard-catalogue-2")."""


def _programs():
    return {"flashmla-qk": [build_registered("flashmla-qk")], "qk-loop-20": [qk_loop(20)],
            "hazard-catalogue": [build(n) for n in FIRST_CATALOGUE],
            "hazard-catalogue-2": [build(n) for n in sorted(EXPECTED) if n not in FIRST_CATALOGUE]}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_trace_digest_pinned(name):
    h = hashlib.sha256()
    for prog in _programs()[name]:
        h.update(_digest(Engine(prog).run()).encode())
    assert h.hexdigest()[:16] == PINNED[name], (name, h.hexdigest()[:16])


@pytest.mark.parametrize("name", ["flashmla-qk", "qk-loop-20", "hazard-catalogue", "hazard-catalogue-2"])
def test_checker_does_not_change_the_trace(name):
    for prog in _programs()[name]:
        on, off = Engine(prog).run(), Engine(prog, check=False).run()
        assert on.trace == off.trace
        assert all(z.rule == "deadlock" for z in off.hazards)
