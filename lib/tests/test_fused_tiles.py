"""The torch tiled path's fused tiles (`attention_lib.flash.fused_tiles`, issue 22).

Each tile is one call of PyTorch's fused CPU kernel; the tiles, the causal
skipping and the online softmax that merges the tiles are ours, and so is
the backward pass that sums the tiles' shares. Held against PyTorch's SDPA
in float64, to FlashAttention's rule in float32, and against the torch
operations' tile kernel (``tile_kernel="ops"``) on the same calls.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from arrays import FLOAT64, make, qkv
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_lib as al
from attention_lib.flash.accuracy import forward_check, gradient_checks, stable_batch
from attention_lib.flash.route import Tiling
from attention_lib.flash.tiles import score_fraction
from attention_lib.inputs import check, materialise

torch = pytest.importorskip("torch", reason="the fused tiles run PyTorch's own CPU kernel")

import torch.nn.functional as F  # noqa: E402

from attention_lib.flash import fused_tiles  # noqa: E402


def leaves(batch, length, keys, width, dtype="float64", seed=0):
    q, k, v = qkv("torch", batch, length, keys, width, width, dtype, seed)
    return tuple(x.requires_grad_() for x in (q, k, v))


def fused(*args, **kwargs):
    return al.flash_attention(*args, backend="tiled", tile_kernel="fused", **kwargs)


def _on_workers(patch):
    """Make every problem large enough for the workers' threads, two of them."""
    from attention_lib.flash import workers

    patch.setattr(fused_tiles, "PARALLEL_MIN_SCORES", 0)
    patch.setattr(workers, "thread_count", lambda: 2)


# ---------------------------------------------------------------- the tiles


def test_the_causal_tiles_skip_above_the_diagonal_and_mask_only_the_tile_across_it():
    """L = S = 10, blocks 4 x 4: each row block's keys before it in one unmasked tile (at
    least FUSED_CAUSAL_BLOCK wide), then the tile from its first row, masked and aligned."""
    tiles = fused_tiles.fused_tiles(10, 10, 4, 4, is_causal=True)
    assert tiles == [
        ((0, 4), (0, 4), True),
        ((4, 8), (0, 4), False),
        ((4, 8), (4, 8), True),
        ((8, 10), (0, 8), False),
        ((8, 10), (8, 10), True),
    ]


def test_a_tile_crossing_the_diagonal_leaves_out_the_rows_above_its_first_key():
    """block_k narrower than block_q: the rows before a key block's first key see none of it."""
    tiles = fused_tiles.fused_tiles(6, 6, 6, 2, is_causal=True)
    assert tiles == [((0, 6), (0, 2), True), ((2, 6), (2, 4), True), ((4, 6), (4, 6), True)]


@pytest.mark.parametrize(
    "shape", [(10, 10, 4, 4), (9, 5, 2, 3), (5, 12, 3, 2), (7, 7, 7, 7), (2500, 2300, 2048, 2048)]
)
@pytest.mark.parametrize("causal", [False, True])
def test_the_tiles_cover_every_visible_score_once_and_only_the_diagonal_tiles_are_masked(
    shape, causal
):
    length_q, length_k = shape[:2]
    seen = np.zeros((length_q, length_k), np.int8)
    for (r0, r1), (c0, c1), masked in fused_tiles.fused_tiles(*shape, causal):
        rows, cols = np.arange(r0, r1)[:, None], np.arange(c0, c1)[None, :]
        visible = cols <= rows if causal else np.ones((r1 - r0, c1 - c0), bool)
        if masked:  # the kernel's top-left mask, aligned: first row and first key coincide
            assert r0 == c0
            assert np.array_equal(visible, (cols - c0) <= (rows - r0))
        else:
            assert visible.all()
        seen[r0:r1, c0:c1] += visible
    rows, cols = np.indices((length_q, length_k))
    assert np.array_equal(seen, (cols <= rows) if causal else np.ones_like(seen))


def test_the_default_causal_tiles_compute_three_quarters_of_the_scores_at_4096():
    """Row block 1 of 2 computes its unmasked tile and its diagonal tile: 3/4 of L x S by
    tiles (the kernel also skips its own blocks above the diagonal inside the masked tiles)."""
    block_q, block_k = fused_tiles.default_blocks(True)
    assert block_q == block_k == 2048
    tiles = fused_tiles.fused_tiles(4096, 4096, block_q, block_k, True)
    area = sum((r1 - r0) * (c1 - c0) for (r0, r1), (c0, c1), _ in tiles)
    assert area / 4096**2 == 0.75
    assert [masked for *_, masked in tiles] == [True, False, True]
    below = fused_tiles.below_diagonal_width(block_k)
    assert score_fraction(4096, 4096, block_q, block_k, True, below) == 0.75


