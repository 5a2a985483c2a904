"""Every exercise's solution: its code, and the explanation that goes with it.

Kept here, not in the notebooks, so that a page shows no answer before the
learner tries: each notebook hands them to a solution gate
(`attention_lib.explorers.reveal.SolutionGate`), which shows one after a
passing attempt or on request. The tests run every solution through its
checker.

- `SOLUTIONS`: notebook 02's four (``under_divided``, ``my_attention``,
  ``combined_mask``, ``decode_step``).
- `FLASH_SOLUTIONS`: notebook 07's four: ``online_update`` (exercise 1,
  numpy), ``flash_forward`` (exercise 2, numpy; it calls
  ``online_update``), ``flash_backward`` (exercise 3, numpy) and
  ``key_block`` (exercise 4, the body of the Triton kernel's key loop,
  `attention_lib.lessons.exercises.triton_skeleton`; Triton code, run only by
  the interpreter in a child process).

`solution_scope(name)` is the namespace one of notebook 07's solutions runs
in: numpy, math, and the earlier solutions it builds on;
`solution_function(name)` the function it defines.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import Solution

__all__ = ["FLASH_SOLUTIONS", "SOLUTIONS", "solution_function", "solution_scope"]

SOLUTIONS: dict[str, Solution] = {
    "under_divided": Solution(
        "under_divided",
        "def under_divided(d):\n    return d**-0.25  # divides by d^(1/4), less than sqrt(d)\n",
        "Dividing by d^(1/4) under-corrects: the logits' spread becomes d^(1/2) / d^(1/4) = "
        "d^(1/4), which still grows, so the winner's share climbs toward one. Dividing by d "
        "over-corrects the other way (the spread 1/sqrt(d) shrinks and the weights slide toward "
        "1/6). sqrt(d) is the one power of d that cancels the growth, so it alone holds the "
        "spread, and with it the weights, level as d changes. It cancels it exactly (in "
        "expectation) only for independent components of mean zero and variance one: means "
        "mu_q and mu_k add d(mu_q^2 + mu_k^2) to the variance.",
    ),
    "my_attention": Solution(
        "my_attention",
        "def my_attention(q, k, v, mask=None):\n"
        "    scores = q @ k.T / math.sqrt(q.shape[-1])  # (L, S)\n"
        "    if mask is not None:\n"
        "        scores = np.where(mask, scores, -np.inf)  # masked keys get no weight\n"
        "    return softmax(scores, axis=-1) @ v  # (L, dv)\n",
        "Scale the scores by 1/sqrt(d) where d is the query's last dimension, mask the scores "
        "(not the weights) with -inf, and take the softmax over the last axis, the keys. Now "
        "break it on purpose (divide by d, drop the scale, softmax over axis=0, mask after the "
        "softmax) and read what the checker says about each.",
    ),
    "combined_mask": Solution(
        "combined_mask",
        "def combined_mask(lengths, size):\n"
        "    causal = np.tril(np.ones((size, size), dtype=bool))  # (L, L): key j <= query i\n"
        "    real = np.arange(size) < np.asarray(lengths)[:, None]  # (B, L): key j not padding\n"
        "    return causal & real[:, None, :]  # (B, L, L): both at once\n",
        "Two masks, each a comparison, combined with &: a key takes part only if it is not in "
        "the query's future and not padding. The padding mask indexes keys, so it broadcasts "
        "over the query axis (real[:, None, :]); a padding query keeps the real keys, so no "
        "row is all False (a softmax over an empty row is NaN). In PyTorch the mask goes in as "
        "attn_mask, with a head axis added, and is_causal stays False: the causal part is "
        "already in it (passing both is an error). Now break it on purpose (np.triu, |, "
        "padding on the rows) and read what the checker says.",
    ),
    "decode_step": Solution(
        "decode_step",
        "def decode_step(q, k, v, k_cache, v_cache):\n"
        "    k_cache = np.concatenate([k_cache, k])  # (S, d), S = P + T: new keys go last\n"
        "    v_cache = np.concatenate([v_cache, v])  # (S, dv)\n"
        "    T, S = len(q), len(k_cache)\n"
        "    mask = np.tril(np.ones((T, S), dtype=bool), k=S - T)  # bottom-right\n"
        "    scores = np.where(mask, q @ k_cache.T / math.sqrt(q.shape[-1]), -np.inf)  # (T, S)\n"
        "    return softmax(scores, axis=-1) @ v_cache, k_cache, v_cache\n",
        "Append first, so each new token sees its own key, then attend over the whole cache. "
        "New token i sits at position S - T + i, so its row of the (T, S) scores may reach "
        "key S - T + i: the lower triangle shifted right by S - T, aligned to the bottom-right "
        "corner. With T = 1 that row is all True and the mask changes nothing; PyTorch's "
        "is_causal=True aligns the triangle top-left instead, which would leave the new token "
        "only the first key. In PyTorch the bottom-right mask is "
        "torch.nn.attention.bias.causal_lower_right(T, S).",
    ),
}


_ONLINE_UPDATE = """\
def online_update(m, total, acc, s, v):
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # (L, 1)
    shift = np.where(m_new == -np.inf, 0.0, m_new)  # a row with no key yet: shift by 0
    p = np.exp(s - shift)  # (L, bk), every exponent <= 0
    rescale = np.exp(m - shift)  # (L, 1), exp(old max - new max) <= 1
    total_new = rescale * total + p.sum(axis=-1, keepdims=True)  # (L, 1)
    acc_new = rescale * acc + p @ v  # (L, Ev)
    return m_new, total_new, acc_new
