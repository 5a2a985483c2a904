"""Normalisers: functions that turn a row of scores into shares.

`softmax` is the one attention uses. `softmax1`, `sparsemax` and `entmax15`
are the alternatives the researcher notebooks compare it with. Each works on
numpy arrays and torch tensors alike, along any axis, and computes 16-bit
inputs in float32 before rounding back.

The two sparse maps have closed-form gradients (`sparsemax_backward`,
`entmax15_backward`), written once for both libraries. Torch tensors that
require grad use them as their backward pass instead of differentiating
the sorting forward pass step by step: that chain takes a square root at
exactly zero inside the threshold search of `entmax15` whenever a row has
ties, and turns the whole row's gradient into NaN.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .backend import (
    accumulation_dtype,
    device_of,
    is_torch_array,
    namespace,
    nan_is_expected,
    require_floating,
)

__all__ = [
    "entmax15",
    "entmax15_backward",
    "softmax",
    "softmax1",
    "sparsemax",
    "sparsemax_backward",
]

RowFn = Callable[[Any, Any], Any]  # fn(xp, z) on rows along the last axis
RowVjp = Callable[[Any, Any, Any], Any]  # vjp(xp, y, grad): the gradient with respect to z


def _check_rows(xp: Any, x: Any, axis: int, name: str) -> None:
    require_floating(xp, x, name)
    if x.ndim == 0:
        raise ValueError(f"{name} needs at least one axis to normalise over, got a 0-d array")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(
            f"axis {axis} is out of range for {name} of an array of shape {tuple(x.shape)}"
        )


def _needs_grad(z: Any) -> bool:
    """Whether autograd will differentiate through ``z`` (torch is loaded when it is a tensor)."""
    if not is_torch_array(z):
        return False
    import torch

    return bool(z.requires_grad) and torch.is_grad_enabled()


@functools.cache
def _closed_form_function() -> Any:
    """A `torch.autograd.Function` whose backward pass is a given closed form.

    Built on first use, so that importing this module does not import torch.
    ``apply(z, forward, vjp)`` returns ``forward(z)`` and, on the way back,
    ``vjp(y, grad)``. The vjp is itself differentiable (it is made of torch
    operations on the saved output), so second derivatives work where the
    map is twice differentiable.
    """
    import torch

    class ClosedFormBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, z: Any, forward: Callable, vjp: Callable) -> Any:  # type: ignore[override]
            y = forward(z)  # (..., n), computed without recording the sort and the threshold search
            ctx.save_for_backward(y)
            ctx.vjp = vjp
            return y

        @staticmethod
        def backward(ctx: Any, grad: Any) -> tuple[Any, None, None]:  # type: ignore[override]
            (y,) = ctx.saved_tensors
            return ctx.vjp(y, grad), None, None

    return ClosedFormBackward


def _rowwise(fn: RowFn | None = None, *, vjp: RowVjp | None = None) -> Any:
    """Make ``fn(xp, z)``, written for rows along the last axis of a float32/64 z,
    into a public normaliser ``f(x, axis=-1)`` for any axis and float dtype.

    Checks the input, moves ``axis`` last, computes 16-bit floats in float32,
    passes empty rows through unchanged, and puts axis and dtype back. With
    ``vjp(xp, y, grad)`` (the map's vector-Jacobian product in closed form,
    from its output y), torch tensors that require grad get that as their
    backward pass; otherwise autograd differentiates ``fn`` itself.
    """
    if fn is None:
        return functools.partial(_rowwise, vjp=vjp)
    name = fn.__name__.lstrip("_")

    def normaliser(x: Any, axis: int = -1) -> Any:
        xp = namespace(x)
        _check_rows(xp, x, axis, name)
        z = xp.moveaxis(x, axis, -1)  # (..., n)
        z = xp.astype(z, accumulation_dtype(xp, x.dtype), copy=False)
        if z.shape[-1] == 0:
            y = z
        elif vjp is not None and _needs_grad(z):
            y = _closed_form_function().apply(
                z, functools.partial(fn, xp), functools.partial(vjp, xp)
            )  # (..., n)
        else:
            y = fn(xp, z)  # (..., n)
        return xp.astype(xp.moveaxis(y, -1, axis), x.dtype, copy=False)

    # not functools.wraps: its __wrapped__ would make help() show (xp, z)
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(normaliser, attr, getattr(fn, attr))
    return normaliser


def _rowwise_backward(vjp: RowVjp) -> Callable[..., Any]:
    """Make ``vjp(xp, y, grad)`` (rows along the last axis) into a public
    ``backward(output, grad, axis=-1)`` for any axis and float dtype."""
    name = vjp.__name__.lstrip("_").replace("_vjp", "_backward")

    def backward(output: Any, grad: Any, axis: int = -1) -> Any:
        xp = namespace(output, grad)
        _check_rows(xp, output, axis, name)
        require_floating(xp, grad, name)
        if tuple(output.shape) != tuple(grad.shape):
            raise ValueError(
                f"{name} needs output and grad of one shape, got {tuple(output.shape)} "
                f"and {tuple(grad.shape)}"
            )
        acc = accumulation_dtype(xp, output.dtype)
        y = xp.astype(xp.moveaxis(output, axis, -1), acc, copy=False)  # (..., n)
        g = xp.astype(xp.moveaxis(grad, axis, -1), acc, copy=False)  # (..., n)
        dz = vjp(xp, y, g) if y.shape[-1] > 0 else g  # (..., n)
        return xp.astype(xp.moveaxis(dz, -1, axis), output.dtype, copy=False)

    backward.__name__ = backward.__qualname__ = name
    backward.__doc__ = vjp.__doc__
    backward.__module__ = vjp.__module__
    return backward


@nan_is_expected
@_rowwise
def softmax(xp: Any, z: Any) -> Any:
    """Stable softmax: ``exp(x) / sum(exp(x))`` along ``axis``.

    Shapes: any array, normalised along ``axis``; the result has ``x``'s shape
    and dtype. Subtracting the row maximum keeps ``exp`` from overflowing, so
    logits of ±1e4 give finite shares that sum to one. A row that is all
    ``-inf`` (every key masked out) gives zeros, as PyTorch's attention does,
    instead of 0/0 = NaN. NaN or +inf in a row makes that row NaN and no other.

    Raises TypeError for integer input and ValueError for a bad ``axis``.
    """
    row_max = xp.max(z, axis=-1, keepdims=True)  # (..., 1)
    row_max = xp.where(row_max == -xp.inf, 0.0, row_max)  # all -inf rows: no shift
    e = xp.exp(z - row_max)  # (..., n), largest entry exactly 1
    total = xp.sum(e, axis=-1, keepdims=True)  # (..., 1), 0 only for all -inf rows
    return e / xp.where(total == 0, 1.0, total)


@nan_is_expected
@_rowwise
def softmax1(xp: Any, z: Any) -> Any:
    """Softmax with an extra 1 in the denominator: ``exp(x) / (1 + sum(exp(x)))``.

    It behaves as if every row had one more logit fixed at zero whose share is
    thrown away, so a row may sum to less than one and a head can decline to
    attend (Evan Miller's "softmax off by one"; compare attention sinks, Xiao
    et al. 2024, arXiv:2309.17453). Same shapes, dtypes and errors as `softmax`.
    """
    shift = xp.max(z, axis=-1, keepdims=True)  # (..., 1)
    shift = xp.where(shift > 0, shift, 0.0)  # the implicit zero logit counts too
    e = xp.exp(z - shift)  # (..., n)
    total = xp.exp(-shift) + xp.sum(e, axis=-1, keepdims=True)  # (..., 1), >= exp(-shift) > 0
    return e / total


def _sorted_cumulative(xp: Any, z: Any) -> tuple[Any, Any]:
    """Rows sorted in descending order and the ranks 1..n, shared by the sparse maps."""
    z_sorted = xp.flip(xp.sort(z, axis=-1), axis=-1)  # (..., n) descending
    n = z.shape[-1]
    rank = xp.arange(1, n + 1, dtype=z.dtype, device=device_of(z))  # (n,)
    return z_sorted, rank


def _sparsemax_vjp(xp: Any, y: Any, grad: Any) -> Any:
    """The gradient of a loss through ``y = sparsemax(x)``: the vector-Jacobian product.

    ``output`` is sparsemax's result y along ``axis``, ``grad`` the loss's
    gradient with respect to it (same shape); returns the gradient with
    respect to x, in the output's dtype (16-bit computed in float32). On the support
    S = {i : y_i > 0} the map is x -> x - tau with tau the mean of x over S
    minus 1/|S|, so the Jacobian is I - 1 1^T / |S| there and 0 elsewhere
    (Martins and Astudillo, 2016, section 2.5):

        dx_i = grad_i - mean_{j in S} grad_j   for i in S,   0 otherwise.

    At a tie on the threshold (x_i = tau, y_i = 0) the map has a kink; like
    the entmax package, the support is taken as {y > 0}. Raises as `softmax`,
    and ValueError for shapes that differ.
    """
    support = y > 0  # (..., n)
    size = xp.sum(xp.astype(support, y.dtype), axis=-1, keepdims=True)  # (..., 1), >= 1
    mean = xp.sum(xp.where(support, grad, 0.0), axis=-1, keepdims=True) / size  # (..., 1)
    return xp.where(support, grad - mean, 0.0)  # (..., n)


sparsemax_backward = _rowwise_backward(_sparsemax_vjp)


@_rowwise(vjp=_sparsemax_vjp)
def sparsemax(xp: Any, z: Any) -> Any:
    """Sparsemax (Martins and Astudillo, 2016, arXiv:1602.02068).

    The Euclidean projection of each row onto the probability simplex:
    ``max(x - tau, 0)`` with the threshold ``tau`` chosen so the row sums to
    one. Unlike softmax it gives exact zeros to low scores. Same shapes,
    dtypes and errors as `softmax`; rows must be finite.

    Shift-invariant: the row maximum is subtracted first, so a large common
    offset (1e4 in float32) costs no precision. Torch tensors get the
    closed-form gradient of `sparsemax_backward`.
    """
    z = z - xp.max(z, axis=-1, keepdims=True)  # (..., n), largest entry exactly 0
    z_sorted, rank = _sorted_cumulative(xp, z)
    cumsum = xp.cumulative_sum(z_sorted, axis=-1)  # (..., n)
    in_support = 1 + rank * z_sorted > cumsum  # (..., n), a prefix of the sorted row
    support_size = xp.sum(xp.astype(in_support, z.dtype), axis=-1, keepdims=True)  # (..., 1)
    support_sum = xp.sum(xp.where(in_support, z_sorted, 0.0), axis=-1, keepdims=True)
    tau = (support_sum - 1) / support_size  # (..., 1)
    return xp.clip(z - tau, min=0.0)


def _entmax15_vjp(xp: Any, y: Any, grad: Any) -> Any:
    """The gradient of a loss through ``y = entmax15(x)``: the vector-Jacobian product.

    ``output`` is entmax15's result y along ``axis``, ``grad`` the loss's
    gradient with respect to it (same shape); returns the gradient with
    respect to x, in the output's dtype (16-bit computed in float32). With s = sqrt(y), which
    is x/2 - tau on the support and 0 off it, differentiating
    y_i = (x_i/2 - tau)^2 under sum(y) = 1 gives the Jacobian
    diag(s) - s s^T / sum(s) (Peters, Niculae and Martins, 2019, section 3), so

        dx = s * grad - s * sum(s * grad) / sum(s).

    It needs only the output, and no square root of zero enters a
    derivative: rows with ties get finite gradients. Raises as `softmax`,
    and ValueError for shapes that differ.
    """
    support = y > 0  # (..., n)
    # sqrt(y) off the support is 0; the where keeps sqrt's infinite slope at 0 out of
    # second derivatives taken through this function
    s = xp.where(support, xp.sqrt(xp.where(support, y, 1.0)), 0.0)  # (..., n)
    s_grad = s * grad  # (..., n)
    mean = xp.sum(s_grad, axis=-1, keepdims=True) / xp.sum(s, axis=-1, keepdims=True)  # (..., 1)
    return s_grad - mean * s  # (..., n)


entmax15_backward = _rowwise_backward(_entmax15_vjp)


@_rowwise(vjp=_entmax15_vjp)
def entmax15(xp: Any, z: Any) -> Any:
    """1.5-entmax (Peters, Niculae and Martins, 2019, arXiv:1905.05702).

    Between softmax (alpha = 1) and sparsemax (alpha = 2): ``max(x/2 - tau, 0)**2``
    with ``tau`` chosen so each row sums to one, found exactly by sorting.
    Sparse like sparsemax, smoother near ties. Same shapes, dtypes and errors
    as `softmax`; rows must be finite. Shift-invariant (the row maximum is
    subtracted first). Torch tensors get the closed-form gradient of
    `entmax15_backward`, finite also on rows with ties.
    """
    z = z / 2
    z = z - xp.max(z, axis=-1, keepdims=True)  # (..., n), shift-invariant, keeps squares small
    z_sorted, rank = _sorted_cumulative(xp, z)
    mean = xp.cumulative_sum(z_sorted, axis=-1) / rank  # (..., n) mean of the top k
    mean_sq = xp.cumulative_sum(z_sorted**2, axis=-1) / rank  # (..., n)
    spread = rank * (mean_sq - mean**2)  # (..., n) k times the variance of the top k
    delta = xp.clip((1 - spread) / rank, min=0.0)  # (..., n)
    tau = mean - xp.sqrt(delta)  # (..., n) threshold if the support were the top k
    support_size = xp.sum(xp.astype(tau <= z_sorted, z.dtype), axis=-1, keepdims=True)
    tau_star = xp.sum(xp.where(rank == support_size, tau, 0.0), axis=-1, keepdims=True)
    return xp.clip(z - tau_star, min=0.0) ** 2
