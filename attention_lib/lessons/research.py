"""What a researcher asks of the trained models (notebooks 04-06), answered with numbers.

- `score_gradient_check`: the scale appears inside the gradient. With
  s = q·k·c, ∂s/∂q = c·k and ∂s/∂k = c·q, so through attention
  dQ = c·dS·K and dK = c·dSᵀ·Q (dS the softmax's backward). Checked with
  autograd, in float64, against those formulas.
- `saturation_table`: per trained model, when its heads saturate (the first
  checkpoint at which half of all rows put 99% of their weight on one key,
  `head_stats.saturation_step`), with the softmax-Jacobian norm before and
  after: computed from the training report, not asserted.
- `alignment_table`: how far each trained model's queries and keys are from
  independent (`head_stats.alignment_ratio`: 1 independent, sqrt(d)
  parallel) at the start and end of training, and how big the raw scores
  got. Yang et al. (2022), Tensor Programs V (arXiv:2203.03466), argue that
  training correlates q and k, so q·k grows like d, not sqrt(d), and scale
  1/d keeps logits of order one as the width grows (μP).
- `head_table`: every head of each trained model at one checkpoint: its
  logit spread, attention entropy (and ln n, that of even weights),
  softmax-Jacobian norm and share of saturated rows.
- `width_growth`: the same scale rule at two head widths: does the raw q·k
  grow like sqrt(d) (independence) or like d (alignment)?
- `qk_norm_view`: QK-norm (Dehghani et al., 2023, arXiv:2302.05442, as in
  ViT-22B: normalise queries and keys before the product) applied to a
  trained model's own q and k: every logit is then bounded by the
  temperature τ. ``temperature="fit"`` learns τ after the fact (the one
  whose weights are closest, in KL, to the model's).

The report-based functions read ``trained/report.json`` (or a report
given), so what they print is the committed training run, the same on
every machine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..normalisers import softmax
from .corpus import build_corpus, parse
from .head_stats import parallel_alignment, saturation_step
from .model_figures import MODEL_LABELS
from .model_views import model, pointer_head
from .tiny_model import inference
from .training import load_report

__all__ = [
    "QKNormView",
    "ScoreGradient",
    "alignment_table",
    "fit_qk_temperature",
    "format_table",
    "head_table",
    "qk_norm_view",
    "saturation_table",
    "score_gradient_check",
    "width_growth",
]


@dataclass(frozen=True)
class ScoreGradient:
    """Autograd's gradients of attention against the written-out formulas (float64).

    ``dq_error``, ``dk_error``: the largest differences; ``dq_norm`` the norm
    of dL/dQ at this scale, ``dq_norm_unit`` at scale 1 on the same inputs:
    their ratio is the scale, the factor the gradient carries.
    """

    width: int
    scale: float
    dq_error: float
    dk_error: float
    dq_norm: float
    dq_norm_unit: float


def _attention_grads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, c: float):
    """(autograd dQ, dK) and (formula dQ, dK) of L = Σ g ∘ softmax(c·QKᵀ)V."""
    q = q.clone().requires_grad_()
    k = k.clone().requires_grad_()
    p = torch.softmax(c * (q @ k.T), dim=-1)  # (L, S)
    ((p @ v) * g).sum().backward()
    with torch.no_grad():
        dp = g @ v.T  # (L, S)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))  # (L, S): the softmax's backward
        dq = c * ds @ k  # (L, d): ∂s/∂q = c·k
        dk = c * ds.T @ q  # (S, d): ∂s/∂k = c·q
    return (q.grad, k.grad), (dq, dk)


def score_gradient_check(
    width: int = 64, length: int = 8, scale: float | None = None, seed: int = 0
) -> ScoreGradient:
    """Check dQ = c·dS·K and dK = c·dSᵀ·Q with autograd on seeded float64 inputs.

    q, k, v (length, width) with N(0, 1) entries, a random upstream gradient
    g; c = ``scale`` (default 1/sqrt(width)). Raises ValueError for a width
    or length below 1.
    """
    if width < 1 or length < 1:
        raise ValueError(f"width and length must be positive, got {width} and {length}")
    c = 1 / math.sqrt(width) if scale is None else float(scale)
    gen = torch.Generator().manual_seed(seed)
    q, k, v, g = (torch.randn(length, width, generator=gen, dtype=torch.float64) for _ in "qkvg")
    (dq, dk), (dq_f, dk_f) = _attention_grads(q, k, v, g, c)
    # the same softmax weights at scale 1: multiply q by c first, (c·q)·k = c·(q·k), so
    # only the factor the gradient carries differs
    (dq1, _), _ = _attention_grads(q * c, k, v, g, 1.0)
    return ScoreGradient(
        width,
        c,
        float((dq - dq_f).abs().max()),
        float((dk - dk_f).abs().max()),
        float(dq.norm()),
        float(dq1.norm()),
    )


# -- from the training report ----------------------------------------------------------


def _runs(report: dict[str, Any] | None, names: Sequence[str] | None) -> dict[str, Any]:
    report = load_report() if report is None else report
    names = list(report["models"]) if names is None else list(names)
    return {n: report["models"][n] for n in names}


def _heads(entry: dict[str, Any], metric: str) -> np.ndarray:
    return np.asarray(entry["heads"][metric], dtype=float)  # (layers, H)


def saturation_table(
    report: dict[str, Any] | None = None,
    names: Sequence[str] | None = None,
    threshold: float = 0.5,
) -> list[dict[str, Any]]:
    """Per model: its scale, the first saturated checkpoint (`saturation_step`; None if
    none), and at the start and end of training the mean over heads of the share of
    saturated rows and of the softmax-Jacobian norm, and its final held-out accuracy."""
    rows = []
    for name, run in _runs(report, names).items():
        first, last = run["checkpoints"][0], run["checkpoints"][-1]
        rows.append(
            {
                "model": name,
                "label": MODEL_LABELS.get(name, name),
                "scale": run["scale"],
                "saturates_at": saturation_step(run["checkpoints"], threshold),
                "saturated_start": float(_heads(first, "saturated_fraction").mean()),
                "saturated_end": float(_heads(last, "saturated_fraction").mean()),
                "jacobian_start": float(_heads(first, "jacobian_norm").mean()),
                "jacobian_end": float(_heads(last, "jacobian_norm").mean()),
                "accuracy": run["final"]["heldout_accuracy"]["all"],
            }
        )
    return rows


def alignment_table(
    report: dict[str, Any] | None = None, names: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Per model: head width d, and at the start and end of training the mean (and
    largest) `alignment_ratio` over heads, with sqrt(d), the ratio of parallel q and k;
    the mean raw q·k size (rms) and the logit spread at the end."""
    rows = []
    for name, run in _runs(report, names).items():
        d = run["model"]["head_width"]
        first, last = run["checkpoints"][0], run["checkpoints"][-1]
        rows.append(
            {
                "model": name,
                "label": MODEL_LABELS.get(name, name),
                "d": d,
                "alignment_start": float(_heads(first, "alignment_ratio").mean()),
                "alignment_end": float(_heads(last, "alignment_ratio").mean()),
                "alignment_end_max": float(_heads(last, "alignment_ratio").max()),
                "parallel": parallel_alignment(d),
                "raw_qk_start": float(_heads(first, "raw_qk_rms").mean()),
                "raw_qk_end": float(_heads(last, "raw_qk_rms").mean()),
                "spread_end": float(_heads(last, "logit_spread").mean()),
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
    for name, run in _runs(report, names).items():
        checkpoints = run["checkpoints"]
        if not -len(checkpoints) <= checkpoint < len(checkpoints):
            raise IndexError(
                f"checkpoint {checkpoint} out of range: {name} has {len(checkpoints)} checkpoints"
            )
        entry = checkpoints[checkpoint]
        metrics = ("logit_spread", "entropy", "log_keys", "jacobian_norm", "saturated_fraction")
        values = {m: _heads(entry, m) for m in metrics}  # each (layers, H)
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


def width_growth(
    narrow: str = "sqrt_d16", wide: str = "sqrt_d64", report: dict[str, Any] | None = None
) -> dict[str, float]:
    """How the trained raw q·k (rms, mean over heads, end of training) grew from the
    narrow model to the wide one, against sqrt(d ratio) (independence) and the d ratio
    (full alignment)."""
    runs = _runs(report, [narrow, wide])
    d_n, d_w = (runs[n]["model"]["head_width"] for n in (narrow, wide))
    size = {n: float(_heads(runs[n]["checkpoints"][-1], "raw_qk_rms").mean()) for n in runs}
    grew = size[wide] / size[narrow]
    return {
        "d_narrow": d_n,
        "d_wide": d_w,
        "grew": grew,
        "independent": math.sqrt(d_w / d_n),
        "aligned": d_w / d_n,
        "exponent": math.log(grew) / math.log(d_w / d_n),  # q·k ∝ d^exponent
    }


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> str:
    """Rows as a text table: ``columns`` are (key, header, format spec); None prints '-'.
    The first column is left-aligned, the others right-aligned."""
    cells = [
        ["-" if row[key] is None else format(row[key], spec) for key, _, spec in columns]
        for row in rows
    ]
    headers = [header for _, header, _ in columns]
    widths = [max(len(c) for c in column) for column in zip(headers, *cells, strict=True)]

    def line(items: Sequence[str]) -> str:
        first = f"{items[0]:<{widths[0]}}"
        rest = [f"{x:>{w}}" for x, w in zip(items[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest])

    return "\n".join(line(items) for items in [headers, *cells])


# -- QK-norm on a trained model ----------------------------------------------------------


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)  # (..., d)


def _qk(
    name: str, sentences: Sequence[str]
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """Per sentence: q, k (layers, H, T, d), trained logits (layers, H, T, T), length T."""
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


def _qk_norm_logits(q: np.ndarray, k: np.ndarray, temperature: float) -> np.ndarray:
    """τ·cos(q_i, k_j): (..., T, T), every entry in [-τ, τ]."""
    return temperature * _unit(q) @ _unit(k).swapaxes(-1, -2)  # (..., T, T)


def _causal_softmax(logits: np.ndarray) -> np.ndarray:
    keep = np.tril(np.ones(logits.shape[-2:], dtype=bool))  # (T, T)
    return softmax(np.where(keep, logits, -np.inf), axis=-1)  # (..., T, T)


def fit_qk_temperature(
    name: str = "none_d16", sentences: Sequence[str] | None = None, bounds=(0.1, 100.0)
) -> float:
    """The τ whose QK-norm weights are closest to the trained model's own (mean KL over
    every head, layer and row of ``sentences``, default the held-out pronoun showcase),
    by golden-section search on log τ within ``bounds``: QK-norm's temperature, learned
    after the fact."""
    from .model_views import showcase

    data = _qk(name, showcase("pronoun") if sentences is None else sentences)

    def loss(log_tau: float) -> float:
        total, count = 0.0, 0
        for q, k, logits, _ in data:
            p = _causal_softmax(logits)  # (layers, H, T, T)
            r = _causal_softmax(_qk_norm_logits(q, k, math.exp(log_tau)))
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
    from .model_views import _shown

    parsed = parse(sentence)
    ((q, k, logits, n),) = _qk(name, [sentence])
    d = q.shape[-1]
    if temperature is None:
        tau = math.sqrt(d)
    elif temperature == "fit":
        tau = fit_qk_temperature(name)
    else:
        tau = float(temperature)
        if not (math.isfinite(tau) and tau > 0):
            raise ValueError(f"temperature must be positive and finite, got {temperature!r}")
    layer, h = pointer_head(name, parsed.family) if head is None else head
    qk = _qk_norm_logits(q, k, tau)  # (layers, H, T, T)
    keep = np.tril(np.ones((n, n), dtype=bool))
    row = parsed.query
    return QKNormView(
        sentence=sentence,
        words=_shown(parsed.words[: row + 1]),
        head=(layer, h),
        temperature=tau,
        logits=logits[layer, h, row, : row + 1],
        weights=_causal_softmax(logits)[layer, h, row, : row + 1],
        qk_logits=qk[layer, h, row, : row + 1],
        qk_weights=_causal_softmax(qk)[layer, h, row, : row + 1],
        largest_logit=float(np.abs(logits[..., keep]).max()),
        largest_qk_logit=float(np.abs(qk[..., keep]).max()),
    )
