"""A function's control-flow graph and the immediate post-dominator of each branch: where a divergent warp
reconverges.

The executor keeps a SIMT reconvergence stack per warp, as GPGPU-Sim's cuda-sim does (``ptx_sim``'s
``simt_stack``, with post-dominators from ``ptx_ir``'s ``function_info``): when a branch splits the active
lanes, both sides run one after the other and meet again at the branch's **immediate post-dominator** (the
first instruction every path from the branch to the function's end passes through). This module computes
those from the instruction list alone: basic blocks (leaders are the first instruction, branch targets and the
instruction after a branch, ``ret``, ``exit`` or ``trap``), their successors (an unguarded ``bra`` goes to its
target only, a guarded one also falls through; ``ret``/``exit`` go to the virtual exit node, ``trap`` nowhere), and
post-dominators by the iterative algorithm of Cooper, Harvey and Kennedy ("A Simple, Fast Dominance
Algorithm", 2001) on the reversed graph.

Instruction indices: the virtual exit node is ``len(body)``. A block that cannot reach the exit (an infinite
loop) post-dominates nothing and gets the exit as its reconvergence point.

>>> from simtc.ptx.ir import Guard, Instruction, Sym
>>> body = (Instruction("setp.lt.s32"), Instruction("bra", (Sym("L"),), guard=Guard("%p1")),
...         Instruction("add.s32"), Instruction("mov.u32"), Instruction("ret"))
>>> reconvergence(body, {"L": 3})   # the branch at 1 reconverges at 3 (the label)
{1: 3}
"""

from __future__ import annotations

from simtc.ptx.errors import PtxSyntaxError

__all__ = ["TERMINATORS", "reconvergence", "successors"]

TERMINATORS = frozenset({"bra", "ret", "exit", "trap", "brx"})
"""Opcodes that end a basic block."""


def _target(ins, labels: dict[str, int]) -> int:
    op = ins.operands[-1] if ins.operands else None
    name = getattr(op, "name", None)
    if name not in labels:
        raise PtxSyntaxError(f"line {ins.line}: branch target {op} is not a label of this function",
                             rule="branch targets are labels", ref="PTX ISA 9.0 §9.7.12")
    return labels[name]


def successors(body, labels: dict[str, int], pc: int, tables: dict | None = None) -> tuple[int, ...]:
    """Instruction indices control can reach from ``body[pc]`` (``len(body)``: the function's exit); ``tables``:
    the function's ``.branchtargets`` lists (a ``brx.idx`` reaches its list's labels; without its list, any
    label)."""
    ins = body[pc]
    end = len(body)
    op = ins.opcode
    nxt = (pc + 1,) if pc + 1 < end else (end,)
    if op == "bra":
        t = _target(ins, labels)
        return (t,) if ins.guard is None else tuple(dict.fromkeys((t, *nxt)))
    if op == "trap":  # the kernel aborts: no path on to the exit, so a branch around an assert reconverges after it
        return () if ins.guard is None else nxt
    if op in ("ret", "exit"):
        return (end,) if ins.guard is None else tuple(dict.fromkeys((end, *nxt)))
    if op == "brx":
        names = (tables or {}).get(getattr(ins.operands[-1], "name", None)) if ins.operands else None
        if names is not None and all(n in labels for n in names):
            return tuple(dict.fromkeys((*(labels[n] for n in names), *(nxt if ins.guard is not None else ()))))
        return tuple(dict.fromkeys((*labels.values(), *nxt)))  # conservative: any label
    return nxt


def reconvergence(body, labels: dict[str, int], tables: dict | None = None) -> dict[int, int]:
    """Branch pc -> the pc of its immediate post-dominator, for every ``bra``/``brx``/``ret``/``exit`` that can
    split a warp (guarded, or with a register target); ``tables`` as :func:`successors`."""
    n = len(body)
    if n == 0:
        return {}
    leaders = {0}
    for pc, ins in enumerate(body):
        if ins.opcode in TERMINATORS:
            leaders.update(s for s in successors(body, labels, pc, tables) if s < n)
            if pc + 1 < n:
                leaders.add(pc + 1)
    starts = sorted(leaders)
    block_of = {}
    ends = {}
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else n
        ends[s] = e - 1
        block_of[s] = s
    exit_node = n
    succ: dict[int, tuple[int, ...]] = {s: successors(body, labels, ends[s], tables) for s in starts}
    succ[exit_node] = ()
    pred: dict[int, list[int]] = {s: [] for s in (*starts, exit_node)}
    for s, outs in succ.items():
        for t in outs:
            pred[t].append(s)
    # reverse postorder of the reversed graph, from the exit
    order: list[int] = []
    seen = {exit_node}
    stack = [(exit_node, iter(pred[exit_node]))]
    while stack:
        v, it = stack[-1]
        w = next(it, None)
        if w is None:
            stack.pop()
            order.append(v)
        elif w not in seen:
            seen.add(w)
            stack.append((w, iter(pred[w])))
    order.reverse()
    index = {v: i for i, v in enumerate(order)}
    ipdom: dict[int, int] = {exit_node: exit_node}

    def intersect(a: int, b: int) -> int:
        while a != b:
            while index[a] > index[b]:
                a = ipdom[a]
            while index[b] > index[a]:
                b = ipdom[b]
        return a

    changed = True
    while changed:
        changed = False
        for v in order[1:]:
            done = [s for s in succ[v] if s in ipdom]
            if not done:
                continue
            new = done[0]
            for s in done[1:]:
                new = intersect(new, s)
            if ipdom.get(v) != new:
                ipdom[v] = new
                changed = True
    out = {}
    for s in starts:
        pc = ends[s]
        ins = body[pc]
        if ins.opcode in ("bra", "brx", "ret", "exit") and (ins.guard is not None or ins.opcode == "brx"):
            out[pc] = ipdom.get(s, exit_node)
    return out
