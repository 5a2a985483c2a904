"""The frames ipympl sends: ours (zlib level 1) against matplotlib's own, decoded.

Runs ipympl's canvas in-process (no browser, no kernel): its messages to the
page are collected instead of sent.
"""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
from PIL import Image

from attention_lib.explorers.frames import ZLIB_LEVEL, diff_image

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