# ---------------------------------------------------------------- the merge


def test_merging_two_halves_gives_the_whole_rows_result():
    q, k, v = qkv("torch", (2,), 5, 12, 4, 4)
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    whole, lse = kernel(q[None], k[None], v[None])
    out, lse_a = kernel(q[None], k[None, :, :5], v[None, :, :5])
    out_b, lse_b = kernel(q[None], k[None, :, 5:], v[None, :, 5:])
    fused_tiles.merge(out, lse_a, out_b, lse_b)
    torch.testing.assert_close(out, whole, **FLOAT64)
    torch.testing.assert_close(lse_a, lse, **FLOAT64)


def test_the_merge_keeps_a_tile_whose_share_is_below_the_smallest_weight():
    """Two tiles' log-sum-exps 800 apart: e^-800 underflows even in float64, and the row is
    the first tile's alone, with no NaN from inf - inf."""
    out, out_t = torch.ones(1, 3, dtype=torch.float64), torch.full((1, 3), 5.0).double()
    lse, lse_t = torch.tensor([800.0]).double(), torch.tensor([0.0]).double()
    fused_tiles.merge(out, lse, out_t, lse_t)
    torch.testing.assert_close(out, torch.ones(1, 3).double())
    torch.testing.assert_close(lse, torch.tensor([800.0]).double())


def test_a_row_blocks_tiles_are_merged_in_float64_and_rounded_once():
    """Three rows, 39 keys in tiles of 3: each row's output and log-sum-exp are the float64
    merge of its 13 tiles' own results, rounded to float32 once (within an ulp). Merged in
    float32, the output rounded once a tile: 5.2e-7 off in a row where the kernel's whole row
    is 7.8e-8 off, and D = rowsum(dO * O) carried it into dK at 4x PyTorch's error."""
    q, k, v = qkv("torch", (1, 64), 3, 39, 4, 4, "float32", 3)
    q, k, v = q * 2, k, v  # peaked rows
    scale = 0.5
    tiles = fused_tiles.fused_tiles(3, 39, 1, 3, False)
    out, lse = fused_tiles._forward(q, k, v, tiles, scale)
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    parts = [kernel(q, k[:, :, c0:c1], v[:, :, c0:c1], scale=scale) for c0, c1 in zip(
        range(0, 39, 3), range(3, 42, 3), strict=True)]  # fmt: skip
    outs = torch.stack([o.double() for o, _ in parts])  # (13, 1, 64, 3, 4)
    lses = torch.stack([x.double() for _, x in parts])  # (13, 1, 64, 3)
    want_lse = torch.logsumexp(lses, 0)  # (1, 64, 3)
    want = ((lses - want_lse).exp().unsqueeze(-1) * outs).sum(0)  # (1, 64, 3, 4)
    for got, exact in ((out, want), (lse, want_lse)):
        ulp = torch.finfo(torch.float32).eps * exact.abs().clamp_min(2.0**-126)
        assert ((got.double() - exact).abs() <= ulp).all()


def test_the_log_sum_exp_of_many_tiles_is_rounded_about_once():
    """Thirty tiles of one key each: the merged log-sum-exp is within an ulp of float64's,
    where a float32 logaddexp per tile drifted 1.3e-6 (11 ulps) and put dK past the 2x rule."""
    q, k, v = qkv("torch", (2, 2), 22, 30, 8, 8, "float32", 1)
    q, k, v = (x.reshape(1, 4, *x.shape[-2:]) for x in (q, k, v))  # (1, N, n, E)
    tiles = fused_tiles.fused_tiles(22, 30, 22, 1, False)
    _, lse = fused_tiles._forward(q, k, v, tiles, 8**-0.5)
    exact = torch.logsumexp((q.double() @ k.double().transpose(-1, -2)) * 8**-0.5, -1)
    ulp = torch.finfo(torch.float32).eps * exact.abs().max().item()
    assert (lse.double() - exact).abs().max().item() <= ulp


# ---------------------------------------------------------------- against PyTorch's SDPA

