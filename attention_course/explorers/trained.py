"""Explorers on the small model trained here (`attention_course.model`).

- `WhereItLooksExplorer` (beginner, notebook 01): pick a sentence; bars and
  arcs show where "it" (or "they") looks, in the head that learned to find
  what a pronoun stands for, or in all heads averaged. A volume knob
  multiplies every head's scores: turned down, attention spreads evenly
  (mush) and the model's guess of the next word goes wrong; turned up, one
  word takes everything.
- `HeadMapsExplorer` (developer, notebooks 02/03): one head's full map of
  weights over a sentence, queries down, keys across, the causal mask's
  cells hatched; choose the sentence, the model (scale rule), layer and head.

The numbers come from `attention_course.model.views`; the weights are
loaded once, never trained here. Importing this module does not import
torch: the explorers load the model when built.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib import colormaps
from matplotlib.patches import FancyArrowPatch, Patch, Polygon, Rectangle

from ..lessons.figures.style import HATCH_COLOUR, MASKED_COLOUR
from ..model.catalogue import MODEL_LABELS
from ..model.corpus import SHOWCASE
from .base import DRAWING, Explorer, ExplorerBox
from .controls import fit_label, fit_slider

__all__ = ["HeadMapsExplorer", "WhereItLooksExplorer", "masked_staircase", "volume_words"]

_BAR = "#4c72b0"
_TOP = "#dd8452"
_QUERY = "#c44e52"


def _percent(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 else "<1%"


def volume_words(top_share: float, words: int) -> str:
    """Plain words for how peaked a row of ``words`` shares is, whose largest is ``top_share``:
    nearly even ("mush"), nearly all on one word (95% or more), or in between. The words say
    only what the bars show: not "winner takes all", which the picture's other bars deny."""
    if top_share < 1.5 / words:
        return "spread almost evenly: mush"
    if top_share >= 0.95:
        return "nearly all on one word"
    return "some words clearly more than others"


def masked_staircase(t: int) -> np.ndarray:
    """The outline of a causal map's masked cells (key j > query i) on a ``t`` x ``t`` grid.

    Cell (i, j) is centred on x = j, y = i (imshow's pixels): the region's
    left edge steps down and right along the diagonal, from (0.5, -0.5) to
    (t - 0.5, t - 1.5). Returns the polygon's vertices, shape (2t, 2).
    """
    steps = [((i + 0.5, i + 0.5), (i + 1.5, i + 0.5)) for i in range(t - 1)]
    corners = [(0.5, -0.5), *(p for step in steps for p in step), (t - 0.5, -0.5)]
    return np.array(corners)  # (2t, 2)


class _RedrawsWords:
    """For an `Explorer` whose ``sentence`` control rewrites static text (the words on an
    axis): that change redraws the background, so the words stay out of ``live`` and every
    other move blits only what it changes (text is most of a frame's cost).

    The new background goes out in the move's one frame, as a blit does.
    """

    sentence: widgets.Dropdown

    def _on_change(self, change: dict) -> None:
        if change["owner"] is self.sentence:
            self._background = None  # type: ignore[attr-defined]  # old words in it
        super()._on_change(change)  # type: ignore[misc]


