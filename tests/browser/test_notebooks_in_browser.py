"""Every numbered notebook, used as a learner uses it: JupyterLab in Chromium, sliders moved.

For each notebook (one page at 1280 x 800, one kernel): what its first open
shows, then Run All Cells, then

- no cell shows an error, a traceback or a warning (cells tagged
  ``raises-exception`` may), no dialog or news prompt is on screen, and the
  page asked nothing of any host but the local server;
- a beginner notebook shows no code: every code cell's input is collapsed;
- a notebook that asks before it tells keeps every answer hidden until it is
  asked for, and gives none of it away (`ask_before_telling`);
- every control under every explorer figure is moved as a learner would
  (keys on a slider's focused handle: a step, End, Home; a click on each
  other toggle button; a checkbox clicked twice; the next dropdown option).
  After each move: the figure in the page redrew with different pixels, the
  kernel's explorer holds the value the page shows beside the control, and
  the numbers in the figure (bar heights, markers, titles) are what
  ``attention_lib`` computes in this test process for that value, within the
  bounds stated in `CHECKS`. No error or warning may be logged in the kernel;
- where the notebook shows an explorer, the laptop checks of `laptop`: still
  pictures at the first open, every explorer and output fitting the screen at
  1280 x 800 and 1024 x 768 after Run All (before the sliders move), and the
  still pictures again when the saved notebook is reopened (last).

Which checks apply is data: `CHECKS` maps each explorer class to the inputs
the test reads from the kernel and the function that recomputes its figure;
`MUST_MOVE` lists, per notebook, the controls the lesson relies on (the head
width and the scale). A notebook whose explorer has no entry in `CHECKS`
fails with a message saying what to add.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import laptop
import numpy as np
import pytest
from ask_before_telling import asks, check_answers_wait
from stills import check_still_figures

from attention_course.explorers.registry import REGISTRY, shown_in
from attention_course.lessons.crowded_room import changed_hands, three_steps
from attention_course.lessons.scaling import weight_stats
from attention_lib import (
    attention_weights,
    entmax15,
    flash_attention,
    scaled_dot_product_attention,
    softmax,
    softmax1,
    sparsemax,
)
from attention_lib.flash import key_blocks
from attention_lib.normalisers import softmax_jacobian
from attention_lib.scales import scale_for, turn_volume
from labdriver import RedrawTimeout, layout, open_notebook, restart, save_notebook, widget_outputs

pytestmark = pytest.mark.browser

Values = dict[str, object]
Figure = dict


@dataclass(frozen=True)
class Check:
    """How to check one explorer class.

    ``inputs`` is a Python expression evaluated in the notebook's kernel with
    ``e`` bound to the explorer: the data the test needs besides the controls'
    values (kept small: it crosses the websocket after every move).
    ``check(values, inputs, figure)`` recomputes with the library and raises
    AssertionError where the figure differs; ``figure`` lists per axes its
    title, texts, rectangle heights (in drawing order) and line y-data.
    """

    inputs: str
    check: Callable[[Values, dict, Figure], None]


def _number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, f"expected {pattern!r} in the figure text {text!r}"
    return float(found.group(1))


def _close(shown, expected, atol: float, what: str) -> None:
    np.testing.assert_allclose(
        np.asarray(shown, dtype=float), expected, rtol=0, atol=atol, err_msg=what
    )


# Bounds: a bar or marker is the library's number itself (1e-9: float64 noise); a number
# printed in a title is rounded by its format, so it may differ by half its last digit.
EXACT = 1e-9
PERCENT_ROUNDING = 0.5 + 1e-6  # titles print shares as whole percentages


def check_volume_knob(values: Values, inputs: dict, fig: Figure) -> None:
    volume = float(values["volume"])
    expected = turn_volume(np.array(inputs["relevance"]), volume)  # (n,)
    ax = fig["axes"][0]
    _close(ax["heights"][: expected.size], expected, EXACT, "bar heights vs turn_volume")
    top = int(np.argmax(expected))
    assert f"{inputs['names'][top]} gets" in ax["title"], ax["title"]
    if expected[top] >= 0.095:  # shown as a whole percentage
        shown = _number(r"gets (\d+)%", ax["title"])
        assert abs(shown - 100 * expected[top]) <= PERCENT_ROUNDING, (shown, expected[top])
    assert abs(_number(r"×([\d.]+)", ax["title"]) - volume) <= 0.005 + 1e-9, ax["title"]


def check_three_steps(values: Values, inputs: dict, fig: Figure) -> None:
    steps = three_steps(turn_down=bool(values["turn_down"]))
    n = len(steps.words)
    _close(fig["axes"][1]["heights"][:n], steps.turned_down, EXACT, "turned-down scores")
    if inputs["withheld"]:  # the guess above is not locked in: steps 3 and 4 give nothing away
        assert [ax["title"] for ax in fig["axes"][2:]] == ["3. share out", '4. mix: the new "it"']
        return
    _close(fig["axes"][2]["heights"][:n], steps.shares, EXACT, "shares")
    dog = steps.shares[list(steps.words).index("dog")]
    shown = _number(r'"dog" gets (\d+)%', fig["axes"][2]["title"])
    assert abs(shown - 100 * dog) <= PERCENT_ROUNDING, (shown, dog)


# SlotsExplorer draws its own random queries and keys (private, too big to ship after
# every move), so its numbers are checked against the library's statistics on fresh
# seeded draws of the same size. Bounds: the typical size (standard deviation of q·k
# over N pairs) is sqrt(d) / divisor within 10% (its relative standard error is about
# sqrt(2 / N) = 3% for N = 2000, since q·k has kurtosis up to 9); the loudest voice's
# mean share over T rooms within 0.07 of the library's (each mean has a standard error
# under 0.5 / sqrt(T) = 0.016 for T = 1000; 0.07 is three times their difference's).
SPREAD_RELATIVE = 0.10
TOP_SHARE_ABS = 0.07


def _library_top_share(d: int, divisor: float, trials: int, keys: int) -> float:
    rng = np.random.default_rng(20_240_601)
    q = rng.normal(size=(trials, 1, d))  # (T, 1, d)
    k = rng.normal(size=(trials, keys, d))  # (T, keys, d)
    weights = attention_weights(q, k, scale=1.0 / divisor)  # (T, 1, keys)
    return float(weights[:, 0, :].max(axis=-1).mean())


def check_slots(values: Values, inputs: dict, fig: Figure) -> None:
    d = int(values["slots"])
    divisor = math.sqrt(d) if values["divide"] else 1.0
    hist, shares_ax = fig["axes"][0], fig["axes"][1]
    assert re.match(rf"{d} slots?\b", hist["title"]), hist["title"]
    spread = _number(r"typical size ([\d.]+)$", hist["title"])
    expected_spread = math.sqrt(d) / divisor
    assert abs(spread / expected_spread - 1) <= SPREAD_RELATIVE + 0.05 / expected_spread, (
        f"typical size {spread} shown, library's sqrt(d)/divisor = {expected_spread:.3f}"
    )
    keys = int(inputs["keys"])
    fractions = np.array(hist["heights"])  # (bins,)
    assert abs(fractions.sum() - 1) <= EXACT, f"histogram fractions add up to {fractions.sum()}"
    shares = np.array(shares_ax["heights"][:keys])  # (keys,)
    assert abs(shares.sum() - 1) <= 1e-6, f"ranked shares add up to {shares.sum()}"
    assert np.all(np.diff(shares) <= EXACT), f"shares not ranked loudest first: {shares}"
    expected_top = _library_top_share(d, divisor, int(inputs["trials"]), keys)
    assert abs(shares[0] - expected_top) <= TOP_SHARE_ABS, (shares[0], expected_top)
    shown = _number(r"gets (\d+)%", shares_ax["title"])
    assert abs(shown - 100 * shares[0]) <= PERCENT_ROUNDING, (shown, shares[0])


def check_nudge(values: Values, inputs: dict, fig: Figure) -> None:
    who, nudge = str(values["who"]), float(values["nudge"])
    i = list(inputs["names"]).index(who)
    n = len(inputs["names"])
    moved = []
    for ax, room in zip(fig["axes"][:2], ("calm", "loud"), strict=True):
        scores = np.array(inputs["rooms"][room])  # (n,)
        nudged = scores.copy()  # (n,)
        nudged[i] += nudge
        after = softmax(nudged)  # (n,)
        # each room draws the "before" outlines first, then the "after" bars
        _close(ax["heights"][n : 2 * n], after, EXACT, f"{room} room after the nudge")
        moved.append(changed_hands(softmax(scores), after))
    _close(fig["axes"][2]["heights"][:2], moved, EXACT, "attention that changed hands")
    title = fig["axes"][2]["title"]
    assert f"nudge {who} by" in title, title
    assert abs(_number(r"by ([+-][\d.]+)", title) - nudge) <= 0.005 + 1e-9, title


def check_scaling(values: Values, inputs: dict, fig: Figure) -> None:
    d, rule, c = int(values["width"]), str(values["rule"]), float(values["multiplier"])
    scale = scale_for(rule, d, c)
    logits = np.array(inputs["logits"])  # (trials, keys), raw q·k at width d
    keys = int(inputs["keys"])
    hist, weights_ax, top_ax, entropy_ax = fig["axes"][:4]
    assert f"d = {d}:" in hist["title"], hist["title"]
    std = (logits * scale).std()
    assert abs(_number(r"std ([\d.e+-]+)", hist["title"]) / std - 1) <= 5e-3, (hist["title"], std)
    # one query at every width: the widest head's example, its logits spread as at width d
    weights = softmax(np.array(inputs["example_logits"]) * scale)  # (keys,)
    _close(weights_ax["heights"][:keys], weights, EXACT, "one query's weights")
    assert abs(_number(r"top ([\d.]+)", weights_ax["title"]) - weights.max()) <= 0.005 + 1e-9
    stats = weight_stats(logits, scale)
    for ax, value, what in (
        (top_ax, stats.top, "mean top weight"),
        (entropy_ax, stats.entropy, "mean entropy"),
    ):
        markers = [line for line in ax["lines"] if len(line) == 1]
        assert len(markers) == 1, f"expected one current-d marker on the {what} panel"
        _close(markers[0], [value], EXACT, f"{what} marker at d = {d}")


def check_online_softmax(values: Values, inputs: dict, fig: Figure) -> None:
    t = int(values["step"])
    x = np.array(inputs["scores"])  # (n,)
    n = x.size
    running_max = np.maximum.accumulate(x)  # (n,)
    weights_ax = fig["axes"][3]
    # online bars: exp(x_i - m_t) / l_t over the t scores read, which is softmax(x[:t])
    online = np.concatenate([softmax(x[:t]), np.zeros(n - t)])  # (n,)
    _close(weights_ax["heights"][:n], online, EXACT, f"online weights after {t} scores")
    _close(weights_ax["heights"][n : 2 * n], softmax(x), EXACT, "the ordinary softmax")
    rescale = np.zeros(n)  # (n,): exp(m_{j-1} - m_j) at the steps read, 0 at step 1
    rescale[1:t] = np.exp(running_max[: t - 1] - running_max[1:t])
    _close(fig["axes"][1]["heights"][:n], rescale, EXACT, "rescale factors")
    readout = " ".join(fig["texts"])
    assert f"step {t} of {n}" in readout, readout
    m, total = running_max[t - 1], np.exp(x[:t] - running_max[t - 1]).sum()
    assert abs(_number(r"m = ([-\d.]+)", readout) - m) <= 5e-4 + 1e-9, (readout, m)
    assert abs(_number(r"l = ([\d.]+)", readout) - total) <= 5e-5 + 1e-9, (readout, total)


def check_tiling(values: Values, inputs: dict, fig: Figure) -> None:
    bq, bk, causal, step = (
        int(values["block_q"]),
        int(values["block_k"]),
        bool(values["causal"]),
        int(values["step"]),
    )
    q, k, v = (np.array(inputs[name]) for name in ("query", "key", "value"))
    length_q, length_k = q.shape[0], k.shape[0]
    tiles = [
        ((r0, min(r0 + bq, length_q)), blocks)
        for r0 in range(0, length_q, bq)
        for blocks in key_blocks((r0, min(r0 + bq, length_q)), length_k, bk, causal)
    ]
    readout = " ".join(fig["texts"])
    if step == 0:
        assert f"({len(tiles)} to visit)" in readout, readout
    else:
        (r0, r1), (k0, k1) = tiles[step - 1]
        assert (
            f"tile {step} of {len(tiles)}: query rows {r0}–{r1 - 1}, keys {k0}–{k1 - 1}" in readout
        )
    # rows are final once every tile of their query block is done
    done = 0
    for i in range(step):
        if i + 1 == len(tiles) or tiles[i + 1][0] != tiles[i][0]:
            done = tiles[i][0][1]
    assert f"{done} of {length_q} output rows done" in readout, readout
    if done:
        tiled = flash_attention(q, k, v, is_causal=causal, block_q=bq, block_k=bk)  # (L, Ev)
        reference = scaled_dot_product_attention(q, k, v, is_causal=causal)  # (L, Ev)
        expected = np.abs(tiled[:done] - reference[:done]).max()
        shown = _number(r"max \|tiled − unfused\| = ([\d.e+-]+)", readout)
        assert expected <= 1e-12 and shown <= 1e-12, (shown, expected)
    held = rf"held: {bq * bk} scores? \(one tile\)"
    assert re.search(held, readout), (held, readout)


def check_gradient(values: Values, inputs: dict, fig: Figure) -> None:
    d, rule, c = int(values["width"]), str(values["rule"]), float(values["multiplier"])
    scale = scale_for(rule, d, c)
    weights = softmax(np.array(inputs["logits"]) * scale)  # (trials, keys)
    norms = np.linalg.norm(softmax_jacobian(weights), axis=(-2, -1))  # (trials,)
    curve, weights_ax, jacobian_ax = fig["axes"][:3]
    markers = [line[0] for line in curve["lines"] if len(line) == 1]
    assert len(markers) == 2, "expected the mean and the median marker at the current d"
    expected = (norms.mean(), np.median(norms))
    for shown, value, what in zip(markers, expected, ("mean", "median"), strict=True):
        # the log axis has a floor; a norm below it may be drawn on the floor
        assert np.isclose(shown, value, rtol=1e-9, atol=0) or (value < 1e-7 and shown <= 1e-7), (
            f"{what} ‖J‖ marker {shown} vs library {value}"
        )
    example = weights[int(inputs["example"])]  # (keys,)
    _close(weights_ax["heights"][: example.size], example, EXACT, "the example query's weights")
    _close(jacobian_ax["images"][0], softmax_jacobian(example), EXACT, "its Jacobian heatmap")


def check_qk_norm(values: Values, inputs: dict, fig: Figure) -> None:
    norm = str(values["norm"])
    scores_ax, weights_ax = fig["axes"][:2]
    expected = np.array(inputs["scores"][norm])  # (n,): the kernel's view of this setting
    scores, weights = np.array(scores_ax["heights"]), np.array(weights_ax["heights"])
    _close(scores, expected, EXACT, f"the query's scores ({norm})")
    _close(weights, softmax(expected), EXACT, "the weights: the softmax of the scores drawn")
    if norm != "own":
        tau = float(inputs["tau"][norm])
        assert np.abs(scores).max() <= tau + 1e-12, f"a QK-norm score beyond ±τ = {tau}"
    assert f"gives {weights.max():.2f} of its weight" in fig["suptitle"], fig["suptitle"]


def check_where_it_looks(values: Values, inputs: dict, fig: Figure) -> None:
    from attention_course.model.views import where_it_looks

    # the explorer runs the model at the slider's value rounded to 6 decimals
    gaze = where_it_looks(
        str(values["sentence"]), inputs["model"], round(float(values["volume"]), 6)
    )
    shares = gaze.shares(str(values["head"]))  # (n,)
    n = len(shares)
    ax = fig["axes"][0]
    # the same weights and model run in this process: float32 noise at most
    _close(ax["heights"][:n], shares, 1e-6, f"shares at {values}")
    assert all(h == 0 for h in ax["heights"][n:]), "bars past the sentence's end"
    top = int(np.argmax(shares))
    assert f'"{gaze.query_word}" looks most at "{gaze.words[top]}"' in ax["title"], ax["title"]
    if shares[top] >= 0.01:
        shown = _number(r"\((\d+)%\)", ax["title"])
        assert abs(shown - 100 * shares[top]) <= PERCENT_ROUNDING, (shown, shares[top])
    verdict = " ".join(fig["axes"][1]["texts"])
    assert f'next word is "{gaze.guess}"' in verdict, verdict
    assert ("(right)" in verdict) == (gaze.guess == gaze.answer), verdict


def check_own_sentence(values: Values, inputs: dict, fig: Figure) -> None:
    from attention_course.lessons.own_sentence import own_gaze

    ax, below = fig["axes"][:2]
    gaze = own_gaze(str(values["sentence"]), values["word"], inputs["model"])
    if isinstance(gaze, str):  # the model cannot read the box: the reason, and no bar
        assert " ".join(ax["texts"][-1].split()) == gaze, (ax["texts"][-1], gaze)
        assert not any(ax["heights"]), ax["heights"]
        return
    n = len(gaze.weights)
    # the same weights and forward pass in this process: float64 noise at most
    _close(ax["heights"][:n], gaze.weights, EXACT, f"shares at {values}")
    assert all(h == 0 for h in ax["heights"][n:]), "bars past the chosen word"
    word, share = gaze.top()
    assert ax["title"].startswith(f'"{gaze.query_word}" looks most at "{word}"'), ax["title"]
    if share >= 0.005:
        shown = _number(r"\((\d+)%\)", ax["title"])
        assert abs(shown - 100 * share) <= PERCENT_ROUNDING, (shown, share)
    assert f'"{gaze.query_word}": "{gaze.guess}"' in below["texts"][-1], below["texts"][-1]


ALTERNATIVE_NORMALISERS = {
    "softmax": softmax,
    "softmax1": softmax1,
    "sparsemax": sparsemax,
    "entmax15": entmax15,
}


def check_alternatives(values: Values, inputs: dict, fig: Figure) -> None:
    d, c = int(values["width"]), float(values["multiplier"])
    q, k = np.array(inputs["query"]), np.array(inputs["key"])  # (L, d), (S, d)
    assert q.shape[1] == d, f"queries of width {q.shape[1]} at d = {d}"
    logits = q @ k.T * c / math.sqrt(d)  # (L, S)
    panels = {ax["title"].split("\n")[0]: ax for ax in fig["axes"] if ax["images"]}
    for name, normaliser in ALTERNATIVE_NORMALISERS.items():
        assert name in panels, f"no {name} panel among {sorted(panels)}"
        expected = normaliser(logits)  # (L, S)
        _close(panels[name]["images"][0], expected, 1e-9, f"{name} weights at d = {d}, c = {c}")
        if name != "softmax1":
            zeros = int(np.sum(np.asarray(panels[name]["images"][0]) == 0))
            assert f"{zeros}/{expected.size} zeros" in panels[name]["title"], panels[name]["title"]
    assert f"d = {d}," in fig["suptitle"], fig["suptitle"]


# The developer notebooks' explorers on the trained model and on the four mistakes.


def check_head_maps(values: Values, inputs: dict, fig: Figure) -> None:
    from attention_course.model.views import attention_maps

    maps = attention_maps(str(values["sentence"]), str(values["model"]))
    layer, head = int(values["layer"]), int(values["head"])
    row = maps.weights[layer, head, maps.query]  # (T,) the scored word's weights
    top = int(np.argmax(row))
    title = fig["axes"][0]["title"]
    assert title.startswith(f"layer {layer + 1}, head {head + 1}:"), title  # counted from 1
    assert f'"{maps.words[maps.query]}" puts' in title and f'on "{maps.words[top]}"' in title, (
        title,
        maps.words[top],
    )
    shown = _number(r"puts (\d+)%", title)
    assert abs(shown - 100 * row[top]) <= PERCENT_ROUNDING, (shown, row[top])
    # the red box marks the scored word's row, from the first word to the diagonal
    assert maps.query + 1 in fig["axes"][0]["widths"], fig["axes"][0]["widths"]


def check_mistake(values: Values, inputs: dict, fig: Figure) -> None:
    name, version = str(inputs["name"]), str(values["version"])
    weights = np.array(inputs["weights"])  # (L, S) the matrix drawn on the left
    left, right = fig["axes"][:2]
    assert left["title"] == f"weights with the {version}", left["title"]
    rows = weights.sum(axis=-1)  # (L,)
    if name in ("wrong axis", "mask after softmax"):
        _close(right["heights"][: rows.size], rows, EXACT, "row sums drawn")
        ok = bool(np.allclose(rows, 1.0))
        assert ok == (version == "fix"), (version, rows)
        assert right["title"].startswith("every row sums to 1" if ok else "row sums"), right
        if name == "wrong axis" and version == "mistake":
            _close(weights.sum(axis=0), np.ones(weights.shape[1]), EXACT, "columns sum to 1")
        if name == "mask after softmax":
            assert np.all(np.triu(weights, k=1) == 0), "no weight on a later key"
            leaks = "cannot move" not in right["title"]
            assert leaks == (version == "mistake"), right["title"]
    elif name == "model width":
        top = weights.max(axis=-1).mean()
        _close(right["heights"][:1], [top], EXACT, "head 1's mean top weight")
        assert (
            abs(
                _number(r"mean top weight ([\d.]+)", right["title"]) - np.mean(right["heights"][:8])
            )
            <= 0.005 + 1e-9
        ), right["title"]
    else:  # scale as a knob: the marker sits at the mean top weight of the weights drawn
        top = weights.max(axis=-1).mean()
        markers = [line for line in right["lines"] if len(line) == 1]
        _close(markers[0], [top], EXACT, "the in-use marker")
        assert ("collapsed (above 0.9)" in right["title"]) == (top > 0.9), right["title"]


CHECKS: dict[str, Check] = {
    "VolumeKnobExplorer": Check('{"relevance": e.relevance, "names": e.names}', check_volume_knob),
    "ThreeStepsExplorer": Check('{"withheld": e.withheld}', check_three_steps),
    "SlotsExplorer": Check('{"trials": e.trials, "keys": e.keys}', check_slots),
    "NudgeExplorer": Check('{"rooms": e.rooms, "names": e.names}', check_nudge),
    "ScalingExplorer": Check(
        '{"logits": e.sweep.logits[e.width.value], "example_logits": e.example_logits(), '
        '"keys": e.keys}',
        check_scaling,
    ),
    "GradientExplorer": Check(
        '{"logits": e.sweep.logits[e.width.value], "example": e.example}', check_gradient
    ),
    "QKNormExplorer": Check(
        '{"scores": {"own": e.views["own"].logits, "sqrt(d)": e.views["sqrt(d)"].qk_logits, '
        '"fit": e.views["fit"].qk_logits}, '
        '"tau": {k: v.temperature for k, v in e.views.items()}}',
        check_qk_norm,
    ),
    "OnlineSoftmaxExplorer": Check('{"scores": e.trace.scores}', check_online_softmax),
    "TilingExplorer": Check('{"query": e.query, "key": e.key, "value": e.value}', check_tiling),
    "AlternativesExplorer": Check(
        '{"query": e.inputs()[0], "key": e.inputs()[1]}', check_alternatives
    ),
    "WhereItLooksExplorer": Check('{"model": e.model_name}', check_where_it_looks),
    "HeadMapsExplorer": Check("{}", check_head_maps),
    "MistakeExplorer": Check('{"name": e.name, "weights": e.weights}', check_mistake),
    "OwnSentenceExplorer": Check('{"model": e.model_name}', check_own_sentence),
}

# Per notebook, the (explorer class, control) pairs the lesson relies on: the test fails
# if the page does not show them or they cannot be moved. Notebooks not listed still
# get every control they show moved and checked.
MUST_MOVE: dict[str, set[tuple[str, str]]] = {
    "01_beginner_crowded_room": {
        ("VolumeKnobExplorer", "volume"),
        ("SlotsExplorer", "slots"),
        ("SlotsExplorer", "divide"),
        ("WhereItLooksExplorer", "sentence"),
        ("WhereItLooksExplorer", "volume"),
        ("OwnSentenceExplorer", "word"),
    },
    "02_developer_scaling": {("ScalingExplorer", "width"), ("ScalingExplorer", "rule")},
    "04_researcher_variance_and_gradients": {
        ("GradientExplorer", "width"),
        ("GradientExplorer", "rule"),
        ("QKNormExplorer", "norm"),
    },
    "06_researcher_alternatives": {
        ("AlternativesExplorer", "width"),
        ("AlternativesExplorer", "multiplier"),
    },
}


def is_beginner(name: str) -> bool:
    return "_beginner_" in name


# -- helpers -----------------------------------------------------------------------------


def _problems_in_cells(cells: list[dict]) -> list[str]:
    """Every error, traceback or warning a cell shows, unless tagged raises-exception."""
    found = []
    for cell in cells:
        if cell["type"] != "code" or "raises-exception" in cell["tags"]:
            continue
        where = f"cell {cell['index']} ({cell['source'][:60]!r})"
        for out in cell["outputs"]:
            if out["output_type"] == "error":
                found.append(f"{where}: {out['ename']}: {out['evalue']}")
            if out["output_type"] == "stream" and out["name"] == "stderr":
                if re.search(r"Traceback|Error|Warning", out["text"]):
                    found.append(f"{where} wrote to stderr: {out['text'][:300]}")
        for text in cell["shownErrors"]:
            found.append(f"{where} shows an error: {text[:300]}")
        for text in cell["shownStderr"]:
            if re.search(r"Traceback|Error|Warning", text):
                found.append(f"{where} shows on stderr: {text[:300]}")
        if "Error displaying widget" in cell["outputText"]:
            found.append(f"{where}: a widget failed to display")
    return found


def _control_values(probe: dict) -> dict[tuple[int, str], object]:
    return {(e["key"], c["attr"]): c["value"] for e in probe["explorers"] for c in e["controls"]}


def _actions(control: dict) -> list[str]:
    """The first action for a control; sliders and checkboxes get more via `_next_action`."""
    if control["kind"] == "slider":
        return ["ArrowLeft" if control["atMax"] else "ArrowRight"]
    if control["kind"] == "toggle":
        return [o for i, o in enumerate(control["options"]) if i != control["active"]]
    if control["kind"] == "checkbox":
        return ["click"]
    if control["kind"] == "dropdown":
        options = control["options"]
        return [options[(control["active"] + 1) % len(options)]] if len(options) > 1 else []
    return []


def _next_action(control: dict, done: list[str]) -> str | None:
    """After the first step: a slider goes to its end and its start; a checkbox back."""
    if control["kind"] == "slider":
        if "End" not in done and not control["atMax"]:
            return "End"
        if "Home" not in done and not control["atMin"]:
            return "Home"
    if control["kind"] == "checkbox" and len(done) == 1:
        return "click"
    return None


def _readout_matches(control: dict, dom: dict) -> str | None:
    """None when what the page shows beside the control is the kernel's value."""
    value, label = control["value"], control["label"]
    if dom["kind"] == "slider":
        shown = dom["readout"]
        if label is not None:
            return None if shown == str(label) else f"readout {shown!r}, kernel label {label!r}"
        try:
            number = float(shown.replace("\u2212", "-"))  # d3-format writes U+2212 minus
        except ValueError:
            return f"readout {shown!r} is not a number (kernel value {value!r})"
        # the readout is the value in the slider's readout_format: 3 significant digits or
        # 2 decimals in our explorers
        bound = max(0.006 * abs(float(value)), 0.0051)
        return None if abs(number - float(value)) <= bound else f"readout {shown}, kernel {value}"
    if dom["kind"] in ("toggle", "dropdown"):
        shown = dom["options"][dom["active"]] if dom["active"] >= 0 else None
        if shown is not None:  # ipywidgets writes a dropdown option's spaces as U+00A0
            shown = shown.replace("\u00a0", " ")
        return None if shown == str(label) else f"page shows {shown!r}, kernel {label!r}"
    if dom["kind"] == "checkbox":
        return (
            None if bool(dom["active"]) == bool(value) else f"box {dom['active']}, kernel {value}"
        )
    return None