"""

_FLASH_FORWARD = """\
def flash_forward(q, k, v, block_q, block_k, is_causal=False):
    length, keys = q.shape[0], k.shape[0]
    scale = q.shape[-1] ** -0.5  # 1 / sqrt(E)
    out = np.zeros((length, v.shape[-1]))  # (L, Ev)
    lse = np.zeros(length)  # (L,)
    for r0 in range(0, length, block_q):
        r1 = min(r0 + block_q, length)
        m = np.full((r1 - r0, 1), -np.inf)  # (bq, 1)
        total = np.zeros((r1 - r0, 1))  # (bq, 1)
        acc = np.zeros((r1 - r0, v.shape[-1]))  # (bq, Ev)
        stop = min(keys, r1) if is_causal else keys  # causal: no tile above the diagonal
        for k0 in range(0, stop, block_k):
            k1 = min(k0 + block_k, keys)  # the last block may be short
            s = q[r0:r1] @ k[k0:k1].T * scale  # (bq, bk)
            if is_causal:  # top-left: query i sees keys j <= i
                rows, cols = np.arange(r0, r1)[:, None], np.arange(k0, k1)[None, :]
                s = np.where(cols <= rows, s, -np.inf)  # (bq, bk)
            m, total, acc = online_update(m, total, acc, s, v[k0:k1])
        out[r0:r1] = acc / total  # divided once, after the last key block
        lse[r0:r1] = (m + np.log(total))[:, 0]
    return out, lse
"""

_FLASH_BACKWARD = """\
def flash_backward(q, k, v, out, lse, d_out, is_causal=False):
    group = q.shape[0] // k.shape[0]  # query heads per key/value head
    k_all = np.repeat(k, group, axis=0)  # (H, S, E): query head h reads key head h // group
    v_all = np.repeat(v, group, axis=0)  # (H, S, Ev)
    scale = q.shape[-1] ** -0.5  # 1 / sqrt(E)
    s = q @ k_all.swapaxes(-1, -2) * scale  # (H, L, S)
    if is_causal:
        s = np.where(np.tri(*s.shape[-2:], dtype=bool), s, -np.inf)  # keys j <= i
    p = np.exp(s - lse[..., None])  # (H, L, S): the forward's weights, from its lse
    delta = np.sum(d_out * out, axis=-1, keepdims=True)  # (H, L, 1) = rowsum(dP * P)
    dv = p.swapaxes(-1, -2) @ d_out  # (H, S, Ev)
    dp = d_out @ v_all.swapaxes(-1, -2)  # (H, L, S)
    ds = p * (dp - delta)  # (H, L, S), the gradient of the scaled scores
    dq = ds @ k_all * scale  # (H, L, E)
    dk = ds.swapaxes(-1, -2) @ q * scale  # (H, S, E)
    # a key/value head served `group` query heads: its gradient is the sum of theirs
    dk = dk.reshape(k.shape[0], group, *dk.shape[1:]).sum(axis=1)  # (Hkv, S, E)
    dv = dv.reshape(v.shape[0], group, *dv.shape[1:]).sum(axis=1)  # (Hkv, S, Ev)
    return dq, dk, dv
