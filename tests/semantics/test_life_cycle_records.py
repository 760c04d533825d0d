"""The records of the mbarrier life cycle, elect.sync and tcgen05.shift in the semantics layer: an invalidated
mbarrier is no barrier any more, a token wait waits for the phase its arrive's token names (and cannot alias a phase
two back, as a parity wait can), elect.sync computes nothing, tcgen05.shift's data movement is refused by name."""

import pytest

from simtc.isa.mbarrier import MbarrierArrive, MbarrierInit, MbarrierInval, MbarrierTryWait
from simtc.isa.program import Barrier, Program, Role
from simtc.isa.sync import ElectSync
from simtc.isa.tcgen05 import Shift
from simtc.semantics import Cta, SemanticsError, WouldBlock, execute, run_program


def test_inval_ends_the_barrier():
    cta = Cta()
    execute(MbarrierInit("b", 1), cta)
    execute(MbarrierInval("b"), cta)
    with pytest.raises(SemanticsError, match=r"used before mbarrier\.init"):
        execute(MbarrierArrive("b"), cta)
    execute(MbarrierInit("b", 2), cta)  # the bytes may hold a new barrier after inval
    assert cta.mbarrier("b").count == 2


def test_token_wait_waits_for_its_own_phase():
    cta = Cta()
    execute(MbarrierInit("b", 2), cta)
    execute(MbarrierArrive("b", state="s"), cta, warp=0, threads=1)   # phase 0, 1 of 2
    with pytest.raises(WouldBlock, match="phase 0"):
        execute(MbarrierTryWait("b", token="s"), cta, warp=0)
    execute(MbarrierArrive("b"), cta, warp=1, threads=1)             # phase 0 completes
    execute(MbarrierTryWait("b", token="s"), cta, warp=0)
    for _ in range(2):                                               # phase 1 completes
        execute(MbarrierArrive("b"), cta, warp=1, threads=1)
    execute(MbarrierArrive("b", state="s"), cta, warp=0, threads=1)  # phase 2, 1 of 2
    # a parity wait cannot tell phase 1 (completed) from phase 3: parity 1 passes; the token names phase 2 and blocks
    execute(MbarrierTryWait("b", 1), cta, warp=0)
    with pytest.raises(WouldBlock, match="phase 2"):
        execute(MbarrierTryWait("b", token="s"), cta, warp=0)


def test_token_of_another_barrier_is_refused():
    cta = Cta()
    execute(MbarrierInit("a", 1), cta)
    execute(MbarrierInit("b", 1), cta)
    execute(MbarrierArrive("a", state="s"), cta, warp=0, threads=1)
    with pytest.raises(SemanticsError, match="holds no state token of an arrive on 'b'"):
        execute(MbarrierTryWait("b", token="s"), cta, warp=0)


def test_a_program_with_the_life_cycle_runs():
    prog = Program("life", (
        Role("lane", (0,), (ElectSync(), MbarrierArrive("t", state="st0"), MbarrierTryWait("t", token="st0"),
                            MbarrierInval("t")), threads=1),
    ), barriers=(Barrier("t", "mbarrier", 1),))
    cta = run_program(prog)
    assert "t" not in cta.mbarriers


def test_shift_data_movement_is_refused_by_name():
    with pytest.raises(SemanticsError, match=r"tcgen05\.shift is not modelled") as e:
        execute(Shift(0), Cta())
    assert e.value.rule == "modelled tcgen05 data movement"
