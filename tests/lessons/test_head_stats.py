"""Per-head measurements, on weights and vectors whose answers are known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attention_course.lessons.saturation import jacobian_row_norms
from attention_course.model.head_stats import (
    alignment_ratio,
    attended_cosine,
    head_summary,
    jacobian_norm,
    log_keys,
    logit_spread,
    parallel_alignment,
    raw_qk_rms,
    row_entropy,
    row_mask,
    saturated_fraction,
    saturation_step,
    top_weight,
)
from attention_lib.normalisers import softmax

T = 5


def causal_softmax(logits):
    """Weights of (B, H, T, T) logits with the causal mask applied."""
    keep = np.tril(np.ones(logits.shape[-2:], dtype=bool))
    return softmax(np.where(keep, logits, -np.inf), axis=-1)


def test_row_mask_skips_padding_and_the_first_position():
    rows = row_mask(np.array([3, 5]), T)
    assert rows.tolist() == [
        [False, True, True, False, False],
        [False, True, True, True, True],
    ]
    with pytest.raises(ValueError, match="lengths"):
        row_mask(np.array([0, 3]), T)


def test_uniform_weights_have_entropy_ln_n_and_the_largest_jacobian():
    logits = np.zeros((1, 1, T, T))  # every visible key scores the same
    weights = causal_softmax(logits)
    rows = row_mask(np.array([T]), T)
    expected_entropy = np.mean([math.log(n) for n in range(2, T + 1)])
    assert row_entropy(weights, rows) == pytest.approx([expected_entropy])
    assert log_keys(rows, 1) == pytest.approx([expected_entropy])
    # uniform over n keys: ||diag(p) - pp^T||_F = sqrt(1/n - 1/n^2)
    expected_jac = np.mean([math.sqrt(1 / n - 1 / n**2) for n in range(2, T + 1)])
    assert jacobian_norm(weights, rows) == pytest.approx([expected_jac])
    assert top_weight(weights, rows) == pytest.approx([np.mean([1 / n for n in range(2, T + 1)])])
    assert logit_spread(logits, rows) == pytest.approx([0.0])
    assert saturated_fraction(weights, rows) == pytest.approx([0.0])


def closed_form_norm(p: np.ndarray) -> np.ndarray:
    """||diag(p) - p pᵀ||_F of each row, written out: sqrt(Σp² - 2Σp³ + (Σp²)²)."""
    s2, s3 = (p**2).sum(axis=-1), (p**3).sum(axis=-1)
    return np.sqrt(np.maximum(s2 - 2 * s3 + s2**2, 0.0))


def test_the_jacobian_norm_matches_the_full_matrix_and_the_closed_form():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 2, T, T)) * 2
    weights = causal_softmax(logits)
    rows = row_mask(np.array([5, 4, 2]), T)
    keep = np.tril(np.ones((T, T), dtype=bool))
    full = jacobian_row_norms(np.where(keep, logits, -np.inf))  # (3, 2, T)
    expected = [(full[:, h][rows]).mean() for h in range(2)]
    assert jacobian_norm(weights, rows) == pytest.approx(expected, rel=1e-12)
    closed = closed_form_norm(weights)  # (3, 2, T)
    by_hand = [(closed[:, h][rows]).mean() for h in range(2)]
    assert jacobian_norm(weights, rows) == pytest.approx(by_hand, rel=1e-12)


def test_the_jacobian_norm_stays_exact_near_one_hot():
    """Rows (1 - ε, ε, 0, ...): ||J|| = 2ε(1 - ε) exactly; the closed form loses every digit
    (its terms are O(1) and cancel to O(ε²)), so it cannot be the norm recorded for a head."""
    eps = 1e-10
    weights = np.zeros((1, 1, T, T))
    weights[..., 0, 0] = 1.0
    weights[..., 1:, 0], weights[..., 1:, 1] = 1 - eps, eps
    rows = row_mask(np.array([T]), T)
    assert jacobian_norm(weights, rows)[0] == pytest.approx(2 * eps * (1 - eps), rel=1e-9)
    assert closed_form_norm(weights[0, 0, 1]) != pytest.approx(2 * eps, rel=1e-2)


def test_float32_weights_are_held_to_float32s_simplex():
    """A float32 model's rows sum to one within float32's rounding, not float64's."""
    import torch

    logits = torch.randn(2, 2, T, T, generator=torch.Generator().manual_seed(0))
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    weights = torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)  # float32
    rows = row_mask(np.array([T, 3]), T)
    closed = closed_form_norm(weights.double().numpy())  # (2, 2, T), far from one-hot
    expected = [(closed[:, h][rows]).mean() for h in range(2)]
    np.testing.assert_allclose(jacobian_norm(weights, rows), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="NOT on the simplex"):  # float64's tolerance is tighter
        jacobian_norm(weights.double().numpy() * (1 + 1e-6), rows)


