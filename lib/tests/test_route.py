"""`flash_attention`'s route: one decision of path, dtype and tiles, before any work.

`attention_lib.flash.route.choose_route` is the one place a call's path is
chosen; these tests read the table in its docstring off the routes it gives,
and check that `flash_attention` asks for one route a call and runs it.
"""

from __future__ import annotations

import numpy as np
import pytest
from arrays import qkv

import attention_lib as al
from attention_lib.flash.route import Route, Tiling, choose_route
from attention_lib.inputs import check

torch = pytest.importorskip("torch", reason="the route table's rows are read off torch calls")

from attention_lib.flash import fused_tiles, route, torch_tiled  # noqa: E402


def _route(q, k, v, mask=None, causal=False, **kwargs) -> Route:
    return choose_route(check(q, k, v, mask, causal, None, False), **kwargs)


def test_each_kind_of_call_gets_the_row_of_the_table_it_belongs_to():
    q, k, v = qkv("torch", (2,), 6, 7, 4, 4, "float32")
    fused = _route(q, k, v)
    assert (fused.path, fused.exact) == ("fused", None)  # float32: held to its bound per head
    assert fused.tiling == Tiling(False, 0.5, *fused_tiles.default_blocks(False))
    assert (fused.fallback.path, fused.fallback.exact) == ("ops", True)
    assert fused.fallback.tiling == Tiling(False, 0.5, *torch_tiled.default_blocks(False))
    assert _route(q.double(), k.double(), v.double()).exact is False  # float64 already
    assert _route(q.half(), k.half(), v.half()).problem.query.dtype == torch.float32

    keep = torch.ones(6, 7, dtype=torch.bool)
    masked = _route(q, k, v, keep, causal=False)
    assert (masked.path, masked.exact) == ("ops", False)  # a mask: the torch operations
    assert masked.tiling.block_q == torch_tiled.default_blocks(False)[0]
    assert _route(q * 1e3, k * 1e3, v, keep).exact is True  # scores past float32's bound

    numpy = _route(*qkv("numpy", (2,), 6, 7, 4, 4))
    assert (numpy.path, numpy.tiling.block_q, numpy.tiling.block_k) == ("numpy", 256, 512)
    assert isinstance(numpy.problem.query, np.ndarray)


def test_the_callers_choices_are_honoured_or_refused_with_the_reason():
    q, k, v = qkv("torch", (2,), 6, 7, 4, 4, "float32")
    assert _route(q, k, v, block_q=3, block_k=5).tiling == Tiling(False, 0.5, 3, 5)
    assert _route(q, k, v, tile_kernel="ops").path == "ops"
    keep = torch.ones(6, 7, dtype=torch.bool)
    with pytest.raises(ValueError, match="tile_kernel='fused' cannot run this call: a mask"):
        _route(q, k, v, keep, tile_kernel="fused")
    with pytest.raises(ValueError, match="tile_kernel='fused' runs torch tensors"):
        _route(*qkv("numpy", (2,), 6, 7, 4, 4), tile_kernel="fused")
    with pytest.raises(ValueError, match=r"backend must be one of 'auto', 'tiled', 'triton'"):
        _route(q, k, v, backend="cuda")
    with pytest.raises(ValueError, match="block_q"):
        _route(q, k, v, block_q=0)
    with pytest.raises(ValueError, match="backend='triton' needs torch tensors"):
        _route(*qkv("numpy", (2,), 6, 7, 4, 4), backend="triton")


def test_auto_leaves_cpu_tensors_to_the_tiled_paths_without_importing_triton():
    q, k, v = qkv("torch", (2,), 6, 7, 4, 4, "float32")
    assert _route(q, k, v, backend="auto").path == "fused"


def test_flash_attention_decides_once_and_runs_what_it_decided(monkeypatch):
    decided = []
    real = route.choose_route

    def counted(*args, **kwargs):
        decided.append(real(*args, **kwargs))
        return decided[-1]

    from attention_lib.flash import dispatch

    monkeypatch.setattr(dispatch, "choose_route", counted)
    q, k, v = qkv("torch", (2,), 6, 7, 4, 4, "float32")
    al.flash_attention(q, k, v, is_causal=True, block_q=2, block_k=3)
    al.flash_attention(q.numpy(), k.numpy(), v.numpy())
    assert [r.path for r in decided] == ["fused", "numpy"]


def test_a_fused_call_past_float32s_bound_runs_once_more_in_float64_and_not_again():
    """The one data-dependent turn of the fused route: a head's scores past the bound send the
    whole call to float64, the tiles once more; values that are not finite, to the ops."""
    calls = []
    real = fused_tiles.fused_tiles_attention

    def spy(problem, tiling, bounded=False):
        calls.append((problem.query.dtype, bounded))
        return real(problem, tiling, bounded)

    q, k, v = qkv("torch", (1, 2), 6, 7, 4, 4, "float32")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fused_tiles, "fused_tiles_attention", spy)
        al.flash_attention(q, k * 1e3, v)
        assert calls == [(torch.float32, True), (torch.float64, False)]
        calls.clear()
        v[0, 0, 3] = float("nan")
        out = al.flash_attention(q, k, v)
        assert calls == [(torch.float32, True), (torch.float64, False)]
    assert out.dtype == torch.float32 and torch.isnan(out[0, 0]).all()
