"""A tiny decoder-only transformer whose attention call and scale rule are parameters.

Two layers, four heads, model width 64: small enough to train on two CPU
cores in about a minute (`attention_course.model.training`, ``make model``),
large enough that its heads learn to resolve pronouns in the corpus of
`attention_course.model.corpus`. The trained weights ship with the package
(``attention_course/model/trained/*.npz``, named in `attention_course.model.catalogue`);
`load_model` reads them.

Read it like nanoGPT's ``model.py``: token and position embeddings, then per
layer ``x + attention(LN(x))`` and ``x + MLP(LN(x))``, a final LayerNorm and
the embedding matrix again as the output layer. Two things differ:

- ``scale_rule`` (``"1/sqrt(d)"``, ``"none"``, ``"1/d"``) sets the number the
  scores q·k are multiplied by, d the head width of queries and keys, which
  may differ from d_model / heads (``head_width``); values keep their own
  width (``value_width``).
- the attention call itself is pluggable: ``model(tokens, attention=name)``
  with a name of `ATTENTION`: the model's own lines (``"model"``),
  `attention_lib.scaled_dot_product_attention`, PyTorch's
  ``F.scaled_dot_product_attention`` or `attention_lib.flash_attention`.

The query and key projections start with N(0, 1/d_model) entries, so over
LayerNorm'd inputs each query and key component has variance about one and
q·k has variance about d at initialisation: the premise of the 1/sqrt(d)
derivation, so the three scale rules start where theory says they do.

Importing this module imports torch.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attention_lib.core import scaled_dot_product_attention
from attention_lib.flash import flash_attention
from attention_lib.inputs import positive_integer
from attention_lib.scales import check_volume

from .weights import ModelConfig, read_weights

__all__ = [
    "ALIGNMENTS",
    "ATTENTION",
    "FLASH_BLOCK",
    "Attend",
    "Block",
    "CausalSelfAttention",
    "LayerTrace",
    "TinyTransformer",
    "causal_keep",
    "causal_mask_for",
    "inference",
    "load_model",
    "model_attention",
    "save_model",
]

#: tile sizes for the flash path: smaller than a sentence, so the model's attention
#: really is computed tile by tile (one tile would be the reference path again)
FLASH_BLOCK = 4


# -- the attention implementations -----------------------------------------------------

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


def causal_keep(length: int, device: Any = None) -> torch.Tensor:
    """(T, T) boolean, True where key j <= query i: what each position may look at."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()  # (T, T)


ALIGNMENTS = ("top_left", "bottom_right")


def causal_mask_for(queries: int, keys: int, alignment: str = "bottom_right") -> torch.Tensor:
    """(L, S) boolean causal mask, True where a query may look, for L queries and S keys.

    ``"top_left"``: query i sees keys j <= i (PyTorch's ``is_causal``, and
    ``torch.nn.attention.bias.causal_upper_left``). ``"bottom_right"``: query i
    sees keys j <= i + (S - L) (``causal_lower_right``): the L queries are the
    *last* L positions, as when they follow S - L cached keys. The two agree
    when L == S. Raises ValueError for an unknown alignment or sizes that are not positive
    integers.
    """
    if alignment not in ALIGNMENTS:
        raise ValueError(f"alignment must be one of {ALIGNMENTS}, got {alignment!r}")
    positive_integer("queries", queries)
    positive_integer("keys", keys)
    offset = keys - queries if alignment == "bottom_right" else 0
    return torch.ones(queries, keys, dtype=torch.bool).tril(diagonal=offset)  # (L, S)


def model_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> torch.Tensor:
    """The model's own attention, written out: q (B, H, T, d), k (B, H, T, d), v (B, H, T, dv)."""
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, T, T)
    scores = scores.masked_fill(~causal_keep(q.shape[-2], q.device), float("-inf"))  # (B, H, T, T)
    weights = torch.softmax(scores, dim=-1)  # (B, H, T, T), rows sum to 1
    return weights @ v  # (B, H, T, dv)


def _library(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    return scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)  # (B, H, T, dv)


def _torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)  # (B, H, T, dv)


def _flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    return flash_attention(
        q, k, v, is_causal=True, scale=scale, block_q=FLASH_BLOCK, block_k=FLASH_BLOCK
    )  # (B, H, T, dv)


#: name -> attention call (q, k, v, scale) -> output, causal; every one has autograd
ATTENTION: dict[str, Attend] = {
    "model": model_attention,
    "attention_lib": _library,
    "torch": _torch,
    "flash": _flash,
}


# -- the model ---------------------------------------------------------------------------


