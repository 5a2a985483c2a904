"""The PNG frames ipympl sends to the browser, deflated faster.

matplotlib's webagg canvas (ipympl's base) encodes every frame as a PNG at
zlib's default level 6. For a blitted frame that encode was about half of the
frame's time in the kernel (14 ms of some 30 ms for an 800 x 580 figure on the
2-core course machine, measured with cProfile). Level 1 halves it; the PNG
grows to about twice its size, which a local socket carries in far under a
millisecond. matplotlib offers no setting for the level, so `diff_image`
is its ``FigureCanvasWebAggCore.get_diff_image`` (matplotlib 3.10) with the
level passed, and a full frame where nothing changed (see `diff_image`).
tests/explorers/test_explorers_frames.py checks that the two decode to the same pixels,
so a matplotlib upgrade that changes the original shows up there.
"""

from __future__ import annotations

import types
from io import BytesIO
from typing import Any

import numpy as np
from matplotlib.backends.backend_webagg_core import FigureCanvasWebAggCore
from PIL import Image

__all__ = ["ZLIB_LEVEL", "diff_image", "encode_png", "send_fast_frames"]

ZLIB_LEVEL = 1


def diff_image(canvas: FigureCanvasWebAggCore) -> bytes | None:
    """The next frame for the browser as PNG bytes (None if nothing new was drawn).

    A full frame when asked for one, when the size changed, when any pixel
    is transparent, or when no pixel changed; otherwise only the changed
    pixels, the rest transparent black (ipympl's "diff" image mode).

    The unchanged case differs from matplotlib's, which sends an empty diff.
    ipympl's page decodes frames into one image, and a frame that arrives
    before the previous one finished loading replaces it unseen. After Run
    All the page's draw requests come back in a burst: the first frame is
    full, the next ones change nothing. Sent as empty diffs they replaced
    the full frame and the explorer stayed blank (sized, never painted);
    sent full, whichever frame the page keeps shows the figure.
    """
    if not canvas._png_is_old:
        return None
    pixels = np.asarray(canvas.get_renderer().buffer_rgba())  # (H, W, 4) uint8
    buff = pixels.view(np.uint32).squeeze(2)  # (H, W): one number per pixel
    same_shape = buff.shape == canvas._last_buff.shape
    changed = buff != canvas._last_buff if same_shape else None  # (H, W)
    if canvas._force_full or changed is None or not changed.any() or (pixels[:, :, 3] != 255).any():
        canvas.set_image_mode("full")
        output = buff
    else:
        canvas.set_image_mode("diff")
        output = np.where(changed, buff, 0)  # (H, W)
    canvas._last_buff = buff.copy()
    canvas._force_full = False
    canvas._png_is_old = False
    return encode_png(output)


def encode_png(pixels: np.ndarray) -> bytes:
    """RGBA pixels as PNG bytes at `ZLIB_LEVEL`.

    ``pixels``: (H, W) uint32, one packed RGBA pixel each (how webagg keeps
    its buffers), or (H, W, 4) uint8.
    """
    data = pixels.view(dtype=np.uint8).reshape((*pixels.shape[:2], 4))  # (H, W, 4)
    with BytesIO() as png:
        Image.fromarray(data).save(png, format="png", compress_level=ZLIB_LEVEL)
        return png.getvalue()


def send_fast_frames(canvas: Any) -> bool:
    """Make a webagg canvas (ipympl's) encode its frames with `diff_image`; False elsewhere."""
    if not isinstance(canvas, FigureCanvasWebAggCore):
        return False
    canvas.get_diff_image = types.MethodType(diff_image, canvas)
    return True
