"""The tiled path: same meaning as the reference, computed tile by tile."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import FLOAT64, make, qkv, to_numpy

from attention_lib import flash_attention, scaled_dot_product_attention
from attention_lib.flash import key_blocks
from attention_lib.flash.tiles import score_fraction


@pytest.mark.parametrize(("block_q", "block_k"), [(1, 1), (2, 3), (4, 4), (5, 7), (64, 64)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_the_reference_in_float64(lib, block_q, block_k, is_causal):
    q, k, v = qkv(lib, length=9, keys=11)
    expected = to_numpy(scaled_dot_product_attention(q, k, v, is_causal=is_causal))
    out = flash_attention(q, k, v, is_causal=is_causal, block_q=block_q, block_k=block_k)
    assert type(out) is type(q) and out.dtype == q.dtype
    np.testing.assert_allclose(to_numpy(out), expected, **FLOAT64)


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("mask_shape", [(9, 11), (3, 1, 11), (2, 1, 9, 11)])
def test_masks_are_sliced_per_tile(lib, kind, mask_shape):
    q, k, v = qkv(lib, length=9, keys=11)
    rng = np.random.default_rng(5)
    mask = rng.random(mask_shape) > 0.4 if kind == "bool" else rng.normal(size=mask_shape)
    if lib == "torch":
        import torch

        mask = torch.from_numpy(mask)
    expected = to_numpy(scaled_dot_product_attention(q, k, v, attn_mask=mask))
    out = flash_attention(q, k, v, attn_mask=mask, block_q=4, block_k=3)
    np.testing.assert_allclose(to_numpy(out), expected, **FLOAT64)


def test_fully_masked_rows_give_zeros_and_nan_stays_in_its_row(lib):
    q, k, v = qkv(lib, batch=(2,), length=6, keys=5)
    mask = np.ones((6, 5), dtype=bool)
    mask[3] = False
    q[1, 4, 0] = float("nan")
    if lib == "torch":
        import torch

        mask = torch.from_numpy(mask)
    out = to_numpy(flash_attention(q, k, v, attn_mask=mask, block_q=2, block_k=2))
    np.testing.assert_array_equal(out[:, 3], 0.0)
    assert np.isnan(out[1, 4]).all()
    rest = np.ones(out.shape[:-1], dtype=bool)
    rest[1, 4] = False
    assert np.isfinite(out[rest]).all()


def test_edge_sizes_match_the_reference(lib):
    for length, keys, width in [(0, 4, 3), (4, 0, 3), (4, 5, 0), (1, 1, 1)]:
        q, k, v = qkv(lib, length=length, keys=keys, width=width)
        out = flash_attention(q, k, v, block_q=3, block_k=2)
        expected = scaled_dot_product_attention(q, k, v)
        assert tuple(out.shape) == tuple(expected.shape)
        np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **FLOAT64)


def test_grouped_heads_and_explicit_scale(lib):
    q = make((2, 6, 5, 4), lib)
    k, v = make((2, 2, 7, 4), lib, seed=1), make((2, 2, 7, 3), lib, seed=2)
    for scale in (None, -0.4, 0.0):
        out = flash_attention(q, k, v, enable_gqa=True, scale=scale, block_q=2, block_k=3)
        expected = scaled_dot_product_attention(q, k, v, enable_gqa=True, scale=scale)
        np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **FLOAT64)


def test_low_precision_is_returned_in_its_own_dtype():
    torch = pytest.importorskip("torch")

    q, k, v = (x.to(torch.bfloat16) for x in qkv("torch", length=20, keys=30, width=16))
    out = flash_attention(q, k, v, block_q=8, block_k=8)
    assert out.dtype == torch.bfloat16
    expected = scaled_dot_product_attention(q, k, v)
    assert (out.double() - expected.double()).abs().max() < 2e-2  # a couple of bf16 ulps


def test_causal_key_blocks_wholly_above_the_diagonal_are_skipped():
    assert key_blocks((0, 4), 12, 4, is_causal=False) == [(0, 4), (4, 8), (8, 12)]
    assert key_blocks((0, 4), 12, 4, is_causal=True) == [(0, 4)]
    assert key_blocks((4, 8), 12, 3, is_causal=True) == [(0, 3), (3, 6), (6, 9)]
    assert key_blocks((8, 9), 5, 4, is_causal=True) == [(0, 4), (4, 5)]


def test_causal_keys_below_the_diagonal_can_come_in_wider_blocks():
    # the torch path's list: keys before the row block in blocks of 5, then blocks of 3 from r0
    assert key_blocks((0, 4), 12, 3, is_causal=True, block_k_below=5) == [(0, 3), (3, 4)]
    assert key_blocks((8, 12), 12, 3, is_causal=True, block_k_below=5) == [
        *[(0, 5), (5, 8)],  # below the diagonal: every row of the block sees them
        *[(8, 11), (11, 12)],  # crossing it: masked
    ]
    assert key_blocks((8, 12), 6, 3, is_causal=True, block_k_below=5) == [(0, 5), (5, 6)]  # S < r0
    # not causal: every key block, block_k wide
    assert key_blocks((8, 12), 12, 4, False, block_k_below=5) == key_blocks((8, 12), 12, 4, False)


def test_wider_blocks_below_the_diagonal_compute_no_more_scores():
    # row blocks starting on a multiple of block_k: the same scores as the even grid
    assert score_fraction(2048, 2048, 1024, 128, True, block_k_below=256) == 17 / 32
    # L = S = 8, rows in 3s, keys in 2s; per row block, the rows from `first_row` x block width
    assert (
        score_fraction(8, 8, 3, 2, True)
        == (
            (3 * 2 + 1 * 2)  # rows 0-2: keys (0, 2), (2, 4), key 3 computed and masked
            + (3 * 2 + 3 * 2 + 2 * 2)  # rows 3-5: (0, 2), (2, 4), (4, 6)
            + (2 * 2) * 4  # rows 6-7: four blocks
        )
        / 64
    )
    # below the diagonal in 4s: rows 3-5 take keys 0-2 as one block, and the blocks from r0
    # stop at the diagonal (key 3 is not computed for rows 0-2)
    assert (
        score_fraction(8, 8, 3, 2, True, block_k_below=4)
        == (
            (3 * 2 + 1 * 1)  # rows 0-2: (0, 2), (2, 3)
            + (3 * 3 + 3 * 2 + 1 * 1)  # rows 3-5: (0, 3) below, then (3, 5), (5, 6)
            + (2 * 4 + 2 * 2 + 2 * 2)  # rows 6-7: (0, 4), (4, 6) below, then (6, 8)
        )
        / 64
    )


def test_skipped_tiles_are_not_computed(lib):
    # Keys 4..7 come after every query (L = 4 < S = 8), so with block_k = 4 their
    # tile is wholly above the diagonal. NaN values there would poison the output
    # through 0 * NaN if the tile were computed and masked; skipped, they cannot.
    q, k, v = qkv(lib, batch=(), length=4, keys=8)
    v[4:] = float("nan")
    out = to_numpy(flash_attention(q, k, v, is_causal=True, block_q=2, block_k=4))
    assert np.isfinite(out).all()
    expected = scaled_dot_product_attention(q[:, :], k[:4], v[:4], is_causal=True)
    np.testing.assert_allclose(out, to_numpy(expected), **FLOAT64)
    # the reference path computes them but reads no hidden value (attention_lib.nonfinite)
    whole = scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(to_numpy(whole), out, **FLOAT64)


def test_the_fraction_of_scores_computed_falls_to_half_as_causal_key_blocks_shrink():
    assert score_fraction(2048, 2048, 256, 512, is_causal=False) == 1
    assert score_fraction(2048, 2048, 256, 256, is_causal=True) == 9 / 16
    assert score_fraction(2048, 2048, 1024, 256, is_causal=True) == 9 / 16  # rows clipped
    assert score_fraction(2048, 2048, 512, 128, is_causal=True) == 17 / 32
    assert score_fraction(4, 8, 2, 4, is_causal=True) == (2 * 4 + 2 * 4) / 32
    assert score_fraction(0, 8, 2, 4, is_causal=True) == 1


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64"])
def test_block_sizes_must_be_positive_integers(bad):
    q, k, v = qkv("numpy")
    with pytest.raises(ValueError, match=f"block_q must be a positive integer, got {bad!r}"):
        flash_attention(q, k, v, block_q=bad)
    with pytest.raises(ValueError, match=f"block_k must be a positive integer, got {bad!r}"):
        flash_attention(q, k, v, block_k=bad)


def test_shares_the_reference_errors():
    q, k, v = qkv("numpy")
    with pytest.raises(ValueError, match="mutually exclusive"):
        flash_attention(q, k, v, attn_mask=np.ones((5, 7), dtype=bool), is_causal=True)
    with pytest.raises(ValueError, match="same head width E"):
        flash_attention(q, make((2, 3, 7, 5)), v)


def test_docstring_states_the_default_tiles():
    pytest.importorskip("torch")
    from attention_lib.flash import fused_tiles, torch_tiled
    from attention_lib.flash.loop import NUMPY_BLOCK_K, NUMPY_BLOCK_Q

    doc = " ".join(flash_attention.__doc__.split())  # the sentence may wrap anywhere
    (fq, fk), (fcq, fck) = fused_tiles.default_blocks(False), fused_tiles.default_blocks(True)
    (tq, tk), (cq, ck) = torch_tiled.default_blocks(False), torch_tiled.default_blocks(True)
    stated = (
        f"numpy {NUMPY_BLOCK_Q} x {NUMPY_BLOCK_K}; torch fused tiles {fq} x {fk} and causal "
        f"{fcq} x {fck}; torch operations {tq} x {tk} and causal {cq} x {ck}"
    )
    assert stated in doc
    below = f"at least {fused_tiles.FUSED_CAUSAL_BLOCK} (fused tiles) or "
    below += f"{torch_tiled.below_diagonal_width(1)} (torch operations) wide"
    assert below in doc


def test_the_numpy_loop_writes_its_output_once():
    """Peak memory of a call whose output dominates: the output and one block's temporaries,
    not a list of blocks concatenated (which held the output twice)."""
    import tracemalloc

    q, k, v = make((4, 8192, 16)), make((4, 64, 16), seed=1), make((4, 64, 16), seed=2)
    flash_attention(q[:, :64], k, v, block_q=64, block_k=64)  # first-call set-up, not counted
    tracemalloc.start()
    out = flash_attention(q, k, v, block_q=64, block_k=64)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out.dtype == np.float64 and out.flags.owndata
    assert peak <= 1.25 * out.nbytes, (peak, out.nbytes)  # 4 MiB, and < 1 MiB of tiles
