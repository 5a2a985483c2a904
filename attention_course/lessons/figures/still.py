"""A still figure as the learner meets it: one PNG with a text alternative, in every front end.

A bare matplotlib ``Figure`` has no picture of its own in a notebook: only
pyplot's inline backend teaches IPython to draw one, and the course's
figures are not pyplot's, so ``display(fig)`` showed ``<Figure size …>``.
A `StillFigure` carries its figure and the sentence a screen reader reads
in its place (numbers included), and displays as

- ``text/html``: an ``<img>`` with that ``alt``, which JupyterLab, Notebook 7,
  Voila, VS Code, Colab and nbconvert's HTML prefer;
- ``image/png``: the same picture, for a viewer that shows no HTML;
- ``text/plain``: the alternative itself, for a terminal.

nbval compares the ``text/html`` and ``text/plain`` outputs, so the
alternative is checked like printed text; `PNG_SANITIZER` is the pattern
notebooks/sanitize.cfg uses to leave the picture's bytes out of the comparison.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

__all__ = ["PNG_SANITIZER", "StillFigure", "data_url", "figure_png"]

#: the base64 picture inside a still's ``text/html`` (notebooks/sanitize.cfg replaces it)
PNG_SANITIZER = r"data:image/png;base64,[A-Za-z0-9+/=]+"


def figure_png(fig: Figure, colours: int | None = None) -> bytes:
    """The figure as PNG bytes at its own size and resolution.

    ``colours`` reduces it to a palette of that many colours (no dithering):
    256 keep a figure's flat colours and anti-aliased text as they are, in a
    third of the bytes.
    """
    with io.BytesIO() as buffer:
        fig.savefig(buffer, format="png", dpi=fig.dpi)
        png = buffer.getvalue()
    if colours is None:
        return png
    from PIL import Image  # matplotlib's own dependency

    image = Image.open(io.BytesIO(png)).convert("RGB")
    reduced = image.quantize(
        colors=colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    with io.BytesIO() as buffer:
        reduced.save(buffer, format="png", optimize=True)
        return buffer.getvalue()


def data_url(png: bytes) -> str:
    """PNG bytes as a ``data:`` URL for an ``<img>``."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


@dataclass(frozen=True, eq=False)
class StillFigure:
    """A figure and its text alternative (``alt``: what it shows, with its numbers).

    Display it as a cell's last expression or with ``display``; ``fig`` is
    the matplotlib figure, for tests and for drawing it elsewhere.
    """

    fig: Figure
    alt: str

    def __post_init__(self) -> None:
        if not self.alt.strip():
            raise ValueError("a still figure needs a text alternative that says what it shows")

    def png(self) -> bytes:
        """The picture, reduced to 256 colours (`figure_png`)."""
        return figure_png(self.fig, colours=256)

    def html(self, png: bytes | None = None) -> str:
        """An ``<img>`` of the picture with the text alternative as its ``alt``, at most the
        cell's width, never wider than its own pixels."""
        png = self.png() if png is None else png
        width = round(self.fig.bbox.width)
        return (
            f'<img src="{data_url(png)}" alt="{html.escape(self.alt)}" width="{width}" '
            'style="max-width: 100%; height: auto;"/>'
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        png = self.png()
        size = {"width": round(self.fig.bbox.width), "height": round(self.fig.bbox.height)}
        data = {"text/html": self.html(png), "image/png": png, "text/plain": self.alt}
        return data, {"image/png": size}

    def __repr__(self) -> str:
        return self.alt
