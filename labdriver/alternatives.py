"""Each explorer's text alternative held against the picture it stands for.

An explorer's text alternative (``Explorer.describe``, on one line) must say the
numbers its picture shows. `check_alternative` checks one against what the figure
draws, in the shape `kernel_probe._browser_test_figure` reads it (per axes: title,
texts, legend, bar heights, line data, grids), so the same check runs in-process
on every explorer at every control setting (tests/explorers) and on the page after
every move in the browser (tests/browser/test_accessibility.py). `CHECKS` holds one
function per explorer class, each comparing the alternative's numbers with the
labels, titles or marks they come from; a class without one fails, naming itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["CHECKS", "NUMBER", "check_alternative", "numbers"]

Values = Mapping[str, Any]
Figure = Mapping[str, Any]

#: A number as the alternatives write it: a sign (ASCII or U+2212), digits, decimals, exponent.
NUMBER = re.compile(r"[-+\u2212]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def numbers(text: str) -> list[float]:
    """Every number written in ``text``, in order."""
    return [float(n.replace("\u2212", "-")) for n in NUMBER.findall(text)]


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _after(label: str, text: str) -> str:
    """The number written right after ``label`` in ``text`` (as written)."""
    found = re.search(re.escape(label) + r"\s*(" + NUMBER.pattern + ")", text)
    assert found, f"no number after {label!r} in {text!r}"
    return found.group(1)


def _near(said: str, drawn: float, what: str) -> None:
    """``said`` (a number as written) is ``drawn`` rounded to its digits."""
    decimals = len(said.split(".")[1]) if "." in said and "e" not in said else 0
    value = float(said.replace("\u2212", "-"))
    bound = 0.5 * 10.0**-decimals + 1e-9 if "e" not in said else abs(drawn) * 0.05 + 1e-12
    if "e" not in said and decimals == 0 and abs(drawn) >= 1:
        bound = max(bound, 0.5)
    assert abs(value - drawn) <= bound, f"{what}: the text says {said}, the picture {drawn:.6g}"


def _agree(first: str, second: str, what: str) -> None:
    """Two roundings of one number, as written, agree to the coarser one's last digit."""
    coarse, fine = sorted((first, second), key=lambda n: len(n.split(".")[1]) if "." in n else 0)
    _near(coarse, float(fine.replace("\u2212", "-")), what)


def _markers(ax: Mapping[str, Any]) -> list[float]:
    """The y of each one-point line (a "current value" marker) in ``ax``."""
    return [float(np.asarray(line)[0]) for line in ax["lines"] if np.asarray(line).size == 1]


def _listed(part: str) -> list[str]:
    """``"the 0.1, dog 4.0"`` -> ``["0.1", "4.0"]``: the number of each "name number" pair."""
    return [pair.rsplit(" ", 1)[1] for pair in part.split(", ")]


# -- one check per explorer class ---------------------------------------------------------


def _volume_knob(alt: str, values: Values, fig: Figure) -> None:
    ax = fig["axes"][0]
    shares = alt.split(": ", 1)[1].split("; volume")[0]
    assert _listed(shares) == list(ax["texts"]), (shares, ax["texts"])  # the bars' labels
    volume = f"×{float(values['volume']):.2f}"
    assert f"volume {volume}" in alt and f"volume {volume}" in ax["title"], (alt, ax["title"])


def _three_steps(alt: str, values: Values, fig: Figure) -> None:
    scores, down, shares, mix = fig["axes"][:4]
    parts = dict(part.split(": ", 1) for part in alt.split("; ") if ": " in part)
    first = next(k for k in parts if k.endswith("1, scores"))
    assert _listed(parts[first]) == scores["texts"], (parts[first], scores["texts"])
    second = next(k for k in parts if k.startswith("2, turned down"))
    assert _listed(parts[second]) == down["texts"], (parts[second], down["texts"])
    if values["turn_down"]:
        divisor = _after("÷", down["title"])
        assert f"every score ÷ {divisor}" in alt, (alt, down["title"])
    if "3, shares" not in parts:  # withheld until the guess above is locked in
        assert "3 and 4 wait for your guess above" in alt, alt
        return
    n = len(scores["texts"])
    assert _listed(parts["3, shares"]) == shares["texts"][:n], (alt, shares["texts"])
    nearest = re.search(r'closest to "([^"]+)"', mix["title"]).group(1)
    assert f'the new "it" is closest to "{nearest}"' in alt, (alt, mix["title"])


