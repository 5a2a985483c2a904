"""Both paths against PyTorch in every dtype, with FlashAttention's rule (hypothesis).

Random problems: shapes with L != S and E != Ev, grouped heads, query, key
and value batches that broadcast together; boolean and float masks with
-inf, large finite values (-1e9, float32's finfo.min) and whole rows
masked; is_causal; scales; float16, bfloat16, float32 and float64; numpy
and torch. Each output (and, for torch, each gradient: query, key, value
and a float mask) of `scaled_dot_product_attention` and of
`flash_attention` (the tiled path, random tiles) must be within twice
PyTorch's own error in the same dtype, plus the rule's floor
(`attention_lib.flash.accuracy.floor`), against PyTorch's math backend in
float64 on the same (rounded) inputs. Bad plain arguments are refused with
PyTorch's exception type.

Derandomized, with no example database, so a CI run is reproducible; a
modest number of examples keeps the file to seconds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from arrays import needs_torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import attention_lib as al
from attention_lib.backend import has_float64
from attention_lib.flash.accuracy import floor

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
DTYPES = {
    "numpy": ["float16", "float32", "float64"],
    "torch": ["float16", "bfloat16", "float32", "float64"],
}
# what hides a key, and large finite values that do not (float32's, so float16 masks hold -inf)
HIDE = {"bool": False, "float": -math.inf}
LARGE = [-1e9, float(np.finfo(np.float32).min), -1e4]


def _broadcastable(draw, batch, keep):
    """A batch shape that broadcasts to ``batch``: leading dims dropped (never the last
    ``keep``), others set to 1."""
    start = draw(st.integers(0, len(batch) - keep))
    return tuple(1 if draw(st.booleans()) else n for n in batch[start:])


@st.composite
def problems(draw):
    """One attention call as float64 numpy arrays, with the library and dtype to run it in."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lib = draw(st.sampled_from(["numpy", "torch"]))
    dtype = draw(st.sampled_from(DTYPES[lib]))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    length, keys = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    width, value_width = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    enable_gqa = bool(batch) and draw(st.booleans())
    keep = 1 if enable_gqa else 0
    q_batch, k_batch, v_batch = (_broadcastable(draw, batch, keep) for _ in range(3))
    if enable_gqa:  # query heads = groups x key/value heads
        q_batch = (*q_batch[:-1], batch[-1] * draw(st.integers(1, 3)))
    q = rng.normal(size=(*q_batch, length, width))
    k = rng.normal(size=(*k_batch, keys, width))
    v = rng.normal(size=(*v_batch, keys, value_width))
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    if enable_gqa:
        shapes[1:] = [(*s[:-1], q.shape[-3]) for s in shapes[1:]]
    full = (*np.broadcast_shapes(*shapes), length, keys)
    masking = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    mask, mask_dtype = None, None
    if masking in ("bool", "float"):
        kept = full[draw(st.integers(0, len(full))) :]
        shape = tuple(1 if draw(st.booleans()) else n for n in kept)
        if masking == "bool":
            mask = np.asarray(rng.random(shape)) > draw(st.sampled_from([0.0, 0.3, 0.8]))
        else:
            mask = np.asarray(rng.normal(size=shape) * 3)
            mask[rng.random(shape) < 0.2] = -np.inf
            mask[rng.random(shape) < 0.2] = draw(st.sampled_from(LARGE))
            mask_dtype = draw(st.sampled_from([dtype, "float32"]))
        if len(shape) >= 2 and shape[-2] > 1 and draw(st.booleans()):  # a row that sees nothing
            row = draw(st.integers(0, shape[-2] - 1))
            mask[..., row, :] = (
                draw(st.sampled_from([HIDE[masking], *LARGE])) if masking == "float" else False
            )
        mask = np.asarray(mask)
    scale = draw(st.one_of(st.none(), st.floats(-3, 3)))
    return {
        "lib": lib,
        "dtype": dtype,
        "arrays": (q, k, v, mask),
        "mask_dtype": mask_dtype,
        "kw": {"is_causal": masking == "causal", "scale": scale, "enable_gqa": enable_gqa},
        "full": full,
    }


