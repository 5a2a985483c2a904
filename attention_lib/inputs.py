"""Checking and preparing the inputs shared by every attention path.

`prepare` turns the public arguments into an `AttentionProblem`: the inputs
upcast for accumulation, grouped heads expanded, the mask broadcast, the scale
resolved. Every bad argument is refused here, once, with a message that names
the shapes, dtypes or values at fault, so the paths above never see it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import accumulation_dtype, describe, device_of, namespace, require_floating

__all__ = ["AttentionProblem", "default_scale", "prepare"]


@dataclass(frozen=True)
class AttentionProblem:
    """Validated attention inputs, ready to compute.

    query (..., L, E), key (..., S, E), value (..., S, Ev) are in the
    accumulation dtype with key/value heads already matched to the query's;
    mask is None or broadcast (as a view) to (..., L, S).
    """

    xp: Any
    query: Any
    key: Any
    value: Any
    mask: Any
    is_causal: bool
    scale: float
    out_dtype: Any

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the output: query.shape[:-1] + (Ev,)."""
        return (*self.query.shape[:-1], self.value.shape[-1])


def default_scale(head_width: int) -> float:
    """1/sqrt(E), E the query's last dimension (inf for E = 0, where scores are empty sums)."""
    return 1.0 / math.sqrt(head_width) if head_width > 0 else math.inf


def _check_ranks(query: Any, key: Any, value: Any) -> None:
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x.ndim < 2:
            raise ValueError(
                f"{name} needs at least 2 dimensions (..., length, width), got {describe(x)}"
            )


def _check_dtypes_and_devices(xp: Any, query: Any, key: Any, value: Any) -> None:
    for name, x in (("query", query), ("key", key), ("value", value)):
        require_floating(xp, x, name)
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(
            "query, key and value must share one dtype, got "
            f"query {query.dtype}, key {key.dtype}, value {value.dtype}"
        )
    devices = [device_of(x) for x in (query, key, value)]
    if not devices[0] == devices[1] == devices[2]:
        raise ValueError(
            "query, key and value must be on one device, got "
            f"query on {devices[0]}, key on {devices[1]}, value on {devices[2]}"
        )


def _check_widths_and_lengths(query: Any, key: Any, value: Any) -> None:
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            "query and key must have the same head width E (last dimension), got "
            f"query {tuple(query.shape)} and key {tuple(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            "key and value must have the same length S (second-to-last dimension), got "
            f"key {tuple(key.shape)} and value {tuple(value.shape)}"
        )


def _expand_groups(xp: Any, query: Any, kv: Any, name: str) -> Any:
    """Repeat each key/value head for its group of query heads along dim -3.

    Query head h uses key/value head h // (Hq // Hkv), as PyTorch's
    ``repeat_interleave`` does for ``enable_gqa=True``.
    """
    if query.ndim < 3 or kv.ndim < 3:
        raise ValueError(
            "enable_gqa=True needs a heads dimension (..., heads, length, width), got "
            f"query {tuple(query.shape)} and {name} {tuple(kv.shape)}"
        )
    hq, hkv = query.shape[-3], kv.shape[-3]
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(
            f"enable_gqa=True needs the query heads ({hq}) to be a multiple of the {name} "
            f"heads ({hkv}); got query {tuple(query.shape)} and {name} {tuple(kv.shape)}"
        )
    return xp.repeat(kv, hq // hkv, axis=-3) if hq != hkv else kv  # (..., Hq, S, *)


def _check_batch(query: Any, key: Any, value: Any, enable_gqa: bool) -> tuple[int, ...]:
    """The batch shape (all but the last two dims); key and value must broadcast to it."""
    batch = tuple(query.shape[:-2])
    others = (tuple(key.shape[:-2]), tuple(value.shape[:-2]))
    try:
        merged = np.broadcast_shapes(batch, *others)
    except ValueError:
        merged = None
    if merged != batch:
        hint = ""
        if not enable_gqa and query.ndim >= 3 and key.ndim >= 3:
            hint = "; for grouped-query attention pass enable_gqa=True"
        raise ValueError(
            "the batch dimensions of key and value must broadcast to the query's "
            f"{batch}, got query {tuple(query.shape)}, key {tuple(key.shape)}, "
            f"value {tuple(value.shape)}{hint}"
        )
    return batch


def _prepare_mask(xp: Any, attn_mask: Any, query: Any, shape: tuple[int, ...]) -> Any:
    """The mask broadcast (as a view) to (..., L, S), or a clear error."""
    if not (attn_mask.dtype == xp.bool or xp.isdtype(attn_mask.dtype, "real floating")):
        raise TypeError(f"attn_mask must be boolean or floating point, got {describe(attn_mask)}")
    if device_of(attn_mask) != device_of(query):
        raise ValueError(
            f"attn_mask is on {device_of(attn_mask)} but query is on {device_of(query)}"
        )
    try:
        fits = np.broadcast_shapes(tuple(attn_mask.shape), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the "
            f"scores' shape {shape} (..., L, S)"
        )
    full = np.broadcast_shapes(tuple(attn_mask.shape), shape[-2:])
    return xp.broadcast_to(attn_mask, full)  # (..., L, S), a view


def prepare(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> AttentionProblem:
    """Validate the public arguments and return the problem to compute.

    Raises TypeError for non-arrays, mixed libraries, non-float or mismatched
    dtypes, and bad mask dtypes; ValueError for bad ranks, widths, lengths,
    batch or head counts, devices, mask shapes, and a mask given together
    with ``is_causal=True``. Every message names the shapes or values at fault.
    """
    xp = namespace(query, key, value, attn_mask)
    _check_ranks(query, key, value)
    _check_dtypes_and_devices(xp, query, key, value)
    _check_widths_and_lengths(query, key, value)
    if attn_mask is not None and is_causal:
        raise ValueError(
            "attn_mask and is_causal=True are mutually exclusive: pass one or the other "
            "(for causal plus padding, build one boolean mask that combines both)"
        )
    if enable_gqa:
        key = _expand_groups(xp, query, key, "key")
        value = _expand_groups(xp, query, value, "value")
    batch = _check_batch(query, key, value, enable_gqa)
    length, width = query.shape[-2], query.shape[-1]
    mask = None
    if attn_mask is not None:
        mask = _prepare_mask(xp, attn_mask, query, (*batch, length, key.shape[-2]))
    scale = default_scale(width) if scale is None else float(scale)
    acc = accumulation_dtype(xp, query.dtype)
    return AttentionProblem(
        xp=xp,
        query=xp.astype(query, acc, copy=False),  # (..., L, E)
        key=xp.astype(key, acc, copy=False),  # (..., S, E)
        value=xp.astype(value, acc, copy=False),  # (..., S, Ev)
        mask=mask,
        is_causal=bool(is_causal),
        scale=scale,
        out_dtype=query.dtype,
    )
