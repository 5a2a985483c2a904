"""The pattern every explorer follows: figure once, controls, artist updates.

An explorer draws its figure on matplotlib's Agg canvas in the kernel and shows
it as PNG bytes in a core ``ipywidgets.Image`` (`Explorer.picture`), under its
core ipywidgets controls: `Explorer.widget` stacks them. Callbacks send only
widget messages, which nbval and the browser tests both handle, and no front
end needs anything beyond ipywidgets (see `attention_course.explorers.canvas`).
Undisplayed (the tests), the same object works without a page: set a
control's value and inspect the artists.

Once displayed, a move is a blitted frame: the figure without its ``live``
artists (axes, ticks, legends: most of the text) is drawn once and kept, and
each move restores that background, draws only the live artists on it and
encodes the canvas once (`attention_course.explorers.frames`). A full redraw of
the figures cost 130-425 ms per move on the 2-core course machine
(benchmarks/latency.py), most of it text.

Displayed, an explorer's box (`ExplorerBox`) fits the cell's width and leaves a
still picture of its figure for pages that cannot run widgets: an untrusted
first open, nbconvert's HTML, a terminal. A notebook reopened after a save
shows the Image's saved picture with a one-line note.

Every picture has a text alternative: `Explorer.describe`, what the figure
shows now with its numbers. It goes into an HTML widget under the picture
(`Explorer.alt`, class `ALT`), so it is visible text in any front end: with the
first frame, and after a learner's move once the control has rested
`ALT_AFTER_MS` (`Explorer.refresh`). The course's JupyterLab extension
(``jupyter/a11y-extension``) makes that element a polite live region and
copies it into the picture's ``alt``, and the still picture carries it as its
``alt`` (`still_html`). A box of class `DESCRIBED` holds a picture and its
alternative side by side, the convention the extension reads
(`text_alternative`).

A cell run again lets go of what it made before (`CellOwned`): an explorer, a
prediction or an exercise gate made in a notebook cell closes the one the
cell's previous run made, its widgets (the whole tree) and its figure, so a
learner who re-runs cells while playing does not fill the kernel's memory.
"""

from __future__ import annotations

import ctypes
import gc
import html
import itertools
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.artist import Artist
from matplotlib.backend_bases import FigureCanvasBase, TimerBase
from matplotlib.figure import Figure

from ..lessons.figures.still import data_url
from ..lessons.figures.still import figure_png as png_bytes
from ..lessons.figures.style import ORANGE
from .canvas import STILL_NOTE, ExplorerCanvas, frame_png, still_css, timers_fire

__all__ = [
    "ALT",
    "ALT_AFTER_MS",
    "DESCRIBED",
    "DRAWING",
    "CellOwned",
    "Explorer",
    "ExplorerBox",
    "StillBox",
    "close_widgets",
    "forget_outputs",
    "handling_widget_message",
    "key_weight_bars",
    "live_explorers",
    "one_line",
    "running_cell",
    "settle_long_lived",
    "still_html",
    "text_alternative",
]

#: Held while an explorer draws. A front end may send widget messages to a kernel subshell
#: (JupyterLab 4.6's default, "commsOverSubshells"), which ipykernel 7 runs on a thread of
#: its own beside the cells and the event loop's timers; matplotlib assumes one thread.
DRAWING = threading.RLock()

#: The class of a picture's text alternative (an HTML widget), and of a box that holds a
#: picture (``img.widget-image``) and its alternative as children: what the course's lab
#: extension reads to set the picture's ``alt`` and announce the alternative.
ALT = "al-alt"
DESCRIBED = "al-described"

#: How long after a move's frame its text alternative is sent, a later move starting the wait
#: again. The page paints a frame some 30 ms after the kernel sends it (benchmarks/latency.py,
#: "to page" and "to screen", p50 on the 2-core course machine); an alternative sent with it
#: was handled in the same frame and made it later (+2.3 ms median p50, up to +6 ms a
#: control). A screen reader, told by the polite live region, says where a run of key
#: presses stopped rather than each step on the way.
ALT_AFTER_MS = 60


