"""What developers ask next, each answered by running it (notebook 03).

1. `all_masked_rows`: a row whose keys are all masked. A naive softmax
   (``masked_fill(-inf)`` then ``softmax``) gives NaN; PyTorch's SDPA and this
   library's paths give zeros.
2. `half_precision_masks`: float16 and large negative masks. -1e9 does not
   exist in float16 (largest finite magnitude 65504): it becomes -inf. A
   *finite* mask (``torch.finfo(dtype).min``) never gives a masked row zeros:
   every score moves by the same amount, so a row with all keys masked either
   attends as if nothing were masked or spreads its weight evenly.
3. `causal_alignment` and `kv_cache_decode`: top-left versus bottom-right
   causal masks when queries != keys. ``is_causal`` aligns the mask top-left
   (query i sees keys 0..i); a decode step's new query is the *last*
   position and must see every cached key, which is bottom-right
   (``torch.nn.attention.bias.causal_lower_right``; for this library, a
   boolean ``attn_mask`` from `causal_mask_for`).
4. `sdpa_backends`: which of PyTorch's SDPA backends run on CPU tensors,
   forcing each with ``torch.nn.attention.sdpa_kernel``, and the error a
   backend that cannot run gives.

Everything runs on CPU tensors with seeded inputs, so what it reports is
the same on every machine with this PyTorch.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from ..core import scaled_dot_product_attention
from ..flash import flash_attention
from .corpus import parse
from .tiny_model import TinyTransformer, causal_mask_for, inference, load_model

__all__ = [
    "BACKENDS",
    "BOUNDS",
    "AllMaskedRows",
    "BackendResult",
    "DecodeCheck",
    "MaskCase",
    "all_masked_rows",
    "causal_alignment",
    "format_backends",
    "format_mask",
    "format_mask_cases",
    "half_precision_masks",
    "kv_cache_decode",
    "naive_attention",
    "run_with_backend",
    "sdpa_backends",
]


def _inputs(
    length: int = 3, keys: int = 5, width: int = 4, value_width: int = 2, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, length, width, generator=gen)  # (1, 1, L, E)
    k = torch.randn(1, 1, keys, width, generator=gen)  # (1, 1, S, E)
    v = torch.randn(1, 1, keys, value_width, generator=gen)  # (1, 1, S, Ev)
    return q, k, v


def naive_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention as often written by hand: masked_fill(-inf), softmax, mix. (weights, out).

    q (..., L, E), k (..., S, E), v (..., S, Ev), keep (L, S) boolean. A row
    with every key masked is all -inf, and softmax of that is 0/0 = NaN.
    """
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (..., L, S)
    scores = scores.masked_fill(~keep, float("-inf"))  # (..., L, S)
    weights = torch.softmax(scores, dim=-1)  # (..., L, S)
    return weights, weights @ v  # (..., L, S), (..., L, Ev)


# -- 1. rows with every key masked ------------------------------------------------------


@dataclass(frozen=True)
class AllMaskedRows:
    """Row ``row`` of a (3 x 5) problem has every key masked; what each path gives there.

    ``naive_weights`` is the hand-written softmax's weight row; the others
    are output rows (Ev numbers) of the naive mix, PyTorch's SDPA, the
    reference path and the tiled path; ``others_agree`` is the largest
    difference between them on the rows that are not masked.
    """

    row: int
    naive_weights: torch.Tensor
    naive: torch.Tensor
    torch_sdpa: torch.Tensor
    library: torch.Tensor
    flash: torch.Tensor
    others_agree: float

    def summary(self) -> str:
        def show(x: torch.Tensor) -> str:
            return "[" + ", ".join("nan" if math.isnan(v) else f"{v:g}" for v in x.tolist()) + "]"

        lines = [
            f"row {self.row}: every key masked",
            f"  naive softmax, its weights      {show(self.naive_weights)}",
            f"  naive softmax, its output       {show(self.naive)}",
            f"  torch F.scaled_dot_product_attention  {show(self.torch_sdpa)}",
            f"  attention_lib reference path          {show(self.library)}",
            f"  attention_lib.flash_attention         {show(self.flash)}",
            f"the other rows: the four agree, {_bound(self.others_agree)}",
        ]
        return "\n".join(lines)


#: the agreement bounds printed, by dtype: stated, then checked (never read off a measurement)
BOUNDS = {
    torch.float64: 1e-12,
    torch.float32: 1e-5,
    torch.float16: 1e-2,
    torch.bfloat16: 5e-2,
}


