"""Normalisers: functions that turn a row of scores into shares, and what shares are.

`softmax` is the one attention uses. `softmax1`, `sparsemax` and `entmax15`
are the alternatives the researcher notebooks compare it with. Each works on
numpy arrays and torch tensors alike, along any axis, and computes 16-bit
inputs in float32 before rounding back.

Of the shares themselves: `simplex_check` (is every row non-negative and
summing to one?), `entropy` (how spread a row is, in nats), and the
softmax's Jacobian at its output, `softmax_jacobian` and its size
`softmax_jacobian_norm`: what a gradient passes back through the softmax,
and what vanishes when a row saturates. They are written once here, and the
lessons, the model's head measurements and the explorers call them.

The two sparse maps have closed-form gradients (`sparsemax_backward`,
`entmax15_backward`), written once for both libraries. Torch tensors that
require grad use them as their backward pass instead of differentiating
the sorting forward pass step by step: that chain takes a square root at
exactly zero inside the threshold search of `entmax15` whenever a row has
ties, and turns the whole row's gradient into NaN.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .backend import (
    accumulation_dtype,
    describe,
    device_of,
    is_torch_array,
    namespace,
    nan_is_expected,
    require_floating,
)

__all__ = [
    "SimplexCheck",
    "entmax15",
    "entmax15_backward",
    "entropy",
    "simplex_check",
    "softmax",
    "softmax1",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "sparsemax",
    "sparsemax_backward",
]

_RowFn = Callable[[Any, Any], Any]  # fn(xp, z) on rows along the last axis
_RowVjp = Callable[[Any, Any, Any], Any]  # vjp(xp, y, grad): the gradient with respect to z


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


def _rowwise(fn: _RowFn | None = None, *, vjp: _RowVjp | None = None) -> Any:
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


def _rowwise_backward(vjp: _RowVjp) -> Callable[..., Any]:
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


# -- what shares are ----------------------------------------------------------------------


@dataclass(frozen=True)
class SimplexCheck:
    """Whether every row of shares lies on the probability simplex.

    ``rows`` rows of ``length`` shares each; ``min_share`` is the smallest
    share anywhere, ``max_sum_error`` the largest |row sum − 1| measured,
    ``atol`` the tolerance that error is held to and ``eps`` the machine
    epsilon of the shares' dtype.

    Printed, the measured error is a bound that holds on every machine
    (`rounding_bound`), and the tolerance is printed beside it: the digits
    of rounding differ from one CPU to another.
    """

    rows: int
    length: int
    min_share: float
    max_sum_error: float
    atol: float
    eps: float

    @property
    def ok(self) -> bool:
        """Every share is >= 0 and every row sums to one within ``atol``."""
        return self.min_share >= 0.0 and self.max_sum_error <= self.atol

    @property
    def rounding_bound(self) -> float:
        """The power of ten at or above 8·length·eps: more than rounding can leave in a row sum.

        A softmax row of n shares, each rounded in its exp, its sum and its
        division, then summed, is off by at most about (2n + 3)·eps; 8·n·eps
        covers that on any machine.
        """
        return 10.0 ** math.ceil(math.log10(8 * max(self.length, 1) * self.eps))

    def __str__(self) -> str:
        verdict = "every row is on the simplex" if self.ok else "NOT on the simplex"
        bound = self.rounding_bound
        error = f"below {bound:.0e}" if self.max_sum_error < bound else f"{self.max_sum_error:.2e}"
        return (
            f"{self.rows} rows of {self.length} shares: smallest share {self.min_share:.3g} "
            f"({'>= 0' if self.min_share >= 0 else '< 0'}), largest |row sum - 1| {error} "
            f"(tolerance {self.atol:.1e}): {verdict}"
        )


def simplex_check(weights: Any, atol: float | None = None) -> SimplexCheck:
    """Check that each row of ``weights`` (..., n), along the last axis, is on the simplex.

    A row is on the simplex when its entries are non-negative and sum to one.
    ``atol`` bounds |row sum − 1|; by default the square root of the dtype's
    machine epsilon (1.5e-8 in float64, 3.5e-4 in float32), room for the
    rounding of a sum. numpy arrays or torch tensors; nothing is modified.

    Raises TypeError for non-float input and ValueError for a 0-d array or
    rows of length zero.
    """
    xp = namespace(weights)
    require_floating(xp, weights, "weights")
    if weights.ndim == 0 or weights.shape[-1] == 0:
        raise ValueError(f"weights need rows along the last axis, got {describe(weights)}")
    eps = float(xp.finfo(weights.dtype).eps)
    if atol is None:
        atol = math.sqrt(eps)
    if is_torch_array(weights):
        weights = weights.detach()  # only numbers are read; no autograd graph
    sums = xp.sum(weights, axis=-1)  # (...,)
    return SimplexCheck(
        rows=math.prod(int(s) for s in weights.shape[:-1]),
        length=int(weights.shape[-1]),
        min_share=float(xp.min(weights)),
        max_sum_error=float(xp.max(xp.abs(sums - 1.0))),
        atol=float(atol),
        eps=eps,
    )


def entropy(weights: Any, axis: int = -1) -> Any:
    """Shannon entropy in nats of each row of shares ``weights`` along ``axis``.

    0·log 0 counts as 0, so exact zeros (masked keys, sparsemax's zeros)
    add nothing; ln(n) for n even shares, 0 for one-hot. numpy or torch;
    the result has ``weights``' shape without ``axis``, in its dtype.
    Raises TypeError for non-float input.
    """
    xp = namespace(weights)
    require_floating(xp, weights, "weights")
    safe = xp.where(weights > 0, weights, 1.0)  # log(1) = 0 where a weight is exactly 0
    return -xp.sum(weights * xp.log(safe), axis=axis)


def softmax_jacobian(p: Any, atol: float | None = None) -> Any:
    """The Jacobian of softmax at shares ``p``: J[..., i, j] = ∂p_i/∂s_j = p_i (δ_ij − p_j).

    ``p`` (..., n) holds rows of softmax output (numpy or torch, any float
    dtype); the result is (..., n, n) in the same library, dtype and device,
    batched over the leading dimensions. J is symmetric, its rows sum to zero
    (adding a constant to every score changes nothing), and it tends to zero
    as p approaches one-hot. The diagonal is computed as p_i Σ_{j≠i} p_j, not
    p_i (1 − p_i): near one-hot, 1 − p_top rounds to 0 long before the other
    weights do, and ‖J‖ would come out √3/2 of its value (exactly 2 (1 − p_top)
    when a single runner-up holds the rest).

    Raises TypeError for non-float input and ValueError if ``p`` is 0-d or a
    row is not on the simplex (see `simplex_check`; ``atol`` is passed on).
    """
    _require_shares(p, atol, "softmax_jacobian")
    xp = namespace(p)
    n = p.shape[-1]
    eye = xp.eye(n, dtype=p.dtype, device=device_of(p))  # (n, n)
    others = p[..., None, :] * (1 - eye)  # (..., n, n): row i is p with p_i zeroed
    rest = xp.sum(others, axis=-1)  # (..., n): Σ_{j≠i} p_j, exact where 1 − p_i is not
    return (p * rest)[..., :, None] * eye - p[..., :, None] * others  # (..., n, n)


def softmax_jacobian_norm(p: Any, atol: float | None = None) -> Any:
    """The Frobenius norm of `softmax_jacobian` at each row of shares ``p`` (..., n): (...,).

    How strongly a row's shares answer a small change of its scores: at
    most 1/2 (two keys tied, the rest at zero), sqrt(1/n - 1/n²) for n even
    shares, and 2 (1 - p_top) as a row nears one-hot with a single runner-up.
    Summed from `softmax_jacobian`'s exact entries without building the (n, n)
    matrix: ‖J‖² = Σ_i p_i² (r_i² + q_i), with r_i = Σ_{j≠i} p_j (the diagonal
    p_i r_i) and q_i = Σ_{j≠i} p_j² (row i's off-diagonal -p_i p_j). Every term
    is a sum of non-negative numbers, so it stays accurate near one-hot where
    ``diag(p) - p pᵀ`` and the closed form Σp² - 2Σp³ + (Σp²)² lose every
    digit; a tenth of the time of the matrix (a slider in notebook 04 sums it
    over 11,000 rows). Same library, dtype and device as ``p``; errors as
    `softmax_jacobian` (``atol`` is passed on).
    """
    _require_shares(p, atol, "softmax_jacobian_norm")
    xp = namespace(p)
    n = p.shape[-1]
    others = 1 - xp.eye(n, dtype=p.dtype, device=device_of(p))  # (n, n), zero diagonal
    squares = p * p  # (..., n)
    rest = p @ others  # (..., n): r_i = Σ_{j≠i} p_j, exact where 1 − p_i is not
    rest_of_squares = squares @ others  # (..., n): q_i = Σ_{j≠i} p_j²
    return xp.sqrt(xp.sum(squares * (rest * rest + rest_of_squares), axis=-1))  # (...,)


def _require_shares(p: Any, atol: float | None, who: str) -> None:
    """Raise ValueError unless each row of ``p`` is on the simplex (`simplex_check`)."""
    check = simplex_check(p, atol)
    if not check.ok:
        raise ValueError(
            f"{who} needs rows of shares (softmax output) along the last axis; "
            f"{describe(p)} is not: {check}"
        )
