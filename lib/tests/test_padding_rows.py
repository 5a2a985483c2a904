"""A padding row: every key of one query row masked with a large finite value (issue 21).

Codebases build additive padding masks of -1e4, -1e9 or the dtype's most
negative number. Such a row still sees its keys (only -inf hides one), all
with the same huge bias, so in float32 (spacing 64 at 1e9) its scores are
equal and its weights 1/S: its value gradient is 1/S of its upstream
gradient per key, as PyTorch computes it. A backward pass that recomputes
the weights from a log-sum-exp m + log(total) loses log(total) at that
size and gets weights of 1. Partly masked rows (half their keys at the
large value) are checked too. The Triton kernels' version of this is in
lib/tests/kernels/test_triton_flash.py (they take no mask: the scores are made large).
"""

from __future__ import annotations

import numpy as np
import pytest
from arrays import make

import attention_lib as al

PATHS = {
    "reference": al.scaled_dot_product_attention,
    "tiled": lambda *a, **kw: al.flash_attention(*a, backend="tiled", block_q=2, block_k=2, **kw),
}
LARGE = {"-1e4": -1e4, "-1e9": -1e9, "finfo.min": "min"}


@pytest.mark.parametrize("rows", ["full", "partly"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("large", LARGE)
@pytest.mark.parametrize("path", PATHS)
def test_a_padding_rows_value_gradient_is_its_share_one_over_s(path, large, dtype, rows):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    q, k = (torch.from_numpy(make(s, seed=i)).to(dt) for i, s in enumerate([(3, 2), (4, 2)]))
    v = torch.from_numpy(make((4, 2), seed=2)).to(dt).requires_grad_()
    value = torch.finfo(dt).min if LARGE[large] == "min" else LARGE[large]
    mask = torch.zeros(3, 4, dtype=dt)
    if rows == "full":
        mask[1] = value  # query row 1 is padding
    else:
        mask[1, ::2] = value  # half its keys
    PATHS[path](q, k, v, attn_mask=mask).sum().backward()
    ours = v.grad.clone()
    v.grad = None
    if path == "reference" and dtype == "float32":
        # computed in float64 (`backend.reference_dtype`), where the bias does not swamp the
        # scores: PyTorch's answer in float64, rounded (in float32 it rounds them all equal)
        q, k, mask = q.double(), k.double(), mask.double()
        v = v.detach().double().requires_grad_()
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
    np.testing.assert_allclose(ours.numpy(), v.grad.float().numpy(), rtol=1e-5, atol=1e-6)
    # each row's weights sum to 1, so the value gradient sums to 3 per feature (issue 21 saw 6)
    np.testing.assert_allclose(ours.sum(0).numpy(), [3.0, 3.0], rtol=1e-6)
