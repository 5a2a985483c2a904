"""The torch tiled path: forward semantics, FlashAttention's backward pass, the backend keyword."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys

import numpy as np
import pytest
from arrays import FLOAT64, make, qkv, torch_sdpa
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import attention_lib as al
from attention_lib.flash.route import Tiling

torch = pytest.importorskip("torch", reason="the torch tiled path's autograd needs torch")

from torch.autograd import gradcheck  # noqa: E402

from attention_lib.flash.torch_tiled import tiled_forward  # noqa: E402


def leaf(shape, seed, dtype="float64"):
    return make(shape, "torch", dtype, seed).requires_grad_(True)


def tiled(*args, **kwargs):
    return al.flash_attention(*args, backend="tiled", **kwargs)


# ---------------------------------------------------------------- gradcheck (float64)

GRADCHECK_CASES = {
    # L = 7 and S = 9 are not multiples of the 3 x 4 tiles
    "plain": dict(shapes=((2, 2, 7, 4), (2, 2, 9, 4), (2, 2, 9, 3)), kw={}),
    "causal": dict(shapes=((2, 2, 7, 4), (2, 2, 9, 4), (2, 2, 9, 3)), kw=dict(is_causal=True)),
    "causal, L > S": dict(shapes=((1, 9, 4), (1, 5, 4), (1, 5, 3)), kw=dict(is_causal=True)),
    "grouped heads": dict(
        shapes=((1, 4, 7, 4), (1, 2, 9, 4), (1, 2, 9, 3)), kw=dict(enable_gqa=True, is_causal=True)
    ),
    "broadcast key/value": dict(shapes=((2, 3, 7, 4), (1, 9, 4), (3, 9, 3)), kw={}),
    "2-d inputs": dict(shapes=((7, 4), (9, 4), (9, 3)), kw=dict(scale=0.7)),
    # E = Ev: what the fused tiles take (tile_kernel="auto" runs them)
    "E = Ev": dict(shapes=((2, 7, 4), (2, 9, 4), (2, 9, 4)), kw=dict(scale=0.7)),
    "causal, E = Ev": dict(shapes=((2, 7, 4), (2, 9, 4), (2, 9, 4)), kw=dict(is_causal=True)),
    "causal, L > S, E = Ev": dict(shapes=((9, 4), (5, 4), (5, 4)), kw=dict(is_causal=True)),
}


# every case on the torch operations' tile kernel, and the E = Ev ones on the fused tiles too
GRADCHECK_RUNS = [(case, "ops") for case in GRADCHECK_CASES] + [
    (case, "fused") for case in GRADCHECK_CASES if "E = Ev" in case
]


@pytest.mark.parametrize(
    "case, kernel", GRADCHECK_RUNS, ids=[f"{c}-{k}" for c, k in GRADCHECK_RUNS]
)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_gradcheck(case, kernel):
    spec = GRADCHECK_CASES[case]
    inputs = tuple(leaf(s, seed) for seed, s in enumerate(spec["shapes"]))

    def f(q, k, v):
        return tiled(q, k, v, block_q=3, block_k=4, tile_kernel=kernel, **spec["kw"])

    assert gradcheck(f, inputs)


def test_gradcheck_boolean_mask_with_a_fully_masked_row():
    q, k, v = leaf((2, 7, 4), 0), leaf((2, 9, 4), 1), leaf((2, 9, 3), 2)
    mask = torch.from_numpy(np.random.default_rng(3).random((2, 7, 9)) > 0.4)
    mask[0, 2] = False  # row 2 of batch 0 sees no key: output 0, gradient 0
    assert gradcheck(lambda q, k, v: tiled(q, k, v, mask, block_q=3, block_k=4), (q, k, v))
    out = tiled(q, k, v, mask, block_q=3, block_k=4)
    out.sum().backward()
    assert torch.all(out[0, 2] == 0)
    assert torch.all(q.grad[0, 2] == 0)


@pytest.mark.slow  # make check's, not make test's (seconds)
def test_gradcheck_float_mask_including_the_mask():
    q, k, v = leaf((2, 2, 7, 4), 0), leaf((2, 2, 9, 4), 1), leaf((2, 2, 9, 3), 2)
    mask = leaf((2, 1, 7, 9), 3)  # broadcast over heads: its gradient sums over them
    assert gradcheck(lambda *a: tiled(*a, block_q=3, block_k=4), (q, k, v, mask))


# ---------------------------------------------------------------- agreement with the reference


def _grads(fn, inputs, grad_out):
    for x in inputs:
        x.grad = None
    fn(*inputs).backward(grad_out)
    return [x.grad.clone() for x in inputs]


@pytest.mark.parametrize("blocks", [dict(), dict(block_q=16, block_k=24)], ids=["default", "16x24"])
@pytest.mark.parametrize("kw", [{}, dict(is_causal=True)], ids=["full", "causal"])
def test_gradients_match_the_reference_path(blocks, kw):
    inputs = [leaf((2, 3, 70, 16), 0), leaf((2, 3, 50, 16), 1), leaf((2, 3, 50, 8), 2)]
    grad_out = make((2, 3, 70, 8), "torch", "float64", 3)
    got = _grads(lambda *a: tiled(*a, **kw, **blocks), inputs, grad_out)
    want = _grads(lambda *a: al.scaled_dot_product_attention(*a, **kw), inputs, grad_out)
    for name, g, w in zip("qkv", got, want, strict=True):
        assert torch.allclose(g, w, **FLOAT64), name


def test_float_mask_gradient_matches_the_reference_path():
    q, k, v = leaf((2, 2, 9, 4), 0), leaf((2, 2, 6, 4), 1), leaf((2, 2, 6, 4), 2)
    mask = leaf((9, 6), 3)  # one mask for every batch entry and head
    with torch.no_grad():
        mask[:, 0] = -torch.inf  # key 0 removed for everyone: its gradient is 0
    grad_out = make((2, 2, 9, 4), "torch", "float64", 4)
    got = _grads(lambda *a: tiled(*a, block_q=4, block_k=4), (q, k, v, mask), grad_out)
    want = _grads(al.scaled_dot_product_attention, (q, k, v, mask), grad_out)
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g, w, **FLOAT64)
    assert torch.all(got[3][:, 0] == 0)


@pytest.mark.parametrize("path", ["reference", "tiled"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_a_16_bit_masks_gradient_is_summed_in_float32_and_rounded_once(path, dtype):
    """A mask of shape (S,) with inputs (2, 2, 64, 64): its gradient sums 256 entries each.

    Broadcast to (L, S) while still 16-bit, each entry was rounded before the
    sum: the error was 1.3x (float16) and 3.3x (bfloat16) that of rounding the
    exact gradient once. Summed in float32, it is the rounding alone.
    """
    low_dtype = getattr(torch, dtype)
    q, k, v = (make((2, 2, 64, 64), "torch", dtype, seed) for seed in range(3))
    mask = leaf((64,), 3, dtype)
    exact_mask = mask.detach().double().requires_grad_()  # the same numbers
    upstream = make((2, 2, 64, 64), "torch", dtype, 4)
    run = {
        "reference": al.scaled_dot_product_attention,
        "tiled": lambda *a, **kw: tiled(*a, block_q=16, block_k=16, **kw),
    }[path]
    (ours,) = torch.autograd.grad(run(q, k, v, attn_mask=mask), mask, upstream)
    exact_inputs = (x.double() for x in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(*exact_inputs, attn_mask=exact_mask)
    (exact,) = torch.autograd.grad(out, exact_mask, upstream.double())
    assert ours.dtype == low_dtype
    rounding = (exact.to(low_dtype).double() - exact).abs().max()
    assert (ours.double() - exact).abs().max() <= 1.05 * rounding


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_low_precision_gradients_meet_flash_attentions_rule(dtype):
    """Gradient error against float64 at most twice PyTorch's own in the same dtype.

    16-bit inputs are computed in float32 and the gradients rounded once, in
    the input dtype, like the output.
    """
    shapes = ((1, 2, 40, 16), (1, 2, 33, 16), (1, 2, 33, 16))
    low = [leaf(s, i, dtype) for i, s in enumerate(shapes)]
    exact = [x.detach().double().requires_grad_() for x in low]  # the same numbers
    grad_out = make((1, 2, 40, 16), "torch", dtype, 5)
    got = _grads(lambda *a: tiled(*a, is_causal=True), low, grad_out)
    reference = al.scaled_dot_product_attention
    sdpa = torch.nn.functional.scaled_dot_product_attention
    want = _grads(lambda *a: reference(*a, is_causal=True), exact, grad_out.double())
    theirs = _grads(lambda *a: sdpa(*a, is_causal=True), low, grad_out)
    floor = 0.1 * torch.finfo(getattr(torch, dtype)).eps
    for g, w, t in zip(got, want, theirs, strict=True):
        assert g.dtype == getattr(torch, dtype)
        ours, pytorch = ((x.double() - w).abs().max() for x in (g, t))
        assert ours <= 2 * pytorch + floor


def _value_gradient_check(shapes, seed, scale, **kw):
    """`attention_lib.flash.accuracy`'s check of the tiled path's value gradient (float32,
    on the torch operations) against float64 and PyTorch's own error, and the smallest gap
    between a row's two largest scores (inf for rows of one key)."""
    from attention_lib.flash.accuracy import gradient_checks

    q, k, v, grad_out = (make(s, "torch", "float32", seed + i) for i, s in enumerate(shapes))
    checks = gradient_checks(
        "saturated", q, k, v, grad_out, scale=scale, backend="tiled", tile_kernel="ops", **kw
    )
    scores = q.double() @ k.double().transpose(-1, -2) * scale  # (..., L, S)
    if kw.get("is_causal"):
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), -math.inf)
    top = scores.topk(min(2, scores.shape[-1]), dim=-1).values  # (..., L, 1 or 2)
    gap = (top[..., 0] - top[..., -1]).min().item() if top.shape[-1] == 2 else math.inf
    return checks[2], gap  # dv


