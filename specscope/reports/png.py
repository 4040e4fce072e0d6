"""Writing a drawn figure's pixels as a PNG, faster than Pillow does for our figures.

Pillow tries all five PNG filters on every row and keeps the best (about 60 % of its time for a
1600 x 1300 figure); our figures are flat colours and text, for which one filter does as well:
**up** (each byte minus the byte above it), computed for the whole image at once with numpy,
then deflated at zlib level 1. Measured on the four figures of a report of two small exports
(issue 19): 2.5-3x faster than ``savefig`` through Pillow at ``compress_level=1``, files within
10 % of its size. An opaque image (every alpha 255, as a figure on its white background) is
written as RGB: a quarter fewer bytes to filter and deflate, the same pixels.

The file holds IHDR, pHYs (the resolution, as ``savefig`` writes it), one IDAT and IEND.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
FILTER_UP = 2  # PNG filter type: the byte above is subtracted (the row above row 0 is zeros)
LEVEL = 1  # zlib level: the figures deflate almost as small at 1 as at 6, 3x faster


def _chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC of type and data."""
    crc = zlib.crc32(data, zlib.crc32(kind))
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png_bytes(rgba: np.ndarray, dpi: float) -> bytes:
    """The PNG of ``rgba`` (``[height, width, 4] uint8``, rows top to bottom) at ``dpi``."""
    height, width, _ = rgba.shape
    opaque = bool((rgba[..., 3] == 255).all())
    pixels = rgba[..., :3] if opaque else rgba
    rows = np.ascontiguousarray(pixels).reshape(height, -1)  # [height, width * channels]
    raw = np.empty((height, rows.shape[1] + 1), np.uint8)  # [height, 1 + row bytes]
    raw[:, 0] = FILTER_UP
    raw[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=raw[1:, 1:])  # wraps modulo 256, as PNG wants
    colour_type = 2 if opaque else 6  # RGB / RGBA, 8 bits per sample
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    per_metre = round(dpi / 0.0254)
    return b"".join(
        (
            SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"pHYs", struct.pack(">IIB", per_metre, per_metre, 1)),
            _chunk(b"IDAT", zlib.compress(raw.tobytes(), LEVEL)),
            _chunk(b"IEND", b""),
        )
    )


def write_png(fig, path: Path | str) -> None:
    """Draw ``fig`` (a figure on an Agg canvas) at its own dpi and write it to ``path``."""
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    Path(path).write_bytes(png_bytes(rgba, fig.dpi))
