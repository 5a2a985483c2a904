"""The rule for non-finite inputs and empty key sets (`attention_lib.nonfinite`), on every path.

(a) a hidden key (boolean False, float -inf, causal) is never read: its
score and value change neither the rows that hide it nor their gradients;
(b) a row that sees no key gives zeros and zero gradients, whatever its
query; (c) a non-finite entry that is seen makes what it reaches non-finite.

Each case is checked against the same call with the hidden entries made
harmless (set to 0): the answer the rule promises, computed by plain
arithmetic. PyTorch itself parts from the rule here (it gives NaN); the
cases that show it say so. The Triton kernels are checked in
tests/triton/test_triton_flash.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from support import as_lib, make, to_numpy

import attention_lib as al

PATHS = {
    "reference": al.scaled_dot_product_attention,
    "tiled": lambda *a, **kw: al.flash_attention(*a, backend="tiled", **kw),
    "tiled 1x1": lambda *a, **kw: al.flash_attention(
        *a, backend="tiled", block_q=1, block_k=1, **kw
    ),
}
BAD = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _case(name):
    """(query, key, value, keywords, dirty entries {input: index}, rows that hide them).

    Float64 numpy arrays; the dirty entries are hidden from the rows named.
    """
    q, k, v = make((3, 4)), make((3, 4), seed=1), make((3, 2), seed=2)
    if name == "causal value":  # key 1 is after query 0: hidden from row 0, seen by rows 1, 2
        return q, k, v, dict(is_causal=True), {"value": (1, 0)}, [0]
    if name == "causal key":
        return q, k, v, dict(is_causal=True), {"key": (2, 1)}, [0, 1]
    if name == "bool key":  # key 1 hidden from every row
        mask = np.array([[True, False, True]] * 3)
        return q, k, v, dict(attn_mask=mask), {"key": (1, 0)}, [0, 1, 2]
    if name == "bool value, one row":  # key 2 hidden from row 1 only
        mask = np.ones((3, 3), dtype=bool)
        mask[1, 2] = False
        return q, k, v, dict(attn_mask=mask), {"value": (2, 1)}, [1]
    if name == "float -inf key and value":
        mask = np.zeros((3, 3))
        mask[:, 0] = -np.inf
        return q, k, v, dict(attn_mask=mask), {"key": (0, 2), "value": (0, 0)}, [0, 1, 2]
    raise KeyError(name)


CASES = [
    "causal value",
    "causal key",
    "bool key",
    "bool value, one row",
    "float -inf key and value",
]


def _with(arrays, dirty, bad):
    out = dict(arrays)
    for name, index in dirty.items():
        out[name] = arrays[name].copy()
        out[name][index] = bad
    return out


def _lib(arrays, lib, grad=False):
    """The arrays as torch tensors (float ones requiring grad if asked), or as they are."""
    if lib == "numpy":
        return arrays
    import torch

    def tensor(x):
        return torch.from_numpy(x.copy()).requires_grad_(grad and x.dtype != bool)

    return {n: tensor(x) if isinstance(x, np.ndarray) else x for n, x in arrays.items()}


def _run(path, arrays, kw_names):
    kw = {n: arrays[n] for n in kw_names}
    return PATHS[path](arrays["query"], arrays["key"], arrays["value"], **kw)


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("path", PATHS)
def test_a_hidden_key_is_never_read(lib, path, case, bad):
    q, k, v, kw, dirty, hiding = _case(case)
    arrays = {"query": q, "key": k, "value": v, **kw}
    clean = to_numpy(_run(path, _lib(arrays, lib), kw))
    out = to_numpy(_run(path, _lib(_with(arrays, dirty, BAD[bad]), lib), kw))
    np.testing.assert_allclose(out[hiding], clean[hiding], rtol=1e-12, atol=1e-14)
    seeing = [i for i in range(3) if i not in hiding]
    if seeing and (bad == "nan" or "key" not in dirty):
        # (c): the rows that see the entry are not finite where it reaches (a seen key of
        # -inf or inf may score -inf, a weight of exactly 0, as arithmetic gives)
        assert not np.isfinite(out[seeing]).all()


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("path", ["reference", "tiled", "tiled 1x1"])
def test_no_gradient_through_a_row_reads_a_hidden_key(path, case, bad):
    """The gradients through the rows that hide the dirty entries equal the clean call's.

    The loss weights only those rows. When every row hides the entries, every
    gradient must match; otherwise only the hiding rows' query gradients can
    (the rows that see a NaN pass 0 x NaN = NaN to the keys and values, as
    arithmetic gives).
    """
    import torch

    q, k, v, kw, dirty, hiding = _case(case)
    arrays = {"query": q, "key": k, "value": v, **kw}
    weights = torch.from_numpy(make((3, 2), seed=5))
    weights[[i for i in range(3) if i not in hiding]] = 0  # only the hiding rows in the loss

    def grads(given):
        t = _lib(given, "torch", grad=True)
        (_run(path, t, kw) * weights).sum().backward()
        return {n: x.grad.numpy() for n, x in t.items() if getattr(x, "grad", None) is not None}

    clean, dirty_grads = grads(arrays), grads(_with(arrays, dirty, BAD[bad]))
    assert clean.keys() == dirty_grads.keys()
    if len(hiding) < 3:
        clean, dirty_grads = (
            {"query": clean["query"][hiding]},
            {"query": dirty_grads["query"][hiding]},
        )
    for name in clean:
        np.testing.assert_allclose(
            dirty_grads[name], clean[name], rtol=1e-12, atol=1e-14, err_msg=name
        )


def _masked_row(kind):
    """Row 1 sees no key: a boolean mask or a float -inf one."""
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    return mask if kind == "bool" else np.where(mask, 0.0, -np.inf)


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("path", PATHS)
def test_a_row_seeing_no_key_gives_zeros_and_no_gradient(path, kind, bad):
    # PyTorch 2.13 gives NaN for this row when its query is NaN (q k^T is NaN before the mask)

    q, k, v = make((3, 4)), make((3, 4), seed=1), make((3, 2), seed=2)
    mask = _masked_row(kind)
    clean = {"query": q, "key": k, "value": v, "attn_mask": mask}
    dirty = _with(clean, {"query": (1, 2)}, BAD[bad])

    def run(given):
        t = _lib(given, "torch", grad=True)
        out = _run(path, t, ["attn_mask"])
        out.sum().backward()
        return out.detach().numpy(), {n: x.grad.numpy() for n, x in t.items() if x.grad is not None}

    (out, grads), (want, want_grads) = run(dirty), run(clean)
    np.testing.assert_array_equal(out[1], 0.0)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    np.testing.assert_array_equal(grads["query"][1], 0.0)
    for name in want_grads:
        np.testing.assert_allclose(grads[name], want_grads[name], rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("path", PATHS)
def test_no_keys_give_zeros_whatever_the_query(lib, path):
    # PyTorch 2.13: NaN for a NaN query with S = 0
    q = make((3, 4), lib)
    q[1, 0] = math.nan
    k, v = make((0, 4), lib), make((0, 2), lib)
    np.testing.assert_array_equal(to_numpy(PATHS[path](q, k, v)), np.zeros((3, 2)))


@pytest.mark.parametrize("path", PATHS)
def test_a_large_finite_bias_is_not_a_mask(lib, path):
    # -1e9 is an ordinary score: its weight underflows to 0, but 0 x NaN is read
    q, k, v = make((3, 4), lib), make((3, 4), lib, seed=1), make((3, 2), lib, seed=2)
    v[0, 0] = math.nan
    mask = np.zeros((3, 3))
    mask[:, 0] = -1e9
    out = to_numpy(PATHS[path](q, k, v, attn_mask=as_lib(mask, lib)))
    assert np.isnan(out[:, 0]).all() and np.isfinite(out[:, 1]).all()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("where", ["query", "key", "value", "attn_mask"])
def test_a_seen_non_finite_entry_reaches_the_output(lib, path, where):
    arrays = {
        "query": make((3, 4), lib),
        "key": make((3, 4), lib, seed=1),
        "value": make((3, 2), lib, seed=2),
        "attn_mask": make((3, 3), lib, seed=3),
    }
    arrays[where][1, 1] = math.nan
    out = to_numpy(_run(path, arrays, ["attn_mask"]))
    assert not np.isfinite(out).all()


def test_attention_weights_are_zero_where_hidden_in_a_row_that_holds_nan(lib):
    q, k = make((3, 4), lib), make((3, 4), lib, seed=1)
    k[0, 1] = math.nan  # seen by every row: every row's weights NaN where seen
    w = to_numpy(al.attention_weights(q, k, is_causal=True))
    assert np.isnan(w[np.tril_indices(3)]).all()
    np.testing.assert_array_equal(w[np.triu_indices(3, 1)], 0.0)


def test_pytorch_parts_from_the_rule_here():
    """What PyTorch 2.13 does in the cases above, so the docstrings stay true."""
    import torch
    import torch.nn.functional as F

    q, k, v = (torch.from_numpy(make(s, seed=i)) for i, s in enumerate([(3, 4), (3, 4), (3, 2)]))
    v_nan = v.clone()
    v_nan[1, 0] = math.nan
    assert F.scaled_dot_product_attention(q, k, v_nan, is_causal=True)[0].isnan().any()
    k_nan = k.clone()
    k_nan[1, 0] = math.nan
    mask = torch.tensor([[True, False, True]] * 3)
    assert F.scaled_dot_product_attention(q, k_nan, v, attn_mask=mask).isnan().all()
    q_nan = q.clone()
    q_nan[1, 0] = math.nan
    assert F.scaled_dot_product_attention(q_nan, k[:0], v[:0])[1].isnan().all()
    assert al.scaled_dot_product_attention(q_nan, k[:0], v[:0]).eq(0).all()


@pytest.mark.parametrize("masking", ["bool", "float", "causal"])
def test_the_exact_routes_gradients_are_the_derivative(masking):
    """gradcheck (finite differences, float64) of the exact route: a NaN in a hidden key
    sends the call there; broadcast batches, dropout and a float mask's own gradient."""
    import torch

    q, k, v = (
        torch.from_numpy(make(s, seed=i)) for i, s in enumerate([(4, 5), (2, 6, 5), (2, 6, 3)])
    )
    k[1, 5, 0] = math.nan  # key 5: hidden from every row
    hide = torch.ones(4, 6, dtype=torch.bool)
    hide[:, 5] = False
    hide[1, 2] = False
    mask = {
        "bool": hide,
        "float": torch.from_numpy(make((4, 6), seed=4)).masked_fill(~hide, -math.inf),
        "causal": None,
    }[masking]
    kw = dict(is_causal=True) if masking == "causal" else dict(attn_mask=mask)
    if masking == "causal":  # query i sees keys j <= i: key 5 is hidden from every row
        q = q[..., :4, :]
    leaves = [x.clone().requires_grad_() for x in (q, v)]
    if masking == "float":
        leaves.append(mask.clone().requires_grad_())

    def f(q, v, *m):
        given = dict(kw, attn_mask=m[0]) if m else kw
        return al.scaled_dot_product_attention(q, k, v, dropout_p=0.25, generator=2, **given)

    assert torch.isfinite(f(*leaves)).all()
    assert torch.autograd.gradcheck(f, tuple(leaves))


def test_apply_mask_exact_hides_a_nan_score_under_minus_inf(lib):
    from attention_lib.backend import namespace
    from attention_lib.masks import apply_mask

    scores = make((2, 3), lib)
    scores[0, 1] = math.nan
    mask = make((2, 3), lib) * 0
    mask[0, 1] = -math.inf
    xp = namespace(scores)
    assert np.isnan(to_numpy(apply_mask(xp, scores, mask))[0, 1])  # NaN + -inf, the plain sum
    exact = to_numpy(apply_mask(xp, scores, mask, exact=True))
    assert exact[0, 1] == -math.inf
    np.testing.assert_array_equal(
        np.delete(exact.ravel(), 1), np.delete(to_numpy(scores).ravel(), 1)
    )