class _KeepsBackgrounds(_RedrawsWords):
    """A `_RedrawsWords` explorer that keeps each sentence's background, and draws them ahead.

    A background is kept by sentence and canvas size (a resize or a new pixel
    ratio draws new ones), so coming back to a sentence is a blit. While the
    kernel is idle after the figure is shown, the backgrounds of the other
    sentences are drawn too, one every `PREFETCH_MS` (`_show_words` sets one
    sentence's static artists alone): a first visit is a blit as well. For 02's
    map a new background was about 35 ms of a 54 ms move on the course machine,
    the one control over its latency target; kept, the move costs what a layer
    move does.
    """

    PREFETCH_MS = 100

    def _show_words(self, sentence: str) -> None:
        """Set the static artists to ``sentence``'s."""
        raise NotImplementedError

    def _background_key(self, sentence: str | None = None) -> tuple[Any, ...]:
        """What a kept background is good for: a sentence (default: the one shown) on a
        canvas of this size and resolution."""
        fig = self.fig  # type: ignore[attr-defined]
        size = tuple(round(x) for x in fig.bbox.size)
        return (self.sentence.value if sentence is None else sentence, size, fig.dpi)

    def _kept(self) -> dict[tuple[Any, ...], Any]:
        return self.__dict__.setdefault("_backgrounds", {})

    def _draw_background(self) -> None:
        """The shown sentence's background: the kept one, or drawn now and kept."""
        kept, key = self._kept(), self._background_key()
        if key in kept:
            self._background = kept[key]
            self.fig.canvas.restore_region(self._background)  # type: ignore[attr-defined]
            return
        for old in [k for k in kept if k[1:] != key[1:]]:  # another size: never used again
            del kept[old]
        super()._draw_background()  # type: ignore[misc]
        kept[key] = self._background

    def _prepare_background_soon(self) -> None:
        super()._prepare_background_soon()  # type: ignore[misc]
        # one prefetch at a time, for the latest size, until none is missing
        self._start_timer("prefetch", self.PREFETCH_MS, self._prefetch_one)  # type: ignore[attr-defined]

    def _prefetch_one(self) -> bool:
        with DRAWING:
            return self._prefetch_locked()

    def _prefetch_locked(self) -> bool:
        """Draw and keep one more sentence's background; False, and the timer stops, when
        none is missing. The canvas's pixels are not sent: the next move first restores the
        shown sentence's background, as every move does."""
        kept = self._kept()
        missing = [s for s in self.sentence.options if self._background_key(s) not in kept]
        if not missing:
            return False  # the timer stops
        shown, current = self.sentence.value, self._background  # type: ignore[has-type]
        self._show_words(missing[0])
        try:
            super()._draw_background()  # type: ignore[misc]  # drawn, not sent
            kept[self._background_key(missing[0])] = self._background
        finally:
            self._show_words(shown)
            self._background = current
        return True


