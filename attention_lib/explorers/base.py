"""The pattern every explorer follows: figure once, controls, artist updates.

In JupyterLab with ``%matplotlib widget`` (ipympl) the figure's canvas is a
widget and `Explorer.widget` stacks it under the controls; callbacks then send
only widget messages, which nbval and the browser tests both handle. Under a
non-interactive backend (the tests, ``Agg``) the same object works without a
display: set a control's value and inspect the artists.

A slider move is sent as a blitted frame: the figure without its ``live``
artists (axes, ticks, legends: most of the text) is drawn once and cached, and
each move restores that background and draws only the live artists on it.
ipympl then sends the browser just the pixels that changed. A full redraw of
the figures cost 130-425 ms per move on the 2-core course machine
(benchmarks/latency.py), most of it text.

Displayed, an explorer's box (`ExplorerBox`) fits the cell's width and leaves a
still picture of its figure for pages that cannot run it: an untrusted first
open, or a notebook reopened after a save (see `attention_lib.explorers.canvas`).
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_webagg_core import FigureCanvasWebAggCore
from matplotlib.figure import Figure

from .canvas import STILL_NOTE, attach_canvas, data_url, fit_css, png_bytes
from .frames import send_fast_frames

__all__ = ["Explorer", "ExplorerBox", "StillBox", "key_weight_bars", "still_html"]


class Explorer:
    """Base class: subclasses draw in ``__init__`` and redraw in `update`.

    Subclasses call `_make_figure` once, create their controls, pass them to
    `_watch`, list in ``self.live`` every artist `update` changes (whole axes
    where their limits or ticks change), then call `update` once to draw the
    first state. Anything not in ``live`` is drawn from the cached background,
    so an artist `update` changes but ``live`` omits would show stale pixels:
    the tests compare every blitted frame with a full redraw.
    """

    fig: Figure
    controls: list[widgets.Widget]
    live: list[Artist]
    #: True: send each update as a blitted frame; False: ask for a full redraw
    #: (``draw_idle``); None: blit where the canvas sends frames to a browser (ipympl).
    blit: bool | None = None

    def _make_figure(self, **kwargs: Any) -> Figure:
        """A new figure (``Figure(**kwargs)``) on its own canvas, unknown to pyplot.

        Under ipympl the canvas is a widget that opens already sized (see
        `attention_lib.explorers.canvas`); elsewhere it is Agg's.
        """
        self.fig = Figure(**kwargs)
        attach_canvas(self.fig)
        self._box: ExplorerBox | None = None
        self.above: list[widgets.Widget] = []  # shown between the controls and the figure
        self.controls = []
        self.live = []
        self._laid_out = False
        self._background: Any = None  # the canvas region without the live artists
        self._shown = False  # a full frame has been drawn on the canvas (not for a savefig)
        self._drawing_background = False
        self.fig.canvas.mpl_connect("draw_event", self._on_draw)
        send_fast_frames(self.fig.canvas)
        return self.fig

    def _on_draw(self, _event: Any) -> None:
        """Freeze the layout after the first draw; drop the background after any other draw.

        Re-running constrained layout on every slider move roughly doubled
        the redraw time (measured in benchmarks/latency.py); the artists
        move, the axes need not. A full draw we did not start (the browser
        resized the canvas, changed its pixel ratio, or a savefig) may have
        changed the size or the static artists, so the next frame redraws the
        background.
        """
        if not self._laid_out:
            self._laid_out = True
            if self.fig.get_layout_engine() is not None:
                self.fig.set_layout_engine("none")
            self._pin_axis_labels()
        if not self._drawing_background:
            self._background = None
            if not self.fig.canvas.is_saving():
                self._shown = True
                if self.blits:
                    self._prepare_background_soon()

    def _pin_axis_labels(self) -> None:
        """Keep every axis label where the first draw put it, in axes coordinates.

        By default each draw of an axis places its label past its tick labels,
        measuring those of every sibling axes (a tenth of a move where a live
        axis's ticks change, 02's histogram); the layout is frozen, so the label
        need not move. Axes coordinates scale with the canvas, as the labels'
        text does when the page changes the figure's dpi. The pixels are the same.
        """
        for ax in self.fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                label = axis.label
                shown = label.get_transform().transform(label.get_position())  # (2,) pixels
                x, y = ax.transAxes.inverted().transform(shown)  # axes coordinates
                axis.set_label_coords(x, y)
        self.fig.stale = False  # the same picture: no redraw for it

    def _prepare_background_soon(self) -> None:
        """Draw the background once the event loop is free, so the first move is fast too.

        Without this the first move after the figure appears (or is resized)
        draws the whole background: about 200-300 ms more on this machine. A
        canvas without an event loop (Agg) has timers that never fire; its
        first frame draws the background instead.
        """
        timer = self.fig.canvas.new_timer(interval=50)
        timer.single_shot = True

        def prepare() -> None:
            if self._background is None:
                self._draw_background()

        timer.add_callback(prepare)
        timer.start()
        self._background_timer = timer  # keep it alive until it fires

    def _watch(self, *controls: widgets.Widget) -> None:
        """Redraw whenever one of ``controls`` changes value."""
        for control in controls:
            control.observe(self._on_change, names="value")
            self.controls.append(control)

    def _on_change(self, _change: dict[str, Any]) -> None:
        self.update()
        self.refresh()

    @property
    def blits(self) -> bool:
        """Whether `refresh` sends a blitted frame rather than asking for a full redraw."""
        if not self.live:
            return False
        if self.blit is not None:
            return self.blit
        return isinstance(self.fig.canvas, FigureCanvasWebAggCore)

    def refresh(self) -> None:
        """Show the artists' current state: a blitted frame, or a full redraw on request.

        Until the canvas has drawn one full frame (in JupyterLab: until the
        browser's view asked for it) a move asks for a full redraw: ipympl's
        view shows nothing if its first image is a frame sent before it was
        ready (seen when "Run All" moved a control in a later cell).
        """
        if not (self.blits and self._shown):
            self.fig.canvas.draw_idle()
            return
        canvas = self.fig.canvas
        if self._background is None:
            self._draw_background()
        else:
            canvas.restore_region(self._background)
        for artist in self.drawing_order():
            self.fig.draw_artist(artist)  # an invisible artist draws nothing
        canvas.blit(self.fig.bbox)
        # The canvas shows the current state. Left stale, the figure would be redrawn in full
        # straight after: the comm package fires IPython's post_execute after every widget
        # message, and pyplot then asks for a full draw of every stale figure.
        self.fig.stale = False

    def drawing_order(self) -> list[Artist]:
        """What a frame draws over the background, in the order a full draw paints it.

        The live artists, and the spines of every axes they sit in: a full
        draw paints the frame (zorder 2.5) over bars and lines that touch it.
        Sorted by zorder, ties as listed.
        """
        holders = {id(a.axes): a.axes for a in self.live if a.axes is not None and a.axes is not a}
        spines = [spine for ax in holders.values() for spine in ax.spines.values()]
        once = dict.fromkeys([*self.live, *spines])  # an artist drawn twice darkens its edges
        return sorted(once, key=lambda artist: artist.get_zorder())

    def _draw_background(self) -> None:
        """Draw the figure without its live artists and keep the pixels."""
        canvas = self.fig.canvas
        if not self._laid_out:
            self.fig.draw_without_rendering()  # lay out with every artist in place, then freeze
        # A draw skips animated artists (hiding them instead would move axes titles, which
        # are placed by their visible extent), so mark the live ones for this draw only.
        drawn_per_frame = self.drawing_order()  # not in the background
        for artist in drawn_per_frame:
            artist.set_animated(True)
        self._drawing_background = True
        try:
            # Agg's own draw: the webagg canvas's draw would also send this half-drawn frame
            FigureCanvasAgg.draw(canvas)
        finally:
            self._drawing_background = False
            for artist in drawn_per_frame:
                artist.set_animated(False)
        self._background = canvas.copy_from_bbox(self.fig.bbox)

    def update(self) -> None:
        """Update the drawn artists to the controls' current values."""
        raise NotImplementedError

    @property
    def widget(self) -> ExplorerBox:
        """Controls above the figure, for ``display`` in a notebook (one box per explorer).

        With ipympl the canvas itself is the widget; under any other backend
        the figure is shown as a static image in an Output widget. Displayed,
        the box also carries a still picture of the figure for a page that
        cannot show the live widget (see `ExplorerBox`).
        """
        if self._box is not None:
            return self._box
        canvas = self.fig.canvas
        if isinstance(canvas, widgets.DOMWidget):
            view: widgets.Widget = canvas
        else:
            view = widgets.Output()
            with view:
                from IPython.display import display

                display(self.fig)
        controls = widgets.HBox(self.controls)
        controls.add_class("al-controls")
        note = widgets.HTML(fit_css(self.fig))  # the still picture joins it when displayed
        note.add_class("al-note")
        width = round(self.fig.bbox.width)
        self._box = ExplorerBox(
            self,
            [controls, *self.above, view, note],
            note,
            layout={"width": "100%", "max_width": f"{width}px"},
        )
        self._box.add_class("al-explorer")
        return self._box

    def still(self) -> bytes:
        """The figure as it is now, as PNG bytes (the picture shown before the kernel runs).

        Reduced to 256 colours: a third of the size, and a figure's flat colours
        and anti-aliased text look the same.
        """
        return png_bytes(self.fig, colours=256)


class StillBox(widgets.VBox):
    """A VBox whose display bundle also holds a still version of itself.

    JupyterLab shows the live widget (``application/vnd.jupyter.widget-view+json``)
    in a trusted notebook whose kernel made it, and otherwise the first of the
    other types it may render safely: ``text/html``, sanitised, in a
    learner's first (untrusted) open of a committed notebook; then
    ``image/png``; then ``text/plain``. Subclasses say what the still version
    is (`still_bundle`); without one a box shows its text repr, as any widget.
    """

    def still_bundle(self) -> dict[str, Any]:
        """The extra types of the display bundle (``text/html``, ``text/plain``...)."""
        return {}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data = super()._repr_mimebundle_(**kwargs)
        if data is None:  # closed
            return None
        data.update(self.still_bundle())
        return data


class ExplorerBox(StillBox):
    """An explorer's controls, canvas and still note, displayed with a still picture too.

    Displayed, it carries a PNG of the figure as it is at that moment, with
    the one-line `STILL_NOTE`, in two places:

    - in its display bundle (``text/html``, and ``text/plain`` for a page
      without HTML): a learner's first, untrusted open of the committed
      notebook shows the picture instead of the widget's text;
    - in its ``note`` widget, which the box's style sheet shows only when the
      widget is rebuilt from saved state without a kernel (reopened after a
      save), in place of the canvas and the controls. ipympl's own saved
      picture (``_data_url``) cannot serve: the page stores it one frame
      late, so after Run All it is often blank.
    """

    def __init__(
        self,
        explorer: Explorer,
        children: list[widgets.Widget],
        note: widgets.HTML,
        **kwargs: Any,
    ) -> None:
        super().__init__(children, **kwargs)
        self.explorer = explorer
        self.note = note

    def still_bundle(self) -> dict[str, Any]:
        picture = still_html(self.explorer.still(), _figure_title(self.explorer.fig))
        self.note.value = fit_css(self.explorer.fig) + picture
        return {
            "text/html": picture,
            "text/plain": f"{_figure_title(self.explorer.fig)}\n{STILL_NOTE}",
        }


def still_html(png: bytes, title: str) -> str:
    """A still picture with its one-line note, as HTML that survives JupyterLab's sanitiser."""
    return (
        f'<div class="al-still"><img src="{data_url(png)}" alt="{html.escape(title)}" '
        f'style="max-width: 100%; height: auto;"/>'
        f"<p><em>{html.escape(STILL_NOTE)}</em></p></div>"
    )


def _figure_title(fig: Figure) -> str:
    """The figure's headline (its suptitle or first axes title), for alt text."""
    if fig.get_suptitle():
        return fig.get_suptitle()
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    return titles[0] if titles else "explorer figure"


def key_weight_bars(ax: Any, keys: int, xlabel: str, ylabel: str, legend: bool = True) -> Any:
    """One query's weights over ``keys`` keys as bars (heights 0 until updated),
    with the uniform share 1/keys marked (in a legend of its own unless
    ``legend=False``: the caller lists the line elsewhere); returns the bar container."""
    positions = np.arange(1, keys + 1)  # (keys,)
    bars = ax.bar(positions, np.zeros(keys), color="tab:orange")
    ax.axhline(1 / keys, color="gray", ls="--", lw=1, label=f"uniform 1/{keys}")
    # with a legend, room above a weight of 1 for it: it would otherwise hide a winning bar
    ax.set_ylim(0, 1.3 if legend else 1.05)
    ax.set_yticks(np.linspace(0, 1, 5))
    ax.set_xticks(positions)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if legend:
        ax.legend(loc="upper right", fontsize=8)
    return bars
