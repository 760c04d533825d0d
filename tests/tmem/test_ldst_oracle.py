"""tcgen05.ld / st maps, exhaustively, against the CuTe-derived oracle (tests/data/cute_tmem.json.gz).

For all 74 load ops and all 74 store ops (every shape, every .num, packed and unpacked) and
every thread and register, the oracle lists the TMEM cell(s) -- (lane, column, register half) --
that CuTe's ``Copy_Traits`` assign. simtc's :class:`LdStOp` must give the same cells, and a
store must be the exact inverse of the load of the same form.
"""

import numpy as np
import pytest

from simtc.tmem import all_ops

OPS = {op.cutlass: op for op in all_ops()}


def _entry(cute_tmem, name):
    found = [e for e in cute_tmem["ldst"] if e["op"] == name]
    assert len(found) == 1, name
    return found[0]


def _cells(entry):
    """Oracle map -> (lane, column) int arrays (32, nregs, halves), pieces ordered by register half."""
    rows = []
    for regs in entry["map"]:
        rows.append([[(p[0], p[1]) for p in sorted(pieces, key=lambda p: -1 if p[2] is None else p[2])]
                     for pieces in regs])
    a = np.array(rows, dtype=np.int64)
    return a[..., 0], a[..., 1]


def test_oracle_covers_every_form(cute_tmem):
    names = {e["op"] for e in cute_tmem["ldst"]}
    assert names == set(OPS) | {n.replace("_LOAD_", "_STORE_") for n in OPS}
    assert len(cute_tmem["ldst"]) == 148


@pytest.mark.parametrize("name", sorted(OPS), ids=str)
@pytest.mark.parametrize("direction", ["LOAD", "STORE"])
def test_map_matches_cute(cute_tmem, name, direction):
    op = OPS[name]
    e = _entry(cute_tmem, name.replace("_LOAD_", f"_{direction}_"))
    assert (e["shape"], e["num"], e["pack16"], e["regs_per_thread"]) == (op.shape.name, op.num, op.pack, op.nregs)
    assert (e["lanes_spanned"], e["cols_spanned"]) == (op.lanes, op.span)
    if e["imm_half_splitoff"] is not None:
        assert e["imm_half_splitoff"] == op.imm
    if e["ptx"]:
        assert e["ptx"] == op.ptx("ld" if direction == "LOAD" else "st")
    lane, col = _cells(e)
    want_lane, want_col = op.cells()
    assert lane.shape == want_lane.shape
    assert (lane == want_lane).all() and (col == want_col).all()
    if op.pack:  # half 0 = the register's low 16 bits, half 1 = its high 16 bits
        halves = {p[2] for regs in e["map"] for pieces in regs for p in pieces}
        assert halves == {0, 1}


@pytest.mark.parametrize("name", sorted(OPS), ids=str)
def test_store_is_the_load_reversed_in_cute(cute_tmem, name):
    ld, st = _entry(cute_tmem, name), _entry(cute_tmem, name.replace("_LOAD_", "_STORE_"))
    assert ld["map"] == st["map"]
    assert st["cute"]["src_layout"] == ld["cute"]["dst_layout"] and st["cute"]["dst_layout"] == ld["cute"]["src_layout"]


@pytest.mark.parametrize("name", sorted(OPS)[::7], ids=str)
def test_simulated_ld_reads_what_cute_says(cute_tmem, name):
    """Run tcgen05.ld on a TensorMemory whose cells hold their own address, and compare with the oracle."""
    from simtc.tmem import TensorMemory

    op = OPS[name]
    tm = TensorMemory()
    tm.alloc(512)
    lane, col = np.meshgrid(np.arange(128), np.arange(512), indexing="ij")
    tm.cells[:] = (lane << 16 | col).astype(np.uint32) & (0xFFFF if op.pack else 0xFFFFFFFF)
    regs = tm.ld(0, op, warp=0)
    ol, oc = _cells(_entry(cute_tmem, name))
    if op.pack:
        assert (regs & 0xFFFF == oc[..., 0]).all() and (regs >> 16 == oc[..., 1]).all()
    else:
        assert (regs >> 16 == ol[..., 0]).all() and (regs & 0xFFFF == oc[..., 0]).all()
