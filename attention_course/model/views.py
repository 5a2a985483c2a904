"""The trained model seen from the notebooks: where a word looks, every head's map.

Functions the notebooks call on the committed weights (`load_model`), each
returning plain numbers (numpy) a notebook prints or an explorer draws:

- `where_it_looks`: for a sentence of `SHOWCASE`, where the pronoun (or the
  word whose next word needs an earlier one) puts its attention, per head,
  as words with weights, with every head's scale multiplied by a volume
  knob (the model really runs at that volume, so its guess of the next word
  changes too; `attention_lib.scales.turn_volume` rescales fixed trained
  scores instead), and `pointer_head` is the head that finds the
  antecedent most often on held-out sentences (read from the training report).
- `attention_maps`: every head's (T, T) weights over a sentence.

These run the committed weights in numpy (`numpy_model`, the forward pass of
`attention_course.model.weights`): notebooks 01 and 02 call them, and torch
would cost each learner's kernel about 150 MiB.

- `swap_attention`: the model's forward with its attention call swapped for
  `attention_lib.scaled_dot_product_attention`, PyTorch's SDPA and
  `attention_lib.flash_attention`: the largest logit difference of each.
- `heldout_check`: the held-out answers recomputed from the loaded weights,
  next to the training report's figures.

These two and `model` (the torch model) import torch when called; importing
this module does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from .corpus import BOS, FAMILIES, SHOWCASE, build_corpus, parse
from .report import load_report
from .weights import NumpyModel, read_weights

if TYPE_CHECKING:
    from .tiny_model import TinyTransformer

__all__ = [
    "START",
    "SWAP_BOUNDS",
    "Gaze",
    "HeadMaps",
    "attention_maps",
    "describe_swaps",
    "format_volume_sweep",
    "heldout_check",
    "model",
    "numpy_model",
    "pointer_head",
    "showcase",
    "shown_words",
    "swap_attention",
    "volume_sweep",
    "where_it_looks",
]

#: how a word is shown to a reader: the start-of-sentence token has no spelling
START = "(start)"

#: largest |logit difference| promised between the attention calls, by dtype name
SWAP_BOUNDS = {"float32": 1e-4, "float64": 1e-10}


@cache
def model(name: str = "sqrt_d16") -> TinyTransformer:
    """The trained model ``name`` (of `attention_course.model.catalogue.TRAINED`) in torch, in
    eval mode; imports torch.

    Loaded once per process and shared: treat it as read-only (`load_model` gives a private copy).
    """
    from .tiny_model import load_model

    return load_model(name)


@cache
def numpy_model(name: str = "sqrt_d16") -> NumpyModel:
    """The trained model ``name`` read into numpy (`attention_course.model.weights`), for its
    forward pass without torch. Loaded once per process and shared: treat it as read-only."""
    return NumpyModel(*read_weights(name))


@cache
def _report() -> dict[str, Any]:
    """The committed training report, read once (shared: read-only)."""
    return load_report()


def shown_words(words: Sequence[str]) -> tuple[str, ...]:
    """``words`` as a reader sees them: the start-of-sentence token as `START`."""
    return tuple(START if w == BOS else w for w in words)


def pointer_head(name: str = "sqrt_d16", family: str = "pronoun") -> tuple[int, int]:
    """(layer, head) of the head whose largest weight from the query lands on the
    antecedent most often on the held-out sentences of ``family``, per the training
    report (``final.antecedent_hits``)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    hits = np.asarray(_report()["models"][name]["final"]["antecedent_hits"][family])
    layer, head = np.unravel_index(int(np.argmax(hits)), hits.shape)
    return int(layer), int(head)


