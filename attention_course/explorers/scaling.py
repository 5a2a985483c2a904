"""The developer's scaling explorer: head width and scale rule against the weights.

Move the head width d from 1 to 1024 and pick how the logits are scaled; four
panels redraw: the histogram of the scaled logits, one query's weights over
six keys, and the mean top weight and mean entropy against d with the
current point marked. The raw logits for every width are drawn once
(`attention_course.lessons.scaling.sweep_widths`); an update only rescales them.

The headline is computed from the mean-top-weight curve drawn (`headline`), so
it is true at every setting: a custom c = 0.001 is flat near uniform, c = 100
flat near one-hot, c = 1 rises like no scaling at all.

`divide_by_d_prediction` is notebook 02's question before the explorer: what
dividing by d instead of sqrt(d) does to the weights, answered (from the
notebook's own draws) only once the learner has locked in a guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.ticker import MaxNLocator

from attention_lib.normalisers import softmax

from ..lessons.exercises import check_scale_rule
from ..lessons.figures.style import BLUE, GREEN, VERMILLION
from ..lessons.scaling import POWER_OF_TWO_WIDTHS, WeightStats, sweep_widths
from .base import Explorer, key_weight_bars
from .controls import WidthAndScale
from .reveal import Prediction, predict_choice

__all__ = [
    "FLAT_RANGE",
    "NEAR_ONE_HOT",
    "NEAR_UNIFORM",
    "ScalingExplorer",
    "divide_by_d_prediction",
    "headline",
    "rule_name",
]


_RULE_NAMES = {"none": "No scaling", "1/sqrt(d)": "Scaled by 1/√d", "1/d": "Scaled by 1/d"}

#: A curve whose mean top weight moves less than this across the widths "holds" at every width.
FLAT_RANGE = 0.1
#: Within this of 1/keys the weights are "near uniform"; at or above NEAR_ONE_HOT, "nearly one-hot".
NEAR_UNIFORM = 0.02
NEAR_ONE_HOT = 0.95


def rule_name(rule: str, multiplier: float) -> str:
    """How a headline names the scale rule: "Scaled by 1/√d", "A fixed c = 0.001"..."""
    return _RULE_NAMES.get(rule) or f"A fixed c = {multiplier:.3g}"


def headline(
    rule: str, multiplier: float, widths: Sequence[int], tops: Sequence[float], keys: int
) -> str:
    """The explorer's headline: what the mean top weight does across ``widths``, from ``tops``.

    ``tops`` is the curve drawn (one mean top weight per width). Flat curves
    (range at most `FLAT_RANGE`) are reported by their range, moving ones by
    their ends; "near uniform" and "nearly one-hot" are added only where the
    numbers are within `NEAR_UNIFORM` of 1/keys or at least `NEAR_ONE_HOT`.
    """
    lo, hi, first, last = min(tops), max(tops), tops[0], tops[-1]
    uniform = 1 / keys
    if hi - lo <= FLAT_RANGE:
        span = f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}"
        what = f"mean top weight {span} at every width"
        if hi <= uniform + NEAR_UNIFORM:
            what += f", near uniform (1/{keys})"
        elif lo >= NEAR_ONE_HOT:
            what += ": nearly one-hot"
    else:
        what = f"mean top weight {first:.2f} at d = {widths[0]} → {last:.2f} at d = {widths[-1]}"
        if last <= uniform + NEAR_UNIFORM:
            what += f", near uniform (1/{keys})"
        elif last >= NEAR_ONE_HOT:
            what += ": nearly one-hot"
    return f"{rule_name(rule, multiplier)}: {what}"


_BINS = 40
_TAIL = 0.995  # the histogram's range covers this share of the logits, symmetrically


def _shares(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of ``logits`` over a symmetric range that fits their bulk, whatever their size.

    Returns the bin edges (BINS + 1,) and each bin's share of the logits (BINS,).
    """
    half = float(np.quantile(np.abs(logits), _TAIL)) * 1.1
    edges = np.linspace(-half, half, _BINS + 1)  # (BINS + 1,)
    counts, _ = np.histogram(logits, bins=edges)  # (BINS,)
    return edges, counts / logits.size