class WhereItLooksExplorer(_KeepsBackgrounds, Explorer):
    """Where the pronoun looks in the trained model, with a volume knob.

    Controls: ``sentence`` (a dropdown of the held-out showcase sentences),
    ``head`` ("pointer": the head that best finds what a pronoun stands for,
    or "average": every head averaged) and ``volume`` (multiplies every
    head's scores, 0.05 to 20; 1 is the model as trained). After each update
    ``gaze`` holds the `attention_course.model.views.Gaze` drawn and ``shares``
    the bars' heights. A new sentence changes the words under the bars, in the
    background (kept per sentence, `_KeepsBackgrounds`); the other controls move
    only bars, arcs and text.
    """

    def __init__(self, model: str = "sqrt_d16", sentences: Sequence[str] | None = None) -> None:
        from ..model.views import showcase, where_it_looks  # torch

        self._where = where_it_looks
        self.model_name = model
        options = list(sentences) if sentences is not None else showcase("pronoun")
        self._gaze = lru_cache(maxsize=256)(
            lambda sentence, volume: where_it_looks(sentence, model, volume)
        )
        first = [self._gaze(s, 1.0) for s in options]
        self.slots = max(len(g.words) for g in first)
        layer, head = first[0].pointer_head
        heads = first[0].weights.shape[0] * first[0].weights.shape[1]

        fig = self._make_figure(figsize=(8, 4.5), layout="constrained")
        self.ax, self.ax_words = fig.subplots(2, 1, height_ratios=(2.1, 1.5), sharex=True)
        ax = self.ax
        x = np.arange(self.slots)  # (slots,)
        self.bars = ax.bar(x, np.zeros(self.slots), color=_BAR, width=0.7)
        self.top_label = ax.text(0, 0, "", ha="center", va="bottom", fontsize=9)
        ax.set_xlim(-0.6, self.slots - 0.4)
        ax.set_ylim(0, 1.15)
        ax.set_ylabel("share of attention")
        ax.tick_params(axis="x", bottom=False, labelbottom=False)
        ax.spines[["top", "right"]].set_visible(False)

        words_ax = self.ax_words
        words_ax.set_ylim(0, 1)
        words_ax.axis("off")
        for spine in words_ax.spines.values():  # a blitted frame draws visible spines itself
            spine.set_visible(False)
        self.words = [words_ax.text(i, 0.88, "", ha="center", va="center", fontsize=11) for i in x]
        self.arcs = []
        for _ in range(self.slots - 1):
            arc = FancyArrowPatch(
                (0, 0.72),
                (0, 0.72),
                arrowstyle="-|>",
                mutation_scale=10,
                color=_QUERY,
                shrinkA=0,  # no shrinking: clipping the curve to a margin costs a frame ~40%
                shrinkB=0,
            )
            words_ax.add_patch(arc)
            self.arcs.append(arc)
        self.guess_text = words_ax.text(
            0.0, 0.02, "", transform=words_ax.transAxes, ha="left", va="bottom", fontsize=10
        )
        fig.suptitle(
            "Where does the pronoun look? A small model trained here, on a sentence it never saw",
            fontsize=11,
        )

        self.sentence = fit_label(
            widgets.Dropdown(
                options=options,
                value=options[0],
                description="sentence",
                layout={"width": "470px"},
            )
        )
        self.head = fit_label(
            widgets.ToggleButtons(
                options=[
                    (f"the pronoun-finding head (layer {layer + 1}, head {head + 1})", "pointer"),
                    (f"all {heads} heads averaged", "average"),
                ],
                value="pointer",
                style={"button_width": "auto"},
                layout={"width": "auto"},
            )
        )
        self.volume = fit_slider(
            widgets.FloatLogSlider(
                value=1.0,
                base=10,
                min=-1.3,
                max=1.3,
                step=0.05,
                description="volume (1 = as trained)",
                readout_format=".2f",
            ),
            track_px=240,
        )
        self._watch(self.sentence, self.head, self.volume)
        self.live = [*self.bars, self.top_label, *self.arcs, self.guess_text, ax.title]
        self.update()

    @property
    def widget(self) -> ExplorerBox:
        """The explorer's box (`ExplorerBox`: a still picture when the kernel is gone), with
        its controls one to a row: sentence, head, volume (each row fits the 577 px cell
        of a 1024 px screen with the file browser open)."""
        if self._box is None:
            box = super().widget
            rows = widgets.VBox([widgets.HBox([control]) for control in self.controls])
            rows.add_class("al-controls")  # hidden, as one row is, when the kernel is gone
            box.children = (rows, *box.children[1:])
        return self._box

    def _show_words(self, sentence: str) -> None:
        """The sentence's words under the bars, the pronoun in bold red: all a sentence
        changes in the background."""
        words = self._gaze(sentence, 1.0).words  # the same words at every volume
        n = len(words)
        for i, word in enumerate(self.words):
            word.set_text(words[i] if i < n else "")
            is_query = i == n - 1
            word.set_color(_QUERY if is_query else "black")
            word.set_fontweight("bold" if is_query else "normal")

    def update(self) -> None:
        self.gaze = gaze = self._gaze(self.sentence.value, round(float(self.volume.value), 6))
        self.shares = shares = gaze.shares(self.head.value)  # (n,)
        n = len(gaze.words)
        top = int(np.argmax(shares))
        self._show_words(self.sentence.value)
        for i, bar in enumerate(self.bars):
            bar.set_height(float(shares[i]) if i < n else 0.0)
            bar.set_color(_TOP if i == top else _BAR)
        biggest = float(shares[: n - 1].max()) if n > 1 else 1.0
        for j, arc in enumerate(self.arcs):
            if j >= n - 1:
                arc.set_visible(False)
                continue
            share = float(shares[j])
            distance = n - 1 - j
            arc.set_visible(True)
            arc.set_positions((n - 1, 0.72), (j, 0.72))
            arc.set_connectionstyle(f"arc3,rad={-0.8 / np.sqrt(distance):.3f}")  # bends down
            arc.set_linewidth(0.5 + 6 * share)
            arc.set_alpha(0.15 + 0.85 * share / biggest if biggest > 0 else 0.15)
        word, share = gaze.words[top], float(shares[top])
        self.top_label.set_position((top, share + 0.01))
        self.top_label.set_text(_percent(share))
        self.ax.set_title(
            f'"{gaze.query_word}" looks most at "{word}" ({_percent(share)}); '
            f"{volume_words(share, n)}",
            fontsize=10,
        )
        verdict = (
            "right" if gaze.guess == gaze.answer else f"wrong: the sentence says {gaze.answer}"
        )
        self.guess_text.set_text(
            f"volume ×{gaze.volume:.2f}: the model's guess for the next word is "
            f'"{gaze.guess}" ({verdict})'
        )

    def describe(self) -> str:
        """What the figure says, in one line: its title (where the pronoun looks, and how
        much) and its verdict on the model's guess at this volume."""
        return f"{self.ax.get_title()}; {self.guess_text.get_text()}"


