"""The researcher's alternatives explorer: eight ways to weight the same keys.

One seeded set of queries and keys; eight heatmaps of the weights (rows are
queries, columns keys), redrawn when a control moves:

- top row, the dot product ``q · k * c / sqrt(d)`` through four normalisers:
  softmax, softmax1, sparsemax, 1.5-entmax;
- bottom row, other scores: cosine / tau (Swin V2), additive (Bahdanau),
  linear attention with elu+1 features, and Performer's positive random
  features approximating the softmax panel.

Titles count the exact zeros (and, for softmax1, the row sums); the headline
(`headline`) is computed from the weights drawn. Controls: head width d (the
first d columns of fixed wide inputs), the multiplier c on the dot-product
scale, and tau for cosine attention. Given ``query`` and ``key`` (a notebook's
own table inputs), their columns come first, so at their width and c = 1 the
panels are exactly the weights of that table.

Two still figures for the same notebook, sized for a laptop's cell (840 px)
with titles computed from their data: `timing_figure` (softmax against linear
attention, measured) and `sink_figure` (the attention-sink toy models).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..lessons.alternatives import (
    SinkRun,
    TimingRow,
    additive_logits,
    additive_params,
    cosine_logits,
    describe_slopes,
    differential_lambda_init,
    differential_weights,
    elu_feature_map,
    kernel_weights,
    performer_feature_map,
    random_projection,
    sigmoid_weights,
    timing_slopes,
)
from ..normalisers import entmax15, softmax, softmax1, sparsemax
from .base import Explorer
from .controls import fit_slider

__all__ = [
    "PANELS",
    "AlternativesExplorer",
    "headline",
    "sigmoid_differential_figure",
    "sigmoid_differential_headline",
    "sigmoid_differential_weights",
    "sink_figure",
    "sink_headline",
    "timing_figure",
]

PANELS = (
    "softmax",
    "softmax1",
    "sparsemax",
    "entmax15",
    "cosine",
    "additive",
    "linear elu+1",
    "performer",
)
_WIDTHS = tuple(2**i for i in range(9))  # 1 ... 256
_PERFORMER_FEATURES = 64


def headline(d: int, c: float, weights: dict[str, np.ndarray]) -> str:
    """What the top row shows at head width ``d`` and multiplier ``c``, counted from ``weights``.

    Exact zeros of sparsemax and entmax15 (``== 0``, out of all entries) and
    the range of softmax1's row sums; ``weights`` maps panel names to (L, S).
    """
    size = weights["sparsemax"].size
    zeros = {name: int(np.sum(weights[name] == 0)) for name in ("sparsemax", "entmax15")}
    sums = weights["softmax1"].sum(-1)  # (L,)
    counted = ", ".join(f"{name} {n}/{size}" for name, n in zeros.items())
    return (
        f"d = {d}, c = {c:.2g}: exact zeros {counted}, softmax 0/{size}; "
        f"softmax1 rows sum {sums.min():.2f}–{sums.max():.2f}"
    )


class AlternativesExplorer(Explorer):
    """Normalisers and score functions side by side on the same queries and keys.

    Controls: ``width`` (SelectionSlider 1, 2, 4, ..., 256), ``multiplier``
    (FloatLogSlider c from 0.1 to 10; dot-product logits are ``q · k * c/sqrt(d)``,
    also the scale Performer approximates) and ``tau`` (FloatLogSlider 0.01 to
    1, cosine attention's temperature).

    ``queries`` x ``keys`` weights per panel, inputs standard normal from ``seed``;
    or pass ``query`` (L, d0) and ``key`` (S, d0) with d0 <= 256: they are the
    first d0 columns of the inputs and seeded normal columns extend them to
    256 (so at d = d0 the panels use exactly the given arrays).
    Artists the tests read: ``images`` (panel name -> AxesImage); `weights`
    gives the numbers drawn. Raises ValueError for inputs of the wrong rank or
    mismatched widths.
    """

    def __init__(
        self,
        queries: int = 6,
        keys: int = 10,
        seed: int = 0,
        width: int = 16,
        *,
        query: np.ndarray | None = None,
        key: np.ndarray | None = None,
    ) -> None:
        rng = np.random.default_rng(seed)
        widest = _WIDTHS[-1]
        if (query is None) != (key is None):
            raise ValueError("pass both query and key, or neither")
        if query is None:
            self.query_pool = rng.standard_normal((queries, widest))  # (L, 256)
            self.key_pool = rng.standard_normal((keys, widest))  # (S, 256)
        else:
            query, key = np.asarray(query, dtype=float), np.asarray(key, dtype=float)
            if query.ndim != 2 or key.ndim != 2 or query.shape[1] != key.shape[1]:
                raise ValueError(
                    f"need query (L, d0) and key (S, d0) of one width, got {query.shape} "
                    f"and {key.shape}"
                )
            if query.shape[1] > widest:
                raise ValueError(f"inputs of width {query.shape[1]}: at most {widest}")
            extra = widest - query.shape[1]
            self.query_pool = np.hstack(
                [query, rng.standard_normal((len(query), extra))]
            )  # (L, 256)
            self.key_pool = np.hstack([key, rng.standard_normal((len(key), extra))])  # (S, 256)
            queries, keys = len(query), len(key)
        self.seed = seed

        fig = self._make_figure(figsize=(8.4, 4.9), layout="constrained")
        axes = fig.subplots(2, 4, sharex=True, sharey=True)
        self.axes = dict(zip(PANELS, axes.ravel(), strict=True))
        self.images = {}
        for name, ax in self.axes.items():
            self.images[name] = ax.imshow(
                np.zeros((queries, keys)), vmin=0, vmax=1, cmap="viridis", aspect="auto"
            )
            ax.set_xticks(range(0, keys, 3))
            ax.set_yticks(range(queries))
        for ax in axes[1]:
            ax.set_xlabel("key")
        for ax in axes[:, 0]:
            ax.set_ylabel("query")
        fig.colorbar(self.images["softmax"], ax=axes, label="attention weight", shrink=0.8)
        for ax in self.axes.values():
            ax.set_title("", fontsize=8)  # update() changes the text only
        self.suptitle = fig.suptitle("", fontsize=9)
        self._projections: dict[int, np.ndarray] = {}  # width -> Performer's (m, d) projection

        self.width = fit_slider(
            widgets.SelectionSlider(
                options=[(str(d), d) for d in _WIDTHS], value=width, description="head width d"
            ),
            track_px=180,
        )
        self.multiplier = fit_slider(
            widgets.FloatLogSlider(
                value=1.0, base=10, min=-1, max=1, step=0.1, description="c (× 1/√d)"
            ),
            track_px=180,
        )
        self.tau = fit_slider(
            widgets.FloatLogSlider(
                value=0.1, base=10, min=-2, max=0, step=0.1, description="τ (cosine)"
            ),
            track_px=180,
        )
        self._watch(self.width, self.multiplier, self.tau)
        self.live = [
            *self.images.values(),
            *(ax.title for ax in self.axes.values()),
            self.suptitle,
        ]
        self.update()

    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """The queries (L, d) and keys (S, d) at the current head width."""
        d = self.width.value
        return self.query_pool[:, :d], self.key_pool[:, :d]  # (L, d), (S, d)

    @property
    def scale(self) -> float:
        """The multiplier on q · k for the top row: c / sqrt(d)."""
        return self.multiplier.value / math.sqrt(self.width.value)

    def weights(self) -> dict[str, np.ndarray]:
        """Each panel's (L, S) weights at the current controls."""
        q, k = self.inputs()  # (L, d), (S, d)
        d = q.shape[-1]
        logits = q @ k.T * self.scale  # (L, S)
        root = math.sqrt(self.scale)  # Performer estimates exp(q·k*scale) from q√s, k√s
        if d not in self._projections:  # a QR per draw: keep one per width
            self._projections[d] = random_projection(d, _PERFORMER_FEATURES, seed=self.seed)
        projection = self._projections[d]  # (m, d)
        return {
            "softmax": softmax(logits),
            "softmax1": softmax1(logits),
            "sparsemax": sparsemax(logits),
            "entmax15": entmax15(logits),
            "cosine": softmax(cosine_logits(q, k, self.tau.value)),
            "additive": softmax(additive_logits(q, k, additive_params(d, d, seed=self.seed))),
            "linear elu+1": kernel_weights(q, k, elu_feature_map),
            "performer": kernel_weights(q * root, k * root, performer_feature_map(projection)),
        }

    def _title(self, name: str, w: np.ndarray) -> str:
        zeros = int(np.sum(w == 0))
        line = f"{zeros}/{w.size} zeros"
        if name == "softmax1":
            sums = w.sum(-1)
            line = f"rows sum {sums.min():.2f}–{sums.max():.2f}"
        uses = {
            "cosine": f"cos/τ, τ={self.tau.value:.2g}",
            "additive": "vᵀtanh(W₁q+W₂k)",
            "linear elu+1": "no scale",
            "performer": f"m={_PERFORMER_FEATURES} features",
        }
        return f"{name}\n{uses.get(name, 'q·k × c/√d')}\n{line}"

    def headline(self) -> str:
        """The headline at the current controls, counted from the weights drawn."""
        return headline(self.width.value, self.multiplier.value, self.weights())

    def update(self) -> None:
        weights = self.weights()
        for name, w in weights.items():
            self.images[name].set_data(w)
            self.axes[name].title.set_text(self._title(name, w))
        self.suptitle.set_text(headline(self.width.value, self.multiplier.value, weights))


# -- still figures ---------------------------------------------------------------------


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
    fig = Figure(figsize=(8.4, 4.0), layout="constrained")
    FigureCanvasAgg(fig)
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
    ax.set_title(describe_slopes(slopes), fontsize=10)
    ax.legend(fontsize=9)
    return fig


def sink_headline(runs: Mapping[tuple[str, bool], SinkRun]) -> str:
    """What the held-out "nothing" rows do, from the runs' measured means (two lines)."""
    sink = runs["softmax", True]
    fade = runs["softmax1", False]
    return (
        f"'nothing' rows (held out): softmax with a blank first token puts "
        f"{sink.first_weight_nothing:.0%} of their weight on it;\n"
        f"softmax1 without one lets them sum to {fade.row_total_nothing:.2f}"
    )


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
    fig = Figure(figsize=(8.4, 3.3), layout="constrained")
    FigureCanvasAgg(fig)
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


def sigmoid_differential_weights(
    query: np.ndarray, key: np.ndarray, lam: float | None = None
) -> dict[str, np.ndarray]:
    """Softmax, sigmoid and differential weights of one query (L, E) and key (S, E) pair.

    softmax: ``softmax(q·k/sqrt(E))``; sigmoid: `sigmoid_weights` with its
    default scale 1/sqrt(E) and bias -log S; differential:
    `differential_weights` on the two halves of width E/2 with ``lam``
    (default λ_init of the first layer, 0.2). Each (L, S). Raises ValueError
    for an odd E (from `differential_weights`).
    """
    query, key = np.asarray(query, dtype=float), np.asarray(key, dtype=float)
    lam = differential_lambda_init(1) if lam is None else float(lam)
    logits = query @ key.T / math.sqrt(query.shape[-1])  # (L, S)
    return {
        "softmax": softmax(logits),
        "sigmoid": sigmoid_weights(query, key),
        f"differential, λ = {lam:.2g}": differential_weights(query, key, lam),
    }


def sigmoid_differential_headline(weights: Mapping[str, np.ndarray]) -> str:
    """Row sums and signs of each map in ``weights`` (as `sigmoid_differential_weights`)."""
    parts = []
    for name, w in weights.items():
        sums = w.sum(-1)  # (L,)
        negative = int(np.sum(w < 0))
        sign = f", {negative}/{w.size} negative (min {w.min():.2f})" if negative else ""
        parts.append(f"{name.split(',')[0]}: rows sum {sums.min():.2f}–{sums.max():.2f}{sign}")
    return "; ".join(parts)


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
    fig = Figure(figsize=(8.4, 3.4), layout="constrained")
    FigureCanvasAgg(fig)
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
