"""The trained model's weights read without torch, and its forward pass on them in numpy.

The notebooks a learner opens first (01 and 02) show the trained model's
attention and guesses, never its training: reading them through torch cost
each learner's kernel about 150 MiB (torch's libraries and the state they
build when imported, hardly shared between kernels), half of what a hub
plans for a learner. So the reading happens here, in numpy:

- `ModelConfig`: the model's sizes and scale rule (also the torch model's,
  `attention_course.model.tiny_model`, which imports it from here);
- `read_weights`: a committed ``.npz`` (or any ``save_model`` file) as its
  config, vocabulary and float32 arrays under the torch model's state-dict
  names, the vocabulary checked against the corpus;
- `NumpyModel`: the forward pass of ``TinyTransformer`` (no dropout, the
  model's own attention lines), in float64, returning the next-token logits
  and each layer's scaled scores and weights, with the same ``volume`` knob.

The torch model stays the definition (it trains, and its attention call can
be swapped); this one is tested against it on every trained model, every
showcase sentence and several volumes (tests/model/test_weights.py), so a
change to one that the other does not follow fails there.

Imports numpy only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attention_lib.core import masked_scores
from attention_lib.inputs import positive_integer
from attention_lib.normalisers import softmax
from attention_lib.scales import check_volume, scale_for

from .catalogue import TRAINED, trained_dir

__all__ = ["LAYER_NORM_EPS", "LayerScores", "ModelConfig", "NumpyModel", "read_weights"]

#: torch.nn.LayerNorm's default epsilon, which the torch model uses
LAYER_NORM_EPS = 1e-5


@dataclass(frozen=True)
class ModelConfig:
    """The model's sizes and its scale rule.

    ``head_width`` is d, the width of each head's queries and keys (the d of
    the scale rule); ``value_width`` that of its values. ``length`` is the
    longest token sequence it takes.
    """

    vocab_size: int
    length: int
    d_model: int = 64
    n_heads: int = 4
    head_width: int = 16
    value_width: int = 16
    n_layers: int = 2
    mlp_width: int = 128
    scale_rule: str = "1/sqrt(d)"

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "length",
            "d_model",
            "n_heads",
            "head_width",
            "value_width",
            "n_layers",
            "mlp_width",
        ):
            positive_integer(name, getattr(self, name))
        scale_for(self.scale_rule, self.head_width)  # raises for an unknown rule

    @property
    def scale(self) -> float:
        """What the scores q·k are multiplied by: 1/sqrt(d), 1 or 1/d."""
        return scale_for(self.scale_rule, self.head_width)


def read_weights(
    name: str = "sqrt_d16", path: str | Path | None = None
) -> tuple[ModelConfig, tuple[str, ...], dict[str, np.ndarray]]:
    """The config, vocabulary and weights (name -> float32 array, the torch model's
    state-dict names) of trained model ``name`` (one of `TRAINED`) or of the ``.npz`` at
    ``path``.

    Checks that the file's vocabulary is the corpus's (a corpus changed since
    training would silently scramble every token). Raises ValueError for an
    unknown name or another vocabulary, FileNotFoundError for a missing file.
    """
    from .corpus import build_corpus  # its sentences are enumerated on first use

    if path is None:
        if name not in TRAINED:
            raise ValueError(f"unknown model {name!r}; choose one of {list(TRAINED)}")
        path = trained_dir() / f"{name}.npz"
    with np.load(path, allow_pickle=False) as data:
        config = ModelConfig(**json.loads(str(data["config"])))
        vocab = tuple(str(w) for w in data["vocab"])
        arrays = {k: data[k] for k in data.files if k not in ("config", "vocab")}
    if vocab != build_corpus().vocab:
        raise ValueError(
            f"{path} was trained on another vocabulary than the corpus's; retrain (make model)"
        )
    return config, vocab, arrays


@dataclass(frozen=True)
class LayerScores:
    """One layer's attention as the forward pass computed it: ``logits`` (B, H, T, T), the
    scaled scores with -inf above the diagonal, and ``weights``, their softmax."""

    logits: np.ndarray
    weights: np.ndarray


_erf = np.vectorize(math.erf, otypes=[float])  # numpy has no erf; exact, as torch's GELU is


class NumpyModel:
    """The trained ``TinyTransformer``'s forward pass in numpy (float64), for reading it.

    ``NumpyModel(*read_weights(name))``. Holds the weights as float64 copies;
    treat them as read-only.
    """

    def __init__(
        self, config: ModelConfig, vocab: tuple[str, ...], arrays: dict[str, np.ndarray]
    ) -> None:
        self.config = config
        self.vocab = vocab
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}

    def _layer_norm(self, x: np.ndarray, prefix: str) -> np.ndarray:
        """torch.nn.LayerNorm over the last axis: biased variance, `LAYER_NORM_EPS`."""
        mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # (..., 1)
        normed = (x - mean) / np.sqrt(var + LAYER_NORM_EPS)  # (..., C)
        return normed * self.w[f"{prefix}.weight"] + self.w[f"{prefix}.bias"]  # (..., C)

    def _attention(
        self, x: np.ndarray, layer: int, volume: float, scores: list[LayerScores]
    ) -> np.ndarray:
        """x (B, T, C) -> (B, T, C): the model's causal self-attention, every head's scale
        multiplied by ``volume``; appends the layer's `LayerScores` to ``scores``."""
        cfg, p = self.config, f"blocks.{layer}.attn"
        b, t, _ = x.shape
        h, d, dv = cfg.n_heads, cfg.head_width, cfg.value_width
        q = (x @ self.w[f"{p}.query.weight"].T).reshape(b, t, h, d).transpose(0, 2, 1, 3)
        k = (x @ self.w[f"{p}.key.weight"].T).reshape(b, t, h, d).transpose(0, 2, 1, 3)
        v = (x @ self.w[f"{p}.value.weight"].T).reshape(b, t, h, dv).transpose(0, 2, 1, 3)
        # q, k (B, H, T, d), v (B, H, T, dv)
        logits = masked_scores(q, k, is_causal=True, scale=cfg.scale * volume)  # (B, H, T, T)
        weights = softmax(logits, axis=-1)  # (B, H, T, T), rows sum to 1
        scores.append(LayerScores(logits, weights))
        heads = weights @ v  # (B, H, T, dv)
        merged = heads.transpose(0, 2, 1, 3).reshape(b, t, h * dv)  # (B, T, H·dv)
        return merged @ self.w[f"{p}.out.weight"].T  # (B, T, C)

    def _mlp(self, x: np.ndarray, layer: int) -> np.ndarray:
        """x (B, T, C) -> (B, T, C): Linear, exact GELU, Linear (no biases)."""
        p = f"blocks.{layer}.mlp"
        hidden = x @ self.w[f"{p}.0.weight"].T  # (B, T, mlp_width)
        hidden = 0.5 * hidden * (1.0 + _erf(hidden / math.sqrt(2.0)))  # (B, T, mlp_width)
        return hidden @ self.w[f"{p}.2.weight"].T  # (B, T, C)

    def forward(self, tokens: Any, volume: float = 1.0) -> tuple[np.ndarray, list[LayerScores]]:
        """Next-token logits (B, T, vocab) for ``tokens`` (B, T) integers, T <=
        config.length, and one `LayerScores` per layer; ``volume`` multiplies every
        head's scale (1: the model as trained). Raises ValueError for a sequence longer
        than the model's or a volume that is not finite and >= 0."""
        volume = check_volume(volume)
        tokens = np.asarray(tokens)  # (B, T)
        t = tokens.shape[-1]
        if t > self.config.length:
            raise ValueError(f"{t} tokens is more than this model's {self.config.length}")
        embed = self.w["embed.weight"]  # (vocab, C)
        x = embed[tokens] + self.w["position.weight"][:t]  # (B, T, C)
        scores: list[LayerScores] = []
        for layer in range(self.config.n_layers):
            x = x + self._attention(
                self._layer_norm(x, f"blocks.{layer}.ln_attn"), layer, volume, scores
            )
            x = x + self._mlp(self._layer_norm(x, f"blocks.{layer}.ln_mlp"), layer)  # (B, T, C)
        return self._layer_norm(x, "ln_final") @ embed.T, scores  # (B, T, vocab)
