"""The tiny model: shapes, causality, pluggable attention, scale rules, KV cache, weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from support import FLOAT64

from attention_course.model.catalogue import TRAINED
from attention_course.model.tiny_model import (
    ATTENTION,
    ModelConfig,
    TinyTransformer,
    causal_mask_for,
    load_model,
    save_model,
)

VOCAB, LENGTH = 20, 10


def tiny(**changes):
    return TinyTransformer(ModelConfig(VOCAB, LENGTH, **changes), seed=0).eval()


def tokens(batch=3, length=LENGTH, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (batch, length), generator=gen)


def test_forward_shapes_and_a_traced_layer():
    model = tiny()
    trace = []
    logits = model(tokens(), trace=trace)
    assert logits.shape == (3, LENGTH, VOCAB)
    assert len(trace) == 2
    t = trace[0]
    assert t.q.shape == t.k.shape == (3, 4, LENGTH, 16) and t.v.shape == (3, 4, LENGTH, 16)
    assert t.weights.shape == (3, 4, LENGTH, LENGTH)
    assert torch.allclose(t.weights.sum(-1), torch.ones(3, 4, LENGTH))
    assert torch.all(t.weights.triu(diagonal=1) == 0)


def test_a_later_token_never_changes_an_earlier_prediction():
    model = tiny()
    a, b = tokens(batch=1), tokens(batch=1, seed=1)
    b[:, :6] = a[:, :6]
    with torch.no_grad():
        assert torch.equal(model(a)[:, :6], model(b)[:, :6])
        assert not torch.equal(model(a)[:, 6:], model(b)[:, 6:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("impl", [name for name in ATTENTION if name != "model"])
def test_every_attention_call_gives_the_models_logits(impl, dtype):
    bound = {torch.float32: 1e-4, torch.float64: 1e-10}[dtype]
    model = tiny(scale_rule="none").to(dtype)  # scale 1: large logits, the hardest case
    with torch.no_grad():
        own = model(tokens(), attention="model")
        other = model(tokens(), attention=impl)
    assert float((other - own).abs().max()) < bound


def test_gradients_flow_through_every_attention_call():
    grads = {}
    for impl in ATTENTION:
        model = tiny().double()
        model(tokens(batch=2), attention=impl).logsumexp(-1).sum().backward()
        grads[impl] = model.blocks[0].attn.query.weight.grad
    for impl, g in grads.items():
        assert torch.allclose(g, grads["model"], **FLOAT64), impl


@pytest.mark.parametrize(
    ("rule", "width", "scale"),
    [("1/sqrt(d)", 16, 0.25), ("none", 16, 1.0), ("1/d", 64, 1 / 64), ("1/sqrt(d)", 64, 0.125)],
)
def test_the_scale_rule_is_a_parameter(rule, width, scale):
    model = tiny(scale_rule=rule, head_width=width)
    assert model.config.scale == scale
    trace = []
    with torch.no_grad():
        model(tokens(), trace=trace)
    t = trace[0]
    raw = t.q @ t.k.transpose(-2, -1)
    keep = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril()
    assert torch.allclose(t.logits[..., keep], (raw * scale)[..., keep])


def test_queries_and_keys_start_with_unit_variance_so_raw_scores_spread_like_sqrt_d():
    """The initialisation behind the three scale rules: Var(q·k) ≈ d at step 0."""
    for width in (16, 64):
        trace = []
        with torch.no_grad():
            tiny(head_width=width)(tokens(batch=64), trace=trace)
        q, k = trace[0].q, trace[0].k
        assert float(q.var()) == pytest.approx(1.0, rel=0.15)
        raw = (q @ k.transpose(-2, -1)).flatten()
        assert float(raw.std()) / math.sqrt(width) == pytest.approx(1.0, rel=0.2)


def test_volume_multiplies_the_scale_and_zero_spreads_evenly():
    model = tiny()
    trace = []
    with torch.no_grad():
        model(tokens(batch=1), trace=trace, volume=0.0)
    w = trace[0].weights[0, 0]  # (T, T)
    expected = torch.ones(LENGTH, LENGTH).tril() / torch.arange(1, LENGTH + 1)[:, None]
    assert torch.allclose(w, expected)
    with pytest.raises(ValueError, match="volume"):
        model(tokens(), volume=-1.0)


def test_causal_masks_top_left_and_bottom_right():
    assert causal_mask_for(2, 4, "top_left").tolist() == [
        [True, False, False, False],
        [True, True, False, False],
    ]
    assert causal_mask_for(2, 4, "bottom_right").tolist() == [
        [True, True, True, False],
        [True, True, True, True],
    ]
    assert torch.equal(causal_mask_for(3, 3, "top_left"), causal_mask_for(3, 3, "bottom_right"))
    with pytest.raises(ValueError, match="alignment"):
        causal_mask_for(2, 4, "middle")
    with pytest.raises(ValueError, match="queries must be a positive integer, got 0"):
        causal_mask_for(0, 4)
    with pytest.raises(ValueError, match=r"keys must be a positive integer, got 2\.0"):
        causal_mask_for(2, 2.0)


def test_a_kv_cache_with_bottom_right_alignment_reproduces_the_whole_run():
    model = tiny()
    x = tokens(batch=2)
    with torch.no_grad():
        whole = model(x)
    _, cache = model.extend(x[:, :7])
    new, grown = model.extend(x[:, 7:], cache, "bottom_right")
    assert float((new - whole[:, 7:]).abs().max()) < 1e-5
    assert grown[0][0].shape == (2, 4, LENGTH, 16)
    _, cache = model.extend(x[:, :7], None, "top_left")
    wrong, _ = model.extend(x[:, 7:], cache, "top_left")
    assert float((wrong - whole[:, 7:]).abs().max()) > 0.1
    with pytest.raises(ValueError, match="more than this model's"):
        model.extend(x, cache)


def test_weights_round_trip_through_npz(tmp_path):
    from attention_course.model.corpus import build_corpus

    corpus = build_corpus()
    model = TinyTransformer(ModelConfig(len(corpus.vocab), corpus.length, head_width=8))
    path = tmp_path / "m.npz"
    size = save_model(model, path, corpus.vocab)
    assert size == path.stat().st_size
    loaded = load_model(path=path)
    assert loaded.config == model.config
    for (name, a), (_, b) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    save_model(model, path, (*corpus.vocab[:-1], "zebra"))
    with pytest.raises(ValueError, match="another vocabulary"):
        load_model(path=path)


def test_bad_configurations_and_names_are_refused():
    with pytest.raises(ValueError, match="head_width must be a positive integer"):
        ModelConfig(VOCAB, LENGTH, head_width=0)
    with pytest.raises(ValueError, match="unknown scale rule"):
        ModelConfig(VOCAB, LENGTH, scale_rule="1/d^2")
    with pytest.raises(ValueError, match="unknown attention"):
        tiny()(tokens(), attention="fastest")
    with pytest.raises(ValueError, match="more than this model's"):
        tiny()(torch.ones(1, LENGTH + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="unknown model"):
        load_model("gpt5")


def test_the_committed_weights_load_and_match_their_names():
    for name, changes in TRAINED.items():
        model = load_model(name)
        assert not model.training
        for key, value in changes.items():
            assert getattr(model.config, key) == value, (name, key)
        assert np.isfinite(sum(float(p.detach().abs().sum()) for p in model.parameters()))
