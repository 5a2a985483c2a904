"""softmax and the alternative normalisers: values, stability, edge rows, dtypes, errors."""

from __future__ import annotations

import numpy as np
import pytest
from arrays import FLOAT64, make, to_numpy

from attention_lib import entmax15, softmax, softmax1, sparsemax
from attention_lib.normalisers import entmax15_backward, sparsemax_backward


def asarray(values, lib, dtype="float64"):
    x = np.asarray(values, dtype=dtype)
    if lib == "numpy":
        return x
    import torch

    return torch.from_numpy(x)


def test_softmax_known_values(lib):
    # softmax([0, log 2, log 3]) = [1, 2, 3] / 6
    out = softmax(asarray([0.0, np.log(2), np.log(3)], lib))
    np.testing.assert_allclose(to_numpy(out), [1 / 6, 2 / 6, 3 / 6], **FLOAT64)


def test_softmax_huge_logits_are_finite_and_sum_to_one(lib):
    out = to_numpy(softmax(asarray([[1e4, -1e4, 0.0], [1e4, 1e4 - 1, -1e4]], lib)))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out.sum(-1), 1.0, **FLOAT64)
    np.testing.assert_allclose(out[0], [1.0, 0.0, 0.0], atol=1e-300)
    np.testing.assert_allclose(out[1, 0] / out[1, 1], np.e, **FLOAT64)


def test_softmax_other_axis(lib):
    x = make((3, 4, 5), lib)
    out = to_numpy(softmax(x, axis=1))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, **FLOAT64)
    np.testing.assert_allclose(
        out,
        to_numpy(softmax(x.swapaxes(1, -1) if lib == "numpy" else x.transpose(1, -1))).swapaxes(
            1, -1
        ),
    )


def test_softmax_all_minus_inf_row_is_zeros_not_nan(lib):
    out = to_numpy(softmax(asarray([[-np.inf, -np.inf], [0.0, -np.inf]], lib)))
    np.testing.assert_array_equal(out, [[0.0, 0.0], [1.0, 0.0]])


def test_softmax_nan_and_inf_stay_in_their_row(lib):
    out = to_numpy(softmax(asarray([[np.nan, 1.0], [np.inf, 1.0], [0.0, 1.0]], lib)))
    assert np.isnan(out[0]).all() and np.isnan(out[1, 0])
    assert np.isfinite(out[2]).all()


def test_softmax_half_precision_keeps_its_dtype():
    torch = pytest.importorskip("torch")

    x = torch.tensor([[10.0, 0.0, -3.0]], dtype=torch.bfloat16)
    out = softmax(x)
    assert out.dtype == torch.bfloat16
    expected = torch.softmax(x.double(), -1)
    assert (out.double() - expected).abs().max() <= 2 * (
        torch.softmax(x, -1).double() - expected
    ).abs().max() + 1e-3
    assert softmax(np.zeros(3, dtype=np.float16)).dtype == np.float16


def test_softmax_keeps_autograd():
    torch = pytest.importorskip("torch")

    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(softmax, (x,))


def test_softmax_rejects_integers_and_bad_axis():
    with pytest.raises(TypeError, match=r"floating-point.*int64"):
        softmax(np.arange(3))
    with pytest.raises(ValueError, match=r"axis 2 is out of range .*\(3, 2\)"):
        softmax(np.zeros((3, 2)), axis=2)
    with pytest.raises(TypeError, match="numpy arrays or torch tensors, got list"):
        softmax([1.0, 2.0])


def test_softmax1_rows_sum_to_less_than_one(lib):
    out = to_numpy(
        softmax1(asarray([[0.0, 0.0], [-50.0, -50.0], [-np.inf, -np.inf], [1e4, 0.0]], lib))
    )
    np.testing.assert_allclose(out[0], [1 / 3, 1 / 3], **FLOAT64)  # e^0 / (1 + 2 e^0)
    assert out[1].sum() < 1e-20  # nothing worth attending: the head abstains
    np.testing.assert_array_equal(out[2], [0.0, 0.0])
    np.testing.assert_allclose(out[3], [1.0, 0.0], **FLOAT64)