# -- tests -------------------------------------------------------------------------------


@pytest.mark.notebooks(only=laptop.shows_an_explorer)
def test_first_open_shows_still_pictures(notebook) -> None:
    laptop.check_still_pictures(notebook.first_open, trusted=False)  # read before Run All


def test_every_still_figure_is_a_picture_with_its_alternative(notebook) -> None:
    check_still_figures(notebook, notebook.path, notebook.path)


def test_runs_all_cells_without_errors(notebook) -> None:
    cells = notebook.cells()
    code = [c for c in cells if c["type"] == "code" and c["source"].strip()]
    assert code, "the notebook has no code cells to run"
    problems = _problems_in_cells(cells)
    assert not problems, "\n".join(problems)
    not_run = [c["index"] for c in code if c["executionCount"] is None]
    assert not not_run, f"code cells that did not run: {not_run}"
    assert not notebook.dialogs(), f"a dialog or notification is in the way: {notebook.dialogs()}"
    assert not notebook.external_requests, (
        f"the page asked hosts other than the local server: {notebook.external_requests[:5]}"
    )
    print(f"{notebook.path}: Run All Cells took {notebook.run_seconds:.1f} s")


@pytest.mark.notebooks(only=is_beginner)
def test_beginner_notebook_shows_no_code(notebook) -> None:
    code = [c for c in notebook.cells() if c["type"] == "code"]
    assert code, "no code cells"
    shown = [c["index"] for c in code if not c["inputHidden"] or c["editorVisible"]]
    assert not shown, f"code cells whose code is visible in the page: {shown}"


