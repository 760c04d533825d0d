"""FlashMLA's own compiled kernels run in simtc through :mod:`simtc.cuda`: the SM100 head64 sparse decode
(:mod:`simtc.cuda.executed_sm100.head64`), its parameters built as FlashMLA's host code builds them."""
