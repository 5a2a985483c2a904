"""The Triton tile table and FlashAttention's accuracy rule: pure Python, no kernel runs."""

from __future__ import annotations

import pytest

from attention_lib.flash import accuracy
from attention_lib.flash.triton import configs as triton_configs
from attention_lib.flash.triton.configs import Tile, candidates, choose, padded


def test_padded_widths_are_powers_of_two_from_16():
    assert [padded(w) for w in (1, 8, 16, 17, 33, 64, 80, 96, 128, 129, 256)] == [
        16, 16, 16, 32, 64, 64, 128, 128, 128, 256, 256
    ]  # fmt: skip
    with pytest.raises(ValueError, match="at least 1, got 0"):
        padded(0)


def test_the_measured_winners_lead():
    # forward, float16, L = 4096, not causal, on an H200: the fastest tile measured comes first
    assert choose("forward", 64, "float16", False) == Tile(128, 64, 8, 3)
    assert choose("forward", 128, "float16", False) == Tile(64, 64, 4, 3)
    assert Tile(128, 128, 8, 3) in candidates("forward", 128, "float16", False)
    assert "432 TFLOP/s" in choose("forward", 64, "float16", False).source
    # not timed: the dkdv tile at 64 and dkdv and dq at 256 were chosen for fewer spills
    assert choose("dkdv", 64, "bfloat16", True).source.startswith("unmeasured")
    assert "spills" in choose("dq", 256, "float16", False).source
    assert choose("dq", 128, "float16", False).source == "unmeasured"


def test_every_choice_covers_every_kernel_width_dtype_and_causal_setting():
    keys = {(k, w, d, c) for k, w, d, c, _ in triton_configs.every_choice()}
    assert len(keys) == 3 * 5 * 3 * 2
    for kernel, width, dtype, causal in keys:
        tiles = candidates(kernel, width, dtype, causal)
        assert tiles and len(set(tiles)) == len(tiles)
        for t in tiles:
            assert t.block_m >= 16 and t.block_n >= 16 and t.num_warps in (1, 2, 4, 8)
            assert t.block_m & (t.block_m - 1) == 0 and t.block_n & (t.block_n - 1) == 0


def test_bad_keys_are_named():
    with pytest.raises(ValueError, match=r"kernel must be one of .* got 'backward'"):
        candidates("backward", 64, "float16", False)
    with pytest.raises(
        ValueError, match=r"head_dim must be one of \(16, 32, 64, 128, 256\), got 80"
    ):
        candidates("forward", 80, "float16", False)
    with pytest.raises(ValueError, match=r"dtype must be one of .* got 'float64'"):
        candidates("forward", 64, "float64", False)


def test_accuracy_rule_is_twice_pytorchs_error_plus_a_floor():
    torch = pytest.importorskip("torch")

    half = torch.finfo(torch.float16).eps
    check = accuracy.Check("x", "float16", (2,), ours=2e-3, pytorch=1e-3, magnitude=3.0)
    assert check.tolerance == pytest.approx(2e-3 + 0.1 * half) and check.passed
    assert not accuracy.Check("x", "float16", (2,), 2.2e-3, 1e-3, 3.0).passed
    # float32: four ulps of the largest reference value on top
    single = torch.finfo(torch.float32).eps
    assert accuracy.floor("float32", 5.0) == pytest.approx(20 * single)
    assert accuracy.Check("x", "float32", (2,), 1e-6, 1e-7, 5.0).passed
    assert not accuracy.Check("x", "float32", (2,), 3e-6, 1e-7, 5.0).passed


def test_accuracy_checks_the_tiled_path_against_float64():
    torch = pytest.importorskip("torch")

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 16, generator=g).to(torch.bfloat16) for _ in range(3))
    check = accuracy.forward_check("tiled", q, k, v, is_causal=True, backend="tiled")
    assert check.shape == (2, 3, 40, 16) and check.dtype == "bfloat16" and check.passed
    assert 0 < check.pytorch < 0.05 and check.magnitude > 0.5
    grad_out = torch.randn(2, 3, 40, 16, generator=g).to(torch.bfloat16)
    grads = accuracy.gradient_checks("tiled", q, k, v, grad_out, is_causal=True, backend="tiled")
    assert [c.name for c in grads] == ["tiled dq", "tiled dk", "tiled dv"]
    assert all(c.passed and c.shape == (2, 3, 40, 16) for c in grads), grads


def test_each_gpu_takes_the_tiles_for_its_shared_memory():
    from attention_lib.flash.triton.configs import SHARED_MEMORY, every_choice, tile_family

    families = {None: "large", 70: "turing", 75: "turing", 80: "large", 86: "99k"}
    families |= {87: "large", 89: "99k", 90: "large", 100: "99k", 120: "99k"}
    assert {c: tile_family(c) for c in families} == families
    assert SHARED_MEMORY[75] == 65536 and SHARED_MEMORY[86] == SHARED_MEMORY[89] == 101376
    assert SHARED_MEMORY[80] == 163 * 1024 and SHARED_MEMORY[90] == 227 * 1024
    # where the main table's first tile fits, a smaller GPU runs it; elsewhere its own
    assert choose("forward", 128, "float16", True, 86) == choose("forward", 128, "float16", True)
    assert choose("forward", 256, "float16", True, 86) == Tile(64, 32, 4, 2)
    assert choose("forward", 256, "float16", True, 89) == Tile(64, 32, 4, 2)
    assert choose("dkdv", 256, "float16", True, 75) == Tile(16, 16, 4, 1)
    assert choose("forward", 256, "float16", True, 90) == Tile(64, 64, 8, 2)
    # float32 gradients at width 256 fit no tile on sm_75: the launcher refuses them
    assert candidates("dq", 256, "float32", False, 75) == ()
    with pytest.raises(ValueError, match="no dq tile for float32 at head width 256 fits sm_75"):
        choose("dq", 256, "float32", False, 75)
    # bfloat16 is not a choice on sm_75 (refused), and is on sm_86
    assert {d for _, _, d, _, _ in every_choice(75)} == {"float16", "float32"}
    assert {d for _, _, d, _, _ in every_choice(86)} == {"float16", "bfloat16", "float32"}
