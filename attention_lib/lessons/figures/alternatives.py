"""The still figures of notebook 06: softmax against linear attention timed, attention
sinks, and sigmoid and differential attention's maps.

Each title is computed from the data drawn (`attention_lib.lessons.alternatives`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from ..alternatives import (
    SinkRun,
    TimingRow,
    describe_slopes,
    sigmoid_differential_headline,
    sigmoid_differential_weights,
    sink_headline,
    timing_slopes,
)
from .style import TITLE_SIZE, still_figure

__all__ = ["sigmoid_differential_figure", "sink_figure", "timing_figure"]


def timing_figure(rows: Sequence[TimingRow], points: int = 3) -> Figure:
    """Median time per call against T for softmax and linear attention, log-log.

    Every measured T is a labelled tick; the dashed lines are the slopes
    fitted on the ``points`` largest T (`timing_slopes`), and the title is
    `describe_slopes` of them: it says "about quadratically" only when the
    fitted slope is within 0.3 of 2 (and so on). Not known to pyplot:
    ``display(fig)``. Raises ValueError with fewer than two rows.
    """
    slopes = timing_slopes(rows, points)
    lengths = np.array([r.length for r in rows], dtype=float)  # (n,)
    fig = still_figure(height=4.0)
    ax = fig.add_subplot()
    fitted = lengths >= slopes.from_length  # (n,)
    for name, seconds, slope, marker in (
        ("softmax attention", [r.softmax_s for r in rows], slopes.softmax, "o"),
        ("linear attention, elu+1", [r.linear_s for r in rows], slopes.linear, "s"),
    ):
        ms = np.array(seconds) * 1e3  # (n,)
        (line,) = ax.loglog(lengths, ms, marker + "-", label=f"{name} (median)")
        # the least-squares line through the fitted points (log-log), as the slope was fitted
        log_x, log_y = np.log(lengths[fitted]), np.log(ms[fitted])  # (k,), (k,)
        fit = np.exp(log_y.mean() + slope * (log_x - log_x.mean()))  # (k,)
        ax.loglog(
            lengths[fitted],
            fit,
            "--",
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
    return fig


def sink_figure(runs: Mapping[tuple[str, bool], SinkRun]) -> Figure:
    """One held-out sequence's weights in each of the four toy models, side by side.

    ``runs`` maps (normaliser, first_token) to a `SinkRun`, as notebook 06
    builds it (all four combinations). The title is `sink_headline` (measured
    over the held-out rows, not this one sequence). 840 px wide; not known to
    pyplot: ``display(fig)``. Raises KeyError naming a missing combination.
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
    return fig


def sigmoid_differential_figure(
    query: np.ndarray, key: np.ndarray, lam: float | None = None
) -> Figure:
    """Heatmaps of `sigmoid_differential_weights` side by side, and each map's row sums.

    One shared diverging colour scale (0 is white) so differential
    attention's negative weights show; the title is
    `sigmoid_differential_headline` of the maps drawn. 840 px wide; not known
    to pyplot: ``display(fig)``.
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
    for offset, (name, w) in zip((-0.27, 0, 0.27), weights.items(), strict=True):
        axes[3].barh(rows + offset, w.sum(-1), height=0.25, label=name.split(",")[0])
    axes[3].axvline(1, color="gray", lw=0.8, ls=":")
    axes[3].invert_yaxis()
    axes[3].set_yticks(rows)
    axes[3].set_xlabel("row sum")
    sums = np.concatenate([w.sum(-1) for w in weights.values()])  # (3 L,)
    axes[3].set_xlim(min(0.0, float(sums.min())) - 0.05, 1.1 * max(1.0, float(sums.max())))
    axes[3].set_title("row sums", fontsize=8)
    fig.legend(*axes[3].get_legend_handles_labels(), loc="outside lower right", ncols=3, fontsize=7)
    fig.suptitle("\n".join(sigmoid_differential_headline(weights).split("; ")), fontsize=8)
    return fig
