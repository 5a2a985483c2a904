"""The trained model seen from the notebooks: facts the notebooks print, pinned here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_course.model.report import load_report
from attention_course.model.views import (
    SWAP_BOUNDS,
    attention_maps,
    heldout_check,
    pointer_head,
    showcase,
    swap_attention,
    where_it_looks,
)
from attention_lib.scales import turn_volume


@pytest.mark.parametrize("sentence", showcase("pronoun"))
def test_the_pronoun_head_looks_at_what_the_pronoun_stands_for(sentence):
    gaze = where_it_looks(sentence)
    assert gaze.query_word in ("it", "they") and gaze.words[0] == "(start)"
    word, share = gaze.top("pointer")
    assert word == gaze.words[gaze.antecedent]
    assert share > 0.5
    assert gaze.guess == gaze.answer
    for head in ("pointer", "average", (1, 3)):
        assert gaze.shares(head).sum() == pytest.approx(1.0)


def test_the_pointer_head_is_the_reports_best():
    hits = np.asarray(load_report()["models"]["sqrt_d16"]["final"]["antecedent_hits"]["pronoun"])
    layer, head = pointer_head("sqrt_d16")
    assert hits[layer, head] == hits.max() > 0.9
    with pytest.raises(ValueError, match="family"):
        pointer_head("sqrt_d16", "poetry")


def test_the_volume_knob_goes_from_mush_to_winner_takes_all():
    sentence = showcase("pronoun")[0]
    n = len(where_it_looks(sentence).words)
    low = where_it_looks(sentence, volume=0.05).shares("pointer")
    high = where_it_looks(sentence, volume=20.0).shares("pointer")
    assert low.max() < 1.5 / n
    assert high.max() > 0.95
    zero = where_it_looks(sentence, volume=0.0).weights
    assert np.allclose(zero, 1 / n)


def test_turning_trained_scores_up_or_down_is_what_the_first_layer_computes():
    sentence = showcase("pronoun")[2]
    trained = where_it_looks(sentence)
    for volume in (0.1, 3.0):
        turned = turn_volume(trained.logits[0], volume)  # (H, n), layer 0 heads
        assert np.allclose(turned, where_it_looks(sentence, volume=volume).weights[0], atol=1e-6)
    with pytest.raises(ValueError, match="volume"):
        turn_volume(trained.logits, -1.0)


def test_every_head_map_is_causal_and_rows_sum_to_one():
    maps = attention_maps(showcase()[0])
    layers, heads, t, s = maps.weights.shape
    assert (layers, heads) == (2, 4) and t == s == len(maps.words)
    assert np.allclose(maps.weights.sum(-1), 1.0)
    assert np.all(maps.weights[..., np.triu_indices(t, k=1)[0], np.triu_indices(t, k=1)[1]] == 0)
    assert maps.words[maps.query] == "it"


@pytest.mark.parametrize("name", ["sqrt_d16", "none_d16", "inv_d64"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_three_attention_calls_agree_inside_the_trained_model(name, dtype):
    diffs = swap_attention(name, dtype=dtype)
    assert set(diffs) == {"attention_lib", "torch", "flash"}
    assert max(diffs.values()) < SWAP_BOUNDS[str(dtype).removeprefix("torch.")]


def test_the_loaded_weights_are_the_reported_ones():
    check = heldout_check("sqrt_d16")
    assert check["largest_gap"] < 2e-3  # at most a sentence or two flips on another CPU
    assert set(check["report"]) == {"all", "pronoun", "agreement", "name"}


def test_the_swaps_print_as_stated_bounds():
    from attention_course.model.views import describe_swaps

    lines = describe_swaps().splitlines()
    assert len(lines) == 5
    for line in lines[2:]:
        assert line.split()[-4:] == ["within", "1e-04", "within", "1e-10"], line


def test_the_volume_sweep_notebook_01_prints_is_far_from_any_flip():
    from attention_course.model.views import format_volume_sweep, volume_sweep

    rows = volume_sweep()
    assert [(r["volume"], r["right"], r["total"]) for r in rows] == [
        (0.05, 0, 6),
        (0.3, 2, 6),
        (1.0, 6, 6),
        (3.0, 6, 6),
        (20.0, 6, 6),
    ]
    for r in rows:
        assert r["margin"] > 0.1  # every guess is far from a tie: the counts hold on any CPU
        percent = 100 * r["top_share"]
        assert abs(percent % 1 - 0.5) > 0.01  # printed to a whole percent: far from x.5
    text = format_volume_sweep(rows)
    assert text.splitlines()[0].endswith("next word right in 0 of 6")
