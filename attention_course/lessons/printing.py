"""How the lessons print numbers, so that a page reads the same on every machine.

`format_difference` prints a difference that is only float rounding as a
bound; `format_table` prints rows of measurements as an aligned text table.

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
from collections.abc import Sequence
from typing import Any

from attention_lib.inputs import positive_integer, positive_number

__all__ = ["ROUNDING_BOUND", "format_difference", "format_table"]

ROUNDING_BOUND = 1e-12


def format_difference(value: float, bound: float = ROUNDING_BOUND, digits: int = 3) -> str:
    """``value`` (a difference or an error) as text that is the same on every machine.

    Below ``bound`` in size (rounding): ``"below 1e-12"``. At or above it: the
    value with ``digits`` significant digits, in scientific notation
    (``"1.23e-01"``). NaN and infinities are printed as they are. Raises
    ValueError for a bound that is not positive and finite, or digits that
    are not a positive integer.
    """
    positive_number("bound", bound)
    positive_integer("digits", digits)
    if math.isfinite(value) and abs(value) < bound:
        return f"below {bound:.0e}"
    return f"{value:.{digits - 1}e}"


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> str:
    """Rows as a text table: ``columns`` are (key, header, format spec); None prints '-'.
    The first column is left-aligned, the others right-aligned."""
    cells = [
        ["-" if row[key] is None else format(row[key], spec) for key, _, spec in columns]
        for row in rows
    ]
    headers = [header for _, header, _ in columns]
    widths = [max(len(c) for c in column) for column in zip(headers, *cells, strict=True)]

    def line(items: Sequence[str]) -> str:
        first = f"{items[0]:<{widths[0]}}"
        rest = [f"{x:>{w}}" for x, w in zip(items[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest])

    return "\n".join(line(items) for items in [headers, *cells])
