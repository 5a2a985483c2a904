"""The frames an explorer sends: our PNG encoder against Pillow's decoding, and one PNG a move.

An explorer's picture is a core ``ipywidgets.Image``; each move encodes the
Agg canvas once (`frame_png`, unfiltered, deflated at level 1 by ISA-L) and sets it as the
Image's value. These tests decode what we write with Pillow and compare it
with the canvas's own pixels, so a change in matplotlib's buffers or in our
encoder shows up here.
"""

from __future__ import annotations

import io
import subprocess
import sys
import zlib

import numpy as np
import pytest
from PIL import Image

from attention_course.explorers import ScalingExplorer, VolumeKnobExplorer
from attention_course.explorers.canvas import ExplorerCanvas, frame_png
from attention_course.explorers.frames import DEFLATE, DEFLATE_LEVEL, PNG_SIGNATURE, encode_png


def decode(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))


@pytest.mark.parametrize("channels", [3, 4])
def test_encode_png_decodes_to_the_same_pixels(channels):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(37, 53, channels), dtype=np.uint8)  # (H, W, C)
    png = encode_png(pixels)
    assert png.startswith(PNG_SIGNATURE)
    np.testing.assert_array_equal(decode(png), pixels)
    assert Image.open(io.BytesIO(png)).mode == {3: "RGB", 4: "RGBA"}[channels]


@pytest.mark.parametrize("channels", [3, 4])
def test_a_strided_view_is_encoded_as_its_own_pixels(channels):
    """frame_png passes the RGB planes of Agg's RGBA buffer as a view: copied plane by plane."""
    rng = np.random.default_rng(1)
    rgba = rng.integers(0, 256, size=(29, 41, 4), dtype=np.uint8)  # (H, W, 4)
    view = rgba[:, ::-1, :channels]  # (H, W, C), strided both ways
    np.testing.assert_array_equal(decode(encode_png(view)), view)


def test_frames_are_deflated_by_isal_where_it_is_installed():
    pytest.importorskip("isal")
    assert DEFLATE == "isal.isal_zlib"


def test_without_isal_the_same_pixels_come_from_the_standard_librarys_zlib():
    """A platform isal has no wheel for (pyproject.toml's marker) still gets its frames."""
    child = (
        "import sys; sys.modules['isal'] = None\n"  # import isal now raises ImportError
        "import numpy as np\n"
        "from attention_course.explorers import frames\n"
        "pixels = np.arange(6 * 7 * 3, dtype=np.uint8).reshape(6, 7, 3)\n"
        "sys.stdout.buffer.write(frames.DEFLATE.encode() + b'\\n' + frames.encode_png(pixels))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, check=True, timeout=60
    ).stdout
    name, png = out.split(b"\n", 1)
    assert name == b"zlib"
    expected = np.arange(6 * 7 * 3, dtype=np.uint8).reshape(6, 7, 3)
    np.testing.assert_array_equal(decode(png), expected)


def test_encode_png_is_unfiltered_at_level_one():
    pixels = np.full((4, 5, 3), 200, dtype=np.uint8)
    png = encode_png(pixels)
    start = png.index(b"IDAT") + 4
    length = int.from_bytes(png[start - 8 : start - 4], "big")
    rows = zlib.decompress(png[start : start + length])
    assert DEFLATE_LEVEL == 1
    assert len(rows) == 4 * (1 + 5 * 3)
    assert all(rows[r * 16] == 0 for r in range(4)), "every row's filter byte is 0 (none)"


def test_encode_png_refuses_other_channel_counts():
    with pytest.raises(KeyError):
        encode_png(np.zeros((2, 2, 2), dtype=np.uint8))


def test_a_frame_is_the_canvas_as_drawn_and_opaque_frames_are_rgb():
    explorer = VolumeKnobExplorer()
    explorer.fig.canvas.draw()
    rgba = np.asarray(explorer.fig.canvas.buffer_rgba())  # (H, W, 4)
    frame = decode(frame_png(explorer.fig.canvas))
    assert frame.shape == (*rgba.shape[:2], 3), "an opaque figure is sent as RGB"
    np.testing.assert_array_equal(frame, rgba[:, :, :3])


def test_a_transparent_figure_keeps_its_alpha():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1), dpi=50)
    fig.patch.set_alpha(0.0)
    canvas = ExplorerCanvas(fig)
    canvas.draw()
    frame = decode(frame_png(canvas))
    assert frame.shape == (50, 100, 4) and (frame[:, :, 3] < 255).any()


def test_each_move_of_a_displayed_explorer_sends_one_png_of_the_figure():
    explorer = ScalingExplorer(trials=200)
    box = explorer.widget
    assert explorer.picture in box.children and explorer.picture.format == "png"
    first = bytes(explorer.picture.value)
    assert first.startswith(PNG_SIGNATURE), "displayed with its first frame"
    sent = []
    explorer.picture.observe(lambda change: sent.append(bytes(change["new"])), names="value")
    explorer.width.value = 128
    assert len(sent) == 1, f"{len(sent)} frames for one move"
    width, height = (round(x) for x in explorer.fig.bbox.size)
    assert decode(sent[0]).shape[:2] == (height, width)
    assert sent[0] != first


def test_an_undisplayed_explorer_encodes_nothing():
    explorer = VolumeKnobExplorer()
    explorer.fig.canvas.draw_idle = lambda *a, **k: None
    explorer.volume.value = 5.0
    assert bytes(explorer.picture.value) == b"", "no page shows it: no frame is encoded"
