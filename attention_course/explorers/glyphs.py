"""Text drawn from cached glyph bitmaps, so a slider move does not rasterise the same words again.

A blitted frame redraws every live artist, and most explorers' live artists
are text: titles, headlines, tick labels. matplotlib's Agg renderer lays out
and rasterises each line of text through FreeType on every draw (about
0.35 ms a line on the 2-core course machine; notebook 06's explorer draws 25
lines a move), although a slider moves through a few values and the same
strings come back. `GlyphCachingRenderer` keeps each line's bitmap, keyed by
everything that shapes it, and stamps it where matplotlib would (0.01 ms).
The pixels are the same: the stamp is the very bitmap FreeType drew
(tests/explorers/test_explorers_glyphs.py compares figures drawn both ways).

`GlyphCachingCanvas` gives a canvas class this renderer (`attach_canvas`
uses it for Agg's canvas and ipympl's).
"""

from __future__ import annotations

from math import cos, radians, sin
from typing import Any

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.font_manager import FontProperties

__all__ = ["MAX_GLYPH_LINES", "GlyphCachingCanvas", "GlyphCachingRenderer"]

#: lines of text a renderer keeps (a few kB each); past this the cache starts again
MAX_GLYPH_LINES = 4096


class GlyphCachingRenderer(RendererAgg):
    """Agg's renderer, drawing each line of plain text from a cached bitmap."""

    def __init__(self, width: float, height: float, dpi: float) -> None:
        super().__init__(width, height, dpi)
        # key -> (bitmap (h, w) uint8, x offset, y offset, descent), all in pixels
        self.glyph_lines: dict[tuple, tuple[np.ndarray, float, float, float]] = {}
        self.glyph_misses = 0

    def draw_text(
        self,
        gc: Any,
        x: float,
        y: float,
        s: str,
        prop: FontProperties,
        angle: float,
        ismath: bool | str = False,
        mtext: Any = None,
    ) -> None:
        if ismath:  # mathtext has its own layout; drawn as matplotlib does
            super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
            return
        antialiased = gc.get_antialiased()
        key = (
            s,
            prop,  # family, style, weight, size, file: hashed and compared by value
            self.dpi,
            antialiased,
            get_hinting_flag(),
            rcParams["text.hinting_factor"],
            rcParams["text.kerning_factor"],
        )
        line = self.glyph_lines.get(key)
        if line is None:
            line = self._rasterise(s, prop, antialiased)
            if len(self.glyph_lines) >= MAX_GLYPH_LINES:
                self.glyph_lines.clear()
            self.glyph_lines[key] = line
        bitmap, xo, yo, descent = line
        # matplotlib's placement (RendererAgg.draw_text): the descent turns with the text
        x = round(x + xo + descent * sin(radians(angle)))
        y = round(y + yo + descent * cos(radians(angle)))
        self._renderer.draw_text_image(bitmap, x, y + 1, angle, gc)

    def _rasterise(
        self, s: str, prop: FontProperties, antialiased: bool
    ) -> tuple[np.ndarray, float, float, float]:
        """FreeType's bitmap of one line, as RendererAgg.draw_text makes it, with its offsets."""
        self.glyph_misses += 1
        font = self._prepare_font(prop)
        font.set_text(s, 0, flags=get_hinting_flag())  # angle 0: turned when stamped
        font.draw_glyphs_to_bitmap(antialiased=antialiased)
        xo, yo = font.get_bitmap_offset()
        bitmap = np.array(font.get_image(), dtype=np.uint8)  # (h, w), a copy of the buffer
        return bitmap, xo / 64.0, yo / 64.0, font.get_descent() / 64.0


class GlyphCachingCanvas(FigureCanvasAgg):
    """A mixin for Agg-based canvases: its renderer is a `GlyphCachingRenderer`.

    Same rule as Agg's ``get_renderer``: one renderer while the figure's size and
    dpi stay, a new one (and an empty cache) when they change.
    """

    def get_renderer(self) -> RendererAgg:
        w, h = self.figure.bbox.size
        key = w, h, self.figure.dpi
        if self._lastKey != key or not isinstance(getattr(self, "renderer", None), RendererAgg):
            self.renderer = GlyphCachingRenderer(w, h, self.figure.dpi)
            self._lastKey = key
        return self.renderer
