"""The rule for non-finite inputs and empty key sets (`attention_lib.nonfinite`), on every path.

(a) a hidden key (boolean False, float -inf, causal) is never read: its
score and value change neither the rows that hide it nor their gradients;
(b) a row that sees no key gives zeros and zero gradients, whatever its
query; (c) a non-finite entry that is seen makes what it reaches non-finite.

Each case is checked against the same call with the hidden entries made
harmless (set to 0): the answer the rule promises, computed by plain
arithmetic. PyTorch itself parts from the rule here (it gives NaN); the
cases that show it say so. The Triton kernels are checked in
lib/tests/kernels/test_triton_flash.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from arrays import FLOAT64, INSTALLED, as_lib, make, needs_torch, to_numpy, torch_sdpa
from hypothesis import given, settings
from hypothesis import strategies as st

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
    torch = pytest.importorskip("torch")

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
    np.testing.assert_allclose(out[hiding], clean[hiding], **FLOAT64)
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
    torch = pytest.importorskip("torch")

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
        np.testing.assert_allclose(dirty_grads[name], clean[name], **FLOAT64, err_msg=name)


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
    np.testing.assert_allclose(out, want, **FLOAT64)
    np.testing.assert_array_equal(grads["query"][1], 0.0)
    for name in want_grads:
        np.testing.assert_allclose(grads[name], want_grads[name], **FLOAT64, err_msg=name)


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
    torch = pytest.importorskip("torch")
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
    torch = pytest.importorskip("torch")

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


# ---------------------------------------------------------------- issue 40's edges


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("hide", ["causal", "bool"])
def test_a_weight_of_one_on_an_infinite_value_gives_inf(lib, path, dtype, hide):
    """E = 0: every score is the empty sum 0, so row 0 sees one key with weight 1 and its
    infinite value gives inf, as in PyTorch; the hidden key (a mask sends the call to the
    exact route) was made NaN there (issue 40)."""
    q, k = np.zeros((2, 0), dtype), np.zeros((2, 0), dtype)
    v = np.array([[np.inf], [1.0]], dtype)
    mask = np.array([[True, False], [True, True]])
    kw = dict(is_causal=True) if hide == "causal" else dict(attn_mask=as_lib(mask, lib))
    out = to_numpy(PATHS[path](*(as_lib(x, lib) for x in (q, k, v)), **kw))
    np.testing.assert_array_equal(out, [[np.inf], [np.inf]])
    np.testing.assert_array_equal(
        torch_sdpa(q, k, v, **kw if hide == "causal" else {"attn_mask": mask}), out
    )


_ENTRIES = st.sampled_from([0.0, 1.0, -2.0, 0.5, math.inf, -math.inf, math.nan])


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(
    sizes=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3)),
    data=st.data(),
    lib=st.sampled_from(INSTALLED),
)
def test_visible_matmul_is_the_product_with_hidden_rows_left_out(sizes, data, lib):
    """Row by row, `visible_matmul` is plain a @ b over the seen positions alone: a hidden
    entry of b is never read, and a seen one is multiplied as plain arithmetic does it
    (a weight of 1 times inf is inf; 0 times inf, or inf - inf, is NaN)."""
    from attention_lib.backend import namespace
    from attention_lib.nonfinite import visible_matmul

    m, n, k = sizes
    seen = np.array(data.draw(st.lists(st.booleans(), min_size=m * n, max_size=m * n)))
    seen = seen.reshape(m, n)
    weights = st.sampled_from([0.0, 1.0, 0.25, -0.5, 3.0])
    a = np.array(data.draw(st.lists(weights, min_size=m * n, max_size=m * n))).reshape(m, n)
    a = np.where(seen, a, 0.0)  # a hidden weight is 0
    b = np.array(data.draw(st.lists(_ENTRIES, min_size=n * k, max_size=n * k))).reshape(n, k)
    with np.errstate(invalid="ignore"):
        want = np.stack([a[i, seen[i]] @ b[seen[i]] for i in range(m)])  # (m, k)
    x, y, s = (as_lib(z, lib) for z in (a, b, seen))
    got = to_numpy(visible_matmul(namespace(x), x, y, s))
    np.testing.assert_array_equal(got, want)


@needs_torch
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    sizes=st.tuples(*(st.integers(1, 3) for _ in range(2)), st.integers(0, 3)),
    heads=st.sampled_from([(1, 1), (2, 1), (2, 2)]),
    scale=st.sampled_from([None, math.nan, math.inf, -math.inf, 0.5, -2.0]),
    dtype=st.sampled_from(["float16", "float32"]),
    same_width=st.booleans(),
    bad=st.lists(st.tuples(st.sampled_from("qkv"), st.integers(0, 99), _ENTRIES), max_size=2),
    seed=st.integers(0, 100),
)
def test_without_a_mask_non_finite_results_are_pytorchs(
    sizes, heads, scale, dtype, same_width, bad, seed
):
    """With no key hidden the rule is plain arithmetic, so every path gives what PyTorch's
    math backend gives, NaN and inf included: an infinite scale (each score a sum of
    infinite products), a NaN scale, E = 0, non-finite entries, grouped heads, 4-d
    inputs with E = Ev (the fused tiles' calls, which gave a NaN scale's rows zeros:
    issue 40)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    length, keys, width = sizes
    width_v = width if same_width else 2
    hq, hk = heads
    shapes = [(1, hq, length, width), (1, hk, keys, width), (1, hk, keys, width_v)]
    q, k, v = (make(s, seed=seed + i) for i, s in enumerate(shapes))
    for name, index, entry in bad:
        x = {"q": q, "k": k, "v": v}[name]
        if x.size:
            x.flat[index % x.size] = entry
    q, k, v = (torch.from_numpy(x).to(getattr(torch, dtype)) for x in (q, k, v))
    kw = dict(scale=scale, enable_gqa=hq != hk)
    with sdpa_kernel(SDPBackend.MATH):
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kw)
    tolerance = 1e-2 if dtype == "float16" else 1e-5
    for path, run in PATHS.items():
        for inputs in ((q, k, v), tuple(x.numpy() for x in (q, k, v))):
            got = torch.from_numpy(to_numpy(run(*inputs, **kw))).float()
            torch.testing.assert_close(
                got, want, rtol=tolerance, atol=tolerance, equal_nan=True, msg=path
            )