def one_line(text: str) -> str:
    """``text`` on one line (lines joined by "; "): an ``alt`` and a live region read as one."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def text_alternative(text: str = "") -> widgets.HTML:
    """An HTML widget of class `ALT` showing ``text`` (escaped, on one line) as small print:
    a picture's text alternative, visible next to it in any front end."""
    alt = widgets.HTML(_alt_html(text))
    alt.add_class(ALT)
    return alt


def _alt_html(text: str) -> str:
    return html.escape(one_line(text))


# Every explorer made in this process and still alive, by the order they were made. The
# kernel-side probes (labdriver's, the latency benchmark's) find them here: once frozen
# (`settle_long_lived`) they are no longer among gc.get_objects().
_LIVE: weakref.WeakValueDictionary[int, Explorer] = weakref.WeakValueDictionary()
_MADE = itertools.count()


def live_explorers() -> list[Explorer]:
    """Every explorer this process made that is still alive and not closed, oldest first."""
    return [explorer for _, explorer in sorted(_LIVE.items())]


# -- what a cell made, let go of when the cell runs again -----------------------------------


def running_cell() -> tuple[str, str] | None:
    """The notebook cell running now and this run of it: (cell id, request id), or None.

    JupyterLab and Notebook 7 send the cell's id in each execute request's
    metadata (``cellId``). None outside a kernel (a script, the tests), while
    a widget's message rather than a cell runs (a slider move, a button), and
    where the front end sends no id (nbval, nbclient): there nothing made is
    replaced, as before.
    """
    parent = _kernel_request()
    header = parent.get("header") or {}
    cell = (parent.get("metadata") or {}).get("cellId")
    if header.get("msg_type") != "execute_request" or not cell or not header.get("msg_id"):
        return None
    return str(cell), str(header["msg_id"])


def handling_widget_message() -> bool:
    """Whether the kernel is handling a widget's message from the page now (a slider moved,
    a button pressed), rather than a cell's code (a cell that sets a control) or no request."""
    header = _kernel_request().get("header") or {}
    return header.get("msg_type") == "comm_msg"


def _kernel_request() -> dict[str, Any]:
    """The request the kernel is handling (its header and metadata); {} outside a kernel."""
    ipython = sys.modules.get("IPython")  # never imported here: no IPython, no kernel
    shell = ipython.get_ipython() if ipython is not None else None
    get_parent = getattr(shell, "get_parent", None)
    return (get_parent() or {}) if get_parent is not None else {}


# cell id -> (the request id of the run that made them, what that run made)
_MADE_IN_CELL: dict[str, tuple[str, list[weakref.ref[CellOwned]]]] = {}


def close_widgets(roots: Iterable[Any]) -> None:
    """Close each widget among ``roots`` and every widget under it (its children, layout and
    style, any widget it holds in a trait), and empty the boxes among them.

    A closed widget leaves ipywidgets' registry and the kernel's comms, and its
    views leave the page. Emptied, a closed box that something still holds (the
    cell's ``Out`` entry for ``explorer.widget``) no longer holds its pictures.
    """
    stack = [root for root in roots if isinstance(root, widgets.Widget)]
    seen: set[int] = set()
    while stack:
        widget = stack.pop()
        if id(widget) in seen:
            continue
        seen.add(id(widget))
        for name in widget.keys:
            value = getattr(widget, name, None)
            held = value if isinstance(value, (list, tuple)) else (value,)
            stack.extend(w for w in held if isinstance(w, widgets.Widget))
        widget.close()
        if isinstance(widget, widgets.Box):
            widget.children = ()  # closed: nothing is sent


def _held_widgets(owner: object) -> list[widgets.Widget]:
    """The widgets ``owner`` holds in its attributes, directly or in a list, tuple or dict."""
    found = []
    for value in vars(owner).values():
        if isinstance(value, dict):
            value = list(value.values())
        held = value if isinstance(value, (list, tuple)) else (value,)
        found.extend(w for w in held if isinstance(w, widgets.Widget))
    return found


