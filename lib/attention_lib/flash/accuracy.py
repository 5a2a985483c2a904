"""FlashAttention's accuracy rule, applied to our paths: at most twice PyTorch's own error.

A low-precision kernel cannot match an exact answer to the last digit;
FlashAttention's tests ask instead that its error against a reference be
at most twice the error PyTorch's own attention makes in the same dtype.
Their reference is attention computed in float32 from the same inputs
(``attention_ref(..., upcast=True)`` in its test suite); ours is the
stricter float64 variant: torch's ``scaled_dot_product_attention``
in float64 with its math backend (forward and, through autograd,
gradients), PyTorch's error is that of the same function on the
low-precision inputs (the backend PyTorch picks), and ours is
`flash_attention` with the ``backend`` and tiles asked for.

The reference is the math backend because the others recompute weights
from a log-sum-exp that cancels at large scores: on the CPU (torch 2.13)
float64 SDPA whose rows have S equal scores of -1e38 gives value gradients
S times too large (weights of 1 instead of 1/S), the cancellation the
Triton kernels avoid.

A floor keeps the rule from demanding more than rounding allows where
PyTorch happens to be exact or nearly so: a tenth of an ulp at 1 for 16-bit
dtypes, and four ulps of the largest reference value for float32 and
float64, where both errors are a few ulps and the order of summation
decides which is smaller. Used by the interpreter tests and the GPU check (scripts/gpu_check.py).

The rule compares two maxima, so it needs a tensor whose maximum error is a
stable statistic: many independent rows. A gradient's float32 error is
mostly FlashAttention's D = rowsum(dO * O), taken from an O that carries its
own rounding; where a row puts nearly all its weight on one key, dS =
P (dP - D) is a small difference of two large numbers, and that rounding is
amplified. PyTorch's kernel and any other float32 path round O
independently, so on a few small heads the rule compares one draw with
another, and either side can be the unlucky one
(``python benchmarks/rule_draws.py`` measures how often). The maximum is
taken where the conditioning is worst, so it takes many rows, not only many
heads, to make it a stable statistic: a check holds a problem of
`STABLE_ROWS` query rows or more, in all its heads, to the rule
(`stable_batch`).

Importing this module imports nothing heavy; torch loads when a check runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "STABLE_ROWS",
    "Check",
    "floor",
    "forward_check",
    "gradient_checks",
    "reference",
    "stable_batch",
]

#: query rows (over all heads) a problem needs for the rule's maxima to be stable statistics
STABLE_ROWS = 512


def stable_batch(batch: tuple[int, ...], length: int) -> tuple[int, ...]:
    """``batch`` with its first dimension grown so that its heads hold at least `STABLE_ROWS`
    query rows of ``length``."""
    rest = 1
    for n in batch[1:]:
        rest *= n
    rows_a_step = max(rest * length, 1)
    return (max(batch[0], -(-STABLE_ROWS // rows_a_step)), *batch[1:])


def floor(dtype: str, magnitude: float) -> float:
    """The error allowed on top of twice PyTorch's, for ``dtype`` and max |reference|."""
    import torch

    eps = torch.finfo(getattr(torch, dtype)).eps
    return 4 * eps * magnitude if dtype in ("float32", "float64") else 0.1 * eps


@dataclass(frozen=True)
class Check:
    """One comparison: our max |error| and PyTorch's, against the same float64 reference."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    ours: float
    pytorch: float
    magnitude: float  # max |reference|

    @property
    def tolerance(self) -> float:
        return 2 * self.pytorch + floor(self.dtype, self.magnitude)

    @property
    def passed(self) -> bool:
        return self.ours <= self.tolerance

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tolerance": self.tolerance, "passed": self.passed}


def _split(kw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(our keyword arguments, PyTorch's): block sizes, backend and tile kernel are ours alone."""
    ours_only = ("block_q", "block_k", "backend", "tile_kernel")
    return dict(kw), {n: x for n, x in kw.items() if n not in ours_only}


def _name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def reference(*args: Any, **kw: Any) -> Any:
    """torch's SDPA in float64 with the math backend: the reference."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(*(x.double() for x in args), **kw)


def forward_check(
    name: str, query: Any, key: Any, value: Any, differentiable: bool = False, **kw: Any
) -> Check:
    """Our output's max |error| against float64, and PyTorch's in the inputs' dtype.

    ``kw``: flash_attention's keywords (is_causal, scale, enable_gqa, block_q,
    block_k, backend). ``differentiable``: our output is computed as one
    that autograd will differentiate (inputs requiring grad, grad mode on),
    which the Triton path computes differently (`flash_forward`'s
    ``for_backward``); else under ``torch.no_grad()``.
    """
    import torch
    import torch.nn.functional as F

    from .dispatch import flash_attention

    ours_kw, theirs_kw = _split(kw)
    if differentiable:
        leaves = [x.detach().requires_grad_() for x in (query, key, value)]
        with torch.enable_grad():
            out = flash_attention(*leaves, **ours_kw).detach()
    with torch.no_grad():
        if not differentiable:
            out = flash_attention(query, key, value, **ours_kw)
        exact = reference(query, key, value, **theirs_kw)
        theirs = F.scaled_dot_product_attention(query, key, value, **theirs_kw)
    if out.dtype != query.dtype or out.shape != exact.shape:
        raise AssertionError(
            f"{name}: output {tuple(out.shape)} {out.dtype}, expected "
            f"{tuple(exact.shape)} {query.dtype}"
        )
    return Check(
        name,
        _name(out.dtype),
        tuple(out.shape),
        (out.double() - exact).abs().max().item(),
        (theirs.double() - exact).abs().max().item(),
        exact.abs().max().item(),
    )


def gradient_checks(
    name: str, query: Any, key: Any, value: Any, grad_out: Any, **kw: Any
) -> list[Check]:
    """Max |error| of dq, dk, dv (ours and PyTorch's) against float64 autograd of the reference.

    ``grad_out`` has the output's shape and the inputs' dtype; ``kw`` as
    `forward_check`. Each check's shape is its gradient's, which must equal
    its input's.
    """
    import torch
    import torch.nn.functional as F

    from .dispatch import flash_attention

    ours_kw, theirs_kw = _split(kw)

    def grads(fn: Any, inputs: list[Any], upstream: Any) -> list[Any]:
        leaves = [x.detach().requires_grad_() for x in inputs]
        with torch.enable_grad():
            fn(*leaves).backward(upstream)
        return [x.grad for x in leaves]

    inputs = [query, key, value]
    ours = grads(lambda *a: flash_attention(*a, **ours_kw), inputs, grad_out)
    want = grads(
        lambda *a: reference(*a, **theirs_kw), [x.double() for x in inputs], grad_out.double()
    )
    theirs = grads(lambda *a: F.scaled_dot_product_attention(*a, **theirs_kw), inputs, grad_out)
    checks = []
    for label, x, o, w, t in zip(("dq", "dk", "dv"), inputs, ours, want, theirs, strict=True):
        if o.dtype != x.dtype or o.shape != x.shape:
            raise AssertionError(
                f"{name} {label}: gradient {tuple(o.shape)} {o.dtype}, expected "
                f"{tuple(x.shape)} {x.dtype}"
            )
        checks.append(
            Check(
                f"{name} {label}",
                _name(o.dtype),
                tuple(o.shape),
                (o.double() - w).abs().max().item(),
                (t.double() - w).abs().max().item(),
                w.abs().max().item(),
            )
        )
    return checks
