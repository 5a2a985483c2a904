"""Argument checking (`check`, no copies) and materialisation (`materialise`) for every path."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from arrays import make, qkv

import attention_lib as al
from attention_lib.inputs import check, materialise, positive_integer, prepare

# every public path that takes attn_mask; "triton" is checked before the kernel is looked for
PATHS = {
    "reference": lambda *a, **kw: al.scaled_dot_product_attention(*a, **kw),
    "weights": lambda q, k, v, **kw: al.attention_weights(q, k, **kw),
    "tiled": lambda *a, **kw: al.flash_attention(*a, backend="tiled", **kw),
    "triton": lambda *a, **kw: al.flash_attention(*a, backend="triton", **kw),
}


def test_check_keeps_the_callers_arrays_and_resolves_the_sizes(lib):
    q, k = make((4, 3, 8), lib, "float32"), make((4, 4, 6, 8), lib, "float32", 1)
    v = make((1, 6, 5), lib, "float32", 2)
    mask = make((6,), lib, "float32")
    spec = check(q, k, v, mask)
    assert spec.query is q and spec.key is k and spec.value is v and spec.mask is mask
    assert spec.batch == (4, 4) and spec.shape == (4, 4, 3, 5)
    assert (spec.length_q, spec.length_k, spec.width, spec.width_v) == (3, 6, 8, 5)
    assert spec.heads_q is spec.heads_k is spec.heads_v is None and not spec.enable_gqa
    assert spec.scale == 1 / math.sqrt(8) and spec.out_dtype == q.dtype and not spec.is_causal


def test_check_with_grouped_heads_reports_them_without_repeating(lib):
    q, k, v = make((2, 6, 5, 4), lib), make((2, 3, 7, 4), lib, seed=1), make((2, 1, 7, 2), lib)
    spec = check(q, k, v, is_causal=True, scale=0.5, enable_gqa=True)
    assert (spec.heads_q, spec.heads_k, spec.heads_v) == (6, 3, 1)
    assert spec.batch == (2, 6) and spec.key is k and spec.value is v
    assert spec.is_causal and spec.scale == 0.5 and spec.enable_gqa


def test_check_copies_nothing():
    torch = pytest.importorskip("torch")

    q = torch.zeros(1, 1, 4, 8, dtype=torch.float16).expand(64, 8, 4, 8)  # a stride-0 view
    k = v = torch.zeros(2, 8, 16, 8, dtype=torch.float16)[:, ::4]  # (2, 2, 16, 8), not contiguous
    spec = check(q, k[:1], v[:1], enable_gqa=True)
    assert spec.query is q and spec.query.dtype == torch.float16  # no upcast, no contiguous copy
    assert spec.batch == (64, 8) and (spec.heads_q, spec.heads_k) == (8, 2)


def test_materialise_upcasts_repeats_groups_and_leaves_batches_to_broadcast():
    torch = pytest.importorskip("torch")

    q = make((3, 4, 5, 8), "torch", "float16")
    k, v = make((1, 2, 6, 8), "torch", "float16", 1), make((1, 1, 6, 3), "torch", "float16", 2)
    mask = make((6,), "torch", "float16", 3)
    problem = materialise(check(q, k, v, mask, enable_gqa=True))
    assert problem.query.dtype == problem.key.dtype == problem.mask.dtype == torch.float32
    assert tuple(problem.query.shape) == (3, 4, 5, 8)  # not copied to anything larger
    assert tuple(problem.key.shape) == (1, 4, 6, 8)  # key heads 2 -> 4, repeat_interleave
    torch.testing.assert_close(problem.key[0, 1], k[0, 0].float())
    assert tuple(problem.value.shape) == (1, 1, 6, 3)  # a single head broadcasts: no copy
    assert tuple(problem.mask.shape) == (1, 6)  # at least two dimensions, a view
    assert problem.batch == (3, 4) and problem.shape == (3, 4, 5, 3)
    assert problem.out_dtype == torch.float16


def test_prepare_is_check_then_materialise():
    q, k, v = qkv("numpy", dtype="float32")
    a, b = prepare(q, k, v, scale=0.3), materialise(check(q, k, v, scale=0.3), exact=True)
    assert a.scale == b.scale == 0.3 and a.batch == b.batch == (2, 3)
    np.testing.assert_array_equal(a.query, b.query)
    # the reference path's problem is widened to float64, the tiled paths' is not
    assert a.query.dtype == np.float64 and a.out_dtype == np.float32
    assert materialise(check(q, k, v)).query.dtype == np.float32


# ---------------------------------------------------------------- mask dtypes, as in PyTorch


TORCH_DTYPES = ["float64", "float32", "float16", "bfloat16"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("query_dtype", TORCH_DTYPES)
@pytest.mark.parametrize("mask_dtype", [*TORCH_DTYPES, "bool", "int64"])
def test_mask_dtypes_are_accepted_exactly_where_pytorch_accepts_them(path, query_dtype, mask_dtype):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    q, k, v = (x.to(getattr(torch, query_dtype)) for x in qkv("torch", length=4, keys=6))
    mask = torch.ones(4, 6, dtype=getattr(torch, mask_dtype))
    try:
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        pytorch_accepts = True
    except RuntimeError as err:
        assert "Expected attn_mask dtype" in str(err)
        pytorch_accepts = False
    if pytorch_accepts:
        if path == "triton":
            return  # it refuses every mask, with or without triton: test_triton_flash.py
        out = PATHS[path](q, k, v, attn_mask=mask)
        assert out.dtype == q.dtype
    elif mask_dtype == "int64":
        with pytest.raises(TypeError, match=r"attn_mask must be boolean or floating point"):
            PATHS[path](q, k, v, attn_mask=mask)
    else:
        message = (
            rf"attn_mask of dtype torch\.{mask_dtype} does not match the query's dtype "
            rf"torch\.{query_dtype}: a float mask must have the query's dtype or float32"
        )
        with pytest.raises(TypeError, match=message):
            PATHS[path](q, k, v, attn_mask=mask)


@pytest.mark.parametrize("path", ["reference", "weights", "tiled"])
def test_numpy_float_masks_must_match_the_query(path):
    q, k, v = qkv("numpy", dtype="float32")
    with pytest.raises(TypeError, match=r"dtype float64 does not match the query's dtype float32"):
        PATHS[path](q, k, v, attn_mask=np.zeros((5, 7)))
    with pytest.raises(TypeError, match=r"dtype float16 does not match the query's dtype float32"):
        PATHS[path](q, k, v, attn_mask=np.zeros((5, 7), dtype=np.float16))
    # float32 goes with any query, as in PyTorch: float64 inputs and a float32 mask
    bias = np.random.default_rng(1).normal(size=(5, 7)).astype(np.float32)
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    out = PATHS[path](q64, k64, v64, attn_mask=bias)
    np.testing.assert_allclose(out, PATHS[path](q64, k64, v64, attn_mask=bias.astype(np.float64)))


# ---------------------------------------------------------------- plain arguments, as in PyTorch

# (argument, value, PyTorch's exception type, a regex of our message)
BAD_ARGUMENTS = [
    ("scale", "2", TypeError, r"scale must be a float .*got str '2'"),
    ("scale", [1.0], TypeError, r"scale must be a float .*got list \[1\.0\]"),
    ("scale", 2 + 0j, TypeError, r"scale must be a float .*got complex"),
    (
        "scale",
        np.array(2.0),
        TypeError,
        r"scale must be a float .*got numpy\.ndarray of shape \(\)",
    ),
    ("scale", 10**400, OverflowError, r"scale = 1000.* is too large for a float"),
    ("is_causal", "yes", TypeError, r"is_causal must be a bool \(True or False\), got str 'yes'"),
    ("is_causal", None, TypeError, r"is_causal must be a bool .*got NoneType None"),
    ("is_causal", 1, TypeError, r"is_causal must be a bool .*got int 1"),
    ("is_causal", np.bool_(True), TypeError, r"is_causal must be a bool .*got numpy\.bool"),
    ("enable_gqa", None, TypeError, r"enable_gqa must be a bool .*got NoneType None"),
    ("enable_gqa", 1, TypeError, r"enable_gqa must be a bool .*got int 1"),
    ("enable_gqa", 0, TypeError, r"enable_gqa must be a bool .*got int 0"),
    ("dropout_p", "0", TypeError, r"dropout_p must be a float .*got str '0'"),
    ("dropout_p", None, TypeError, r"dropout_p must be a float .*got NoneType None"),
    ("dropout_p", [0.0], TypeError, r"dropout_p must be a float .*got list"),
]
TAKES_DROPOUT = ("reference", "weights")


def _ids(cases):
    return [f"{name}={value!r}"[:40] for name, value, *_ in cases]


@pytest.mark.parametrize(
    ("name", "value", "error", "message"), BAD_ARGUMENTS, ids=_ids(BAD_ARGUMENTS)
)
def test_plain_arguments_of_the_wrong_type_are_refused_as_pytorch_refuses_them(
    name, value, error, message
):
    pytest.importorskip("torch")
    import torch.nn.functional as F

    q, k, v = qkv("torch", length=4, keys=6)
    with pytest.raises(error):  # PyTorch's own refusal, to keep this list true
        F.scaled_dot_product_attention(q, k, v, **{name: value})
    for path, fn in PATHS.items():
        if name == "dropout_p" and path not in TAKES_DROPOUT:
            continue
        with pytest.raises(error, match=message):
            fn(q, k, v, **{name: value})
    with pytest.raises(error, match=message):  # numpy inputs too: the check comes first
        al.scaled_dot_product_attention(*(x.numpy() for x in (q, k, v)), **{name: value})


def test_a_tensor_that_requires_grad_is_no_scale():
    torch = pytest.importorskip("torch")

    q, k, v = qkv("torch", length=4, keys=6)
    with pytest.raises(
        TypeError, match=r"scale must be a float .*Tensor of shape \(\) that requires grad"
    ):
        al.scaled_dot_product_attention(q, k, v, scale=torch.tensor(0.5, requires_grad=True))
    with pytest.raises(TypeError, match=r"scale must be a float .*Tensor of shape \(1,\)"):
        al.scaled_dot_product_attention(q, k, v, scale=torch.tensor([0.5]))


@pytest.mark.parametrize(
    "scale",
    [
        2,
        True,
        np.float32(0.5),
        np.float64(0.5),
        np.int64(2),
        np.float16(0.5),
        "tensor",
        "int tensor",
    ],
    ids=str,
)
def test_scales_pytorch_takes_are_taken_as_the_same_number(scale):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    scale = {"tensor": torch.tensor(0.5), "int tensor": torch.tensor(2)}.get(scale, scale)
    number = float(scale)
    q, k, v = qkv("torch", length=4, keys=6)
    expected = F.scaled_dot_product_attention(q, k, v, scale=number)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, scale=scale), expected)
    for path in ("reference", "tiled"):
        torch.testing.assert_close(PATHS[path](q, k, v, scale=scale), expected)
    assert (
        check(q, k, v, scale=scale).scale == number
        and type(check(q, k, v, scale=scale).scale) is float
    )


@pytest.mark.parametrize("p", [0, np.float32(0.0), np.float64(0.0), False], ids=repr)
def test_dropout_probabilities_pytorch_takes_are_taken(p):
    q, k, v = qkv("torch", length=4, keys=6)
    import torch

    torch.testing.assert_close(
        al.scaled_dot_product_attention(q, k, v, dropout_p=p),
        al.scaled_dot_product_attention(q, k, v),
    )


@pytest.mark.parametrize("p", [-0.5, 1.5, math.inf, math.nan])
def test_dropout_outside_zero_to_one_is_a_value_error(p):
    # PyTorch: RuntimeError above 1 and for inf, and it runs -0.5 and NaN (see attention_lib.inputs)
    q, k, v = qkv("numpy")
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\], got"):
        al.scaled_dot_product_attention(q, k, v, dropout_p=p)


@pytest.mark.parametrize("value", [0, -1, 2.0, "3", None, True, np.bool_(True), 1.5], ids=repr)
def test_positive_integer_refuses_what_is_not_one(value):
    with pytest.raises(
        ValueError, match=rf"block_q must be a positive integer, got {re.escape(repr(value))}"
    ):
        positive_integer("block_q", value)


def test_positive_integer_takes_python_and_numpy_integers():
    assert positive_integer("n", 3) == 3 and type(positive_integer("n", np.int64(3))) is int
