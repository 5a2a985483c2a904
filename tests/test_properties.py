"""Property tests: the reference against PyTorch, the tiled path against the reference.

Random shapes (rank 2 to 4, empty sizes included), masks (boolean and float,
broadcast from random shapes, with -inf), causal, scale, grouped heads and
both array libraries.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import to_numpy, torch_sdpa

from attention_lib import flash_attention, scaled_dot_product_attention

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw):
    """Keyword arguments for one attention call (numpy or torch), and the mask for the oracle."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    length, keys = draw(st.integers(0, 9)), draw(st.integers(0, 9))
    width, value_width = draw(st.integers(0, 8)), draw(st.integers(1, 5))
    kv_batch = list(batch)
    enable_gqa = bool(batch) and draw(st.booleans())
    if enable_gqa:  # query heads = groups x key/value heads
        batch[-1] *= draw(st.integers(1, 3))
    q = rng.normal(size=(*batch, length, width))
    k = rng.normal(size=(*kv_batch, keys, width))
    v = rng.normal(size=(*kv_batch, keys, value_width))
    masking = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    mask = None
    if masking in ("bool", "float"):
        full = (*batch, length, keys)
        kept = full[draw(st.integers(0, len(full))) :]  # drop some leading dims
        shape = tuple(1 if draw(st.booleans()) else n for n in kept)
        if masking == "bool":
            mask = np.asarray(rng.random(shape) > draw(st.sampled_from([0.0, 0.3, 0.8])))
        else:
            mask = np.asarray(rng.normal(size=shape) * 3)
            mask[rng.random(shape) < 0.2] = -np.inf
    scale = draw(st.one_of(st.none(), st.floats(-3, 3)))
    # PyTorch wants the mask to have at least (L, S): the oracle gets it broadcast that far
    oracle_mask = None if mask is None else np.broadcast_to(mask, (*mask.shape[:-2], length, keys))
    lib = draw(st.sampled_from(["numpy", "torch"]))
    if lib == "torch":
        import torch

        q, k, v = (torch.from_numpy(x) for x in (q, k, v))
        mask = None if mask is None else torch.from_numpy(mask)
    return oracle_mask, {
        "query": q,
        "key": k,
        "value": v,
        "attn_mask": mask,
        "is_causal": masking == "causal",
        "scale": scale,
        "enable_gqa": enable_gqa,
    }


@SETTINGS
@given(problems())
def test_reference_matches_pytorch(problem):
    oracle_mask, kw = problem
    out = scaled_dot_product_attention(**kw)
    assert type(out) is type(kw["query"])
    oracle = {**kw, "attn_mask": oracle_mask}
    expected = torch_sdpa(**oracle)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-10, rtol=1e-10)


@SETTINGS
@given(problems(), st.integers(1, 10), st.integers(1, 10))
def test_tiled_matches_reference(problem, block_q, block_k):
    _oracle_mask, kw = problem
    expected = to_numpy(scaled_dot_product_attention(**kw))
    out = flash_attention(**kw, block_q=block_q, block_k=block_k)
    assert tuple(out.shape) == expected.shape and out.dtype == kw["query"].dtype
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-6, rtol=0)
