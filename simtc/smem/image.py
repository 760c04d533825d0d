"""Writing matrices into shared-memory byte images in a given layout, and reading them back.

The image is a flat ``uint8`` array (a whole CTA's shared memory, or any part of it). Values
are converted with :func:`simtc.numerics.encode_bits` (bf16 / fp16 round to nearest even,
e4m3 ``.satfinite``), stored little-endian element by element at the byte offsets the layout
gives, and read back exactly.

>>> import numpy as np
>>> from simtc.smem.layout import CanonicalLayout
>>> t = CanonicalLayout("bf16", "K", "SW128", 8, 64)
>>> img = np.zeros(1024, dtype=np.uint8)
>>> x = (np.arange(8 * 64) % 256).astype(np.float32).reshape(8, 64)  # exact in bf16
>>> write_tile(img, t, x)
>>> bool((read_tile(img, t) == x).all())
True
"""

from __future__ import annotations

import numpy as np

from simtc.errors import ShapeError, SmemError
from simtc.numerics.formats import decode_bits, encode_bits
from simtc.smem.layout import CanonicalLayout

__all__ = ["element_bytes_index", "read_tile", "read_tile_bits", "write_tile", "write_tile_bits"]


def element_bytes_index(layout: CanonicalLayout, base: int = 0) -> np.ndarray:
    """Byte index of every byte of every element: shape (rows, cols, elem_bytes)."""
    off = layout.offsets() + base
    return off[..., None] + np.arange(layout.elem_bytes, dtype=np.int64)


def _check_image(image: np.ndarray, layout: CanonicalLayout, base: int) -> None:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 1:
        raise SmemError("a shared-memory image is a 1-D uint8 numpy array", rule="byte image")
    if base < 0 or base + layout.nbytes > image.size:
        raise SmemError(
            f"a {layout.nbytes}-byte tile at offset {base} does not fit a {image.size}-byte image",
            rule="tile inside the image",
        )
    if base % layout.swizzle.alignment:
        raise SmemError(
            f"tile offset {base} is not a multiple of {layout.swizzle.alignment} B: the {layout.swizzle.value} "
            "pattern would not start on its boundary (the image is assumed to start on a 1024-byte boundary)",
            rule="swizzled tiles start on the pattern boundary", ref="PTX ISA 9.0 §9.7.16.3 Table 41",
        )


def write_tile_bits(image: np.ndarray, layout: CanonicalLayout, bits: np.ndarray, base: int = 0) -> None:
    """Store raw element bit patterns (shape (rows, cols)) into ``image`` at ``base``."""
    _check_image(image, layout, base)
    b = np.asarray(bits)
    if b.shape != (layout.rows, layout.cols):
        raise ShapeError(f"matrix shape {b.shape} != tile shape {(layout.rows, layout.cols)}", rule="tile shape")
    b = b.astype(layout.dtype.container, copy=False)
    le = b.astype(b.dtype.newbyteorder("<"), copy=False).view(np.uint8).reshape(layout.rows, layout.cols, -1)
    image[element_bytes_index(layout, base)] = le


def read_tile_bits(image: np.ndarray, layout: CanonicalLayout, base: int = 0) -> np.ndarray:
    """Raw element bit patterns of the tile at ``base``: shape (rows, cols)."""
    _check_image(image, layout, base)
    raw = np.ascontiguousarray(image[element_bytes_index(layout, base)])
    dt = np.dtype(layout.dtype.container).newbyteorder("<")
    return raw.view(dt).reshape(layout.rows, layout.cols).astype(layout.dtype.container)


def write_tile(image: np.ndarray, layout: CanonicalLayout, values, base: int = 0) -> None:
    """Convert float values to the layout's dtype and store them in ``image`` at ``base``."""
    write_tile_bits(image, layout, encode_bits(values, layout.dtype), base)


def read_tile(image: np.ndarray, layout: CanonicalLayout, base: int = 0) -> np.ndarray:
    """Read the tile at ``base`` back as float32 values (shape (rows, cols))."""
    return decode_bits(read_tile_bits(image, layout, base), layout.dtype)