@pytest.mark.notebooks(only=asks)
def test_answers_wait_until_they_are_asked_for(notebook, tmp_path: Path) -> None:
    check_answers_wait(notebook, tmp_path)  # before any slider moves: the page as Run All left it


@pytest.mark.notebooks(only=laptop.shows_an_explorer)
@pytest.mark.parametrize("size", list(laptop.SIZES))
def test_explorers_and_outputs_fit_the_screen(notebook, size: str, screenshots: Path) -> None:
    laptop.resize(notebook, size)  # one resize per size: the layout is read once for both
    shown = layout(notebook)
    laptop.check_fit(shown, size)
    laptop.check_outputs_fit(shown, size)
    laptop.screenshot(notebook, screenshots, size)


def test_sliders_redraw_to_library_values(notebook, tmp_path: Path) -> None:
    page = notebook
    laptop.resize(page, "laptop")  # back from the fit checks' smaller screen
    boxes = page.controls()
    if not any(boxes):
        assert page.path.removesuffix(".ipynb") not in MUST_MOVE, "its explorers are missing"
        pytest.skip("no explorer with controls in this notebook")
    inputs = {name: check.inputs for name, check in CHECKS.items()}
    state = page.probe(inputs)
    unknown = {e["cls"] for e in state["explorers"]} - set(CHECKS)
    assert not unknown, (
        f"no check for explorer class(es) {sorted(unknown)}: add an entry to CHECKS in {__file__}"
    )
    shown = Counter(e["cls"] for e in state["explorers"])
    assert shown == shown_in(page.path.removesuffix(".ipynb")), (
        f"explorers in the page {dict(shown)}, the registry says "
        f"{shown_in(page.path.removesuffix('.ipynb'))}"
    )
    classes = {e["key"]: e["cls"] for e in state["explorers"]}
    failures: list[str] = []
    moved: set[tuple[str, str]] = set()
    log: list[str] = []

    for b, box in enumerate(boxes):
        for j in range(len(box)):
            done: list[str] = []
            dom = page.controls()[b][j]
            pending = _actions(dom)
            failed_before = len(failures)
            while pending and len(failures) == failed_before:
                dom = page.controls()[b][j]
                if dom["disabled"]:
                    break
                action = pending.pop(0)
                what = (
                    f"box {b} (the figure in cell {dom['cell']}) {dom['kind']} "
                    f"{dom['description']!r} ← {action}"
                )
                try:
                    move = page.move(dom, action)
                except RedrawTimeout as error:  # says which step of the move never happened
                    failures.append(f"{what}: the figure did not redraw: {error}")
                    break
                except Exception as error:  # Playwright could not do the action at all
                    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
                    failures.append(f"{what}: could not do it ({type(error).__name__}: {message})")
                    break
                done.append(action)
                log.append(
                    f"{what}: readout {move.readout_before} → {move.readout_after}, "
                    "first frame after "
                    + ("n/a" if move.latency_ms is None else f"{move.latency_ms:.0f} ms")
                )
                new = page.probe(inputs)
                failures += _check_move(
                    what, move, state, new, classes, dom_after=page.controls()[b][j], moved=moved
                )
                state = new
                if not pending:
                    nxt = _next_action(page.controls()[b][j], done)
                    if nxt:
                        pending.append(nxt)

    missing = MUST_MOVE.get(page.path.removesuffix(".ipynb"), set()) - moved
    if missing:
        failures.append(f"never moved, though the lesson relies on them: {sorted(missing)}")
    failures += [f"after the moves: {p}" for p in _problems_in_cells(page.cells())]
    if failures:
        shot = page.screenshot(tmp_path / f"{page.path.removesuffix('.ipynb')}-after-sliders.png")
        print(f"screenshot of the page after the sliders moved: {shot}")
        pytest.fail("\n".join([*failures, "moves:", *log]))
    print("\n".join(log))


