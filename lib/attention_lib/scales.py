"""The scale: the number the raw scores q·k are multiplied by before the softmax.

PyTorch's default is 1/sqrt(E), E the head width (`attention_lib.inputs.default_scale`).
The course compares it with other rules and turns it up and down:

- `SCALE_RULES` and `scale_for`: the named rules, ``"none"`` (1),
  ``"1/sqrt(d)"`` (the standard), ``"1/d"`` (μP's rule, over-dividing for
  independent q and k) and ``"custom"`` (a constant multiplier), as a
  function of the head width d. The width sweeps, the explorers' controls
  and the small trained model all take their scale from here.
- `check_volume` and `turn_volume`: the volume knob, one more multiplier on
  top of the scale (1: as given; towards 0, even shares; large, one key
  takes all), as notebook 01's crowded room and the trained model turn it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .inputs import default_scale, positive_integer, positive_number
from .normalisers import softmax

__all__ = ["SCALE_RULES", "check_volume", "scale_for", "turn_volume"]

#: rule name -> what the logits q·k are multiplied by, for head width d and multiplier c
SCALE_RULES: dict[str, Callable[[int, float], float]] = {
    "none": lambda d, c: 1.0,
    "1/sqrt(d)": lambda d, c: default_scale(d),
    "1/d": lambda d, c: 1.0 / d,
    "custom": lambda d, c: c,
}


def scale_for(rule: str, d: int, multiplier: float = 1.0) -> float:
    """The number the raw logits q·k are multiplied by under ``rule`` at width ``d``.

    ``rule`` is one of `SCALE_RULES`: ``"none"`` (1), ``"1/sqrt(d)"`` (the
    standard), ``"1/d"`` (over-dividing) or ``"custom"`` (the constant
    ``multiplier``, the same at every width). Raises ValueError for an unknown
    rule, a width that is not a positive integer or a multiplier that is not
    positive and finite.
    """
    if rule not in SCALE_RULES:
        raise ValueError(f"unknown scale rule {rule!r}; choose one of {list(SCALE_RULES)}")
    d = positive_integer("head width d", d)
    return SCALE_RULES[rule](d, positive_number("multiplier", multiplier))


def check_volume(volume: Any) -> float:
    """``volume`` as a float if it is a finite number >= 0; ValueError naming it otherwise."""
    if not (math.isfinite(volume) and volume >= 0):
        raise ValueError(f"volume must be a finite number >= 0, got {volume}")
    return float(volume)


def turn_volume(scores: Any, volume: float) -> Any:
    """``softmax(volume * scores)`` over the last axis: scores turned up or down, as shares.

    ``scores`` (..., n) is anything numpy reads as floats (a list too) and
    is computed in float64; the result has its shape, each row summing to
    one. At volume 0 every score gets the same share; as the volume grows,
    the top score takes everything. For a head of the trained model's first
    layer this is exactly the weights it computes at that volume
    (`attention_course.model.views.where_it_looks`). Raises ValueError for a
    volume that is negative or not finite.
    """
    volume = check_volume(volume)
    return softmax(volume * np.asarray(scores, dtype=float), axis=-1)  # (..., n)
