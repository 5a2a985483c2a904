"""The reference path, point by point against PyTorch's documented semantics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from arrays import FLOAT64, as_lib, make, qkv, to_numpy, torch_sdpa

from attention_lib import AttentionMemoryError, attention_weights, scaled_dot_product_attention

sdpa = scaled_dot_product_attention


def manual(query, key, value, scale, mask=None):
    """softmax(q k^T * scale + mask) v, written out in float64 numpy."""
    scores = np.swapaxes(key, -1, -2)
    scores = query @ scores * scale
    if mask is not None:
        scores = scores + mask
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ value


def test_returns_the_input_library_and_dtype(lib):
    q, k, v = qkv(lib, dtype="float32")
    out = sdpa(q, k, v)
    assert type(out) is type(q) and out.dtype == q.dtype
    assert tuple(out.shape) == (2, 3, 5, 3)


def test_default_scale_is_one_over_sqrt_of_query_width():
    # value width 3 and a "model width" of 12 must not enter the scale: E = 4
    q, k, v = qkv("numpy", width=4, value_width=3)
    np.testing.assert_allclose(sdpa(q, k, v), manual(q, k, v, 1 / math.sqrt(4)), **FLOAT64)
    np.testing.assert_allclose(sdpa(q, k, v), torch_sdpa(q, k, v), **FLOAT64)


@pytest.mark.parametrize("scale", [0.0, -0.7, 2.5, 1e-3])
def test_explicit_scale_is_used_as_given(lib, scale):
    q, k, v = qkv(lib)
    out = to_numpy(sdpa(q, k, v, scale=scale))
    np.testing.assert_allclose(out, manual(*map(to_numpy, (q, k, v)), scale), **FLOAT64)
    np.testing.assert_allclose(out, torch_sdpa(q, k, v, scale=scale), **FLOAT64)
    if scale == 0.0:  # every key scores the same: the plain mean of the values
        np.testing.assert_allclose(
            out, np.broadcast_to(to_numpy(v).mean(-2, keepdims=True), out.shape)
        )


def test_boolean_mask_true_takes_part(lib):
    q, k, v = qkv(lib, batch=(), length=3, keys=4)
    mask = np.array([[1, 1, 0, 0], [0, 1, 0, 0], [1, 1, 1, 1]], dtype=bool)
    out = to_numpy(sdpa(q, k, v, attn_mask=as_lib(mask, lib)))
    qn, kn, vn = map(to_numpy, (q, k, v))
    np.testing.assert_allclose(out[0], manual(qn[:1], kn[:2], vn[:2], 0.5)[0], **FLOAT64)
    np.testing.assert_allclose(out[1], vn[1], **FLOAT64)  # one key left: its value exactly
    np.testing.assert_allclose(out[2], manual(qn[2:], kn, vn, 0.5)[0], **FLOAT64)


def test_float_mask_is_added_to_the_scaled_scores():
    q, k, v = qkv("numpy")
    bias = make((5, 7), seed=9)
    np.testing.assert_allclose(sdpa(q, k, v, attn_mask=bias), manual(q, k, v, 0.5, bias), **FLOAT64)
    np.testing.assert_allclose(sdpa(q, k, v, attn_mask=bias), torch_sdpa(q, k, v, attn_mask=bias))


@pytest.mark.parametrize(
    "mask_shape", [(7,), (5, 7), (1, 5, 7), (3, 1, 7), (2, 1, 5, 7), (2, 3, 5, 7)]
)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks_broadcast_from_any_broadcastable_shape(mask_shape, kind):
    q, k, v = qkv("numpy")
    rng = np.random.default_rng(4)
    mask = rng.random(mask_shape) > 0.3 if kind == "bool" else rng.normal(size=mask_shape)
    # PyTorch wants at least (L, S); the same mask, broadcast that far, is the oracle's input
    oracle_mask = np.broadcast_to(mask, np.broadcast_shapes(mask.shape, (5, 7)))
    np.testing.assert_allclose(
        sdpa(q, k, v, attn_mask=mask), torch_sdpa(q, k, v, attn_mask=oracle_mask), **FLOAT64
    )


def test_mask_that_does_not_broadcast_names_the_shapes():
    q, k, v = qkv("numpy")
    with pytest.raises(ValueError, match=r"attn_mask of shape \(5, 6\) .* \(2, 3, 5, 7\)"):
        sdpa(q, k, v, attn_mask=np.ones((5, 6), dtype=bool))
    with pytest.raises(TypeError, match=r"boolean or floating point.*int64"):
        sdpa(q, k, v, attn_mask=np.ones((5, 7), dtype=np.int64))


@pytest.mark.parametrize(("length", "keys"), [(5, 5), (3, 7), (7, 3)])
def test_causal_is_the_top_left_lower_triangle(lib, length, keys):
    q, k, v = qkv(lib, length=length, keys=keys)
    out = to_numpy(sdpa(q, k, v, is_causal=True))
    tril = np.tril(np.ones((length, keys), dtype=bool))
    np.testing.assert_allclose(out, to_numpy(sdpa(q, k, v, attn_mask=as_lib(tril, lib))))
    np.testing.assert_allclose(out, torch_sdpa(q, k, v, is_causal=True), **FLOAT64)


def test_mask_with_is_causal_is_an_error_saying_mutually_exclusive():
    q, k, v = qkv("numpy")
    with pytest.raises(ValueError, match="mutually exclusive"):
        sdpa(q, k, v, attn_mask=np.ones((5, 7), dtype=bool), is_causal=True)


def test_row_with_every_key_masked_gives_zeros(lib):
    q, k, v = qkv(lib, batch=(), length=3, keys=4)
    bool_mask = np.ones((3, 4), dtype=bool)
    bool_mask[1] = False
    float_mask = np.where(bool_mask, 0.0, -np.inf)
    for mask in (bool_mask, float_mask):
        m = as_lib(mask, lib)
        out = to_numpy(sdpa(q, k, v, attn_mask=m))
        np.testing.assert_array_equal(out[1], 0.0)
        assert np.isfinite(out).all()
        np.testing.assert_array_equal(to_numpy(attention_weights(q, k, attn_mask=m))[1], 0.0)


def test_row_of_very_negative_finite_values_gives_the_uniform_average(lib):
    q, k, v = qkv(lib, batch=(), length=2, keys=4, dtype="float32")
    mask = np.full((2, 4), -1e30, dtype=np.float32)
    out = to_numpy(sdpa(q, k, v, attn_mask=as_lib(mask, lib)))
    np.testing.assert_allclose(out, np.broadcast_to(to_numpy(v).mean(0), (2, 3)), rtol=1e-6)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_in_a_query_shows_up_in_its_own_row_only(lib, bad):
    q, k, v = qkv(lib, batch=(2,), length=4)
    q[1, 2, 0] = bad
    out = to_numpy(sdpa(q, k, v))
    assert not np.isfinite(out[1, 2]).all()
    finite = np.ones(out.shape[:-1], dtype=bool)
    finite[1, 2] = False
    assert np.isfinite(out[finite]).all()


@pytest.mark.parametrize("rank", [2, 3, 4, 5])
def test_ranks_two_to_five_give_query_shape_with_value_width(lib, rank):
    batch = (2, 3, 2)[: rank - 2]
    q, k, v = qkv(lib, batch=batch, value_width=6)
    out = sdpa(q, k, v)
    assert tuple(out.shape) == (*tuple(q.shape[:-1]), 6)
    np.testing.assert_allclose(to_numpy(out), torch_sdpa(q, k, v), **FLOAT64)


def test_rank_one_is_a_clear_error():
    with pytest.raises(ValueError, match=r"query needs at least 2 dimensions.*\(4,\)"):
        sdpa(np.ones(4), np.ones((3, 4)), np.ones((3, 2)))


@pytest.mark.parametrize(
    ("batch", "length", "keys"), [((0, 3), 5, 7), ((2, 0), 5, 7), ((2, 3), 0, 7)]
)
def test_empty_batch_heads_or_length_give_an_empty_result(lib, batch, length, keys):
    q, k, v = qkv(lib, batch=batch, length=length, keys=keys)
    out = sdpa(q, k, v)
    assert (
        tuple(out.shape) == (*batch, length, 3) and out.size == 0
        if lib == "numpy"
        else out.numel() == 0
    )


def test_no_keys_gives_zeros(lib):
    q, k, v = qkv(lib, keys=0)
    out = to_numpy(sdpa(q, k, v))
    assert out.shape == (2, 3, 5, 3)
    np.testing.assert_array_equal(out, torch_sdpa(q, k, v))
    np.testing.assert_array_equal(out, 0.0)


def test_zero_head_width_gives_the_mean_of_the_values(lib):
    q, k, v = qkv(lib, width=0)
    out = to_numpy(sdpa(q, k, v))
    np.testing.assert_allclose(out, np.broadcast_to(to_numpy(v).mean(-2, keepdims=True), out.shape))
    np.testing.assert_allclose(out, torch_sdpa(q, k, v), **FLOAT64)


def test_grouped_query_attention_repeats_key_value_heads(lib):
    q = make((2, 6, 5, 4), lib)
    k, v = make((2, 3, 7, 4), lib, seed=1), make((2, 3, 7, 2), lib, seed=2)
    out = to_numpy(sdpa(q, k, v, enable_gqa=True))
    np.testing.assert_allclose(out, torch_sdpa(q, k, v, enable_gqa=True), **FLOAT64)
    # query heads 0 and 1 share key/value head 0 (repeat_interleave, not tile)
    np.testing.assert_allclose(out[:, 1], to_numpy(sdpa(q[:, 1], k[:, 0], v[:, 0])), **FLOAT64)


def test_grouped_heads_must_divide():
    q, k, v = make((2, 4, 5, 4)), make((2, 3, 7, 4)), make((2, 3, 7, 2))
    with pytest.raises(
        ValueError, match=r"query heads \(4\) to be a multiple of the key heads \(3\)"
    ):
        sdpa(q, k, v, enable_gqa=True)
    with pytest.raises(ValueError, match="enable_gqa=True"):
        sdpa(make((2, 6, 5, 4)), k, v)


def test_single_key_value_head_broadcasts_without_gqa(lib):
    q = make((2, 6, 5, 4), lib)
    k, v = make((2, 1, 7, 4), lib, seed=1), make((2, 1, 7, 2), lib, seed=2)
    np.testing.assert_allclose(to_numpy(sdpa(q, k, v)), torch_sdpa(q, k, v), **FLOAT64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_within_twice_pytorchs_own_error(dtype):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    q, k, v = qkv("torch", batch=(2, 4), length=33, keys=65, width=64, value_width=64)
    exact = F.scaled_dot_product_attention(q, k, v)  # float64 reference
    low = [x.to(getattr(torch, dtype)) for x in (q, k, v)]
    ours = sdpa(*low)
    assert ours.dtype == getattr(torch, dtype)
    our_err = (ours.double() - exact).abs().max().item()
    torch_err = (F.scaled_dot_product_attention(*low).double() - exact).abs().max().item()
    assert our_err <= 2 * torch_err + 1e-5, (our_err, torch_err)


def test_float16_numpy_is_accumulated_in_float32():
    q, k, v = qkv("numpy", length=16, keys=300, width=64, value_width=8)
    exact = sdpa(q, k, v)
    low = sdpa(*(x.astype(np.float16) for x in (q, k, v)))
    assert low.dtype == np.float16
    # rounding the inputs and the output to float16 only: a few units of float16's 1e-3
    assert np.abs(low - exact).max() < 5e-3


def test_mismatched_dtypes_are_named():
    q, k, v = qkv("numpy")
    with pytest.raises(TypeError, match="query float64, key float32, value float64"):
        sdpa(q, k.astype(np.float32), v)
    with pytest.raises(TypeError, match=r"query must be a floating-point array.*int64"):
        sdpa(q.astype(np.int64), k, v)
    with pytest.raises(TypeError, match="mix array libraries"):
        sdpa(q, make(k.shape, "torch"), v)


def test_mismatched_head_widths_and_lengths_are_named():
    q, k, v = qkv("numpy")
    with pytest.raises(ValueError, match=r"same head width E.*\(2, 3, 5, 4\).*\(2, 3, 7, 5\)"):
        sdpa(q, make((2, 3, 7, 5)), v)
    with pytest.raises(ValueError, match=r"same length S.*\(2, 3, 7, 4\).*\(2, 3, 6, 3\)"):
        sdpa(q, k, make((2, 3, 6, 3)))
    with pytest.raises(
        ValueError,
        match=r"must broadcast together, got query \(2, 3, 5, 4\), key \(4, 3, 7, 4\), "
        r"value \(4, 3, 7, 3\)$",  # no hint: enable_gqa=True would fail too
    ):
        sdpa(q, make((4, 3, 7, 4)), make((4, 3, 7, 3)))


def test_mismatched_devices_are_named():
    q, k, v = qkv("torch")
    with pytest.raises(ValueError, match=r"one device.*query on cpu, key on meta"):
        sdpa(q, k.to("meta"), v)


def test_dropout_is_inverted_and_reproducible(lib):
    q, k, v = qkv(lib, batch=(4, 8), length=32, keys=32)
    seed = 7 if lib == "numpy" else __import__("torch").Generator().manual_seed(7)
    w = to_numpy(attention_weights(q, k, dropout_p=0.25, generator=seed))
    again = to_numpy(attention_weights(q, k, dropout_p=0.25, generator=7))
    np.testing.assert_array_equal(w, again)
    plain = to_numpy(attention_weights(q, k))
    kept = w != 0
    assert abs(1 - kept.mean() - 0.25) < 0.02  # about a quarter dropped
    np.testing.assert_allclose(w[kept], plain[kept] / 0.75, **FLOAT64)  # survivors scaled up
    out = to_numpy(sdpa(q, k, v, dropout_p=0.25, generator=7))
    np.testing.assert_allclose(out, to_numpy(sdpa(q, k, v, dropout_p=0.25, generator=7)))
    assert not np.allclose(out, to_numpy(sdpa(q, k, v, dropout_p=0.25, generator=8)))


def test_dropout_arguments_are_checked():
    q, k, v = qkv("numpy")
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\], got 1.5"):
        sdpa(q, k, v, dropout_p=1.5)
    with pytest.raises(
        TypeError, match=r"numpy inputs need an int seed or numpy\.random\.Generator"
    ):
        sdpa(q, k, v, dropout_p=0.1, generator="seed")
    np.testing.assert_array_equal(sdpa(q, k, v, dropout_p=1.0), 0.0)


def test_torch_tensors_keep_autograd_and_match_pytorchs_gradients():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    q, k, v = (x.requires_grad_() for x in qkv("torch", batch=(2,), length=3, keys=4))
    mask = torch.tensor([[True, False, True, True]] * 3)
    assert torch.autograd.gradcheck(lambda *a: sdpa(*a, attn_mask=mask), (q, k, v))
    ours = torch.autograd.grad(sdpa(q, k, v, is_causal=True).sum(), (q, k, v))
    theirs = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum(), (q, k, v)
    )
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)


def test_too_large_a_score_matrix_is_refused_with_the_size_and_the_way_out(lib):
    # 512 x 2^20 x 2^20 scores, 3 copies of float64: 12 PiB, in zero-copy broadcast views
    shape = (512, 1, 1 << 20, 8)
    if lib == "numpy":
        q = np.broadcast_to(np.zeros((1, 1, 1, 8)), shape)
    else:
        import torch

        q = torch.zeros(1, 1, 1, 8, dtype=torch.float64).expand(*shape)
    with pytest.raises(
        AttentionMemoryError, match=r"would need 12\.0 PiB .* use attention_lib\.flash_attention"
    ):
        sdpa(q, q, q)
    assert issubclass(AttentionMemoryError, MemoryError)


def test_memory_limit_can_be_set_explicitly():
    q, k, v = qkv("numpy", batch=(1,), length=64, keys=64)
    # 3 copies x 64 x 64 float64 = 96 KiB
    with pytest.raises(AttentionMemoryError, match=r"96\.0 KiB but only 64\.0 KiB"):
        sdpa(q, k, v, max_memory=64 * 1024)
    assert sdpa(q, k, v, max_memory=96 * 1024).shape == (1, 64, 3)


def test_attention_weights_rows_are_shares(lib):
    q, k, _ = qkv(lib)
    w = to_numpy(attention_weights(q, k))
    assert w.shape == (2, 3, 5, 7) and (w >= 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0, **FLOAT64)