def _bound(x: float, dtype: torch.dtype = torch.float32, *, same_path: bool = False) -> str:
    """'within 1e-05' (the dtype's stated bound, when it holds) or the value.

    'identical' only for ``same_path`` (a computation compared with itself, which is
    0 on every machine): two different paths that happen to round alike on one CPU
    may not on another, so for them the bound is printed even when x is 0.
    """
    if same_path and x == 0:
        return "identical"
    if x <= BOUNDS[dtype]:
        return f"within {BOUNDS[dtype]:.0e}"
    return f"{x:.2e}, MORE than the {BOUNDS[dtype]:.0e} stated for {dtype}"


def all_masked_rows(row: int = 1, seed: int = 0) -> AllMaskedRows:
    """Attention over 3 queries and 5 keys with every key of query ``row`` masked."""
    q, k, v = _inputs(seed=seed)  # (1, 1, 3, 4), (1, 1, 5, 4), (1, 1, 5, 2)
    keep = torch.ones(3, 5, dtype=torch.bool)  # (L, S)
    if not 0 <= row < 3:
        raise ValueError(f"row must be 0, 1 or 2, got {row}")
    keep[row] = False
    weights, naive = naive_attention(q, k, v, keep)  # (1, 1, 3, 5), (1, 1, 3, 2)
    outs = {
        "torch": F.scaled_dot_product_attention(q, k, v, attn_mask=keep),  # (1, 1, 3, 2)
        "library": scaled_dot_product_attention(q, k, v, attn_mask=keep),
        "flash": flash_attention(q, k, v, attn_mask=keep, block_q=2, block_k=2),
    }
    others = [i for i in range(3) if i != row]
    rest = [o[..., others, :] for o in (naive, *outs.values())]
    agree = max(float((a - rest[0]).abs().max()) for a in rest[1:])
    return AllMaskedRows(
        row,
        weights[0, 0, row],
        naive[0, 0, row],
        outs["torch"][0, 0, row],
        outs["library"][0, 0, row],
        outs["flash"][0, 0, row],
        agree,
    )


# -- 2. float16 and large negative masks ------------------------------------------------


@dataclass(frozen=True)
class MaskCase:
    """One way of writing "masked" and what it does in a given dtype.

    ``stored`` is the mask value as the dtype holds it; ``masked_weight``
    the largest weight any masked key gets in a row that still has visible
    keys; ``full_row`` what a row with every key masked becomes: "zeros",
    "as if unmasked" (its output equals the unmasked output to
    ``full_row_error``), "uniform" (equal weights: the mean of the values)
    or "other". Measured on PyTorch's SDPA and on this library's
    reference path; ``paths_agree`` says they gave the same answer.
    """

    name: str
    dtype: str
    stored: str
    masked_weight: float
    full_row: str
    full_row_error: float
    tolerance: float
    paths_agree: bool


def _float_mask(value: float, dtype: torch.dtype, keep: torch.Tensor) -> torch.Tensor:
    mask = torch.zeros(keep.shape, dtype=dtype)  # (L, S)
    mask[~keep] = value  # stored in dtype: -1e9 becomes -inf in float16
    return mask


def _classify(
    row: torch.Tensor, unmasked: torch.Tensor, mean_value: torch.Tensor, tol: float
) -> tuple[str, float]:
    row, unmasked, mean_value = row.double(), unmasked.double(), mean_value.double()
    if torch.all(row == 0):
        return "zeros", 0.0
    as_if = float((row - unmasked).abs().max())
    if as_if <= tol:
        return "as if unmasked", as_if
    uniform = float((row - mean_value).abs().max())
    if uniform <= tol:
        return "uniform", uniform
    return "other", min(as_if, uniform)


