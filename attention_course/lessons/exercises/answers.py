"""Every exercise's solution: its code, the explanation that goes with it, and its hints.

The data behind `attention_course.lessons.exercises.solutions`, which reads it
from here when it is installed. A graded class's install leaves this one file
out (``python -m course graded strip``, teachers/graded/README.md), so that
nothing a learner can import holds an answer; everything else works without it.

- `SOLUTIONS`: notebook 02's five (``under_divided``, ``my_attention``,
  ``combined_mask``, ``decode_step``, ``multi_head``).
- `FLASH_SOLUTIONS`: notebook 07's: ``online_update`` (exercise 1,
  numpy); exercise 2's steps ``key_loop`` (it calls ``online_update``),
  ``key_stop`` and ``diagonal_mask``, then ``flash_forward`` (numpy; it calls
  ``online_update``), ``flash_backward`` (exercise 3, numpy) and
  ``FlashAttention`` (the layer: a torch.autograd.Function around flash_forward
  and flash_backward), ``row_softmax`` and ``online_softmax`` (the Triton warm-up,
  whole kernels) and ``key_block`` (the body of the Triton kernel's key loop,
  `attention_course.lessons.exercises.triton_skeleton`; Triton code, run only by
  the interpreter in a child process).
"""

from __future__ import annotations

from .base import Solution

