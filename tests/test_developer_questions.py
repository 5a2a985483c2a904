"""The developer questions of notebook 03, each pinned to what PyTorch and the library do."""

from __future__ import annotations

import math

import pytest
import torch

from attention_lib.lessons.developer_questions import (
    BACKENDS,
    all_masked_rows,
    causal_alignment,
    format_backends,
    format_mask,
    format_mask_cases,
    half_precision_masks,
    kv_cache_decode,
    naive_attention,
    run_with_backend,
    sdpa_backends,
)


def test_a_row_with_every_key_masked_is_nan_naively_and_zero_in_sdpa_and_here():
    r = all_masked_rows()
    assert all(math.isnan(x) for x in r.naive_weights.tolist())
    assert all(math.isnan(x) for x in r.naive.tolist())
    for out in (r.torch_sdpa, r.library, r.flash):
        assert torch.equal(out, torch.zeros_like(out))
    assert r.others_agree < 1e-5
    text = r.summary()
    assert "[nan, nan, nan, nan, nan]" in text and "[0, 0]" in text and "within 1e-05" in text


def test_naive_attention_matches_sdpa_when_no_row_is_fully_masked():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 3, generator=gen) for _ in range(3))
    keep = torch.ones(4, 4, dtype=torch.bool).tril()
    _, out = naive_attention(q, k, v, keep)
    assert torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, keep))


def test_what_each_mask_does_in_float16_and_float32():
    cases = {(c.name, c.dtype): c for c in half_precision_masks()}
    expected = {
        ("boolean False", "float16"): ("False", "zeros"),
        ("float -inf", "float16"): ("-inf", "zeros"),
        ("float -1e9", "float16"): ("-inf", "zeros"),  # -1e9 overflows to -inf in float16
        ("finfo(float16).min", "float16"): ("-65504", "as if unmasked"),
        ("boolean False", "float32"): ("False", "zeros"),
        ("float -inf", "float32"): ("-inf", "zeros"),
        ("float -1e9", "float32"): ("-1e+09", "uniform"),  # finite: absorbs every score
        ("finfo(float32).min", "float32"): ("-3.40282e+38", "uniform"),
    }
    assert {key: (c.stored, c.full_row) for key, c in cases.items()} == expected
    for c in cases.values():
        assert c.masked_weight == 0.0, c  # a row with visible keys never leaks weight
        assert c.paths_agree, c
        assert c.full_row_error <= c.tolerance
    table = format_mask_cases(list(cases.values()))
    assert "as if unmasked (within 4e-03)" in table


def test_top_left_and_bottom_right_alignment_match_pytorchs_bias_helpers():
    masks = causal_alignment(2, 5)
    assert masks["match_torch"]
    assert format_mask(masks["top_left"]) == "1 . . . .\n1 1 . . ."
    assert format_mask(masks["bottom_right"]) == "1 1 1 1 .\n1 1 1 1 1"
    one = causal_alignment(1, 5)  # a decode step: one new query, five keys
    assert one["top_left"].tolist() == [[True, False, False, False, False]]
    assert one["bottom_right"].tolist() == [[True] * 5]


def test_a_kv_cache_needs_bottom_right_alignment():
    check = kv_cache_decode()
    assert check.words[check.prefix] == "it"
    assert check.errors["bottom_right"] < 1e-4
    assert check.errors["top_left"] > 1.0
    assert check.predicted["bottom_right"] == check.expected == ["barked", "."]
    assert check.predicted["top_left"] != check.expected
    assert check.summary().splitlines() == [
        "cached: '<s> the dog was next to the bells and then'; new queries: 'it barked'",
        "  bottom_right logits within 1e-04 of the whole run; next-word guesses the same",
        "  top_left     logits NOT within 1e-04 of the whole run; next-word guesses different",
    ]
    with pytest.raises(ValueError, match="prefix"):
        kv_cache_decode(prefix=0)


def test_which_sdpa_backends_run_on_cpu_tensors():
    ran = {r.backend: r for r in sdpa_backends()}
    assert list(ran) == list(BACKENDS)
    assert ran["MATH"].ran and ran["MATH"].difference == 0
    assert ran["FLASH_ATTENTION"].ran and ran["FLASH_ATTENTION"].difference < 1e-5
    for name in ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
        assert not ran[name].ran
        assert ran[name].error.startswith("No viable backend for scaled_dot_product_attention")
    assert "ran (agrees with MATH: within 1e-05)" in format_backends(list(ran.values()))


def test_forcing_a_backend_that_cannot_run_says_why():
    flash = {r.backend: r for r in sdpa_backends(dropout_p=0.5)}["FLASH_ATTENTION"]
    assert not flash.ran and flash.error == "No available kernel.  Aborting execution."
    assert any("dropout" in reason for reason in flash.reasons)
    assert all("Triggered internally" not in reason for reason in flash.reasons)
    widths = {r.backend: r for r in sdpa_backends(value_width=4)}["FLASH_ATTENTION"]
    assert any("same last dimension" in reason for reason in widths.reasons)
    assert {r.backend: r.ran for r in sdpa_backends(torch.float64)}["FLASH_ATTENTION"]


def test_run_with_backend_refuses_an_unknown_name():
    q = torch.zeros(1, 1, 2, 4)
    with pytest.raises(ValueError, match="backend must be one of"):
        run_with_backend("FASTEST", q, q, q)
    with pytest.raises(RuntimeError, match="No viable backend"):
        run_with_backend("CUDNN_ATTENTION", q, q, q)


def test_agreement_between_different_paths_is_printed_as_a_bound_even_when_it_is_zero():
    # two paths that round alike on one CPU may not on another: the printout must not change
    from dataclasses import replace

    from attention_lib.lessons.developer_questions import _bound

    assert _bound(0.0) == "within 1e-05"
    assert _bound(0.0, torch.float64) == "within 1e-12"
    assert _bound(0.0, same_path=True) == "identical"
    assert _bound(3e-5).startswith("3.00e-05, MORE than")
    cases = [replace(c, full_row_error=0.0) for c in half_precision_masks()]
    table = format_mask_cases(cases)
    assert "exactly" not in table
    assert "as if unmasked (within 4e-03)" in table and "uniform (within 5e-07)" in table
    ran = format_backends(sdpa_backends())
    assert "MATH                 ran (agrees with MATH: identical)" in ran
