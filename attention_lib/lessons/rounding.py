"""How the lessons print a difference that is only float rounding: as a bound.

The last bits of a float result depend on the machine: MKL and OpenBLAS pick
code paths per processor, numpy's ufuncs pick SIMD kernels, and the number of
threads changes the order of a sum. The same check prints a largest error of
6.94e-18 on one CPU and 1.39e-17 on another; both are rounding, and neither
is worth printing. What holds on every machine is a bound: "below 1e-12".

`ROUNDING_BOUND` is far above float64 rounding on the lessons' small, O(1)
problems (about 1e-16 per operation) and far below any real mistake they
show (0.01 and up), so a result on either side of it says the same thing on
every CPU.
"""

from __future__ import annotations

import math

__all__ = ["ROUNDING_BOUND", "format_difference"]

ROUNDING_BOUND = 1e-12


def format_difference(value: float, bound: float = ROUNDING_BOUND, digits: int = 3) -> str:
    """``value`` (a difference or an error) as text that is the same on every machine.

    Below ``bound`` in size (rounding): ``"below 1e-12"``. At or above it: the
    value with ``digits`` significant digits, in scientific notation
    (``"1.23e-01"``). NaN and infinities are printed as they are. Raises
    ValueError for a bound that is not positive and finite, or digits < 1.
    """
    if not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"bound must be positive and finite, got {bound!r}")
    if digits < 1:
        raise ValueError(f"digits must be at least 1, got {digits!r}")
    if math.isfinite(value) and abs(value) < bound:
        return f"below {bound:.0e}"
    return f"{value:.{digits - 1}e}"