def _check_move(
    what: str,
    move,
    before: dict,
    after: dict,
    classes: dict[int, str],
    dom_after: dict,
    moved: set[tuple[str, str]],
) -> list[str]:
    failures = []
    if not move.changed_pixels:
        failures.append(f"{what}: the figure redrew but its pixels did not change")
    old, new = _control_values(before), _control_values(after)
    changed = [key for key in new if key in old and new[key] != old[key]]
    # the control moved in the page, found among the kernel's changed controls by its
    # description (another control may follow it: a step slider whose range shrank)
    described = {
        (e["key"], c["attr"]): c["description"] for e in after["explorers"] for c in e["controls"]
    }
    mine = [key for key in changed if described[key] == dom_after["description"]]
    if len(mine) != 1:
        return [*failures, f"{what}: expected this control to change in the kernel, got {changed}"]
    key, attr = mine[0]
    explorer = next(e for e in after["explorers"] if e["key"] == key)
    control = next(c for c in explorer["controls"] if c["attr"] == attr)
    moved.add((explorer["cls"], attr))
    mismatch = _readout_matches(control, dom_after)
    if mismatch:
        failures.append(f"{what}: {mismatch}")
    if after["problems"][len(before["problems"]) :]:
        failures.append(f"{what}: the kernel logged {after['problems'][len(before['problems']) :]}")
    values = {c["attr"]: c["value"] for c in explorer["controls"]}
    texts = [explorer["figure"]["suptitle"]] + [
        t for ax in explorer["figure"]["axes"] for t in (ax["title"], *ax["texts"])
    ]
    bad = [t for t in texts if re.search(r"\b(nan|inf)\b", t, re.IGNORECASE)]
    if bad:
        failures.append(f"{what}: the figure shows {bad}")
    try:
        CHECKS[classes[key]].check(values, explorer["inputs"], explorer["figure"])
    except AssertionError as error:
        failures.append(f"{what}: {explorer['cls']} at {values}: {error}")
    return failures


