"""The canvas an explorer draws on, and how its picture fits a notebook cell.

Under ``%matplotlib widget`` an explorer's canvas is an ipympl widget. Four
things about ipympl 0.10 shape this module:

- **Its size arrives by two routes that can cross.** The page sizes a canvas
  view from the model's ``_size`` trait, once when the view is made and again
  on each custom "resize" message. The kernel sends the trait, then the
  message; the page applies trait updates through a promise chain and custom
  messages at once, so under load the message can be handled first, with the
  old size ``[0, 0]``, and the view stays 0 x 0 for good (seen after Run All in
  one run of three). `ExplorerCanvas` opens its model with ``_size`` already
  set, so no later update is needed and every resize uses the right size.
- **It has no notion of its container's width.** A canvas is as wide as its
  figure in pixels; there is no resize observer in 0.10's page code. The
  explorer's box therefore carries a small style sheet (`fit_css`) that scales
  the canvas element to the cell's width, never beyond the figure's own size,
  keeping its aspect ratio. The kernel keeps drawing at the figure's size.
- **A frame sent before the page's "initialized" message is not a picture.**
  Until the page has said it, ipympl's ``Canvas.send_binary`` keeps the
  picture saved with the widget (``_data_url``) up to date, and in doing so
  rebinds its ``data`` argument to the raw RGBA buffer, which it then sends in
  place of the PNG: ``width * height * 4`` bytes that are not a picture.
  The page's image fails to decode it and is left "broken"; the resize message
  the kernel sends next makes the page draw that image, which throws, before
  the page asks for a fresh frame, so the canvas stays sized and blank for
  good (found with the browser tests' frame trace: about one Run All of
  notebook 01 in fifty). A frame goes out that early when the page's request
  for it overtakes its "initialized" message, which JupyterLab 4.6 allows by
  default: it sends widget messages to a kernel subshell, handled on a thread
  of its own, while the first ones wait behind the cells on the main shell.
  The course's JupyterLab settings keep them on the main shell, in order
  (jupyter/labconfig); `ExplorerCanvas` sends the PNG whatever the lab.
- **A saved notebook has no kernel.** Reopened without one, the page rebuilds
  the widgets from the state saved in the notebook (JupyterLab's "save widget
  state" setting), without a connection: their views carry the class
  ``jupyter-widgets-disconnected``. The same style sheet then hides the dead
  controls and the canvas, and shows the box's still picture with its note
  (`STILL_NOTE`).

Under any other backend (Agg in the tests, the inline backend) the canvas is
matplotlib's Agg canvas. Either way it draws text from cached glyph bitmaps
(`attention_lib.explorers.glyphs`).
"""

from __future__ import annotations

import base64
import io
import itertools
from functools import cache
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from PIL import Image

from .frames import encode_png
from .glyphs import GlyphCachingCanvas

__all__ = [
    "STILL_NOTE",
    "ExplorerCanvasFactory",
    "attach_canvas",
    "data_url",
    "fit_class",
    "fit_css",
    "png_bytes",
    "uses_ipympl",
]

STILL_NOTE = "A still picture: run the notebook (Run ▸ Run All Cells) to move the sliders."

_IPYMPL_NAMES = {"widget", "ipympl", "module://ipympl.backend_nbagg"}
_numbers = itertools.count(1)


def uses_ipympl() -> bool:
    """Whether pyplot's backend is ipympl (``%matplotlib widget``)."""
    return matplotlib.get_backend().lower() in _IPYMPL_NAMES


class ExplorerCanvasFactory:
    """Builds ipympl canvases whose page models open with their size and chrome set.

    Imported lazily: importing ipympl makes it pyplot's backend.
    """

    @staticmethod
    @cache
    def classes() -> tuple[type, type]:
        """(canvas class, figure manager class), made once."""
        from ipympl.backend_nbagg import Canvas, FigureManager
        from traitlets import default

        class ExplorerCanvas(GlyphCachingCanvas, Canvas):
            """An ipympl canvas whose first state already holds its size, no header,
            footer or toolbar, and the class that fits it to the cell; its text is drawn
            from cached glyphs."""

            def __init__(self, figure: Figure) -> None:
                width, height = (round(x) for x in figure.bbox.size)
                # read by the defaults below while the widget opens its comm, before
                # ipympl's own __init__ has stored the figure
                self._opening = {"size": (width, height), "classes": (fit_class(figure),)}
                super().__init__(figure)

            @default("_size")
            def _opening_size(self) -> tuple[int, int]:
                return self._opening["size"]

            @default("_dom_classes")
            def _opening_classes(self) -> tuple[str, ...]:
                return self._opening["classes"]

            @default("header_visible")
            def _no_header(self) -> bool:
                return False

            @default("footer_visible")
            def _no_footer(self) -> bool:
                return False

            @default("toolbar_visible")
            def _no_toolbar(self) -> bool:
                return False

            def send_binary(self, data: bytes) -> None:
                """Send the page one frame, ``data`` (PNG bytes), always as a PNG.

                ipympl 0.10's own sends raw pixels before the page's "initialized"
                message (see the module's docstring). Until then ``_data_url`` is kept
                up to date as ipympl means to, as a ``data:`` URL of the whole picture
                (ipympl's lacks the ``data:`` prefix).
                """
                if self.syncing_data_url:
                    self._data_url = data_url(encode_png(self._last_buff))  # the whole picture
                self.send({"data": '{"type": "binary"}'}, buffers=[data])

        return ExplorerCanvas, FigureManager


