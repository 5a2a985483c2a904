"""The still figures of notebook 06: softmax against linear attention timed, random
features' error, attention sinks, and sigmoid and differential attention's maps.

Each title and text alternative is computed from the data drawn
(`attention_course.lessons.alternatives`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from attention_lib.fits import log_log_slope

from ..alternatives import (
    FeatureErrorRow,
    SinkRun,
    TimingRow,
    describe_slopes,
    sigmoid_differential_headline,
    sigmoid_differential_weights,
    sink_headline,
    timing_slopes,
)
from .still import StillFigure
from .style import BLUE, TITLE_SIZE, series_cycle, still_figure

__all__ = ["feature_error_figure", "sigmoid_differential_figure", "sink_figure", "timing_figure"]


def _numbers(values: Sequence[float], digits: str = ".3g") -> str:
    return ", ".join(f"{v:{digits}}" for v in values)


def timing_figure(rows: Sequence[TimingRow], points: int = 3) -> StillFigure:
    """Median time per call against T for softmax and linear attention, log-log.

    Every measured T is a labelled tick; the dashed (softmax) and dotted
    (linear) lines are the slopes fitted on the ``points`` largest T
    (`timing_slopes`), and the title is
    `describe_slopes` of them: it says "about quadratically" only when the
    fitted slope is within 0.3 of 2 (and so on). Raises ValueError with fewer
    than two rows.
    """
    slopes = timing_slopes(rows, points)
    lengths = np.array([r.length for r in rows], dtype=float)  # (n,)
    fig = still_figure(height=4.0)
    ax = series_cycle(fig.add_subplot())
    fitted = lengths >= slopes.from_length  # (n,)
    for name, seconds, slope, marker, fit_style in (
        ("softmax attention", [r.softmax_s for r in rows], slopes.softmax, "o", "--"),
        ("linear attention, elu+1", [r.linear_s for r in rows], slopes.linear, "s", ":"),
    ):
        ms = np.array(seconds) * 1e3  # (n,)
        (line,) = ax.loglog(lengths, ms, marker + "-", label=f"{name} (median)")
        # the least-squares line through the fitted points (log-log), as the slope was fitted
        log_x, log_y = np.log(lengths[fitted]), np.log(ms[fitted])  # (k,), (k,)
        fit = np.exp(log_y.mean() + slope * (log_x - log_x.mean()))  # (k,)
        ax.loglog(
            lengths[fitted],
            fit,
            fit_style,
            color=line.get_color(),
            lw=1,
            label=f"fit: slope {slope:.2f}",
        )
    ax.set_xticks(lengths, [str(int(t)) for t in lengths])
    ax.minorticks_off()
    ax.set_xlabel("sequence length T (queries = keys)")
    ax.set_ylabel("median time per call (ms)")
    ax.set_title(describe_slopes(slopes), fontsize=TITLE_SIZE)
    ax.legend(fontsize=9)
    alt = (
        f"Log-log chart of the median time per call against T = "
        f"{_numbers([r.length for r in rows], 'd')}: softmax attention (circles) "
        f"{_numbers([r.softmax_s * 1e3 for r in rows])} ms, linear attention (squares) "
        f"{_numbers([r.linear_s * 1e3 for r in rows])} ms, each with its fitted line (dashed, "
        "dotted). "
        f"{describe_slopes(slopes)}."
    )
    return StillFigure(fig, alt)


def feature_error_figure(rows: Sequence[FeatureErrorRow]) -> StillFigure:
    """Performer attention's relative error against its number of random features m, log-log,
    with one standard deviation over the projections as error bars and the 1/√m line through
    the first point for comparison. The title gives the fitted slope and how far the error fell.
    """
    ms = [r.num_features for r in rows]
    errs = [r.mean_error for r in rows]
    fig = still_figure(7.0, 4.0)
    ax = fig.add_subplot()
    ax.errorbar(
        ms,
        errs,
        yerr=[r.std_error for r in rows],
        fmt="o-",
        color=BLUE,
        capsize=3,
        label="Performer against exact softmax attention",
    )
    ideal = errs[0] * np.sqrt(ms[0] / np.array(ms, dtype=float))  # (n,)
    ax.loglog(ms, ideal, "k--", lw=1, label="∝ 1/√m")
    ax.set_xlabel("number of random features m")
    ax.set_ylabel("relative error ‖approx − exact‖ / ‖exact‖")
    slope, gain = log_log_slope(ms, errs), errs[0] / errs[-1]
    ideal_gain = np.sqrt(ms[-1] / ms[0])
    ax.set_title(
        f"Random-feature error against m: fitted slope {slope:.2f} (1/√m would be −0.5);\n"
        f"{ms[-1] // ms[0]}× the features cut the error {gain:.0f}× (1/√m would give "
        f"{ideal_gain:.0f}×)",
        fontsize=9,
    )
    ax.legend()
    alt = (
        f"Log-log chart of the Performer's relative error against the number of random "
        f"features m = {_numbers(ms, 'd')}: {_numbers(errs, '.3f')} (circles, with error bars "
        f"of one standard deviation), beside a dashed 1/√m line. Fitted slope {slope:.2f} against "
        f"-0.5; {ms[-1] // ms[0]} times the features cut the error {gain:.0f} times, where "
        f"1/√m would give {ideal_gain:.0f}."
    )
    return StillFigure(fig, alt)


def sink_figure(runs: Mapping[tuple[str, bool], SinkRun]) -> StillFigure:
    """One held-out sequence's weights in each of the four toy models, side by side.

    ``runs`` maps (normaliser, first_token) to a `SinkRun`, as notebook 06
    builds it (all four combinations). The title is `sink_headline` (measured
    over the held-out rows, not this one sequence). 840 px wide. Raises
    KeyError naming a missing combination.
    """
    order = [(n, f) for f in (False, True) for n in ("softmax", "softmax1")]
    missing = [key for key in order if key not in runs]
    if missing:
        raise KeyError(f"sink_figure needs runs for {order}; missing {missing}")
    fig = still_figure(height=3.3)
    axes = fig.subplots(1, 4, sharey=True)
    image = None
    for ax, key in zip(axes, order, strict=True):
        run = runs[key]
        image = ax.imshow(run.example_weights, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        keys = run.example_weights.shape[-1] - int(run.first_token)
        labels = (["blank"] if run.first_token else []) + [f"k{j}" for j in range(keys)]
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("key position")
        first = "blank first token" if run.first_token else "no first token"
        ax.set_title(f"{run.normaliser}, {first}", fontsize=8)
    rows = runs[order[0]].example_match
    axes[0].set_yticks(range(len(rows)), ["match" if m else "nothing" for m in rows])
    axes[0].set_ylabel("query row")
    fig.colorbar(image, ax=axes, label="attention weight")
    fig.suptitle(sink_headline(runs), fontsize=9)
    panels = "; ".join(
        f"{run.normaliser}, {'blank first token' if run.first_token else 'no first token'}: "
        f"'nothing' rows put {run.first_weight_nothing:.0%} on the first key and sum to "
        f"{run.row_total_nothing:.2f}"
        for run in (runs[key] for key in order)
    )
    alt = (
        "Four heatmaps of one held-out sequence's attention weights, from 0 (dark) to 1 "
        "(yellow), query rows against key positions, one per toy model. Measured over all "
        f"held-out rows: {panels}."
    )
    return StillFigure(fig, alt)


def sigmoid_differential_figure(
    query: np.ndarray, key: np.ndarray, lam: float | None = None
) -> StillFigure:
    """Heatmaps of `sigmoid_differential_weights` side by side, and each map's row sums.

    One shared diverging colour scale (0 is white) so differential
    attention's negative weights show; the title is
    `sigmoid_differential_headline` of the maps drawn. The row sums' bars
    differ by hatching as well as colour. 840 px wide.
    """
    weights = sigmoid_differential_weights(query, key, lam)
    fig = still_figure(height=3.4)
    axes = fig.subplots(1, 4, width_ratios=[1, 1, 1, 0.9])
    top = max(float(np.abs(w).max()) for w in weights.values())
    image = None
    for ax, (name, w) in zip(axes[:3], weights.items(), strict=False):
        image = ax.imshow(w, vmin=-top, vmax=top, cmap="RdBu_r", aspect="auto")
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("key")
        ax.set_yticks(range(w.shape[0]))
    axes[0].set_ylabel("query")
    fig.colorbar(image, ax=axes[:3], label="weight", shrink=0.9)
    rows = np.arange(next(iter(weights.values())).shape[0])  # (L,)
    series_cycle(axes[3])
    for offset, hatch, (name, w) in zip(
        (-0.27, 0, 0.27), ("", "///", "..."), weights.items(), strict=True
    ):
        axes[3].barh(rows + offset, w.sum(-1), height=0.25, hatch=hatch, label=name.split(",")[0])
    axes[3].axvline(1, color="gray", lw=0.8, ls=":")
    axes[3].invert_yaxis()
    axes[3].set_yticks(rows)
    axes[3].set_xlabel("row sum")
    sums = np.concatenate([w.sum(-1) for w in weights.values()])  # (3 L,)
    axes[3].set_xlim(min(0.0, float(sums.min())) - 0.05, 1.1 * max(1.0, float(sums.max())))
    axes[3].set_title("row sums", fontsize=8)
    fig.legend(*axes[3].get_legend_handles_labels(), loc="outside lower right", ncols=3, fontsize=7)
    fig.suptitle("\n".join(sigmoid_differential_headline(weights).split("; ")), fontsize=8)
    maps = ", ".join(weights)
    alt = (
        f"Three heatmaps of {len(rows)} queries' weights over their keys ({maps}) on one "
        f"diverging scale from {-top:.2f} (blue) through 0 (white) to {top:.2f} (red), and a "
        "bar chart of each map's row sums against a dotted line at 1. "
        f"{sigmoid_differential_headline(weights)}."
    )
    return StillFigure(fig, alt)