class CellOwned:
    """Something a notebook cell makes and shows (an explorer, a prediction, an exercise
    gate): the cell's next run closes it.

    A subclass calls `_replace_in_cell` as it is made, before it makes its
    widgets: where a cell is running (`running_cell`), whatever that cell's
    previous run made is closed first: otherwise ipywidgets' registry keeps
    every widget open, and with the widgets' callbacks everything the object
    holds (an explorer's figure and pixels), for the kernel's life. `close`
    closes every widget the object holds (each whole tree, `close_widgets`);
    subclasses let go of more (an explorer, its figure).
    """

    #: whether `close` has run: a closed object shows nothing and draws nothing
    closed: bool = False

    def _replace_in_cell(self) -> None:
        """Close what the running cell's previous run made; be closed by its next run."""
        running = running_cell()
        if running is None:
            return
        cell, run = running
        made = _MADE_IN_CELL.get(cell)
        if made is None or made[0] != run:
            before = [] if made is None else [ref() for ref in made[1]]
            made = _MADE_IN_CELL[cell] = (run, [])
            for owner in before:
                if owner is not None:
                    owner.close()
        made[1].append(weakref.ref(self))

    def close(self) -> None:
        """Close every widget this holds, each with the widgets under it (`close_widgets`);
        its views leave the page. Closing twice does nothing."""
        if self.closed:
            return
        self.closed = True
        close_widgets(_held_widgets(self))


