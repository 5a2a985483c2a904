"""The PNG frames an explorer sends to the page, encoded fast.

Each move sends the whole picture as PNG bytes into the explorer's
``ipywidgets.Image`` (`attention_course.explorers.canvas.frame_png`). Pillow
(what matplotlib's ``savefig`` uses) writes PNGs at zlib's level 6 and tries
each of PNG's five row filters on every row to keep the best; for a frame
that encode was about half of the frame's time in the kernel. Here
(`encode_png`):

- no PNG filter (filter type 0 on every row): a frame is flat colours, which
  deflate packs as well unfiltered;
- deflate at level 1 by ISA-L (the ``isal`` package, `DEFLATE`), several
  times faster than zlib's own level 1 on a frame, for a PNG a few per cent
  larger; where ``isal`` has no wheel (Windows on Arm) the standard library's
  zlib, slower, the same pixels;
- the rows copied one colour channel at a time: numpy copies a strided
  (H, W, 3) block of an (H, W, 4) buffer byte triple by byte triple, four
  times slower than three single-byte planes.

On 04's 840 x 520 figure a frame took 0.87 ms against 4.14 with zlib's level
1 and one strided copy, and Pillow's 12.5 (68 kB against 63 and 67), on the
2-core course machine (an Intel Xeon, 2026-12-04; all explorers: 5.1 times
faster than zlib's at the median, ``python benchmarks/frame_encode.py``).

A PNG is a signature and three chunks (header, the deflated rows, end), so
the encoder is a few lines; Pillow decodes it in the tests
(tests/explorers/test_explorers_frames.py).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

try:
    from isal import isal_zlib as _deflate
except ImportError:  # no wheel for this platform (pyproject.toml's marker): slower, same PNG
    _deflate = zlib

__all__ = ["DEFLATE", "DEFLATE_LEVEL", "PNG_SIGNATURE", "encode_png"]

#: The deflate (and CRC) the frames are written with: "isal.isal_zlib", or "zlib".
DEFLATE = _deflate.__name__
DEFLATE_LEVEL = 1
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def encode_png(pixels: np.ndarray) -> bytes:
    """Pixels as PNG bytes: 8 bits a channel, no filter, deflated at `DEFLATE_LEVEL`.

    ``pixels``: (H, W, 4) uint8 RGBA, or (H, W, 3) uint8 RGB (a quarter fewer
    bytes to deflate and send, for an opaque picture); any strides.
    """
    height, width, channels = pixels.shape
    colour_type = {3: 2, 4: 6}[channels]  # PNG's RGB and RGBA
    rows = np.empty((height, 1 + channels * width), dtype=np.uint8)  # (H, 1 + CW)
    rows[:, 0] = 0  # each row's filter type: none
    for c in range(channels):
        rows[:, 1 + c :: channels] = pixels[:, :, c]  # (H, W): one plane at a time (see above)
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)  # 8 bits, deflate
    return b"".join(
        [
            PNG_SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", _deflate.compress(rows.data, DEFLATE_LEVEL)),
            _chunk(b"IEND", b""),
        ]
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, and the CRC of type and data."""
    crc = _deflate.crc32(data, _deflate.crc32(kind))
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
