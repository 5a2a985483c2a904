"""The researcher's alternatives explorer: eight ways to weight the same keys.

One seeded set of queries and keys; eight heatmaps of the weights (rows are
queries, columns keys), redrawn when a control moves:

- top row, the dot product ``q · k * c / sqrt(d)`` through four normalisers:
  softmax, softmax1, sparsemax, 1.5-entmax;
- bottom row, other scores: cosine / tau (Swin V2), additive (Bahdanau),
  linear attention with elu+1 features, and Performer's positive random
  features approximating the softmax panel.

Titles count the exact zeros (and, for softmax1, the row sums). Controls: head
width d (the first d columns of fixed wide inputs), the multiplier c on the
dot-product scale, and tau for cosine attention.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np

from ..lessons.alternatives import (
    additive_logits,
    additive_params,
    cosine_logits,
    elu_feature_map,
    kernel_weights,
    performer_feature_map,
    random_projection,
)
from ..normalisers import entmax15, softmax, softmax1, sparsemax
from .base import Explorer

__all__ = ["PANELS", "AlternativesExplorer"]

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


class AlternativesExplorer(Explorer):
    """Normalisers and score functions side by side on the same queries and keys.

    Controls: ``width`` (SelectionSlider 1, 2, 4, ..., 256), ``multiplier``
    (FloatLogSlider c from 0.1 to 10; dot-product logits are ``q · k * c/sqrt(d)``,
    also the scale Performer approximates) and ``tau`` (FloatLogSlider 0.01 to
    1, cosine attention's temperature).

    ``queries`` x ``keys`` weights per panel, inputs standard normal from ``seed``.
    Artists the tests read: ``images`` (panel name -> AxesImage); `weights`
    gives the numbers drawn.
    """

    def __init__(self, queries: int = 6, keys: int = 10, seed: int = 0, width: int = 16) -> None:
        rng = np.random.default_rng(seed)
        self.query_pool = rng.standard_normal((queries, _WIDTHS[-1]))  # (L, 256)
        self.key_pool = rng.standard_normal((keys, _WIDTHS[-1]))  # (S, 256)
        self.seed = seed

        fig = self._make_figure(figsize=(8, 4.9), layout="constrained")
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

        self.width = widgets.SelectionSlider(
            options=[(str(d), d) for d in _WIDTHS], value=width, description="head width d"
        )
        self.multiplier = widgets.FloatLogSlider(
            value=1.0, base=10, min=-1, max=1, step=0.1, description="c (× 1/√d)"
        )
        self.tau = widgets.FloatLogSlider(
            value=0.1, base=10, min=-2, max=0, step=0.1, description="τ (cosine)"
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

    def update(self) -> None:
        for name, w in self.weights().items():
            self.images[name].set_data(w)
            self.axes[name].title.set_text(self._title(name, w))
        self.suptitle.set_text(
            f"Same queries and keys, d = {self.width.value}, c = {self.multiplier.value:.2g}: "
            "sparsemax and entmax give exact zeros, softmax1 rows may sum below 1"
        )
