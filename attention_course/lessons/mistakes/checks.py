"""The mistakes' checks: development-time assertions that raise `MistakeCaught`, and `MistakeRun`,
what running a mistake beside its correct version found."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..printing import ROUNDING_BOUND, format_difference

__all__ = [
    "MistakeCaught",
    "MistakeRun",
    "check_no_future_leak",
    "check_not_saturated",
    "check_rows_sum_to_one",
    "check_scale_matches_head_width",
    "future_leak",
]


class MistakeCaught(AssertionError):
    """A development check found one of the common mistakes."""


@dataclass(frozen=True)
class MistakeRun:
    """One mistake made for real, next to the correct version.

    ``numbers`` holds the measurements worth printing (name -> value);
    ``caught`` is the check's message on the mistaken version (None if the
    check missed it); ``correct_passes`` is whether the correct version passed.
    """

    title: str
    numbers: dict[str, float]
    caught: str | None
    correct_passes: bool
    table: str = ""  # a table to print instead of the numbers one per line

    def __str__(self) -> str:
        lines = [self.title]
        if self.table:
            lines.append(self.table)
        else:
            lines += [f"  {name}: {_shown(value)}" for name, value in self.numbers.items()]
        lines.append(f"  check on the mistake: {self.caught or 'NOT caught'}")
        lines.append(
            f"  check on the correct version: {'passes' if self.correct_passes else 'FAILS'}"
        )
        return "\n".join(lines)


def _shown(value: float) -> str:
    """4 significant digits; a rounding-level value (a sum that is one up to float
    noise) as the bound ``below 1e-12``, which is true on every CPU."""
    return format_difference(value) if abs(value) < ROUNDING_BOUND else f"{value:.4g}"


def _run_check(check: Callable[[], None]) -> str | None:
    """The message of the MistakeCaught that ``check`` raises, or None if it passes."""
    try:
        check()
    except MistakeCaught as err:
        return str(err)
    return None


# -- the checks -------------------------------------------------------------------


def check_rows_sum_to_one(weights: np.ndarray, atol: float = 1e-6) -> None:
    """Each row of ``weights`` (..., L, S) must sum to one over the keys (the last axis).

    Raises MistakeCaught naming the worst row and its sum.
    """
    sums = np.sum(weights, axis=-1)  # (..., L)
    worst = np.unravel_index(np.argmax(np.abs(sums - 1)), sums.shape)
    where = ", ".join(str(int(i)) for i in worst)
    if not np.allclose(sums, 1.0, atol=atol):
        raise MistakeCaught(
            f"rows of the weights must sum to 1 over the keys, but row {where} sums to "
            f"{sums[worst]:.4f} (row sums range {sums.min():.4f} to {sums.max():.4f}); softmax "
            "over the last axis, and mask the scores before the softmax, not the weights after"
        )


def check_scale_matches_head_width(scale: float, query: np.ndarray) -> None:
    """``scale`` must be 1/sqrt(E), E the width of one head: the query's last dimension.

    ``query`` is the per-head query (..., heads, L, E). Raises MistakeCaught
    saying which width the scale belongs to instead.
    """
    head_width = query.shape[-1]
    expected = 1.0 / math.sqrt(head_width)
    if not math.isclose(scale, expected, rel_tol=1e-9):
        width_used = 1.0 / scale**2 if scale > 0 else math.inf
        raise MistakeCaught(
            f"scale {scale:.4g} is 1/sqrt({width_used:.4g}), but one head is {head_width} wide: "
            f"expected 1/sqrt({head_width}) = {expected:.4g}; the scale is off by a factor of "
            f"{expected / scale:.3g} (was it computed from d_model, the width of all heads "
            "together, rather than from one head?)"
        )


def future_leak(
    attend: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
) -> float:
    """How far a causal ``attend(query, key, value)`` lets the last key move earlier rows.

    Changes the last key and value (the "future" of every query but the last)
    and returns the largest change of the other rows' outputs: 0 (up to
    rounding) for a correct causal attention. Shapes (L, E), (S, E), (S, Ev)
    with L = S; the inputs are not modified.
    """
    before = attend(query, key, value)  # (L, Ev)
    key2, value2 = key.copy(), value.copy()
    key2[-1] = key2[-1] * -3.0 + 1.0  # a different last key...
    value2[-1] = value2[-1] + 5.0  # ...and value
    after = attend(query, key2, value2)  # (L, Ev)
    return float(np.max(np.abs(after[:-1] - before[:-1])))


def check_no_future_leak(
    attend: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    atol: float = 1e-9,
) -> None:
    """A causal ``attend(query, key, value)`` must not let the last key change earlier rows.

    Measures `future_leak` (shapes (L, E), (S, E), (S, Ev) with L = S).
    Raises MistakeCaught with the largest change seen.
    """
    change = future_leak(attend, query, key, value)
    if change > atol:
        raise MistakeCaught(
            f"changing the last key moved the outputs of earlier queries by up to {change:.3g}: "
            "a masked (future) key still influences them; mask the scores with -inf before the "
            "softmax so masked keys leave the denominator too"
        )


def check_not_saturated(weights: np.ndarray, max_top: float = 0.9) -> None:
    """The mean largest weight of the rows of ``weights`` (..., L, S) must stay below ``max_top``.

    Near-one-hot rows pass almost no gradient back to the queries and keys.
    Raises MistakeCaught with the mean top weight.
    """
    top = float(np.max(weights, axis=-1).mean())
    if top > max_top:
        raise MistakeCaught(
            f"attention has collapsed onto single keys (mean top weight {top:.3f} > {max_top}); "
            "if the queries and keys have grown during training, normalise them (QK "
            "normalisation) instead of tuning the scale"
        )
