"""FlashMLA's SM100 sparse-decode head64 kernel (V32 configuration): constants, plans, split, programs."""

from simtc.kernels.flashmla.qk import (
    D_NOPE,
    D_Q,
    D_ROPE,
    P_COLUMN,
    Q_COLUMN,
    Q_TAIL_COLUMN,
    QK_IDESC,
    SMEM_V32,
    load_qk,
    q_copies,
    qk_mmas,
    read_p,
    replay_qk,
)

__all__ = ["D_NOPE", "D_Q", "D_ROPE", "P_COLUMN", "QK_IDESC", "Q_COLUMN", "Q_TAIL_COLUMN", "SMEM_V32", "load_qk",
           "q_copies", "qk_mmas", "read_p", "replay_qk"]
