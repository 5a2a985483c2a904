"""Property tests: the reference against PyTorch, the tiled path against the reference.

Random shapes (rank 2 to 4, empty sizes included; query, key and value
batch dimensions broadcasting together), masks (boolean and float,
broadcast from random shapes, with -inf), causal, scale, grouped heads and
both array libraries.
"""

from __future__ import annotations

import numpy as np
from arrays import FLOAT64, INSTALLED, to_numpy, torch_sdpa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_lib import flash_attention, scaled_dot_product_attention


def _oracle_batch(q_shape, k_shape, v_shape, enable_gqa):
    """The batch shape the inputs broadcast to (key/value heads repeated to the query's)."""
    shapes = [q_shape[:-2], k_shape[:-2], v_shape[:-2]]
    if enable_gqa:
        shapes[1:] = [(*shape[:-1], q_shape[-3]) for shape in shapes[1:]]
    return np.broadcast_shapes(*shapes)


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _broadcastable(draw, batch, keep):
    """A batch shape that broadcasts to ``batch``: some leading dims dropped (never the last
    ``keep``), some others set to 1."""
    start = draw(st.integers(0, len(batch) - keep))
    return tuple(1 if draw(st.booleans()) else n for n in batch[start:])


@st.composite
def problems(draw):
    """Keyword arguments for one attention call (numpy or torch), and the mask for the oracle.

    Query, key and value each get their own batch shape, all broadcasting
    together (as PyTorch allows); with grouped heads, the key and value
    heads are a divisor of the query's, or 1.
    """
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    length, keys = draw(st.integers(0, 9)), draw(st.integers(0, 9))
    width, value_width = draw(st.integers(0, 8)), draw(st.integers(1, 5))
    enable_gqa = bool(batch) and draw(st.booleans())
    keep = 1 if enable_gqa else 0  # grouped heads need dim -3 on all three
    q_batch, k_batch, v_batch = (_broadcastable(draw, batch, keep) for _ in range(3))
    if enable_gqa:  # query heads = groups x key/value heads; a single key/value head broadcasts
        group = draw(st.integers(1, 3))
        q_batch = (*q_batch[:-1], batch[-1] * group)
    q = rng.normal(size=(*q_batch, length, width))
    k = rng.normal(size=(*k_batch, keys, width))
    v = rng.normal(size=(*v_batch, keys, value_width))
    batch = _oracle_batch(q.shape, k.shape, v.shape, enable_gqa)  # what the three broadcast to
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
    # and it adds the mask in place to query @ key^T, which lacks batch dimensions only the
    # value has: the oracle's query is broadcast to the whole batch (what broadcasting means)
    oracle_query = None if mask is None else np.broadcast_to(q, (*batch, length, width))
    lib = draw(st.sampled_from(INSTALLED))
    if lib == "torch":
        import torch

        q, k, v = (torch.from_numpy(x) for x in (q, k, v))
        mask = None if mask is None else torch.from_numpy(mask)
    return {"attn_mask": oracle_mask, "query": oracle_query, "batch": batch}, {
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
    oracle, kw = problem
    out = scaled_dot_product_attention(**kw)
    assert type(out) is type(kw["query"])
    length, keys = kw["query"].shape[-2], kw["key"].shape[-2]
    if length == 0 or keys == 0:
        # PyTorch returns query.shape[:-1] + (Ev,) here, its batch not broadcast with the
        # key's and value's (see attention_lib.inputs); the output is empty, or zeros for S = 0
        expected = np.zeros((*oracle["batch"], length, kw["value"].shape[-1]))
    else:
        query = kw["query"] if oracle["query"] is None else oracle["query"]
        expected = torch_sdpa(**{**kw, "attn_mask": oracle["attn_mask"], "query": query})
    np.testing.assert_allclose(to_numpy(out), expected, **FLOAT64)


@SETTINGS
@given(problems(), st.integers(1, 10), st.integers(1, 10))
def test_tiled_matches_reference(problem, block_q, block_k):
    _oracle, kw = problem
    expected = to_numpy(scaled_dot_product_attention(**kw))
    out = flash_attention(**kw, block_q=block_q, block_k=block_k)
    assert tuple(out.shape) == expected.shape and out.dtype == kw["query"].dtype
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-6, rtol=0)