def half_precision_masks(seed: int = 0) -> list[MaskCase]:
    """Four ways to mask, in float16 and float32, on a (3 x 5) problem: row 0 masks two
    keys, row 1 all five. See `MaskCase` for what is recorded.

    The cases: a boolean mask; a float mask of -inf; of -1e9 (stored as -inf
    in float16); and of ``torch.finfo(dtype).min``. Both paths compute
    float16 in float32 (PyTorch's CPU path too), so a finite mask of -65504
    shifts a fully masked row's scores by a constant, which softmax ignores.
    """
    q32, k32, v32 = _inputs(seed=seed)
    keep = torch.ones(3, 5, dtype=torch.bool)  # (L, S)
    keep[0, 3:] = False
    keep[1] = False
    cases = []
    for dtype in (torch.float16, torch.float32):
        q, k, v = q32.to(dtype), k32.to(dtype), v32.to(dtype)
        unmasked = F.scaled_dot_product_attention(q, k, v)[0, 0, 1]  # (Ev,)
        mean_value = v[0, 0].float().mean(dim=0)  # (Ev,)
        tol = 4 * float(torch.finfo(dtype).eps)
        masks = {
            "boolean False": keep,
            "float -inf": _float_mask(float("-inf"), dtype, keep),
            "float -1e9": _float_mask(-1e9, dtype, keep),
            f"finfo({str(dtype)[6:]}).min": _float_mask(torch.finfo(dtype).min, dtype, keep),
        }
        for name, mask in masks.items():
            stored = "False" if mask.dtype == torch.bool else f"{float(mask[1, 0]):g}"
            results = []
            for path in (F.scaled_dot_product_attention, scaled_dot_product_attention):
                out = path(q, k, v, attn_mask=mask)[0, 0]  # (3, Ev)
                results.append(_classify(out[1], unmasked, mean_value, tol))
            weights = _weights_with(q, k, mask)  # (3, 5)
            cases.append(
                MaskCase(
                    name,
                    str(dtype)[6:],
                    stored,
                    float(weights[0, 3:].max()),
                    results[0][0],
                    results[0][1],
                    tol,
                    results[0][0] == results[1][0],
                )
            )
    return cases


