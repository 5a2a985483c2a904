"""softmax and the alternative normalisers: values, stability, edge rows, dtypes, errors."""

from __future__ import annotations

import numpy as np
import pytest
from support import make, to_numpy

from attention_lib import entmax15, softmax, softmax1, sparsemax


def asarray(values, lib, dtype="float64"):
    x = np.asarray(values, dtype=dtype)
    if lib == "numpy":
        return x
    import torch

    return torch.from_numpy(x)


def test_softmax_known_values(lib):
    # softmax([0, log 2, log 3]) = [1, 2, 3] / 6
    out = softmax(asarray([0.0, np.log(2), np.log(3)], lib))
    np.testing.assert_allclose(to_numpy(out), [1 / 6, 2 / 6, 3 / 6], rtol=1e-12)


def test_softmax_huge_logits_are_finite_and_sum_to_one(lib):
    out = to_numpy(softmax(asarray([[1e4, -1e4, 0.0], [1e4, 1e4 - 1, -1e4]], lib)))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(out[0], [1.0, 0.0, 0.0], atol=1e-300)
    np.testing.assert_allclose(out[1, 0] / out[1, 1], np.e, rtol=1e-12)


def test_softmax_other_axis(lib):
    x = make((3, 4, 5), lib)
    out = to_numpy(softmax(x, axis=1))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-12)
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
    import torch

    x = torch.tensor([[10.0, 0.0, -3.0]], dtype=torch.bfloat16)
    out = softmax(x)
    assert out.dtype == torch.bfloat16
    expected = torch.softmax(x.double(), -1)
    assert (out.double() - expected).abs().max() <= 2 * (
        torch.softmax(x, -1).double() - expected
    ).abs().max() + 1e-3
    assert softmax(np.zeros(3, dtype=np.float16)).dtype == np.float16


def test_softmax_keeps_autograd():
    import torch

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
    np.testing.assert_allclose(out[0], [1 / 3, 1 / 3], rtol=1e-12)  # e^0 / (1 + 2 e^0)
    assert out[1].sum() < 1e-20  # nothing worth attending: the head abstains
    np.testing.assert_array_equal(out[2], [0.0, 0.0])
    np.testing.assert_allclose(out[3], [1.0, 0.0], atol=1e-12)


# Martins and Astudillo (2016), section 2: sparsemax of (z, 0) is (1, 0) for z >= 1
# and ((1 + z) / 2, (1 - z) / 2) for |z| < 1.
@pytest.mark.parametrize("z", [-2.0, -0.5, 0.0, 0.3, 1.0, 3.0])
def test_sparsemax_two_dimensional_closed_form(lib, z):
    expected = [1.0, 0.0] if z >= 1 else [0.0, 1.0] if z <= -1 else [(1 + z) / 2, (1 - z) / 2]
    np.testing.assert_allclose(to_numpy(sparsemax(asarray([z, 0.0], lib))), expected, atol=1e-12)


def test_sparsemax_and_entmax_give_exact_zeros(lib):
    x = asarray([[3.0, 1.0, 0.2, -1.0], [0.1, 0.0, -0.1, 0.05]], lib)
    for fn in (sparsemax, entmax15):
        out = to_numpy(fn(x))
        np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-12)
        assert (out >= 0).all()
        assert (out[0] == 0).sum() >= 1  # low scores get exactly nothing
        assert (out[1] > 0).all()  # close scores all share


def test_entmax15_two_dimensional_closed_form(lib):
    # 1.5-entmax of (t, 0): p1 solves (t/2 - tau) ... ; for t = 0 it is uniform, for t >= 2 one-hot
    np.testing.assert_allclose(to_numpy(entmax15(asarray([0.0, 0.0], lib))), [0.5, 0.5])
    np.testing.assert_allclose(to_numpy(entmax15(asarray([2.0, 0.0], lib))), [1.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("fn_name", ["sparsemax", "entmax15"])
def test_sparse_maps_match_the_entmax_package(fn_name):
    import entmax
    import torch

    x = torch.from_numpy(np.random.default_rng(3).normal(scale=2.0, size=(50, 7)))
    ours = {"sparsemax": sparsemax, "entmax15": entmax15}[fn_name](x)
    theirs = getattr(entmax, fn_name)(x, dim=-1)
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
