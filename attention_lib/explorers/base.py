"""The pattern every explorer follows: figure once, controls, artist updates.

In JupyterLab with ``%matplotlib widget`` (ipympl) the figure's canvas is a
widget and `Explorer.widget` stacks it under the controls; callbacks then send
only widget messages, which nbval and the browser tests both handle. Under a
non-interactive backend (the tests, ``Agg``) the same object works without a
display: set a control's value and inspect the artists.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

__all__ = ["Explorer", "key_weight_bars"]


class Explorer:
    """Base class: subclasses draw in ``__init__`` and redraw in `update`.

    Subclasses call `_make_figure` once, create their controls, pass them to
    `_watch`, then call `update` once to draw the first state.
    """

    fig: Figure
    controls: list[widgets.Widget]

    def _make_figure(self, **kwargs: Any) -> Figure:
        """A new figure that pyplot will not display on its own (we place the canvas)."""
        with plt.ioff():
            self.fig = plt.figure(**kwargs)
        self.controls = []
        self._freeze_id = self.fig.canvas.mpl_connect("draw_event", self._freeze_layout)
        return self.fig

    def _freeze_layout(self, _event: Any) -> None:
        """After the first draw, keep the laid-out positions.

        Re-running constrained layout on every slider move roughly doubled
        the redraw time (measured in benchmarks/latency.py); the artists
        move, the axes need not.
        """
        self.fig.canvas.mpl_disconnect(self._freeze_id)
        if self.fig.get_layout_engine() is not None:
            self.fig.set_layout_engine("none")

    def _watch(self, *controls: widgets.Widget) -> None:
        """Redraw whenever one of ``controls`` changes value."""
        for control in controls:
            control.observe(self._on_change, names="value")
            self.controls.append(control)

    def _on_change(self, _change: dict[str, Any]) -> None:
        self.update()
        self.fig.canvas.draw_idle()

    def update(self) -> None:
        """Update the drawn artists to the controls' current values."""
        raise NotImplementedError

    @property
    def widget(self) -> widgets.VBox:
        """Controls above the figure, for ``display`` in a notebook.

        With ipympl the canvas itself is the widget; under any other backend
        the figure is shown as a static image in an Output widget.
        """
        canvas = self.fig.canvas
        if isinstance(canvas, widgets.DOMWidget):
            view: widgets.Widget = canvas
        else:
            view = widgets.Output()
            with view:
                from IPython.display import display

                display(self.fig)
        return widgets.VBox([widgets.HBox(self.controls), view])


def key_weight_bars(ax: Any, keys: int, xlabel: str, ylabel: str) -> Any:
    """One query's weights over ``keys`` keys as bars (heights 0 until updated),
    with the uniform share 1/keys marked; returns the bar container."""
    positions = np.arange(1, keys + 1)  # (keys,)
    bars = ax.bar(positions, np.zeros(keys), color="tab:orange")
    ax.axhline(1 / keys, color="gray", ls="--", lw=1, label=f"uniform 1/{keys}")
    ax.set_ylim(0, 1.05)
    ax.set_xticks(positions)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper right", fontsize=8)
    return bars
