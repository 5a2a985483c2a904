"""What an explorer leaves for a page without its kernel, and what fits a laptop's cell.

- The display bundle: the live widget's view, plus a still picture of the
  figure with its one-line note (``text/html``, ``text/plain``), so an
  untrusted first open, nbconvert's HTML and a terminal show a picture, not
  ``VBox(children=...``.
- The picture is a core ``ipywidgets.Image`` holding the figure's last frame
  (so the saved widget state carries it); the note widget, shown by the box's
  style sheet only when the widget is rebuilt from saved state without a
  kernel, says where the live version runs.
- The canvas's timers fire on a running event loop (the kernel's), and never
  without one.
- Sizes: every figure at most 840 px wide (a 1280 x 800 laptop's cell is
  848) and short enough that two rows of controls still fit in 640 px;
  every slider's track at least 150 px; labels given the room they need.
"""

from __future__ import annotations

import base64
import io
import re

import ipywidgets as widgets
import numpy as np
import pytest
from PIL import Image
from support import texts_outside

from attention_course.explorers import ScalingExplorer, VolumeKnobExplorer
from attention_course.explorers.canvas import STILL_NOTE, ExplorerCanvas, still_css
from attention_course.explorers.controls import SLIDER_TRACK_PX
from attention_course.explorers.registry import builds

pytestmark = pytest.mark.filterwarnings("error")

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MAX_WIDTH_PX = 840  # the output area of a 1280 x 800 screen with the file browser open: 848
MAX_HEIGHT_PX = 560  # + two rows of controls (about 72 px) stays under 640

#: every explorer the registry builds without the trained model: {test id: build}
EXPLORERS = {test_id: build for test_id, (_, build) in builds().items()}


def decode_html_png(html: str) -> np.ndarray:
    found = re.search(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert found, html[:200]
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(found.group(1)))).convert("RGB"))


# -- the still picture -----------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXPLORERS))
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_display_bundle_carries_a_still_picture_and_the_note(name):
    explorer = EXPLORERS[name]()
    box = explorer.widget
    assert box is explorer.widget, "one box per explorer"
    bundle = box._repr_mimebundle_()
    assert bundle[WIDGET_MIME]["model_id"] == box.model_id
    assert STILL_NOTE in bundle["text/html"] and STILL_NOTE in bundle["text/plain"]
    assert "VBox(" not in bundle["text/plain"]
    picture = decode_html_png(bundle["text/html"])  # (H, W, 3)
    width, height = (round(x) for x in explorer.fig.bbox.size)
    assert picture.shape == (height, width, 3)
    assert width <= MAX_WIDTH_PX and height <= MAX_HEIGHT_PX, (width, height)
    # the Image holds the live frame, which its saved state keeps for a reopened notebook
    live = np.asarray(Image.open(io.BytesIO(bytes(explorer.picture.value))).convert("RGB"))
    assert live.shape == picture.shape
    assert np.abs(live.astype(float) - picture).mean() < 1.0  # the still: 256 colours
    note = box.children[-1]
    assert "al-note" in note._dom_classes
    assert STILL_NOTE in note.value and "<img" not in note.value


def test_the_still_picture_is_the_figure_in_256_colours():
    explorer = VolumeKnobExplorer()
    explorer.volume.value = 3.0
    still = np.asarray(Image.open(io.BytesIO(explorer.still())).convert("RGB"), dtype=float)
    assert Image.open(io.BytesIO(explorer.still())).mode == "P"
    buffer = io.BytesIO()
    explorer.fig.savefig(buffer, format="png", dpi=explorer.fig.dpi)
    full = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"), dtype=float)
    assert still.shape == full.shape
    assert np.abs(still - full).mean() < 1.0  # palette rounding only, under 1 level in 255
    assert len(explorer.still()) < 0.6 * len(buffer.getvalue())


