"""The frames ipympl sends: ours (unfiltered, zlib level 1) against matplotlib's own, decoded.

Runs ipympl's canvas in-process (no browser, no kernel): its messages to the
page are collected instead of sent.
"""

from __future__ import annotations

import base64
import io
import struct
import zlib

import matplotlib
import numpy as np
import pytest
from PIL import Image

from attention_lib.explorers.frames import PNG_SIGNATURE, ZLIB_LEVEL, diff_image, encode_png

pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture
def ipympl_canvas():
    """An ipympl canvas with a drawn figure; what it would send is kept in ``canvas.sent``."""
    import matplotlib.pyplot as plt

    backend = matplotlib.get_backend()
    pytest.importorskip("ipympl")
    from ipympl.backend_nbagg import Canvas
    from matplotlib.figure import Figure

    plt.switch_backend(backend)  # importing ipympl made itself pyplot's backend for every test

    fig = Figure(figsize=(4, 3))
    canvas = Canvas(fig)
    canvas.sent = []
    canvas.send = lambda *args, **kwargs: canvas.sent.append((args, kwargs))
    ax = fig.add_subplot()
    (line,) = ax.plot([0, 1, 2], [0, 1, 0])
    canvas.line = line
    matplotlib.backends.backend_agg.FigureCanvasAgg.draw(canvas)
    return canvas


def decode(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))  # (H, W, 4)


def state(canvas):
    return canvas._png_is_old, canvas._force_full, canvas._last_buff.copy()


def restore(canvas, saved):
    canvas._png_is_old, canvas._force_full, canvas._last_buff = saved[0], saved[1], saved[2]


def test_frames_match_matplotlibs_own_full_and_diff(ipympl_canvas):
    canvas = ipympl_canvas
    for step in range(2):  # a full frame first, then a diff after the line moved
        canvas._png_is_old = True
        saved = state(canvas)
        theirs = type(canvas).get_diff_image(canvas)
        mode_theirs = canvas._current_image_mode
        restore(canvas, saved)
        ours = diff_image(canvas)
        assert canvas._current_image_mode == mode_theirs == ("full" if step == 0 else "diff")
        np.testing.assert_array_equal(decode(ours), decode(theirs))
        assert diff_image(canvas) is None, "nothing new drawn, nothing to send"
        canvas.line.set_ydata([1, 0, 1])
        matplotlib.backends.backend_agg.FigureCanvasAgg.draw(canvas)


def _png_chunks(png: bytes) -> dict[bytes, bytes]:
    """A PNG's chunks by type (each type once), after checking the signature and every CRC."""
    assert png[:8] == PNG_SIGNATURE
    chunks, at = {}, 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", png[at + 8 + length : at + 12 + length])
        assert crc == zlib.crc32(kind + data), kind
        chunks[kind] = data
        at += 12 + length
    return chunks


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (37, 64)])
def test_encode_png_is_unfiltered_rgba_at_the_fast_level(shape):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (*shape, 4), dtype=np.uint8)  # (H, W, 4)
    packed = pixels.view(np.uint32).squeeze(2)  # (H, W): webagg's buffers
    png = encode_png(packed)
    assert encode_png(pixels) == png, "packed or (H, W, 4): the same PNG"
    np.testing.assert_array_equal(decode(png), pixels)
    chunks = _png_chunks(png)
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"] and chunks[b"IEND"] == b""
    width, height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (height, width, depth, colour) == (*shape, 8, 6)  # 8 bits per channel, RGBA
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(shape[0], -1)
    assert not rows[:, 0].any(), "filter type 0 (none) on every row"
    assert chunks[b"IDAT"][:2] == zlib.compress(b"", ZLIB_LEVEL)[:2], "zlib header: level 1"
    # a view that is not contiguous (one column of many) encodes as its own pixels
    np.testing.assert_array_equal(decode(encode_png(packed[:, ::2])), pixels[:, ::2])


def test_a_diff_frame_holds_only_the_changed_pixels(ipympl_canvas):
    canvas = ipympl_canvas
    canvas._png_is_old = True
    before = decode(diff_image(canvas))  # the full first frame: the canvas as drawn
    np.testing.assert_array_equal(before, np.asarray(canvas.get_renderer().buffer_rgba()))
    canvas.line.set_ydata([1, 0, 1])
    matplotlib.backends.backend_agg.FigureCanvasAgg.draw(canvas)
    canvas._png_is_old = True
    frame = decode(diff_image(canvas))
    now = np.asarray(canvas.get_renderer().buffer_rgba())
    changed = np.any(now != before, axis=-1)  # (H, W)
    assert changed.any() and not changed.all()
    np.testing.assert_array_equal(frame[changed], now[changed])
    assert not frame[~changed].any(), "unchanged pixels travel as transparent black"


