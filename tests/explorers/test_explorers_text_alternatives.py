"""Every explorer picture says what it shows: its text alternative, at every control setting.

An explorer's text alternative is `Explorer.describe` (on one line). Displayed,
it goes into the HTML widget under the picture (class ``al-alt``, the live
region the course's lab extension announces): with the first frame, and in a
kernel once a run of moves has rested, outside one (here) with each frame;
the still picture of the display bundle carries it as its ``alt`` and as its
``text/plain``. Here, in-process, for every explorer the registry builds:

- at the first frame and after every control is set to each end of its range
  (and to each option of a toggle or dropdown), the widget shows exactly the
  explorer's `describe`, and that text says the numbers the figure draws there
  (`labdriver.alternatives.check_alternative`, the check the browser test runs
  on the page after each move);
- the check itself catches an alternative whose numbers are not the picture's;
- the display bundle's still picture has the alternative as its ``alt``, a
  later bundle the later one;
- the picture and its alternative are direct children of a box of class
  ``al-described`` (what the extension reads); an answer's picture likewise.
"""

from __future__ import annotations

import asyncio
import html
import re
import threading
import types

import ipywidgets as widgets
import numpy as np
import pytest

from attention_course.explorers import ThreeStepsExplorer, VolumeKnobExplorer
from attention_course.explorers import base as explorer_base
from attention_course.explorers.base import ALT, DESCRIBED, one_line
from attention_course.explorers.canvas import STILL_NOTE
from attention_course.explorers.crowded_room import share_prediction
from attention_course.explorers.gradients import spread_prediction
from attention_course.explorers.registry import REGISTRY, builds
from attention_course.explorers.reveal import answer_picture
from labdriver.alternatives import CHECKS, check_alternative, control_values
from labdriver.kernel_probe import _browser_test_figure

pytestmark = pytest.mark.filterwarnings("error")

EXPLORERS = {test_id: build for test_id, (_, build) in builds().items()}
MODEL_EXPLORERS = {test_id: build for test_id, (_, build) in builds(loads_model=True).items()}


def settings(control: widgets.Widget) -> list[object]:
    """The values a test sets ``control`` to: both ends of a slider, the other options of a
    toggle or a dropdown (three at most) and back, the other state of a checkbox and back,
    a text box's three kinds of bad input and back."""
    if isinstance(control, widgets.FloatLogSlider):
        return [control.base**control.max, control.base**control.min]
    if isinstance(control, (widgets.IntSlider, widgets.FloatSlider)):
        return [control.max, control.min]
    if isinstance(control, widgets.Checkbox):
        return [not control.value, control.value]
    if isinstance(control, widgets.Text):  # empty, an unknown word, too long, then back
        return ["", "the dgo saw it", " ".join(["the dog"] * 20), control.value]
    options = [value for _, value in control._options_full]
    if isinstance(control, widgets.SelectionSlider):
        return [options[-1], options[0]]
    return [*[o for o in options if o != control.value][:3], control.value]


def shown(explorer) -> str:
    """The alternative the page gets: the widget's text, unescaped."""
    return html.unescape(explorer.alt.value)


def check_now(explorer, where: str) -> None:
    alt = one_line(explorer.describe())
    assert shown(explorer) == alt, f"{where}: the widget shows {shown(explorer)!r}, not {alt!r}"
    try:
        check_alternative(
            type(explorer).__name__,
            alt,
            control_values(explorer),
            _browser_test_figure(explorer.fig),
        )
    except AssertionError as error:
        raise AssertionError(f"{where}: {error}") from error


def check_every_setting(explorer) -> int:
    """Set every control to each of its `settings` in turn, checking after each; returns
    how many settings were checked."""
    assert explorer.widget.children  # displayed: every move sends a frame and its alternative
    check_now(explorer, "first frame")
    checked = 1
    for control in list(explorer.controls):
        for value in settings(control):
            control.value = value
            check_now(explorer, f"{control.description or type(control).__name__} = {value!r}")
            checked += 1
    return checked


@pytest.mark.parametrize("name", list(EXPLORERS))
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_alternative_says_the_pictures_numbers_at_every_setting(name):
    assert check_every_setting(EXPLORERS[name]()) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODEL_EXPLORERS))