@dataclass(frozen=True)
class Gaze:
    """Where the query word of one sentence looks, in every head of one model.

    ``words`` are the sentence up to and including the query word (the
    start token shown as "(start)"); ``weights`` and ``logits`` (layers, H,
    n) are each head's weights and scaled scores from the query to those n
    words, with every head's scale multiplied by ``volume`` (1: the model as
    trained); ``guess`` is the model's top next word at that volume,
    ``answer`` the right one, ``antecedent`` the index of the word the query
    should find.
    """

    sentence: str
    family: str
    words: tuple[str, ...]
    antecedent: int
    volume: float
    logits: np.ndarray
    weights: np.ndarray
    pointer_head: tuple[int, int]
    guess: str
    answer: str

    @property
    def query_word(self) -> str:
        return self.words[-1]

    def shares(self, head: str | tuple[int, int] = "pointer") -> np.ndarray:
        """The query's weights (n,): ``head`` is "pointer" (`pointer_head`), "average" (the
        mean over every head of every layer) or a (layer, head) pair. Raises ValueError
        for anything else."""
        if head == "average":
            return self.weights.mean(axis=(0, 1))  # (n,)
        layer, h = self.pointer_head if head == "pointer" else head
        layers, heads = self.weights.shape[:2]
        if not (0 <= layer < layers and 0 <= h < heads):
            raise ValueError(f"head must be 'pointer', 'average' or (layer, head), got {head!r}")
        return self.weights[layer, h]  # (n,)

    def top(self, head: str | tuple[int, int] = "pointer") -> tuple[str, float]:
        """The word that gets the largest share, and its share."""
        shares = self.shares(head)  # (n,)
        i = int(np.argmax(shares))
        return self.words[i], float(shares[i])


def where_it_looks(
    sentence: str = SHOWCASE[0], name: str = "sqrt_d16", volume: float = 1.0
) -> Gaze:
    """`Gaze` of the query word of ``sentence`` (a corpus sentence, e.g. one of `SHOWCASE`)
    in the trained model ``name``, every head's scale multiplied by ``volume``.

    Raises ValueError for a sentence not in the corpus or a bad volume.
    """
    parsed = parse(sentence)
    corpus = build_corpus()
    tokens = corpus.encode([parsed])[:, : len(parsed.words)]  # (1, T)
    logits, trace = numpy_model(name).forward(tokens, volume=volume)  # (1, T, V), per layer
    n = parsed.query + 1
    scores = np.stack([t.logits[0, :, parsed.query, :n] for t in trace])  # (layers, H, n)
    weights = np.stack([t.weights[0, :, parsed.query, :n] for t in trace])  # (layers, H, n)
    return Gaze(
        sentence=sentence,
        family=parsed.family,
        words=shown_words(parsed.words[:n]),
        antecedent=parsed.antecedent,
        volume=float(volume),
        logits=scores,  # (layers, H, n)
        weights=weights,  # (layers, H, n)
        pointer_head=pointer_head(name, parsed.family),
        guess=corpus.vocab[int(logits[0, parsed.query].argmax())],
        answer=parsed.answer,
    )


def volume_sweep(
    volumes: Sequence[float] = (0.05, 0.3, 1.0, 3.0, 20.0),
    sentences: Sequence[str] | None = None,
    name: str = "sqrt_d16",
) -> list[dict[str, Any]]:
    """The model run at each volume over ``sentences`` (default: the pronoun showcase).

    One row per volume: ``right`` (how many next-word guesses are right, of
    ``total``), ``top_share`` (the pronoun head's largest share, averaged over
    the sentences) and ``margin`` (the smallest gap, over the sentences,
    between the top guess's score and the runner-up's: how far each guess is
    from flipping).
    """
    sentences = showcase("pronoun") if sentences is None else list(sentences)
    corpus = build_corpus()
    rows = []
    for volume in volumes:
        right, tops, margins = 0, [], []
        for sentence in sentences:
            gaze = where_it_looks(sentence, name, volume)
            right += gaze.guess == gaze.answer
            tops.append(gaze.top("pointer")[1])
            parsed = parse(sentence)
            tokens = corpus.encode([parsed])[:, : parsed.query + 1]  # (1, n)
            scores = numpy_model(name).forward(tokens, volume=volume)[0][0, -1]  # (V,)
            best = np.sort(scores)[-2:]  # (2,): the runner-up, then the top
            margins.append(float(best[1] - best[0]))
        rows.append(
            {
                "volume": float(volume),
                "right": int(right),
                "total": len(sentences),
                "top_share": float(np.mean(tops)),
                "margin": float(min(margins)),
            }
        )
    return rows