def _slots(alt: str, values: Values, fig: Figure) -> None:
    hist, shares = fig["axes"][:2]
    assert _after("typical size", alt) == _after("typical size", hist["title"]), alt
    inside = _after("typical size:", hist["legend"][0])
    assert f"{inside}% of totals within it" in alt, (alt, hist["legend"])
    top = shares["texts"][0]  # the loudest voice's bar label
    assert f"gets {top} on average" in alt and f"gets {top} on average" in shares["title"]
    d = int(values["slots"])
    assert (f"{d} slots" if d != 1 else "1 slot") in alt, (alt, d)
    assert ("divided by" in alt) == bool(values["divide"]), alt


def _nudge(alt: str, values: Values, fig: Figure) -> None:
    moved = fig["axes"][2]
    said = re.findall(r"([<\d.]+%) of the (calm|loud) room", alt)
    assert [p for p, _ in said] == list(moved["texts"]), (alt, moved["texts"])
    nudge = f"{float(values['nudge']):+.2f}"
    assert f"Nudge {values['who']}'s score by {nudge}" in alt, alt
    assert f"nudge {values['who']} by {nudge}" in moved["title"], moved["title"]


def _width_and_scale(alt: str, values: Values) -> None:
    assert alt.startswith(f"d = {values['width']}, scale rule {values['rule']} "), alt


def _scaling(alt: str, values: Values, fig: Figure) -> None:
    _width_and_scale(alt, values)
    hist, _, top, entropy = fig["axes"][:4]
    _agree(_after("logit std", alt), _after("std", hist["title"]), "the logits' spread")
    _near(_after("mean top weight", alt), _markers(top)[0], "the mean top weight marker")
    _near(_after("mean entropy", alt), _markers(entropy)[0], "the mean entropy marker")


def _gradient(alt: str, values: Values, fig: Figure) -> None:
    _width_and_scale(alt, values)
    curve, weights, jacobian = fig["axes"][:3]
    mean, median = _markers(curve)
    floor = 1e-7  # the log axis draws a norm below it on the floor
    for label, drawn in (("mean ‖J‖", mean), ("median", median)):
        said = _after(label, alt)
        if not (float(said) < floor and drawn <= floor):
            _near(said, drawn, f"the {label} marker")
    _near(_after("top weight", alt), max(weights["heights"]), "the example's top weight")
    norm = alt.rsplit("‖J‖ ", 1)[1]
    drawn = float(np.linalg.norm(np.asarray(jacobian["images"][0])))  # the heatmap's
    if norm.startswith("<"):
        assert drawn < float(norm.lstrip("< ")), (alt, drawn)
    else:
        _near(norm, drawn, "the example's ‖J‖")


def _same_as(where: Callable[[Figure], str]) -> Callable[[str, Values, Figure], None]:
    """A check that the alternative is, on one line, the text the figure shows at ``where``."""

    def check(alt: str, _values: Values, fig: Figure) -> None:
        shown = _one_line(where(fig))
        assert alt == shown, f"the text says {alt!r}, the picture {shown!r}"

    return check


def _alternatives(alt: str, values: Values, fig: Figure) -> None:
    grid = np.asarray(fig["axes"][0]["images"][0])
    queries, keys = grid.shape
    assert alt.startswith(f"Eight heatmaps of the weights of {queries} queries over {keys} "), alt
    assert fig["suptitle"] in alt, (alt, fig["suptitle"])
    assert f"d = {values['width']}," in fig["suptitle"], fig["suptitle"]
    assert alt.endswith(f"cosine with τ = {float(values['tau']):.2g}"), alt