__all__ = ["FLASH_SOLUTIONS", "SOLUTIONS"]

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
        hints=(
            "The idea: the raw logits spread like sqrt(d). A rule that divides by less than "
            "sqrt(d) leaves part of that growth in, so the softmax still sharpens as d grows.",
            "The shapes: scale_fn takes the width d (an int) and returns one positive number, the "
            "factor the logits are multiplied by: dividing by a power d^a is d**-a.",
            "The line: any power of d between 0 and 1/2 works, e.g. return d**-0.25.",
        ),
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
        hints=(
            "The idea: three steps. Score every query against every key, scale by the width of "
            "one head, turn each query's scores into weights that sum to one, blend the values. "
            "The mask acts on the scores, before the softmax.",
            "The shapes: q (L, d) @ k.T (d, S) gives scores (L, S); the softmax runs along the "
            "last axis, the keys; weights (L, S) @ v (S, dv) give (L, dv).",
            "The line that matters: scores = np.where(mask, q @ k.T / math.sqrt(q.shape[-1]), "
            "-np.inf) when there is a mask, then softmax(scores, axis=-1) @ v.",
        ),
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
        hints=(
            "The idea: two rules, each a comparison, and a key must pass both: it is not after "
            "the query, and it is not padding. By this exercise's convention a padding query "
            "keeps the real keys up to its position, like any query: only columns are hidden.",
            "The shapes: the causal part is (L, L), the same for every sentence; the padding part "
            "is (B, L), one row per sentence; put a new axis in the middle, (B, 1, L), so it "
            "hides key columns and broadcasts over the queries.",
            "The line: np.tril(np.ones((size, size), dtype=bool)) & (np.arange(size) < lengths[:, "
            "None])[:, None, :]",
        ),
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
        hints=(
            "The idea: append first, then attend. The new tokens sit at the end of the sequence, "
            "so each may see every cached key, and the new keys up to its own.",
            "The shapes: the grown caches are (S, d) and (S, dv) with S = P + T; the scores are "
            "(T, S): T new queries against all S keys.",
            "The line: mask = np.tril(np.ones((T, S), dtype=bool), k=S - T), the triangle aligned "
            "to the bottom-right corner.",
        ),
    ),
    "multi_head": Solution(
        "multi_head",
        "def multi_head(x, w_q, w_k, w_v, w_o, n_heads):\n"
        "    B, T, d_model = x.shape\n"
        "    d_head = d_model // n_heads  # the width of one head\n"
        "\n"
        "    def split(y):  # (B, T, d_model) -> (B, H, T, d_head)\n"
        "        return y.reshape(B, T, n_heads, d_head).swapaxes(1, 2)\n"
        "\n"
        "    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)  # (B, H, T, d_head)\n"
        "    scores = q @ k.swapaxes(-1, -2) / math.sqrt(d_head)  # (B, H, T, T)\n"
        "    heads = softmax(scores, axis=-1) @ v  # (B, H, T, d_head)\n"
        "    merged = heads.swapaxes(1, 2).reshape(B, T, d_model)  # heads side by side\n"
        "    return merged @ w_o  # (B, T, d_model)\n",
        "Each head is an attention of its own over d_head = d_model / n_heads features, so its "
        "logits spread like sqrt(d_head) and that is the number to divide by: sqrt(d_model) "
        "over-divides by a factor sqrt(n_heads) and flattens every head, sqrt(n_heads) "
        "under-divides and sharpens them. The split reshapes the feature axis into (heads, "
        "width) and only then moves the head axis forward; reshaping (B, T, d_model) straight "
        "to (B, H, T, d_head) would deal consecutive tokens' features into one head. The merge "
        "undoes the split in reverse order: swap the axes back, then reshape. PyTorch's "
        "nn.MultiheadAttention and nanoGPT's CausalSelfAttention do the same with "
        ".view(B, T, H, d_head).transpose(1, 2).",
        hints=(
            "The idea: one wide projection, cut into n_heads narrow ones. Each head is an "
            "ordinary attention of width d_head = d_model / n_heads, and it is scaled by its own "
            "width, not the model's.",
            "The shapes: x @ w_q is (B, T, d_model); reshape to (B, T, H, d_head), swap to (B, H, "
            "T, d_head); scores (B, H, T, T); after the blend swap back to (B, T, H, d_head) and "
            "reshape to (B, T, d_model).",
            "The line: scores = q @ k.swapaxes(-1, -2) / math.sqrt(d_model // n_heads).",
        ),
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

_KEY_LOOP = """\
def key_loop(q, k, v, block_k):
    scale = q.shape[-1] ** -0.5  # 1 / sqrt(E)
    m = np.full((len(q), 1), -np.inf)  # (bq, 1): nothing seen yet
    total = np.zeros((len(q), 1))  # (bq, 1)
    acc = np.zeros((len(q), v.shape[-1]))  # (bq, Ev)
    for k0 in range(0, len(k), block_k):  # the last block may be short
        s = q @ k[k0 : k0 + block_k].T * scale  # (bq, bk)
        m, total, acc = online_update(m, total, acc, s, v[k0 : k0 + block_k])
    return acc / total, (m + np.log(total))[:, 0]
"""

_KEY_STOP = """\
def key_stop(r1, length_k, is_causal):
    return min(length_k, r1) if is_causal else length_k  # rows < r1 see keys < r1
"""

_DIAGONAL_MASK = """\
def diagonal_mask(s, r0, k0):
    rows = np.arange(r0, r0 + s.shape[0])[:, None]  # (bq, 1): query i
    cols = np.arange(k0, k0 + s.shape[1])[None, :]  # (1, bk): key j
    return np.where(cols <= rows, s, -np.inf)  # (bq, bk)
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

_FLASH_LAYER = """\
class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        heads = [x.detach().reshape(-1, *x.shape[-2:]).double().numpy() for x in (q, k, v)]
        runs = [flash_forward(a, b, c, 8, 8, is_causal) for a, b, c in zip(*heads)]  # per head
        out = torch.from_numpy(np.stack([o for o, _ in runs]))  # (N, L, Ev), N = batch x heads
        lse = torch.from_numpy(np.stack([s for _, s in runs]))  # (N, L): all backward needs
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.is_causal = is_causal
        return out.reshape(*q.shape[:-1], v.shape[-1]).to(q.dtype)  # (..., L, Ev)

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, out, lse = ctx.saved_tensors
        q_, k_, v_, d_ = [x.detach().reshape(-1, *x.shape[-2:]).double().numpy()
                          for x in (q, k, v, d_out)]  # (N, L, E), (N, S, E), (N, S, Ev), (N, L, Ev)
        grads = flash_backward(q_, k_, v_, out.numpy(), lse.numpy(), d_, ctx.is_causal)
        dq, dk, dv = (torch.from_numpy(g).reshape(x.shape).to(x.dtype)
                      for g, x in zip(grads, (q, k, v)))
        return dq, dk, dv, None  # one per argument of forward: none for is_causal
"""

_ROW_SOFTMAX = """\
def row_softmax(X, Y, length, stride, BLOCK):
    row = tl.program_id(0)  # one program per row
    cols = tl.arange(0, BLOCK)  # (BLOCK,), BLOCK >= length
    inside = cols < length  # (BLOCK,): False past the row's end
    x = tl.load(X + row * stride + cols, mask=inside, other=float("-inf"))  # (BLOCK,)
    e = tl.exp(x - tl.max(x, 0))  # (BLOCK,): at most 1, and 0 past the end
    tl.store(Y + row * stride + cols, e / tl.sum(e, 0), mask=inside)
"""

_ONLINE_SOFTMAX = """\
def online_softmax(X, Y, length, stride, BLOCK):
    row = tl.program_id(0)  # one program per row
    m = tl.full((), float("-inf"), tl.float32)  # the largest score so far
    total = tl.full((), 0.0, tl.float32)  # the sum of exp(x - m) so far
    for c0 in range(0, length, BLOCK):  # first walk: m and total
        cols = c0 + tl.arange(0, BLOCK)  # (BLOCK,)
        x = tl.load(X + row * stride + cols, mask=cols < length, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(x, 0))
        total = total * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)  # re-measured
        m = m_new  # the new maximum, for the next block
    for c0 in range(0, length, BLOCK):  # second walk: the weights
        cols = c0 + tl.arange(0, BLOCK)  # (BLOCK,)
        x = tl.load(X + row * stride + cols, mask=cols < length, other=float("-inf"))
        tl.store(Y + row * stride + cols, tl.exp(x - m) / total, mask=cols < length)
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
        hints=(
            "The idea: total and acc were summed against the old maximum m. When a block raises "
            "it to m_new, one factor re-measures them against the new one, then the block's own "
            "terms are added.",
            "The shapes: m and total (L, 1), acc (L, Ev), s (L, bk), v (bk, Ev); keep the row "
            "axis with keepdims=True so (L, 1) broadcasts against (L, bk).",
            "The line: rescale = np.exp(m - m_new), then total_new = rescale * total + p.sum(-1, "
            "keepdims=True) and acc_new = rescale * acc + p @ v, with p = np.exp(s - m_new) "
            "(shifted by 0 where m_new is -inf).",
        ),
    ),
    "key_loop": Solution(
        "key_loop",
        _KEY_LOOP,
        "One block of queries starts from the empty state, m = -inf, total = 0, acc = 0, and "
        "hands each block of keys' scores to online_update; the last block is whatever is "
        "left, and k[k0 : k0 + block_k] is short there by itself. Only after the last block "
        "is acc divided by total, and lse = m + log(total) is kept for the backward pass.",
        hints=(
            "The idea: exercise 1 does the arithmetic; this step is only the walk. Start "
            "empty, feed online_update one block of keys at a time, divide at the end.",
            "The shapes: m and total (bq, 1), acc (bq, Ev); a block's scores are "
            "q @ k[k0 : k0 + block_k].T, (bq, <= block_k), times 1/sqrt(E).",
            "The line: m, total, acc = online_update(m, total, acc, s, v[k0 : k0 + block_k]) "
            "inside for k0 in range(0, len(k), block_k).",
        ),
    ),
    "key_stop": Solution(
        "key_stop",
        _KEY_STOP,
        "The rows of the block are r0 to r1 - 1, and with is_causal row i sees keys 0 to i, "
        "so no row of the block sees key r1 or later: the tiles from there on lie wholly above "
        "the diagonal and are never computed. With L > S, r1 can pass the last key, hence "
        "the min. Without is_causal every row sees every key.",
        hints=(
            "The idea: with is_causal, the last row of the block sees the most keys; no key "
            "after it can matter to any row of the block.",
            "The shapes: the block's rows are r0 .. r1 - 1; the loop is range(0, stop, "
            "block_k), so stop is one past the last key to visit.",
            "The line: min(length_k, r1) when causal, length_k otherwise.",
        ),
    ),
    "diagonal_mask": Solution(
        "diagonal_mask",
        _DIAGONAL_MASK,
        "Inside a tile, row a is query r0 + a and column b is key k0 + b; the mask compares "
        "those global indices, not the tile's own. With PyTorch's top-left alignment query i "
        "sees keys j <= i, the diagonal included, whatever L and S are. Masked scores become "
        "-inf, so exp gives them exactly zero weight.",
        hints=(
            "The idea: the causal rule is about positions in the whole sequence, not in the "
            "tile: key j is visible to query i when j <= i.",
            "The shapes: rows np.arange(r0, r0 + bq)[:, None] (bq, 1) against columns "
            "np.arange(k0, k0 + bk)[None, :] (1, bk) broadcast to the tile, (bq, bk).",
            "The line: np.where(cols <= rows, s, -np.inf).",
        ),
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
        hints=(
            "The idea: for each block of query rows, start from the empty state and hand "
            "online_update one tile of scores at a time; divide acc by total once, at the end.",
            "The shapes: a tile is q[r0:r1] @ k[k0:k1].T * scale, (<= block_q, <= block_k); the "
            "empty state is m = -inf (bq, 1), total = 0 (bq, 1), acc = 0 (bq, Ev); lse is (L,).",
            "The line: with is_causal, stop = min(S, r1) ends each query block's key loop at its "
            "last row, and inside the tiles np.where(cols <= rows, s, -np.inf) hides the rest.",
        ),
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
        "lib/attention_lib/flash/torch_tiled.py does.",
        hints=(
            "The idea: the forward kept lse, one number per row; exp(S - lse) is every weight "
            "again, in one step. Then the softmax's backward needs one more number per row, "
            "delta.",
            "The shapes: s and p (H, L, S); delta = rowsum(d_out * out), (H, L, 1); dv (H, S, "
            "Ev), dq (H, L, E), dk (H, S, E); grouped heads repeat k and v, then sum their "
            "gradients back.",
            "The line: ds = p * (dp - delta) with dp = d_out @ v.T; then dq = ds @ k * scale and "
            "dk = ds.T @ q * scale.",
        ),
    ),
    "FlashAttention": Solution(
        "FlashAttention",
        _FLASH_LAYER,
        "forward hands flash_forward one head at a time (it takes q (L, E)), after folding the "
        "batch and head axes into one, N = B x H; it keeps q, k, v, the output and lse, "
        "O(N L) numbers beside the inputs, and never the (L, S) weights. backward hands all "
        "of it to flash_backward, which takes any number of heads at once (H = N here, one "
        "key head per query head); its gradients go back in forward's order: dq, dk, dv, "
        "and None for is_causal, a flag with no gradient. The tensors cross into numpy with "
        ".detach() (the inputs require gradients) and come back in q's dtype, float32 in the "
        "model: the numpy functions compute in float64, which is why gradcheck, which "
        "compares with finite differences, passes in float64. save_for_backward is for "
        "tensors; is_causal, a bool, is an attribute of ctx.",
        hints=(
            "The idea: forward computes the output with your flash_forward and keeps what "
            "backward needs, the output and lse; backward hands them, with d_out, to your "
            "flash_backward. torch never sees the steps in between, so it needs both.",
            "The shapes: q (..., L, E) with any leading axes; reshape(-1, L, E) gives (N, L, E) "
            "heads. flash_forward takes one head, q[i] (L, E); flash_backward takes all N at "
            "once; reshape the gradients back with .reshape(q.shape).",
            "The line: ctx.save_for_backward(q, k, v, out, lse) in forward, and in backward "
            "return dq, dk, dv, None, each torch.from_numpy(...).reshape(x.shape).to(x.dtype).",
        ),
    ),
    "row_softmax": Solution(
        "row_softmax",
        _ROW_SOFTMAX,
        "One program holds one whole row, padded up to BLOCK (a power of two), so the "
        "columns past the end are loaded as -inf, take no part in the maximum and give "
        "exp(-inf) = 0 to the sum. Subtracting the row's maximum changes nothing in exact "
        "arithmetic (the factor e^-max cancels between the numerator and the sum) and keeps "
        "every exponent at most 0, so that float32's exp, which overflows past 88.7, never "
        "does, and the largest term is exactly 1, so that the sum never underflows to 0. The "
        "store is masked too: the columns past the row's end belong to the caller.",
        hints=(
            "The idea: one program per row: load the row, subtract its maximum, exponentiate, "
            "divide by the sum, store. The columns past the row's end must take no part.",
            "The shapes: row = tl.program_id(0); cols = tl.arange(0, BLOCK) (BLOCK,), with "
            "BLOCK >= length; the row starts at X + row * stride; tl.max(x, 0) and tl.sum(e, 0) "
            "reduce (BLOCK,) to one number.",
            "The line: x = tl.load(X + row * stride + cols, mask=cols < length, "
            "other=float('-inf')), then e = tl.exp(x - tl.max(x, 0)) and store e / tl.sum(e, 0) "
            "with the same mask.",
        ),
    ),
    "online_softmax": Solution(
        "online_softmax",
        _ONLINE_SOFTMAX,
        "The first walk keeps two numbers per row, the largest score so far m and total, the "
        "sum of exp(x - m) over the columns seen. When a block raises the maximum to m_new, "
        "what was summed was measured against the old m, and one factor exp(m - m_new) <= 1 "
        "re-measures it; then the block's own terms are added. m starts at -inf, not 0: a row "
        "of scores like -800 must be shifted by its own maximum (the first "
        "block's exp(m - m_new) = exp(-inf) = 0 then multiplies a total of 0). The second walk "
        "reads the row again and writes exp(x - m) / total. So the row is read twice, not "
        "once for each of its maximum, sum and weights, and no block exceeds BLOCK: the same "
        "update FlashAttention carries along the keys, with the values' accumulator left out.",
        hints=(
            "The idea: walk the row one block at a time, carrying the running maximum m and "
            "the running sum total of exp(x - m); when the maximum grows, re-measure total "
            "against the new one. Then walk the row again to write the weights.",
            "The shapes: m and total are single numbers (tl.full((), float('-inf'), "
            "tl.float32) and tl.full((), 0.0, tl.float32)); each block is cols = c0 + "
            "tl.arange(0, BLOCK) for c0 in range(0, length, BLOCK), the last one past the "
            "row's end.",
            "The line: m_new = tl.maximum(m, tl.max(x, 0)); total = total * tl.exp(m - m_new) "
            "+ tl.sum(tl.exp(x - m_new), 0), with x loaded as -inf past the end.",
        ),
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
        hints=(
            "The idea: exercise 1's update in base 2. qk_scale already holds log2(e), so exp2 of "
            "the scaled scores is exp of the natural ones, and m stays in log2 units for the lse.",
            "The shapes: q (BLOCK_M, E), k (BLOCK_N, E), s (BLOCK_M, BLOCK_N); m and total "
            "(BLOCK_M,), acc (BLOCK_M, EV); rows (BLOCK_M,) and cols (BLOCK_N,) are the "
            "positions.",
            "The line: keep = cols[None, :] < length_k (and cols <= rows when causal), s = "
            "tl.where(keep, s, float('-inf')), then p = tl.math.exp2(s - m_new[:, None]).",
        ),
    ),
}