def test_a_saturated_rows_value_gradient_meets_flash_attentions_rule():
    """Issue 40: one query of width 31 against 16 keys, value width 1, scale 100. The row
    saturates (one weight 1, the rest 0, scores in the hundreds). The backward pass
    recomputed that weight with the shift folded into the product, q k^T - m summed in
    one pass, where the forward pass had taken q k^T and then subtracted m: 1 +- 1e-4
    instead of 1, and dvalue 44x past the bound (2.2e-5 against 5.0e-7)."""
    shapes = ((1, 1, 31), (1, 16, 31), (1, 16, 1), (1, 1, 1))
    check, _ = _value_gradient_check(shapes, 3, 100.0)
    assert check.passed, check.as_dict()


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    sizes=st.tuples(st.integers(1, 2), st.integers(2, 16), st.integers(24, 64), st.integers(1, 4)),
    seed=st.integers(0, 1000),
    scale=st.floats(50, 500),
    causal=st.booleans(),
    blocks=st.sampled_from([{}, {}, {}, {"block_k": 1}, {"block_k": 3}]),
)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_saturated_rows_value_gradients_meet_flash_attentions_rule(
    sizes, seed, scale, causal, blocks
):
    """Rows saturated by a large scale (a gap of 20 or more between each row's two largest
    scores: every weight 1 or below 2e-9; one or two query rows; widths from 24, where a
    product's sum rounds differently with one more column), scores in the hundreds:
    each tile's weights must be recomputed in the backward pass by the forward pass's own
    operations, also in a lazy block done again (a later score 40 above the first tile's
    maximum). Where two weights compete, each implementation's rounding of scores in the
    hundreds decides its error, and a ratio of two such errors is anyone's guess: those
    draws are left out. Value gradients: dquery and dkey carry FlashAttention's
    D = rowsum(dO * O), whose cancellation in a saturated row PyTorch's math backend does
    not have (its fused CPU kernel, FlashAttention's algorithm too, does)."""
    length, keys, width, width_v = sizes
    shapes = ((2, length, width), (2, keys, width), (2, keys, width_v), (2, length, width_v))
    check, gap = _value_gradient_check(shapes, seed, scale, is_causal=causal, **blocks)
    assume(gap >= 20)
    assert check.passed, check.as_dict()


