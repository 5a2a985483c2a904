"""The lesson's own numbers, reproduced by the library's code from the same seeded draws."""

from __future__ import annotations

import numpy as np

from attention_lib.lessons.experiments import (
    format_scaling_tables,
    hand_checkable_example,
    scaling_tables,
)

# The lesson's scaling.py output, as printed there.
LESSON_TABLES = """\
how big do raw dot products get as the head width d grows?
    d   std of q.k   std of q.k/sqrt(d)
    4         2.00                 1.00
   16         4.01                 1.00
   64         7.96                 1.00
  256        16.06                 1.00

what that does to attention weights over 6 keys (2000 random trials):
    d   mean top weight, no scaling   with scaling
    4                         0.574          0.399
   16                         0.776          0.418
   64                         0.890          0.422
  256                         0.946          0.421"""


def test_both_tables_match_the_lesson_digit_for_digit():
    assert format_scaling_tables(*scaling_tables(seed=0)) == LESSON_TABLES


def test_tables_follow_the_theory():
    spread, top = scaling_tables(seed=0)
    for row in spread:  # std(q.k) = sqrt(d) within sampling error, 1 after scaling
        assert abs(row.raw_std / np.sqrt(row.d) - 1) < 0.02
        assert abs(row.scaled_std - 1) < 0.02
    unscaled = [r.unscaled for r in top]
    assert unscaled == sorted(unscaled)  # the winner takes more as d grows
    assert max(r.scaled for r in top) - min(r.scaled for r in top) < 0.03  # flat when scaled


def test_another_seed_gives_other_draws_but_the_same_story():
    spread, _ = scaling_tables(seed=1)
    assert format_scaling_tables(spread, []) != format_scaling_tables(scaling_tables(0)[0], [])
    assert all(abs(r.scaled_std - 1) < 0.02 for r in spread)


def test_hand_checkable_example():
    ex = hand_checkable_example()
    np.testing.assert_array_equal(np.round(ex.logits, 3), [[0.707, 0, 0.707], [0, 0.707, 0.707]])
    np.testing.assert_array_equal(
        np.round(ex.weights, 3), [[0.401, 0.198, 0.401], [0.198, 0.401, 0.401]]
    )
    np.testing.assert_allclose(ex.weights.sum(axis=1), 1.0, rtol=1e-15)
    np.testing.assert_array_equal(np.round(ex.output, 3), [[6.017, 3.983], [3.983, 6.017]])
    # exact values: weights e^a / (2 e^a + 1) with a = 1/sqrt(2)
    a = np.exp(1 / np.sqrt(2))
    np.testing.assert_allclose(ex.weights[0], [a, 1, a] / (2 * a + 1), rtol=1e-14)
