"""The reference path: scaled dot-product attention as PyTorch defines it.

Written to be read next to the formula ``softmax(Q K^T * scale + mask) V``.
It materialises the whole (..., L, S) score matrix, which is what makes it
easy to check and what makes it run out of memory at long lengths; the tiled
path in `attention_lib.flash.loop` computes the same result without that matrix.
"""

from __future__ import annotations

from typing import Any

from .backend import device_of, itemsize, prod, uniform
from .inputs import AttentionProblem, prepare
from .masks import apply_mask, causal_mask
from .memory import check_fits
from .normalisers import softmax

__all__ = ["attention_weights", "scaled_dot_product_attention"]

# scores, their exponentials and the weights can be alive at once
_SCORE_COPIES = 3


def _check_memory(problem: AttentionProblem, max_memory: int | None) -> None:
    q, k = problem.query, problem.key
    shape = (*problem.batch, q.shape[-2], k.shape[-2])  # (..., L, S)
    needed = _SCORE_COPIES * prod(shape) * itemsize(q.dtype)
    what = (
        f"the reference path's score matrix of shape {shape} ({_SCORE_COPIES} copies in {q.dtype})"
    )
    check_fits(needed, q, what, limit=max_memory)


def _dropout(xp: Any, weights: Any, p: float, generator: Any) -> Any:
    """Inverted dropout: zero each weight with probability p, scale the rest by 1/(1-p)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout_p must be in [0, 1], got {p}")
    if p == 0.0:
        return weights
    keep = uniform(xp, tuple(weights.shape), weights, generator) >= p  # (..., L, S)
    return xp.where(keep, weights / (1.0 - p) if p < 1.0 else weights, 0.0)


def _weights(
    problem: AttentionProblem, dropout_p: float, generator: Any, max_memory: int | None
) -> Any:
    """Attention weights (..., L, S) in the accumulation dtype."""
    xp, q, k = problem.xp, problem.query, problem.key
    _check_memory(problem, max_memory)
    # query (*Bq, L, E) and key (*Bk, S, E) broadcast in the product: neither is expanded
    scores = xp.matmul(q * problem.scale, xp.matrix_transpose(k))  # (..., L, S)
    scores = apply_mask(xp, scores, problem.mask)  # (..., L, S)
    if problem.is_causal:
        keep = causal_mask(xp, (0, q.shape[-2]), (0, k.shape[-2]), device_of(q))  # (L, S)
        scores = apply_mask(xp, scores, keep)  # (..., L, S)
    weights = softmax(scores, axis=-1)  # (..., L, S), rows sum to 1 (or 0 if all masked)
    return _dropout(xp, weights, dropout_p, generator)


def attention_weights(
    query: Any,
    key: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    dropout_p: float = 0.0,
    generator: Any = None,
    max_memory: int | None = None,
) -> Any:
    """The attention weights ``softmax(query @ key^T * scale + mask)``, shape (..., L, S).

    Arguments and errors are those of `scaled_dot_product_attention` (there is
    no value: it is the part before the mix). Each row is the share of
    attention one query gives to each key: non-negative, summing to one, or
    all zero when every key of the row is masked out. Returned in the
    query's dtype, on its device.
    """
    problem = prepare(query, key, key, attn_mask, is_causal, scale, enable_gqa)
    weights = _weights(problem, dropout_p, generator, max_memory)  # (..., L, S)
    return problem.xp.astype(weights, problem.out_dtype)


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    generator: Any = None,
    max_memory: int | None = None,
) -> Any:
    """Scaled dot-product attention, the reference path, with PyTorch's semantics.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev); the
    result is (..., L, Ev), in the query's dtype and on its device (numpy in,
    numpy out; torch in, torch out, autograd intact). Any rank >= 2 works.
    The batch dimensions (all but the last two) of query, key and value
    broadcast together, as in PyTorch: query (4, 3, 8) with key and value
    (4, 4, 6, 8) gives (4, 4, 3, 8). Gradients reach each input in its own
    shape.

    - ``scale`` defaults to 1/sqrt(E), E the query's last dimension; any
      value given (0 and negative included) is used as is.
    - ``attn_mask`` broadcasts to (..., L, S): boolean True means "takes
      part", a float mask is added to the scaled scores. A float mask must
      have the query's dtype or be float32, as PyTorch requires; 16-bit
      masks are added, and their gradients summed, in float32, rounded once.
    - ``is_causal`` keeps key j for query i when j <= i (top-left aligned).
      It cannot be combined with ``attn_mask``: both libraries refuse.
    - A row whose keys are all masked out gives zeros, not NaN.
    - ``enable_gqa`` lets the query have a multiple of the key/value heads
      (dim -3), each key/value head serving a group of consecutive query
      heads; a single key/value head broadcasts without it.
    - ``dropout_p``: inverted dropout on the weights, reproducible with
      ``generator`` (an int seed, a numpy Generator or a torch.Generator).
      Outside [0, 1] it is refused; where we differ: PyTorch refuses
      values above 1 but runs a negative one without a word.
    - float16/bfloat16 are computed in float32 and rounded once at the end.
    - ``max_memory`` (bytes) overrides the free memory the refusal uses.

    Raises TypeError or ValueError naming the shapes, dtypes or values at fault
    (see `attention_lib.inputs.check`), and AttentionMemoryError (a
    MemoryError) when the score matrix would not fit in free memory; the
    message gives the size and points at `flash_attention`.
    """
    problem = prepare(query, key, value, attn_mask, is_causal, scale, enable_gqa)
    weights = _weights(problem, dropout_p, generator, max_memory)  # (..., L, S)
    out = problem.xp.matmul(weights, problem.value)  # (..., L, Ev)
    return problem.xp.astype(out, problem.out_dtype)
