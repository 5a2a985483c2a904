"""The researcher's gradient explorers (notebook 04): the softmax Jacobian, and QK-norm.

`GradientExplorer`: move the head width d from 1 to 1024 and pick how the
logits are scaled. Three panels redraw: the mean and median Frobenius norm
of the softmax Jacobian against d (log axes) with the current points
marked, one example query's weights over its keys, and that query's
Jacobian p_i (δ_ij − p_j) as a heatmap. The raw logits for every width are
drawn once (`attention_course.lessons.scaling.sweep_widths`) and the curves of
the three named rules computed once
(`attention_course.lessons.saturation.jacobian_norm_table`); an update
rescales one row, and recomputes the curve only for a custom multiplier.

`spread_prediction` asks how far raw q·k spreads before the variance
argument, and shows `attention_course.lessons.figures.spread_figure` after.

`QKNormExplorer` toggles QK-norm on and off over a trained model's own
queries and keys (`attention_course.lessons.saturation.qk_norm_view`): one
query's scores and weights, the model's against unit-length q and k times a
temperature τ (sqrt(d), or the τ fitted to the model's weights).
"""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets
import numpy as np

from attention_lib.normalisers import softmax, softmax_jacobian, softmax_jacobian_norm

from ..lessons.figures import spread_figure
from ..lessons.figures.still import figure_png as png_bytes
from ..lessons.figures.style import BLUE, GREEN, ORANGE, PURPLE, VERMILLION
from ..lessons.saturation import jacobian_norm_table, qk_norm_view, reduce_norms
from ..lessons.scaling import POWER_OF_TWO_WIDTHS, dot_product_samples, sweep_widths
from ..model.catalogue import MODEL_LABELS
from .base import Explorer, key_weight_bars
from .controls import WidthAndScale, fit_label
from .reveal import Prediction, answer_picture, predict_number
from .scaling import rule_name

__all__ = [
    "FLAT_RATIO",
    "SHUT",
    "TINY",
    "GradientExplorer",
    "QKNormExplorer",
    "headline",
    "spread_prediction",
]

_FIXED_RULES = ("none", "1/sqrt(d)", "1/d")

#: A mean-norm curve whose largest value is at most this times its smallest "holds" at every width.
FLAT_RATIO = 1.5
#: A median norm at or below this at every width: the gradient's gate is shut.
SHUT = 1e-3
#: Norms below this are printed as a bound: their digits are rounding noise, not the lesson.
TINY = 1e-12


def _norm_text(x: float) -> str:
    """A norm in 3 significant digits, or "< 1e-12" below `TINY`."""
    return f"< {TINY:g}" if x < TINY else f"{x:.3g}"


def headline(
    rule: str,
    multiplier: float,
    widths: Sequence[int],
    mean_norms: Sequence[float],
    median_norms: Sequence[float],
) -> str:
    """The explorer's headline, computed from the two curves drawn (mean and median ‖J‖).

    Flat mean curves (largest at most `FLAT_RATIO` times the smallest) are
    reported by their range; a median at or below `SHUT` at every width as a
    shut gate; otherwise the mean curve's two ends, with "the gate closes"
    when the median falls below `SHUT` by the widest head.
    """
    lo, hi = min(mean_norms), max(mean_norms)
    name = rule_name(rule, multiplier)
    if lo > 0 and hi / lo <= FLAT_RATIO:
        return f"{name}: mean ‖J‖ {lo:.2g}–{hi:.2g} at every width: the gradient passes"
    if max(median_norms) <= SHUT:
        return (
            f"{name}: median ‖J‖ at most {max(median_norms):.1g} at every width: the gate is shut"
        )
    ends = (
        f"mean ‖J‖ {mean_norms[0]:.2g} at d = {widths[0]} → {mean_norms[-1]:.2g} "
        f"at d = {widths[-1]}"
    )
    if median_norms[-1] <= SHUT:
        return f"{name}: {ends}; the median falls to {median_norms[-1]:.1g}: the gate closes"
    return f"{name}: {ends}"