def test_backward_only_for_the_inputs_that_ask():
    q, k = leaf((3, 5, 4), 0), make((3, 6, 4), "torch", "float64", 1)
    v = leaf((3, 6, 2), 2)
    tiled(q, k, v).sum().backward()
    assert q.grad is not None and v.grad is not None and k.grad is None


def test_not_twice_differentiable():
    q, k, v = leaf((5, 4), 0), leaf((6, 4), 1), leaf((6, 2), 2)
    (gq,) = torch.autograd.grad(tiled(q, k, v).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match=r"once_differentiable|does not require grad"):
        gq.sum().backward()


# ------------------------------------------------------------ forward semantics of the fast path


@pytest.mark.parametrize("kw", [{}, dict(is_causal=True)], ids=["full", "causal"])
@pytest.mark.parametrize("blocks", [dict(), dict(block_q=5, block_k=3)], ids=["default", "5x3"])
def test_torch_fast_path_equals_pytorch_and_the_readable_loop(kw, blocks):
    q, k, v = qkv("torch", batch=(2, 3), length=23, keys=17, width=8, value_width=5)
    got = tiled(q, k, v, **kw, **blocks)
    np.testing.assert_allclose(got.numpy(), torch_sdpa(q, k, v, **kw), **FLOAT64)
    readable = al.flash_attention(q.numpy(), k.numpy(), v.numpy(), **kw, **blocks)
    np.testing.assert_allclose(got.numpy(), readable, **FLOAT64)


