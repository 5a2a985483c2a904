"""Property tests of the normalisers, in every dtype: shift invariance, and softmax1's relations.

softmax, sparsemax and entmax15 are shift-invariant: f(x + c) = f(x) for
any constant c added to a row. The rows here are quarters in [-8, 8] and
the shifts integers small enough that x + c is exact in the dtype, so any
difference is the normaliser's own rounding, held to a bound per dtype
against the float64 answer for the same numbers. softmax1 is not
shift-invariant (its implicit zero logit does not move); what holds is
that it is softmax with one more logit fixed at zero, whose share is
dropped, and that its row sum grows with a positive shift.
"""

from __future__ import annotations

import numpy as np
import pytest
from arrays import to_numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_lib import entmax15, softmax, softmax1, sparsemax

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# significand bits of each dtype: x + c is exact when |x + c| < 2**(bits - 2) on a grid of quarters
BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
DTYPES = [("numpy", d) for d in ("float64", "float32", "float16")] + [
    ("torch", d) for d in ("float64", "float32", "float16", "bfloat16")
]
SHIFT_INVARIANT = {"softmax": softmax, "sparsemax": sparsemax, "entmax15": entmax15}


def tolerance(dtype: str, n: int) -> float:
    """Bound on |f(x) - exact| for shares in [0, 1].

    float32/64 work in their own precision: 2 n eps for rows of n (the
    errors seen in every case were well under it; before sparsemax
    subtracted the row maximum, float32 missed it by 10^4 times).
    16-bit inputs are computed in float32 and rounded once: a unit
    in the last place of a share in [1/2, 1), twice the rounding itself.
    """
    if dtype in ("float16", "bfloat16"):
        return float(np.ldexp(1.0, -BITS[dtype]))
    return 2 * n * float(np.finfo(dtype).eps)


def as_array(x: np.ndarray, lib: str, dtype: str):
    """float64 numbers, exact in ``dtype``, as a numpy array or torch tensor of that dtype."""
    if lib == "numpy":
        return x.astype(dtype)
    torch = pytest.importorskip("torch")

    return torch.from_numpy(x).to(getattr(torch, dtype))


@st.composite
def rows_and_shift(draw, dtype):
    """(rows, shift): rows (r, n) of quarters in [-8, 8], x + shift exact in ``dtype``."""
    n = draw(st.integers(1, 8))
    r = draw(st.integers(1, 3))
    quarters = draw(st.lists(st.integers(-32, 32), min_size=n * r, max_size=n * r))
    rows = np.array(quarters, dtype=np.float64).reshape(r, n) / 4  # (r, n)
    limit = 2 ** (BITS[dtype] - 2) - 9  # |x + shift| stays below 2**(bits - 2)
    large = st.sampled_from([limit, -limit, min(10_000, limit)])  # 1e4: the offset
    shift = draw(st.one_of(large, st.integers(-limit, limit)))
    return rows, float(shift)


@pytest.mark.parametrize(("lib", "dtype"), DTYPES)
@pytest.mark.parametrize("name", sorted(SHIFT_INVARIANT))
@SETTINGS
@given(data=st.data())
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_shift_invariance_in_every_dtype(lib, dtype, name, data):
    rows, shift = data.draw(rows_and_shift(dtype))
    fn = SHIFT_INVARIANT[name]
    exact = to_numpy(fn(rows))  # (r, n), float64 on the unshifted rows
    bound = tolerance(dtype, rows.shape[-1])
    for x in (rows, rows + shift):  # both exact in dtype
        out = fn(as_array(x, lib, dtype))
        assert str(out.dtype).removeprefix("torch.") == dtype
        np.testing.assert_allclose(to_numpy(out), exact, rtol=0, atol=bound)


@pytest.mark.parametrize(("lib", "dtype"), DTYPES)
@SETTINGS
@given(data=st.data())
def test_softmax1_is_softmax_with_an_extra_zero_logit(lib, dtype, data):
    rows, shift = data.draw(rows_and_shift(dtype))
    x = rows + shift  # (r, n), exact in dtype
    with_zero = np.concatenate([x, np.zeros((x.shape[0], 1))], axis=-1)  # (r, n + 1)
    expected = to_numpy(softmax(with_zero))[:, :-1]  # (r, n), float64, the zero's share dropped
    out = softmax1(as_array(x, lib, dtype))
    assert str(out.dtype).removeprefix("torch.") == dtype
    np.testing.assert_allclose(to_numpy(out), expected, rtol=0, atol=tolerance(dtype, x.shape[-1]))


@pytest.mark.parametrize(("lib", "dtype"), DTYPES)
@SETTINGS
@given(data=st.data())
def test_softmax1_row_sums_grow_with_a_positive_shift(lib, dtype, data):
    rows, shift = data.draw(rows_and_shift(dtype))
    low, high = (to_numpy(softmax1(as_array(x, lib, dtype))) for x in (rows, rows + abs(shift)))
    bound = rows.shape[-1] * tolerance(dtype, rows.shape[-1])  # a row sum adds n roundings
    assert (high.sum(-1) >= low.sum(-1) - bound).all()
    assert (high.sum(-1) <= 1 + bound).all()