# J's entries lie in [-1/4, 1/4]: p_i (1 - p_i) <= 1/4 on the diagonal, -p_i p_j >= -1/4 off it
_CLIM = 0.25
_NORM_FLOOR = 1e-7  # bottom of the log axis for the norm


class GradientExplorer(WidthAndScale, Explorer):
    """Head width, scale rule and multiplier against the softmax Jacobian.

    Controls: ``width`` (SelectionSlider over 1, 2, 4, ..., 1024), ``rule``
    (ToggleButtons: ``"none"``, ``"1/sqrt(d)"``, ``"1/d"``, ``"custom"``) and
    ``multiplier`` (FloatLogSlider, 0.001 to 100, used by ``"custom"``).

    ``trials`` random queries, each against ``keys`` random keys, are drawn per
    width from ``seed``; ``example`` picks the query whose weights and
    Jacobian are drawn.

    Artists the tests read: ``norm_line`` and ``norm_marker`` (the mean
    Jacobian norm against d and the current point), ``median_line`` and
    ``median_marker`` (the same for the median), ``weight_bars`` (the
    example query's weights) and ``heatmap`` (its Jacobian, fixed colour
    limits ±1/4).
    """

    def __init__(
        self, trials: int = 1_000, keys: int = 8, seed: int = 0, width: int = 64, example: int = 0
    ) -> None:
        self.sweep = sweep_widths(POWER_OF_TWO_WIDTHS, trials=trials, keys=keys, seed=seed)
        self.keys = keys
        self.example = example
        # (rule, multiplier or None) -> (widths, trials) row norms; a move reduces, not recomputes
        self._norm_tables = {
            (rule, None): jacobian_norm_table(self.sweep, rule) for rule in _FIXED_RULES
        }
        widths = np.array(self.sweep.widths)

        fig = self._make_figure(figsize=(8.4, 5.2), layout="constrained")
        axes = fig.subplot_mosaic([["curve", "curve"], ["weights", "jacobian"]])
        ax_curve, ax_w, ax_j = axes["curve"], axes["weights"], axes["jacobian"]
        self.axes = (ax_curve, ax_w, ax_j)

        for rule, style, label in (("none", "x--", "none"), ("1/sqrt(d)", "+:", "1/√d")):
            curve = reduce_norms(self._norm_tables[rule, None], "mean")
            ax_curve.plot(widths, curve, style, color="gray", lw=1.2, ms=5, label=f"{label}: mean")
        placeholder = np.full(len(widths), 0.1)  # (widths,), replaced by update()
        self.norm_line, self.median_line = (
            ax_curve.plot(widths, placeholder, style, color=color, lw=2, label=label)[0]
            for style, color, label in (
                ("-", VERMILLION, "chosen scale: mean"),
                ("-.", PURPLE, "chosen scale: median"),
            )
        )
        self.norm_marker, self.median_marker = (
            ax_curve.plot([1], [0.1], style, color=color, ms=8, label=label)[0]
            for style, color, label in (
                ("o", VERMILLION, "current d: mean"),
                ("s", PURPLE, "current d: median"),
            )
        )
        ax_curve.set_xscale("log", base=2)
        ax_curve.set_xticks(widths, [str(d) for d in widths])
        ax_curve.set_yscale("log")
        ax_curve.set_ylim(_NORM_FLOOR, 1.0)
        largest = ax_curve.axhline(
            0.5, color=GREEN, ls="--", lw=0.8, label="largest possible (two keys tied)"
        )
        ax_curve.set_xlabel("head width d")
        ax_curve.set_ylabel("‖J‖ (Frobenius) over rows")
        # beside the curves, not over them: a frame then need not redraw its nine entries
        ax_curve.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, ncols=4)

        self.weight_bars = key_weight_bars(ax_w, keys, "key j", "attention weight p_j")

        ticks = np.arange(keys)
        self.heatmap = ax_j.imshow(
            np.zeros((keys, keys)), cmap="RdBu_r", vmin=-_CLIM, vmax=_CLIM, interpolation="nearest"
        )
        ax_j.set_xticks(ticks, [str(j + 1) for j in ticks])
        ax_j.set_yticks(ticks, [str(i + 1) for i in ticks])
        ax_j.set_xlabel("score s_j moved")
        ax_j.set_ylabel("weight p_i that responds")
        fig.colorbar(self.heatmap, ax=ax_j, label="∂p_i/∂s_j")
        self.title = fig.suptitle("", fontsize=11)

        self._make_width_and_scale(self.sweep.widths, width)
        self._watch(self.width, self.rule, self.multiplier)
        self.live = [
            self.norm_line,
            self.median_line,
            self.norm_marker,
            self.median_marker,
            largest,  # drawn over the curves
            ax_curve.title,
            *self.weight_bars,
            *ax_w.lines,
            ax_w.get_legend(),
            ax_w.title,
            self.heatmap,
            ax_j.title,
            self.title,
        ]
        self.update()

    # -- numbers -----------------------------------------------------------------
    def curve(self, statistic: str = "mean") -> np.ndarray:
        """Mean (or median) Jacobian norm at every width under the current rule, (widths,)."""
        rule = self.rule.value
        key = (rule, self.multiplier.value if rule == "custom" else None)
        if key not in self._norm_tables:
            self._norm_tables[key] = jacobian_norm_table(self.sweep, rule, self.multiplier.value)
        return reduce_norms(self._norm_tables[key], statistic)

    def current_norm(self, statistic: str = "mean") -> float:
        """Mean (or median) Jacobian norm at the current width and rule."""
        return float(self.curve(statistic)[self.sweep.widths.index(self.width.value)])

    def headline(self) -> str:
        """The headline for the current rule, computed from the curves drawn."""
        return headline(
            self.rule.value,
            self.multiplier.value,
            self.sweep.widths,
            list(self.curve("mean")),
            list(self.curve("median")),
        )

    def example_weights(self) -> np.ndarray:
        """The example query's weights at the current setting, shape (keys,)."""
        return softmax(self.sweep.logits[self.width.value][self.example] * self.scale)

    def example_jacobian(self) -> np.ndarray:
        """The example query's softmax Jacobian, shape (keys, keys)."""
        return softmax_jacobian(self.example_weights())

    def describe(self) -> str:
        """One line with the current setting and the Jacobian's size there."""
        p = self.example_weights()
        return (
            f"{self.setting()}: "
            f"mean ‖J‖ {self.current_norm():.3f}, median {self.current_norm('median'):.2g}; "
            f"example row: top weight {p.max():.3f}, "
            f"‖J‖ {_norm_text(float(softmax_jacobian_norm(p)))}"
        )

    # -- drawing -----------------------------------------------------------------
    def update(self) -> None:
        """Redraw the curve, the marker, the example weights and the heatmap."""
        self._sync_multiplier()
        d = self.width.value
        i = self.sweep.widths.index(d)
        for stat, line, marker in (
            ("mean", self.norm_line, self.norm_marker),
            ("median", self.median_line, self.median_marker),
        ):
            # a log axis cannot show zero: a Jacobian that has underflowed sits on the floor
            shown = np.maximum(self.curve(stat), _NORM_FLOOR)  # (widths,)
            line.set_ydata(shown)
            marker.set_data([d], [shown[i]])

        p = self.example_weights()
        for bar, w in zip(self.weight_bars, p, strict=True):
            bar.set_height(w)
        jac = self.example_jacobian()
        self.heatmap.set_data(jac)

        ax_curve, ax_w, ax_j = self.axes
        ax_curve.set_title(
            f"softmax-Jacobian norm over {self.sweep.trials} queries × {self.keys} keys at "
            f"d = {d}: mean {self.current_norm():.3f}, median {self.current_norm('median'):.2g}",
            fontsize=10,
        )
        ax_w.set_title(f"one query's weights: top {p.max():.2f}", fontsize=10)
        ax_j.set_title(f"its Jacobian: ‖J‖ = {float(softmax_jacobian_norm(p)):.2g}", fontsize=10)
        self.title.set_text(self.headline())