def test_tiled_forward_returns_each_rows_maximum_and_total():
    q, k, v = (make((3, n, 8), "torch", "float64", i) for i, n in enumerate((11, 13, 13)))
    out, m, total = tiled_forward(q, k, v, None, Tiling(True, 0.5, 4, 5), (3,))
    scores = (q @ k.transpose(1, 2) * 0.5).masked_fill(
        ~torch.ones(11, 13).tril().bool(), -torch.inf
    )
    # the shift, in units of ln 2, is the row's largest score in its first tile: at most
    # the row's maximum
    scores2 = scores * math.log2(math.e)
    assert torch.all(m[..., 0] <= scores2.amax(dim=-1) + 1e-12)
    first_tiles = scores2[:, :4, :5].amax(dim=-1)  # rows 0-3 over keys 0-4
    torch.testing.assert_close(m[:, :4, 0], first_tiles, **FLOAT64)
    lse = ((m + total.log2()) * math.log(2))[..., 0]  # never formed by the backward pass
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), **FLOAT64)
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v, **FLOAT64)


def test_fully_masked_rows_give_zeros_and_a_zero_total():
    q, k, v = qkv("torch", batch=(2,), length=4, keys=6, width=3, value_width=2)
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1] = False
    out = tiled(q, k, v, mask, block_q=2, block_k=4)
    assert torch.all(out[:, 1] == 0) and torch.isfinite(out).all()
    _, m, total = tiled_forward(q, k, v, mask, Tiling(False, 1.0, 2, 4), (2,))
    assert torch.all(total[:, 1] == 0) and torch.all(m[:, 1] == 0)  # shifted by 0, not -inf
    assert torch.all(total[:, [0, 2, 3]] >= 1)  # the row's largest term is exp(0)


def test_nan_stays_in_its_row():
    q, k, v = qkv("torch", batch=(), length=5, keys=6, width=3, value_width=2)
    q[2, 0] = torch.nan
    out = tiled(q, k, v, block_q=2, block_k=4)
    assert torch.isnan(out[2]).all()
    assert torch.isfinite(out[[0, 1, 3, 4]]).all()


def test_zero_width_gives_the_mean_of_the_values():
    q, k, v = make((2, 4, 0), "torch"), make((2, 6, 0), "torch"), make((2, 6, 3), "torch")
    out = tiled(q, k, v, block_q=3, block_k=4)
    torch.testing.assert_close(out, v.mean(dim=-2, keepdim=True).expand(2, 4, 3))


