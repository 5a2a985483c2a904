"""Non-finite inputs and hidden keys: the rule every path follows, and its exact route.

The rule (the reference path, the tiled paths and the Triton kernels alike):

(a) A hidden key is never read. Where a query does not see a key (a
    boolean mask False, a float mask -inf, ``is_causal``), that key's score
    and value have no effect on the query's output, nor on any gradient
    through that query's row, whatever they hold (NaN, ±inf). Only -inf
    hides a key: a large finite bias such as -1e9 or ``finfo.min`` is an
    ordinary score, seen, with a weight that may underflow to 0.
(b) A query that sees no key (every key hidden, or S = 0) outputs zeros
    and passes zero gradient to query, key, value and mask, whatever the
    query holds.
(c) A non-finite query, key, value, mask entry or scale at a seen position
    makes the output entries it reaches non-finite, as plain arithmetic
    does: a visible score of +inf or NaN makes its row NaN; a weight w on
    an infinite value gives ±inf (w > 0), NaN for w = 0 (0 × inf), and
    infinities of both signs in one sum give NaN.
(d) A row whose seen scores are all -inf (a key holding -inf, an infinite
    scale) has no weight anywhere: zeros, as in PyTorch, whose math
    backend (its "safe softmax") and fused CPU kernel both give zeros there.
    Scores are ``(query * scale) @ key^T``: with an infinite scale each is
    a sum of infinite products, NaN where their signs differ, as in
    PyTorch's math backend, which multiplies query and key by sqrt(scale).

Where PyTorch differs (torch 2.13, ``F.scaled_dot_product_attention`` on
the CPU): it computes 0 × NaN in the weighted sum and NaN + -inf for a
masked score, so a NaN or inf value at a causally or boolean-masked
position makes the rows that hide it NaN, a NaN key hidden by a boolean
mask makes every row NaN, and so does a hidden score of NaN or +inf (+inf
+ -inf is NaN too; an infinite scale makes them: a row whose seen scores
are all -inf is then NaN there, zeros here by (a) and (d)); a NaN query in
a row with every key masked gives NaN instead of zeros, and so does a NaN
query with S = 0; its gradients spread the same NaNs. PyTorch is not
consistent with itself on a NaN or infinite ``scale``: its math backend
follows (c) and (d), its fused CPU kernel (what it runs for 4-d float
inputs with E = Ev and no mask) scales q · k after the product and gives a
row with a NaN score zeros, so a NaN scale, or -inf times a positive q · k
whose products differ in sign, gives zeros there and NaN in the math
backend. We follow the math backend on every path, the semantics PyTorch
documents: the tiled path runs such a call on its torch operations, not on
that kernel (`attention_lib.flash.fused_tiles`), and the Triton kernels,
which also scale after the product, refuse it (``backend="auto"`` runs
it tiled).

Plain arithmetic breaks (a) and (b) only through non-finite numbers (0 ×
NaN, NaN + -inf, inf - inf), so the paths take it whenever no score and no
value can be non-finite: `plain_is_exact` checks that with three
max-reductions over query, key and value, O((L + S)·E) next to the
O(L·S·E) of the attention itself. Otherwise, and only where some key is
hidden, the reference path takes the exact route here: `exact_forward`
(numpy and torch), and for torch tensors the autograd Function
`exact_attention` whose backward pass takes no product with a hidden
entry (`visible_matmul`). Its gradients are once differentiable; sums over
broadcast batch dimensions are accumulated in float64 for float32 inputs,
rounded once (compensated float32 sums on a device without float64:
`sum_to`).

Importing this module imports nothing heavy; torch loads when a tensor arrives.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from .backend import has_float64, nan_is_expected, prod
from .dropout import apply_dropout
from .masks import apply_mask
from .normalisers import softmax

__all__ = [
    "add_compensated",
    "exact_attention",
    "exact_forward",
    "plain_is_exact",
    "sum_to",
    "visible_matmul",
]


def _peak(xp: Any, x: Any) -> float:
    """max |x| as a Python float: NaN if x holds a NaN, inf if it holds an inf."""
    if hasattr(x, "detach"):  # a torch tensor: no graph for a check
        x = x.detach()
    return float(xp.max(xp.abs(x)))


def plain_is_exact(xp: Any, query: Any, key: Any, value: Any, scale: float) -> bool:
    """Whether plain arithmetic follows the rule: every score and value finite.

    query (..., L, E), key (..., S, E), value (..., S, Ev) or None, in one
    floating dtype. A score is a sum of E products, each at most
    max|query|·max|key|·|scale|; below half the dtype's largest number no
    partial sum can overflow, so finite inputs give finite scores. False
    for any NaN or inf in query, key or value, for a NaN or infinite
    ``scale``, and for inputs large enough to overflow. Synchronises with
    the device once (three reductions).
    """
    if prod(tuple(query.shape)) and prod(tuple(key.shape)):
        largest = float(xp.finfo(query.dtype).max)
        bound = _peak(xp, query) * _peak(xp, key) * query.shape[-1] * abs(scale)
        if not bound < largest / 2:  # NaN compares False too
            return False
    return value is None or not prod(tuple(value.shape)) or _peak(xp, value) < math.inf


def visible_matmul(xp: Any, a: Any, b: Any, seen: Any) -> Any:
    """``a @ b`` taking the product a[.., i, j] · b[.., j, :] only where ``seen[.., i, j]``.

    a (..., M, N) is 0 wherever ``seen`` (broadcastable to a's shape, or
    None: every entry seen) is False; b (..., N, K) may hold NaN or ±inf
    there, which plain ``a @ b`` would turn into NaN (0 × NaN). A seen
    product is the one plain arithmetic takes, as PyTorch does: a weight
    w times an infinite entry is ±inf, or NaN for w = 0 or NaN, and an
    output entry is the sum of its terms: ±inf where every infinite term
    has that sign, NaN where they differ or one is NaN (so a weight of 1
    on an infinite value gives inf, not NaN). Returns (..., M, K), batch
    dimensions broadcast. With b finite this is ``a @ b``; otherwise five
    products more, each a count over the seen positions.
    """
    finite = xp.isfinite(b)  # (..., N, K)
    if seen is None or bool(xp.all(finite)):
        return xp.matmul(a, b)  # (..., M, K)
    out = xp.matmul(a, xp.where(finite, b, 0.0))  # (..., M, K), the finite terms

    def count(rows: Any, cols: Any) -> Any:  # seen (i, j) with rows[i, j] and cols[j, k]
        return xp.matmul(xp.astype(rows, a.dtype), xp.astype(cols, a.dtype))  # (..., M, K)

    seen = xp.broadcast_to(seen, a.shape)  # (..., M, N), a view
    up, down = b == xp.inf, b == -xp.inf  # (..., N, K)
    positive, negative = seen & (a > 0), seen & (a < 0)  # (..., M, N)
    plus = count(positive, up) + count(negative, down)  # terms that are +inf
    minus = count(positive, down) + count(negative, up)  # terms that are -inf
    # NaN terms: a NaN entry of b, or 0 (or NaN) times an infinite one
    nan = count(seen, xp.isnan(b)) + count(seen & ~(a > 0) & ~(a < 0), ~finite)
    infinite = xp.where(minus > 0, -xp.inf, xp.zeros_like(out))  # (..., M, K)
    infinite = xp.where(plus > 0, xp.inf, infinite)  # (..., M, K)
    infinite = xp.where((nan > 0) | ((plus > 0) & (minus > 0)), xp.nan, infinite)
    return out + infinite  # (..., M, K)


@nan_is_expected
def exact_forward(
    xp: Any,
    query: Any,
    key: Any,
    value: Any,
    mask: Any,
    seen: Any,
    scale: float,
    keep: Any,
    p: float,
) -> tuple[Any, Any, Any]:
    """Attention under the rule for any inputs: (weights, dropped weights, output).

    query (*Bq, L, E), key (*Bk, S, E), value (*Bv, S, Ev) or None (the
    output is then None), in the accumulation dtype; ``mask`` None or a
    float mask added to the scores, (..., L, S) broadcastable; ``seen``
    boolean (..., L, S) from `attention_lib.masks.visible_keys`; ``keep``
    the dropout draw (or None) and ``p`` its probability. Weights are
    exactly 0 where a key is hidden, also in a row holding NaN; a row that
    sees no key is all 0.
    """
    scores = xp.matmul(query * scale, xp.matrix_transpose(key))  # (..., L, S), any value
    scores = apply_mask(xp, scores, mask)  # (..., L, S)
    scores = xp.where(seen, scores, -xp.inf)  # (..., L, S), hidden keys out, NaN or not
    weights = xp.where(seen, softmax(scores, axis=-1), 0.0)  # (..., L, S)
    dropped = apply_dropout(xp, weights, keep, p)  # (..., L, S)
    out = None if value is None else visible_matmul(xp, dropped, value, seen)  # (..., L, Ev)
    return weights, dropped, out


def sum_to(x: Any, shape: tuple[int, ...]) -> Any:
    """Torch ``x`` summed over the dimensions it was broadcast along, to ``shape``.

    A gradient of a broadcast input: float32 is summed in float64 and
    rounded once (16-bit inputs reach here upcast to float32). On a device
    without float64 (`attention_lib.backend.has_float64`: MPS) it is summed
    in float32, one broadcast copy at a time, each addition's rounding error
    carried and added back at the end (`add_compensated`): as close as
    float64's sum, rounded once, for any number of copies up to millions.
    Chosen over a float64 sum on the CPU: the gradient stays on its device
    (no copy out and back, no wait for the device), and the copies are few
    (a batch, a group of heads), each one elementwise pass. Differentiable.
    """
    import torch

    if tuple(x.shape) == tuple(shape):
        return x
    if x.dtype != torch.float32:
        return x.sum_to_size(shape)
    if has_float64(x):
        return x.to(torch.float64).sum_to_size(shape).to(x.dtype)
    full = (1,) * (x.dim() - len(shape)) + tuple(shape)
    summed = [d for d in range(x.dim()) if full[d] == 1 and x.shape[d] != 1]
    kept = [d for d in range(x.dim()) if d not in summed]
    copies = x.permute(*summed, *kept).reshape(-1, *shape)  # (N, *shape)
    if not copies.shape[0]:  # summed over an empty dimension
        return x.new_zeros(shape)
    total, carry = copies[0], torch.zeros_like(copies[0])
    for copy in copies[1:]:
        total, carry = add_compensated(total, carry, copy)
    return total + carry  # (*shape)


def add_compensated(total: Any, carry: Any, x: Any) -> tuple[Any, Any]:
    """``(total + x, carry + error)``: a sum and its carried rounding errors, one term more.

    Knuth's two-sum: ``error`` is exactly what rounding ``total + x`` lost,
    so ``total + carry`` at the end is the sum as if taken in twice the
    precision, rounded once. Elementwise, for tensors (or arrays) of one
    shape; differentiable (the errors pass no gradient, the sum passes it
    to both terms).
    """
    summed = total + x
    back = summed - total  # the part of x that the sum holds
    error = (total - (summed - back)) + (x - back)  # what rounding lost, exactly
    return summed, carry + error


@functools.cache
def _exact_function() -> Any:
    """The exact route as a `torch.autograd.Function` (built on first use: no torch import)."""
    import torch
    from torch.autograd.function import once_differentiable

    from .backend import namespace

    class ExactAttention(torch.autograd.Function):
        @staticmethod
        def forward(  # type: ignore[override]
            ctx: Any,
            query: Any,
            key: Any,
            value: Any,
            mask: Any,
            seen: Any,
            keep: Any,
            scale: float,
            p: float,
        ) -> Any:
            xp = namespace(query)
            weights, dropped, out = exact_forward(xp, query, key, value, mask, seen, scale, keep, p)
            ctx.save_for_backward(query, key, value, mask, seen, keep, weights)
            ctx.config = (scale, p)
            return dropped if value is None else out

        @staticmethod
        @once_differentiable
        def backward(ctx: Any, grad: Any) -> tuple[Any, ...]:  # type: ignore[override]
            query, key, value, mask, seen, keep, weights = ctx.saved_tensors
            scale, p = ctx.config
            xp = namespace(grad)
            seen_t = xp.matrix_transpose(seen)  # (..., S, L)
            dvalue = None
            if value is None:  # the weights were the output
                d_dropped = xp.where(seen, grad, 0.0)  # (..., L, S)
            else:
                d_dropped = xp.where(seen, grad @ xp.matrix_transpose(value), 0.0)  # (..., L, S)
                dropped = apply_dropout(xp, weights, keep, p)  # (..., L, S)
                dvalue = visible_matmul(xp, xp.matrix_transpose(dropped), grad, seen_t)
                dvalue = sum_to(dvalue, value.shape)  # (*Bv, S, Ev)
            dweights = apply_dropout(xp, d_dropped, keep, p)  # (..., L, S)
            row = xp.sum(weights * dweights, axis=-1, keepdims=True)  # (..., L, 1)
            dscores = xp.where(seen, weights * (dweights - row), 0.0)  # (..., L, S)
            dquery = visible_matmul(xp, dscores, key, seen) * scale  # (..., L, E)
            dkey = visible_matmul(xp, xp.matrix_transpose(dscores), query * scale, seen_t)
            dmask = None if mask is None else sum_to(dscores, mask.shape)
            return (
                sum_to(dquery, query.shape),
                sum_to(dkey, key.shape),
                dvalue,
                dmask,
                *(None,) * 4,
            )

    return ExactAttention


def exact_attention(xp: Any, *inputs: Any) -> Any:
    """`exact_forward`'s output (or its dropped weights when ``value`` is None), differentiable.

    ``inputs`` are `exact_forward`'s after ``xp``: query, key, value, mask,
    seen, scale, keep, p; ``mask`` is a float mask (its gradient is
    returned) or None. For torch tensors the gradients come from a backward
    pass under the same rule; numpy arrays get the forward pass alone.
    """
    from .backend import is_torch_array

    query, key, value, mask, seen, scale, keep, p = inputs
    if is_torch_array(query):
        return _exact_function().apply(query, key, value, mask, seen, keep, scale, p)
    _, dropped, out = exact_forward(xp, *inputs)
    return dropped if value is None else out
