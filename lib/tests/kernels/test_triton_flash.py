"""The Triton kernels, forward and backward, run on the CPU by Triton's interpreter.

TRITON_INTERPRET=1 must be set before triton is first imported, and it
would then stay set for every other test. So the kernels run in one child
process (this file run as a script, with the variable set only there),
which computes every case and prints its measurements as JSON; the tests
here check them. FlashAttention's rule for low precision: the kernel's error
against a float64 reference is at most twice PyTorch's own SDPA's error in
the same dtype (plus a tiny floor for cases where PyTorch happens to be
exact). Gradients are held to the same rule, against the float64 gradients
of the reference path. What the interpreter cannot show (that the kernels
compile for a GPU) is lib/tests/kernels/test_triton_compile.py's job.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# the kernels take torch tensors; "triton.language", not "triton": with lib/tests on sys.path
# this folder passes for a namespace package named triton
pytest.importorskip("torch", reason="the Triton kernels take torch tensors")
pytest.importorskip(
    "triton.language",
    reason="triton is not installed (pip install -e '.[triton]', Linux only): "
    "the Triton kernel's interpreter tests need it",
)

DTYPES = ("float32", "float16", "bfloat16")
# (name, query shape, key shape, value shape, keyword arguments); small, so the
# interpreter runs them all in about a minute
TILES_16 = dict(block_q=16, block_k=16)
SHAPES = [
    ("E16 L37 S53 tiles 16x16", (1, 2, 37, 16), (1, 2, 53, 16), (1, 2, 53, 16), TILES_16),
    (
        "E64 causal L53 S37 tiles 16x32",
        *((2, 1, 53, 64), (2, 1, 37, 64), (2, 1, 37, 64)),
        dict(is_causal=True, block_q=16, block_k=32),
    ),
    (
        "E32 causal L29 S70 tiles 32x16",
        *((1, 2, 29, 32), (1, 2, 70, 32), (1, 2, 70, 32)),
        dict(is_causal=True, block_q=32, block_k=16),
    ),
    (
        "E128 causal L40 S40",
        (1, 2, 40, 128),
        (1, 2, 40, 128),
        (1, 2, 40, 128),
        dict(is_causal=True),
    ),
    ("E80 Ev96 L19 S70", (1, 2, 19, 80), (1, 2, 70, 80), (1, 2, 70, 96), dict()),
    ("E256 L24 S40 tiles 16x16", (1, 1, 24, 256), (1, 1, 40, 256), (1, 1, 40, 256), TILES_16),
    (
        "grouped heads causal",
        *((1, 4, 33, 32), (1, 2, 21, 32), (1, 2, 21, 32)),
        dict(enable_gqa=True, is_causal=True, **TILES_16),
    ),
]
FORWARD_CASES = [(name, dtype) for name, *_ in SHAPES for dtype in DTYPES]
HALF_FORWARD_CASES = [(name, dtype) for name, dtype in FORWARD_CASES if dtype != "float32"]
GRAD_CASES = FORWARD_CASES
EXTRA_CASES = {
    # E = 8 is padded to the 16 lanes a matrix product needs
    "E8 padded": ((3, 17, 8), (3, 20, 8), (3, 20, 8), TILES_16),
    # 2-d inputs and a scale of our own
    "2-d scale": ((25, 32), (31, 32), (31, 16), dict(scale=0.3, is_causal=True, **TILES_16)),
    # key and value broadcast over the query's heads
    "broadcast kv": ((2, 3, 18, 16), (2, 1, 24, 16), (2, 1, 24, 16), TILES_16),
    # key and value broadcast over a leading batch dimension
    "broadcast kv batch": ((2, 3, 18, 16), (3, 24, 16), (3, 24, 16), dict(is_causal=True)),
    # the query's batch broadcasts too: (2, 9, 16) with (2, 2, 12, 16) gives (2, 2, 9, 16)
    "broadcast query": ((2, 9, 16), (2, 2, 12, 16), (2, 2, 12, 16), TILES_16),
    # leading dimensions that cannot merge into one as a view: one launch per leading entry
    "broadcast rank 5": ((2, 1, 2, 9, 16), (1, 2, 2, 12, 16), (2, 2, 1, 12, 16), TILES_16),
    # grouped heads: 2 key heads, 1 value head (expanded to 2 as a view)
    "gqa, 1 value head": (
        *((1, 4, 9, 16), (1, 2, 12, 16), (1, 1, 12, 16)),
        dict(enable_gqa=True, **TILES_16),
    ),
}
# broadcast inputs whose gradients are sums over the batch: checked in 16-bit too, where a
# sum of per-entry roundings would show (each is summed in float32 and rounded once), and
# where weights rounded once to 16 bits would: P in the forward pass's P V (the backward
# pass reads O back in δ = rowsum(dO ∘ O)) made "broadcast rank 5" float16 dK 3.2x PyTorch's
# error, and with that fixed, P and dS in the backward's products made "broadcast kv batch"
# float16 dK 2.3x. So when gradients are wanted the kernels take the weights as two 16-bit
# parts each (common.split_dot), as PyTorch's float32 weights: every ratio here 1.5x or less.
HALF_GRAD_CASES = ("broadcast query", "broadcast rank 5", "broadcast kv", "broadcast kv batch")
HALF_DTYPES = ("float16", "bfloat16")
HALF_GRAD_PARAMS = [(n, d) for n in HALF_GRAD_CASES for d in HALF_DTYPES]


# ------------------------------------------------------------------ child process


def _inputs(q_shape, k_shape, v_shape, dtype, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    shapes = (q_shape, k_shape, v_shape)
    return [torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for s in shapes]


def _forward(shapes, dtype_name, differentiable=False):
    """The kernel's output error and PyTorch's, against float64 (`accuracy.forward_check`);
    ``differentiable``: the output of a call autograd will differentiate (the forward kernel
    for a backward pass, its 16-bit weights in two parts)."""
    import torch

    from attention_lib.flash.accuracy import forward_check

    *qkv_shapes, kw = shapes
    q, k, v = _inputs(*qkv_shapes, getattr(torch, dtype_name))
    return forward_check("", q, k, v, differentiable, backend="triton", **kw).as_dict()


def _gradients(shapes, dtype_name):
    """The kernel's gradient errors and PyTorch's, against float64 autograd."""
    import torch

    from attention_lib.flash.accuracy import gradient_checks

    dtype = getattr(torch, dtype_name)
    *qkv_shapes, kw = shapes
    q, k, v = _inputs(*qkv_shapes, dtype)
    with torch.no_grad():
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, **{n: x for n, x in kw.items() if not n.startswith("block")}
        )
    g = torch.Generator().manual_seed(9)
    grad_out = torch.randn(out.shape, generator=g).to(dtype)
    checks = gradient_checks("", q, k, v, grad_out, backend="triton", **kw)
    return {name: c.as_dict() for name, c in zip(("dq", "dk", "dv"), checks, strict=True)}


def _finite_differences():
    """Directional derivatives of the float32 kernel against its own gradients.

    For a random direction d and a fixed output weighting w, the central
    difference (f(x + h·d) - f(x - h·d)) / 2h of f = sum(w ∘ attention) is
    compared with <∇f, d> from the backward kernels, one input at a time.
    """
    import torch

    import attention_lib as al

    q, k, v = _inputs((1, 2, 21, 16), (1, 1, 27, 16), (1, 1, 27, 32), torch.float32, seed=3)
    g = torch.Generator().manual_seed(4)
    w = torch.randn((1, 2, 21, 32), generator=g)  # output weighting
    kw = dict(is_causal=True, enable_gqa=True, block_q=16, block_k=16)

    def f(*args):
        return (al.flash_attention(*args, backend="triton", **kw).double() * w).sum().item()

    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    (al.flash_attention(*leaves, backend="triton", **kw) * w).sum().backward()
    step = 1e-2
    results = {}
    for i, name in enumerate(("q", "k", "v")):
        d = torch.randn(leaves[i].shape, generator=g)  # direction
        plus, minus = [q, k, v], [q, k, v]
        plus[i], minus[i] = leaves[i].detach() + step * d, leaves[i].detach() - step * d
        numeric = (f(*plus) - f(*minus)) / (2 * step)
        analytic = (leaves[i].grad.double() * d.double()).sum().item()
        results[name] = {"numeric": numeric, "analytic": analytic}
    return results


def _lse_error():
    """The kernel's row statistics (log2 units) against torch.logsumexp of the causal scores:
    their sum is the log-sum-exp, the first is the row's largest score."""
    import torch

    from attention_lib.flash.triton.launch import flash_forward

    q, k, v = _inputs((1, 2, 29, 16), (1, 2, 29, 16), (1, 2, 29, 16), torch.float32)
    _, stats = flash_forward(q, k, v, True, 0.25, 16, 16)
    above = ~torch.ones(29, 29).tril().bool()  # (L, S), keys after the query
    scores = (q @ k.transpose(-1, -2) * 0.25).masked_fill(above, -torch.inf)  # (1, 2, L, S)
    lse = (stats[0].double() + stats[1].double()) * math.log(2)  # (1, 2, L)
    return {
        "lse": (lse - torch.logsumexp(scores.double(), dim=-1)).abs().max().item(),
        "max": (stats[0].double() * math.log(2) - scores.amax(-1)).abs().max().item(),
        "shape": list(stats.shape),
        "dtype": str(stats.dtype),
    }


