"""Online softmax: the stepper's state at every step, its final softmax, and the pass counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support import FLOAT64

from attention_course.lessons.online import (
    CountingStream,
    compare_passes,
    online_softmax_steps,
    online_softmax_two_pass,
    online_weighted_sum_one_pass,
    safe_softmax_three_pass,
)
from attention_lib import softmax

pytestmark = pytest.mark.filterwarnings("error")  # no overflow or invalid-value warning anywhere


def random_stream(seed: int, n: int, scale: float, masked: float = 0.0) -> np.ndarray:
    """n normal scores times ``scale``, a share ``masked`` of them set to -inf (not all)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, scale, n)  # (n,)
    hide = rng.random(n) < masked
    hide[rng.integers(n)] = False  # keep at least one finite score
    x[hide] = -np.inf
    return x


STREAMS = [
    pytest.param(random_stream(seed, n, scale, masked), id=f"seed{seed}-n{n}-sd{scale:g}-m{masked}")
    for seed, n, scale, masked in [
        (0, 1, 1.0, 0.0),
        (1, 7, 1.0, 0.0),
        (2, 50, 3.0, 0.2),
        (3, 200, 10.0, 0.5),
        (4, 64, 1e4, 0.1),  # huge: exp of any raw score would overflow
        (5, 64, 1e6, 0.3),
        (6, 33, 1e-8, 0.0),  # nearly equal scores
    ]
]


@pytest.mark.parametrize("x", STREAMS)
def test_final_state_is_the_softmax(x: np.ndarray) -> None:
    trace = online_softmax_steps(x)
    np.testing.assert_allclose(trace.weights(), softmax(x), **FLOAT64)
    assert trace.weights().sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("x", STREAMS)
def test_every_step_is_the_softmax_of_the_prefix(x: np.ndarray) -> None:
    trace = online_softmax_steps(x)
    np.testing.assert_array_equal(trace.running_max, np.maximum.accumulate(x))
    for t in range(len(x)):
        np.testing.assert_allclose(trace.weights(t), softmax(x[: t + 1]), **FLOAT64)
        m = trace.running_max[t]
        shift = 0.0 if m == -np.inf else m
        direct_sum = np.exp(x[: t + 1] - shift).sum()  # what l_t should be
        assert trace.running_sum[t] == pytest.approx(direct_sum, rel=1e-12)


@pytest.mark.parametrize("x", STREAMS)
def test_rescale_factors_are_at_most_one(x: np.ndarray) -> None:
    trace = online_softmax_steps(x)
    assert np.all(trace.rescale >= 0) and np.all(trace.rescale <= 1)
    # where the max rose between two finite values, the factor is exp(old max - new max)
    m_prev, m = trace.running_max[:-1], trace.running_max[1:]
    rose = np.isfinite(m_prev) & (m > m_prev)
    np.testing.assert_allclose(trace.rescale[1:][rose], np.exp(m_prev[rose] - m[rose]), rtol=1e-15)
    assert np.all(trace.rescale[1:][np.isfinite(m_prev) & (m == m_prev)] == 1.0)


def test_hand_checked_stream() -> None:
    """[1, 3, 2, 5]: the max rises at steps 1 and 3, and each time the sum is rescaled."""
    trace = online_softmax_steps([1.0, 3.0, 2.0, 5.0])
    e = math.exp
    assert list(trace.running_max) == [1.0, 3.0, 3.0, 5.0]
    expected_sums = [1.0, e(-2) + 1, e(-2) + 1 + e(-1), (e(-2) + 1 + e(-1)) * e(-2) + 1]
    np.testing.assert_allclose(trace.running_sum, expected_sums, rtol=1e-15)
    np.testing.assert_allclose(trace.rescale, [0.0, e(-2), 1.0, e(-2)], rtol=1e-15)
    assert trace.new_max_steps == [1, 3]


def test_masked_scores() -> None:
    # leading masked keys: nothing to rescale until the first finite score arrives
    trace = online_softmax_steps([-np.inf, -np.inf, 0.0, 0.0])
    assert list(trace.running_sum) == [0.0, 0.0, 1.0, 2.0]
    assert list(trace.rescale) == [0.0, 0.0, 0.0, 1.0]
    np.testing.assert_array_equal(trace.weights(), [0.0, 0.0, 0.5, 0.5])
    # every key masked: zeros, as attention_lib.softmax gives for a fully masked row
    everything_masked = np.full(5, -np.inf)
    np.testing.assert_array_equal(online_softmax_steps(everything_masked).weights(), np.zeros(5))
    np.testing.assert_array_equal(softmax(everything_masked), np.zeros(5))


def test_bad_streams_are_refused() -> None:
    with pytest.raises(ValueError, match=r"entry 2 is nan"):
        online_softmax_steps([0.0, 1.0, np.nan])
    with pytest.raises(ValueError, match=r"entry 0 is inf"):
        online_softmax_steps([np.inf, 1.0])
    with pytest.raises(ValueError, match=r"1-D stream.*shape \(2, 2\)"):
        online_softmax_steps(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="empty stream"):
        online_softmax_steps([])
    with pytest.raises(IndexError, match=r"step 4 is outside a stream of 4 scores \(0 to 3\)"):
        online_softmax_steps([1.0, 2.0, 3.0, 4.0]).weights(4)


def test_counting_stream_counts_passes() -> None:
    stream = CountingStream([1.0, 2.0])
    assert stream.passes == 0
    assert list(stream) == [1.0, 2.0] and sum(stream) == 3.0
    assert stream.passes == 2 and len(stream) == 2


@pytest.mark.parametrize("x", STREAMS[1:4])
def test_pass_counts_three_two_one(x: np.ndarray) -> None:
    """Safe softmax reads the scores 3 times, online softmax 2, fused with the values 1."""
    values = np.random.default_rng(9).standard_normal((len(x), 3))  # (n, Ev)
    rows = compare_passes(x, values)
    assert [r.passes for r in rows] == [3, 2, 1]
    assert all(r.max_error < 1e-12 for r in rows), rows
    # and each method on its own agrees with the direct computation
    weights = softmax(x)
    np.testing.assert_allclose(safe_softmax_three_pass(CountingStream(x)), weights, **FLOAT64)
    np.testing.assert_allclose(online_softmax_two_pass(CountingStream(x)), weights, **FLOAT64)
    mixed = online_weighted_sum_one_pass(CountingStream(zip(x, values, strict=True)))
    np.testing.assert_allclose(mixed, weights @ values, **FLOAT64)


def test_compare_passes_checks_shapes() -> None:
    with pytest.raises(ValueError, match=r"shape \(n, Ev\) = \(3, Ev\).*got \(4, 2\)"):
        compare_passes([1.0, 2.0, 3.0], np.zeros((4, 2)))
    with pytest.raises(ValueError, match="is empty"):
        online_weighted_sum_one_pass(CountingStream([]))
