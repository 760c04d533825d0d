"""Pictures of shared-memory tiles and descriptors.

:class:`TileView` draws a :class:`~simtc.smem.layout.CanonicalLayout` as storage rows x
16-byte chunks. In the *logical* view each row is a matrix row (K-major: one MN index; MN-major:
one K index) and each cell is one 16-byte chunk of it, labelled with the byte offset where
the chunk lands and coloured by the 16-byte slot of its 128-byte line where it lands (banks
4j..4j+3), so each row's colours show the swizzle's XOR permutation of the chunk index. In the
*physical* view each row is one 128-byte line of shared memory (the 32 banks) and each cell
names the elements stored in that chunk, coloured by the same slot. On a narrow console the
chunks fold into stacked panels. Every number comes from the layout functions.

:class:`DescriptorView` shows a descriptor's fields, bits and meaning.
"""

from __future__ import annotations

import numpy as np
from rich.console import Group
from rich.jupyter import JupyterMixin
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from simtc.render.fold import fold_columns, too_narrow, width_of
from simtc.render.theme import bit_strip, phase_style, style
from simtc.smem.desc import SmemDescriptor
from simtc.smem.layout import CanonicalLayout, Major

__all__ = ["DescriptorView", "TileView"]


def _chunk_grid(layout: CanonicalLayout):
    """Per storage row and 16-byte logical chunk: (unswizzled offset, swizzled offset, labels)."""
    eb = layout.elem_bytes
    per_chunk = 16 // eb
    if layout.major is Major.K:
        n_rows, n_chunks = layout.rows, layout.cols // per_chunk
        r, c = np.meshgrid(np.arange(n_rows), np.arange(n_chunks), indexing="ij")
        mn, k = r, c * per_chunk
    else:
        n_rows, n_chunks = layout.cols, layout.rows // per_chunk
        r, c = np.meshgrid(np.arange(n_rows), np.arange(n_chunks), indexing="ij")
        mn, k = c * per_chunk, r
    lin = layout.linear_offset(mn, k)
    phys = layout.offset(mn, k)
    return n_rows, n_chunks, per_chunk, lin, phys