def spread_prediction(width: int = 256, samples: int = 5_000, seed: int = 2) -> Prediction:
    """Notebook 04's prediction before the variance argument: how far does raw q·k spread?

    The learner sets a slider to the standard deviation of q·k at ``width``
    (unit-variance components, no scaling) and locks it in; only then is the
    standard deviation of ``samples`` seeded pairs (`dot_product_samples`)
    computed and shown, with the reason and the `spread_figure`. A guess
    within sqrt(width) / 8 is "close". Raises ValueError as
    `dot_product_samples` does for a bad width or sample count.
    """
    root = float(np.sqrt(width))

    def explain(std: float) -> str:
        return (
            f"The spread is √{width} = {root:g} (measured {std:.1f}): q·k sums {width} products "
            "that are independent, each of mean zero and variance one, so its variance is "
            f"{width}. Divided by √{width} the scores have spread 1."
        )

    return predict_number(
        f"The standard deviation of q·k at d = {width}, unit-variance components, no scaling?",
        lambda: float(dot_product_samples(width, samples=samples, rng=seed).std()),
        low=0,
        high=4 * root,
        step=1,
        start=1,
        label="std of q·k",
        tolerance=root / 8,
        fmt="{:.0f}",
        explain=explain,
        reveal=_spread_picture(width, samples, seed),
    )