def _large_scores():
    """Scores of -1e4, -1e9 and -1e38, and scores in the hundreds, forward and backward.

    The kernels take no mask, so a padding row is built from scores: the
    query (1, 0, ...) and every key (-1, 0, ...), scaled by 1e4, 1e9 or 1e38,
    give each key of every row the same large negative score, as a float
    mask of -1e4, -1e9 or finfo.min-like values does (-1e38: the kernels
    work in log2 units, scores times log2 e, which must stay below
    float32's largest 3.4e38). Every weight is 1/S: the output is the mean
    value and dV each key's share 1/S of the summed upstream gradient,
    compared exactly (PyTorch's own SDPA gets this dV S times too large on
    the CPU: see attention_lib.flash.accuracy). "Partly": half the keys get
    a score of about -1e9 (-1e4 in float16) through a large first feature,
    the rest ordinary scores: the 2x rule. Then random scores in the
    hundreds (scale 30, E = 16): the median over 15 cases of our error /
    PyTorch's, against float64.
    """
    import torch

    import attention_lib as al
    from attention_lib.flash.accuracy import forward_check, gradient_checks

    results = {}
    kw = dict(backend="triton", block_q=16, block_k=16)
    g = torch.Generator().manual_seed(11)
    q = torch.zeros(1, 2, 20, 16, dtype=torch.float64)
    q[..., 0] = 1.0
    k = torch.zeros(1, 2, 24, 16, dtype=torch.float64)
    k[..., 0] = -1.0
    v = torch.randn(1, 2, 24, 16, generator=g, dtype=torch.float64)
    do = torch.randn(1, 2, 20, 16, generator=g, dtype=torch.float64)
    for dtype in DTYPES:
        dt = getattr(torch, dtype)
        vd, dod = v.to(dt).double(), do.to(dt).double()  # the inputs as the dtype holds them
        want_out = vd.mean(-2, keepdim=True).expand(1, 2, 20, 16)  # (1, 2, L, Ev)
        want_dv = dod.sum(-2, keepdim=True).expand(1, 2, 24, 16) / 24  # (1, 2, S, Ev)
        for size in (1e4, 1e9, 1e38):
            leaves = [x.to(dt).requires_grad_() for x in (q, k, v)]
            out = al.flash_attention(*leaves, scale=size, **kw)
            out.backward(do.to(dt))
            results[f"equal {size:g}|{dtype}"] = {
                "out": (out.double() - want_out).abs().max().item(),
                "dv": (leaves[2].grad.double() - want_dv).abs().max().item(),
                "out_size": want_out.abs().max().item(),
                "dv_size": want_dv.abs().max().item(),
            }
        big = 1e4 * 4 if dtype == "float16" else 1e9 * 4
        gp = torch.Generator().manual_seed(12)
        qp = torch.randn(1, 2, 20, 16, generator=gp)
        qp[..., 0] = 1.0
        kp = torch.randn(1, 2, 24, 16, generator=gp)
        kp[..., 0::2, 0] = -big  # keys 0, 2, 4, ...: scores of about -big / 4
        vp, dop = (torch.randn(1, 2, n, 16, generator=gp) for n in (24, 20))
        args = (qp.to(dt), kp.to(dt), vp.to(dt))
        checks = [forward_check("out", *args, **kw), *gradient_checks("", *args, dop.to(dt), **kw)]
        results[f"partly|{dtype}"] = [c.as_dict() for c in checks]
    ratios = []
    for seed in range(15):
        gh = torch.Generator().manual_seed(100 + seed)
        qh, kh, vh, doh = (torch.randn(1, 1, 32, 16, generator=gh) for _ in range(4))
        checks = gradient_checks("", qh, kh, vh, doh, scale=30.0, **kw)
        ratios.append([c.ours / c.pytorch for c in checks])
    results["hundreds"] = {
        "median": [sorted(r[i] for r in ratios)[len(ratios) // 2] for i in range(3)],
        "peak": (qh @ kh.transpose(-1, -2) * 30.0).abs().max().item(),
    }
    return results


def _nonfinite():
    """The kernels against the reference path (which follows the rule) on non-finite inputs.

    Causal, tiles 16 x 16, L = 40 and S = 48: NaN and inf placed in keys,
    values and queries at positions hidden from some rows of a tile that
    crosses the diagonal, hidden from every row (keys 40 on), and seen.
    Outputs and gradients: the same entries non-finite, the rest equal
    (the largest difference and the largest reference value recorded). In
    float32 (keyed by the case's name) and in 16 bits ("name|dtype"), where
    the products take the weights as two 16-bit parts (common.split_dot).
    """
    import torch

    import attention_lib as al

    cases = {
        "value nan, diagonal tile": ("value", (0, 0, 20, 3), math.nan),
        "value inf, diagonal tile": ("value", (0, 1, 21, 0), math.inf),
        "key nan, diagonal tile": ("key", (0, 0, 18, 5), math.nan),
        "key -inf, diagonal tile": ("key", (0, 1, 30, 2), -math.inf),
        "key nan, after every query": ("key", (0, 0, 44, 1), math.nan),
        "value nan, after every query": ("value", (0, 1, 47, 7), math.nan),
        "query nan": ("query", (0, 0, 17, 4), math.nan),
        "query inf": ("query", (0, 1, 3, 4), math.inf),
    }
    results = {}
    for (name, (which, index, bad)), dtype in itertools.product(cases.items(), DTYPES):
        dt = getattr(torch, dtype)
        g = torch.Generator().manual_seed(21)
        arrays = {
            "query": torch.randn(1, 2, 40, 16, generator=g).to(dt),
            "key": torch.randn(1, 2, 48, 16, generator=g).to(dt),
            "value": torch.randn(1, 2, 48, 16, generator=g).to(dt),
        }
        arrays[which][index] = bad
        do = torch.randn(1, 2, 40, 16, generator=g).to(dt)
        runs = {}
        for path, fn in {
            "triton": lambda *a: al.flash_attention(
                *a, is_causal=True, backend="triton", block_q=16, block_k=16
            ),
            "reference": lambda *a: al.scaled_dot_product_attention(*a, is_causal=True),
        }.items():
            leaves = [arrays[n].clone().requires_grad_() for n in ("query", "key", "value")]
            out = fn(*leaves)
            out.backward(do)
            runs[path] = [out.detach(), *(x.grad for x in leaves)]
        record = {}
        for label, ours, want in zip(("out", "dq", "dk", "dv"), *runs.values(), strict=True):
            same = torch.equal(torch.isfinite(ours), torch.isfinite(want))
            finite = torch.isfinite(want) & torch.isfinite(ours)
            diff = (ours[finite].double() - want[finite].double()).abs()  # (finite entries,)
            record[label] = {
                "same_non_finite": same,
                "non_finite": int((~torch.isfinite(want)).sum()),
                "error": diff.max().item() if finite.any() else 0.0,
                "size": want[finite].abs().max().item() if finite.any() else 0.0,
            }
        results[name if dtype == "float32" else f"{name}|{dtype}"] = record
    q = torch.randn(2, 4, 16)
    q[1, 2, 0] = math.nan
    empty = torch.zeros(2, 0, 16)
    results["no keys, nan query"] = bool(
        (al.flash_attention(q, empty, empty, backend="triton") == 0).all()
    )
    return results


def _describe(x):
    """Data pointer, shape, strides (None for a dimension of size 1: never stepped) and dtype."""
    strides = [None if n == 1 else s for n, s in zip(x.shape, x.stride(), strict=True)]
    return [x.data_ptr(), list(x.shape), strides, str(x.dtype)]


def _recorded(run):
    """The launches ``run()`` makes: each kernel's name and its tensors, described."""
    import torch

    from attention_lib.flash.triton import launch as triton_launch

    launches = []
    launch = triton_launch.Launch.__call__

    def recording(self):
        tensors = [a for a in self.args if isinstance(a, torch.Tensor)]
        launches.append({"kernel": self.kernel.__name__, "tensors": list(map(_describe, tensors))})
        launch(self)

    triton_launch.Launch.__call__ = recording
    try:
        run()
    finally:
        triton_launch.Launch.__call__ = launch
    return launches


def _handed_to_the_kernels():
    """What each kernel launch received: the caller's tensors as they are, or copies.

    Inputs in the (B, L, H, E) layout models use, viewed as (B, H, L, E)
    (not contiguous), in bfloat16: with grouped key/value heads, forward and
    backward; with one key/value head broadcast over the query's; and with
    no gradient asked for. Records each launch's tensors (data pointer,
    shape, strides, dtype).
    """
    import torch

    import attention_lib as al

    g = torch.Generator().manual_seed(5)
    b, length, heads, width = 2, 24, 4, 16

    def rows_major(h, w):  # (B, L, H, w) storage, seen as (B, H, L, w)
        x = torch.randn((b, length, h, w), generator=g).to(torch.bfloat16)
        return x.transpose(1, 2).requires_grad_()

    results = {}
    for name, heads_kv, gqa in (("grouped", 2, True), ("broadcast", 1, False)):
        q, k, v = rows_major(heads, width), rows_major(heads_kv, width), rows_major(heads_kv, 32)
        grad_out = rows_major(heads, 32).detach()

        def forward_and_backward(q=q, k=k, v=v, grad_out=grad_out, gqa=gqa):
            out = al.flash_attention(
                q, k, v, is_causal=True, enable_gqa=gqa, backend="triton", **TILES_16
            )
            out.backward(grad_out)

        launches = _recorded(forward_and_backward)
        given = {n: _describe(x) for n, x in (("q", q), ("k", k), ("v", v), ("do", grad_out))}
        grads = [list(x.grad.shape) for x in (q, k, v)]
        results[name] = {"given": given, "launches": launches, "grad_shapes": grads}
    with torch.no_grad():
        q = rows_major(heads, width)
        results["no_grad"] = _recorded(lambda: al.flash_attention(q, q, q, backend="triton"))
    return results


def _refusals():
    """The messages of what the kernel refuses with backend='triton'."""
    import torch

    import attention_lib as al

    q = torch.randn(1, 2, 8, 16)
    attempts = {
        "mask": lambda: al.flash_attention(
            q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool), backend="triton"
        ),
        "float64": lambda: al.flash_attention(q.double(), q.double(), q.double(), backend="triton"),
        "width": lambda: al.flash_attention(*(torch.randn(2, 8, 300),) * 3, backend="triton"),
        "block": lambda: al.flash_attention(q, q, q, block_q=24, backend="triton"),
        "scale": lambda: al.flash_attention(q, q, q, scale=math.nan, backend="triton"),
        "gqa heads": lambda: al.flash_attention(
            torch.randn(1, 4, 8, 16), q, torch.randn(1, 4, 8, 16), enable_gqa=True, backend="triton"
        ),
    }
    messages = {}
    for name, attempt in attempts.items():
        try:
            attempt()
            messages[name] = "no error"
        except (ValueError, RuntimeError) as err:
            messages[name] = f"{type(err).__name__}: {err}"
    return messages


def _empty():
    """Outputs and gradients for L = 0 and S = 0 (nothing to launch)."""
    import torch

    import attention_lib as al

    results = {}
    for name, (length, keys) in {"L0": (0, 5), "S0": (4, 0)}.items():
        q, k, v = (torch.randn(2, n, 16, requires_grad=True) for n in (length, keys, keys))
        out = al.flash_attention(q, k, v, backend="triton")
        out.sum().backward()
        results[name] = {
            "shape": list(out.shape),
            "zeros": bool((out == 0).all()),
            "grad_zeros": all(bool((x.grad == 0).all()) for x in (q, k, v)),
        }
    return results


def _split_dot():
    """common.split_dot alone on a 16 x 16 tile: its error against float64, once and in two parts.

    x in [0, 1) (weights) times b (N(0, 1) numbers of the dtype); in float16 one entry of x is
    1e5, past the largest float16: its row of the product, "overflow", must be ±inf, not NaN.
    """
    import torch
    import triton
    import triton.language as tl

    from attention_lib.flash.triton import common
    from attention_lib.flash.triton.launch import _widen_bfloat16

    global _common  # the interpreter runs a kernel with its module's globals, not a closure
    _common = common

    @triton.jit
    def product(X, B, Out, WIDEN: tl.constexpr, PARTS: tl.constexpr):
        r = tl.arange(0, 16)
        x = tl.load(X + r[:, None] * 16 + r[None, :])  # (16, 16) float32
        b = _common.operand(tl.load(B + r[:, None] * 16 + r[None, :]), WIDEN)  # (16, 16)
        acc = tl.zeros((16, 16), tl.float32)  # (16, 16)
        acc = _common.split_dot(x, b, acc, B.dtype.element_ty, WIDEN, "tf32", PARTS)  # (16, 16)
        tl.store(Out + r[:, None] * 16 + r[None, :], acc)

    results = {}
    for dtype in HALF_DTYPES:
        dt = getattr(torch, dtype)
        g = torch.Generator().manual_seed(31)
        x = torch.rand(16, 16, generator=g)
        b = torch.randn(16, 16, generator=g).to(dt)
        if dtype == "float16":
            x[3, 5] = 1e5
        want = x.double() @ b.double()  # (16, 16)
        finite = torch.isfinite(x.to(dt)).all(1)  # (16,) rows whose x fits the dtype
        for parts in (1, 2):
            out = torch.empty(16, 16)
            product[(1,)](x, b, out, WIDEN=_widen_bfloat16(dt), PARTS=parts)
            results[f"{dtype}|{parts}"] = {
                "error": (out.double() - want)[finite].abs().max().item(),
                "size": want[finite].abs().max().item(),
                "overflow": [str(v) for v in out[~finite].flatten()[:16].tolist()],
            }
    return results


def run_in_interpreter():
    """Everything the tests check, measured under TRITON_INTERPRET=1."""
    from attention_lib.flash.triton import launch as triton_launch

    shapes = {name: rest for name, *rest in SHAPES}
    return {
        "interpreted": triton_launch.INTERPRETED,
        "forward": {f"{n}|{d}": _forward(shapes[n], d) for n, d in FORWARD_CASES},
        "forward_for_backward": {
            f"{n}|{d}": _forward(shapes[n], d, differentiable=True) for n, d in HALF_FORWARD_CASES
        },
        "extra": {n: _forward(s, "float32") for n, s in EXTRA_CASES.items()},
        "gradients": {f"{n}|{d}": _gradients(shapes[n], d) for n, d in GRAD_CASES},
        "extra_gradients": {n: _gradients(s, "float32") for n, s in EXTRA_CASES.items()},
        "half_gradients": {
            f"{n}|{d}": _gradients(EXTRA_CASES[n], d) for n in HALF_GRAD_CASES for d in HALF_DTYPES
        },
        "finite_differences": _finite_differences(),
        "lse": _lse_error(),
        "large": _large_scores(),
        "nonfinite": _nonfinite(),
        "handed": _handed_to_the_kernels(),
        "refusals": _refusals(),
        "empty": _empty(),
        "split_dot": _split_dot(),
    }


# the child: python lib/tests/kernels/test_triton_flash.py, with TRITON_INTERPRET=1
if __name__ == "__main__":
    print(json.dumps(run_in_interpreter()))
    sys.exit(0)


# ------------------------------------------------------------------ the tests


@pytest.fixture(scope="module")
def measured():
    """Run the child once for the whole module; its JSON is the measurements."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=1200
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_kernel_ran_in_the_interpreter(measured):
    assert measured["interpreted"] is True


@pytest.mark.parametrize(
    ("name", "dtype"), FORWARD_CASES, ids=[f"{n}-{d}" for n, d in FORWARD_CASES]
)
def test_forward_within_twice_pytorchs_error(measured, name, dtype):
    case = measured["forward"][f"{name}|{dtype}"]
    assert case["dtype"] == dtype
    assert case["passed"], case


@pytest.mark.parametrize(
    ("name", "dtype"), HALF_FORWARD_CASES, ids=[f"{n}-{d}" for n, d in HALF_FORWARD_CASES]
)
def test_forward_for_a_backward_pass_within_twice_pytorchs_error(measured, name, dtype):
    """With autograd the forward kernel takes its 16-bit weights as two parts: the rule holds
    for that output too."""
    case = measured["forward_for_backward"][f"{name}|{dtype}"]
    assert case["dtype"] == dtype
    assert case["shape"] == measured["forward"][f"{name}|{dtype}"]["shape"]
    assert case["passed"], case


@pytest.mark.parametrize("name", EXTRA_CASES)
def test_padding_2d_and_broadcast(measured, name):
    case = measured["extra"][name]
    q_shape, k_shape, v_shape, kw = EXTRA_CASES[name]
    others = () if kw.get("enable_gqa") else (k_shape[:-2], v_shape[:-2])  # heads by group
    batch = list(__import__("numpy").broadcast_shapes(q_shape[:-2], *others))
    assert case["shape"] == [*batch, q_shape[-2], v_shape[-1]]
    assert case["passed"], case


@pytest.mark.parametrize(("name", "dtype"), GRAD_CASES, ids=[f"{n}-{d}" for n, d in GRAD_CASES])
def test_gradients_within_twice_pytorchs_error(measured, name, dtype):
    shapes = {n: rest for n, *rest in SHAPES}[name]
    for grad, case in measured["gradients"][f"{name}|{dtype}"].items():
        assert case["dtype"] == dtype, grad
        want = shapes[("dq", "dk", "dv").index(grad)]
        assert case["shape"] == list(want), (grad, case)
        assert case["passed"], (grad, case)


@pytest.mark.parametrize("name", EXTRA_CASES)
def test_gradients_with_padding_2d_and_broadcast(measured, name):
    for grad, case in measured["extra_gradients"][name].items():
        want = EXTRA_CASES[name][("dq", "dk", "dv").index(grad)]
        assert case["shape"] == list(want), (grad, case)
        assert case["passed"], (grad, case)


@pytest.mark.parametrize(("name", "dtype"), HALF_GRAD_PARAMS)
def test_half_gradients_through_broadcast_batches(measured, name, dtype):
    for grad, case in measured["half_gradients"][f"{name}|{dtype}"].items():
        want = EXTRA_CASES[name][("dq", "dk", "dv").index(grad)]
        assert case["shape"] == list(want) and case["dtype"] == dtype, (grad, case)
        assert case["passed"], (grad, case)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", ["10000", "1e+09", "1e+38"])
def test_a_padding_rows_equal_large_scores_give_weights_of_one_over_s(measured, size, dtype):
    """Every score -1e4, -1e9 or -1e38: the backward pass recomputes weights 1/S, not 1
    (the log-sum-exp kept as the row's maximum and log2 of its total, which do not cancel)."""
    case = measured["large"][f"equal {size}|{dtype}"]
    import torch

    eps = torch.finfo(getattr(torch, dtype)).eps
    assert case["out"] <= 2 * eps * case["out_size"], case
    assert case["dv"] <= 2 * eps * case["dv_size"], case


@pytest.mark.parametrize("dtype", DTYPES)
def test_partly_large_scores_meet_the_2x_rule(measured, dtype):
    for case in measured["large"][f"partly|{dtype}"]:
        assert case["passed"], case


def test_scores_in_the_hundreds_cost_no_more_than_pytorchs_error(measured):
    hundreds = measured["large"]["hundreds"]
    assert hundreds["peak"] > 200  # the scores are as large as the test says
    assert max(hundreds["median"]) <= 2.0, hundreds


NONFINITE = [
    "value nan, diagonal tile",
    "value inf, diagonal tile",
    "key nan, diagonal tile",
    "key -inf, diagonal tile",
    "key nan, after every query",
    "value nan, after every query",
    "query nan",
    "query inf",
]


@pytest.mark.parametrize(("dtype", "bits"), [("float16", 22), ("bfloat16", 16)])
def test_split_dot_keeps_the_weights_to_float16_22_bits_and_bfloat16_16(measured, dtype, bits):
    """Two 16-bit parts hold a float32 weight to about 22 (float16) or 16 (bfloat16)
    significant bits, where one rounding holds 11 or 8; a weight float16 cannot hold gives
    an infinite product, as one rounding does, not NaN."""
    once, split = (measured["split_dot"][f"{dtype}|{parts}"] for parts in (1, 2))
    # 16 products of |x| < 1 and |b| < 5: each part's rounding costs at most 2^-bits relative
    assert split["error"] <= 16 * 5 * 2.0**-bits, split
    assert once["error"] > 2.0 ** (bits // 2 - 4) * split["error"], (once, split)
    if dtype == "float16":
        assert split["overflow"] and all(v in ("inf", "-inf") for v in split["overflow"]), split
        assert once["overflow"] == split["overflow"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NONFINITE)
def test_non_finite_inputs_follow_the_rule_as_the_reference_path_does(measured, name, dtype):
    """attention_lib.nonfinite's rule: hidden entries are never read, seen ones reach what
    they reach; the kernels' outputs and gradients match the reference path's (to 1e-4 in
    float32; in 16 bits, where both round once, to two units of the dtype's eps at the
    larger of 1 and the largest value, with the weights' second 16-bit parts in `seen_dot`)."""
    import torch

    records = measured["nonfinite"][name if dtype == "float32" else f"{name}|{dtype}"]
    for label, record in records.items():
        assert record["same_non_finite"], (label, record)
        if dtype == "float32":
            assert record["error"] < 1e-4, (label, record)
        else:
            eps = torch.finfo(getattr(torch, dtype)).eps
            assert record["error"] <= 2 * eps * max(1.0, record["size"]), (label, record)
    hidden = "after every query" in name
    assert (records["out"]["non_finite"] == 0) == hidden


def test_no_keys_give_zeros_whatever_the_query(measured):
    assert measured["nonfinite"]["no keys, nan query"] is True


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_gradients_are_the_derivative_of_the_forward_pass(measured, name):
    case = measured["finite_differences"][name]
    assert abs(case["numeric"]) > 0.1  # a direction the output depends on
    assert case["analytic"] == pytest.approx(case["numeric"], rel=2e-3)


def test_the_kernel_writes_the_row_maximum_and_the_log_total(measured):
    lse = measured["lse"]
    assert lse["shape"] == [2, 1, 2, 29] and lse["dtype"] == "torch.float32"
    assert lse["lse"] < 1e-5 and lse["max"] < 1e-5


@pytest.mark.parametrize("case", ["grouped", "broadcast"])
def test_kernels_take_the_callers_tensors_without_copies(measured, case):
    handed = measured["handed"][case]
    given = handed["given"]
    kernels = [launch["kernel"] for launch in handed["launches"]]
    assert kernels == ["attention_forward", "attention_delta", "attention_dkdv", "attention_dq"]
    forward, delta, dkdv, dq = handed["launches"]
    # the forward pass reads q, k, v where they are, in bfloat16, with their strides
    assert forward["tensors"][:3] == [given["q"], given["k"], given["v"]]
    # the backward pass reads them and the output's gradient the same way
    assert dkdv["tensors"][:4] == [given["q"], given["k"], given["v"], given["do"]]
    assert dq["tensors"][:4] == [given["q"], given["k"], given["v"], given["do"]]
    assert delta["tensors"][1] == given["do"]
    # shared key/value heads: dK and dV have their shape, summed over the group in the kernel
    dk, dv = dkdv["tensors"][7:9]
    assert dk[1] == given["k"][1] and dv[1] == given["v"][1]
    assert handed["grad_shapes"] == [given["q"][1], given["k"][1], given["v"][1]]
    # the row statistics (max, log2 total) and delta are (B, H, L) float32
    for stats in forward["tensors"][4:6]:
        assert stats[1:] == [[2, 4, 24], [96, 24, 1], "torch.float32"]


def test_without_gradients_only_the_forward_kernel_runs(measured):
    assert [launch["kernel"] for launch in measured["handed"]["no_grad"]] == ["attention_forward"]


def test_empty_lengths_give_zeros(measured):
    same = {"zeros": True, "grad_zeros": True}
    assert measured["empty"] == {
        "L0": {"shape": [2, 0, 16], **same},
        "S0": {"shape": [2, 4, 16], **same},
    }


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("mask", r"ValueError: backend='triton' does not take attn_mask .*backend='tiled'"),
        (
            "float64",
            r"ValueError: backend='triton' takes float16, bfloat16 or float32, got torch\.float64",
        ),
        ("width", r"ValueError: backend='triton' takes head widths from 1 to 256, got E = 300"),
        (
            "block",
            r"ValueError: backend='triton' needs block_q to be a power of two .* got 24",
        ),
        ("gqa heads", r"ValueError: backend='triton' reads key and value heads with one group"),
        ("scale", r"ValueError: backend='triton' takes a finite scale, got scale = nan"),
    ],
)
def test_refusals_name_what_is_not_handled(measured, what, message):
    assert re.search(message, measured["refusals"][what]), measured["refusals"][what]


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
    reason="this process runs Triton's interpreter, so CPU tensors are accepted",
)
def test_cpu_tensors_without_the_interpreter_are_refused():
    import torch

    import attention_lib as al

    q = torch.randn(2, 8, 16)
    message = r"needs CUDA tensors, got tensors on cpu.*TRITON_INTERPRET=1"
    with pytest.raises(RuntimeError, match=message):
        al.flash_attention(q, q, q, backend="triton")
    # "auto" does not try: CPU tensors take the tiled path
    expected = al.scaled_dot_product_attention(q, q, q)
    assert torch.allclose(al.flash_attention(q, q, q, backend="auto"), expected, atol=1e-6)