def test_the_trained_models_explorers_say_their_numbers_too(name):
    assert check_every_setting(MODEL_EXPLORERS[name]()) >= 3


def test_every_registered_explorer_has_an_alternative_check():
    assert set(CHECKS) == {e.name for e in REGISTRY}


def test_the_volume_knob_says_each_friends_share_and_the_volume():
    explorer = VolumeKnobExplorer()
    assert explorer.describe() == (
        "Share of your attention: Ana 56%, Ben 21%, Chloe 13%, Dev 7.6%, Eli 2.8%; volume ×1.00"
    )
    explorer.volume.value = 100.0
    assert explorer.describe().endswith("; volume ×100.00")
    assert explorer.describe().startswith("Share of your attention: Ana 100%, Ben <0.001%")


@pytest.mark.parametrize(
    ("wrong", "why"),
    [
        (lambda alt: alt.replace("56%", "21%", 1), "a share that is not its bar's label"),
        (lambda alt: alt.replace("×1.00", "×2.00"), "a volume the slider is not at"),
    ],
)
def test_the_check_catches_an_alternative_that_is_not_the_picture(wrong, why):
    explorer = VolumeKnobExplorer()
    alt = one_line(explorer.describe())
    figure, values = _browser_test_figure(explorer.fig), control_values(explorer)
    check_alternative("VolumeKnobExplorer", alt, values, figure)
    with pytest.raises(AssertionError):
        check_alternative("VolumeKnobExplorer", wrong(alt), values, figure)
    with pytest.raises(AssertionError, match="one line"):
        check_alternative("VolumeKnobExplorer", alt.replace("; ", "\n"), values, figure)


def test_steps_three_and_four_say_nothing_until_the_guess_is_locked_in():
    guess = share_prediction()
    explorer = ThreeStepsExplorer(after=guess)
    assert explorer.widget.children
    withheld = shown(explorer)
    assert "3 and 4 wait for your guess above" in withheld
    assert "shares" not in withheld and "closest" not in withheld
    guess.lock()
    assert "3, shares: the 0.14, dog 0.57, barked 0.14, it 0.15" in shown(explorer)
    assert shown(explorer).endswith('4, the new "it" is closest to "dog"')


@pytest.fixture
def in_a_kernel(kernel_process, monkeypatch):
    """This process taken for a kernel's (`kernel_process`), handling the request
    ``in_a_kernel.parent`` (a widget's message from the page unless changed)."""
    request = types.SimpleNamespace(parent={"header": {"msg_type": "comm_msg"}})
    monkeypatch.setattr(explorer_base, "_kernel_request", lambda: request.parent)
    return request


def test_in_a_kernel_a_moves_alternative_follows_once_the_control_rests(in_a_kernel, monkeypatch):
    """The frame goes at once; its alternative `ALT_AFTER_MS` later, once for a run of
    moves (each starts the wait again), saying where the run stopped. The first frame is
    described as it is shown. Sent with each frame, the page handled the alternative in the
    picture's frame and the move reached the screen later (benchmarks/latency.py)."""
    wait = 0.3  # s: the moves below come a sixth of it apart, for twice as long
    monkeypatch.setattr(explorer_base, "ALT_AFTER_MS", 1000 * wait)
    explorer = VolumeKnobExplorer()
    sent: list[str] = []

    async def kernel() -> None:  # cells and widget messages run on the kernel's loop
        box = explorer.widget
        assert box.children and shown(explorer) == one_line(explorer.describe())
        explorer.alt.observe(lambda change: sent.append(change["new"]), names="value")
        first = explorer.picture.value
        for volume in np.geomspace(2.0, 32.0, 12):  # a run of key presses
            explorer.volume.value = float(volume)
            await asyncio.sleep(wait / 6)
        assert explorer.picture.value != first, "the frame waited for its alternative"
        assert sent == [], "an alternative was sent while the moves kept coming"
        await asyncio.sleep(2 * wait)
        assert [html.unescape(text) for text in sent] == [one_line(explorer.describe())]
        assert shown(explorer).endswith("volume ×32.00")
        explorer.volume.value = 1.0
        explorer.close()  # closed before the wait is over: nothing more is sent
        await asyncio.sleep(2 * wait)

    in_a_thread(kernel)  # the test process's main thread may hold a loop already
    assert len(sent) == 1