CASES = {
    "L = S, blocks that do not divide them": ((2, 3), 37, 37, 8, 8, 16),
    "L > S": ((1, 2), 41, 17, 8, 10, 6),
    "L < S": ((3,), 13, 50, 8, 4, 16),
    "one tile": ((2,), 16, 16, 4, None, None),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_forward_and_gradients_match_pytorchs_sdpa_in_float64(case, causal):
    batch, length, keys, width, block_q, block_k = CASES[case]
    inputs = leaves(batch, length, keys, width)
    out = fused(*inputs, is_causal=causal, block_q=block_q, block_k=block_k, scale=0.3)
    want = F.scaled_dot_product_attention(*inputs, is_causal=causal, scale=0.3)
    torch.testing.assert_close(out, want, **FLOAT64)
    upstream = make(tuple(out.shape), "torch", seed=9)
    ours = torch.autograd.grad(out, inputs, upstream)
    theirs = torch.autograd.grad(want, inputs, upstream)
    for got, expected in zip(ours, theirs, strict=True):
        torch.testing.assert_close(got, expected, **FLOAT64)


def test_gradcheck():
    inputs = leaves((2,), 7, 9, 4)
    f = lambda q, k, v: fused(q, k, v, is_causal=True, block_q=3, block_k=2)  # noqa: E731
    assert torch.autograd.gradcheck(f, inputs)


# FlashAttention's rule on problems of `stable_batch` rows (its maxima are one draw on a few
# small heads: `attention_lib.flash.accuracy`). Widths 4 to 16, queries scaled up to 4 for
# rows that put nearly all their weight on one key, where dS = P (dP - D) cancels.
@settings(max_examples=150, deadline=None)
@given(
    length=st.integers(1, 40),
    keys=st.integers(1, 40),
    width=st.sampled_from([4, 8, 16]),
    block_q=st.integers(1, 48),
    block_k=st.integers(1, 48),
    causal=st.booleans(),
    peak=st.sampled_from([1.0, 2.0, 4.0]),
    seed=st.integers(0, 2**16),
)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_any_tiles_give_the_float32_result_within_flashattentions_rule(
    length, keys, width, block_q, block_k, causal, peak, seed
):
    """At most twice PyTorch's float32 error against float64, forward and every gradient."""
    _within_the_rule(length, keys, width, block_q, block_k, causal, peak, seed)


@pytest.mark.parametrize("keys", [1, 2, 3])
@pytest.mark.parametrize("length", [1, 2, 6], ids=lambda n: f"L={n}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_rows_that_see_one_key_or_a_few_stay_within_flashattentions_rule(length, keys, causal):
    """Few keys a row: its weight sits on one or two keys, and block 1 merges every key."""
    for seed, peak in itertools.product(range(4), (1.0, 4.0)):
        _within_the_rule(length, keys, 8, 1, 1, causal, peak, seed)
        _within_the_rule(length, keys, 8, 2, 2, causal, peak, seed)


def _within_the_rule(length, keys, width, block_q, block_k, causal, peak, seed):
    batch = stable_batch((2, 2), length)
    q, k, v = qkv("torch", batch, length, keys, width, width, "float32", seed)
    q = q * peak
    kw = dict(is_causal=causal, block_q=block_q, block_k=block_k, tile_kernel="fused")
    checks = [forward_check("fused", q, k, v, **kw)]
    upstream = make((*batch, length, width), "torch", "float32", seed + 3)
    checks += gradient_checks("fused", q, k, v, upstream, **kw)
    for c in checks:
        assert c.passed, {**c.as_dict(), "seed": seed}


@pytest.mark.parametrize(
    "length, keys, causal",
    [(1, 9, True), (6, 9, True), (5, 1, False), (5, 1, True)],
    ids=["causal-one-row", "causal-row-0", "one-key", "one-key-causal"],
)
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_a_row_that_sees_one_key_has_exactly_zero_query_and_key_gradients(length, keys, causal):
    """Its weight is exactly 1, so dS = dP - D = 0: PyTorch's math backend gives 0, and so do
    we, where the kernel's dP (a product) and D (a row sum) would leave about 1e-7."""
    batch = stable_batch((2, 2), length)
    for seed in range(12):
        q, k, v = qkv("torch", batch, length, keys, 8, 8, "float32", seed)
        upstream = make((*batch, length, 8), "torch", "float32", seed + 3)
        checks = gradient_checks(
            "fused", q, k, v, upstream, is_causal=causal, block_q=2, block_k=3, tile_kernel="fused"
        )
        leaves_ = [x.detach().requires_grad_() for x in (q, k, v)]
        fused(*leaves_, is_causal=causal, block_q=2, block_k=3).backward(upstream)
        dq, dk, _ = (x.grad for x in leaves_)
        one_key = slice(None) if keys == 1 else slice(0, 1)  # the rows that see one key
        assert torch.equal(dq[..., one_key, :], torch.zeros_like(dq[..., one_key, :]))
        if length == 1 or keys == 1:  # every row sees one key: no share of dK anywhere
            assert torch.equal(dk, torch.zeros_like(dk))
        for c in checks:
            assert c.passed, {**c.as_dict(), "seed": seed}


@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_fused_and_the_operations_kernel_agree():
    q, k, v = leaves((1, 4), 300, 300, 16)
    for causal in (False, True):
        a, b = (
            al.flash_attention(q, k, v, is_causal=causal, block_q=64, block_k=96, tile_kernel=kind)
            for kind in ("fused", "ops")
        )
        torch.testing.assert_close(a, b, **FLOAT64)
        grads = (torch.autograd.grad(x, (q, k, v), x) for x in (a, b))
        for x, y in zip(*grads, strict=True):
            torch.testing.assert_close(x, y, **FLOAT64)


# ---------------------------------------------------------------- which kernel runs


def _spy(monkeypatch):
    calls = []
    apply = fused_tiles.FusedTilesFunction.apply

    def spy(*args):
        calls.append(list(args[3]))  # the tiles
        return apply(*args)

    monkeypatch.setattr(fused_tiles.FusedTilesFunction, "apply", spy)
    return calls


def test_auto_runs_the_fused_tiles_where_the_call_allows_and_the_operations_elsewhere(
    monkeypatch,
):
    calls = _spy(monkeypatch)
    q, k, v = qkv("torch", (2,), 8, 8, 4, 4)
    al.flash_attention(q, k, v, is_causal=True, block_q=4, block_k=4)
    assert calls == [[((0, 4), (0, 4), True), ((4, 8), (0, 4), False), ((4, 8), (4, 8), True)]]
    out = al.flash_attention(q.half(), k.half(), v.half())  # accumulated in float32
    assert out.dtype == torch.float16 and len(calls) == 2
    al.flash_attention(q, k, v, attn_mask=torch.ones(8, 8, dtype=torch.bool))  # a mask
    al.flash_attention(q, k, v[..., :3])  # E != Ev
    al.flash_attention(q, k[None].expand(3, 2, 8, 4), v)  # a broadcast batch
    al.flash_attention(q, k, v, tile_kernel="ops")
    assert len(calls) == 2


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda q, k, v: fused(q, k, v, attn_mask=torch.ones(8, 8) > 0), "a mask runs on"),
        (lambda q, k, v: fused(q, k, v[..., :3]), r"needs E = Ev, got E = 4, Ev = 3"),
        (lambda q, k, v: fused(q.numpy(), k.numpy(), v.numpy()), "runs torch tensors"),
        (lambda q, k, v: fused(q, k[None].expand(3, 2, 8, 4), v), "broadcast"),
    ],
    ids=["mask", "E != Ev", "numpy", "broadcast"],
)
def test_asking_for_the_fused_tiles_where_they_cannot_run_says_why(call, message):
    q, k, v = qkv("torch", (2,), 8, 8, 4, 4)
    with pytest.raises(ValueError, match=message):
        call(q, k, v)


