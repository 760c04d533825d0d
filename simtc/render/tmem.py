"""Pictures of Tensor Memory: the whole 128 x 512 map, a data-path layout, and what a ``tcgen05.ld`` returns.

* :class:`TmemMapView` -- lanes x columns, compressed into blocks (default 4 lanes x 8
  columns per character), coloured by allocation, named region or last writer; the four
  warp quadrants are marked. A block holding more than one label shows ``▒``.
* :class:`LayoutView` -- where each ``D[m][n]`` of an MMA lands for a data-path layout:
  a footprint picture plus a table of which rows/columns of D each 16-lane group holds.
* :class:`LdView` -- a ``tcgen05.ld/st`` form: which thread and register own each cell.
* :class:`CpView` -- a ``tcgen05.cp`` shape: which TMEM lanes each shared-memory source row goes to.

Wide pictures fold into stacked panels on a narrow console; nothing is cut.

Every number comes from :mod:`simtc.tmem`; the views only draw.
"""

from __future__ import annotations

import numpy as np
from rich.jupyter import JupyterMixin
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from simtc.render.fold import fold_columns, too_narrow, width_of
from simtc.render.theme import phase_style, style
from simtc.tmem.address import COLUMNS, LANES, QUADRANT_LANES
from simtc.tmem.cp import CpShape
from simtc.tmem.layouts import DataPathLayout
from simtc.tmem.ldst import LdStOp
from simtc.tmem.memory import TensorMemory
from simtc.tmem.regions import TmemRegion

__all__ = ["CpView", "LayoutView", "LdView", "TmemMapView"]

_SYMBOLS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MIXED = "▒"
_EMPTY = "·"