def test_a_cells_code_sends_the_alternative_with_the_frame(in_a_kernel):
    """A cell that sets a control (01 measures the volume knob's two ends): its outputs and
    the widgets' state are saved as it ends (nbconvert's), the alternative with them."""
    in_a_kernel.parent = {"header": {"msg_type": "execute_request"}}
    described_at_once_on_a_loop()


def test_outside_a_kernel_the_alternative_follows_each_move_at_once():
    """No kernel's loop: no timer would fire (a test, a script, a loop playwright left
    set), so the alternative is sent with the frame."""
    explorer = described_at_once_on_a_loop()
    explorer.volume.value = 2.0  # and with no loop at all
    assert shown(explorer).endswith("volume ×2.00")


def described_at_once_on_a_loop() -> VolumeKnobExplorer:
    """A displayed volume knob set on an event loop, its alternative checked as the move
    returns (no wait)."""
    explorer = VolumeKnobExplorer()
    assert explorer.widget.children

    async def move() -> None:
        explorer.volume.value = 8.0
        assert shown(explorer).endswith("volume ×8.00")

    in_a_thread(move)
    return explorer


def in_a_thread(coroutine) -> None:
    """Run ``coroutine()`` on a new event loop in a thread of its own; re-raise its error."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(coroutine())
        except BaseException as error:  # handed to the test's thread
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("name", list(EXPLORERS))
@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_picture_and_its_alternative_sit_side_by_side_in_a_described_box(name):
    explorer = EXPLORERS[name]()
    box = explorer.widget
    assert {"al-explorer", DESCRIBED} <= set(box._dom_classes)
    assert explorer.picture in box.children and explorer.alt in box.children
    assert ALT in explorer.alt._dom_classes
    assert explorer.alt.value, "the first frame came without its alternative"


@pytest.mark.parametrize("name", ["VolumeKnob", "Scaling", "Tiling"])
def test_the_still_picture_carries_the_alternative_of_its_moment(name):
    explorer = EXPLORERS[name]()
    box = explorer.widget
    first = box._repr_mimebundle_()
    alt = one_line(explorer.describe())
    assert f'alt="{html.escape(alt)}"' in first["text/html"]
    assert first["text/plain"] == f"{alt}\n{STILL_NOTE}"
    control = next(c for c in explorer.controls if not isinstance(c, widgets.Checkbox))
    control.value = settings(control)[0]
    later = one_line(explorer.describe())
    assert later != alt, "the move changed nothing the alternative says"
    assert f'alt="{html.escape(later)}"' in box._repr_mimebundle_()["text/html"]


def test_an_answers_picture_needs_and_carries_its_alternative():
    png = VolumeKnobExplorer().still()
    box = answer_picture(png, alt="Bars: a 50%, b 50%", width=840)
    picture, alt = box.children
    assert isinstance(picture, widgets.Image) and picture.value == png
    assert DESCRIBED in box._dom_classes and ALT in alt._dom_classes
    assert html.unescape(alt.value) == "Bars: a 50%, b 50%"
    with pytest.raises(ValueError, match="text alternative"):
        answer_picture(png, alt=" ")


def test_the_predictions_pictures_say_their_numbers():
    shares = share_prediction().reveal.children[0]  # the picture's box, above the numbers
    said = html.unescape(shares.children[1].value)
    assert said == (
        '"it" gives most of its attention to "dog" (57%); shares: the 14%, dog 57%, '
        "barked 14%, it 15%"
    )
    spread = html.unescape(spread_prediction().reveal.children[1].value)
    stds = [float(x) for x in re.findall(r"std ([\d.]+)", spread)]
    assert spread.startswith("Histograms: 5,000 random query-key pairs of width d = 256")
    assert len(stds) == 2 and np.isclose(stds[0] / stds[1], 16, rtol=0.01), spread