class TileView(JupyterMixin):
    """A shared-memory tile, logical rows x 16-byte chunks (or physical 128-byte lines)."""

    def __init__(self, layout: CanonicalLayout, *, view: str = "logical", max_rows: int | None = None,
                 base: int = 0):
        if view not in ("logical", "physical"):
            from simtc.errors import SimtcError

            raise SimtcError(f"unknown view {view!r}; use logical or physical", rule="tile views")
        self.layout = layout
        self.view = view
        self.max_rows = max_rows
        self.base = base

    def _caption(self) -> Text:
        lay = self.layout
        desc = lay.descriptor(start=self.base)
        am, ak = lay.atom_shape
        t = Text()
        t.append(f"{lay.rows}x{lay.cols} {lay.dtype.name} {lay.major} {lay.swizzle.value}", style=style("simtc.title"))
        t.append(f"   atom {am}x{ak} (MN x K), {lay.swizzle.atom_bytes} B; {lay.nbytes} B total; "
                 f"LBO {lay.lbo} B, SBO {lay.sbo} B; sm100 desc {desc.hex()}, "
                 f"sm90 desc {desc.to_arch('sm90').hex() if lay.swizzle.sm90_code is not None else 'n/a'}")
        return t

    def _grid(self):
        """(title, row header name, [(header, [cells per row])...], row labels, rows in total) of the chosen view."""
        lay = self.layout
        n_rows, n_chunks, per_chunk, _lin, phys = _chunk_grid(lay)
        slot = (phys >> 4) & 0x7          # the 16-byte chunk of its 128-byte line: banks 4*slot .. 4*slot+3
        if self.view == "logical":
            shown = n_rows if self.max_rows is None else min(self.max_rows, n_rows)
            row_name = "mn" if lay.major is Major.K else "k"
            col_name = "k" if lay.major is Major.K else "mn"
            title = ("logical view: cell = byte offset where the 16-byte chunk lands; colour = the chunk's slot in "
                     "its 128-byte line (banks 4j..4j+3), so each row's colours show the swizzle's XOR "
                     "permutation of the chunk index")
            cols = [(f"{col_name} {c * per_chunk}-{c * per_chunk + per_chunk - 1}",
                     [Text(f"{int(phys[r, c]) + self.base:#06x}", style=phase_style(int(slot[r, c])))
                      for r in range(shown)]) for c in range(n_chunks)]
            return title, row_name, cols, [str(r) for r in range(shown)], n_rows
        # invert: for every physical chunk, which logical chunk sits there
        chunks_per_line = 8
        lines = lay.nbytes // 128 if lay.nbytes >= 128 else 1
        label = np.full(lines * chunks_per_line, ".", dtype=object)
        where = (phys // 16).ravel()
        rr, cc = np.divmod(np.arange(where.size), n_chunks)
        lo = cc * per_chunk
        if lay.major is Major.K:
            label[where] = [f"{r}:{a}-{a + per_chunk - 1}" for r, a in zip(rr.tolist(), lo.tolist(), strict=True)]
        else:
            label[where] = [f"{a}-{a + per_chunk - 1}:{r}" for r, a in zip(rr.tolist(), lo.tolist(), strict=True)]
        used = np.zeros(lines * chunks_per_line, dtype=bool)
        used[where] = True
        shown = lines if self.max_rows is None else min(self.max_rows, lines)
        title = ("physical view: 128-byte lines x 16-byte chunks (4 banks each); cell = mn:k range stored there "
                 "(K-major) or mn range:k (MN-major); colour = chunk slot, as in the logical view")
        cols = [(f"banks {4 * c}-{4 * c + 3}",
                 [Text(label[ln * 8 + c], style=phase_style(c) if used[ln * 8 + c] else style("simtc.dim"))
                  for ln in range(shown)]) for c in range(chunks_per_line)]
        return title, "address", cols, [f"{ln * 128 + self.base:#06x}" for ln in range(shown)], lines

    def __rich_measure__(self, console, options):
        _title, row_name, cols, row_labels, _n = self._grid()
        fixed = width_of(row_name, *row_labels)
        widths = [width_of(h, *cells) + 1 for h, cells in cols]
        return Measurement(min(fixed + max(widths, default=0), options.max_width), fixed + sum(widths))

    def __rich_console__(self, console, options):
        title, row_name, cols, row_labels, n_rows = self._grid()
        yield self._caption()
        fixed = width_of(row_name, *row_labels)
        widths = [width_of(h, *cells) + 1 for h, cells in cols]
        chunks = fold_columns(widths, fixed=fixed, max_width=options.max_width)
        if not chunks:
            yield too_narrow("tile view", fixed + max(widths), options.max_width)
            return
        yield Text(title, style=style("simtc.note"))
        for chunk in chunks:
            if len(chunks) > 1:
                yield Text(f"chunks {chunk.start}-{chunk.stop - 1} of 0-{len(cols) - 1}", style=style("simtc.note"))
            table = Table(box=None, pad_edge=False, padding=(0, 0, 0, 1), header_style=style("simtc.header"))
            table.add_column(row_name, justify="right", style=style("simtc.header"), no_wrap=True)
            for c in chunk:
                table.add_column(cols[c][0], justify="right" if self.view == "logical" else "center", no_wrap=True)
            for r, name in enumerate(row_labels):
                table.add_row(name, *(cols[c][1][r] for c in chunk))
            yield table
        if len(row_labels) < n_rows:
            yield Text(f"... {n_rows - len(row_labels)} more rows (max_rows = {self.max_rows})",
                       style=style("simtc.dim"))


_FIELD_COLORS = tuple(style(f"simtc.phase.{i}") for i in (0, 1, 2, 3, 4, 5, 7))


class DescriptorView(JupyterMixin):
    """A shared-memory descriptor: the 64-bit word by field, a field table, and its meaning."""

    def __init__(self, desc: SmemDescriptor):
        self.desc = desc

    def _bit_strip(self) -> Text:
        rows = self.desc.fields()
        colors = [_FIELD_COLORS[i % len(_FIELD_COLORS)] for i in range(len(rows))]
        return bit_strip(self.desc.encode(), 64, rows, colors)

    def __rich_console__(self, console, options):
        d = self.desc
        yield Text(f"{'sm100 (tcgen05)' if d.arch == 'sm100' else 'sm90 (wgmma)'} shared-memory descriptor "
                   f"{d.hex()}", style=style("simtc.title"))
        yield self._bit_strip()
        table = Table(header_style=style("simtc.header"), show_edge=False)
        for col in ("field", "bits", "raw", "value", "meaning"):
            table.add_column(col, justify="right" if col in ("raw", "value") else "left")
        for i, (name, bits, raw, value, meaning) in enumerate(d.fields()):
            table.add_row(Text(name, style=_FIELD_COLORS[i % len(_FIELD_COLORS)]), bits, str(raw), str(value),
                          meaning)
        yield table
        yield Group(*[Text("• " + line) for line in d.explain()])
