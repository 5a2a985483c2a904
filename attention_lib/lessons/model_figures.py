"""Still figures of the tiny trained models: training curves, per-head diagnostics, head maps.

`training_figure` draws a training report (``trained/report.json``): the
loss, the held-out pronoun accuracy, and per checkpoint the heads' logit
spread, entropy, softmax-Jacobian norm and query-key alignment, one line per
model. `save_report_figure` writes it beside the report (``make model``).
`head_maps_figure` draws every head's attention over one sentence, the
causal mask's cells hatched. The slider versions are in
`attention_lib.explorers.trained`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = [
    "MASKED_COLOUR",
    "MODEL_LABELS",
    "draw_head_map",
    "head_maps_figure",
    "save_report_figure",
    "training_figure",
]

MODEL_LABELS = {
    "sqrt_d16": "1/√d, d = 16",
    "none_d16": "none (×1), d = 16",
    "inv_d64": "1/d, d = 64",
    "sqrt_d64": "1/√d, d = 64",
}
_COLOURS = {
    "sqrt_d16": "tab:blue",
    "none_d16": "tab:red",
    "inv_d64": "tab:green",
    "sqrt_d64": "tab:purple",
}
MASKED_COLOUR = "#d9d9d9"  # the causal mask's cells: no weight can go there


def _checkpoint_series(run: dict[str, Any], metric: str, reduce: str = "mean") -> tuple:
    """(steps, value per checkpoint) of a head metric reduced over all layers and heads."""
    steps = [c["step"] for c in run["checkpoints"]]
    values = [np.asarray(c["heads"][metric], dtype=float) for c in run["checkpoints"]]
    pick = {"mean": np.mean, "max": np.max, "min": np.min}[reduce]
    return np.asarray(steps), np.asarray([pick(v) for v in values])


def training_figure(report: dict[str, Any], names: Sequence[str] | None = None) -> Figure:
    """Six panels over training, one line per model: loss (100-step means), held-out pronoun
    accuracy, and the mean over all heads of logit spread, entropy / ln n, Jacobian norm and
    query-key alignment ratio. Returns the figure (8 x 7.5 in)."""
    names = list(report["models"]) if names is None else list(names)
    with plt.ioff():
        fig, axes = plt.subplots(3, 2, figsize=(8, 7.5), layout="constrained")
    ax_loss, ax_acc, ax_spread, ax_entropy, ax_jac, ax_align = axes.ravel()
    for name in names:
        run = report["models"][name]
        label, colour = MODEL_LABELS.get(name, name), _COLOURS.get(name)
        losses = np.asarray(run["losses"], dtype=float)  # (steps,)
        n = len(losses) // 100
        if n:
            means = losses[: n * 100].reshape(n, 100).mean(axis=1)  # (n,)
            ax_loss.plot(np.arange(1, n + 1) * 100, means, "o-", ms=3, color=colour, label=label)
        steps = [c["step"] for c in run["checkpoints"]]
        acc = [c["probe_accuracy"]["pronoun"] for c in run["checkpoints"]]
        ax_acc.plot(steps, acc, "o-", ms=3, color=colour, label=label)
        for ax, metric in (
            (ax_spread, "logit_spread"),
            (ax_jac, "jacobian_norm"),
            (ax_align, "alignment_ratio"),
        ):
            ax.plot(*_checkpoint_series(run, metric), "o-", ms=3, color=colour, label=label)
        s, ent = _checkpoint_series(run, "entropy")
        _, uniform = _checkpoint_series(run, "log_keys")
        ax_entropy.plot(s, ent / uniform, "o-", ms=3, color=colour, label=label)
    ax_loss.set(
        title="training loss (mean of 100 steps)", xlabel="step", ylabel="cross-entropy (nats)"
    )
    ax_acc.set(
        title="pronoun answers right (held-out probe)",
        xlabel="step",
        ylabel="share right",
        ylim=(0, 1.02),
    )
    ax_spread.set(
        title="logit spread (mean over heads)", xlabel="step", ylabel="std of scaled scores"
    )
    ax_entropy.set(
        title="entropy ÷ ln(keys) (mean over heads)",
        xlabel="step",
        ylabel="entropy / ln(keys)",
        ylim=(0, 1.02),
    )
    ax_jac.set(
        title="softmax-Jacobian norm (mean over heads)", xlabel="step", ylabel="‖diag(p) − ppᵀ‖ (F)"
    )
    ax_align.axhline(1, color="grey", ls="--", lw=1, label="independent q, k")
    ax_align.set(
        title="q·k alignment (mean over heads)", xlabel="step", ylabel="rms(q·k) / rms(|q||k|/√d)"
    )
    for ax in axes.ravel():
        ax.title.set_fontsize(9)
    ax_acc.legend(fontsize=7, title="scale rule, head width", title_fontsize=7)
    ax_align.legend(fontsize=7)
    return fig


def save_report_figure(report: dict[str, Any], path: str | Path, dpi: int = 72) -> int:
    """`training_figure` as a PNG at ``path``; returns its size in bytes."""
    fig = training_figure(report)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return Path(path).stat().st_size


def draw_head_map(
    ax: Any, weights: np.ndarray, words: Sequence[str], title: str = "", labels: bool = True
) -> Any:
    """One head's (T, T) weights as a heatmap on ``ax``; the masked cells (key after query)
    hatched grey. Returns the image. Rows are queries (the word looking), columns keys."""
    t = len(words)
    visible = np.tril(np.ones((t, t), dtype=bool))  # (T, T)
    shown = np.ma.masked_array(weights, mask=~visible)  # (T, T)
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad(MASKED_COLOUR)
    image = ax.imshow(shown, cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    ax.pcolormesh(
        np.arange(t + 1) - 0.5,
        np.arange(t + 1) - 0.5,
        np.ma.masked_array(np.ones((t, t)), mask=visible),
        cmap=ListedColormap(["none"]),
        hatch="///",
        edgecolor="#9a9a9a",
        lw=0,
    )
    if labels:
        ax.set_xticks(range(t), words, rotation=90, fontsize=7)
        ax.set_yticks(range(t), words, fontsize=7)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=8)
    return image


def head_maps_figure(weights: np.ndarray, words: Sequence[str], title: str = "") -> Figure:
    """Every head's weights (layers, H, T, T) over one sentence: a grid of heatmaps, rows
    layers, columns heads, word labels on the outer axes, one colour bar and a legend
    patch for the masked cells."""
    layers, heads = weights.shape[:2]
    with plt.ioff():
        fig, axes = plt.subplots(
            layers, heads, figsize=(8, 2.1 * layers + 0.9), layout="constrained", squeeze=False
        )
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer, head]
            image = draw_head_map(ax, weights[layer, head], words, labels=True)
            ax.set_title(f"layer {layer}, head {head}", fontsize=8)
            if layer != layers - 1:
                ax.set_xticklabels([])
            if head != 0:
                ax.set_yticklabels([])
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    fig.legend(
        handles=[
            Patch(
                facecolor=MASKED_COLOUR,
                hatch="///",
                edgecolor="#9a9a9a",
                label="masked: a later word (causal)",
            )
        ],
        loc="outside lower center",
        fontsize=8,
    )
    fig.supylabel("query: the word looking", fontsize=9)
    fig.supxlabel("key: the word looked at", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
