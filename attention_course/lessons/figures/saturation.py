"""The still figures of notebook 04: how far raw scores spread, and a saturated head learning."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..saturation import RetrievalRun, describe_training, run_label
from ..scaling import dot_product_samples
from .still import StillFigure
from .style import BLUE, TITLE_SIZE, VERMILLION, still_figure

__all__ = ["retrieval_figure", "spread_figure"]


def spread_figure(width: int = 256, samples: int = 5_000, seed: int = 2) -> Figure:
    """Histograms of ``samples`` dot products q·k of width ``width`` (unit-variance
    components, `dot_product_samples`), raw and divided by sqrt(width), on one axis.

    The title states both standard deviations, computed from the samples. The
    figure (840 px wide) is not known to pyplot: ``display(fig)`` it. Raises
    ValueError as `dot_product_samples` does for a bad width or sample count.
    """
    raw = dot_product_samples(width, samples=samples, rng=seed)  # (samples,)
    scaled = raw / np.sqrt(width)  # (samples,)
    fig = still_figure(height=3.0)
    ax = fig.subplots()
    edge = float(np.abs(raw).max())
    bins = np.linspace(-edge, edge, 121)  # (121,)
    ax.hist(raw, bins=bins, color=VERMILLION, alpha=0.6, label=f"q·k: std {raw.std():.1f}")
    ax.hist(  # an outline over the filled bars: the two differ by more than their colour
        scaled,
        bins=bins,
        histtype="step",
        color=BLUE,
        lw=1.8,
        label=f"q·k / √{width}: std {scaled.std():.2f}",
    )
    ax.set_xlabel("score (a logit before the softmax)")
    ax.set_ylabel(f"count of {samples:,} pairs")
    ax.legend(fontsize=9)
    ax.set_title(
        f"{samples:,} random query-key pairs of width d = {width}: raw scores spread "
        f"{raw.std() / scaled.std():.0f}× wider than scaled ones",
        fontsize=TITLE_SIZE,
    )
    return fig


def retrieval_figure(unscaled: RetrievalRun, scaled: RetrievalRun, window: int = 10) -> StillFigure:
    """Loss (log axis) and mean attention entropy per step for two training runs, side by side.

    The raw per-step loss is drawn faintly under its trailing mean over
    ``window`` steps; the headline is `describe_training` (computed from the
    runs), and so is the text alternative. The unscaled run is drawn solid,
    the scaled one dashed. 840 px wide: it fits a laptop's notebook cell.
    Raises ValueError if the runs differ in length or number of keys.
    """
    if unscaled.loss.shape != scaled.loss.shape or unscaled.keys != scaled.keys:
        raise ValueError(
            "the runs must match: got "
            f"{unscaled.loss.size} steps over {unscaled.keys} keys and "
            f"{scaled.loss.size} steps over {scaled.keys} keys"
        )
    fig = still_figure(height=3.9)
    ax_loss, ax_ent = fig.subplots(1, 2)
    steps = np.arange(1, unscaled.loss.size + 1)  # (steps,)
    for run, color, style in ((unscaled, VERMILLION, "-"), (scaled, BLUE, "--")):
        label = run_label(run)
        ax_loss.plot(steps, run.loss, color=color, lw=0.8, alpha=0.3)
        smooth = run.smoothed_loss(window)  # (steps - window + 1,)
        ax_loss.plot(steps[window - 1 :], smooth, style, color=color, lw=2, label=label)
        ax_ent.plot(steps, run.entropy, style, color=color, lw=2, label=label)
    ax_ent.axhline(
        scaled.max_entropy, color="gray", ls=":", lw=1, label=f"uniform (ln {scaled.keys})"
    )
    ax_loss.set_yscale("log")
    ax_loss.set_ylim(1e-4, 5)  # the faint per-step noise of a solved task goes lower
    ax_loss.set_xlabel("training step")
    ax_loss.set_ylabel("loss (mean squared error)")
    ax_loss.set_title(f"loss (thick: mean of the last {window} steps)", fontsize=TITLE_SIZE)
    ax_loss.legend(fontsize=8)
    ax_ent.set_ylim(0, scaled.max_entropy * 1.08)
    ax_ent.set_xlabel("training step")
    ax_ent.set_ylabel("mean attention entropy (nats)")
    ax_ent.set_title(f"how spread the weights are over {scaled.keys} keys", fontsize=TITLE_SIZE)
    ax_ent.legend(fontsize=8)
    fig.suptitle(describe_training(unscaled, scaled, window), fontsize=TITLE_SIZE)
    entropy = "; ".join(
        f"{run_label(run)} from {run.entropy[0]:.2g} to {run.entropy[-1]:.2g} nats, "
        f"at most {run.entropy.max():.2g}"
        for run in (unscaled, scaled)
    )
    alt = (
        f"Two line charts over {unscaled.loss.size} training steps, {run_label(unscaled)} "
        f"solid vermillion, {run_label(scaled)} dashed blue. Left, the loss on a log scale: "
        + "; ".join(describe_training(unscaled, scaled, window).splitlines())
        + f". Right, the mean attention entropy, against ln {scaled.keys} = "
        f"{scaled.max_entropy:.2f} nats for even weights: {entropy}."
    )
    return StillFigure(fig, alt)