# Martins and Astudillo (2016), section 2: sparsemax of (z, 0) is (1, 0) for z >= 1
# and ((1 + z) / 2, (1 - z) / 2) for |z| < 1.
@pytest.mark.parametrize("z", [-2.0, -0.5, 0.0, 0.3, 1.0, 3.0])
def test_sparsemax_two_dimensional_closed_form(lib, z):
    expected = [1.0, 0.0] if z >= 1 else [0.0, 1.0] if z <= -1 else [(1 + z) / 2, (1 - z) / 2]
    np.testing.assert_allclose(to_numpy(sparsemax(asarray([z, 0.0], lib))), expected, **FLOAT64)


def test_sparsemax_and_entmax_give_exact_zeros(lib):
    x = asarray([[3.0, 1.0, 0.2, -1.0], [0.1, 0.0, -0.1, 0.05]], lib)
    for fn in (sparsemax, entmax15):
        out = to_numpy(fn(x))
        np.testing.assert_allclose(out.sum(-1), 1.0, **FLOAT64)
        assert (out >= 0).all()
        assert (out[0] == 0).sum() >= 1  # low scores get exactly nothing
        assert (out[1] > 0).all()  # close scores all share


def test_entmax15_two_dimensional_closed_form(lib):
    # 1.5-entmax of (t, 0): p1 solves (t/2 - tau) ... ; for t = 0 it is uniform, for t >= 2 one-hot
    np.testing.assert_allclose(to_numpy(entmax15(asarray([0.0, 0.0], lib))), [0.5, 0.5])
    np.testing.assert_allclose(to_numpy(entmax15(asarray([2.0, 0.0], lib))), [1.0, 0.0], **FLOAT64)


@pytest.mark.parametrize("fn_name", ["sparsemax", "entmax15"])
def test_sparse_maps_match_the_entmax_package(fn_name):
    torch = pytest.importorskip("torch")
    entmax = pytest.importorskip("entmax")

    x = torch.from_numpy(np.random.default_rng(3).normal(scale=2.0, size=(50, 7)))
    ours = {"sparsemax": sparsemax, "entmax15": entmax15}[fn_name](x)
    theirs = getattr(entmax, fn_name)(x, dim=-1)
    torch.testing.assert_close(ours, theirs, **FLOAT64)


# ---------------------------------------------------------------- large offsets (issue: float32)


@pytest.mark.parametrize("fn_name", ["sparsemax", "entmax15", "softmax"])
def test_a_large_common_offset_costs_no_float32_precision(lib, fn_name):
    # the row as float32 stores it: 10000, 9999.99902..., 0; its float64 answer is the target
    fn = {"sparsemax": sparsemax, "entmax15": entmax15, "softmax": softmax}[fn_name]
    row = np.array([10000.0, 9999.999, 0.0], dtype=np.float32)
    expected = to_numpy(fn(asarray(row.astype(np.float64), lib)))
    out = fn(asarray(row, lib, "float32"))
    assert out.dtype == (np.float32 if lib == "numpy" else __import__("torch").float32)
    # before the row maximum was subtracted, sparsemax was off by 9.8e-4 and summed to 0.99902
    np.testing.assert_allclose(to_numpy(out), expected, rtol=0, atol=1e-6)
    if fn_name == "sparsemax":
        np.testing.assert_allclose(expected, [0.500488, 0.499512, 0.0], atol=1e-6)


# ---------------------------------------------------------------- gradients (closed form)


def test_entmax15_gradient_on_a_tied_row_is_finite_and_exact():
    torch = pytest.importorskip("torch")
    entmax = pytest.importorskip("entmax")

    x = torch.tensor([[2.0, 2.0, 0.0, 0.0]], requires_grad=True)
    (ours,) = torch.autograd.grad(entmax15(x, axis=-1)[0, 0], x)
    (theirs,) = torch.autograd.grad(entmax.entmax15(x, dim=-1)[0, 0], x)
    # y = (1/2, 1/2, 0, 0) and s = sqrt(y): the gradient of y_0 is s_0 e_0 - s_0 s / sum(s)
    quarter_root_two = float(np.sqrt(2.0) / 4)  # 0.3536
    expected = torch.tensor([[quarter_root_two, -quarter_root_two, 0.0, 0.0]])
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(ours, theirs)


