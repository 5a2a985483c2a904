"""Checking and preparing the inputs shared by every attention path.

Two steps, so that a path which reads the inputs as they are (the Triton
kernel takes strides and maps grouped heads itself) pays for no copies:

- `check` validates the public arguments and returns an `AttentionSpec`:
  the caller's own arrays, untouched, and the sizes they imply. Every bad
  argument is refused here, once, with a message that names the shapes,
  dtypes or values at fault, so the paths above never see it.
- `materialise` turns a spec into an `AttentionProblem` for the paths that
  compute in the accumulation dtype: inputs upcast (16-bit to float32),
  grouped key/value heads repeated, a float mask upcast. Batch dimensions
  are not expanded: matrix products broadcast them, so no input is copied
  to the size of the broadcast batch.

`prepare` is the two in one. `positive_integer` is the one check for a
size argument (block sizes, widths, counts) that every module shares, and
`positive_number` the one for a positive, finite real (a scale, a rate).

The checks follow PyTorch's ``scaled_dot_product_attention`` (compared with
torch 2.13), messages aside:

- ``scale`` and ``dropout_p`` are numbers as PyTorch's float arguments take
  them: Python floats, ints and bools, numpy real scalars, and 0-dim
  tensors that do not require grad. A string, list, numpy array (0-d too),
  complex number, Fraction, Decimal or any other object is a TypeError that
  names the argument and the type; an int too large for a float is an
  OverflowError. ``is_causal`` and ``enable_gqa`` must be Python bools
  (True or False): None, 0 and 1, numpy bools and tensors are TypeErrors,
  as in PyTorch.

- ``attn_mask`` together with ``is_causal=True`` is refused.
- Batch dimensions (all but the last two) of query, key and value broadcast
  together; the output has the broadcast batch. With ``enable_gqa=True``
  the key and value heads (dim -3) are first repeated to the query's.
- A float ``attn_mask`` must have the query's dtype or be float32 (PyTorch
  accepts float32 for any query dtype, and refuses every other mismatch);
  a boolean mask is always accepted.

Where we differ, and why (edges of PyTorch's implementation, not of its
documented semantics; we keep one rule for every size and value):

- ``dropout_p`` outside [0, 1], or NaN, is a ValueError. PyTorch raises a
  RuntimeError above 1 (and for inf) but runs a negative or NaN one.
- A numpy complex scalar for ``scale`` or ``dropout_p`` is a TypeError;
  PyTorch drops its imaginary part with a warning.

- PyTorch adds the mask in place to query @ key^T, whose batch is the
  query's and key's only, so a mask with batch dimensions that only the
  value has fails there ("output with shape ... doesn't match the broadcast
  shape"). We accept every mask that broadcasts to (*batch, L, S).
- When L or S is 0, PyTorch returns query.shape[:-1] + (Ev,), its batch
  not broadcast with the key's and value's. We return (*batch, L, Ev), as
  for every other size (zeros when S is 0).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import (
    accumulation_dtype,
    describe,
    device_of,
    is_torch_array,
    namespace,
    reference_dtype,
    require_floating,
    torch_threads,
)

__all__ = [
    "FLOAT32_SCORE_BOUND",
    "AttentionProblem",
    "AttentionSpec",
    "check",
    "check_arrays",
    "check_dropout",
    "check_flag",
    "check_number",
    "default_scale",
    "materialise",
    "may_widen",
    "positive_integer",
    "positive_number",
    "prepare",
    "scores_past_bound",
    "wide_scores",
]


@dataclass(frozen=True)
class AttentionSpec:
    """A validated attention call: the caller's own arrays and the sizes they imply.

    query (*Bq, L, E), key (*Bk, S, E), value (*Bv, S, Ev) are the arrays
    as given: their dtype, device and strides, not upcast, not broadcast,
    grouped heads not expanded. ``mask`` is None or the caller's
    ``attn_mask`` as given: boolean, or floating with the query's dtype or
    float32, broadcastable to (*batch, L, S).

    ``batch`` is the shape Bq, Bk and Bv broadcast to (after, with
    ``enable_gqa``, the key and value heads are repeated to the query's);
    the output is (*batch, L, Ev) in ``out_dtype``, the query's dtype.
    ``heads_q``, ``heads_k``, ``heads_v`` are the sizes of dim -3 when
    ``enable_gqa`` (query head h reads key head h // (heads_q // heads_k)
    and value head h // (heads_q // heads_v)), else None. ``scale`` is
    resolved (1/sqrt(E) when not given); ``dropout_p`` is a float in [0, 1].
    """

    xp: Any
    query: Any
    key: Any
    value: Any
    mask: Any
    batch: tuple[int, ...]
    length_q: int
    length_k: int
    width: int
    width_v: int
    heads_q: int | None
    heads_k: int | None
    heads_v: int | None
    is_causal: bool
    scale: float
    out_dtype: Any
    enable_gqa: bool
    dropout_p: float = 0.0

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the output: (*batch, L, Ev)."""
        return (*self.batch, self.length_q, self.width_v)


@dataclass(frozen=True)
class AttentionProblem:
    """Validated attention inputs, ready to compute in the accumulation dtype.

    query (*Bq, L, E), key (*Bk, S, E), value (*Bv, S, Ev) are upcast to the
    accumulation dtype (float32 for 16-bit inputs), with key/value heads
    already repeated to the query's under ``enable_gqa``; their batch
    dimensions are left as they are and broadcast to ``batch`` (matrix
    products broadcast them: no input is copied to the broadcast size).
    ``mask`` is None, a boolean mask, or a float mask upcast like the
    inputs, with at least two dimensions, broadcastable to (*batch, L, S).
    A float mask is upcast before anything broadcasts it, so autograd sums
    its gradient in the accumulation dtype and rounds it once.
    """

    xp: Any
    query: Any
    key: Any
    value: Any
    mask: Any
    is_causal: bool
    scale: float
    out_dtype: Any
    batch: tuple[int, ...]
    dropout_p: float = 0.0

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the output: (*batch, L, Ev)."""
        return (*self.batch, self.query.shape[-2], self.value.shape[-1])


def default_scale(head_width: int) -> float:
    """1/sqrt(E), E the query's last dimension (inf for E = 0, where scores are empty sums)."""
    return 1.0 / math.sqrt(head_width) if head_width > 0 else math.inf


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def check_number(name: str, value: Any) -> float:
    """``value`` as a Python float, if PyTorch's SDPA takes it for a float argument.

    Accepted, as torch 2.13 accepts them: Python floats, ints and bools,
    numpy real scalars (``numpy.float32(2)``, ``numpy.int64(2)``), and a
    0-dim torch tensor that does not require grad. Raises TypeError naming
    ``name`` and the type for anything else (a string, a list, a numpy
    array even of 0 dimensions, a complex number, Fraction, Decimal, a
    tensor with dimensions or one that requires grad), and OverflowError for
    an int too large for a float. Imports nothing: a tensor is recognised
    without importing torch.
    """
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        number: Any = value
    elif is_torch_array(value) and value.ndim == 0 and not value.requires_grad:
        if value.dtype.is_complex:
            raise TypeError(f"{name} must be a real number, got a complex 0-dim tensor")
        number = value.item()
    else:
        shown = f" of shape {tuple(value.shape)}" if hasattr(value, "shape") else f" {value!r}"
        extra = " that requires grad" if getattr(value, "requires_grad", False) else ""
        raise TypeError(
            f"{name} must be a float (a Python or numpy real number, or a 0-dim tensor), "
            f"got {_type_name(value)}{shown[:80]}{extra}"
        )
    try:
        return float(number)
    except OverflowError:
        raise OverflowError(f"{name} = {number} is too large for a float") from None


def check_flag(name: str, value: Any) -> bool:
    """``value`` if it is a Python bool; TypeError naming ``name`` and the type otherwise.

    As in PyTorch, None, 0 and 1, numpy bools and tensors are refused: a
    flag that was meant to be something else is a mistake worth a message.
    """
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool (True or False), got {_type_name(value)} {value!r}")
    return value


def positive_integer(name: str, value: Any) -> int:
    """``value`` as an int if it is a positive integer (Python or numpy, not a bool).

    Raises ValueError naming ``name`` and the value otherwise (0, negatives,
    floats such as 2.0, strings, None, True). The one check for sizes,
    block sizes and counts in the library.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def positive_number(name: str, value: Any) -> float:
    """``value`` as a float if it is a real number, positive and finite.

    Raises ValueError naming ``name`` and the value otherwise (0, negatives,
    inf, NaN). The one check for scales, temperatures, rates and spreads.
    """
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return float(value)


def check_dropout(dropout_p: Any) -> float:
    """``dropout_p`` as a float in [0, 1]: TypeError as `check_number`, ValueError outside."""
    p = check_number("dropout_p", dropout_p)
    if not 0.0 <= p <= 1.0:  # NaN too
        raise ValueError(f"dropout_p must be in [0, 1], got {p}")
    return p


def check_arrays(query: Any, key: Any, value: Any = None, *, same_width: bool = True) -> Any:
    """The array namespace of query (..., L, E), key (..., S, E) and value (..., S, Ev),
    once they pass the checks every attention call shares.

    Each has at least two dimensions and a real floating dtype, all share one
    dtype and one device, key and value one length S, and (``same_width``)
    query and key one width E. ``value`` may be None (a call that only
    scores). Raises TypeError or ValueError naming the arrays, shapes,
    dtypes or devices at fault; batch dimensions are not checked here.
    """
    arrays = {"query": query, "key": key} | ({} if value is None else {"value": value})
    xp = namespace(*arrays.values())
    for name, x in arrays.items():
        if x.ndim < 2:
            raise ValueError(
                f"{name} needs at least 2 dimensions (..., length, width), got {describe(x)}"
            )
    for name, x in arrays.items():
        require_floating(xp, x, name)
    if len({x.dtype for x in arrays.values()}) > 1:
        found = ", ".join(f"{name} {x.dtype}" for name, x in arrays.items())
        raise TypeError(f"query, key and value must share one dtype, got {found}")
    devices = {name: device_of(x) for name, x in arrays.items()}
    if len(set(map(str, devices.values()))) > 1:
        found = ", ".join(f"{name} on {device}" for name, device in devices.items())
        raise ValueError(f"query, key and value must be on one device, got {found}")
    if same_width and query.shape[-1] != key.shape[-1]:
        raise ValueError(
            "query and key must have the same head width E (last dimension), got "
            f"query {tuple(query.shape)} and key {tuple(key.shape)}"
        )
    if value is not None and key.shape[-2] != value.shape[-2]:
        raise ValueError(
            "key and value must have the same length S (second-to-last dimension), got "
            f"key {tuple(key.shape)} and value {tuple(value.shape)}"
        )
    return xp


def _group_error(query: Any, key: Any, value: Any) -> str | None:
    """Why enable_gqa=True cannot pair these heads (a message), or None if it can."""
    for name, x in (("key", key), ("value", value)):
        if query.ndim < 3 or x.ndim < 3:
            return (
                "enable_gqa=True needs a heads dimension (..., heads, length, width), got "
                f"query {tuple(query.shape)} and {name} {tuple(x.shape)}"
            )
        hq, hkv = query.shape[-3], x.shape[-3]
        if hkv == 0 or hq % hkv != 0:
            return (
                f"enable_gqa=True needs the query heads ({hq}) to be a multiple of the {name} "
                f"heads ({hkv}); got query {tuple(query.shape)} and {name} {tuple(x.shape)}"
            )
    return None


def _batch_shapes(query: Any, key: Any, value: Any, enable_gqa: bool) -> list[tuple[int, ...]]:
    """The batch shapes that broadcast together: with enable_gqa, key and value
    heads (dim -3) count as repeated to the query's (PyTorch's repeat_interleave)."""
    shapes = [tuple(x.shape[:-2]) for x in (query, key, value)]
    if enable_gqa:
        shapes[1:] = [(*s[:-1], query.shape[-3]) for s in shapes[1:]]
    return shapes


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _check_batch(query: Any, key: Any, value: Any, enable_gqa: bool) -> tuple[int, ...]:
    """The broadcast batch shape of query, key and value, or a ValueError naming the shapes.

    The error suggests enable_gqa=True only when that call would pass.
    """
    batch = _broadcast(_batch_shapes(query, key, value, enable_gqa))
    if batch is not None:
        return batch
    hint = ""
    if (
        not enable_gqa
        and _group_error(query, key, value) is None
        and _broadcast(_batch_shapes(query, key, value, True)) is not None
    ):
        hint = (
            "; for grouped-query attention (query heads, dim -3, a multiple of the key/value "
            "heads) pass enable_gqa=True"
        )
    gqa = " (key and value heads repeated to the query's)" if enable_gqa else ""
    raise ValueError(
        "the batch dimensions (all but the last two) of query, key and value must broadcast "
        f"together{gqa}, got query {tuple(query.shape)}, key {tuple(key.shape)}, "
        f"value {tuple(value.shape)}{hint}"
    )


def _check_mask(xp: Any, attn_mask: Any, query: Any, scores: tuple[int, ...]) -> None:
    """Refuse a mask of the wrong kind, dtype, device or shape for scores of shape ``scores``."""
    if not (attn_mask.dtype == xp.bool or xp.isdtype(attn_mask.dtype, "real floating")):
        raise TypeError(f"attn_mask must be boolean or floating point, got {describe(attn_mask)}")
    if attn_mask.dtype != xp.bool and attn_mask.dtype not in (query.dtype, xp.float32):
        raise TypeError(
            f"attn_mask of dtype {attn_mask.dtype} does not match the query's dtype "
            f"{query.dtype}: a float mask must have the query's dtype or float32, as in "
            "PyTorch; cast it to the query's dtype"
        )
    if device_of(attn_mask) != device_of(query):
        raise ValueError(
            f"attn_mask is on {device_of(attn_mask)} but query is on {device_of(query)}"
        )
    if _broadcast([tuple(attn_mask.shape), scores]) != scores:
        raise ValueError(
            f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the "
            f"scores' shape {scores} (..., L, S)"
        )


def check(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    dropout_p: float = 0.0,
) -> AttentionSpec:
    """Validate the public arguments of an attention call; copy nothing.

    Raises TypeError for a ``scale`` or ``dropout_p`` that is not a number
    PyTorch takes for a float, an ``is_causal`` or ``enable_gqa`` that is
    not a bool (`check_number`, `check_flag`), non-arrays, mixed libraries, non-float or
    mismatched dtypes, and a mask that is neither boolean nor floating, or
    floating with neither the query's dtype nor float32 (the message names
    both dtypes); ValueError for ranks below 2, mismatched widths or
    lengths, batch dimensions that do not broadcast together, head counts
    that ``enable_gqa`` cannot pair, devices that differ, a mask that does
    not broadcast to (*batch, L, S), a mask given together with
    ``is_causal=True``, and ``dropout_p`` outside [0, 1]. Every message
    names the argument, shapes or values at fault.
    """
    # the plain arguments first, as PyTorch's argument parser does
    scale = None if scale is None else check_number("scale", scale)
    is_causal = check_flag("is_causal", is_causal)
    enable_gqa = check_flag("enable_gqa", enable_gqa)
    dropout_p = check_dropout(dropout_p)
    xp = namespace(query, key, value, attn_mask)
    check_arrays(query, key, value)
    if attn_mask is not None and is_causal:
        raise ValueError(
            "attn_mask and is_causal=True are mutually exclusive: pass one or the other "
            "(for causal plus padding, build one boolean mask that combines both)"
        )
    if enable_gqa and (message := _group_error(query, key, value)) is not None:
        raise ValueError(message)
    batch = _check_batch(query, key, value, enable_gqa)
    length_q, length_k = query.shape[-2], key.shape[-2]
    width, width_v = query.shape[-1], value.shape[-1]
    if attn_mask is not None:
        _check_mask(xp, attn_mask, query, (*batch, length_q, length_k))
    heads = (query.shape[-3], key.shape[-3], value.shape[-3]) if enable_gqa else (None,) * 3
    return AttentionSpec(
        xp=xp,
        query=query,
        key=key,
        value=value,
        mask=attn_mask,
        batch=batch,
        length_q=length_q,
        length_k=length_k,
        width=width,
        width_v=width_v,
        heads_q=heads[0],
        heads_k=heads[1],
        heads_v=heads[2],
        is_causal=is_causal,
        scale=default_scale(width) if scale is None else scale,
        out_dtype=query.dtype,
        enable_gqa=enable_gqa,
        dropout_p=dropout_p,
    )


def _repeat_heads(xp: Any, x: Any, heads_q: int) -> Any:
    """Repeat each key/value head for its group of query heads along dim -3.

    Query head h uses key/value head h // (Hq // Hkv), as PyTorch's
    ``repeat_interleave`` does for ``enable_gqa=True``. A single head is
    left to broadcast (no copy).
    """
    heads = x.shape[-3]
    if heads in (1, heads_q):
        return x
    return xp.repeat(x, heads_q // heads, axis=-3)  # (..., Hq, S, *)


#: The largest score a float32 problem may reach and still be tiled in float32 (`wide_scores`).
FLOAT32_SCORE_BOUND = 32.0


def wide_scores(spec: AttentionSpec) -> bool:
    """Whether a float32 problem's scores may outgrow float32 on a device with float64.

    A score's rounding error is about eps * |score|, and the weights inherit it:
    at a scale of 50 the float32 tiled path was 9% of random cases past
    FlashAttention's 2x rule, up to 23x PyTorch's error, where PyTorch's own
    rounding happened to cancel. The bound is Cauchy-Schwarz's
    (`scores_past_bound`, one pass over the inputs); above
    `FLOAT32_SCORE_BOUND` (a default scale on unit-variance inputs stays
    near 15 at E = 64 and 128) the tiled paths compute in float64, as the
    reference path always does (`backend.reference_dtype`). Non-finite
    inputs count as wide (their exact route then runs in float64). False
    for other dtypes and on a device without float64 (`may_widen`).

    The fused tiles do not call this before they start: their work items
    check the same bound on their own rows and keys, as they read them
    anyway (`attention_lib.flash.fused_tiles`).
    """
    if not may_widen(spec):
        return False
    # On one thread: torch's CPU threads spin for milliseconds after a parallel operation,
    # on the cores the tiled path's workers take next; the pass itself is a small part of
    # the forward.
    with torch_threads(1) if is_torch_array(spec.query) else contextlib.nullcontext():
        return scores_past_bound(spec.xp, spec.scale, spec.query, spec.key)


def may_widen(spec: AttentionSpec) -> bool:
    """Whether `wide_scores` could be True for ``spec``, without reading its values:
    float32 inputs on a device with float64, no array empty."""
    xp, query, key = spec.xp, spec.query, spec.key
    if query.dtype != xp.float32 or reference_dtype(xp, query.dtype, query) == query.dtype:
        return False
    return 0 not in (*query.shape, *key.shape)


def scores_past_bound(xp: Any, scale: float, query: Any, key: Any, per_entry: bool = False) -> bool:
    """Whether scale * max_i |q_i| * max_j |k_j|, a bound on every score of ``query``'s
    rows (..., L, E) against ``key``'s (..., S, E), may pass `FLOAT32_SCORE_BOUND`.

    Over all rows and keys at once; ``per_entry``: for each batch entry (one
    head, say) its own rows against its own keys, the two arrays' batch
    dimensions then equal, so that one head's large queries and another's
    large keys do not add up. True when the bound is NaN or infinite (a
    non-finite input). Neither array empty.
    """
    q_norm, k_norm = (
        xp.max(xp.linalg.vector_norm(_values(x), axis=-1), axis=-1) for x in (query, key)
    )  # (...): the longest row of each batch entry
    if per_entry:
        bound = abs(scale) * float(xp.max(q_norm * k_norm))
    else:
        bound = abs(scale) * float(xp.max(q_norm)) * float(xp.max(k_norm))
    return not bound <= FLOAT32_SCORE_BOUND  # NaN too


def _values(x: Any) -> Any:
    """``x`` without its autograd history (a torch tensor's ``detach()``), for a number
    read from it."""
    return x.detach() if is_torch_array(x) else x


def materialise(spec: AttentionSpec, exact: bool = False) -> AttentionProblem:
    """The problem the library's own paths compute, from a validated spec.

    Upcasts query, key, value and a float mask to the accumulation dtype
    (no copy when they already have it), repeats grouped key/value heads,
    and gives a mask of fewer than two dimensions leading ones (a view).
    ``exact``: the reference path's dtype instead (`backend.reference_dtype`:
    float32 widened to float64 where the device has it).
    """
    xp = spec.xp
    if exact:
        acc = reference_dtype(xp, spec.out_dtype, spec.query)
    else:
        acc = accumulation_dtype(xp, spec.out_dtype)
    query, key, value = (xp.astype(x, acc, copy=False) for x in (spec.query, spec.key, spec.value))
    if spec.enable_gqa:
        key = _repeat_heads(xp, key, spec.heads_q)  # (..., Hq or 1, S, E)
        value = _repeat_heads(xp, value, spec.heads_q)  # (..., Hq or 1, S, Ev)
    mask = spec.mask
    if mask is not None:
        if mask.dtype != xp.bool:
            mask = xp.astype(mask, acc, copy=False)  # before any broadcast: see AttentionProblem
        if mask.ndim < 2:
            mask = xp.reshape(mask, (*(1,) * (2 - mask.ndim), *mask.shape))  # (1.., S), a view
    return AttentionProblem(
        xp=xp,
        query=query,  # (*Bq, L, E)
        key=key,  # (*Bk, S, E)
        value=value,  # (*Bv, S, Ev)
        mask=mask,
        is_causal=spec.is_causal,
        scale=spec.scale,
        out_dtype=spec.out_dtype,
        batch=spec.batch,
        dropout_p=spec.dropout_p,
    )


def prepare(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    dropout_p: float = 0.0,
) -> AttentionProblem:
    """`check` the public arguments, then `materialise` the problem the reference path
    computes (``exact``: float32 in float64 where the device has it).

    Raises what `check` raises.
    """
    spec = check(query, key, value, attn_mask, is_causal, scale, enable_gqa, dropout_p)
    return materialise(spec, exact=True)
