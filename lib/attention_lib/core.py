"""The reference path: scaled dot-product attention as PyTorch defines it.

Written to be read next to the formula ``softmax(Q K^T * scale + mask) V``.
It materialises the whole (..., L, S) score matrix, which is what makes it
easy to check and what makes it run out of memory at long lengths; the tiled
path in `attention_lib.flash.loop` computes the same result without that matrix.

`masked_scores` is the first half on its own: the scaled scores with every
hidden key at -inf, the one definition the attention variants
(`attention_lib.variants`) and the exercises' checkers build on.

Plain arithmetic runs whenever it already follows the rule for non-finite
inputs (`attention_lib.nonfinite`): no key hidden, or no score and no value
that can be non-finite (checked in O((L + S)·E)). Otherwise the exact
route of `attention_lib.nonfinite` runs, which takes no product with a
hidden entry, forward or backward.
"""

from __future__ import annotations

import functools
from typing import Any

from .backend import device_of, is_torch_array, itemsize, prod
from .dropout import apply_dropout, dropout_keep
from .inputs import AttentionProblem, prepare
from .masks import apply_mask, causal_mask, visible_keys
from .memory import check_fits
from .nonfinite import exact_attention, plain_is_exact, sum_to
from .normalisers import softmax

__all__ = ["attention_weights", "masked_scores", "scaled_dot_product_attention"]

# scores, their exponentials and the weights can be alive at once; the exact route
# (non-finite inputs under a mask) adds the mask of seen keys as numbers, for a count
_SCORE_COPIES = 3
_EXACT_SCORE_COPIES = 4


def _check_memory(problem: AttentionProblem, max_memory: int | None, copies: int) -> None:
    q, k = problem.query, problem.key
    shape = (*problem.batch, q.shape[-2], k.shape[-2])  # (..., L, S)
    needed = copies * prod(shape) * itemsize(q.dtype)
    what = f"the reference path's score matrix of shape {shape} ({copies} copies in {q.dtype})"
    check_fits(needed, q, what, limit=max_memory)


@functools.cache
def _broadcast_sum() -> Any:
    """An autograd Function: ``x.expand(shape)`` whose gradient is summed back by `sum_to`.

    Matrix products sum a broadcast input's gradient in its own dtype; this
    sums it in float64 for float32 (rounded once; compensated float32 sums on
    a device without float64) and stays differentiable.
    Built on first use, so that importing this module does not import torch.
    """
    import torch

    class BroadcastSum(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, shape: tuple[int, ...]) -> Any:  # type: ignore[override]
            ctx.shape = tuple(x.shape)
            return x.expand(shape)  # a view

        @staticmethod
        def backward(ctx: Any, grad: Any) -> tuple[Any, None]:  # type: ignore[override]
            return sum_to(grad, ctx.shape), None

    return BroadcastSum


def _widened(x: Any, batch: tuple[int, ...]) -> Any:
    """Torch ``x`` (*b, m, n) seen as (*batch, m, n) if it is broadcast and needs a float32
    gradient, so that gradient is summed wide (`_broadcast_sum`); else ``x`` itself."""
    if x is None or not is_torch_array(x) or not x.requires_grad or str(x.dtype) != "torch.float32":
        return x
    shape = (*batch, *x.shape[-2:])
    return x if tuple(x.shape) == shape else _broadcast_sum().apply(x, shape)


def _scores(xp: Any, q: Any, k: Any, mask: Any, is_causal: bool, scale: float) -> Any:
    """``q @ k^T * scale`` with ``mask`` applied and, if ``is_causal``, the causal mask:
    (..., L, S) from q (*Bq, L, E) and k (*Bk, S, E), which broadcast (neither is copied)."""
    scores = xp.matmul(q * scale, xp.matrix_transpose(k))  # (..., L, S)
    scores = apply_mask(xp, scores, mask)  # (..., L, S)
    if is_causal:
        length_q, length_k = q.shape[-2], k.shape[-2]
        scores = apply_mask(xp, scores, causal_mask(xp, (0, length_q), (0, length_k), device_of(q)))
    return scores