class HeadMapsExplorer(_KeepsBackgrounds, Explorer):
    """One head's attention map over a sentence: queries down, keys across.

    Controls: ``sentence``, ``model`` (the trained scale rules), ``layer``
    and ``head``. Layers and heads are labelled from 1, as every notebook
    counts them; their values are the 0-based indices into the weights
    (``maps.weights[layer, head]``). Cells above the diagonal are hatched grey: the causal mask
    keeps a word from looking at later words, so their weight is exactly 0.
    After each update ``maps`` holds the `attention_course.model.views.HeadMaps` drawn. A new
    sentence changes the words on both axes, whose background is kept per sentence and
    drawn ahead while the kernel is idle (`_KeepsBackgrounds`); every move
    redraws only the map, its highlighted row and its title.
    """

    def __init__(self, sentences: Sequence[str] | None = None) -> None:
        from ..model.views import attention_maps, pointer_head  # torch

        self._maps = lru_cache(maxsize=64)(attention_maps)
        options = list(sentences) if sentences is not None else list(SHOWCASE)
        first = self._maps(options[0], "sqrt_d16")
        layers, heads = first.weights.shape[:2]
        self.slots = max(len(self._maps(s, "sqrt_d16").words) for s in options)
        t = self.slots

        # Fixed margins, not a layout engine: the word labels change with the sentence,
        # and the room for the longest word is kept from the start.
        # 510 px tall: with its two rows of controls and its text alternative, 640 in all
        fig = self._make_figure(figsize=(8, 5.1))
        self.ax = ax = fig.add_axes((0.12, 0.2, 0.56, 0.72))
        colour_bar = fig.add_axes((0.7, 0.25, 0.025, 0.62))
        # masked cells transparent: the hatching under them shows in a blitted frame too
        cmap = colormaps["viridis"].with_extremes(bad=(0, 0, 0, 0))
        self.image = ax.imshow(
            np.zeros((t, t)), cmap=cmap, vmin=0, vmax=1, interpolation="nearest", zorder=1.5
        )  # above the hatching (1), as a blitted frame draws it
        # the masked cells, above the diagonal: grey and hatched, never a colour of the scale;
        # one staircase-shaped patch (a hatched patch per cell doubled a full redraw's time)
        self.masked = ax.add_patch(
            Polygon(
                masked_staircase(t),
                facecolor=MASKED_COLOUR,
                hatch="///",
                edgecolor=HATCH_COLOUR,
                lw=0,
            )
        )
        self.highlight = ax.add_patch(
            Rectangle((-0.5, -0.5), t, 1, fill=False, edgecolor=_QUERY, lw=2, zorder=2.6)
        )
        fig.colorbar(self.image, cax=colour_bar, label="attention weight (each row sums to 1)")
        ax.legend(
            handles=[
                Patch(
                    facecolor=MASKED_COLOUR,
                    hatch="///",
                    edgecolor=HATCH_COLOUR,
                    label="masked (later word)",
                ),
                Patch(fill=False, edgecolor=_QUERY, lw=2, label="the scored word's row"),
            ],
            loc="upper right",
            fontsize=8,
            framealpha=0.95,
        )
        ax.set_xlabel("key: the word looked at")
        ax.set_ylabel("query: the word looking")

        self.sentence = widgets.Dropdown(
            options=options, value=options[0], description="sentence", layout={"width": "470px"}
        )
        self.model = widgets.Dropdown(
            options=[(label, name) for name, label in MODEL_LABELS.items()],
            value="sqrt_d16",
            description="scale rule",
            layout={"width": "300px"},
        )
        start_layer, start_head = pointer_head("sqrt_d16")  # open on the pronoun's head
        self.layer = widgets.ToggleButtons(
            options=[(str(i + 1), i) for i in range(layers)],
            value=start_layer,
            description="layer",
            style={"button_width": "36px"},
        )
        self.head = widgets.ToggleButtons(
            options=[(str(i + 1), i) for i in range(heads)],
            value=start_head,
            description="head",
            style={"button_width": "36px"},
        )
        self._watch(self.sentence, self.model, self.layer, self.head)
        # the words, limits and hatching change only with the sentence (a full redraw)
        self.live = [self.image, self.highlight, ax.title]
        self.update()

    @property
    def widget(self) -> ExplorerBox:
        """Two rows of controls above the figure, in the explorer's box (which keeps the
        still picture for a page that cannot run it); each row wraps in a narrow cell."""
        split = self._box is not None
        box = super().widget
        if not split:  # the box is new: its one row of controls becomes two
            rows = [
                widgets.HBox([self.sentence, self.model]),
                widgets.HBox([self.layer, self.head]),
            ]
            for row in rows:
                row.add_class("al-controls")
            box.children = [*rows, *box.children[1:]]
        return box

    def _show_words(self, sentence: str) -> None:
        """The sentence's words on both axes, and the map's limits: all a sentence changes in
        the background (the words of any model are the same)."""
        words = self._maps(sentence, "sqrt_d16").words
        n = len(words)
        ax = self.ax
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_xticks(range(n), words, rotation=90)
        ax.set_yticks(range(n), words)

    def update(self) -> None:
        self.maps = maps = self._maps(self.sentence.value, self.model.value)
        n = len(maps.words)
        t = self.slots
        grid = np.full((t, t), np.nan)  # (t, t); cells beyond the sentence stay blank
        grid[:n, :n] = maps.weights[self.layer.value, self.head.value]
        grid[np.triu_indices(t, k=1)] = np.nan  # drawn by the hatch instead
        self.image.set_data(np.ma.masked_invalid(grid))
        self._show_words(self.sentence.value)
        ax = self.ax
        self.highlight.set_xy((-0.5, maps.query - 0.5))
        self.highlight.set_width(maps.query + 1)
        row = maps.weights[self.layer.value, self.head.value, maps.query]  # (n,)
        j = int(np.argmax(row))
        ax.set_title(
            f"layer {self.layer.value + 1}, head {self.head.value + 1}: "
            f'"{maps.words[maps.query]}" puts {row[j]:.0%} on "{maps.words[j]}"',
            fontsize=10,
        )

    def describe(self) -> str:
        return self.ax.get_title()