@dataclass
class LayerTrace:
    """What one layer's attention computed, for inspection (all detached, float).

    ``q``, ``k`` (B, H, T, d), ``v`` (B, H, T, dv); ``logits`` (B, H, T, T)
    are the scaled scores with -inf above the diagonal; ``weights`` their
    softmax.
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    logits: torch.Tensor
    weights: torch.Tensor


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a pluggable attention call."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        h, d, dv = config.n_heads, config.head_width, config.value_width
        self.query = nn.Linear(config.d_model, h * d, bias=False)
        self.key = nn.Linear(config.d_model, h * d, bias=False)
        self.value = nn.Linear(config.d_model, h * dv, bias=False)
        self.out = nn.Linear(h * dv, config.d_model, bias=False)

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, C) -> q, k (B, H, T, d) and v (B, H, T, dv): each projection's last axis
        cut into heads (view), then the heads put before the tokens (transpose)."""
        b, t, _ = x.shape
        h, d, dv = self.config.n_heads, self.config.head_width, self.config.value_width
        q = self.query(x).view(b, t, h, d).transpose(1, 2)  # (B, T, H·d) -> (B, H, T, d)
        k = self.key(x).view(b, t, h, d).transpose(1, 2)  # (B, H, T, d)
        v = self.value(x).view(b, t, h, dv).transpose(1, 2)  # (B, H, T, dv)
        return q, k, v

    def _merge(self, heads: torch.Tensor) -> torch.Tensor:
        """heads (B, H, T, dv) -> (B, T, C): the heads side by side again, then W_o."""
        b, h, t, dv = heads.shape
        merged = heads.transpose(1, 2).reshape(b, t, h * dv)  # (B, T, H, dv) -> (B, T, H·dv)
        return self.out(merged)  # (B, T, C)

    def forward(
        self,
        x: torch.Tensor,
        attend: Attend = model_attention,
        trace: list | None = None,
        volume: float = 1.0,
    ) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C). With ``trace`` (a list), appends a `LayerTrace`.
        ``volume`` multiplies the scale (1: as trained)."""
        scale = self.config.scale * volume
        q, k, v = self._heads(x)
        heads = attend(q, k, v, scale)  # (B, H, T, dv)
        y = self._merge(heads)  # (B, T, C)
        if trace is not None:
            with torch.no_grad():
                logits = (q @ k.transpose(-2, -1)) * scale  # (B, H, T, T)
                logits = logits.masked_fill(~causal_keep(x.shape[1], x.device), float("-inf"))
                weights = torch.softmax(logits, dim=-1)  # (B, H, T, T)
            trace.append(LayerTrace(q.detach(), k.detach(), v.detach(), logits, weights))
        return y

    def extend(
        self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None, alignment: str
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """New tokens x (B, L, C) after the cached keys and values of earlier ones (a KV
        cache, (B, H, P, d) and (B, H, P, dv), or None): returns (B, L, C) and the grown
        cache, S = P + L keys. ``alignment`` picks the causal mask (see `causal_mask_for`):
        "bottom_right" is right for a cache; "top_left" is what ``is_causal`` means."""
        q, k, v = self._heads(x)  # q, k (B, H, L, d), v (B, H, L, dv)
        if cache is not None:
            k = torch.cat([cache[0], k], dim=-2)  # (B, H, S, d)
            v = torch.cat([cache[1], v], dim=-2)  # (B, H, S, dv)
        if alignment == "top_left":
            heads = scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.config.scale)
        else:
            keep = causal_mask_for(q.shape[-2], k.shape[-2], alignment)  # (L, S)
            heads = scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=self.config.scale)
        return self._merge(heads), (k, v)  # (B, L, C)


class Block(nn.Module):
    """Pre-LayerNorm block: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln_mlp = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, config.mlp_width, bias=False),
            nn.GELU(),
            nn.Linear(config.mlp_width, config.d_model, bias=False),
        )

    def forward(
        self, x: torch.Tensor, attend: Attend, trace: list | None, volume: float = 1.0
    ) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x), attend, trace, volume)  # (B, T, C)
        return x + self.mlp(self.ln_mlp(x))  # (B, T, C)

    def extend(self, x: torch.Tensor, cache: Any, alignment: str) -> tuple[torch.Tensor, Any]:
        y, cache = self.attn.extend(self.ln_attn(x), cache, alignment)  # (B, L, C)
        x = x + y  # (B, L, C)
        return x + self.mlp(self.ln_mlp(x)), cache  # (B, L, C)