def format_volume_sweep(rows: Sequence[dict[str, Any]]) -> str:
    """`volume_sweep` in plain words, one line per volume."""
    lines = []
    for r in rows:
        lines.append(
            f"volume ×{r['volume']:<5g} the pronoun head gives its favourite word "
            f"{r['top_share']:4.0%} on average; next word right in {r['right']} of {r['total']}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class HeadMaps:
    """Every head's attention over one sentence: ``weights`` (layers, H, T, T), rows the
    words looking (queries), columns the words looked at (keys); ``words`` (T,)."""

    sentence: str
    words: tuple[str, ...]
    weights: np.ndarray
    query: int
    antecedent: int


def attention_maps(sentence: str = SHOWCASE[0], name: str = "sqrt_d16") -> HeadMaps:
    """`HeadMaps` of ``sentence`` (with its start token and full stop) in model ``name``."""
    parsed = parse(sentence)
    tokens = build_corpus().encode([parsed])  # (1, T_max)
    n = len(parsed.words)
    _, trace = numpy_model(name).forward(tokens[:, :n])  # one LayerScores per layer
    weights = np.stack([t.weights[0] for t in trace])  # (layers, H, n, n)
    return HeadMaps(sentence, shown_words(parsed.words), weights, parsed.query, parsed.antecedent)


def swap_attention(
    name: str = "sqrt_d16",
    sentences: Sequence[str] = SHOWCASE,
    dtype: Any = "float32",
) -> dict[str, float]:
    """The largest |logit difference| between the model's own attention and each other
    call of `attention_course.model.tiny_model.ATTENTION`, over ``sentences`` in ``dtype``
    ("float32" or "float64", or the torch dtype). Imports torch.

    The same weights run each time; only the attention call changes.
    """
    import torch

    from .tiny_model import ATTENTION, inference, load_model

    if str(dtype).removeprefix("torch.") not in SWAP_BOUNDS:
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    dtype = getattr(torch, str(dtype).removeprefix("torch."))
    corpus = build_corpus()
    tokens = torch.from_numpy(corpus.encode([parse(s) for s in sentences]))  # (N, T)
    net = load_model(name).to(dtype)
    with inference():
        own = net(tokens, attention="model")  # (N, T, V)
        return {
            impl: float((net(tokens, attention=impl) - own).abs().max())
            for impl in ATTENTION
            if impl != "model"
        }


_CALLS = {
    "attention_lib": "attention_lib.scaled_dot_product_attention",
    "torch": "torch F.scaled_dot_product_attention",
    "flash": "attention_lib.flash_attention (4 x 4 tiles)",
}


def describe_swaps(name: str = "sqrt_d16", sentences: Sequence[str] = SHOWCASE) -> str:
    """`swap_attention` in float32 and float64 as a table of stated bounds: "within 1e-04"
    where the difference is below `SWAP_BOUNDS`, the number otherwise."""
    columns = {dtype: swap_attention(name, sentences, dtype) for dtype in SWAP_BOUNDS}
    lines = [
        f"model {name}, {len(sentences)} sentences: largest logit difference from the "
        "model's own attention",
        f"{'attention call':<46} {'float32':>14} {'float64':>14}",
    ]
    for impl, label in _CALLS.items():
        cells = []
        for dtype, diffs in columns.items():
            x, bound = diffs[impl], SWAP_BOUNDS[dtype]
            cells.append(f"within {bound:.0e}" if x < bound else f"{x:.1e} (!)")
        lines.append(f"{label:<46} {cells[0]:>14} {cells[1]:>14}")
    return "\n".join(lines)


def heldout_check(name: str = "sqrt_d16") -> dict[str, Any]:
    """Held-out answer accuracy recomputed from the loaded weights, beside the report's.

    Returns {"recomputed": {family: share}, "report": {family: share},
    "largest_gap": max |recomputed - report|}: the committed weights are the
    ones the report describes when the gap is within a sentence or two. Imports torch.
    """
    from .tiny_model import inference
    from .training import evaluate

    corpus = build_corpus()
    held = [s for family in FAMILIES for s in corpus.heldout[family]]
    with inference():
        recomputed = evaluate(model(name), corpus, held).accuracy
    reported = load_report()["models"][name]["final"]["heldout_accuracy"]
    gap = max(abs(recomputed[f] - reported[f]) for f in reported)
    return {"recomputed": recomputed, "report": reported, "largest_gap": gap}


def showcase(family: str | None = None) -> list[str]:
    """The `SHOWCASE` sentences, or those of one family."""
    return [s for s in SHOWCASE if family is None or parse(s).family == family]
