"""One style for every still figure: how a figure is made, sized and coloured.

A still figure is a `matplotlib.figure.Figure` with an Agg canvas, not
known to pyplot (nothing accumulates in pyplot's list of open figures, and
nothing is shown twice), handed to a notebook as a `StillFigure` with its
text alternative. It is laid out by matplotlib's constrained layout and at
most 8.4 inches wide, 840 px at 100 dpi, the width of a laptop's notebook
cell. Series a figure tells apart differ by marker or line style as well as
by colour.
"""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "CELL_WIDTH_IN",
    "HATCH_COLOUR",
    "MASKED_COLOUR",
    "MODEL_COLOURS",
    "MODEL_MARKERS",
    "SERIES_MARKERS",
    "TITLE_SIZE",
    "WORD_COLOURS",
    "still_figure",
]

#: the widest a figure may be: 840 px at 100 dpi, a laptop's notebook cell
CELL_WIDTH_IN = 8.4
#: the font size of a panel's title
TITLE_SIZE = 10
#: the causal mask's cells, where no weight can go: grey, hatched in this colour
MASKED_COLOUR = "#d9d9d9"
HATCH_COLOUR = "#9a9a9a"
#: one colour per trained model (`attention_lib.model.catalogue.TRAINED`), in every figure
MODEL_COLOURS = {
    "sqrt_d16": "tab:blue",
    "none_d16": "tab:red",
    "inv_d64": "tab:green",
    "sqrt_d64": "tab:purple",
}
#: one marker per trained model too: colour never tells the models apart alone
MODEL_MARKERS = {"sqrt_d16": "o", "none_d16": "s", "inv_d64": "^", "sqrt_d64": "D"}
#: markers for the series of a chart, in turn, so that lines differ by more than colour
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: the beginner's friends and words, in turn
WORD_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


def still_figure(width: float = CELL_WIDTH_IN, height: float = 4.0) -> Figure:
    """A new still figure of ``width`` x ``height`` inches, constrained layout, Agg canvas.

    Raises ValueError for a width beyond `CELL_WIDTH_IN` (it would not fit a
    laptop's cell) or a size that is not positive.
    """
    if not (0 < width <= CELL_WIDTH_IN and height > 0):
        raise ValueError(
            f"a still figure is at most {CELL_WIDTH_IN} in wide and positive in size, "
            f"got {width} x {height} in"
        )
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig
