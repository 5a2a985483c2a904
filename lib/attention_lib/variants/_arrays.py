"""What every variant checks of its inputs, and how it moves numpy parameters to a tensor."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import device_of, namespace
from ..inputs import check_arrays

__all__ = ["as_like", "check_pair"]


def check_pair(query: Any, key: Any, value: Any = None, *, same_width: bool = True) -> Any:
    """The namespace of query (..., L, Eq), key (..., S, Ek) and value (..., S, Ev), checked.

    The checks of `attention_lib.inputs.check_arrays` (``same_width``: Eq ==
    Ek), and batch dimensions of key and value that broadcast to the query's
    (the variants return the query's batch). Raises TypeError or ValueError
    naming the arrays and shapes at fault.
    """
    xp = check_arrays(query, key, value, same_width=same_width)
    arrays = {"query": query, "key": key} | ({} if value is None else {"value": value})
    batch = tuple(query.shape[:-2])
    try:
        fits = np.broadcast_shapes(batch, *(tuple(x.shape[:-2]) for x in arrays.values())) == batch
    except ValueError:
        fits = False
    if not fits:
        shapes = ", ".join(f"{n} {tuple(x.shape)}" for n, x in arrays.items())
        raise ValueError(
            f"the batch dimensions of key and value must broadcast to the query's {batch}, "
            f"got {shapes}"
        )
    return xp


def as_like(values: Any, like: Any, xp: Any) -> Any:
    """``values`` as it is if it is already of ``xp``'s library, else (numpy parameters
    for a torch input) moved to ``like``'s library, dtype and device."""
    if namespace(values) is xp:
        return values
    return xp.asarray(np.asarray(values), dtype=like.dtype, device=device_of(like))
