"""What an explorer leaves for a page without its kernel, and what fits a laptop's cell.

- The display bundle: the live widget's view, plus a still picture of the
  figure with its one-line note (``text/html``, ``text/plain``), so an
  untrusted first open shows a picture, not ``VBox(children=...``.
- The note widget: the same picture, shown by the box's style sheet only
  when the widget is rebuilt from saved state without a kernel.
- The ipympl canvas opens its page model already sized, with no header,
  footer or toolbar (the 0 x 0 canvas after Run All came from a size sent
  later); the resize handle is switched off after the page's model starts.
- Sizes: every figure at most 840 px wide (a 1280 x 800 laptop's cell is
  848) and short enough that two rows of controls still fit in 640 px;
  every slider's track at least 150 px; labels given the room they need.
"""

from __future__ import annotations

import base64
import io
import re
import warnings

import ipywidgets as widgets
import matplotlib
import numpy as np
import pytest
from PIL import Image
from support import texts_outside

from attention_lib.explorers import ScalingExplorer, VolumeKnobExplorer
from attention_lib.explorers.canvas import STILL_NOTE, fit_class, fit_css
from attention_lib.explorers.controls import SLIDER_TRACK_PX
from attention_lib.explorers.registry import builds

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
    # the note widget holds the same picture, for a page rebuilt without a kernel
    note = box.children[-1]
    assert "al-note" in note._dom_classes
    np.testing.assert_array_equal(decode_html_png(note.value), picture)
    assert STILL_NOTE in note.value and fit_class(explorer.fig) in note.value


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


def test_the_style_sheet_fits_the_canvas_and_shows_the_still_only_when_disconnected():
    explorer = ScalingExplorer(trials=200)
    css = fit_css(explorer.fig)
    assert "aspect-ratio: 840 / 500" in css and ".al-fit-840x500" in css
    assert re.search(r"canvas-div \{\s*width: 100% !important; height: auto !important", css)
    assert ".al-explorer.jupyter-widgets-disconnected > .al-note { display: block; }" in css
    hidden = re.search(
        r"(\.al-explorer\.jupyter-widgets-disconnected > [^{]+)\{ display: none", css
    )
    assert hidden and ".al-controls" in hidden.group(1) and ".jupyter-matplotlib" in hidden.group(1)
    box = explorer.widget
    assert box.layout.max_width == "840px" and box.layout.width == "100%"
    assert "al-explorer" in box._dom_classes


# -- the ipympl canvas -----------------------------------------------------------------


def ipympl_explorer():
    """A volume knob on ipympl's canvas (ipympl 0.10's own Toolbar trips a traitlets warning)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Passing unrecognized arguments", DeprecationWarning)
        return VolumeKnobExplorer()


@pytest.fixture
def ipympl_backend(monkeypatch):
    """pyplot's backend is ipympl for the test; every comm opened is recorded, not sent."""
    import matplotlib.pyplot as plt

    backend = matplotlib.get_backend()  # before the import: importing ipympl selects it
    pytest.importorskip("ipympl")
    opened = []

    class Comm:
        def __init__(self, **kwargs):
            self.comm_id = f"comm{len(opened)}"
            self.kernel = object()  # ipywidgets sends only on a comm with a kernel
            self.sent = []
            opened.append((self, kwargs))

        def send(self, data=None, buffers=None, **_):
            self.sent.append(data)

        def on_msg(self, _callback):
            pass

        def close(self, *_, **__):
            pass

    monkeypatch.setattr(widgets.widgets.widget.comm, "create_comm", lambda **kw: Comm(**kw))
    plt.switch_backend("module://ipympl.backend_nbagg")
    try:
        yield opened
    finally:
        plt.switch_backend(backend)


def test_the_canvas_opens_sized_without_header_footer_or_toolbar(ipympl_backend):
    explorer = ipympl_explorer()
    canvas = explorer.fig.canvas
    assert type(canvas).__name__ == "ExplorerCanvas"
    comm, opening = next(
        (c, kw)
        for c, kw in ipympl_backend
        if kw["data"]["state"].get("_model_name") == "MPLCanvasModel"
    )
    state = opening["data"]["state"]
    assert list(state["_size"]) == [840, 420], "the page model is born with the figure's size"
    assert state["header_visible"] is False and state["footer_visible"] is False
    assert state["toolbar_visible"] is False
    assert list(state["_dom_classes"]) == ["al-fit-840x420"]
    # the resize handle: the page turns it on when its model starts, so it is turned off after
    assert {"method": "update", "state": {"resizable": False}, "buffer_paths": []} in comm.sent
    assert explorer.blits  # a browser canvas: moves are blitted frames


def test_the_canvas_is_unknown_to_pyplot(ipympl_backend):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    ipympl_explorer()
    assert plt.get_fignums() == before


def test_under_agg_the_box_shows_the_figure_in_an_output(monkeypatch):
    explorer = VolumeKnobExplorer()
    box = explorer.widget
    assert isinstance(box.children[1], widgets.Output)
    assert list(box.children[0].children) == explorer.controls


# -- controls and sizes ----------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXPLORERS))
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
def test_the_figure_fits_a_laptop_cell(name):
    explorer = EXPLORERS[name]()
    width, height = explorer.fig.bbox.size
    assert width <= MAX_WIDTH_PX and height <= MAX_HEIGHT_PX, (width, height)
    assert texts_outside(explorer.fig) == []
