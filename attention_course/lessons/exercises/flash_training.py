"""Notebook 07: the course's small model trained with the learner's FlashAttention, beside the
model's own attention, and the figure of both loss curves.

`train_with_layer(cls, gate)` trains the tiny model of `attention_course.model`
(``sqrt_d16``: scale 1/sqrt(d), heads 16 wide) twice from the same
initial weights on the same batches (`TRAINING`): once with the model's own
attention, once with ``cls.apply(q, k, v, True)`` in its place
(`attention_course.model.training.train`'s ``attention``), and scores both on
400 held-out agreement sentences, each with the attention it trained with.
It uses the learner's class where their attempt passed its check (the
``gate``'s last report), with the course's flash_forward and flash_backward
where theirs are not working (as the check does); else the course's class,
and says so. `LayerTraining.figure` draws both loss curves in one still
figure. Only the agreement family is trained: its held-out accuracy climbs
from chance (the verb is "was" or "were") to every sentence right within
the 250 steps that fit in a few seconds, a plateau that both runs reach on
every machine. A few seconds is what the numpy FlashAttention allows: it
calls flash_forward once per head of every batch, in Python.

Importing this module imports neither torch nor matplotlib.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["FAMILY", "MODEL", "SCORED", "TRAINING", "LayerTraining", "train_with_layer"]

#: the model trained: the 1/sqrt(d) rule the learner's flash_forward uses, heads 16 wide
MODEL = "sqrt_d16"
#: the family trained and scored: subject-verb agreement across a clause or a noun
FAMILY = "agreement"
#: how many held-out sentences of the family each run is scored on
SCORED = 400


def _config() -> Any:
    from dataclasses import replace

    from ...model.training import TrainConfig

    return replace(
        TrainConfig(),
        steps=250,
        batch=16,
        lr=3e-3,
        warmup=25,
        checkpoint_every=10**6,  # measured only before and after: the probe costs time
        early_checkpoints=(),
        family_weights=(("pronoun", 0.0), ("agreement", 1.0), ("name", 0.0)),
        probe=((FAMILY, 32),),
    )


#: how the model is trained, both times (`attention_course.model.training.TrainConfig`'s fields)
TRAINING = {
    "steps": 250,
    "batch": 16,
    "lr": 3e-3,
    "family": FAMILY,
}


@dataclass
class LayerTraining:
    """Two training runs of one model: the model's own attention and a FlashAttention class.

    ``losses`` maps each run's label to its training loss at every step
    (nats per token); ``accuracy`` to its share of held-out agreement
    sentences answered right; ``seconds`` to its wall-clock time. ``who``
    names the class trained with (the learner's, or the course's), ``notes``
    what stood in for what.
    """

    who: str
    losses: dict[str, list[float]] = field(default_factory=dict)
    accuracy: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    REFERENCE = "the model's own attention"

    @property
    def flash(self) -> str:
        return next(k for k in self.losses if k != self.REFERENCE)

    @property
    def reached(self) -> bool:
        """Whether the FlashAttention run's held-out accuracy is at least the reference's."""
        return self.accuracy[self.flash] >= self.accuracy[self.REFERENCE]

    @property
    def gap(self) -> float:
        """The largest |difference| between the two loss curves, over every step."""
        a, b = (np.asarray(self.losses[k]) for k in (self.REFERENCE, self.flash))
        return float(np.max(np.abs(a - b)))

    def summary(self) -> str:
        """What the page prints: which class, the accuracies (two decimals), the verdict."""
        lines = [*self.notes]
        steps, batch = TRAINING["steps"], TRAINING["batch"]
        lines.append(
            f"trained twice from the same weights on the same {steps} batches of {batch} "
            f"{FAMILY} sentences: with {self.REFERENCE}, and with {self.who}"
        )
        for label, value in self.accuracy.items():
            lines.append(
                f"  {SCORED} held-out {FAMILY} sentences, share right, {label}: {value:.2f}"
            )
        lines.append(f"FlashAttention reaches the reference's accuracy: {self.reached}")
        return "\n".join(lines)

    def timing(self) -> str:
        """How long each run took here (wall clock, evaluation included)."""
        return "; ".join(f"{k}: {v:.1f} s" for k, v in self.seconds.items())

    def figure(self) -> Any:
        """Both loss curves in one labelled still figure, with its text alternative."""
        from ..figures.still import StillFigure
        from ..figures.style import BLUE, VERMILLION, still_figure

        fig = still_figure(height=3.6)
        ax = fig.add_subplot()
        styles = {
            self.REFERENCE: {"color": BLUE, "linestyle": "-", "marker": "o", "markevery": (0, 25)},
            self.flash: {"color": VERMILLION, "linestyle": "--", "marker": "s",
                         "markevery": (12, 25)},
        }  # fmt: skip
        for label, losses in self.losses.items():
            steps = np.arange(1, len(losses) + 1)  # (steps,)
            ax.plot(steps, losses, label=label, linewidth=1.4, markersize=5, **styles[label])
        ax.set_xlabel("training step (one batch of 16 sentences)")
        ax.set_ylabel("training loss (nats per token)")
        ax.set_title("The tiny model trained with its own attention and with FlashAttention")
        ax.legend(frameon=False)
        ax.grid(alpha=0.3)
        parts = []
        for label, losses, kind in zip(
            self.losses,
            self.losses.values(),
            ("solid blue, circles", "dashed vermillion, squares"),
            strict=True,
        ):
            parts.append(
                f"{label[0].upper()}{label[1:]} ({kind}): the loss falls from "
                f"{losses[0]:.2f} to {losses[-1]:.2f}, "
                f"held-out {FAMILY} accuracy {self.accuracy[label]:.2f}"
            )
        alt = (
            f"Line chart of the training loss in nats per token over {len(losses)} steps. "
            + ". ".join(parts)
            + f". The two curves lie on top of each other: the largest gap at any step is "
            f"{self.gap:.2g}."
        )
        return StillFigure(fig, alt)


def _attend(cls: Any) -> Any:
    """The model's attention call (q, k, v, scale) -> out, through ``cls.apply``, causal; the
    learner's flash_forward scales by 1/sqrt(E), as this model does."""

    def attend(q: Any, k: Any, v: Any, scale: float) -> Any:
        if abs(scale * q.shape[-1] ** 0.5 - 1) > 1e-12:
            raise ValueError(f"FlashAttention scales by 1/sqrt(E); this model uses {scale}")
        return cls.apply(q, k, v, True)  # (B, H, T, dv)

    return attend


