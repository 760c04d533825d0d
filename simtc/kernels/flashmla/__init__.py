"""FlashMLA's SM100 sparse-decode head64 kernel (V32 configuration): the one source of its facts.

* :mod:`~simtc.kernels.flashmla.constants` -- dims, tile sizes, TMEM columns, the QK instruction descriptor.
* :mod:`~simtc.kernels.flashmla.plan` -- the shared-memory plan with its unions, the mbarrier table, the
  TMEM map, the Q/K tile layouts and how Q and K are stored.
* :mod:`~simtc.kernels.flashmla.split` -- the Q split (P_lo / P_hi) and the Hopper two-chain form of it.
* :mod:`~simtc.kernels.flashmla.programs` -- the records and the ``flashmla-qk`` Program; its replay.

Sources: ``deepseek-ai/FlashMLA`` ``csrc/sm100/decode/head64/{config.h,kernel.cuh}`` at commit ``9241ae3``
[kernel]; each module names the lines it rests on.
"""

from simtc.kernels.flashmla.constants import (
    B_H,
    B_TOPK,
    D_NOPE,
    D_Q,
    D_ROPE,
    D_V,
    O_COLUMN,
    P_COLUMN,
    Q_COLUMN,
    Q_TAIL_COLUMN,
    QK_IDESC,
)
from simtc.kernels.flashmla.plan import MBARRIERS_V32, SMEM_V32, TMEM_V32, store_qk_operand
from simtc.kernels.flashmla.programs import load_qk, q_copies, qk_mmas, qk_program, read_p, replay_qk, tmem_setup
from simtc.kernels.flashmla.split import q_split, qk_half_descriptors, split_dims

__all__ = [
    "B_H", "B_TOPK", "D_NOPE", "D_Q", "D_ROPE", "D_V", "MBARRIERS_V32", "O_COLUMN", "P_COLUMN", "QK_IDESC",
    "Q_COLUMN", "Q_TAIL_COLUMN", "SMEM_V32", "TMEM_V32", "load_qk", "q_copies", "q_split", "qk_half_descriptors",
    "qk_mmas", "qk_program", "read_p", "replay_qk", "split_dims", "store_qk_operand", "tmem_setup",
]
