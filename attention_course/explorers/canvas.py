"""The canvas an explorer draws on, the picture it shows, and what a page without a kernel gets.

An explorer's figure is drawn by matplotlib's Agg canvas in the kernel, and
each frame goes to the page as PNG bytes in a core ``ipywidgets.Image``: no
widget a front end must install beyond ipywidgets itself, so the same
notebook works in JupyterLab, Notebook 7, Voila, VS Code and Colab, and the
Image's saved state carries the last picture into a reopened notebook.

- `ExplorerCanvas`: Agg's canvas drawing text from cached glyph bitmaps
  (`attention_course.explorers.glyphs`), whose timers fire on the kernel's event
  loop (an explorer draws ahead while the kernel is idle); outside a kernel
  (a test, a script) they never fire, as Agg's own do (`timers_fire`).
- `frame_png`: the canvas's pixels as one PNG, written fast (`frames`).
- `still_css`: the box's style sheet. The Image scales to the cell's width
  (never beyond the figure's own pixels, keeping its aspect ratio), its text
  alternative under it in small print, wrapped to the width. Rebuilt
  from saved state without a kernel (a notebook reopened after a save), the
  page marks every view ``jupyter-widgets-disconnected``: the sheet then hides
  the dead controls and the broken-link marks, and shows the one-line
  `STILL_NOTE` under the saved picture.
- A figure as a still PNG, and as a ``data:`` URL, is the still figures' own
  (`attention_course.lessons.figures.still`: ``figure_png``, ``data_url``).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import numpy as np
from matplotlib.backend_bases import TimerBase
from matplotlib.backends.backend_webagg_core import TimerAsyncio

from .frames import encode_png
from .glyphs import GlyphCachingCanvas

__all__ = ["STILL_NOTE", "ExplorerCanvas", "frame_png", "still_css", "timers_fire"]

STILL_NOTE = (
    "A still picture: run the notebook (Run ▸ Run All Cells) to move the sliders, "
    "in JupyterLab, Notebook 7, VS Code, Colab or Voila."
)


def timers_fire() -> bool:
    """Whether a timer started here would fire: this thread runs an event loop, and it is a
    kernel's (a kernel runs cells and widget messages on its loops, a subshell's included).

    A loop that is set but not a kernel's may never run again: playwright's sync API
    leaves its loop as the running one in a test process that drove a browser.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    app = sys.modules.get("ipykernel.kernelapp")  # imported by every ipykernel kernel
    return app is not None and app.IPKernelApp.initialized()


class ExplorerCanvas(GlyphCachingCanvas):
    """Agg's canvas with cached glyphs, and timers on the kernel's event loop when one runs."""

    def new_timer(self, *args: Any, **kwargs: Any) -> TimerBase:
        if timers_fire():
            return TimerAsyncio(*args, **kwargs)
        return TimerBase(*args, **kwargs)  # never fires, as Agg's own timers


def frame_png(canvas: ExplorerCanvas) -> bytes:
    """What the canvas shows now, as PNG bytes for the explorer's Image."""
    pixels = np.asarray(canvas.get_renderer().buffer_rgba())  # (H, W, 4) uint8
    if (pixels[:, :, 3] == 255).all():  # an opaque figure (every explorer's): RGB is enough
        pixels = pixels[:, :, :3]  # (H, W, 3)
    return encode_png(pixels)


def still_css() -> str:
    """The explorer box's style sheet: the picture fits the cell; the note shows only when the
    box is rebuilt without a kernel, which also hides the controls."""
    return """<style>
.al-explorer > .al-controls { flex-wrap: wrap; align-items: center; }
.al-explorer > .widget-image {
  width: 100%; height: auto; max-width: 100%; margin-left: 0; margin-right: 0;
}
.al-explorer > .al-alt { margin-top: 0; margin-bottom: 2px; }
.al-explorer > .al-alt > .widget-html-content {
  font-size: 12px; line-height: 1.35; white-space: normal; align-self: flex-start;
}
.al-explorer > .al-note { display: none; }
.al-explorer.jupyter-widgets-disconnected > .al-note { display: block; }
.al-explorer.jupyter-widgets-disconnected > .al-controls { display: none; }
.al-explorer.jupyter-widgets-disconnected::before,
.al-explorer .jupyter-widgets-disconnected::before { content: none; display: none; }
</style>"""