class ScalingExplorer(WidthAndScale, Explorer):
    """Head width, scale rule and multiplier against the shape of the attention weights.

    Controls: ``width`` (SelectionSlider over 1, 2, 4, ..., 1024), ``rule``
    (ToggleButtons: ``"none"``, ``"1/sqrt(d)"``, ``"1/d"``, ``"custom"``) and
    ``multiplier`` (FloatLogSlider, 0.001 to 100; used by ``"custom"``, where
    the logits are multiplied by it at every width).

    ``trials`` random queries, each against ``keys`` random keys, are drawn per
    width from ``seed``. The weights panel shows one query at every width:
    query ``example`` of the widest head, its logits rescaled to the spread of
    each width (``z·√d``, z its logits over √1024, so the pattern across keys is
    the same at every d and only its spread changes; `example_logits`).

    Artists the tests read: ``hist`` (the logit histogram, a StepPatch), ``key_bars``
    (one query's weights), ``top_line``/``top_marker`` and
    ``entropy_line``/``entropy_marker`` (the curves against d and the current
    point).
    """

    def __init__(
        self, trials: int = 2_000, keys: int = 6, seed: int = 0, width: int = 64, example: int = 1
    ) -> None:
        self.sweep = sweep_widths(POWER_OF_TWO_WIDTHS, trials=trials, keys=keys, seed=seed)
        self.keys = keys
        self.example = example  # which query of the widest head the weights panel shows
        widest = self.sweep.widths[-1]
        self._example_pattern = self.sweep.logits[widest][example] / math.sqrt(widest)  # (keys,)
        widths = np.array(self.sweep.widths)

        fig = self._make_figure(figsize=(8.4, 5.0))
        # a fixed layout: recomputing a constrained layout on every redraw would double its cost
        grid = {
            "left": 0.08,
            "right": 0.98,
            "top": 0.9,
            "bottom": 0.17,
            "hspace": 0.55,
            "wspace": 0.25,
        }
        ax_hist, ax_keys, ax_top, ax_ent = fig.subplots(2, 2, gridspec_kw=grid).ravel()
        self.axes = (ax_hist, ax_keys, ax_top, ax_ent)

        # histogram: one filled step outline whose bin edges and heights move (one path to draw)
        self.hist = ax_hist.stairs(np.zeros(_BINS), np.arange(_BINS + 1.0), fill=True, color=BLUE)
        band = ax_hist.axvspan(
            -1, 1, color=GREEN, alpha=0.15, zorder=0, label="|logit| ≤ 1 (histogram)"
        )
        # The bins span the bulk of the logits whatever their scale, so a bin's share depends
        # on d alone: one y-range fits every setting, and the y-axis need not be redrawn.
        ax_hist.set_ylim(0, 1.15 * max(_shares(self.sweep.logits[d])[1].max() for d in widths))
        ax_hist.xaxis.set_major_locator(MaxNLocator(nbins=6, symmetric=True))
        ax_hist.set_xlabel("scaled logit  (q·k × scale)")
        ax_hist.set_ylabel("share of logits per bin")

        # one example query's weights over the keys
        self.key_bars = key_weight_bars(ax_keys, keys, "key", "attention weight", legend=False)
        # drawn like the uniform lines below, so their one legend entry covers it
        ax_keys.lines[0].set(color=GREEN, linestyle="-.", linewidth=0.8)

        # mean top weight and mean entropy against d, with the two usual rules for reference
        references = {"none": self.sweep.stats("none"), "1/sqrt(d)": self.sweep.stats("1/sqrt(d)")}
        uniform_entropy = math.log(keys)
        for ax, what in ((ax_top, "top"), (ax_ent, "entropy")):
            for (rule, stats), style in zip(references.items(), ("--", ":"), strict=True):
                values = [getattr(s, what) for s in stats]
                label = "none" if rule == "none" else "1/√d"
                ax.plot(widths, values, style, color="gray", lw=1.2, label=f"{label} (reference)")
            ax.set_xscale("log", base=2)
            ax.set_xticks(widths, [str(d) for d in widths], fontsize=8)
            ax.set_xlabel("head width d")
        self.top_line, self.top_marker, self.entropy_line, self.entropy_marker = (
            ax.plot(
                widths, np.zeros(len(widths)), style, color=VERMILLION, lw=2, ms=9, label=label
            )[0]
            for ax, style, label in (
                (ax_top, "-", "chosen scale"),
                (ax_top, "o", "current d"),
                (ax_ent, "-", "chosen scale"),
                (ax_ent, "o", "current d"),
            )
        )
        uniform_lines = [
            ax_top.axhline(
                1 / keys, color=GREEN, ls="-.", lw=0.8, label=f"uniform (1/{keys}, ln {keys})"
            ),
            ax_ent.axhline(uniform_entropy, color=GREEN, ls="-.", lw=0.8),
        ]
        ax_top.set_ylim(0, 1.05)
        ax_top.set_ylabel("mean top weight")
        ax_top.set_title("mean top weight (1 = one key takes all)", fontsize=10)
        ax_ent.set_ylim(0, uniform_entropy * 1.1)
        ax_ent.set_ylabel("mean entropy (nats)")
        ax_ent.set_title("mean entropy (0 = one-hot)", fontsize=10)
        # one legend for all panels, below them: none lies over a line or bar that moves
        handles, labels = ax_top.get_legend_handles_labels()
        fig.legend(
            [*handles, band], [*labels, band.get_label()], loc="lower center", ncols=3, fontsize=8
        )
        self.title = fig.suptitle("", fontsize=11)

        self._make_width_and_scale(self.sweep.widths, width)
        self._watch(self.width, self.rule, self.multiplier)
        self.live = [
            band,  # |logit| <= 1 moves as the x-range follows the logits
            self.hist,
            ax_hist.xaxis,
            ax_hist.title,
            *self.key_bars,
            *ax_keys.lines,  # the uniform share, drawn over the bars
            ax_keys.title,
            self.top_line,
            self.top_marker,
            self.entropy_line,
            self.entropy_marker,
            *uniform_lines,  # drawn over the curves, which reach them under 1/d
            self.title,
        ]
        self.update()

    # -- numbers -----------------------------------------------------------------
    def current_logits(self) -> np.ndarray:
        """The scaled logits at the current width, shape (trials, keys)."""
        return self.sweep.logits[self.width.value] * self.scale  # (N, keys)

    def curve(self) -> list[WeightStats]:
        """Mean top weight and entropy at every width under the current rule."""
        return self.sweep.stats(self.rule.value, self.multiplier.value)

    def example_logits(self) -> np.ndarray:
        """The example query's raw logits at the current width, (keys,): ``z·√d``."""
        return self._example_pattern * math.sqrt(self.width.value)  # (keys,)

    def example_weights(self) -> np.ndarray:
        """The example query's weights at the current width and scale, (keys,)."""
        return softmax(self.example_logits() * self.scale)  # (keys,)

    def headline(self) -> str:
        """The headline for the current rule, computed from the curve drawn."""
        tops = [s.top for s in self.curve()]
        return headline(self.rule.value, self.multiplier.value, self.sweep.widths, tops, self.keys)

    def current_stats(self) -> WeightStats:
        """Mean top weight and entropy at the current width and rule."""
        return self.curve()[self.sweep.widths.index(self.width.value)]

    def describe(self) -> str:
        """One line with the current setting and what it does to the weights."""
        stats = self.current_stats()
        return (
            f"{self.setting()}: logit std {self.current_logits().std():.2f}, "
            f"mean top weight {stats.top:.3f}, mean entropy {stats.entropy:.3f} nats"
        )

    # -- drawing -----------------------------------------------------------------
    def update(self) -> None:
        """Redraw every panel for the current width, rule and multiplier."""
        self._sync_multiplier()
        logits = self.current_logits()  # (N, keys)
        d = self.width.value
        ax_hist, ax_keys = self.axes[:2]

        edges, shares = _shares(logits)  # (BINS + 1,), (BINS,)
        self.hist.set_data(shares, edges)
        ax_hist.set_xlim(edges[0], edges[-1])
        ax_hist.set_title(f"logits at d = {d}: std {logits.std():#.3g}", fontsize=10)

        weights = self.example_weights()  # (keys,) the same query at every width
        for bar, w in zip(self.key_bars, weights, strict=True):
            bar.set_height(w)
        ax_keys.set_title(f"one query, the same at every d: top {weights.max():.2f}", fontsize=10)

        curve = self.curve()
        i = self.sweep.widths.index(d)
        self.top_line.set_ydata([s.top for s in curve])
        self.top_marker.set_data([d], [curve[i].top])
        self.entropy_line.set_ydata([s.entropy for s in curve])
        self.entropy_marker.set_data([d], [curve[i].entropy])
        self.title.set_text(self.headline())