def test_a_redraw_that_changes_nothing_is_sent_full(ipympl_canvas):
    """Not as matplotlib's empty diff, which would replace a full frame the page is still
    loading and leave the canvas blank (a burst of draws after Run All)."""
    canvas = ipympl_canvas
    canvas._png_is_old = True
    first = decode(diff_image(canvas))
    assert canvas._current_image_mode == "full"
    matplotlib.backends.backend_agg.FigureCanvasAgg.draw(canvas)  # the same picture again
    canvas._png_is_old = True
    saved = state(canvas)
    theirs = decode(type(canvas).get_diff_image(canvas))
    assert canvas._current_image_mode == "diff" and not theirs.any(), "matplotlib: empty diff"
    restore(canvas, saved)
    again = decode(diff_image(canvas))
    assert canvas._current_image_mode == "full"
    np.testing.assert_array_equal(again, first)


def test_explorers_on_an_ipympl_canvas_send_fast_frames(ipympl_canvas):
    from attention_lib.explorers.frames import send_fast_frames

    assert send_fast_frames(ipympl_canvas)
    assert ipympl_canvas.get_diff_image.__func__ is diff_image
    assert ZLIB_LEVEL == 1
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    assert not send_fast_frames(FigureCanvasAgg(Figure()))


def _sent_frame(canvas) -> object:
    """The buffer of the one binary message ``canvas`` sent (via the fixture's ``sent``)."""
    binary = [kwargs["buffers"][0] for args, kwargs in canvas.sent if kwargs.get("buffers")]
    assert len(binary) == 1, canvas.sent
    return binary[0]


def _frame_before_initialized(canvas) -> bytes:
    """A full frame sent as the kernel sends one before the page's "initialized" message."""
    assert canvas.syncing_data_url, "a new canvas waits for the page's 'initialized'"
    canvas._png_is_old = True
    png = diff_image(canvas)
    canvas.send_binary(png)
    return png


def test_ipympls_own_frame_before_initialized_is_raw_pixels(ipympl_canvas):
    """ipympl 0.10's bug, which ExplorerCanvas works around: the page cannot decode this
    frame, and the canvas then stays blank (explorers/canvas.py). If this fails, ipympl
    has fixed it and ExplorerCanvas.send_binary can go."""
    canvas = ipympl_canvas
    png = _frame_before_initialized(canvas)
    sent = _sent_frame(canvas)
    height, width = canvas._last_buff.shape
    assert not isinstance(sent, bytes) and np.asarray(sent).nbytes == width * height * 4
    assert bytes(np.asarray(sent).tobytes())[:8] != png[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def explorer_canvas(ipympl_canvas):
    """The explorers' ipympl canvas (canvas.ExplorerCanvasFactory) on a drawn figure."""
    from matplotlib.figure import Figure

    from attention_lib.explorers.canvas import ExplorerCanvasFactory

    canvas_class, _ = ExplorerCanvasFactory.classes()
    fig = Figure(figsize=(4, 3))
    canvas = canvas_class(fig)
    canvas.sent = []
    canvas.send = lambda *args, **kwargs: canvas.sent.append((args, kwargs))
    fig.add_subplot().plot([0, 1, 2], [0, 1, 0])
    matplotlib.backends.backend_agg.FigureCanvasAgg.draw(canvas)
    return canvas


def test_an_explorer_frame_before_initialized_is_the_png(explorer_canvas):
    canvas = explorer_canvas
    png = _frame_before_initialized(canvas)
    assert _sent_frame(canvas) == png
    drawn = np.asarray(canvas.get_renderer().buffer_rgba())  # (H, W, 4)
    np.testing.assert_array_equal(decode(png), drawn)
    # the picture saved with the widget meanwhile: a data: URL the page can load
    prefix = "data:image/png;base64,"
    assert canvas._data_url.startswith(prefix)
    saved = base64.b64decode(canvas._data_url.removeprefix(prefix))
    np.testing.assert_array_equal(decode(saved), drawn)


def test_an_explorer_frame_after_initialized_is_the_png_alone(explorer_canvas):
    canvas = explorer_canvas
    canvas.syncing_data_url = False  # what the page's "initialized" message does
    canvas._data_url = None
    canvas._png_is_old = True
    png = diff_image(canvas)
    canvas.send_binary(png)
    assert _sent_frame(canvas) == png
    assert canvas._data_url is None, "no picture kept once the page shows the frames"
