"""How long an explorer's frame takes to encode, side by side with the ways it was encoded before.

For each explorer the tests build without the trained model (`REGISTRY`), its
first frame's pixels (the Agg canvas, RGBA) are encoded `ROUNDS` times, in
turn, by:

- ``now``: `encode_png` as the course sends frames (`frame_png`): no filter,
  ISA-L's deflate at level 1 where ``isal`` is installed, one plane at a time;
- ``zlib, one copy``: what it did before (2026-12-02 to 12-04): the same PNG
  with the standard library's zlib at level 1 and the (H, W, 3) block copied
  in one strided copy;
- ``pillow``: Pillow's PNG writer, what ``savefig`` uses (zlib level 6 and
  its own choice of row filter).

It prints the median ms of each and its ratio to ``now``, with the bytes of
each PNG (what a move sends). Run in one process, interleaved, so a busy
machine slows all three alike.

    python benchmarks/frame_encode.py
"""

from __future__ import annotations

import io
import statistics
import struct
import time
import zlib

import numpy as np
from PIL import Image

from attention_course.explorers.frames import DEFLATE, PNG_SIGNATURE, encode_png
from attention_course.explorers.registry import REGISTRY

ROUNDS = 40


def zlib_one_copy(rgb: np.ndarray) -> bytes:
    """The encoder before ISA-L: zlib level 1, the RGB block copied in one strided copy."""
    height, width, _ = rgb.shape
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # (H, 1 + 3W), filter bytes 0
    rows[:, 1:] = rgb.reshape(height, 3 * width)  # the strided (H, W, 3) view copied whole
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    parts = [(b"IHDR", header), (b"IDAT", zlib.compress(rows.data, 1)), (b"IEND", b"")]
    return PNG_SIGNATURE + b"".join(
        struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d)) for k, d in parts
    )


def pillow(rgb: np.ndarray) -> bytes:
    with io.BytesIO() as buffer:
        Image.fromarray(np.ascontiguousarray(rgb)).save(buffer, format="png")
        return buffer.getvalue()


def main() -> None:
    ways = {"now": encode_png, "zlib, one copy": zlib_one_copy, "pillow": pillow}
    print(f"deflate now: {DEFLATE}; median of {ROUNDS} encodes, interleaved")
    print(f"{'explorer':26s}" + "".join(f"{w:>24s}" for w in ways))
    ratios: dict[str, list[float]] = {w: [] for w in ways}
    for entry in REGISTRY:
        if entry.loads_model:
            continue
        for test_id, build in entry.builds.items():
            explorer = build()
            explorer.fig.canvas.draw()
            rgba = np.asarray(explorer.fig.canvas.buffer_rgba())  # (H, W, 4) uint8
            rgb = rgba[:, :, :3]  # (H, W, 3), the strided view frame_png passes
            times: dict[str, list[float]] = {w: [] for w in ways}
            for _ in range(ROUNDS):
                for way, encode in ways.items():
                    start = time.perf_counter()
                    encode(rgb)
                    times[way].append(1e3 * (time.perf_counter() - start))
            now = statistics.median(times["now"])
            cells = []
            for way, encode in ways.items():
                ms = statistics.median(times[way])
                ratios[way].append(ms / now)
                cells.append(f"{ms:6.2f} ms {ms / now:4.1f}x {len(encode(rgb)) / 1e3:4.0f} kB")
            print(f"{test_id:26s}" + "".join(f"{c:>24s}" for c in cells))
    medians = "".join(f"{statistics.median(r):>23.1f}x" for r in ratios.values())
    print(f"{'median ratio to now':26s}{medians}")


if __name__ == "__main__":
    main()