def test_an_unknown_tile_kernel_lists_the_valid_ones():
    q, k, v = qkv("torch", (2,), 8, 8, 4, 4)
    with pytest.raises(ValueError, match="tile_kernel must be one of 'auto', 'fused', 'ops'"):
        al.flash_attention(q, k, v, tile_kernel="fast")


@pytest.mark.parametrize("bad", [math.nan, math.inf], ids=["nan", "inf"])
def test_a_non_finite_value_above_the_diagonal_is_never_read(bad):
    """The kernel would multiply its weight 0 by it (NaN); the fused tiles hand the call to the
    torch operations, which never read a masked key (`attention_lib.flash.tiles`)."""
    q, k, v = leaves((2,), 6, 6, 4)
    bad_v = v.detach().clone()
    bad_v[:, 4] = bad
    problem = materialise(check(q, k, bad_v, None, True, None, False))
    assert (
        fused_tiles.fused_tiles_attention(problem, Tiling(problem.is_causal, problem.scale, 2, 2))
        is None
    )  # refused, not computed
    out = fused(q, k, bad_v.requires_grad_(), is_causal=True, block_q=2, block_k=2)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out[:, :4], want[:, :4], **FLOAT64)  # rows before key 4


def test_scores_that_overflow_run_on_the_torch_operations(monkeypatch):
    """Finite inputs whose scores are infinite: the fused output is not finite, and the call is
    run again as torch operations (their rule for non-finite values)."""
    q, k, v = qkv("torch", (1,), 4, 4, 4, 4)
    problem = materialise(check(q * 1e200, k * 1e200, v, None, False, None, False))
    assert fused_tiles.eligible(problem) is None
    assert (
        fused_tiles.fused_tiles_attention(problem, Tiling(problem.is_causal, problem.scale)) is None
    )
    ours = al.flash_attention(q * 1e200, k * 1e200, v)
    theirs = al.flash_attention(q * 1e200, k * 1e200, v, tile_kernel="ops")
    torch.testing.assert_close(ours, theirs, equal_nan=True, **FLOAT64)