def _mistake(alt: str, values: Values, fig: Figure) -> None:
    weights, effect = fig["axes"][:2]
    grid = np.asarray(weights["images"][0])
    which = "the mistake" if values["version"] == "mistake" else "the fix"
    assert f"running {which}: a heatmap of the weights of {grid.shape[0]} queries over " in alt
    assert f" queries over {grid.shape[1]} keys; " in alt, (alt, grid.shape)
    assert weights["title"] == f"weights with {which}", weights["title"]
    finding = " ".join(effect["title"].split())
    assert alt.endswith(f"; {finding}"), (alt, finding)


def _own_sentence(alt: str, values: Values, fig: Figure) -> None:
    bars, below = fig["axes"][:2]
    *labels, message = bars["texts"]  # one label per bar, then the reason the box can't be read
    *words, guess = below["texts"]  # one word per bar, then the model's guess
    if message.strip():  # nothing drawn: the reason is the picture and its alternative
        assert alt == " ".join(message.split()), (alt, message)
        assert not any(labels) and not any(words) and not guess, (labels, words, guess)
        assert not any(bars["heights"]), bars["heights"]
        return
    head = f"{bars['title']}; shares: "
    assert alt.startswith(head) and alt.endswith(f"; {guess}"), (alt, bars["title"], guess)
    listed = alt[len(head) : -len(guess) - 2]
    said = re.findall(r"(\S+) (\d+%)", listed)
    drawn = [(w, label) for w, label in zip(words, labels, strict=True) if label]
    assert sorted(said) == sorted((w, label) for w, label in drawn if label != "<1%"), (
        said,
        drawn,
    )
    shares = [int(p.rstrip("%")) for _, p in said]
    assert shares == sorted(shares, reverse=True), f"not largest first: {alt}"
    assert ("<1%" in listed) == any(label == "<1%" for _, label in drawn), (alt, drawn)
    for label, height in zip(labels, bars["heights"], strict=True):
        if label.endswith("%") and label != "<1%":
            _near(label.rstrip("%"), 100 * height, "a bar's label")
    assert f'after "{words[len(drawn) - 1]}"' in guess, (guess, words)


CHECKS: dict[str, Callable[[str, Values, Figure], None]] = {
    "VolumeKnobExplorer": _volume_knob,
    "ThreeStepsExplorer": _three_steps,
    "SlotsExplorer": _slots,
    "NudgeExplorer": _nudge,
    "ScalingExplorer": _scaling,
    "GradientExplorer": _gradient,
    "QKNormExplorer": _same_as(lambda fig: fig["suptitle"]),
    "OnlineSoftmaxExplorer": _same_as(lambda fig: "\n".join(fig["texts"])),
    "TilingExplorer": _same_as(lambda fig: "\n".join(fig["texts"])),
    "AlternativesExplorer": _alternatives,
    "WhereItLooksExplorer": _same_as(
        lambda fig: f"{fig['axes'][0]['title']}; {fig['axes'][1]['texts'][-1]}"
    ),
    "HeadMapsExplorer": _same_as(lambda fig: fig["axes"][0]["title"]),
    "MistakeExplorer": _mistake,
    "OwnSentenceExplorer": _own_sentence,
}


def check_alternative(cls: str, alt: str, values: Values, fig: Figure) -> None:
    """Raise AssertionError unless ``alt`` says what the figure of an explorer of class
    ``cls`` shows (``fig`` as `kernel_probe._browser_test_figure` reads it) at the control
    values ``values`` (attribute name -> value)."""
    assert cls in CHECKS, f"no text-alternative check for {cls}: add one to CHECKS in {__file__}"
    assert alt.strip() and "\n" not in alt, f"an alternative on one line, not {alt!r}"
    bad = [n for n in NUMBER.findall(alt) if not math.isfinite(float(n.replace("\u2212", "-")))]
    assert not bad and not re.search(r"\b(nan|inf)\b", alt, re.IGNORECASE), alt
    CHECKS[cls](alt, values, fig)


def control_values(explorer: Any, attributes: Sequence[str] | None = None) -> dict[str, Any]:
    """An explorer's control values by attribute name (``width``, ``rule``...), as the
    kernel probe reports them."""
    names = {id(value): name for name, value in vars(explorer).items()}
    chosen = [names[id(c)] for c in explorer.controls]
    return {name: getattr(explorer, name).value for name in attributes or chosen}
