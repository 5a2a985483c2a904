"""Inverted dropout on attention weights: which weights survive, and how they are scaled.

Each weight is kept with probability 1 - p and the survivors are scaled by
1/(1 - p), so the expected output is unchanged (PyTorch's convention). The
draw is made in float32 whatever the inputs' dtype, so one seed drops the
same weights in float16, float32 and float64: a low-precision run can be
compared with a float64 one, dropout and all.
"""

from __future__ import annotations

from typing import Any

from .backend import device_of, uniform

__all__ = ["apply_dropout", "dropout_keep"]


def dropout_keep(xp: Any, shape: tuple[int, ...], like: Any, p: float, generator: Any) -> Any:
    """Which weights survive: boolean ``shape``, True with probability 1 - p; None for p = 0.

    ``like`` gives the device (numpy or torch, and which torch device);
    ``generator`` is an int seed, a numpy Generator (numpy) or a
    torch.Generator (torch), as `attention_lib.backend.uniform` takes it.
    """
    if p == 0.0:
        return None
    draws_like = xp.zeros((0,), dtype=xp.float32, device=device_of(like))  # dtype and device
    return uniform(xp, shape, draws_like, generator) >= p  # (*shape)


def apply_dropout(xp: Any, weights: Any, keep: Any, p: float) -> Any:
    """``weights`` with the dropped ones zeroed and the survivors scaled by 1/(1 - p)."""
    if keep is None:
        return weights
    boost = 1.0 / (1.0 - p) if p < 1.0 else 0.0  # p = 1 keeps nothing
    return xp.where(keep, weights * boost, 0.0)  # (..., L, S)
