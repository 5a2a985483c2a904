"""Sigmoid attention and differential attention, on cases checkable by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from arrays import as_lib, make, to_numpy

import attention_lib as al
from attention_lib import variants


def test_sigmoid_weights_with_zero_scores_are_one_over_n_plus_one(lib):
    """q·k = 0 everywhere: each weight is sigmoid(-log n) = 1/(1 + n), rows sum to n/(n+1)."""
    n = 5
    q = make((3, 4), lib) * 0
    k = make((n, 4), lib, seed=1)
    v = make((n, 2), lib, seed=2)
    w = to_numpy(variants.sigmoid_weights(q, k))
    assert np.allclose(w, 1 / (1 + n), atol=1e-15)
    out = to_numpy(variants.sigmoid_attention(q, k, v))
    assert np.allclose(out, to_numpy(v).sum(axis=0) / (1 + n), atol=1e-14)


def test_sigmoid_weights_are_independent_sigmoids_and_masked_keys_get_zero(lib):
    q, k = make((2, 3, 4), lib), make((2, 6, 4), lib, seed=1)
    w = to_numpy(variants.sigmoid_weights(q, k, is_causal=True, bias=-1.0))
    scores = to_numpy(q) @ to_numpy(k).swapaxes(-1, -2) / 2  # scale 1/sqrt(4)
    expected = 1 / (1 + np.exp(-(scores - 1.0)))
    keep = np.tril(np.ones((3, 6), dtype=bool))
    assert np.allclose(w, np.where(keep, expected, 0.0), atol=1e-14)
    keep = np.array([True, False, True, True, False, True])
    w = to_numpy(variants.sigmoid_weights(q, k, attn_mask=as_lib(keep, lib)))
    assert np.all(w[..., ~keep] == 0) and np.all(w[..., keep] > 0)


def test_sigmoid_does_not_overflow_at_huge_scores():
    w = variants.sigmoid_weights(np.array([[1000.0]]), np.array([[1000.0], [-1000.0]]), scale=1.0)
    assert w.tolist() == [[1.0, 0.0]]


def test_sigmoid_attention_keeps_torch_gradients():
    torch = pytest.importorskip("torch")
    q = make((2, 3, 4), "torch").requires_grad_()
    out = variants.sigmoid_attention(
        q, make((2, 5, 4), "torch", seed=1), make((2, 5, 3), "torch", seed=2)
    )
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_differential_attention_with_lambda_zero_is_ordinary_attention_on_the_first_half(lib):
    q, k, v = make((2, 3, 8), lib), make((2, 5, 8), lib, seed=1), make((2, 5, 3), lib, seed=2)
    got = to_numpy(variants.differential_attention(q, k, v, 0.0, is_causal=True))
    ref = to_numpy(al.scaled_dot_product_attention(q[..., :4], k[..., :4], v, is_causal=True))
    assert np.allclose(got, ref, atol=1e-14)


def test_two_identical_maps_cancel_and_rows_sum_to_one_minus_lambda(lib):
    q, k, v = make((3, 4), lib), make((5, 4), lib, seed=1), make((5, 2), lib, seed=2)
    qq = as_lib(np.concatenate([to_numpy(q)] * 2, axis=-1), lib)  # Q1 = Q2
    kk = as_lib(np.concatenate([to_numpy(k)] * 2, axis=-1), lib)  # K1 = K2
    assert np.abs(to_numpy(variants.differential_attention(qq, kk, v, 1.0))).max() < 1e-15
    lam = 0.3
    w = to_numpy(variants.differential_weights(make((3, 8), lib), make((5, 8), lib, seed=1), lam))
    assert np.allclose(w.sum(axis=-1), 1 - lam, atol=1e-14)
    # zero queries: both maps uniform, every weight (1 - lam) / 5
    w0 = to_numpy(
        variants.differential_weights(make((2, 8), lib) * 0, make((5, 8), lib, seed=1), lam)
    )
    assert np.allclose(w0, (1 - lam) / 5, atol=1e-15)


def test_differential_lambda_and_its_initial_value():
    assert variants.differential_lambda_init(1) == pytest.approx(0.2)
    assert variants.differential_lambda_init(2) == pytest.approx(0.8 - 0.6 * math.exp(-0.3))
    assert variants.differential_lambda_init(100) == pytest.approx(0.8, abs=1e-12)
    zero = np.zeros(4)
    assert float(variants.differential_lambda(zero, zero, zero, zero, 0.2)) == pytest.approx(0.2)
    a, b = np.array([1.0, 0.5]), np.array([0.2, 0.4])
    expected = math.exp(0.4) - math.exp(0.2 * 0.2 + 0.4 * 0.4) + 0.5
    assert float(variants.differential_lambda(a, b, b, b, 0.5)) == pytest.approx(expected)


def test_bad_input_gets_clear_errors():
    with pytest.raises(ValueError, match="even width"):
        variants.differential_weights(np.zeros((2, 3)), np.zeros((4, 3)), 0.5)
    with pytest.raises(ValueError, match="layer must be a positive integer, got 0"):
        variants.differential_lambda_init(0)
    with pytest.raises(ValueError, match="head width"):
        variants.sigmoid_attention(np.zeros((2, 3)), np.zeros((4, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="mutually exclusive"):
        variants.sigmoid_weights(
            np.zeros((2, 3)), np.zeros((4, 3)), attn_mask=np.ones((2, 4), bool), is_causal=True
        )