def _block_labels(labels: np.ndarray, bl: int, bc: int) -> np.ndarray:
    """Reduce a (lanes, columns) int label map to blocks: the label, or -2 when a block is mixed."""
    nl, nc = labels.shape
    b = labels.reshape(nl // bl, bl, nc // bc, bc)
    lo, hi = b.min(axis=(1, 3)), b.max(axis=(1, 3))
    return np.where(lo == hi, lo, -2)


def _runs(row: np.ndarray):
    """(start, stop, value) of the runs of equal values in a 1-D array."""
    edges = np.flatnonzero(np.diff(row)) + 1
    starts = np.concatenate([[0], edges])
    stops = np.concatenate([edges, [row.size]])
    return zip(starts.tolist(), stops.tolist(), row[starts].tolist(), strict=True)


def _grid_line(row: np.ndarray, symbol, styler) -> Text:
    t = Text()
    for a, b, v in _runs(row):
        t.append(symbol(v) * (b - a), style=styler(v))
    return t


def _label_style(v: int):
    if v == -1:
        return style("simtc.dim")
    if v == -2:
        return style("simtc.note")
    return phase_style(v)


class TmemMapView(JupyterMixin):
    """The 128 x 512 Tensor Memory map, compressed into blocks of ``lanes_per_row`` x ``columns_per_char``.

    ``by`` = ``"allocation"`` (allocation id), ``"region"`` (the given :class:`TmemRegion`\\ s)
    or ``"writer"`` (the instruction that last wrote the cell). ``tmem`` may be ``None`` when
    only regions are drawn.
    """

    def __init__(self, tmem: TensorMemory | None = None, *, regions: tuple[TmemRegion, ...] | list = (),
                 by: str | None = None, lanes_per_row: int = 4, columns_per_char: int = 8, title: str | None = None):
        from simtc.errors import SimtcError

        by = by or ("region" if regions else "allocation")
        if by not in ("allocation", "region", "writer"):
            raise SimtcError(f"unknown colouring {by!r}; use allocation, region or writer", rule="TMEM map views")
        if tmem is None and by != "region":
            raise SimtcError(f"colouring by {by} needs a TensorMemory", rule="TMEM map views")
        if LANES % lanes_per_row or QUADRANT_LANES % lanes_per_row or COLUMNS % columns_per_char:
            raise SimtcError("lanes_per_row must divide 32 and columns_per_char must divide 512",
                             rule="TMEM map compression")
        self.tmem, self.regions, self.by = tmem, tuple(regions), by
        self.bl, self.bc, self.title = lanes_per_row, columns_per_char, title
        self._region_symbols: list[str] = []
        for r in self.regions:  # first letter of the name not used yet (Q, then t for Q_tail)
            free = [c for c in r.name + _SYMBOLS if c.isalnum() and c not in self._region_symbols]
            self._region_symbols.append(free[0])

    def labels(self) -> tuple[np.ndarray, list[str]]:
        """Per-cell label ids (128, 512) and the name of each id (-1 = nothing)."""
        if self.by == "allocation":
            lab = np.array(self.tmem.owner, dtype=np.int64)
            names = [str(a) for a in self.tmem.history]
        elif self.by == "writer":
            lab = self.tmem.last_writer.astype(np.int64)
            names = list(self.tmem.instructions)
        else:
            lab = np.full((LANES, COLUMNS), -1, dtype=np.int64)
            for i, r in enumerate(self.regions):
                lab[r.lanes[0]:r.lanes[1] + 1, r.columns[0]:r.columns[1] + 1] = i
            names = [str(r) for r in self.regions]
        return lab, names

    def _symbol(self, v: int) -> str:
        if v == -1:
            return _EMPTY
        if v == -2:
            return _MIXED
        if self.by == "region":
            return self._region_symbols[v]
        return _SYMBOLS[v % len(_SYMBOLS)]

    def __rich_measure__(self, console, options):
        w = 11 + COLUMNS // self.bc
        return Measurement(min(w, 11 + 64), max(w, 90))

    def _panel(self, blocks: np.ndarray, p0: int, p1: int):
        """Lines of the map for block columns ``p0:p1`` (one panel)."""
        ticks = [" "] * (p1 - p0)
        for c in range(0, COLUMNS, 64):
            for j, ch in enumerate(str(c)):
                if p0 <= c // self.bc + j < p1 and c // self.bc >= p0:
                    ticks[c // self.bc + j - p0] = ch
        yield Text(f"{'column':>9}  " + "".join(ticks), style=style("simtc.header"))
        for r in range(blocks.shape[0]):
            lane0 = r * self.bl
            if lane0 % QUADRANT_LANES == 0:
                q = lane0 // QUADRANT_LANES
                yield Text(f"── warp quadrant {q} (warps with w % 4 = {q}): lanes {lane0}-{lane0 + 31} ──",
                           style=style("simtc.header"))
            line = Text(f"{lane0:>4}-{lane0 + self.bl - 1:<4}  " if self.bl > 1 else f"{lane0:>9}  ",
                        style=style("simtc.dim"))
            line.append_text(_grid_line(blocks[r, p0:p1], self._symbol, _label_style))
            yield line

    def __rich_console__(self, console, options):
        lab, names = self.labels()
        blocks = _block_labels(lab, self.bl, self.bc)
        head = self.title or f"Tensor Memory 128 lanes x 512 columns, coloured by {self.by}"
        yield Text(f"{head}  (1 character = {self.bl} lanes x {self.bc} columns; {_MIXED} = mixed, "
                   f"{_EMPTY} = none)", style=style("simtc.title"))
        nchar = COLUMNS // self.bc
        avail = options.max_width - 11
        if avail < 8:
            yield too_narrow("TMEM map", 11 + min(nchar, 64), options.max_width)
            return
        tick = max(1, 64 // self.bc)                 # characters between column ticks (every 64 columns)
        per_panel = nchar if avail >= nchar else (avail // tick * tick or avail)
        for p0 in range(0, nchar, per_panel):
            p1 = min(nchar, p0 + per_panel)
            if per_panel < nchar:
                yield Text(f"columns {p0 * self.bc}-{p1 * self.bc - 1} of 0-{COLUMNS - 1}", style=style("simtc.note"))
            yield from self._panel(blocks, p0, p1)
        present = np.unique(lab[lab >= 0])
        legend = Table(box=None, padding=(0, 1), show_header=False)
        for v in present[:24].tolist():
            legend.add_row(Text(f" {self._symbol(v)} ", style=_label_style(v)),
                           Text(names[v] if v < len(names) else ""))
        if present.size > 24:
            legend.add_row("", Text(f"... {present.size - 24} more", style=style("simtc.dim")))
        if present.size:
            yield legend
        if self.by == "region":
            for r in self.regions:
                if r.note:
                    yield Text(f"{r.name}: {r.note}", style=style("simtc.note"))


class LayoutView(JupyterMixin):
    """Where ``D[m][n]`` lands for a data-path layout: footprint picture + per-16-lane-group table.

    In the picture each character is 8 lanes x ``columns_per_char`` columns; the symbol is
    the N-part of D stored there (0 for 4x1 layouts, 0-1 for 2x2, 0-3 for 1x4) and the colour
    the 16-row block of D (``m // 16``).
    """

    def __init__(self, layout: DataPathLayout, *, c0: int = 0, columns_per_char: int | None = None):
        self.layout, self.c0 = layout, c0
        self.bc = columns_per_char or max(1, layout.columns // 64)

    def groups(self) -> list[tuple[int, int, tuple[int, int] | None, tuple[int, int] | None]]:
        """Per 16-lane group: (first lane, last lane, D rows (lo, hi) or None, D columns (lo, hi) or None)."""
        lay = self.layout
        lane, col = np.meshgrid(np.arange(LANES), np.arange(lay.columns), indexing="ij")
        m, n = lay.inverse(lane, col)
        out = []
        for g in range(LANES // 16):
            mm, nn = m[16 * g:16 * g + 16], n[16 * g:16 * g + 16]
            ok = mm >= 0
            if ok.any():
                out.append((16 * g, 16 * g + 15, (int(mm[ok].min()), int(mm[ok].max())),
                            (int(nn[ok].min()), int(nn[ok].max()))))
            else:
                out.append((16 * g, 16 * g + 15, None, None))
        return out

    def __rich_console__(self, console, options):
        lay = self.layout
        lines = lay.describe()
        yield Text(lines[0], style=style("simtc.title"))
        lane, col = np.meshgrid(np.arange(LANES), np.arange(lay.columns), indexing="ij")
        m, n = lay.inverse(lane, col)
        code = np.where(m >= 0, (n // lay.columns) * 64 + m // 16, -1)   # N-part and 16-row block of D
        bc = self.bc if lay.columns % self.bc == 0 else 1
        blocks = _block_labels(code, 8, bc)
        yield Text(f"{'':>9}  columns C0+0 .. C0+{lay.columns - 1} (C0 = {self.c0}); 1 character = 8 lanes x {bc} "
                   "column(s); symbol = N-part of D, colour = D rows // 16", style=style("simtc.note"))

        def symbol(v: int) -> str:
            return _EMPTY if v == -1 else (_MIXED if v == -2 else str(v // 64))

        def styler(v: int):
            return _label_style(v if v < 0 else v % 64)

        for r in range(blocks.shape[0]):
            lane0 = 8 * r
            if lane0 % QUADRANT_LANES == 0:
                yield Text(f"── lanes {lane0}-{lane0 + 31} (warp quadrant {lane0 // 32}) ──",
                           style=style("simtc.header"))
            t = Text(f"{lane0:>4}-{lane0 + 7:<4}  ", style=style("simtc.dim"))
            t.append_text(_grid_line(blocks[r], symbol, styler))
            yield t
        table = Table(header_style=style("simtc.header"), show_edge=False, title="which part of D each 16-lane "
                      "group holds", title_style=style("simtc.note"))
        for c in ("lanes", "D rows", "D columns", f"TMEM columns (from C0 = {self.c0})"):
            table.add_column(c)
        for lo, hi, rows, cols in self.groups():
            if rows is None:
                table.add_row(f"{lo}-{hi}", Text("unused", style=style("simtc.dim")), "", "")
            else:
                n0, n1 = cols
                table.add_row(f"{lo}-{hi}", f"{rows[0]}-{rows[1]}", f"{n0}-{n1}",
                              f"{self.c0 + n0 % lay.columns}-{self.c0 + (n1 % lay.columns)}")
        yield table
        for line in lines[1:]:
            yield Text("• " + line, style=style("simtc.inferred") if "[inferred]" in line else None)
        if "[inferred]" in lay.status or "[open]" in lay.status or "[cutlass]" in lay.status:
            yield Text(f"• Map source: {lay.status}", style=style("simtc.inferred"))


class LdView(JupyterMixin):
    """One ``tcgen05.ld/st`` form: a lanes x columns grid naming the thread and register of each cell."""

    def __init__(self, op: LdStOp, *, warp: int = 0, max_columns: int = 16, threads_listed: int = 4):
        self.op, self.warp, self.max_columns, self.threads_listed = op, warp, max_columns, threads_listed

    def __rich_measure__(self, console, options):
        w = 5 + 9 * min(self.op.span, self.max_columns)
        return Measurement(min(w, 14), w)

    def __rich_console__(self, console, options):
        op = self.op
        q0 = 32 * (self.warp % 4)
        imm = f" (immHalfSplitoff {op.imm})" if op.imm is not None else ""
        yield Text(f"{op.ptx('ld')}{imm}: {op.nregs} register(s) per thread, {op.lanes} lanes x {op.span} columns "
                   f"from taddr", style=style("simtc.title"))
        yield Text(f"warp {self.warp} may use taddr lanes {q0}" + (f" or {q0 + 16}" if op.lanes == 16 else "") +
                   f" (quadrant {self.warp % 4}); CUTLASS {op.cutlass}", style=style("simtc.note"))
        if op.pack:
            yield Text("packed: each register = low 16 bits of two adjacent cells; cell text ends in l (low half) "
                       "or h (high half)", style=style("simtc.note"))
        thr, reg, half = op.thread_of()
        shown = min(op.span, self.max_columns)
        cols = []
        for c in range(shown):
            cells = []
            for ln in range(op.lanes):
                t, r, h = int(thr[ln, c]), int(reg[ln, c]), int(half[ln, c])
                if t < 0:
                    cells.append(Text(_EMPTY, style=style("simtc.dim")))
                else:
                    cells.append(Text(f"t{t}r{r}" + ("lh"[h] if op.pack else ""), style=phase_style(t % 8)))
            cols.append((f"+{c}", cells))
        fixed = width_of("lane", *(f"+{ln}" for ln in range(op.lanes)))
        widths = [width_of(h, *cells) + 1 for h, cells in cols]
        chunks = fold_columns(widths, fixed=fixed, max_width=options.max_width)
        if not chunks:
            yield too_narrow("tcgen05.ld map", fixed + max(widths), options.max_width)
        for chunk in chunks:
            if len(chunks) > 1:
                yield Text(f"column offsets +{chunk.start} to +{chunk.stop - 1} of the {shown} shown",
                           style=style("simtc.note"))
            table = Table(box=None, padding=(0, 0, 0, 1), header_style=style("simtc.header"), pad_edge=False)
            table.add_column("lane", justify="right", style=style("simtc.header"), no_wrap=True)
            for c in chunk:
                table.add_column(cols[c][0], justify="center", no_wrap=True)
            for ln in range(op.lanes):
                table.add_row(f"+{ln}", *(cols[c][1][ln] for c in chunk))
            yield table
        if shown < op.span:
            yield Text(f"... column offsets +{shown} to +{op.span - 1} not drawn (max_columns = {self.max_columns}); "
                       "the thread list below and --json give every cell", style=style("simtc.dim"))
        lane, col = op.lane_offsets(), op.columns()
        for t in range(min(self.threads_listed, 32)):
            regs = " ".join(f"r{i}=({int(lane[t, i])},{','.join(str(int(c)) for c in col[t, i])})"
                            for i in range(min(op.nregs, 8)))
            more = " ..." if op.nregs > 8 else ""
            yield Text(f"thread {t}: {regs}{more}", style=style("simtc.dim"))


class CpView(JupyterMixin):
    """A ``tcgen05.cp`` shape: source row -> TMEM lanes, at most ``max_rows`` rows (every k-th, said in the title).

    >>> from simtc.render import to_text
    >>> from simtc.tmem import cp_shape
    >>> "every 8th source row" in to_text(CpView(cp_shape("128x256b")))
    True
    """

    def __init__(self, shape: CpShape, *, max_rows: int = 16):
        from simtc.errors import SimtcError

        if max_rows < 1:
            raise SimtcError(f"max_rows must be at least 1, got {max_rows}", rule="tcgen05.cp view")
        self.shape, self.max_rows = shape, max_rows

    def __rich_console__(self, console, options):
        cs = self.shape
        lanes = cs.lanes()
        step = -(-cs.rows // self.max_rows)
        yield Text(f"{cs.ptx()}: {cs.rows} source rows x {cs.columns} columns ({cs.columns * 4} bytes per row)",
                   style=style("simtc.title"))
        yield Text(f"source: {cs.status}; CUTLASS {cs.cutlass}", style=style("simtc.note"))
        shown = range(0, cs.rows, step)
        if step > 1:
            suffix = {2: "nd", 3: "rd"}.get(step % 10 if step % 100 not in (11, 12, 13) else 0, "th")
            yield Text(f"showing every {step}{suffix} source row ({len(shown)} of {cs.rows}: rows 0, {step}, "
                       f"{2 * step}, ...); the JSON form lists every row", style=style("simtc.inferred"))
        table = Table(box=None, padding=(0, 1), header_style=style("simtc.header"), pad_edge=False)
        table.add_column("source row", justify="right", no_wrap=True)
        table.add_column("TMEM lanes (offsets from taddr)")
        for r in shown:
            table.add_row(str(r), Text(", ".join(str(int(x)) for x in lanes[r]), style=phase_style(r % 8)))
        yield table