def test_every_registered_explorer_has_a_check() -> None:
    assert set(CHECKS) == {e.name for e in REGISTRY}, (
        f"CHECKS {sorted(CHECKS)} and the explorer registry {sorted(e.name for e in REGISTRY)} "
        "differ: an explorer is added in explorers/registry.py and checked here"
    )


# A cell that sleeps for ten minutes, and two requests queued behind it.
_SEND_QUEUED = """() => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  kernel.requestExecute({code: 'import time; time.sleep(600)', silent: true});
  kernel.requestCommInfo({target_name: 'jupyter.widget'}).catch(() => {});
  kernel.requestExecute({code: '1', silent: true});
}"""
_BUSY = """() =>
  window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'busy'"""


@pytest.mark.notebooks(only=lambda name: name.startswith("00_"))
def test_a_restart_ends_the_waits_for_what_the_old_kernel_never_answered(notebook) -> None:
    """A request still queued when the kernel restarts never gets its idle status (the
    running one does: ipykernel ends it at shutdown); the waits must not expect it.

    A soak once waited 300 s for the widget manager's ``comm_info_request``, sent just
    after the page looked ready and cut off by the restart that began the first run.
    (Last in this file: it leaves the notebook's kernel restarted.)
    """
    notebook.page.evaluate(_SEND_QUEUED)
    notebook.page.wait_for_function(_BUSY, timeout=60_000, polling=100)
    restart(notebook, timeout_s=120)
    notebook.quiet(timeout_ms=60_000)  # raises RedrawTimeout naming what it still awaits
    assert notebook.execute("print(6 * 7)").strip() == "42"  # the new kernel answers


@pytest.mark.notebooks(only=laptop.shows_an_explorer)
def test_reopened_after_save_shows_still_pictures(
    notebook, lab_server, chromium, screenshots: Path
) -> None:
    """Saved, closed (its kernel shut down) and opened again: the still pictures are back.
    (Last in this file: it closes the notebook's page.)"""
    save_notebook(notebook)
    notebook.close()
    name = notebook.path
    reopened = open_notebook(
        chromium, lab_server, name, f"reopened-{name[:2]}", laptop.SIZES["laptop"]
    )
    try:
        # the saved widget state is restored some time after the page loads (seconds, on a
        # loaded machine): wait until the check holds, or report it as it stands at the end
        deadline = time.monotonic() + laptop.REOPEN_TIMEOUT_S
        while True:
            try:
                laptop.check_still_pictures(widget_outputs(reopened), trusted=True)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                reopened.page.wait_for_timeout(500)
        laptop.screenshot(reopened, screenshots, "reopened")
    finally:
        reopened.close()
