"""Normalisers: functions that turn a row of scores into shares.

`softmax` is the one attention uses. `softmax1`, `sparsemax` and `entmax15`
are the alternatives the researcher notebooks compare it with. Each works on
numpy arrays and torch tensors alike, along any axis, and computes 16-bit
inputs in float32 before rounding back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .backend import accumulation_dtype, device_of, namespace, nan_is_expected, require_floating

__all__ = ["entmax15", "softmax", "softmax1", "sparsemax"]


def _rowwise(fn: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """Make ``fn(xp, z)``, written for rows along the last axis of a float32/64 z,
    into a public normaliser ``f(x, axis=-1)`` for any axis and float dtype.

    Checks the input, moves ``axis`` last, computes 16-bit floats in float32,
    passes empty rows through unchanged, and puts axis and dtype back.
    """
    name = fn.__name__.lstrip("_")

    def normaliser(x: Any, axis: int = -1) -> Any:
        xp = namespace(x)
        require_floating(xp, x, name)
        if x.ndim == 0:
            raise ValueError(f"{name} needs at least one axis to normalise over, got a 0-d array")
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(
                f"axis {axis} is out of range for {name} of an array of shape {tuple(x.shape)}"
            )
        z = xp.moveaxis(x, axis, -1)  # (..., n)
        z = xp.astype(z, accumulation_dtype(xp, x.dtype), copy=False)
        y = fn(xp, z) if z.shape[-1] > 0 else z  # (..., n)
        return xp.astype(xp.moveaxis(y, -1, axis), x.dtype, copy=False)

    # not functools.wraps: its __wrapped__ would make help() show (xp, z)
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(normaliser, attr, getattr(fn, attr))
    return normaliser


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


@_rowwise
def sparsemax(xp: Any, z: Any) -> Any:
    """Sparsemax (Martins and Astudillo, 2016, arXiv:1602.02068).

    The Euclidean projection of each row onto the probability simplex:
    ``max(x - tau, 0)`` with the threshold ``tau`` chosen so the row sums to
    one. Unlike softmax it gives exact zeros to low scores. Same shapes,
    dtypes and errors as `softmax`; rows must be finite.
    """
    z_sorted, rank = _sorted_cumulative(xp, z)
    cumsum = xp.cumulative_sum(z_sorted, axis=-1)  # (..., n)
    in_support = 1 + rank * z_sorted > cumsum  # (..., n), a prefix of the sorted row
    support_size = xp.sum(xp.astype(in_support, z.dtype), axis=-1, keepdims=True)  # (..., 1)
    support_sum = xp.sum(xp.where(in_support, z_sorted, 0.0), axis=-1, keepdims=True)
    tau = (support_sum - 1) / support_size  # (..., 1)
    return xp.clip(z - tau, min=0.0)


@_rowwise
def entmax15(xp: Any, z: Any) -> Any:
    """1.5-entmax (Peters, Niculae and Martins, 2019, arXiv:1905.05702).

    Between softmax (alpha = 1) and sparsemax (alpha = 2): ``max(x/2 - tau, 0)**2``
    with ``tau`` chosen so each row sums to one, found exactly by sorting.
    Sparse like sparsemax, smoother near ties. Same shapes, dtypes and errors
    as `softmax`; rows must be finite.
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
