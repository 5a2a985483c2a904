"""The beginner explorers: a crowded room where friends compete for your attention.

Four slider apps for notebook 01, each an `Explorer` (figure once, artists
updated when a control moves), on the lesson's data and arithmetic
(`attention_course.lessons.crowded_room`, `attention_lib.scales.turn_volume`):

- `VolumeKnobExplorer`: five friends with fixed relevance and the room's
  volume (a multiplier on their scores); turned down, everyone gets the same
  share, turned up, one voice takes everything.
- `ThreeStepsExplorer`: score, turn down, share out and mix for the word
  "it", with the lesson's numbers (`attention_course.lessons.crowded_room.three_steps`).
- `SlotsExplorer`: more slots per head make the raw totals spread out and the
  shares collapse onto one winner, until the fixed division brings them back.
- `NudgeExplorer`: nudge one score and see how much the shares move in a calm
  room and in a loud (saturated) one.

`share_prediction` asks for the share "it" gives "dog" before any of the
three steps' numbers are shown, and shows them (the still picture
`attention_course.lessons.figures.sharing_picture` and the table of
`format_three_steps`) only once the guess is locked in.

The arithmetic is the lessons' and the library's (`turn_volume`,
`three_steps`, `changed_hands`, `learning_signal`, `softmax`,
`attention_weights`); this module only chooses the inputs and draws.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np

from attention_lib.core import attention_weights
from attention_lib.normalisers import softmax
from attention_lib.scales import turn_volume

from ..lessons.crowded_room import (
    FRIENDS,
    LESSON_HEAD_SLOTS,
    RELEVANCE,
    changed_hands,
    check_room,
    format_three_steps,
    learning_signal,
    nudge_headline,
    percent,
    sharing_headline,
    three_steps,
)
from ..lessons.figures import sharing_picture
from ..lessons.figures.still import figure_png as png_bytes
from ..lessons.figures.style import WORD_COLOURS
from .base import DRAWING, Explorer
from .controls import fit_label, fit_slider
from .reveal import Prediction, answer_picture, predict_number

__all__ = [
    "WITHHELD",
    "NudgeExplorer",
    "SlotsExplorer",
    "ThreeStepsExplorer",
    "VolumeKnobExplorer",
    "share_prediction",
]


#: What steps 3 and 4 of the three steps show until the guess of the share is locked in.
WITHHELD = "lock in your guess above\nto see this step"

_SLOT_CHOICES = tuple(2**i for i in range(9))  # 1, 2, 4, ..., 256


class VolumeKnobExplorer(Explorer):
    """Five friends with fixed relevance and one slider: the room's volume.

    The shares are ``turn_volume(relevance, volume)``; the bars always add up
    to one. Attributes after each update: ``shares`` (n,) and ``bars``.
    """

    def __init__(self, relevance: np.ndarray = RELEVANCE, names: Sequence[str] = FRIENDS) -> None:
        self.relevance = check_room(relevance, names)
        self.names = tuple(names)
        n = len(self.names)
        fig = self._make_figure(figsize=(8.4, 4.2), layout="constrained")
        self.ax = ax = fig.add_subplot()
        labels = [
            f"{name}\n(relevance {r:+.1f})"
            for name, r in zip(self.names, self.relevance, strict=True)
        ]
        colours = [WORD_COLOURS[i % len(WORD_COLOURS)] for i in range(n)]
        self.bars = ax.bar(labels, np.full(n, 1 / n), color=colours)
        self.labels = [ax.text(i, 0, "", ha="center", va="bottom") for i in range(n)]
        self.equal_line = ax.axhline(
            1 / n, color="grey", ls="--", lw=1, label=f"equal share (1/{n})"
        )
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("share of your attention")
        ax.set_xlabel("friend (how relevant what they say is to you)")
        ax.legend(loc="upper right")
        fig.suptitle("Volume down: everyone gets the same share. Up: one voice takes it all.")

        self.volume = fit_slider(
            widgets.FloatLogSlider(
                value=1.0,
                base=10,
                min=-2,
                max=2,
                step=0.05,
                description="room volume",
                readout_format=".2f",
            ),
            track_px=300,
        )
        self._watch(self.volume)
        self.live = [*self.bars, self.equal_line, *self.labels, ax.title]
        self.update()

    def update(self) -> None:
        self.shares = turn_volume(self.relevance, self.volume.value)  # (n,)
        for bar, label, share in zip(self.bars, self.labels, self.shares, strict=True):
            bar.set_height(share)
            label.set_position((bar.get_x() + bar.get_width() / 2, share + 0.01))
            label.set_text(percent(share))
        top = int(np.argmax(self.shares))
        self.ax.set_title(
            f"volume ×{self.volume.value:.2f}: {self.names[top]} gets "
            f"{percent(self.shares[top])} of your attention"
        )

    def describe(self) -> str:
        """Each friend's share, as the bars are labelled, and the volume."""
        shares = ", ".join(
            f"{name} {percent(share)}" for name, share in zip(self.names, self.shares, strict=True)
        )
        return f"Share of your attention: {shares}; volume ×{self.volume.value:.2f}"


