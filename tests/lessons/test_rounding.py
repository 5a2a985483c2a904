"""Rounding-level differences are printed as a bound, real ones with their digits."""

from __future__ import annotations

import math

import pytest

from attention_course.lessons.printing import ROUNDING_BOUND, format_difference


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "below 1e-12"),
        (6.94e-18, "below 1e-12"),  # what one CPU printed for a right answer ...
        (1.39e-17, "below 1e-12"),  # ... and another
        (-9.9e-13, "below 1e-12"),
        (1e-12, "1.00e-12"),  # the bound itself is not rounding
        (0.123456, "1.23e-01"),
        (-2.5, "-2.50e+00"),
        (math.inf, "inf"),
    ],
)
def test_format_difference(value: float, text: str) -> None:
    assert format_difference(value) == text


def test_format_difference_options() -> None:
    assert ROUNDING_BOUND == 1e-12
    assert format_difference(3e-9, bound=1e-8) == "below 1e-08"
    assert format_difference(0.123456, digits=1) == "1e-01"
    assert format_difference(math.nan) == "nan"
    with pytest.raises(ValueError, match="bound must be positive and finite, got 0"):
        format_difference(1.0, bound=0)
    with pytest.raises(ValueError, match="digits must be a positive integer, got 0"):
        format_difference(1.0, digits=0)