def test_the_picture_shows_the_state_at_display_time():
    explorer = VolumeKnobExplorer()
    before = decode_html_png(explorer.widget._repr_mimebundle_()["text/html"])
    explorer.volume.value = 100.0
    after = decode_html_png(explorer.widget._repr_mimebundle_()["text/html"])
    assert np.any(before != after)


def test_the_style_sheet_fits_the_picture_and_shows_the_note_only_when_disconnected():
    css = still_css()
    picture_rule = r"\.al-explorer > \.widget-image \{\s*width: 100%; height: auto; max-width"
    assert re.search(picture_rule, css)
    assert "margin-left: 0; margin-right: 0;" in css  # ipywidgets' 2 px margin would overflow
    assert ".al-explorer.jupyter-widgets-disconnected > .al-note { display: block; }" in css
    assert ".al-explorer.jupyter-widgets-disconnected > .al-controls { display: none; }" in css
    assert ".al-explorer > .al-note { display: none; }" in css
    explorer = ScalingExplorer(trials=200)
    box = explorer.widget
    assert box.layout.max_width == "840px" and box.layout.width == "100%"
    assert "al-explorer" in box._dom_classes
    assert list(box.children[0].children) == explorer.controls
    # the picture, its text alternative under it, then the note
    assert box.children[-3:] == (explorer.picture, explorer.alt, box.children[-1])
    assert ".al-explorer > .al-alt > .widget-html-content {" in css


def test_the_canvas_is_unknown_to_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    box = VolumeKnobExplorer().widget
    assert box.children
    assert plt.get_fignums() == before


def test_timers_fire_on_a_kernels_event_loop_and_never_elsewhere(request):
    import asyncio
    import threading
    import time

    from matplotlib.figure import Figure

    canvas = ExplorerCanvas(Figure())
    fired = []

    def start(what: str) -> None:
        timer = canvas.new_timer(interval=1)
        timer.single_shot = True
        timer.add_callback(lambda: fired.append(what))
        timer.start()

    async def loop(what: str) -> None:
        start(what)
        await asyncio.sleep(0.2)

    def no_loop() -> None:  # a script, or a test: no loop runs in this thread
        start("no loop")  # Agg's own timer: never fires
        time.sleep(0.2)

    def run_in_threads() -> None:
        # each in a thread of its own: the test process's main thread may hold a loop already
        for target in (no_loop, lambda: asyncio.run(loop("loop"))):
            thread = threading.Thread(target=target)
            thread.start()
            thread.join()

    # a loop, but no kernel's (playwright's sync API leaves its loop set, never run again)
    run_in_threads()
    assert fired == []
    # a kernel runs cells and widget messages on its event loops
    request.getfixturevalue("kernel_process")
    run_in_threads()
    assert fired == ["loop"]


# -- controls and sizes ----------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXPLORERS))
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_controls_have_room_for_their_labels_and_tracks(name):
    explorer = EXPLORERS[name]()
    for control in explorer.controls:
        assert control.style.description_width == "initial", control.description
        if isinstance(
            control, (widgets.FloatSlider, widgets.IntSlider, widgets.SelectionSlider)
        ) or (isinstance(control, widgets.FloatLogSlider)):
            total = int(control.layout.width.removesuffix("px"))
            label = 7.5 * len(control.description)
            assert total - label - 72 - 30 >= 150, (control.description, total)
        if isinstance(control, widgets.ToggleButtons):
            assert control.style.button_width == "auto" and control.layout.width == "auto"
        if isinstance(control, widgets.Checkbox):
            assert control.indent is False and control.layout.width == "auto"
    assert SLIDER_TRACK_PX >= 150


@pytest.mark.parametrize("name", list(EXPLORERS))
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_figure_fits_a_laptop_cell(name):
    explorer = EXPLORERS[name]()
    width, height = explorer.fig.bbox.size
    assert width <= MAX_WIDTH_PX and height <= MAX_HEIGHT_PX, (width, height)
    assert texts_outside(explorer.fig) == []