class ThreeStepsExplorer(Explorer):
    """The three steps for "it" with the lesson's numbers, and a switch for step two.

    Four panels: the raw scores, the scores turned down (divided by sqrt(8)),
    the shares, and the mixed result next to "it" on its own. The checkbox
    ``turn_down`` switches the division off to show what the shares become
    without it. ``steps`` holds the current `attention_course.lessons.crowded_room.ThreeSteps`.

    ``after``: the page's guess of the share (`share_prediction`). Until it is
    locked in, steps 3 and 4 are withheld (no bar, no number: a note asks for
    the guess first), since the share is the guess's answer; ``withheld``
    says whether they are.
    """

    def __init__(self, after: Prediction | None = None) -> None:
        fig = self._make_figure(figsize=(8.4, 5.4), layout="constrained")
        axes = fig.subplots(2, 2)
        self.axes = axes
        self.steps = three_steps()
        words = list(self.steps.words)
        grey = "#7f7f7f"
        colours = [WORD_COLOURS[1] if w == "dog" else grey for w in words]

        ax = axes[0, 0]
        ax.set_ylim(0, 4.8)
        self.score_bars = ax.bar(words, self.steps.scores, color=colours)
        self._label_bars(ax, self.score_bars, self.steps.scores, 1)
        ax.set_title('1. score: how well "it" matches each word')
        ax.set_ylabel("raw score")
        ax.set_xlabel("word in the sentence")

        ax = axes[0, 1]
        ax.set_ylim(0, 4.8)
        self.down_bars = ax.bar(words, self.steps.turned_down, color=colours)
        self.down_labels = self._label_bars(ax, self.down_bars, self.steps.turned_down, 1)
        ax.set_ylabel("score after turning down")
        ax.set_xlabel("word in the sentence")

        ax = axes[1, 0]
        ax.set_ylim(0, 1.12)
        self.share_bars = ax.bar(words, self.steps.shares, color=colours)
        self.share_labels = self._label_bars(ax, self.share_bars, self.steps.shares, 2)
        ax.set_ylabel("share of attention")
        ax.set_xlabel("word in the sentence")

        ax = axes[1, 1]
        x = np.arange(len(self.steps.features))  # (F,)
        width = 0.27
        it_alone = self.steps.values[words.index("it")]  # (F,)
        dog = self.steps.values[words.index("dog")]  # (F,)
        ax.bar(x - width, it_alone, width, color=grey, hatch="..", label='"it" on its own')
        self.mix_bars = ax.bar(
            x, self.steps.mixed, width, color=WORD_COLOURS[0], label='"it" after mixing'
        )
        ax.bar(
            x + width,
            dog,
            width,
            color=WORD_COLOURS[1],
            alpha=0.45,
            hatch="//",  # told from the others by more than colour
            label='"dog", for comparison',
        )
        ax.set_xticks(x, self.steps.features)
        ax.set_ylim(0, 1.7)  # every amount is at most 1: the legend sits above the bars
        ax.set_ylabel("amount of each feature")
        ax.set_xlabel("made-up features, for illustration")
        ax.legend(loc="upper right", fontsize="small", ncols=1)
        fig.suptitle('The three steps for the word "it" ("the dog barked ... it")')

        self.turn_down = fit_label(
            widgets.Checkbox(
                value=True,
                description="turn the volume down (step 2)",
                indent=False,
                layout={"width": "auto"},
            )
        )
        self._watch(self.turn_down)
        self.waiting = [
            ax.text(0.5, 0.5, WITHHELD, transform=ax.transAxes, ha="center", va="center")
            for ax in (axes[1, 0], axes[1, 1])
        ]
        self.withheld = after is not None and not after.locked
        self.live = [
            *self.down_bars,
            *self.down_labels,
            *self.share_bars,
            *self.share_labels,
            *self.mix_bars,
            *self.waiting,
            axes[0, 1].title,
            axes[1, 0].title,
            axes[1, 1].title,
        ]
        self.update()
        if after is not None:
            after.when_locked(self._show_answer)

    def _show_answer(self) -> None:
        with DRAWING:
            self.withheld = False
            self.update()
            self.refresh()

    def nearest_word(self) -> str:
        """The word whose values the mixed "it" is closest to (Euclidean distance)."""
        steps = self.steps
        distances = np.linalg.norm(steps.values - steps.mixed, axis=-1)  # (words,)
        return steps.words[int(np.argmin(distances))]

    @staticmethod
    def _label_bars(ax, bars, heights: np.ndarray, decimals: int) -> list:
        return [
            ax.text(
                bar.get_x() + bar.get_width() / 2,
                h + 0.01 * ax.get_ylim()[1],
                f"{h:.{decimals}f}",
                ha="center",
                va="bottom",
            )
            for bar, h in zip(bars, heights, strict=True)
        ]

    def update(self) -> None:
        self.steps = steps = three_steps(turn_down=self.turn_down.value)
        for bars, labels, heights, decimals in (
            (self.down_bars, self.down_labels, steps.turned_down, 1),
            (self.share_bars, self.share_labels, steps.shares, 2),
        ):
            top = bars[0].axes.get_ylim()[1]
            for bar, label, h in zip(bars, labels, heights, strict=True):
                bar.set_height(h)
                label.set_text(f"{h:.{decimals}f}")
                label.set_y(h + 0.01 * top)
        for bar, h in zip(self.mix_bars, steps.mixed, strict=True):
            bar.set_height(h)
        for artist in (*self.share_bars, *self.share_labels, *self.mix_bars):
            artist.set_visible(not self.withheld)
        for note in self.waiting:
            note.set_visible(self.withheld)
        if self.turn_down.value:
            self.axes[0, 1].set_title(f"2. turn down: every score ÷ {steps.divisor:.2f}")
        else:
            self.axes[0, 1].set_title("2. turn down: off, scores unchanged")
        if self.withheld:
            self.axes[1, 0].set_title("3. share out")
            self.axes[1, 1].set_title('4. mix: the new "it"')
            return
        self.axes[1, 0].set_title(
            f"3. share out: adds up to {steps.shares.sum():.2f}, "
            f'"dog" gets {steps.shares[list(steps.words).index("dog")]:.0%}'
        )
        self.axes[1, 1].set_title(f'4. mix: the new "it" is closest to "{self.nearest_word()}"')

    def describe(self) -> str:
        """Each step's numbers, as the bars are labelled; steps 3 and 4 only once shown."""
        steps = self.steps

        def row(values: np.ndarray, decimals: int) -> str:
            return ", ".join(
                f"{word} {value:.{decimals}f}"
                for word, value in zip(steps.words, values, strict=True)
            )

        turned = f"every score ÷ {steps.divisor:.2f}" if self.turn_down.value else "off, unchanged"
        said = [
            'The three steps for "it". 1, scores: ' + row(steps.scores, 1),
            f"2, turned down ({turned}): {row(steps.turned_down, 1)}",
        ]
        if self.withheld:
            said.append("3 and 4 wait for your guess above")
        else:
            said.append(f"3, shares: {row(steps.shares, 2)}")
            said.append(f'4, the new "it" is closest to "{self.nearest_word()}"')
        return "; ".join(said)