def _small_integer_rows(length):
    """Every row of ``length`` integers from -2 to 2: ties of every kind (5**length rows)."""
    grid = np.stack(np.meshgrid(*[np.arange(-2.0, 3.0)] * length, indexing="ij"), axis=-1)
    return grid.reshape(-1, length)  # (5**length, length)


@pytest.mark.parametrize("fn_name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("length", [3, 4, 5])
def test_gradients_at_ties_match_the_entmax_packages_backward(fn_name, length):
    """All 3,875 small-integer rows of length 3-5 (228 gave NaN for entmax15 before)."""
    torch = pytest.importorskip("torch")
    entmax = pytest.importorskip("entmax")

    ours_fn = {"sparsemax": sparsemax, "entmax15": entmax15}[fn_name]
    rows = torch.from_numpy(_small_integer_rows(length))  # (5**length, length)
    upstream = torch.from_numpy(np.random.default_rng(length).normal(size=tuple(rows.shape)))
    x_ours, x_theirs = rows.clone().requires_grad_(), rows.clone().requires_grad_()
    (ours,) = torch.autograd.grad(ours_fn(x_ours), x_ours, upstream)
    (theirs,) = torch.autograd.grad(getattr(entmax, fn_name)(x_theirs, dim=-1), x_theirs, upstream)
    assert torch.isfinite(ours).all()
    torch.testing.assert_close(ours, theirs, **FLOAT64)
    # numpy has no autograd: the same closed form, called directly
    backward = {"sparsemax": sparsemax_backward, "entmax15": entmax15_backward}[fn_name]
    by_hand = backward(ours_fn(rows.numpy()), upstream.numpy())
    np.testing.assert_allclose(by_hand, theirs.numpy(), **FLOAT64)


@pytest.mark.parametrize("fn", [sparsemax, entmax15], ids=["sparsemax", "entmax15"])
def test_closed_form_gradients_pass_gradcheck_and_gradgradcheck(fn):
    torch = pytest.importorskip("torch")

    x = torch.from_numpy(np.random.default_rng(1).normal(scale=2.0, size=(5, 7)))
    x.requires_grad_()
    assert torch.autograd.gradcheck(lambda t: fn(t, axis=0), (x,))
    assert torch.autograd.gradgradcheck(lambda t: fn(t, axis=0), (x,))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_closed_form_gradients_keep_the_dtype_and_agree_with_float64(dtype):
    torch = pytest.importorskip("torch")

    rows = torch.from_numpy(_small_integer_rows(4) * 0.5)  # (625, 4) exact in every dtype
    upstream = torch.from_numpy(np.random.default_rng(2).normal(size=tuple(rows.shape)))
    for fn in (sparsemax, entmax15):
        low = rows.to(getattr(torch, dtype)).requires_grad_()
        exact = rows.clone().requires_grad_()
        (g_low,) = torch.autograd.grad(fn(low), low, upstream.to(low.dtype))
        (g_exact,) = torch.autograd.grad(fn(exact), exact, upstream.to(low.dtype).double())
        assert g_low.dtype == low.dtype
        eps = torch.finfo(low.dtype).eps
        assert (g_low.double() - g_exact).abs().max() <= 4 * eps * g_exact.abs().max()


def test_backward_functions_check_their_arguments():
    with pytest.raises(ValueError, match=r"one shape, got \(2, 3\) and \(3,\)"):
        sparsemax_backward(np.full((2, 3), 1 / 3), np.ones(3))
    with pytest.raises(TypeError, match=r"entmax15_backward must be a floating-point.*int64"):
        entmax15_backward(np.arange(3), np.ones(3))
    y = np.array([[0.0, 0.25, 0.75], [0.5, 0.5, 0.0]])  # sparsemax outputs, columns as rows
    g = np.array([[1.0, 2.0, 4.0], [3.0, -1.0, 7.0]])
    np.testing.assert_allclose(sparsemax_backward(y.T, g.T, axis=0), [[0, 2], [-1, -2], [1, 0]])
