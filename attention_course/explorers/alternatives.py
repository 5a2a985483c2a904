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

The weights are the library's (`attention_lib.variants`, the normalisers,
`attention_lib.core.masked_scores`); this module chooses the inputs and
draws. The notebook's still figures are in `attention_course.lessons.figures`.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np

from attention_lib.core import masked_scores
from attention_lib.normalisers import entmax15, softmax, softmax1, sparsemax
from attention_lib.variants import (
    additive_logits,
    additive_params,
    cosine_logits,
    elu_feature_map,
    kernel_weights,
    performer_weights,
    random_projection,
)

from .base import Explorer
from .controls import fit_slider

__all__ = ["PANELS", "AlternativesExplorer", "headline"]

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
        # Meshes, not images: each move redraws all eight, and an image is resampled to its
        # axes' pixels on every draw (1.1 ms a panel on the 2-core course machine against
        # 0.3 for a mesh of the same cells). Cell (i, j) is centred on (j, i), row 0 on top.
        for name, ax in self.axes.items():
            self.images[name] = ax.pcolormesh(
                np.arange(keys + 1) - 0.5,
                np.arange(queries + 1) - 0.5,
                np.zeros((queries, keys)),
                vmin=0,
                vmax=1,
                cmap="viridis",
            )
            ax.set_xlim(-0.5, keys - 0.5)
            ax.set_ylim(queries - 0.5, -0.5)  # the first query at the top, as a matrix reads
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
        logits = masked_scores(q, k, scale=self.scale)  # (L, S)
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
            "performer": performer_weights(q, k, projection, self.scale),
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

    def describe(self) -> str:
        """The eight panels' size, the headline's counts, and cosine attention's τ."""
        q, k = self.inputs()
        return (
            f"Eight heatmaps of the weights of {len(q)} queries over {len(k)} keys. "
            f"{self.suptitle.get_text()}; cosine with τ = {self.tau.value:.2g}"
        )

    def update(self) -> None:
        weights = self.weights()
        for name, w in weights.items():
            self.images[name].set_array(w)
            self.axes[name].title.set_text(self._title(name, w))
        self.suptitle.set_text(headline(self.width.value, self.multiplier.value, weights))
