"""Rotary positions: a rotation per pair of components, and what it leaves of the variance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_course.lessons.positions import (
    aligned_mean,
    rotary_angles,
    rotary_dot_products,
    rotate,
)


def test_a_rotation_keeps_every_length_and_the_product_sees_only_the_distance():
    x = np.random.default_rng(0).standard_normal((2, 5, 8))  # (B, T, d)
    turned = rotate(x, [0, 1, 2, 30, 400])
    np.testing.assert_allclose(np.linalg.norm(turned, axis=-1), np.linalg.norm(x, axis=-1))
    q, k = x[0, :1], x[1, :1]  # (1, d) each
    near = rotate(q, [7]) @ rotate(k, [3]).T  # distance 4
    far = rotate(q, [1007]) @ rotate(k, [1003]).T  # the same distance, 1000 positions on
    assert abs(near.item() - far.item()) < 1e-12
    np.testing.assert_array_equal(rotate(q, [0]), q)  # position 0: no turn


def test_the_angles_follow_the_papers_frequencies():
    angles = rotary_angles(4, [0, 2], base=100.0)  # θ = 100^0, 100^(-2/4) = 1, 0.1
    np.testing.assert_allclose(angles, [[0.0, 0.0], [2.0, 0.2]])


def test_independent_queries_and_keys_keep_variance_d_at_every_distance():
    d, n = 64, 20_000
    standard_error = d * math.sqrt((2 + 6 / d) / n)
    for distance in (0, 3, 500):
        x = rotary_dot_products(d, distance, n, rng=distance)
        assert abs(x.var(ddof=1) - d) < 4 * standard_error, distance


def test_a_key_that_matches_its_query_scores_less_the_further_apart_they_are():
    d = 64
    assert aligned_mean(d, 0) == pytest.approx(d)
    means = [aligned_mean(d, t) for t in (0, 1, 8, 64, 512)]
    assert means == sorted(means, reverse=True)
    sampled = rotary_dot_products(d, 8, 20_000, aligned=True, rng=1)
    assert abs(sampled.mean() - aligned_mean(d, 8)) < 4 * sampled.std() / math.sqrt(20_000)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rotary_angles(7, [0]), "d must be even, got 7"),
        (lambda: rotary_angles(8, [0], base=0), "base"),
        (lambda: rotate(np.ones((3, 8)), [0, 1]), "2 positions for 3 tokens"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