@pytest.mark.parametrize(("length", "keys"), [(0, 5), (4, 0), (0, 0)])
def test_empty_lengths(length, keys):
    q, k, v = qkv("torch", batch=(2,), length=length, keys=keys, width=3, value_width=2)
    out = tiled(q, k, v)
    assert out.shape == (2, length, 2)
    assert torch.all(out == 0)


def test_low_precision_output_dtype_and_accuracy():
    q, k, v = qkv("torch", batch=(2,), length=30, keys=20, width=8, value_width=8, dtype="float16")
    out = tiled(q, k, v, is_causal=True, block_q=7, block_k=6)
    assert out.dtype == torch.float16
    exact = torch_sdpa(q.double(), k.double(), v.double(), is_causal=True)
    assert np.abs(out.double().numpy() - exact).max() <= torch.finfo(torch.float16).eps


# ---------------------------------------------------------------- the backend keyword


def test_unknown_backend_lists_the_valid_names():
    q, k, v = qkv("numpy")
    with pytest.raises(
        ValueError, match=r"backend must be one of 'auto', 'tiled', 'triton', got 'cuda'"
    ):
        al.flash_attention(q, k, v, backend="cuda")


def test_block_sizes_must_be_positive_integers():
    q, k, v = qkv("torch")
    with pytest.raises(ValueError, match=r"block_k must be a positive integer, got 0$"):
        al.flash_attention(q, k, v, block_k=0)


def test_triton_backend_refuses_numpy():
    q, k, v = qkv("numpy")
    with pytest.raises(ValueError, match=r"backend='triton' needs torch tensors, got numpy arrays"):
        al.flash_attention(q, k, v, backend="triton")


def test_triton_backend_without_triton_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a)
    )
    q, k, v = qkv("torch")
    with pytest.raises(
        RuntimeError, match=r"needs the triton package.*pip install -e '\.\[triton\]'"
    ):
        al.flash_attention(q, k, v, backend="triton")
    # "auto" falls back to the tiled path without a word
    np.testing.assert_allclose(al.flash_attention(q, k, v).numpy(), torch_sdpa(q, k, v), **FLOAT64)


@pytest.mark.slow  # make check's, not make test's (seconds)
def test_auto_never_imports_triton_for_numpy_or_cpu_tensors():
    code = (
        "import sys, numpy as np, torch, attention_lib as al\n"
        "x = np.ones((2, 3, 4))\n"
        "al.flash_attention(x, x, x)\n"
        "t = torch.ones(2, 3, 4)\n"
        "al.flash_attention(t, t, t, is_causal=True)\n"
        "assert 'triton' not in sys.modules, 'triton imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("length", "keys"), [(700, 700), (700, 450), (520, 700)])
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_causal_blocks_below_the_diagonal_in_their_own_width_match_the_reference(length, keys):
    # rows in blocks of 300 and crossing key blocks of 7: the keys before rows 300 and 600
    # come in blocks of 512 (`below_diagonal_width`), the last one cut short, unmasked
    from attention_lib.flash.torch_tiled import below_diagonal_width

    assert below_diagonal_width(7) == 512
    q, k, v = leaf((2, length, 8), 0), leaf((2, keys, 8), 1), leaf((2, keys, 5), 2)
    grad_out = make((2, length, 5), "torch", "float64", seed=3)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    tiles = dict(is_causal=True, block_q=300, block_k=7)
    torch.testing.assert_close(tiled(q, k, v, **tiles), sdpa(q, k, v, is_causal=True), **FLOAT64)
    got = _grads(lambda *a: tiled(*a, **tiles), (q, k, v), grad_out)
    want = _grads(lambda *a: sdpa(*a, is_causal=True), (q, k, v), grad_out)
    for name, mine, theirs in zip("qkv", got, want, strict=True):
        torch.testing.assert_close(mine, theirs, **FLOAT64, msg=lambda m, n=name: f"d{n}: {m}")