def _scored(corpus: Any) -> list[Any]:
    """The held-out sentences both runs are scored on: `SCORED` of the agreement family, drawn
    once (seeded; the numpy FlashAttention takes about a second for them)."""
    pool = corpus.heldout[FAMILY]
    picks = np.random.default_rng(0).permutation(len(pool))[:SCORED]  # (SCORED,)
    return [pool[i] for i in sorted(picks)]


def _run(attention: Any, corpus: Any) -> tuple[list[float], float, float]:
    """(losses, held-out accuracy, seconds) of one training run with ``attention``."""
    from ...model.training import evaluate, train

    started = time.perf_counter()
    model, run = train(MODEL, _config(), corpus=corpus, attention=attention)
    held = evaluate(model, corpus, _scored(corpus), attention)
    return run.losses, held.accuracy["all"], time.perf_counter() - started


def train_with_layer(cls: Any, gate: Any = None) -> LayerTraining | str:
    """Train the model with its own attention and with a FlashAttention class (see the module
    docstring): the learner's ``cls`` where ``gate``'s last attempt passed, else the
    course's. Returns the `LayerTraining`, or one sentence on why it could not run (a graded
    class's install holds no course class to stand in)."""
    from .flash_layer import _inner_functions, namespace_of
    from .solutions import INSTALLED, solution_function

    passed = bool(getattr(getattr(gate, "report", None), "passed", False))
    if passed:
        who, layer, space = "your FlashAttention", cls, namespace_of(cls)
        notes: tuple[str, ...] = ()
    elif INSTALLED:
        who, layer, space = "the course's FlashAttention", solution_function("FlashAttention"), None
        notes = (
            "Your FlashAttention has not passed its check yet, so this run uses the course's "
            "(its code stays hidden): run this cell again once yours passes.",
        )
    else:
        return (
            "Your FlashAttention has not passed its check yet, and this installation holds no "
            "course solution to stand in: pass the check above, then run this cell again."
        )
    import torch

    from ...model.corpus import build_corpus

    corpus = build_corpus()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the model's own training: one thread, one order of sums
    try:
        result = LayerTraining(who)
        losses, accuracy, seconds = _run("model", corpus)
        result.losses[LayerTraining.REFERENCE] = losses
        result.accuracy[LayerTraining.REFERENCE] = accuracy
        result.seconds[LayerTraining.REFERENCE] = seconds
        if space is None:
            losses, accuracy, seconds = _run(_attend(layer), corpus)
        else:
            with _inner_functions(space) as (_, inner, problem):
                if problem:
                    return problem
                notes = tuple(inner)
                losses, accuracy, seconds = _run(_attend(layer), corpus)
        result.losses[who] = losses
        result.accuracy[who] = accuracy
        result.seconds[who] = seconds
        result.notes = notes
    finally:
        torch.set_num_threads(threads)
    return result