class SlotsExplorer(Explorer):
    """Why the knob is needed: the number of slots per head, and the fixed division.

    Random (seeded) queries and keys of width ``slots``: the left panel is the
    histogram of the raw totals q·k for ``pairs`` query–key pairs, the right
    panel the average share of the loudest, second loudest ... of ``keys``
    voices over ``trials`` rooms. ``slots`` is a slider (1 to 256, powers of
    two); ``divide`` applies the fixed division by sqrt(slots). Attributes
    after each update: ``spread`` (standard deviation of the totals shown) and
    ``ranked_shares`` (keys,), biggest first.

    The draws (20 MB at the default sizes) are not kept: what each slider
    position shows, the raw totals and the ranked shares with and without the
    division, is computed once here (``totals``, ``mean_ranked``: 0.15 MB) and the
    draws dropped, as every learner's kernel would otherwise hold them.
    """

    BIN_EDGES = np.arange(-64.0, 64.1, 2.0)  # (65,), totals beyond ±64 counted in the end bins

    def __init__(
        self, seed: int = 0, pairs: int = 2000, trials: int = 1000, keys: int = len(FRIENDS)
    ) -> None:
        if pairs < 2 or trials < 1 or keys < 2:
            raise ValueError(
                f"need pairs >= 2, trials >= 1, keys >= 2; got {pairs}, {trials}, {keys}"
            )
        rng = np.random.default_rng(seed)
        widest = _SLOT_CHOICES[-1]
        # One draw at the widest head; a head with d slots uses the first d of them,
        # so moving the slider adds slots to the same queries and keys.
        q_pairs = rng.normal(size=(pairs, widest))  # (N, 256)
        k_pairs = rng.normal(size=(pairs, widest))  # (N, 256)
        q_rooms = rng.normal(size=(trials, 1, widest))  # (T, 1, 256)
        k_rooms = rng.normal(size=(trials, keys, widest))  # (T, keys, 256)
        #: d -> the raw totals q·k of the first d slots of each pair, (N,)
        self.totals = {d: np.sum(q_pairs[:, :d] * k_pairs[:, :d], axis=-1) for d in _SLOT_CHOICES}
        #: (d, divided) -> the average share of the loudest, second loudest ... voice, (keys,)
        self.mean_ranked = {}
        for d, divided in itertools.product(_SLOT_CHOICES, (False, True)):
            q, k = q_rooms[..., :d], k_rooms[..., :d]  # (T, 1, d), (T, keys, d)
            weights = attention_weights(q, k, scale=1.0 / (math.sqrt(d) if divided else 1.0))
            ranked = -np.sort(-weights[:, 0, :], axis=-1)  # (T, keys), biggest first
            self.mean_ranked[d, divided] = ranked.mean(axis=0)  # (keys,)
        self.trials = trials
        self.keys = keys

        fig = self._make_figure(figsize=(8.4, 3.9), layout="constrained")
        self.ax_hist, self.ax_share = fig.subplots(1, 2, width_ratios=(1.25, 1))
        ax = self.ax_hist
        centres = (self.BIN_EDGES[:-1] + self.BIN_EDGES[1:]) / 2  # (64,)
        self.hist_bars = ax.bar(centres, np.zeros_like(centres), width=2.0, color=WORD_COLOURS[0])
        self.spread_lines = [ax.axvline(0, color="black", ls="--", lw=1) for _ in range(2)]
        self.spread_lines[0].set_label("typical size")  # update() says how many lie inside
        ax.set_xlim(self.BIN_EDGES[0], self.BIN_EDGES[-1])
        ax.set_ylim(0, 0.6)
        ax.set_xlabel("total for one query–key pair")
        ax.set_ylabel(f"fraction of {pairs} pairs")
        ax.legend(loc="upper right", fontsize="small")

        ax = self.ax_share
        ranks = [["loudest", "2nd", "3rd"][i] if i < 3 else f"{i + 1}th" for i in range(keys)]
        self.share_bars = ax.bar(ranks, np.full(keys, 1 / keys), color=WORD_COLOURS[1])
        self.top_label = ax.text(0, 0, "", ha="center", va="bottom")
        self.equal_line = ax.axhline(
            1 / keys, color="grey", ls="--", lw=1, label=f"equal share (1/{keys})"
        )
        ax.set_ylim(0, 1.1)
        ax.set_xlabel(f"voices in a room of {keys}, loudest first")
        ax.set_ylabel(f"average share over {trials} rooms")
        ax.legend(loc="upper right", fontsize="small")

        self.slots = fit_slider(
            widgets.SelectionSlider(
                options=list(_SLOT_CHOICES),
                value=LESSON_HEAD_SLOTS,
                description="slots in each list",
            )
        )
        self.divide = fit_label(
            widgets.Checkbox(
                value=False,
                description="apply the fixed division (turn the volume down)",
                indent=False,
                layout={"width": "auto"},
            )
        )
        self._watch(self.slots, self.divide)
        self.live = [
            *self.hist_bars,
            *self.spread_lines,
            self.ax_hist.get_legend(),  # the spread lines cross it
            self.ax_hist.title,
            *self.share_bars,
            self.equal_line,
            self.top_label,
            self.ax_share.title,
        ]
        self.update()

    def update(self) -> None:
        d = int(self.slots.value)
        divisor = math.sqrt(d) if self.divide.value else 1.0
        totals = self.totals[d] / divisor  # (N,)
        self.spread = float(totals.std())
        self.inside = float(np.mean(np.abs(totals) <= self.spread))  # share between the lines
        clipped = np.clip(totals, self.BIN_EDGES[0] + 1e-9, self.BIN_EDGES[-1] - 1e-9)  # (N,)
        counts, _ = np.histogram(clipped, bins=self.BIN_EDGES)  # (64,)
        for bar, fraction in zip(self.hist_bars, counts / totals.size, strict=True):
            bar.set_height(fraction)
        for line, x in zip(self.spread_lines, (-self.spread, self.spread), strict=True):
            line.set_xdata([x, x])
        self.ax_hist.get_legend().get_texts()[0].set_text(
            f"typical size: {self.inside:.0%} of totals lie between"
        )

        self.ranked_shares = self.mean_ranked[d, bool(self.divide.value)]  # (keys,)
        for bar, share in zip(self.share_bars, self.ranked_shares, strict=True):
            bar.set_height(share)
        top = float(self.ranked_shares[0])
        self.top_label.set_position((0, top + 0.01))
        self.top_label.set_text(f"{top:.0%}")

        how = f"divided by {divisor:.1f}" if self.divide.value else "raw, not divided"
        slots = "1 slot" if d == 1 else f"{d} slots"
        self.ax_hist.set_title(f"{slots}, {how}: typical size {self.spread:.1f}")
        self.ax_share.set_title(f"the loudest gets {top:.0%} on average")

    def describe(self) -> str:
        """The histogram's spread and the loudest voice's share, as the titles say them."""
        d = int(self.slots.value)
        how = f"divided by {math.sqrt(d):.1f}" if self.divide.value else "raw, not divided"
        slots = "1 slot" if d == 1 else f"{d} slots"
        pairs = self.totals[d].size
        return (
            f"Totals of {pairs} query–key pairs with {slots}, {how}: typical size "
            f"{self.spread:.1f}, {self.inside:.0%} of totals within it; the loudest of "
            f"{self.keys} voices gets {float(self.ranked_shares[0]):.0%} on average"
        )