# The choices of `divide_by_d_prediction`, keyed by `check_scale_rule`'s behaviour.
_DIVIDE_BY_D_CHOICES = {
    "sharpen": "it climbs toward 1",
    "hold": "it holds near 0.42",
    "flatten": "it falls toward 1/6",
}


def divide_by_d_prediction(logits: Mapping[int, np.ndarray]) -> Prediction:
    """Notebook 02's prediction: divide the logits by d instead of sqrt(d); what happens?

    ``logits`` maps each head width d to raw scores q·k of shape (trials,
    keys), the draws of the notebook's second table. The learner picks how
    the mean top weight moves as d grows; only when the guess is locked in is
    `check_scale_rule` run with scale 1/d on those same draws, and the
    answer and its reason shown. Raises ValueError for ``logits`` that
    `check_scale_rule` refuses (when the guess is locked in).
    """
    widths = sorted(int(d) for d in logits)
    first = next(iter(logits.values()))
    keys = np.shape(first)[-1]

    def divided_by_d():
        return check_scale_rule(lambda d: 1 / d, logits=logits, verbose=False)

    def explain(_answer: str) -> str:
        said = str(divided_by_d()).splitlines()[-1]
        return (
            f"On the table's own {np.shape(first)[0]:,} trials, {said}. Dividing by d leaves "
            "the logits a spread of √d / d = 1/√d, which shrinks as d grows, so the softmax "
            "sees ever smaller differences between the keys."
        )

    return predict_choice(
        f"Divide the logits by d instead of √d. As d grows from {widths[0]} to {widths[-1]}, "
        f"what does the mean top weight over {keys} keys do?",
        list(_DIVIDE_BY_D_CHOICES.values()),
        lambda: _DIVIDE_BY_D_CHOICES[divided_by_d().behaviour],
        explain=explain,
    )