def _spread_picture(width: int, samples: int, seed: int) -> widgets.VBox:
    """`spread_figure` as an answer's picture; its text alternative is what the figure
    says: its title and its legend (each histogram's standard deviation)."""
    fig = spread_figure(width, samples, seed)
    ax = fig.axes[0]
    legend = ", ".join(text.get_text() for text in ax.get_legend().get_texts())
    return answer_picture(png_bytes(fig), alt=f"Histograms: {ax.get_title()}; {legend}")


# -- QK-norm on a trained model --------------------------------------------------------------

_QK_OPTIONS = ("own", "sqrt(d)", "fit")


class QKNormExplorer(Explorer):
    """QK-norm, on and off, over one query of a trained model (notebook 04).

    Control: ``norm`` (ToggleButtons, labelled "as trained" and "QK-norm, τ =
    ..."): ``"own"`` (the model's own scores), ``"sqrt(d)"`` (unit-length q
    and k times τ = sqrt(d)) or ``"fit"`` (τ fitted to the model's weights,
    `attention_course.lessons.saturation.fit_qk_temperature`). Left, the query's
    scores over the words it may see, with the band ±τ under QK-norm; right,
    its weights. ``views`` holds the three
    `attention_course.lessons.saturation.QKNormView`s (computed once); ``view``
    the current one. The model is loaded when built (torch).
    """

    def __init__(
        self,
        sentence: str = "the dog was next to the bells and then it barked",
        name: str = "none_d16",
    ) -> None:
        own = qk_norm_view(sentence, name)  # its QK-norm fields use tau = sqrt(d)
        self.views = {"own": own, "sqrt(d)": own, "fit": qk_norm_view(sentence, name, "fit")}
        self.model_label = MODEL_LABELS.get(name, name)
        words = own.words
        n = len(words)
        scores = [own.logits, own.qk_logits, self.views["fit"].qk_logits]
        taus = [v.temperature for v in self.views.values()]
        top = max(max(float(np.abs(s).max()) for s in scores), *taus) * 1.1

        fig = self._make_figure(figsize=(8.4, 3.9), layout="constrained")
        self.ax_scores, self.ax_weights = fig.subplots(1, 2)
        x = np.arange(n)  # (n,)
        self.score_bars = self.ax_scores.bar(x, np.zeros(n), color=BLUE)
        self.band = [
            self.ax_scores.axhline(sign * 1.0, color=GREEN, ls="--", lw=1, label="±τ (QK-norm)")
            for sign in (1, -1)
        ]
        self.ax_scores.axhline(0, color="black", lw=0.6)
        self.ax_scores.set_ylim(-top, top)
        self.ax_scores.set_ylabel("score of the query against each word")
        self.ax_scores.legend(handles=self.band[:1], loc="lower left", fontsize=8)
        self.weight_bars = self.ax_weights.bar(x, np.zeros(n), color=ORANGE)
        self.ax_weights.set_ylim(0, 1.1)
        self.ax_weights.set_ylabel("attention weight")
        for ax in (self.ax_scores, self.ax_weights):
            ax.set_xticks(x, words, rotation=60, fontsize=8)
            ax.set_xlabel(f'word looked at (the query is "{words[-1]}")')
        self.title = fig.suptitle("", fontsize=10)

        layer, head = own.head
        # short labels: three buttons on one line in a 577 px cell (1024 x 768, file browser open)
        labels = {
            "own": "as trained",
            "sqrt(d)": f"QK-norm, τ = {own.temperature:.2g}",
            "fit": f"QK-norm, τ = {self.views['fit'].temperature:.2g}",
        }
        self.norm = fit_label(
            widgets.ToggleButtons(
                options=[(labels[k], k) for k in _QK_OPTIONS], value="own", description="scores"
            )
        )
        self.norm.style.button_width = "auto"
        self.norm.layout.width = "auto"
        self.head_text = f"layer {layer + 1}, head {head + 1}"
        self._watch(self.norm)
        self.live = [
            *self.score_bars,
            *self.weight_bars,
            *self.band,
            self.ax_scores.title,
            self.ax_weights.title,
            self.title,
        ]
        self.update()

    @property
    def view(self):
        """The `attention_course.lessons.saturation.QKNormView` of the current setting."""
        return self.views[self.norm.value]

    def shown(self) -> tuple[np.ndarray, np.ndarray]:
        """(scores, weights) drawn now, each (n,)."""
        v = self.view
        if self.norm.value == "own":
            return v.logits, v.weights
        return v.qk_logits, v.qk_weights

    def describe(self) -> str:
        """The figure's headline: the largest |score| over the sentence and the top weight."""
        v, (_, weights) = self.view, self.shown()
        top = int(np.argmax(weights))
        if self.norm.value == "own":
            bound = f"largest |score| over the sentence {v.largest_logit:.2g}, no bound"
        else:
            bound = (
                f"every score within ±τ = ±{v.temperature:.2g} "
                f"(largest over the sentence {v.largest_qk_logit:.2g})"
            )
        return (
            f"{self.model_label}, {self.head_text}: {bound}\n"
            f'"{v.words[-1]}" gives {weights[top]:.2f} of its weight to "{v.words[top]}"'
        )

    def update(self) -> None:
        """Redraw the bars, the ±τ band and the titles."""
        scores, weights = self.shown()
        for bar, value in zip(self.score_bars, scores, strict=True):
            bar.set_height(float(value))
        for bar, value in zip(self.weight_bars, weights, strict=True):
            bar.set_height(float(value))
        qk = self.norm.value != "own"
        tau = self.view.temperature
        for sign, line in zip((1, -1), self.band, strict=True):
            line.set_ydata([sign * tau, sign * tau])
            line.set_visible(qk)
        self.ax_scores.set_title(
            f"scores from {float(scores.min()):.2g} to {float(scores.max()):.2g}", fontsize=10
        )
        self.ax_weights.set_title(f"weights: top {float(weights.max()):.2f}", fontsize=10)
        self.title.set_text(self.describe())
