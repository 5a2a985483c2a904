"""Normalisers: functions that turn a row of scores into shares.

`softmax` is the one attention uses. `softmax1`, `sparsemax` and `entmax15`
are the alternatives the researcher notebooks compare it with. Each works on
numpy arrays and torch tensors alike, along any axis, and computes 16-bit
inputs in float32 before rounding back.
"""

from __future__ import annotations

from typing import Any

from .backend import accumulation_dtype, device_of, namespace, require_floating

__all__ = ["entmax15", "softmax", "softmax1", "sparsemax"]


def _prepare(x: Any, axis: int, name: str) -> tuple[Any, Any, Any]:
    """Namespace, x moved so ``axis`` is last and upcast, and the original dtype."""
    xp = namespace(x)
    require_floating(xp, x, name)
    if x.ndim == 0:
        raise ValueError(f"{name} needs at least one axis to normalise over, got a 0-d array")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for {name} of an array of shape {x.shape}")
    z = xp.moveaxis(x, axis, -1)
    return xp, xp.astype(z, accumulation_dtype(xp, x.dtype)), x.dtype


def _finish(xp: Any, y: Any, axis: int, dtype: Any) -> Any:
    """Undo `_prepare`: the axis back in place and the input's dtype."""
    return xp.astype(xp.moveaxis(y, -1, axis), dtype)


def softmax(x: Any, axis: int = -1) -> Any:
    """Stable softmax: ``exp(x) / sum(exp(x))`` along ``axis``.

    Shapes: any array, normalised along ``axis``; the result has ``x``'s shape
    and dtype. Subtracting the row maximum keeps ``exp`` from overflowing, so
    logits of ±1e4 give finite shares that sum to one. A row that is all
    ``-inf`` (every key masked out) gives zeros, as PyTorch's attention does,
    instead of 0/0 = NaN. NaN or +inf in a row makes that row NaN and no other.

    Raises TypeError for integer input and ValueError for a bad ``axis``.
    """
    xp, z, dtype = _prepare(x, axis, "softmax")
    row_max = xp.max(z, axis=-1, keepdims=True)  # (..., 1)
    row_max = xp.where(row_max == -xp.inf, 0.0, row_max)  # all -inf rows: no shift
    e = xp.exp(z - row_max)  # (..., n), largest entry exactly 1
    total = xp.sum(e, axis=-1, keepdims=True)  # (..., 1), 0 only for all -inf rows
    return _finish(xp, e / xp.where(total == 0, 1.0, total), axis, dtype)


def softmax1(x: Any, axis: int = -1) -> Any:
    """Softmax with an extra 1 in the denominator: ``exp(x) / (1 + sum(exp(x)))``.

    It behaves as if every row had one more logit fixed at zero whose share is
    thrown away, so a row may sum to less than one and a head can decline to
    attend (Evan Miller's "softmax off by one"; compare attention sinks, Xiao
    et al. 2024, arXiv:2309.17453). Same shapes, dtypes and errors as `softmax`.
    """
    xp, z, dtype = _prepare(x, axis, "softmax1")
    shift = xp.max(z, axis=-1, keepdims=True)  # (..., 1)
    shift = xp.where(shift > 0, shift, 0.0)  # the implicit zero logit counts too
    e = xp.exp(z - shift)  # (..., n)
    total = xp.exp(-shift) + xp.sum(e, axis=-1, keepdims=True)  # (..., 1), >= exp(-shift) > 0
    return _finish(xp, e / total, axis, dtype)


def _sorted_cumulative(xp: Any, z: Any) -> tuple[Any, Any]:
    """Rows sorted in descending order and the ranks 1..n, shared by the sparse maps."""
    z_sorted = xp.flip(xp.sort(z, axis=-1), axis=-1)  # (..., n) descending
    n = z.shape[-1]
    rank = xp.arange(1, n + 1, dtype=z.dtype, device=device_of(z))  # (n,)
    return z_sorted, rank


def sparsemax(x: Any, axis: int = -1) -> Any:
    """Sparsemax (Martins and Astudillo, 2016, arXiv:1602.02068).

    The Euclidean projection of each row onto the probability simplex:
    ``max(x - tau, 0)`` with the threshold ``tau`` chosen so the row sums to
    one. Unlike softmax it gives exact zeros to low scores. Same shapes,
    dtypes and errors as `softmax`; rows must be finite.
    """
    xp, z, dtype = _prepare(x, axis, "sparsemax")
    z_sorted, rank = _sorted_cumulative(xp, z)
    cumsum = xp.cumulative_sum(z_sorted, axis=-1)  # (..., n)
    in_support = 1 + rank * z_sorted > cumsum  # (..., n), a prefix of the sorted row
    support_size = xp.sum(xp.astype(in_support, z.dtype), axis=-1, keepdims=True)  # (..., 1)
    support_sum = xp.sum(xp.where(in_support, z_sorted, 0.0), axis=-1, keepdims=True)
    tau = (support_sum - 1) / support_size  # (..., 1)
    return _finish(xp, xp.clip(z - tau, min=0.0), axis, dtype)


def entmax15(x: Any, axis: int = -1) -> Any:
    """1.5-entmax (Peters, Niculae and Martins, 2019, arXiv:1905.05702).

    Between softmax (alpha = 1) and sparsemax (alpha = 2): ``max(x/2 - tau, 0)**2``
    with ``tau`` chosen so each row sums to one, found exactly by sorting.
    Sparse like sparsemax, smoother near ties. Same shapes, dtypes and errors
    as `softmax`; rows must be finite.
    """
    xp, z, dtype = _prepare(x, axis, "entmax15")
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
    return _finish(xp, xp.clip(z - tau_star, min=0.0) ** 2, axis, dtype)
