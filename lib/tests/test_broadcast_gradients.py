"""Gradients through broadcast batch dimensions: summed in float64 for float32, rounded once.

An input broadcast along a batch dimension (a 3-d query against 4-d keys
and values, a (L, S) mask over every head) gets the sum of its per-entry
gradients. Summed in float32 that sum picks up a rounding per addition;
the rule (issue 21) is to accumulate it in float32 or wider and round
once, so float32 gradients are summed in float64 here. The per-entry
gradients are those of the same call with the input expanded to the whole
batch, so the broadcast input's gradient must be exactly their float64 sum
rounded to float32. (The Triton kernels: lib/tests/kernels/test_triton_flash.py.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from arrays import make

import attention_lib as al
from attention_lib.backend import has_float64
from attention_lib.flash.accuracy import floor

N = 512  # batch entries an input is broadcast over: enough for float32 sums to round
PATHS = {
    "reference": al.scaled_dot_product_attention,
    "reference, exact route": al.scaled_dot_product_attention,  # a NaN in a hidden key
    "tiled": lambda *a, **kw: al.flash_attention(*a, backend="tiled", block_q=2, block_k=2, **kw),
}
# which input is broadcast: (query, key, value, mask) shapes, L = 3, S = 5, E = 4, Ev = 2
BROADCAST = {
    "query": ((3, 4), (N, 5, 4), (N, 5, 2), (N, 3, 5)),
    "key": ((N, 3, 4), (5, 4), (N, 5, 2), (N, 3, 5)),
    "value": ((N, 3, 4), (N, 5, 4), (5, 2), (N, 3, 5)),
    "mask": ((N, 3, 4), (N, 5, 4), (N, 5, 2), (3, 5)),
}
NAMES = ("query", "key", "value", "attn_mask")


def _leaves(shapes, dirty):
    import torch

    arrays = [torch.from_numpy(make(s, seed=i)).float() for i, s in enumerate(shapes)]
    arrays[3] = arrays[3].masked_fill(torch.from_numpy(make(shapes[3], seed=9) > 1.0), -math.inf)
    if dirty:  # a NaN in a key that every row hides: the reference path's exact route
        arrays[1] = arrays[1].clone()
        arrays[1][..., 4, 0] = math.nan
        arrays[3] = arrays[3].clone()
        arrays[3][..., 4] = -math.inf
    return arrays


@pytest.mark.parametrize("which", BROADCAST)
@pytest.mark.parametrize("path", PATHS)
def test_a_broadcast_gradient_is_the_float64_sum_of_the_entries_rounded_once(path, which):
    torch = pytest.importorskip("torch")

    shapes = BROADCAST[which]
    arrays = _leaves(shapes, dirty=path.endswith("exact route"))
    weights = torch.from_numpy(make((N, 3, 2), seed=7)).float()  # the loss's output weighting

    def grads(inputs):
        leaves = [x.clone().requires_grad_() for x in inputs]
        (PATHS[path](*leaves[:3], attn_mask=leaves[3]) * weights).sum().backward()
        return [x.grad for x in leaves]

    i = ("query", "key", "value", "mask").index(which)
    ours = grads(arrays)[i]
    expanded = list(arrays)
    expanded[i] = arrays[i].expand(N, *arrays[i].shape).contiguous()
    if path.startswith("reference") and has_float64(arrays[i]):
        # the reference path computes float32 in float64 (`backend.reference_dtype`): its
        # entries are never rounded to float32, only their sum is
        expanded = [x.double() for x in expanded]
    entries = grads(expanded)[i]  # (N, ...): each entry's gradient, in its computing dtype
    once = entries.double().sum(0).float()
    assert ours.dtype == torch.float32 and ours.shape == arrays[i].shape
    assert torch.isfinite(once).all()
    torch.testing.assert_close(ours, once, rtol=0, atol=0)
    # and the float32 sum would not do: it rounds N times
    assert not torch.equal(entries.float().sum(0), once)


def test_dropout_drops_the_same_weights_in_every_dtype(lib):
    q, k = make((2, 6, 8), lib), make((2, 9, 8), lib, seed=1)
    dtypes = ["float64", "float32", "float16"] + (["bfloat16"] if lib == "torch" else [])
    dropped = []
    for dtype in dtypes:

        def cast(x, dtype=dtype):
            return x.astype(dtype) if lib == "numpy" else x.to(getattr(__import__("torch"), dtype))

        w = al.attention_weights(cast(q), cast(k), dropout_p=0.5, generator=3)
        dropped.append(np.asarray((w == 0).tolist()))
    assert 0.3 < dropped[0].mean() < 0.7
    for d in dropped[1:]:
        np.testing.assert_array_equal(d, dropped[0])


def test_the_issues_broadcast_query_with_dropout_meets_the_2x_rule():
    """Issue 21: float32, a 3-d query against 4-d keys and values, dropout 0.5.

    The reference path's gradients against its float64 gradients (the same
    seed drops the same weights in both), at most twice PyTorch's own
    float32 error against its float64 (torch.manual_seed does the same for
    its dropout), plus the rule's floor, over 30 seeds.
    """
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    def grads(fn, dtype, inputs, upstream, seed):
        leaves = [x.detach().to(dtype).requires_grad_() for x in inputs]
        torch.manual_seed(seed)
        fn(*leaves).backward(upstream.to(dtype))
        return [x.grad.double() for x in leaves]

    worst = 0.0
    for seed in range(30):
        g = torch.Generator().manual_seed(seed)
        shapes = ((4, 3, 8), (4, 4, 6, 8), (4, 4, 6, 8), (4, 4, 3, 8))
        q, k, v, upstream = (torch.randn(s, generator=g, dtype=torch.float64) for s in shapes)

        def ours(*a, seed=seed):
            return al.scaled_dot_product_attention(*a, dropout_p=0.5, generator=seed)

        def theirs(*a):
            return F.scaled_dot_product_attention(*a, dropout_p=0.5)

        runs = [
            grads(fn, dtype, (q, k, v), upstream, seed)
            for fn in (ours, theirs)
            for dtype in (torch.float32, torch.float64)
        ]
        for label, (o32, o64, t32, t64) in zip(
            ("dq", "dk", "dv"), zip(*runs, strict=True), strict=True
        ):
            our_error = (o32 - o64).abs().max().item()
            their_error = (t32 - t64).abs().max().item()
            allowed = 2 * their_error + floor("float32", o64.abs().max().item())
            assert our_error <= allowed, (seed, label, our_error, their_error)
            worst = max(worst, our_error / allowed)
    assert worst > 0.05  # the comparison measured something
