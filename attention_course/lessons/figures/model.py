"""The training report drawn: every trained model's loss, accuracy and heads over training.

`report_figure` draws a training report (`attention_course.model.report`): the
loss, the held-out pronoun accuracy, and per checkpoint the heads' logit
spread, entropy, softmax-Jacobian norm and query-key alignment, one line per
model. `save_report_figure` writes it as ``report.png`` beside the report
(``make model`` runs ``python -m attention_course.lessons.figures``). The
slider views of the trained model are in `attention_course.explorers.trained`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...model.catalogue import MODEL_LABELS
from ...model.report import head_metric
from .still import StillFigure
from .style import MODEL_COLOURS, MODEL_MARKERS, still_figure

__all__ = ["report_figure", "save_report_figure"]


def _checkpoint_series(run: dict[str, Any], metric: str, reduce: str = "mean") -> tuple:
    """(steps, value per checkpoint) of a head metric reduced over all layers and heads."""
    steps = [c["step"] for c in run["checkpoints"]]
    values = [head_metric(c, metric) for c in run["checkpoints"]]
    pick = {"mean": np.mean, "max": np.max, "min": np.min}[reduce]
    return np.asarray(steps), np.asarray([pick(v) for v in values])


def report_figure(report: dict[str, Any], names: Sequence[str] | None = None) -> StillFigure:
    """Six panels over training, one line per model: loss (100-step means), held-out pronoun
    accuracy, and the mean over all heads of logit spread, entropy / ln n, Jacobian norm and
    query-key alignment ratio (8 x 7.5 in). Each model has its colour and its marker; the
    text alternative gives every model's values at the last checkpoint."""
    names = list(report["models"]) if names is None else list(names)
    fig = still_figure(8, 7.5)
    axes = fig.subplots(3, 2)
    ax_loss, ax_acc, ax_spread, ax_entropy, ax_jac, ax_align = axes.ravel()
    for name in names:
        run = report["models"][name]
        label, colour = MODEL_LABELS.get(name, name), MODEL_COLOURS.get(name)
        marker = MODEL_MARKERS.get(name, "o") + "-"
        losses = np.asarray(run["losses"], dtype=float)  # (steps,)
        n = len(losses) // 100
        if n:
            means = losses[: n * 100].reshape(n, 100).mean(axis=1)  # (n,)
            ax_loss.plot(np.arange(1, n + 1) * 100, means, marker, ms=3, color=colour, label=label)
        steps = [c["step"] for c in run["checkpoints"]]
        acc = [c["probe_accuracy"]["pronoun"] for c in run["checkpoints"]]
        ax_acc.plot(steps, acc, marker, ms=3, color=colour, label=label)
        for ax, metric in (
            (ax_spread, "logit_spread"),
            (ax_jac, "jacobian_norm"),
            (ax_align, "alignment_ratio"),
        ):
            ax.plot(*_checkpoint_series(run, metric), marker, ms=3, color=colour, label=label)
        s, ent = _checkpoint_series(run, "entropy")
        _, uniform = _checkpoint_series(run, "log_keys")
        ax_entropy.plot(s, ent / uniform, marker, ms=3, color=colour, label=label)
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
    return StillFigure(fig, _report_alt(report, names))


_MARKER_NAMES = {"o": "circles", "s": "squares", "^": "triangles", "D": "diamonds"}


def _report_alt(report: dict[str, Any], names: Sequence[str]) -> str:
    """What `report_figure` shows, in words: the panels, and each model at its last checkpoint."""
    finals = []
    for name in names:
        run = report["models"][name]
        last = run["checkpoints"][-1]
        entropy = np.mean(head_metric(last, "entropy")) / np.mean(head_metric(last, "log_keys"))
        marker = _MARKER_NAMES.get(MODEL_MARKERS.get(name, "o"), "circles")
        finals.append(
            f"{MODEL_LABELS.get(name, name)} ({marker}): loss "
            f"{np.mean(run['losses'][-100:]):.2f}, pronouns right "
            f"{last['probe_accuracy']['pronoun']:.2f}, logit spread "
            f"{np.mean(head_metric(last, 'logit_spread')):.2f}, entropy ÷ ln(keys) "
            f"{entropy:.2f}, Jacobian norm {np.mean(head_metric(last, 'jacobian_norm')):.2f}, "
            f"alignment {np.mean(head_metric(last, 'alignment_ratio')):.2f}"
        )
    steps = report["models"][names[0]]["checkpoints"][-1]["step"]
    return (
        f"Six line charts over {steps:,} training steps, one line per model: training loss, "
        "pronoun answers right on held-out sentences, and the mean over heads of the logit "
        "spread, the entropy divided by ln(keys), the softmax-Jacobian norm and the query-key "
        "alignment. At the last checkpoint, " + "; ".join(finals) + "."
    )


def save_report_figure(report: dict[str, Any], path: str | Path, dpi: int = 72) -> int:
    """`report_figure` as a PNG at ``path`` (what ``make model`` writes beside the report,
    ``report.png``); returns its size in bytes."""
    report_figure(report).fig.savefig(path, dpi=dpi)
    return Path(path).stat().st_size