def _torch(x, dtype, grad=False):
    import torch

    if x is None:
        return None
    t = torch.from_numpy(np.array(x))
    if t.dtype != torch.bool:
        t = t.to(getattr(torch, dtype))
    return t.requires_grad_(grad and t.dtype != torch.bool)


def _pytorch(q, k, v, mask, full, kw, exact):
    """PyTorch's SDPA (its math backend if ``exact``), with the shapes it needs: a mask
    of at least (L, S), and a query broadcast to the whole batch when there is a mask
    (PyTorch adds the mask in place to query @ key^T; see attention_lib.inputs)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if mask is not None:
        mask = (
            mask.expand(*mask.shape[:-2], *full[-2:]) if mask.ndim >= 2 else mask.expand(full[-2:])
        )
        q = q.expand(*full[:-1], q.shape[-1])
    if exact:
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)


def _run(fn, arrays, dtype, mask_dtype, grad, upstream=None):
    """(output, gradients of the float inputs) of fn on torch tensors in ``dtype``."""
    import torch

    q, k, v, mask = arrays
    leaves = [_torch(x, dtype, grad) for x in (q, k, v)]
    m = _torch(mask, mask_dtype or dtype, grad)
    with torch.enable_grad():
        out = fn(*leaves, m)
        grads = []
        if grad:
            out.backward(upstream.to(out.dtype))
            grads = [x.grad for x in (*leaves, m) if x is not None and x.requires_grad]
    return out.detach(), grads


def _rounded(arrays, dtype, mask_dtype):
    """The float64 arrays as ``dtype`` (the mask as ``mask_dtype``) holds them, in float64."""
    q, k, v, mask = arrays

    def hold(x, d):
        return x if x is None or x.dtype == bool else _torch(x, d).double().numpy()

    return (*(hold(x, dtype) for x in (q, k, v)), hold(mask, mask_dtype or dtype))


def _terms(arrays, kw, upstream):
    """The size of the terms each result sums (out, dq, dk, dv, dmask): the floor's scale
    where a result cancels to less than its terms (a mean of values of both signs)."""
    q, k, v, _ = (np.abs(x).max() if x is not None and x.dtype != bool else 0 for x in arrays)
    scale = abs(kw["scale"]) if kw["scale"] is not None else arrays[0].shape[-1] ** -0.5
    g = float(upstream.abs().max())
    return {"output": v, "dq": scale * g * v * k, "dk": scale * g * v * q, "dv": g, "dmask": g * v}


def _score_bound(arrays, kw):
    """A bound on |score| at a visible position: |scale| · E · max|q| · max|k| + max|mask|
    (the mask's finite values; -inf hides)."""
    q, k, _, mask = arrays
    scale = abs(kw["scale"]) if kw["scale"] is not None else q.shape[-1] ** -0.5
    finite = 0.0
    if mask is not None and mask.dtype != bool and np.isfinite(mask).any():
        finite = float(np.abs(mask[np.isfinite(mask)]).max())
    return scale * q.shape[-1] * float(np.abs(q).max()) * float(np.abs(k).max()) + finite


def _check(ours, theirs, exact, dtype, what, terms=0.0, scores=0.0):
    """Our max |error| against float64 at most twice PyTorch's, plus the rule's floor.

    In float64 the reference *is* PyTorch's math backend in float64, so PyTorch's own error
    is zero by construction and twice it says nothing: what is left is the rounding any
    correct float64 implementation that sums in another order makes. To first order that is
    the scores' rounding, a few ulps of |score| (``scores``, up to 1e9 with a large finite
    mask), carried to each result by weights that sum to one, times the result's terms:
    the floor's magnitude is multiplied by (1 + ``scores``) there.
    """
    exact = exact.double()
    ours_err = (ours.double() - exact).abs().max().item()
    their_err = (theirs.double() - exact).abs().max().item()
    magnitude = max(exact.abs().max().item(), terms)
    if dtype == "float64":
        magnitude *= 1 + scores
    allowed = 2 * their_err + floor(dtype, magnitude)
    assert ours_err <= allowed, f"{what}: error {ours_err:.3g}, PyTorch's {their_err:.3g}"


PATHS = {
    "reference": lambda blocks: al.scaled_dot_product_attention,
    "tiled": lambda blocks: (
        lambda *a, **kw: al.flash_attention(
            *a, backend="tiled", block_q=blocks[0], block_k=blocks[1], **kw
        )
    ),
}


@needs_torch
@pytest.mark.parametrize("path", PATHS)
@SETTINGS
@given(problem=problems(), blocks=st.tuples(st.integers(1, 10), st.integers(1, 10)))
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_within_twice_pytorchs_error_forward_and_backward(path, problem, blocks):
    import torch

    lib, dtype, kw, full = problem["lib"], problem["dtype"], problem["kw"], problem["full"]
    mask_dtype = problem["mask_dtype"]
    # a device without float64 (test_without_float64.py) holds no float64 inputs to begin with
    assume(dtype != "float64" or lib == "numpy" or has_float64(torch.empty(0)))
    arrays = _rounded(problem["arrays"], dtype, mask_dtype)  # exact in dtype from here on
    fn = PATHS[path](blocks)
    grad = lib == "torch"
    upstream = torch.from_numpy(
        np.random.default_rng(1).normal(size=(*full[:-1], arrays[2].shape[-1]))
    )

    def ours(q, k, v, m):
        return fn(q, k, v, attn_mask=m, **kw)

    def theirs(q, k, v, m, exact=False):
        return _pytorch(q, k, v, m, full, kw, exact)

    exact, exact_grads = _run(
        lambda *a: theirs(*a, exact=True), arrays, "float64", "float64", grad, upstream
    )
    pytorch, pytorch_grads = _run(theirs, arrays, dtype, mask_dtype, grad, upstream)
    if lib == "numpy":
        q, k, v, mask = arrays
        given = [x.astype(dtype) for x in (q, k, v)]
        m = None if mask is None or mask.dtype == bool else mask.astype(mask_dtype)
        out = fn(*given, attn_mask=mask if m is None else m, **kw)
        assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dtype)
        out, grads = torch.from_numpy(out.astype(np.float64)), []
    else:
        out, grads = _run(ours, arrays, dtype, mask_dtype, grad, upstream)
        assert out.dtype == getattr(torch, dtype)
    assert tuple(out.shape) == tuple(exact.shape)
    terms, scores = _terms(arrays, kw, upstream), _score_bound(arrays, kw)
    _check(out, pytorch, exact, dtype, "output", terms["output"], scores)
    assert len(grads) == len(pytorch_grads) == len(exact_grads)
    for name, g, t, e in zip(("dq", "dk", "dv", "dmask"), grads, pytorch_grads, exact_grads):  # noqa: B905
        assert g.dtype == t.dtype and g.shape == t.shape, name
        _check(g, t, e, str(g.dtype).removeprefix("torch."), name, terms[name], scores)


# ---------------------------------------------------------------- bad plain arguments

BAD = {
    "scale": st.one_of(
        st.text(max_size=3), st.lists(st.floats(), max_size=2), st.complex_numbers()
    ),
    "is_causal": st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=3)),
    "enable_gqa": st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=3)),
    "dropout_p": st.one_of(st.none(), st.text(max_size=3), st.lists(st.floats(), max_size=2)),
}


@needs_torch
@SETTINGS
@given(st.sampled_from(sorted(BAD)).flatmap(lambda n: st.tuples(st.just(n), BAD[n])))
def test_bad_plain_arguments_are_refused_as_pytorch_refuses_them(bad):
    import torch.nn.functional as F

    name, value = bad
    q, k, v = (_torch(np.random.default_rng(i).normal(size=(2, 3, 4)), "float32") for i in range(3))
    with pytest.raises(Exception) as theirs:
        F.scaled_dot_product_attention(q, k, v, **{name: value})
    calls = [al.scaled_dot_product_attention]
    if name != "dropout_p":
        calls.append(lambda *a, **kw: al.flash_attention(*a, backend="tiled", **kw))
    for call in calls:
        with pytest.raises(theirs.type, match=name):
            call(q, k, v, **{name: value})