def attach_canvas(fig: Figure) -> Any:
    """Give ``fig`` its canvas: an `ExplorerCanvasFactory` canvas under ipympl, else Agg's
    (with cached glyphs, `GlyphCachingCanvas`).

    The figure is not registered with pyplot: nothing displays it but the
    explorer, and pyplot's "more than 20 figures" count is not touched.
    """
    if not uses_ipympl():
        return GlyphCachingCanvas(fig)
    canvas_class, manager_class = ExplorerCanvasFactory.classes()
    canvas = canvas_class(fig)
    manager_class(canvas, next(_numbers))  # routes the page's messages, sends the frames
    # The page's model marks a live canvas resizable when it starts, whatever it was
    # opened with; an update sent after the start (True -> False) turns the handle off.
    canvas.resizable = False
    return canvas


def fit_class(fig: Figure) -> str:
    """The class naming the figure's size in pixels, e.g. ``al-fit-840x500``."""
    width, height = (round(x) for x in fig.bbox.size)
    return f"al-fit-{width}x{height}"


def fit_css(fig: Figure) -> str:
    """Style rules that fit an explorer's box and canvas to the cell's width.

    The canvas element is scaled to the box's width, at most the figure's own
    width, keeping the aspect ratio (ipympl sets the canvas's size inline, so
    these rules need ``!important``). A disconnected box (reopened without a
    kernel) shows the still note and hides its controls and the broken-link
    marks ipywidgets puts on each disconnected view.
    """
    width, height = (round(x) for x in fig.bbox.size)
    fit = fit_class(fig)
    return f"""<style>
.al-explorer > .al-controls {{ flex-wrap: wrap; align-items: center; }}
.al-explorer > .jupyter-matplotlib,
.al-explorer .jupyter-matplotlib-figure,
.al-explorer .jupyter-matplotlib-canvas-container {{ width: 100%; max-width: 100%; }}
.al-explorer .jupyter-matplotlib-canvas-container,
.al-explorer .jupyter-matplotlib-canvas-div {{ margin: 0 !important; }}
.al-explorer .{fit} .jupyter-matplotlib-canvas-div {{
  width: 100% !important; height: auto !important; aspect-ratio: {width} / {height};
}}
.al-explorer .jupyter-matplotlib-canvas-div > canvas {{
  width: 100% !important; height: 100% !important;
}}
.al-explorer > .al-note {{ display: none; }}
.al-explorer.jupyter-widgets-disconnected > .al-note {{ display: block; }}
.al-explorer.jupyter-widgets-disconnected > .al-controls,
.al-explorer.jupyter-widgets-disconnected > .jupyter-matplotlib {{ display: none; }}
.al-explorer.jupyter-widgets-disconnected::before,
.al-explorer .jupyter-widgets-disconnected::before {{ content: none; display: none; }}
</style>"""


def png_bytes(fig: Figure, colours: int | None = None) -> bytes:
    """The figure as PNG bytes at its own size and resolution.

    ``colours`` reduces it to a palette of that many colours (no dithering).
    """
    with io.BytesIO() as buffer:
        fig.savefig(buffer, format="png", dpi=fig.dpi)
        png = buffer.getvalue()
    if colours is None:
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB")
    reduced = image.quantize(
        colors=colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    with io.BytesIO() as buffer:
        reduced.save(buffer, format="png", optimize=True)
        return buffer.getvalue()


def data_url(png: bytes) -> str:
    """PNG bytes as a ``data:`` URL for an ``<img>`` (or ipympl's saved picture)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