class TinyTransformer(nn.Module):
    """Decoder-only transformer: tokens (B, T) int64 -> next-token logits (B, T, vocab)."""

    def __init__(self, config: ModelConfig, seed: int = 0) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.position = nn.Embedding(config.length, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_final = nn.LayerNorm(config.d_model)
        self._initialise(seed)

    def _initialise(self, seed: int) -> None:
        """Seeded: embeddings and the other matrices N(0, 0.02²), as GPT-2 does; queries and
        keys N(0, 1/d_model), so q·k starts with variance about d (see the module docstring)."""
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.ndim < 2:
                    continue  # LayerNorm gains (1) and biases (0) keep PyTorch's values
                std = 0.02
                if name.endswith(("attn.query.weight", "attn.key.weight")):
                    std = 1 / math.sqrt(self.config.d_model)
                p.copy_(torch.randn(p.shape, generator=gen) * std)

    def forward(
        self,
        tokens: torch.Tensor,
        attention: str | Attend = "model",
        trace: list | None = None,
        volume: float = 1.0,
    ) -> torch.Tensor:
        """Next-token logits (B, T, vocab) for ``tokens`` (B, T), T <= config.length.

        ``attention`` names the attention call (a key of `ATTENTION`) or is
        one; ``trace``, a list, receives one `LayerTrace` per layer.
        ``volume`` multiplies every head's scale (1: the model as trained; the
        beginner notebook's knob). Raises ValueError for an unknown name, a
        sequence longer than the model's, or a volume that is not finite and >= 0.
        """
        volume = check_volume(volume)
        attend = _attention(attention)
        t = tokens.shape[-1]
        if t > self.config.length:
            raise ValueError(f"{t} tokens is more than this model's {self.config.length}")
        positions = torch.arange(t, device=tokens.device)  # (T,)
        x = self.embed(tokens) + self.position(positions)  # (B, T, C)
        for block in self.blocks:
            x = block(x, attend, trace, volume)  # (B, T, C)
        return self.ln_final(x) @ self.embed.weight.T  # (B, T, vocab)

    @torch.no_grad()
    def extend(
        self, tokens: torch.Tensor, cache: list | None = None, alignment: str = "bottom_right"
    ) -> tuple[torch.Tensor, list]:
        """Next-token logits (B, L, vocab) for ``tokens`` (B, L) that follow the tokens
        already in ``cache`` (a KV cache: one (keys, values) pair per layer, from an earlier
        call; None to start), and the grown cache. Calling it once on a whole sentence, or
        on its prefix and then the rest, gives the same logits with
        ``alignment="bottom_right"``, and different ones with "top_left" (`causal_mask_for`).
        """
        done = 0 if cache is None else cache[0][0].shape[-2]
        if done + tokens.shape[-1] > self.config.length:
            raise ValueError(
                f"{done} cached + {tokens.shape[-1]} new tokens is more than this model's "
                f"{self.config.length}"
            )
        positions = torch.arange(done, done + tokens.shape[-1])  # (L,)
        x = self.embed(tokens) + self.position(positions)  # (B, L, C)
        grown = []
        for i, block in enumerate(self.blocks):
            x, layer_cache = block.extend(x, None if cache is None else cache[i], alignment)
            grown.append(layer_cache)
        return self.ln_final(x) @ self.embed.weight.T, grown  # (B, L, vocab)

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _attention(attention: str | Attend) -> Attend:
    if callable(attention):
        return attention
    if attention not in ATTENTION:
        raise ValueError(f"unknown attention {attention!r}; choose one of {list(ATTENTION)}")
    return ATTENTION[attention]


@contextlib.contextmanager
def inference() -> Iterator[None]:
    """No gradients, on one torch thread (the count is restored afterwards).

    The model's matrices are tiny: more threads gain nothing and lose much to
    contention on a busy machine, and one thread fixes the order of every
    float sum, so the same weights give the same numbers on every machine.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            yield
    finally:
        torch.set_num_threads(threads)


# -- weights on disk ---------------------------------------------------------------------


def save_model(model: TinyTransformer, path: str | Path, vocab: tuple[str, ...]) -> int:
    """Write the weights (float32), the config and the vocabulary to one ``.npz``; returns bytes.

    Plain ``np.savez`` (the weights barely compress); readable without pickle.
    """
    arrays = {name: t.detach().cpu().numpy() for name, t in model.state_dict().items()}
    arrays["config"] = np.array(json.dumps(asdict(model.config)))
    arrays["vocab"] = np.array(vocab)
    path = Path(path)
    with open(path, "wb") as f:  # a file object: np.savez would otherwise append ".npz"
        np.savez(f, **arrays)
    return path.stat().st_size


def load_model(name: str = "sqrt_d16", path: str | Path | None = None) -> TinyTransformer:
    """A trained model, in eval mode on the CPU: one of `TRAINED` or a ``.npz`` at ``path``.

    The file is read, and its vocabulary checked against the corpus's, by
    `attention_course.model.weights.read_weights`: ValueError for an unknown name or another
    vocabulary, FileNotFoundError for a missing file.
    """
    config, _, arrays = read_weights(name, path)
    state = {k: torch.from_numpy(v) for k, v in arrays.items()}
    model = TinyTransformer(config)
    model.load_state_dict(state)
    return model.eval()