class NudgeExplorer(Explorer):
    """Why winner-takes-all stops learning: nudge one score, compare two rooms.

    The calm room is ``relevance`` at volume 1, the loud room the same friends
    at volume ``loud`` (its shares are nearly all-or-nothing). A dropdown picks
    whose score to nudge and a slider sets the nudge. Attributes after each
    update: ``moved`` = {"calm": ..., "loud": ...}, the attention that changed
    hands (`changed_hands`), and ``signal``, the `learning_signal` of each room.
    """

    def __init__(
        self,
        relevance: np.ndarray = RELEVANCE,
        names: Sequence[str] = FRIENDS,
        loud: float = 10.0,
    ) -> None:
        self.relevance = check_room(relevance, names)
        if not (math.isfinite(loud) and loud > 1):
            raise ValueError(f"the loud room's volume must be a finite number > 1, got {loud}")
        self.names = tuple(names)
        self.loud = loud
        self.rooms = {"calm": self.relevance, "loud": loud * self.relevance}  # (n,) each
        self.before = {room: softmax(scores) for room, scores in self.rooms.items()}
        n = len(self.names)

        fig = self._make_figure(figsize=(8.4, 4.0), layout="constrained")
        axes = fig.subplots(1, 3, width_ratios=(1, 1, 0.8))
        self.room_axes = dict(zip(self.rooms, axes[:2], strict=True))
        self.after_bars = {}
        x = np.arange(n)
        titles = {"calm": "calm room (volume ×1)", "loud": f"loud room (volume ×{loud:g})"}
        for room, ax in self.room_axes.items():
            ax.bar(
                x, self.before[room], 0.8, fill=False, edgecolor="black", ls="--", label="before"
            )
            self.after_bars[room] = ax.bar(
                x, self.before[room], 0.5, color=WORD_COLOURS[0], label="after the nudge"
            )
            ax.set_xticks(x, self.names)
            ax.set_ylim(0, 1.15)
            ax.set_ylabel("share of attention")
            ax.set_xlabel("friend")
            ax.set_title(titles[room])
            ax.legend(loc="upper right", fontsize="small")
        self.ax_moved = ax = axes[2]
        self.moved_bars = ax.bar(list(self.rooms), [0, 0], color=[WORD_COLOURS[2], WORD_COLOURS[3]])
        self.moved_labels = [ax.text(i, 0, "", ha="center", va="bottom") for i in range(2)]
        ax.set_ylim(0, 0.5)
        ax.set_ylabel("attention that changed hands")
        ax.set_xlabel("room")
        ax.set_title("how much moved")
        self.headline = fig.suptitle("", fontsize=11)

        self.who = fit_label(
            widgets.Dropdown(
                options=list(self.names),
                value=self.names[1],
                description="nudge the score of",
                layout={"width": "240px"},
            )
        )
        self.nudge = fit_slider(
            widgets.FloatSlider(
                value=0.5, min=-1.0, max=1.0, step=0.05, description="by", readout_format="+.2f"
            ),
            track_px=240,
        )
        self._watch(self.who, self.nudge)
        self.live = [
            *self.after_bars["calm"],
            *self.after_bars["loud"],
            *self.moved_bars,
            *self.moved_labels,
            self.ax_moved.title,
            self.headline,
        ]
        self.update()

    def update(self) -> None:
        i = self.names.index(self.who.value)
        self.after = {}
        self.moved = {}
        self.signal = {}
        for room, scores in self.rooms.items():
            nudged = scores.copy()  # (n,)
            nudged[i] += self.nudge.value
            self.after[room] = after = softmax(nudged)  # (n,)
            self.moved[room] = changed_hands(self.before[room], after)
            self.signal[room] = learning_signal(after)
            for bar, share in zip(self.after_bars[room], after, strict=True):
                bar.set_height(share)
        for bar, label, room in zip(self.moved_bars, self.moved_labels, self.rooms, strict=True):
            bar.set_height(self.moved[room])
            label.set_position((bar.get_x() + bar.get_width() / 2, self.moved[room] + 0.01))
            label.set_text(percent(self.moved[room]))
        self.ax_moved.set_title(
            f"nudge {self.who.value} by {self.nudge.value:+.2f}:\nhow much moved"
        )
        self.headline.set_text(nudge_headline(self.moved["calm"], self.moved["loud"]))

    def describe(self) -> str:
        """The nudge and the attention that changed hands in each room, as the bars say."""
        return (
            f"Nudge {self.who.value}'s score by {self.nudge.value:+.2f}: "
            f"{percent(self.moved['calm'])} of the calm room's attention changed hands, "
            f"{percent(self.moved['loud'])} of the loud room's (volume ×{self.loud:g})"
        )


