"""The trained models' heads: when they saturate, and what QK-norm would do to them.

- `saturation_table`: per trained model, when its heads saturate (the first
  checkpoint at which half of all rows put 99% of their weight on one key,
  `attention_course.model.head_stats.saturation_step`), with the
  softmax-Jacobian norm before and after: read from the training report,
  the same on every machine.
- `head_table`: every head of each trained model at one checkpoint: its
  logit spread, attention entropy (and ln n, that of even weights),
  softmax-Jacobian norm and share of saturated rows.
- `qk_norm_view`: QK-norm (`attention_lib.variants.qk_norm_logits`, as in
  ViT-22B) applied to a trained model's own q and k: every logit is then
  bounded by the temperature τ. ``temperature="fit"`` learns τ after the
  fact (`fit_qk_temperature`: the one whose weights are closest, in KL, to
  the model's). They run the model, so they import torch (this module does not).

`attention_course.lessons.printing.format_table` prints the tables' rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attention_lib.inputs import positive_number
from attention_lib.masks import apply_mask, causal_mask
from attention_lib.normalisers import softmax
from attention_lib.variants import qk_norm_logits

from ...model.catalogue import MODEL_LABELS
from ...model.corpus import build_corpus, parse
from ...model.head_stats import saturation_step
from ...model.report import head_metric, report_models

__all__ = [
    "QKNormView",
    "fit_qk_temperature",
    "head_table",
    "qk_norm_view",
    "saturation_table",
]


def saturation_table(
    report: dict[str, Any] | None = None,
    names: Sequence[str] | None = None,
    threshold: float = 0.5,
) -> list[dict[str, Any]]:
    """Per model: its scale, the first saturated checkpoint (`saturation_step`; None if
    none), and at the start and end of training the mean over heads of the share of
    saturated rows and of the softmax-Jacobian norm, and its final held-out accuracy."""
    rows = []
    for name, run in report_models(report, names).items():
        first, last = run["checkpoints"][0], run["checkpoints"][-1]
        rows.append(
            {
                "model": name,
                "label": MODEL_LABELS.get(name, name),
                "scale": run["scale"],
                "saturates_at": saturation_step(run["checkpoints"], threshold),
                "saturated_start": float(head_metric(first, "saturated_fraction").mean()),
                "saturated_end": float(head_metric(last, "saturated_fraction").mean()),
                "jacobian_start": float(head_metric(first, "jacobian_norm").mean()),
                "jacobian_end": float(head_metric(last, "jacobian_norm").mean()),
                "accuracy": run["final"]["heldout_accuracy"]["all"],
            }
        )
    return rows


def head_table(
    report: dict[str, Any] | None = None,
    names: Sequence[str] | None = None,
    checkpoint: int = -1,
) -> list[dict[str, Any]]:
    """One row per head (model, then layer, then head; layers and heads counted from 1)
    at checkpoint index ``checkpoint`` (default the last): ``step``, ``logit_spread``
    (std of the scaled scores), ``entropy`` and ``log_keys`` (nats; ln n is even
    weights), ``jacobian_norm`` and ``saturated_fraction``, read from the report.
    Raises IndexError for a checkpoint the report does not have."""
    rows = []
    for name, run in report_models(report, names).items():
        checkpoints = run["checkpoints"]
        if not -len(checkpoints) <= checkpoint < len(checkpoints):
            raise IndexError(
                f"checkpoint {checkpoint} out of range: {name} has {len(checkpoints)} checkpoints"
            )
        entry = checkpoints[checkpoint]
        metrics = ("logit_spread", "entropy", "log_keys", "jacobian_norm", "saturated_fraction")
        values = {m: head_metric(entry, m) for m in metrics}  # each (layers, H)
        layers, heads = values["entropy"].shape
        for layer in range(layers):
            for head in range(heads):
                row = {
                    "model": name,
                    "label": MODEL_LABELS.get(name, name),
                    "step": entry["step"],
                    "layer": layer + 1,
                    "head": head + 1,
                }
                rows.append(row | {m: float(v[layer, head]) for m, v in values.items()})
    return rows


# -- QK-norm on a trained model ----------------------------------------------------------


def _qk(
    name: str, sentences: Sequence[str]
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """Per sentence: q, k (layers, H, T, d), trained logits (layers, H, T, T), length T."""
    import torch

    from ...model.tiny_model import inference
    from ...model.views import model

    corpus = build_corpus()
    out = []
    for sentence in sentences:
        parsed = parse(sentence)
        tokens = torch.from_numpy(corpus.encode([parsed]))[:, : len(parsed.words)]  # (1, T)
        trace: list = []
        with inference():
            model(name)(tokens, trace=trace)
        q = np.stack([t.q[0].double().numpy() for t in trace])  # (layers, H, T, d)
        k = np.stack([t.k[0].double().numpy() for t in trace])  # (layers, H, T, d)
        logits = np.stack([t.logits[0].double().numpy() for t in trace])  # (layers, H, T, T)
        out.append((q, k, logits, len(parsed.words)))
    return out


def _causal_softmax(logits: np.ndarray) -> np.ndarray:
    """softmax of ``logits`` (..., T, T) with the causal mask: the weights a model computes."""
    t = logits.shape[-1]
    return softmax(apply_mask(np, logits, causal_mask(np, (0, t), (0, t))), axis=-1)


def fit_qk_temperature(
    name: str = "none_d16", sentences: Sequence[str] | None = None, bounds=(0.1, 100.0)
) -> float:
    """The τ whose QK-norm weights are closest to the trained model's own (mean KL over
    every head, layer and row of ``sentences``, default the held-out pronoun showcase),
    by golden-section search on log τ within ``bounds``: QK-norm's temperature, learned
    after the fact."""
    from ...model.views import showcase  # torch

    data = _qk(name, showcase("pronoun") if sentences is None else sentences)

    def loss(log_tau: float) -> float:
        total, count = 0.0, 0
        for q, k, logits, _ in data:
            p = _causal_softmax(logits)  # (layers, H, T, T)
            r = _causal_softmax(qk_norm_logits(q, k, math.exp(log_tau)))
            kl = np.where(
                p > 0, p * (np.log(np.where(p > 0, p, 1)) - np.log(np.maximum(r, 1e-300))), 0
            )
            total += float(kl.sum())
            count += p.shape[0] * p.shape[1] * p.shape[2]
        return total / count

    lo, hi = math.log(bounds[0]), math.log(bounds[1])
    golden = (math.sqrt(5) - 1) / 2
    a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(60):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - golden * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + golden * (hi - lo)
            fb = loss(b)
    return math.exp((lo + hi) / 2)


@dataclass(frozen=True)
class QKNormView:
    """One head's query row in a trained model, with and without QK-norm.

    ``logits``/``weights``: the model's own (n,); ``qk_logits``/``qk_weights``:
    with unit-length q and k and temperature ``temperature``, so every
    QK-norm logit lies in [-τ, τ]. ``largest_logit`` is the model's largest
    |logit| over every head, layer and row of the sentence; ``largest_qk_logit``
    the same under QK-norm.
    """

    sentence: str
    words: tuple[str, ...]
    head: tuple[int, int]
    temperature: float
    logits: np.ndarray
    weights: np.ndarray
    qk_logits: np.ndarray
    qk_weights: np.ndarray
    largest_logit: float
    largest_qk_logit: float


def qk_norm_view(
    sentence: str = "the dog was next to the bells and then it barked",
    name: str = "none_d16",
    temperature: float | str | None = None,
    head: tuple[int, int] | None = None,
) -> QKNormView:
    """QK-norm applied to model ``name``'s own queries and keys over ``sentence``.

    ``temperature``: a number, None (sqrt(d): LayerNorm'd q and k times
    1/sqrt(d), as ViT-22B, give logits sqrt(d)·cos up to centring) or "fit"
    (`fit_qk_temperature`). ``head`` defaults to the model's pronoun head.
    """
    from ...model.views import pointer_head, shown_words  # torch

    parsed = parse(sentence)
    ((q, k, logits, n),) = _qk(name, [sentence])
    d = q.shape[-1]
    if temperature is None:
        tau = math.sqrt(d)
    elif temperature == "fit":
        tau = fit_qk_temperature(name)
    else:
        tau = positive_number("temperature", temperature)
    layer, h = pointer_head(name, parsed.family) if head is None else head
    qk = qk_norm_logits(q, k, tau)  # (layers, H, T, T), every entry in [-τ, τ]
    keep = np.tril(np.ones((n, n), dtype=bool))
    row = parsed.query
    return QKNormView(
        sentence=sentence,
        words=shown_words(parsed.words[: row + 1]),
        head=(layer, h),
        temperature=tau,
        logits=logits[layer, h, row, : row + 1],
        weights=_causal_softmax(logits)[layer, h, row, : row + 1],
        qk_logits=qk[layer, h, row, : row + 1],
        qk_weights=_causal_softmax(qk)[layer, h, row, : row + 1],
        largest_logit=float(np.abs(logits[..., keep]).max()),
        largest_qk_logit=float(np.abs(qk[..., keep]).max()),
    )
