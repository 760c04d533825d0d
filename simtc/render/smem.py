"""Pictures of shared-memory tiles and descriptors.

:class:`TileView` draws a :class:`~simtc.smem.layout.CanonicalLayout` as storage rows x
16-byte chunks. In the *logical* view each row is a matrix row (K-major: one MN index; MN-major:
one K index) and each cell is one 16-byte chunk of it, labelled with the byte offset where
the chunk lands and coloured by its swizzle phase (the XOR applied to the chunk index). In the
*physical* view each row is one 128-byte line of shared memory (the 32 banks) and each cell
names the elements stored in that chunk. Every number comes from the layout functions.

:class:`DescriptorView` shows a descriptor's fields, bits and meaning.
"""

from __future__ import annotations

import numpy as np
from rich.console import Group
from rich.jupyter import JupyterMixin
from rich.table import Table
from rich.text import Text

from simtc.render.theme import bit_strip, phase_style, style
from simtc.smem.desc import SmemDescriptor
from simtc.smem.layout import CanonicalLayout, Major
from simtc.smem.swizzle import SwizzleMode

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

    def __rich_console__(self, console, options):
        lay = self.layout
        n_rows, n_chunks, per_chunk, lin, phys = _chunk_grid(lay)
        sw = lay.swizzle
        phase = ((lin ^ phys) >> 4) & 0x7 if sw is not SwizzleMode.SW128_32B else ((lin ^ phys) >> 5) & 0x3
        yield self._caption()
        shown = n_rows if self.max_rows is None else min(self.max_rows, n_rows)
        if self.view == "logical":
            row_name = "mn" if lay.major is Major.K else "k"
            col_name = "k" if lay.major is Major.K else "mn"
            table = Table(box=None, pad_edge=False, padding=(0, 1), header_style=style("simtc.header"),
                          title="logical view: cell = byte offset where the 16-byte chunk lands; colour = swizzle "
                                "phase (XOR on the chunk index)", title_style=style("simtc.note"))
            table.add_column(row_name, justify="right", style=style("simtc.header"))
            for c in range(n_chunks):
                table.add_column(f"{col_name} {c * per_chunk}-{c * per_chunk + per_chunk - 1}", justify="right")
            for r in range(shown):
                cells = [Text(f"{int(phys[r, c]) + self.base:#06x}", style=phase_style(int(phase[r, c])))
                         for c in range(n_chunks)]
                table.add_row(str(r), *cells)
        else:
            # invert: for every physical chunk, which logical chunk sits there
            chunks_per_line = 8
            lines = lay.nbytes // 128 if lay.nbytes >= 128 else 1
            label = np.full(lines * chunks_per_line, ".", dtype=object)
            ph = np.zeros(lines * chunks_per_line, dtype=np.int64)
            where = (phys // 16).ravel()
            rr, cc = np.divmod(np.arange(where.size), n_chunks)
            lo = cc * per_chunk
            if lay.major is Major.K:
                label[where] = [f"{r}:{a}-{a + per_chunk - 1}" for r, a in zip(rr.tolist(), lo.tolist(), strict=True)]
            else:
                label[where] = [f"{a}-{a + per_chunk - 1}:{r}" for r, a in zip(rr.tolist(), lo.tolist(), strict=True)]
            ph[where] = phase.ravel()
            shown = lines if self.max_rows is None else min(self.max_rows, lines)
            table = Table(box=None, pad_edge=False, padding=(0, 1), header_style=style("simtc.header"),
                          title="physical view: 128-byte lines x 16-byte chunks (4 banks each); cell = mn:k range "
                                "stored there", title_style=style("simtc.note"))
            table.add_column("address", justify="right", style=style("simtc.header"))
            for c in range(chunks_per_line):
                table.add_column(f"banks {4 * c}-{4 * c + 3}", justify="center")
            for line in range(shown):
                cells = [Text(label[line * 8 + c], style=phase_style(int(ph[line * 8 + c])))
                         for c in range(chunks_per_line)]
                table.add_row(f"{line * 128 + self.base:#06x}", *cells)
        yield table
        if shown < n_rows:
            yield Text(f"... {n_rows - shown} more rows", style=style("simtc.dim"))


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
