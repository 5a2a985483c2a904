"""Batch dimensions of query, key and value broadcast together, as in PyTorch, on every path.

PyTorch's ``scaled_dot_product_attention`` broadcasts all three batch
shapes: query (4, 3, 8) with key and value (4, 4, 6, 8) gives (4, 4, 3, 8).
The reference path, the numpy loop and the torch tiled path must give the
same, send gradients back in each input's own shape, and copy no input to
the broadcast size. (The Triton path is checked in test_triton_flash.py.)
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from arrays import FLOAT64, make, to_numpy, torch_sdpa

import attention_lib as al

PATHS = {
    "reference": al.scaled_dot_product_attention,
    "tiled": lambda *a, **kw: al.flash_attention(*a, block_q=2, block_k=4, **kw),
}
# (query, key, value) shapes whose batch dimensions broadcast only all together
SHAPES = {
    "issue: q (4, 3, 8), k = v (4, 4, 6, 8)": ((4, 3, 8), (4, 4, 6, 8), (4, 4, 6, 8)),
    "query 2-d": ((5, 8), (2, 3, 6, 8), (2, 3, 6, 4)),
    "each broadcasts a different dim": ((2, 1, 5, 8), (1, 3, 6, 8), (2, 3, 6, 4)),
    "value alone has the batch": ((5, 8), (6, 8), (3, 6, 4)),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("shapes", SHAPES.values(), ids=list(SHAPES))
def test_batch_dimensions_broadcast_like_pytorch(lib, path, shapes):
    q, k, v = (make(s, lib, seed=i) for i, s in enumerate(shapes))
    out = PATHS[path](q, k, v)
    expected = torch_sdpa(q, k, v)
    assert tuple(out.shape) == expected.shape
    np.testing.assert_allclose(to_numpy(out), expected, **FLOAT64)


@pytest.mark.parametrize("path", PATHS)
def test_the_issues_call_also_works_with_enable_gqa(lib, path):
    # query heads 4 (dim -3 of the 3-d query) and key/value heads 4: groups of one
    q, k, v = make((4, 3, 8), lib), make((4, 4, 6, 8), lib, seed=1), make((4, 4, 6, 8), lib, seed=2)
    out = PATHS[path](q, k, v, enable_gqa=True)
    np.testing.assert_allclose(to_numpy(out), torch_sdpa(q, k, v, enable_gqa=True), **FLOAT64)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "shapes",
    [
        ((2, 4, 5, 8), (2, 2, 6, 8), (2, 1, 6, 8)),  # key 2 heads, value 1 head
        ((2, 6, 5, 8), (1, 3, 6, 8), (1, 3, 6, 8)),  # groups of 2, key/value batch broadcasts
        ((4, 5, 8), (2, 6, 8), (2, 6, 8)),  # 3-d: dim -3 holds the heads
    ],
)
def test_grouped_heads_then_broadcast_like_pytorch(lib, path, shapes):
    q, k, v = (make(s, lib, seed=i) for i, s in enumerate(shapes))
    out = PATHS[path](q, k, v, enable_gqa=True)
    np.testing.assert_allclose(to_numpy(out), torch_sdpa(q, k, v, enable_gqa=True), **FLOAT64)


@pytest.mark.parametrize("path", PATHS)
def test_gradients_reach_each_input_in_its_own_shape(path):
    torch = pytest.importorskip("torch")

    shapes = ((4, 3, 8), (4, 1, 6, 8), (1, 4, 6, 5))
    ours = [make(s, "torch", seed=i).requires_grad_() for i, s in enumerate(shapes)]
    mask = make((3, 6), "torch", seed=7).requires_grad_()  # broadcast over the whole batch
    theirs = [x.detach().clone().requires_grad_() for x in (*ours, mask)]
    upstream = make((4, 4, 3, 5), "torch", seed=9)
    PATHS[path](*ours, attn_mask=mask).backward(upstream)
    F = torch.nn.functional
    F.scaled_dot_product_attention(*theirs[:3], attn_mask=theirs[3]).backward(upstream)
    for name, x, t in zip(("query", "key", "value", "mask"), (*ours, mask), theirs, strict=True):
        assert x.grad.shape == x.shape, name
        torch.testing.assert_close(x.grad, t.grad, **FLOAT64, msg=name)


def test_the_hint_names_enable_gqa_only_when_that_call_works():
    q, k, v = make((2, 6, 5, 4)), make((1, 3, 7, 4), seed=1), make((1, 3, 7, 2), seed=2)
    with pytest.raises(ValueError, match=r"broadcast together.*pass enable_gqa=True"):
        al.scaled_dot_product_attention(q, k, v)
    out = al.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # the hint holds
    np.testing.assert_allclose(out, torch_sdpa(q, k, v, enable_gqa=True), **FLOAT64)
    # heads 4 and 2, batch 2 and 3: grouping the heads leaves the batch unbroadcastable
    q, k = make((2, 4, 5, 8)), make((3, 2, 6, 8), seed=1)
    for gqa in (False, True):
        with pytest.raises(ValueError, match=r"must broadcast together") as err:
            al.scaled_dot_product_attention(q, k, k, enable_gqa=gqa)
        assert "pass enable_gqa" not in str(err.value)


def test_enable_gqa_still_needs_the_query_heads_to_be_a_multiple():
    # PyTorch refuses this with enable_gqa=True and broadcasts it without
    q, k = make((2, 1, 5, 8)), make((2, 4, 6, 8), seed=1)
    with pytest.raises(ValueError, match=r"query heads \(1\) to be a multiple of the key heads"):
        al.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    np.testing.assert_allclose(al.scaled_dot_product_attention(q, k, k), torch_sdpa(q, k, k))


@pytest.mark.parametrize("path", PATHS)
def test_a_broadcast_query_is_not_copied_to_the_batch(path):
    # query (L, E) broadcast over 64 batch entries; Ev = 2 keeps the output small, so a
    # (64, L, E) copy of the query would dwarf everything else the call allocates
    q = make((128, 256))  # (L, E)
    k, v = make((64, 4, 256), seed=1), make((64, 4, 2), seed=2)  # (B, S, E), (B, S, Ev)
    expanded_query = 64 * q.nbytes  # 16 MiB
    PATHS[path](q, k, v)  # first calls allocate for imports and caches: not the call's memory
    tracemalloc.start()
    try:
        out = PATHS[path](q, k, v)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.shape == (64, 128, 2)
    assert peak < expanded_query / 4, (peak, expanded_query)


def test_the_torch_tiled_path_gets_each_input_in_its_own_shape(monkeypatch):
    pytest.importorskip("torch")
    from attention_lib.flash import torch_tiled

    seen = []
    apply = torch_tiled.TorchTiledFunction.apply

    def spy(*args):
        seen.append(tuple(tuple(x.shape) for x in args[:3]))
        return apply(*args)

    monkeypatch.setattr(torch_tiled.TorchTiledFunction, "apply", spy)
    q, k, v = make((4, 3, 8), "torch"), make((4, 4, 6, 8), "torch"), make((1, 6, 5), "torch")
    assert al.flash_attention(q, k, v, backend="tiled").shape == (4, 4, 3, 5)
    assert seen == [((4, 3, 8), (4, 4, 6, 8), (1, 6, 5))]  # not expanded to (4, 4, ...)