"""

_KEY_BLOCK = """\
def key_block(q, k, v, m, total, acc, rows, cols, length_k, qk_scale, IS_CAUSAL):
    s = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_M, BLOCK_N), in log2 units
    keep = cols[None, :] < length_k  # (1, BLOCK_N): keys past the end were loaded as 0
    if IS_CAUSAL:
        keep = keep & (cols[None, :] <= rows[:, None])  # (BLOCK_M, BLOCK_N): j <= i
    s = tl.where(keep, s, float("-inf"))  # (BLOCK_M, BLOCK_N)
    m_new = tl.maximum(m, tl.max(s, 1))  # (BLOCK_M,)
    p = tl.math.exp2(s - m_new[:, None])  # (BLOCK_M, BLOCK_N), 2^(s - m_new) = e^(...)
    rescale = tl.math.exp2(m - m_new)  # (BLOCK_M,), <= 1
    total = rescale * total + tl.sum(p, 1)  # (BLOCK_M,)
    acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v)  # (BLOCK_M, EV)
    return m_new, total, acc
"""

FLASH_SOLUTIONS: dict[str, Solution] = {
    "online_update": Solution(
        "online_update",
        _ONLINE_UPDATE,
        "The new maximum is the larger of the old one and the block's own. What was summed so "
        "far was measured against the old maximum, so one factor, exp(m - m_new), re-measures "
        "total and acc against the new one; then the block's terms exp(s - m_new) are added. "
        "The factor is at most one and every exponent is at most zero: the state stays "
        "finite at any size of score. One row needs care: a row whose keys so far are all masked "
        "has m_new = -inf, and shifting it by 0 keeps exp(-inf) = 0 instead of NaN.",
    ),
    "flash_forward": Solution(
        "flash_forward",
        _FLASH_FORWARD,
        "Each block of query rows starts from the empty state and walks the key blocks, the "
        "last one possibly short. With is_causal the walk stops at the block's last row (the "
        "tiles above the diagonal are never computed), and the tiles it does visit are masked "
        "inside, so that query i sees keys 0 to i whatever L and S are. acc is divided by "
        "total once, after the last key block, and lse = m + log(total) is the one number per "
        "row the backward pass needs.",
    ),
    "flash_backward": Solution(
        "flash_backward",
        _FLASH_BACKWARD,
        "P is recomputed from the forward's lse in one step, exp(S - lse), with the same mask: "
        "no second pass for the maximum and the sum. delta = rowsum(dO * O) equals "
        "rowsum(dP * P) because O = P V, and it is what turns dP into the gradient of the "
        "softmax's input, dS = P * (dP - delta). The scale enters dQ and dK once each, by the "
        "chain rule through S = scale * Q K^T. A key head that served a group of query heads "
        "gets the sum of their gradients. FlashAttention-2 (its Algorithm 2) computes the same "
        "quantities one tile at a time, key blocks outside and query blocks inside, as "
        "attention_lib/flash/torch_tiled.py does.",
    ),
    "key_block": Solution(
        "key_block",
        _KEY_BLOCK,
        "The same update as exercise 1, in base 2: the skeleton folded log2(e) into qk_scale, "
        "so exp2 of the scaled scores is exp of the natural ones. Two masks: the keys past "
        "length_k in the last block (loaded as zeros, they would score 0 and take weight), and "
        "with IS_CAUSAL the keys after each row. No row is ever all masked here (every row "
        "sees key 0 in the first block), so the shift needs no -inf guard. p is cast to the "
        "values' dtype for the second product, as FlashAttention does, since both operands of "
        "tl.dot must share a dtype (its sum is kept in float32).",
    ),
}

# the solutions whose functions a solution's code calls
_BUILDS_ON = {"flash_forward": ("online_update",)}


def solution_scope(name: str) -> dict[str, Any]:
    """The namespace solution ``name`` runs in: np, math and the solutions it builds on.

    Raises KeyError for a name that is not in `FLASH_SOLUTIONS`.
    """
    if name not in FLASH_SOLUTIONS:
        raise KeyError(f"no solution {name!r}; there are {sorted(FLASH_SOLUTIONS)}")
    scope: dict[str, Any] = {"np": np, "math": math}
    for before in _BUILDS_ON.get(name, ()):
        exec(compile(FLASH_SOLUTIONS[before].code, f"<solution {before}>", "exec"), scope)
    return scope


def solution_function(name: str) -> Any:
    """The function solution ``name`` defines (numpy solutions; ``key_block`` is Triton code)."""
    scope = solution_scope(name)
    exec(compile(FLASH_SOLUTIONS[name].code, f"<solution {name}>", "exec"), scope)
    return scope[name]