def _attend(
    problem: AttentionProblem, generator: Any, max_memory: int | None, with_value: bool
) -> Any:
    """The output (..., L, Ev), or with ``with_value=False`` the weights (..., L, S), in the
    problem's dtype (`backend.reference_dtype`).

    Plain arithmetic when no score and no value can be non-finite, or when no
    key is hidden (then plain arithmetic is the rule); the exact route of
    `attention_lib.nonfinite` otherwise.
    """
    xp, q, k = problem.xp, problem.query, problem.key
    v = problem.value if with_value else None
    length_q, length_k = q.shape[-2], k.shape[-2]
    hides = problem.mask is not None or problem.is_causal  # some key may be hidden
    exact = hides and not plain_is_exact(xp, q, k, v, problem.scale)
    _check_memory(problem, max_memory, _EXACT_SCORE_COPIES if exact else _SCORE_COPIES)
    shape = (*problem.batch, length_q, length_k)  # (..., L, S)
    keep = dropout_keep(xp, shape, q, problem.dropout_p, generator)  # (..., L, S) or None
    q, k, v = (_widened(x, problem.batch) for x in (q, k, v))  # gradients summed wide
    mask = problem.mask
    if mask is not None and mask.dtype != xp.bool:
        mask = _widened(mask, problem.batch)
    if exact:
        seen = visible_keys(xp, mask, problem.is_causal, length_q, length_k, device_of(q))
        float_mask = None if mask is None or mask.dtype == xp.bool else mask
        return exact_attention(
            xp, q, k, v, float_mask, seen, problem.scale, keep, problem.dropout_p
        )
    scores = _scores(xp, q, k, mask, problem.is_causal, problem.scale)  # (..., L, S)
    weights = softmax(scores, axis=-1)  # (..., L, S), rows sum to 1 (or 0 if all masked)
    weights = apply_dropout(xp, weights, keep, problem.dropout_p)  # (..., L, S)
    return weights if v is None else xp.matmul(weights, v)  # (..., L, Ev)


def masked_scores(
    query: Any,
    key: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """The scaled scores ``query @ key^T * scale`` with every hidden key at -inf: (..., L, S).

    What `attention_weights` takes the softmax of: a boolean ``attn_mask``
    sets the scores it hides to -inf, a float one is added, ``is_causal``
    hides key j from query i when j > i (top-left aligned). Arguments and
    errors are `attention_weights`'; the result is in the reference path's dtype
    (`backend.reference_dtype`: float32 for 16-bit inputs, float64 for float32
    where the device has it: round it yourself if you need the input's),
    on the query's device, autograd intact. Plain arithmetic, with none of
    the exact route of `attention_lib.nonfinite`: a score that a boolean
    mask or the causal mask hides is -inf whatever it held, a float mask is
    added (NaN + -inf is NaN).
    """
    problem = prepare(query, key, key, attn_mask, is_causal, scale, enable_gqa)
    xp = problem.xp
    return _scores(xp, problem.query, problem.key, problem.mask, problem.is_causal, problem.scale)


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
    all zero when every key of the row is masked out, and exactly zero
    wherever a key is hidden (also in a row that holds NaN). Returned in
    the query's dtype, on its device.
    """
    problem = prepare(query, key, key, attn_mask, is_causal, scale, enable_gqa, dropout_p)
    weights = _attend(problem, generator, max_memory, with_value=False)  # (..., L, S)
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
    - A row whose keys are all masked out gives zeros, not NaN, and so does
      every row when S = 0.
    - Non-finite inputs follow one rule (`attention_lib.nonfinite`): a
      hidden key's score and value (NaN, ±inf) never reach the rows that
      hide it, nor their gradients; a row that sees no key gives zeros and
      zero gradients whatever its query; a non-finite entry that is seen
      makes what it reaches non-finite. Where we differ: PyTorch computes
      0 x NaN and NaN + -inf there, so its rows go NaN (a NaN value at a
      causally masked position, a NaN key under a boolean mask, a NaN
      query with S = 0 or with every key masked).
    - ``enable_gqa`` lets the query have a multiple of the key/value heads
      (dim -3), each key/value head serving a group of consecutive query
      heads; a single key/value head broadcasts without it.
    - ``dropout_p``: inverted dropout on the weights, reproducible with
      ``generator`` (an int seed, a numpy Generator or a torch.Generator);
      one seed drops the same weights in every dtype (drawn in float32).
      Outside [0, 1], or NaN, it is refused; where we differ: PyTorch
      refuses values above 1 but runs a negative or NaN one without a word.
    - ``scale``, ``dropout_p``, ``is_causal`` and ``enable_gqa`` take the
      types PyTorch takes (`attention_lib.inputs`): a string, list or None
      where a number or bool belongs is a TypeError naming the argument.
    - float16/bfloat16 are computed in float32 and rounded once at the end.
      The gradient of an input broadcast along batch dimensions is summed
      in float64 for float32 (float32 for 16-bit inputs) and rounded once;
      on a device without float64 (MPS) in float32, its rounding errors
      carried (`attention_lib.nonfinite.sum_to`).
      Gradients are twice differentiable, except on the exact route for
      non-finite inputs under a mask (once).
    - ``max_memory`` (bytes) overrides the free memory the refusal uses.

    Raises TypeError or ValueError naming the shapes, dtypes or values at fault
    (see `attention_lib.inputs.check`), and AttentionMemoryError (a
    MemoryError) when the score matrix would not fit in free memory; the
    message gives the size and points at `flash_attention`.
    """
    problem = prepare(query, key, value, attn_mask, is_causal, scale, enable_gqa, dropout_p)
    out = _attend(problem, generator, max_memory, with_value=True)  # (..., L, Ev)
    return problem.xp.astype(out, problem.out_dtype)