def test_one_hot_rows_are_saturated_with_no_gradient():
    logits = np.full((1, 2, T, T), -50.0)
    logits[0, 0, :, 0] = 50.0  # head 0: every row puts everything on key 0
    weights = causal_softmax(logits)
    rows = row_mask(np.array([T]), T)
    assert saturated_fraction(weights, rows)[0] == 1.0
    assert top_weight(weights, rows)[0] == pytest.approx(1.0)
    assert jacobian_norm(weights, rows)[0] < 1e-20
    assert row_entropy(weights, rows)[0] < 1e-20


def test_logit_spread_is_the_std_over_the_visible_keys():
    logits = np.zeros((1, 1, 3, 3))
    logits[0, 0, 1, :2] = [1.0, 3.0]  # std 1
    logits[0, 0, 2, :] = [0.0, 3.0, 6.0]  # std sqrt(6)
    logits[0, 0, 1, 2] = 1e9  # above the diagonal: ignored
    rows = row_mask(np.array([3]), 3)
    assert logit_spread(logits, rows) == pytest.approx([(1 + math.sqrt(6)) / 2])


def test_alignment_is_one_for_independent_and_sqrt_d_for_parallel_vectors():
    d = 64
    rng = np.random.default_rng(1)
    rows = row_mask(np.full(400, T), T)
    q = rng.normal(size=(400, 1, T, d))
    k = rng.normal(size=(400, 1, T, d))
    assert alignment_ratio(q, k, rows)[0] == pytest.approx(1.0, abs=0.05)
    scale = rng.uniform(0.5, 2.0, size=(400, 1, T, 1))  # any lengths, one shared direction
    direction = rng.normal(size=(400, 1, 1, d))
    keys = np.broadcast_to(direction, (*scale.shape[:-1], d))
    assert alignment_ratio(scale * direction, keys, rows)[0] == pytest.approx(parallel_alignment(d))


def test_raw_scores_grow_like_sqrt_d_when_independent_and_like_d_when_aligned():
    rng = np.random.default_rng(3)
    rows = row_mask(np.full(300, T), T)
    for d in (16, 64):
        q = rng.normal(size=(300, 1, T, d))
        k = rng.normal(size=(300, 1, T, d))
        assert raw_qk_rms(q, k, rows)[0] / math.sqrt(d) == pytest.approx(1.0, abs=0.05)
        same = np.broadcast_to(q[:, :, :1], q.shape)  # every key and query one unit-variance row
        assert raw_qk_rms(same, same, rows)[0] / d == pytest.approx(1.0, abs=0.15)


def test_attended_cosine_weights_each_pair_by_its_attention():
    q = np.array([[[[1.0, 0.0], [1.0, 0.0]]]])  # (1, 1, 2, 2)
    k = np.array([[[[0.0, 1.0], [1.0, 1.0]]]])  # cos with q: 0 and 1/sqrt(2)
    weights = np.array([[[[1.0, 0.0], [0.25, 0.75]]]])
    rows = row_mask(np.array([2]), 2)  # only row 1 counts
    assert attended_cosine(q, k, weights, rows) == pytest.approx([0.75 / math.sqrt(2)])


def test_summary_and_saturation_step():
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(2, 3, 2, T, 4))
    logits = q @ k.swapaxes(-1, -2) / 2
    rows = row_mask(np.array([T, 4, 3]), T)
    summary = head_summary(q, k, logits, causal_softmax(logits), rows)
    assert all(v.shape == (2,) for v in summary.values())
    checkpoints = [
        {"step": s, "heads": {"saturated_fraction": [[f, f], [f, f]]}}
        for s, f in [(0, 0.1), (10, 0.4), (20, 0.6), (30, 0.9)]
    ]
    assert saturation_step(checkpoints) == 20
    assert saturation_step(checkpoints, threshold=0.95) is None


def test_shape_mismatches_are_refused():
    rows = row_mask(np.array([T]), T)
    with pytest.raises(ValueError, match=r"\(B, H, T, T\)"):
        row_entropy(np.zeros((1, T, T)), rows)
    with pytest.raises(ValueError, match="rows must be"):
        row_entropy(np.zeros((2, 1, T, T)), rows)
    with pytest.raises(ValueError, match="q and k"):
        alignment_ratio(np.zeros((1, 1, T, 4)), np.zeros((1, 1, T, 3)), rows)