class Explorer(CellOwned):
    """Base class: subclasses draw in ``__init__`` and redraw in `update`.

    Subclasses call `_make_figure` once, create their controls, pass them to
    `_watch`, list in ``self.live`` every artist `update` changes (whole axes
    where their limits or ticks change), then call `update` once to draw the
    first state. Anything not in ``live`` is drawn from the cached background,
    so an artist `update` changes but ``live`` omits would show stale pixels:
    the tests compare every blitted frame with a full redraw.
    """

    fig: Figure
    picture: widgets.Image
    controls: list[widgets.Widget]
    live: list[Artist]
    #: True: draw each update as a blitted frame; False: a full redraw; None: blit once
    #: displayed (undisplayed, an update only asks the canvas for ``draw_idle``).
    blit: bool | None = None

    def _make_figure(self, **kwargs: Any) -> Figure:
        """A new figure (``Figure(**kwargs)``) on its own canvas (`ExplorerCanvas`), unknown
        to pyplot, and the Image that will show it; closes what the running cell's previous
        run made (`CellOwned`)."""
        self._replace_in_cell()
        self._number = next(_MADE)
        _LIVE[self._number] = self
        self.fig = Figure(**kwargs)
        ExplorerCanvas(self.fig)
        self.picture = widgets.Image(format="png")
        self.alt = text_alternative()  # `describe`, sent once a move has rested (`refresh`)
        self._box: ExplorerBox | None = None
        self.above: list[widgets.Widget] = []  # shown between the controls and the figure
        self.controls = []
        self.live = []
        self._laid_out = False
        self._background: Any = None  # the canvas region without the live artists
        self._drawing_background = False
        self._timers: dict[str, TimerBase] = {}  # `_start_timer`'s, by name
        self.fig.canvas.mpl_connect("draw_event", self._on_draw)
        return self.fig

    def _on_draw(self, _event: Any) -> None:
        """Freeze the layout after the first draw; drop the background after any other draw.

        Re-running constrained layout on every slider move roughly doubled
        the redraw time (measured in benchmarks/latency.py); the artists
        move, the axes need not. A full draw we did not start (a savefig,
        a change of dpi) may have changed the size or the static artists, so
        the background is drawn again, ahead of the next move where the
        kernel's event loop lets it (`_prepare_background_soon`).
        """
        if not self._laid_out:
            self._laid_out = True
            if self.fig.get_layout_engine() is not None:
                self.fig.set_layout_engine("none")
            self._pin_axis_labels()
        if not self._drawing_background:
            self._background = None
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

        Without this the first move after a full draw (the still picture drawn
        as the box is displayed) draws the whole background first. With no
        event loop running (a test) the timer never fires; the next frame
        draws the background instead.
        """
        self._start_timer("background", 50, self._prepare_background, single_shot=True)

    def _prepare_background(self) -> None:
        with DRAWING:
            if self._background is None and not self.closed:
                self._draw_background()
        settle_long_lived()  # idle now: the next collection walks only newer objects

    def _start_timer(
        self, name: str, interval: int, method: Callable[[], Any], single_shot: bool = False
    ) -> TimerBase:
        """Start a timer on the canvas that calls ``method`` (one of this explorer's) every
        ``interval`` ms, or once, until it returns False; it replaces the timer of that
        ``name``, and `close` stops it.

        The timer holds the method weakly: a stopped timer's task stays on its loop
        until the loop runs again, and an event loop that is not the kernel's
        (playwright's, in a test process) may never run again while the explorer's
        test goes on.
        """
        held = weakref.WeakMethod(method)

        def fire() -> Any:
            bound = held()
            return False if bound is None or bound.__self__.closed else bound()

        self._stop_timer(name)
        timer = self.fig.canvas.new_timer(interval=interval)
        timer.single_shot = single_shot
        timer.add_callback(fire)
        timer.start()
        self._timers[name] = timer  # alive until it fires, or is stopped
        return timer

    def _stop_timer(self, name: str) -> None:
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.stop()
            timer.callbacks.clear()

    def _watch(self, *controls: widgets.Widget) -> None:
        """Redraw whenever one of ``controls`` changes value."""
        for control in controls:
            control.observe(self._on_change, names="value")
            self.controls.append(control)

    def _on_change(self, _change: dict[str, Any]) -> None:
        if self.closed:
            return
        with DRAWING:
            self.update()
            self.refresh()

    @property
    def displayed(self) -> bool:
        """Whether the explorer's box exists, so its picture is shown somewhere."""
        return self._box is not None

    @property
    def blits(self) -> bool:
        """Whether `refresh` draws a blitted frame rather than a full redraw."""
        if not self.live:
            return False
        if self.blit is not None:
            return self.blit
        return self.displayed

    def refresh(self, describe_now: bool = False) -> None:
        """Show the artists' current state: a blitted frame or a full redraw, encoded once
        into the picture. Undisplayed, a full redraw is only asked for (``draw_idle``).
        Closed, nothing.

        Displayed, after a move from the page (`handling_widget_message`) the text
        alternative follows `ALT_AFTER_MS` later on the kernel's event loop, each refresh
        starting the wait again. Otherwise at once: the first frame (``describe_now``), a
        cell's code (its outputs, widget state included, are saved as the cell ends:
        nbconvert's), where no timer would fire (`timers_fire`: a test, a script).
        """
        if self.closed:
            return
        canvas = self.fig.canvas
        if self.blits:
            if self._background is None:
                self._draw_background()
            else:
                canvas.restore_region(self._background)
            for artist in self.drawing_order():
                self.fig.draw_artist(artist)  # an invisible artist draws nothing
        elif self.displayed:
            canvas.draw()
        else:
            canvas.draw_idle()
            return
        self.fig.stale = False  # the canvas shows the current state
        if self.displayed:
            self.picture.value = frame_png(canvas)  # the move's one encode
            if not describe_now and handling_widget_message() and timers_fire():
                self._start_timer("alt", ALT_AFTER_MS, self._describe, single_shot=True)
            else:
                self._stop_timer("alt")  # one still to come would say the same
                self._describe()

    def _describe(self) -> None:
        """Send `describe` into the text alternative (the page announces it)."""
        with DRAWING:  # a move may be changing the artists on a subshell's thread
            if not self.closed:
                self.alt.value = _alt_html(self.describe())

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
            canvas.draw()
        finally:
            self._drawing_background = False
            for artist in drawn_per_frame:
                artist.set_animated(False)
        self._background = canvas.copy_from_bbox(self.fig.bbox)

    def update(self) -> None:
        """Update the drawn artists to the controls' current values."""
        raise NotImplementedError

    def describe(self) -> str:
        """What the picture shows now, with its numbers: its text alternative, read in place
        of the picture (and announced after each move) by a screen reader."""
        raise NotImplementedError

    @property
    def widget(self) -> ExplorerBox:
        """Controls above the picture, for ``display`` in a notebook (one box per explorer).

        Made on first use, with the figure's first frame in the picture and
        its text alternative under it. Displayed, the box also carries a still
        picture of the figure for a page that cannot show widgets (see
        `ExplorerBox`).
        """
        if self._box is not None:
            return self._box
        controls = widgets.HBox(self.controls)
        controls.add_class("al-controls")
        self._controls_row = controls  # closed with the explorer, even where a subclass's
        # `widget` puts rows of its own in its place
        note = widgets.HTML(f"{still_css()}<p><em>{html.escape(STILL_NOTE)}</em></p>")
        note.add_class("al-note")
        width = round(self.fig.bbox.width)
        self._box = ExplorerBox(
            self,
            [controls, *self.above, self.picture, self.alt, note],
            layout={"width": "100%", "max_width": f"{width}px"},
        )
        self._box.add_class("al-explorer")
        self._box.add_class(DESCRIBED)
        self.refresh(describe_now=True)  # the first frame, described as it is shown
        return self._box

    def close(self) -> None:
        """Close the explorer's widgets (`CellOwned.close`) and let go of its figure: its
        artists, the canvas's pixels and cached background, the picture's PNG bytes.

        Something may still hold the closed explorer (the cell's ``Out`` entry
        holds its box, a prediction its callback): it then holds little.
        """
        if self.closed:
            return
        with DRAWING:  # a slider's message may be drawing on another thread
            super().close()
            _LIVE.pop(self._number, None)
            for name in list(self._timers):
                self._stop_timer(name)
            self._background = None
            self.picture.value = b""
            self.fig.clear()
            FigureCanvasBase(self.fig)  # in place of the Agg canvas: its pixels and glyphs go
            if self._box is not None:
                self._box.explorer = None  # the box may outlive it in ``Out``

    def still(self) -> bytes:
        """The figure as it is now, as PNG bytes (the picture shown before the kernel runs).

        Reduced to 256 colours: a third of the size, and a figure's flat colours
        and anti-aliased text look the same.
        """
        return png_bytes(self.fig, colours=256)


def settle_long_lived() -> None:
    """Collect garbage now, leave every object that survives out of later collections, and
    give the pages the collection freed back to the system (`_malloc_trim`).

    A kernel that has run a notebook holds some 200,000 objects that live as
    long as it does (torch, matplotlib, the explorers). A full collection walks
    them all, 65 ms on the 2-core course machine, at a moment the interpreter
    picks: one landed inside a move of 01's volume slider (116 ms against a
    median of 53; benchmarks/latency.py's "of which gc"). Frozen
    (`gc.freeze`), they are skipped, and later collections walk only newer
    objects. Unfrozen and collected first, so that garbage frozen at an earlier
    call (a figure of a cell run again) is freed here rather than kept for good.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)  # the freed pages back to the system


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, Windows, musl).

    glibc keeps the pages that freed objects leave inside its heaps: after a
    Run All of 01 and 02 the kernel held some 40 MiB of them, and re-running
    cells moved that high-water mark up and down by several MiB a run
    (tests/notebooks/test_rerun_memory.py). Trimmed once the kernel is idle,
    what it holds is what it uses.
    """
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError, TypeError):
        return None


_MALLOC_TRIM = _malloc_trim()


class StillBox(widgets.VBox):
    """A VBox whose display bundle also holds a still version of itself.

    JupyterLab shows the live widget (``application/vnd.jupyter.widget-view+json``)
    in a trusted notebook whose kernel made it, and otherwise the first of the
    other types it may render safely: ``text/html``, sanitised, in a
    learner's first (untrusted) open of a committed notebook; then
    ``image/png``; then ``text/plain``. Subclasses say what the still version
    is (`still_bundle`); without one a box shows its text repr, as any widget.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stills_shown: list[str] = []  # each display's ``text/html``, for `close`

    def still_bundle(self) -> dict[str, Any]:
        """The extra types of the display bundle (``text/html``, ``text/plain``...)."""
        return {}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data = super()._repr_mimebundle_(**kwargs)
        if data is None:  # closed
            return None
        still = self.still_bundle()
        data.update(still)
        if "text/html" in still:
            self._stills_shown.append(still["text/html"])
        return data

    def close(self) -> None:
        """Close the box, and drop the still pictures it showed from IPython's record of the
        kernel's outputs (`forget_outputs`): the page has them, and a box closed as its cell
        runs again would otherwise keep one PNG per run for the kernel's life."""
        super().close()
        forget_outputs(self._stills_shown)
        self._stills_shown = []


def forget_outputs(values: list[str]) -> None:
    """Remove each of ``values`` (the very objects) from the output bundles IPython keeps.

    IPython 9 records every output's whole bundle, per execution, in
    ``history_manager.outputs`` (for ``%notebook``) and never drops one; an
    explorer's still is a PNG of tens of kB. The bundle keeps its other types
    (the widget's view, the text alternative as ``text/plain``).
    """
    if not values:
        return
    ipython = sys.modules.get("IPython")  # never imported here: no IPython, no record
    shell = ipython.get_ipython() if ipython is not None else None
    recorded = getattr(getattr(shell, "history_manager", None), "outputs", None)
    if not isinstance(recorded, dict):
        return
    shown = {id(value) for value in values}
    for outputs in recorded.values():
        for output in outputs:
            bundle = getattr(output, "bundle", None)
            if isinstance(bundle, dict):
                for key in [key for key, value in bundle.items() if id(value) in shown]:
                    del bundle[key]


class ExplorerBox(StillBox):
    """An explorer's controls, picture and note, displayed with a still picture too.

    Displayed, its display bundle carries a PNG of the figure as it is at that
    moment, its text alternative (`Explorer.describe`) as the ``alt``, and the
    one-line `STILL_NOTE` (``text/html``; ``text/plain``, the alternative and
    the note, for a page without HTML): a learner's first, untrusted open of
    the committed notebook, nbconvert's HTML and a terminal show the picture
    and say what it shows, never the widget's text. Rebuilt from saved state
    without a kernel (reopened after a save), the box shows its Image's saved
    picture and the alternative sent with it, and its style sheet
    (`still_css`) hides the dead controls and shows the note.
    """

    def __init__(self, explorer: Explorer, children: list[widgets.Widget], **kwargs: Any) -> None:
        super().__init__(children, **kwargs)
        self.explorer: Explorer | None = explorer  # None once the explorer is closed

    def still_bundle(self) -> dict[str, Any]:
        if self.explorer is None:
            return {}
        alt = one_line(self.explorer.describe())
        return {
            "text/html": still_html(self.explorer.still(), alt),
            "text/plain": f"{alt}\n{STILL_NOTE}",
        }


def still_html(png: bytes, alt: str) -> str:
    """A still picture with its text alternative (``alt``) and its one-line note, as HTML
    that survives JupyterLab's sanitiser."""
    return (
        f'<div class="al-still"><img src="{data_url(png)}" alt="{html.escape(one_line(alt))}" '
        f'style="max-width: 100%; height: auto;"/>'
        f"<p><em>{html.escape(STILL_NOTE)}</em></p></div>"
    )


def key_weight_bars(ax: Any, keys: int, xlabel: str, ylabel: str, legend: bool = True) -> Any:
    """One query's weights over ``keys`` keys as bars (heights 0 until updated),
    with the uniform share 1/keys marked (in a legend of its own unless
    ``legend=False``: the caller lists the line elsewhere); returns the bar container."""
    positions = np.arange(1, keys + 1)  # (keys,)
    bars = ax.bar(positions, np.zeros(keys), color=ORANGE)
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