def test_the_workers_threads_give_the_serial_result(monkeypatch):
    """Work items (head, row block) forward and one head backward on two threads: the result
    of one item holding every head, to float64 rounding, causal and not."""

    inputs = leaves((2, 3), 50, 40, 8)
    upstream = make((2, 3, 50, 8), "torch", seed=7)

    def run(causal):
        out = fused(*inputs, is_causal=causal, block_q=16, block_k=12)
        return (out, *torch.autograd.grad(out, inputs, upstream))

    for causal in (False, True):
        serial = run(causal)
        with monkeypatch.context() as patch:
            _on_workers(patch)
            assert len(fused_tiles._head_groups(6, 50, 40)) == 6  # one item per head
            for got, want in zip(run(causal), serial, strict=True):
                torch.testing.assert_close(got, want, **FLOAT64)


@pytest.mark.parametrize("where", ["query", "key", "value"])
def test_a_non_finite_input_in_one_head_on_the_workers_runs_on_the_torch_operations(
    monkeypatch, where
):
    """The items check their own heads' inputs: a NaN in the last head's last row block
    (query) or last key still sends the whole call to the torch operations."""
    inputs = [x.detach().clone() for x in leaves((2, 3), 50, 40, 8)]
    position = {"query": (1, 2, 49, 0), "key": (1, 2, 39, 3), "value": (1, 2, 39, 5)}[where]
    inputs[["query", "key", "value"].index(where)][position] = math.nan
    problem = materialise(check(*inputs, None, False, None, False))
    with monkeypatch.context() as patch:
        _on_workers(patch)
        assert len(fused_tiles._head_groups(6, 50, 40)) == 6
        assert (
            fused_tiles.fused_tiles_attention(
                problem, Tiling(problem.is_causal, problem.scale, 16, 12)
            )
            is None
        )
        ours = al.flash_attention(*inputs, block_q=16, block_k=12)
    theirs = al.flash_attention(*inputs, block_q=16, block_k=12, tile_kernel="ops")
    torch.testing.assert_close(ours, theirs, equal_nan=True, **FLOAT64)


def test_on_the_workers_the_callers_thread_runs_no_parallel_operation(monkeypatch):
    """The finite checks and the gradients' zeros run in the items: an operation on torch's
    own threads before the items would leave them spinning (libgomp) while the items run.
    The same call as one item, on the caller's thread, shows the profiler sees them there."""
    from torch.profiler import profile

    inputs = leaves((2, 3), 50, 40, 8)
    upstream = make((2, 3, 50, 8), "torch", seed=7)
    passes = {"aten::sum", "aten::isfinite", "aten::zero_", "aten::zeros_like", "aten::fill_"}

    def on_caller() -> set[str]:
        fused(*inputs, block_q=16, block_k=12)  # any threads start, outside the profile
        with profile() as prof:
            out = fused(*inputs, block_q=16, block_k=12)
            torch.autograd.grad(out, inputs, upstream)
        events = prof.events()
        caller = next(e.thread for e in events if e.name == "FusedTilesFunction")
        return {e.name for e in events if e.thread == caller}

    assert {"aten::sum", "aten::zero_"} <= on_caller()  # one item: the checks run here
    with monkeypatch.context() as patch:
        _on_workers(patch)
        seen = on_caller()
    assert not seen & passes, sorted(seen & passes)
    assert not any("flash_attention_for_cpu" in name for name in seen)  # the items ran elsewhere


def test_the_items_run_on_as_many_threads_as_torch_has_not_one_per_head(monkeypatch):
    """Six heads, two threads: six items forward and backward, on two threads (six threads on
    two cores would take turns); one group of every head runs here (threads = 1)."""
    from attention_lib.flash import workers

    calls = []
    run = workers.run

    def spy(fn, items, threads):
        items = list(items)
        calls.append((len(items), threads))
        return run(fn, items, threads)

    monkeypatch.setattr(workers, "run", spy)
    inputs = leaves((2, 3), 50, 40, 8)
    out = fused(*inputs, block_q=64, block_k=64)
    out.sum().backward()
    assert calls == [(1, 1), (1, 1)]  # a small problem: one item of every head
    calls.clear()
    with monkeypatch.context() as patch:
        _on_workers(patch)
        out = fused(*inputs, block_q=64, block_k=64)
        out.sum().backward()
    assert calls == [(6, 2), (6, 2)]