def _weights_with(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The reference path's weights (L, S) for one mask, in float32."""
    from ..core import attention_weights

    return attention_weights(q, k, attn_mask=mask)[0, 0].float()  # (L, S)


def format_mask_cases(cases: list[MaskCase]) -> str:
    """`half_precision_masks` as a table."""
    lines = [
        f"{'mask':<19} {'dtype':<8} {'stored as':>10} {'weight on masked keys':>22}  "
        "row with every key masked"
    ]
    for c in cases:
        full = c.full_row
        if full in ("as if unmasked", "uniform"):  # a bound: whether it is 0 varies by CPU
            full += f" (within {c.tolerance:.0e})"
        if not c.paths_agree:
            full += "  [PyTorch and the library differ]"
        lines.append(f"{c.name:<19} {c.dtype:<8} {c.stored:>10} {c.masked_weight:>22.3g}  {full}")
    return "\n".join(lines)


# -- 3. top-left and bottom-right causal masks --------------------------------------------


def format_mask(keep: Any) -> str:
    """A boolean (L, S) mask as rows of 1 (may look) and . (masked)."""
    return "\n".join(" ".join("1" if x else "." for x in row) for row in keep.tolist())


def causal_alignment(queries: int = 2, keys: int = 5) -> dict[str, Any]:
    """Both causal alignments for L queries and S keys, ours next to PyTorch's.

    Returns {"top_left": (L, S) bool, "bottom_right": (L, S) bool,
    "match_torch": True if `causal_mask_for` equals PyTorch's
    ``causal_upper_left`` and ``causal_lower_right`` materialised}.
    """
    ours = {a: causal_mask_for(queries, keys, a) for a in ("top_left", "bottom_right")}
    theirs = {
        "top_left": causal_upper_left(queries, keys)._materialize(),
        "bottom_right": causal_lower_right(queries, keys)._materialize(),
    }
    same = all(torch.equal(ours[a], theirs[a]) for a in ours)
    return {**ours, "match_torch": same}


@dataclass(frozen=True)
class DecodeCheck:
    """A sentence run whole, then again as a prefix plus new tokens through a KV cache.

    ``errors`` maps each alignment to the largest difference between the new
    tokens' logits and the whole run's; ``predicted`` maps it to the words
    the cached run guesses next at those positions; ``expected`` are the
    whole run's guesses.
    """

    words: tuple[str, ...]
    prefix: int
    errors: dict[str, float]
    predicted: dict[str, list[str]]
    expected: list[str]

    def summary(self, bound: float = 1e-4) -> str:
        """What each alignment gave, as facts that hold on any machine: the logits within
        ``bound`` of the whole run or not, and whether the guessed words are the same."""
        cached = " ".join(self.words[: self.prefix])
        new = " ".join(self.words[self.prefix :])
        lines = [f"cached: {cached!r}; new queries: {new!r}"]
        for alignment, error in self.errors.items():
            same = "within" if error < bound else "NOT within"
            words = "the same" if self.predicted[alignment] == self.expected else "different"
            lines.append(
                f"  {alignment:<12} logits {same} {bound:.0e} of the whole run; "
                f"next-word guesses {words}"
            )
        return "\n".join(lines)


def kv_cache_decode(
    sentence: str = "the dog was next to the bells and then it barked",
    prefix: int | None = None,
    model: TinyTransformer | None = None,
) -> DecodeCheck:
    """Decode the trained model with a KV cache, with each causal alignment.

    The sentence's tokens (without the final full stop) run through
    `TinyTransformer.extend` twice: first the first ``prefix`` tokens
    (default: everything before the pronoun or query word), caching their
    keys and values, then the rest as new queries against every cached key.
    Bottom-right alignment reproduces the whole-sentence logits; top-left
    makes the new tokens look at the start of the sentence instead.
    """
    from .corpus import build_corpus

    model = load_model() if model is None else model
    corpus = build_corpus()
    parsed = parse(sentence)
    n = len(parsed.words) - 1  # the full stop's next word is nothing to predict
    tokens = torch.from_numpy(corpus.encode([parsed]))[:, :n]  # (1, n)
    prefix = parsed.query if prefix is None else prefix
    if not 1 <= prefix < n:
        raise ValueError(f"prefix must be in 1..{n - 1} for a sentence of {n} tokens")
    with inference():
        whole = model(tokens)[:, prefix:]  # (1, n - prefix, V)
    errors, predicted = {}, {}
    for alignment in ("bottom_right", "top_left"):
        with inference():
            _, cache = model.extend(tokens[:, :prefix], None, alignment)
            new, _ = model.extend(tokens[:, prefix:], cache, alignment)  # (1, n - prefix, V)
        errors[alignment] = float((new - whole).abs().max())
        predicted[alignment] = corpus.decode(new[0].argmax(dim=-1))
    words = tuple(corpus.decode(tokens[0]))
    return DecodeCheck(words, prefix, errors, predicted, corpus.decode(whole[0].argmax(dim=-1)))


# -- 4. choosing and checking an SDPA backend ------------------------------------------

#: the backends a developer can ask ``sdpa_kernel`` for (ERROR and OVERRIDEABLE are not kernels)
BACKENDS = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


@dataclass(frozen=True)
class BackendResult:
    """What forcing one backend did: ``ran``, or the error and PyTorch's stated reasons.

    ``difference`` is the largest difference from the MATH backend's output
    when it ran (None otherwise), in ``dtype``.
    """

    backend: str
    dtype: torch.dtype
    ran: bool
    error: str
    reasons: tuple[str, ...]
    difference: float | None


def _reasons(caught: list) -> tuple[str, ...]:
    """PyTorch's warnings, without the build path it appends ("Triggered internally at")."""
    texts = [str(w.message).split("(Triggered internally")[0].strip() for w in caught]
    return tuple(t for t in texts if t and t != "Flash attention kernel not used because:")


def run_with_backend(backend: str, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``F.scaled_dot_product_attention(*args, **kwargs)`` with only ``backend`` allowed.

    Raises ValueError for a name not in `BACKENDS`, and PyTorch's
    RuntimeError when that backend cannot run the call.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    with sdpa_kernel(getattr(SDPBackend, backend)):
        return F.scaled_dot_product_attention(*args, **kwargs)


def sdpa_backends(
    dtype: torch.dtype = torch.float32, dropout_p: float = 0.0, value_width: int = 8, **kwargs: Any
) -> list[BackendResult]:
    """Force each of `BACKENDS` in turn on one CPU call and record what happens.

    The call: query, key (1, 2, 6, 8), value (1, 2, 6, ``value_width``) in
    ``dtype``, ``dropout_p`` and any further SDPA keyword (``is_causal``,
    ``attn_mask``). Dropout is seeded, so two backends that both run it can
    be compared.
    """
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 6, 8, generator=gen, dtype=dtype)  # (1, 2, 6, 8)
    k = torch.randn(1, 2, 6, 8, generator=gen, dtype=dtype)  # (1, 2, 6, 8)
    v = torch.randn(1, 2, 6, value_width, generator=gen, dtype=dtype)  # (1, 2, 6, Ev)
    results, reference = [], None
    for backend in BACKENDS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.manual_seed(0)
            try:
                out = run_with_backend(backend, q, k, v, dropout_p=dropout_p, **kwargs)
            except RuntimeError as err:
                message = str(err).strip().splitlines()[0]
                results.append(
                    BackendResult(backend, dtype, False, message, _reasons(caught), None)
                )
                continue
        reference = out if reference is None else reference
        diff = float((out.double() - reference.double()).abs().max())
        results.append(BackendResult(backend, dtype, True, "", (), diff))
    return results


def format_backends(results: list[BackendResult]) -> str:
    lines = []
    for r in results:
        if r.ran:
            agree = _bound(r.difference, r.dtype, same_path=r.backend == "MATH")
            lines.append(f"{r.backend:<20} ran (agrees with MATH: {agree})")
        else:
            lines.append(f"{r.backend:<20} RuntimeError: {r.error}")
            lines += [f"{'':<22}because: {reason}" for reason in r.reasons]
    return "\n".join(lines)