def share_prediction(word: str = "dog") -> Prediction:
    """Notebook 01's first guess: how big a share of its attention does "it" give ``word``?

    The lesson's three steps for "it" (`three_steps`). The learner sets a
    slider in percent (steps of 5, "close" within 10) and locks it in; only
    then are the share, a sentence on it, the `sharing_picture` and the
    three steps' numbers (`format_three_steps`) shown. Raises ValueError for
    a word not in the lesson's sentence.
    """
    steps = three_steps()
    if word not in steps.words:
        raise ValueError(f"{word!r} is not one of the lesson's words {steps.words}")
    query = steps.words[-1]
    share = float(steps.shares[steps.words.index(word)])
    shares = ", ".join(f"{w} {percent(x)}" for w, x in zip(steps.words, steps.shares, strict=True))
    picture = answer_picture(
        png_bytes(sharing_picture(steps.shares, steps.words, query), colours=256),
        alt=f"{sharing_headline(steps.shares, steps.words, query)}; shares: {shares}",
        width=840,
    )
    numbers = widgets.HTML(
        "<p>Step by step, one column per word (the lesson's numbers, worked out by the "
        f"library):</p><pre>{html.escape(format_three_steps(steps))}</pre>"
    )

    def explain(percent: float) -> str:
        others = len(steps.words) - 1
        return (
            f"{sharing_headline(steps.shares, steps.words, query)}. The other {others} words "
            f'still get {100 - percent:.0f}% between them: the new "{query}" is a blend, mostly '
            f'"{word}", not a copy of it.'
        )

    guess = predict_number(
        f'How big a share of its attention does "{query}" give to "{word}"?',
        lambda: 100 * share,
        low=0,
        high=100,
        step=5,
        start=50,
        label="my guess (%)",
        tolerance=10,
        fmt="{:.0f}%",
        explain=explain,
        reveal=widgets.VBox([picture, numbers]),
    )
    guess.guess.readout_format = ".0f"
    return guess
