"""Notebook 03's answers to what developers ask next, pinned by running the notebook's own cells.

The answers are code on the page (``sdpa_kernel``, the combined mask, the half-precision
masks, ``causal_lower_right``, the head reshape, the weights taken out): nbval checks what
they print, and these tests check what the prose says about them, on the very lines the
reader sees. Where the page and the library compute the same thing (a causal mask, the
weights, attention itself) the tests say they agree.
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from support import FLOAT64, run_cells
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from attention_course.model.tiny_model import TinyTransformer, causal_mask_for
from attention_course.model.weights import ModelConfig
from attention_lib import attention_weights, scaled_dot_product_attention

NOTEBOOK = (
    Path(__file__).resolve().parents[2] / "notebooks" / "03_developer_pytorch_and_mistakes.ipynb"
)

# the cells these tests read, in the notebook's order (so the seeded draws are the page's)
IMPORTS, TENSORS, BOTH_MASKS, PADDING = "2e18d1a5", "da3cf50a", "979c688b", "ef09502f"
LAYER_INPUT, RESHAPE, WEIGHTS = "b684e871", "3b9d41aa", "c81f5a02"
BACKENDS, REFUSED, REASONS = "b9cf036d", "6a41c8e5", "e27f0b93"
NO_KEY_INPUTS, NO_KEY = "8b2f6c14", "1e6d9a73"
FILL_REFUSED, STORED, HALF_MASKS = "eef0f374", "4f8e1c3d", "d7a93e16"
ALIGNMENTS, DECODE = "36b14ba3", "ed9b44b4"
ORDER = [
    IMPORTS,
    TENSORS,
    BOTH_MASKS,
    PADDING,
    LAYER_INPUT,
    RESHAPE,
    WEIGHTS,
    BACKENDS,
    REFUSED,
    REASONS,
    NO_KEY_INPUTS,
    NO_KEY,
    FILL_REFUSED,
    STORED,
    HALF_MASKS,
    ALIGNMENTS,
    DECODE,
]
RAISES = {REFUSED, FILL_REFUSED}  # tagged raises-exception on the page


@pytest.fixture(scope="module")
def page() -> SimpleNamespace:
    """The cells run in order in one namespace: the names as each cell left them (later
    cells reuse names such as ``mask``), what each printed, and what the two cells that
    raise on purpose raised."""
    ns: dict = {"__name__": "__notebook__"}
    after, printed, raised = {}, {}, {}
    for cell in ORDER:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                run_cells(NOTEBOOK, [cell], ns)
            except Exception as err:
                if cell not in RAISES:
                    raise
                raised[cell] = err
        printed[cell] = out.getvalue().splitlines()
        after[cell] = dict(ns)
    return SimpleNamespace(after=after, printed=printed, raised=raised)


def test_one_boolean_mask_for_padding_and_causality_keeps_the_padding_out(page):
    ns = page.after[PADDING]
    mask, out = ns["mask"], ns["out"]
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 6, 6)
    assert mask.any(dim=-1).all()  # no query is left without a key
    assert torch.allclose(out[1:, :, :4], ns["alone"], **FLOAT64)
    k, v = ns["kp"].clone(), ns["vp"].clone()
    k[1, :, 4:], v[1, :, 4:] = 100.0, -100.0  # whatever sits in the padding
    moved = F.scaled_dot_product_attention(ns["qp"], k, v, attn_mask=mask)
    assert torch.allclose(moved, out, **FLOAT64)
    assert all(line.endswith("True") for line in page.printed[PADDING])


def test_the_reshape_lines_are_the_trained_models_own_layer(page):
    assert page.printed[RESHAPE] == [
        "q       (1, 4, 13, 16)",
        "k       (1, 4, 13, 16)",
        "v       (1, 4, 13, 16)",
        "heads   (1, 4, 13, 16)",
        "merged  (1, 13, 64)",
        "y       (1, 13, 64)",
        "y is the model's own layer output, within 1e-5: True",
    ]
    assert page.after[RESHAPE]["same"] is True


def test_the_reshape_lines_hold_when_the_values_are_narrower_than_the_queries():
    # the page's lines, run on a layer whose heads have E = 8 and Ev = 12
    config = ModelConfig(vocab_size=20, length=10, head_width=8, value_width=12)
    layer = TinyTransformer(config, seed=0).eval().blocks[0].attn
    x = torch.randn(2, 10, 64, generator=torch.Generator().manual_seed(0))  # (B, T, C)
    ns = {"torch": torch, "F": F, "layer": layer, "x": x, "B": 2, "T": 10, "H": 4, "E": 8, "Ev": 12}
    with contextlib.redirect_stdout(io.StringIO()):
        run_cells(NOTEBOOK, [RESHAPE], ns)
    assert ns["q"].shape == ns["k"].shape == (2, 4, 10, 8) and ns["v"].shape == (2, 4, 10, 12)
    assert ns["merged"].shape == (2, 10, 48) and ns["y"].shape == (2, 10, 64)
    assert ns["same"] is True


def test_the_weights_taken_out_are_the_ones_sdpa_used(page):
    ns = page.after[WEIGHTS]
    weights, T = ns["weights"], ns["T"]
    assert weights.shape == (1, 4, T, T)
    assert torch.allclose(weights.sum(-1), torch.ones(1, 4, T))
    assert torch.all(weights.triu(diagonal=1) == 0)
    assert torch.allclose(weights @ ns["v"], ns["heads"], atol=1e-6)
    library = attention_weights(ns["q"], ns["k"], is_causal=True)
    assert torch.allclose(library, weights, atol=1e-6)
    words, it = ns["words"], ns["it"]
    looked_at = [words[j] for j in weights[0, :, it].argmax(-1)]
    assert looked_at.count("dog") == 2  # the prose: two heads find "dog"


def test_the_cpu_runs_its_fused_kernel_when_it_can_and_refuses_the_others(page):
    lines = page.printed[BACKENDS]
    assert lines[0].startswith("MATH                ran")
    assert lines[1] == "FLASH_ATTENTION     ran; identical to the default call: True"
    assert lines[2].startswith("EFFICIENT_ATTENTION RuntimeError: No viable backend")
    ns = page.after[BACKENDS]
    with pytest.raises(RuntimeError, match="No viable backend"):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):  # a CUDA kernel too, as the page says
            F.scaled_dot_product_attention(ns["qs"], ns["ks"], ns["vs"])
    with sdpa_kernel(SDPBackend.MATH):  # the two kernels agree to float32 rounding
        by_math = F.scaled_dot_product_attention(ns["qs"], ns["ks"], ns["vs"])
    assert torch.allclose(by_math, ns["default"], rtol=0, atol=1e-5)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # the fused kernel takes float64 as well
        F.scaled_dot_product_attention(*(t.double() for t in (ns["qs"], ns["ks"], ns["vs"])))


def test_a_call_no_allowed_kernel_can_take_raises_and_the_warnings_say_why(page):
    err = page.raised.get(REFUSED)
    assert isinstance(err, RuntimeError) and str(err) == "No available kernel.  Aborting execution."
    reasons = page.printed[REASONS]
    assert reasons[0] == "Flash attention kernel not used because:"
    assert any("same last dimension" in r for r in reasons)
    assert not any("Triggered internally" in r or "/" in r for r in reasons)  # no build path
    ns = page.after[BACKENDS]
    with warnings.catch_warnings(record=True) as why:  # the page's sentence on dropout
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(ns["qs"], ns["ks"], ns["vs"], dropout_p=0.5)
    assert any("dropout" in str(w.message) for w in why)


def test_a_row_with_no_key_is_nan_by_hand_and_zeros_on_both_kernels_and_here(page):
    ns = page.after[NO_KEY]
    assert torch.isnan(ns["by_hand"][0, 0, 1]).all()
    lines = page.printed[NO_KEY]
    assert lines[1] == "SDPA on MATH, query 1's output: tensor([0., 0., 0., 0.])"
    assert lines[2] == "SDPA on FLASH_ATTENTION, query 1's output: tensor([0., 0., 0., 0.])"
    assert torch.equal(ns["ref"], torch.zeros(4)) and torch.equal(ns["tiled"], torch.zeros(4))
    q, k, v, keep = ns["q3"], ns["k3"], ns["v3"], ns["keep3"]
    rest = [0, 2]  # the rows with keys: the hand-written softmax and SDPA agree there
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    for out in (ns["by_hand"] @ v, scaled_dot_product_attention(q, k, v, attn_mask=keep)):
        assert torch.allclose(out[..., rest, :], sdpa[..., rest, :], atol=1e-5)
    with warnings.catch_warnings(), pytest.raises(RuntimeError):
        warnings.simplefilter("ignore")  # PyTorch's reasons, read in the test above
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v[..., :2], attn_mask=keep)  # Ev = 2: MATH only


def test_what_each_mask_value_does_in_half_precision(page):
    err = page.raised.get(FILL_REFUSED)
    assert isinstance(err, RuntimeError) and "without overflow" in str(err)
    stored = page.printed[STORED]
    assert "-1e9 is stored as -inf " in stored[0] and stored[0].startswith("torch.float16")
    assert "-1e9 is stored as -9.982e+08" in stored[1] and stored[1].startswith("torch.bfloat16")
    pattern = re.compile(r"^(\S+)\s+fill (\S+)\s+query 1, every key hidden: (\[.*\])$")
    seen = {}
    for line in page.printed[HALF_MASKS]:
        dtype, fill, like = pattern.match(line).groups()
        seen[dtype, fill] = ast.literal_eval(like)
    assert seen == {
        ("torch.float16", "-inf"): ["zeros"],
        ("torch.float16", "-1e+09"): ["zeros"],  # -1e9 became -inf
        ("torch.float16", "-6.55e+04"): ["as if unmasked"],
        ("torch.bfloat16", "-inf"): ["zeros"],
        ("torch.bfloat16", "-1e+09"): ["mean of v"],  # finite, and it swamps every score
        ("torch.bfloat16", "-3.39e+38"): ["mean of v"],
    }
    ns = page.after[HALF_MASKS]
    keep = ns["keep_some"]
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = (ns[name].to(dtype) for name in ("q3", "k3", "v3"))
        for fill in (-math.inf, -1e9, torch.finfo(dtype).min):
            mask = torch.where(keep, 0.0, fill).to(dtype)  # (L, S)
            theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            ours = scaled_dot_product_attention(q, k, v, attn_mask=mask)
            assert torch.allclose(ours.float(), theirs.float(), rtol=0, atol=1e-2), (dtype, fill)
            weights = attention_weights(q, k, attn_mask=mask)[0, 0]  # (L, S)
            assert torch.all(weights[0, 3:] == 0), (dtype, fill)  # a row with keys leaks nothing


def test_a_decode_step_needs_the_lower_right_causal_mask(page):
    assert page.printed[DECODE] == [
        "UPPER_LEFT  decode step = the whole run's last 2 rows: False",
        "LOWER_RIGHT decode step = the whole run's last 2 rows: True",
    ]
    ns = page.after[DECODE]
    L, S = ns["L"], ns["S"]
    pages = {"top_left": ns["upper_left"], "bottom_right": ns["lower_right"]}
    torchs = {"top_left": causal_upper_left(L, S), "bottom_right": causal_lower_right(L, S)}
    for alignment, mask in pages.items():
        assert torch.equal(mask, torchs[alignment]._materialize())
        assert torch.equal(mask, causal_mask_for(L, S, alignment))  # the course model's masks
        step = F.scaled_dot_product_attention(ns["q_new"], ns["ka"], ns["va"], attn_mask=mask)
        by_bias = F.scaled_dot_product_attention(
            ns["q_new"], ns["ka"], ns["va"], attn_mask=torchs[alignment]
        )
        assert torch.allclose(step, by_bias, rtol=0, atol=1e-6)
