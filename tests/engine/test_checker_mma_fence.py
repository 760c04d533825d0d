"""An MMA (or tcgen05.cp) reading shared memory that a TMA load or another warp's st.shared produced relies on the
mbarrier wait that published it: without tcgen05.fence::after_thread_sync after the wait, the tcgen05 operation is
not ordered after it (PTX ISA 9.0 §9.7.16.6.4). Every such fence of FlashMLA head64's MMA thread, deleted one at a
time, is flagged; the kernel itself is clean."""

from __future__ import annotations

import attrs
import pytest

from simtc.isa.tcgen05 import FenceAfterThreadSync
from simtc.kernels.flashmla import replay as rp
from simtc.kernels.flashmla.head64 import head64_program

BLOCKS = 4


def _without_fence(k: int):
    def transform(program):
        roles = []
        for role in program.roles:
            if role.name == "mma":
                recs = list(role.records)
                del recs[[i for i, r in enumerate(recs) if isinstance(r, FenceAfterThreadSync)][k]]
                role = attrs.evolve(role, records=tuple(recs))
            roles.append(role)
        return attrs.evolve(program, roles=tuple(roles))
    return transform


def _fences():
    mma = head64_program("v32", BLOCKS).role("mma")
    return [(k, mma.records[i - 1].bar) for k, i in
            enumerate(i for i, r in enumerate(mma.records) if isinstance(r, FenceAfterThreadSync))]


def test_the_kernel_is_clean():
    assert rp.replay("v32", BLOCKS, 0, timing_only=True).hazards == []


@pytest.mark.parametrize("k, bar", _fences())
def test_each_mma_thread_fence_deleted(k, bar):
    rules = {h["rule"] for h in rp.replay("v32", BLOCKS, 0, timing_only=True, transform=_without_fence(k)).hazards}
    if bar == "q_utccp":
        # harmless: the thread waits for its own tcgen05.cp commit, and its cp -> mma pair is pipelined in order
        # (PTX ISA 9.0 §9.7.16.6.4); what the MMAs read of Q is in TMEM, written by that same thread's copies
        assert rules == set()
    else:  # q_tma (its own TMA load of Q), rope_ready (TMA gather), nope_ready / so_ready (other warps' st.shared)
        assert "missing-after-thread-sync-fence" in rules, (k, bar)
