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

from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "BLUE",
    "CELL_WIDTH_IN",
    "GREEN",
    "HATCH_COLOUR",
    "MASKED_COLOUR",
    "MODEL_COLOURS",
    "MODEL_MARKERS",
    "ORANGE",
    "PURPLE",
    "SERIES_COLOURS",
    "SERIES_MARKERS",
    "TITLE_SIZE",
    "VERMILLION",
    "WORD_COLOURS",
    "series_cycle",
    "still_figure",
]

#: the widest a figure may be: 840 px at 100 dpi, a laptop's notebook cell
CELL_WIDTH_IN = 8.4
#: the font size of a panel's title
TITLE_SIZE = 10
#: the causal mask's cells, where no weight can go: grey, hatched in this colour
MASKED_COLOUR = "#d9d9d9"
HATCH_COLOUR = "#9a9a9a"
#: Okabe and Ito's palette: every pair stays apart (at least 11 in CAM02-UCS) under
#: deuteranopia, protanopia and tritanopia as for normal colour vision, where matplotlib's
#: default red and green, or blue and purple, fall to 2-5 (tests/lessons/test_colour_vision.py)
SERIES_COLOURS = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
)
BLUE, VERMILLION, GREEN, PURPLE, ORANGE = SERIES_COLOURS[:5]
#: one colour per trained model (`attention_course.model.catalogue.TRAINED`), in every figure
MODEL_COLOURS = {"sqrt_d16": BLUE, "none_d16": VERMILLION, "inv_d64": GREEN, "sqrt_d64": PURPLE}
#: one marker per trained model too: colour never tells the models apart alone
MODEL_MARKERS = {"sqrt_d16": "o", "none_d16": "s", "inv_d64": "^", "sqrt_d64": "D"}
#: markers for the series of a chart, in turn, so that lines differ by more than colour
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: the beginner's friends and words, in turn
WORD_COLOURS = (BLUE, ORANGE, GREEN, PURPLE, VERMILLION)


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


def series_cycle(ax: Any) -> Any:
    """Give ``ax`` the course's colours (`SERIES_COLOURS`) for the series drawn on it next, in
    place of matplotlib's default ones; returns it."""
    ax.set_prop_cycle(color=SERIES_COLOURS)
    return ax
