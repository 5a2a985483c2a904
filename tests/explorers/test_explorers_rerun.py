"""A cell run again lets go of what it made before (`attention_course.explorers.base.CellOwned`).

An explorer, a prediction or an exercise gate made while a notebook cell runs
closes the one that cell's previous run made: its widgets (each whole tree)
leave ipywidgets' registry, and an explorer's figure is let go of. The cell
is simulated here (`running_cell` patched); without one (a script, nbval)
nothing is replaced. tests/notebooks/test_rerun_memory.py measures the
kernel's memory over re-runs in a real kernel.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import types
import weakref

import ipywidgets as widgets
import pytest
from ipywidgets.widgets.widget import _instances
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_webagg_core import TimerAsyncio

from attention_course.explorers import ScalingExplorer, ThreeStepsExplorer, VolumeKnobExplorer
from attention_course.explorers import base as explorer_base
from attention_course.explorers.base import (
    close_widgets,
    handling_widget_message,
    live_explorers,
    running_cell,
)
from attention_course.explorers.crowded_room import share_prediction
from attention_course.explorers.gate import ExerciseGate
from attention_course.explorers.registry import builds
from attention_course.explorers.reveal import predict_choice
from attention_course.explorers.trained import WhereItLooksExplorer
from attention_course.lessons.exercises import check_scale_rule


class Cells:
    """Stands in for the kernel: `run` starts a run of a cell (by id); `outside` leaves it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now: tuple[str, str] | None = None
        self.runs = 0
        monkeypatch.setattr(explorer_base, "running_cell", lambda: self.now)
        monkeypatch.setattr(explorer_base, "_MADE_IN_CELL", {})

    def run(self, cell: str) -> None:
        self.runs += 1
        self.now = (cell, f"request-{self.runs}")

    def outside(self) -> None:
        self.now = None


@pytest.fixture
def cells(monkeypatch):
    return Cells(monkeypatch)


def tree(*roots: widgets.Widget) -> list[widgets.Widget]:
    """Every widget under ``roots`` (children, layout, style), roots included."""
    found, stack = {}, list(roots)
    while stack:
        w = stack.pop()
        if id(w) in found:
            continue
        found[id(w)] = w
        for name in w.keys:
            value = getattr(w, name, None)
            held = value if isinstance(value, (list, tuple)) else (value,)
            stack.extend(v for v in held if isinstance(v, widgets.Widget))
    return list(found.values())


def open_widgets() -> set[str]:
    return set(_instances)


def is_closed(widget: widgets.Widget) -> bool:
    return widget.comm is None and all(w is not widget for w in _instances.values())


# -- which cell is running ------------------------------------------------------------------


def fake_kernel(monkeypatch, parent: dict) -> None:
    shell = types.SimpleNamespace(get_parent=lambda: parent)
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", ipython)


def test_the_running_cell_is_read_from_the_execute_request(monkeypatch):
    request = {
        "header": {"msg_id": "abc", "msg_type": "execute_request"},
        "metadata": {"cellId": "1d9d3092"},
    }
    fake_kernel(monkeypatch, request)
    assert running_cell() == ("1d9d3092", "abc")


@pytest.mark.parametrize(
    "parent",
    [
        {"header": {"msg_id": "abc", "msg_type": "execute_request"}, "metadata": {}},  # nbval
        {"header": {"msg_id": "abc", "msg_type": "comm_msg"}, "metadata": {"cellId": "x"}},
        {},
    ],
    ids=["no cell id", "a widget's message", "no request"],
)
def test_no_cell_is_running_without_a_cell_id_in_an_execute_request(monkeypatch, parent):
    fake_kernel(monkeypatch, parent)
    assert running_cell() is None


def test_no_cell_is_running_outside_a_kernel():
    assert running_cell() is None  # pytest: IPython may be imported, with no shell


@pytest.mark.parametrize(
    ("msg_type", "from_the_page"),
    [("comm_msg", True), ("execute_request", False), (None, False)],
)
def test_a_widgets_message_is_told_from_a_cell_and_from_no_request(
    monkeypatch, msg_type, from_the_page
):
    fake_kernel(monkeypatch, {"header": {"msg_type": msg_type}} if msg_type else {})
    assert handling_widget_message() is from_the_page


def test_no_widget_message_is_handled_outside_a_kernel():
    assert not handling_widget_message()


# -- explorers ------------------------------------------------------------------------------


def test_running_a_cell_again_closes_its_explorer_and_lets_go_of_its_figure(cells):
    cells.run("knob")
    old = VolumeKnobExplorer()
    box = old.widget
    held = tree(box, *old.controls)
    assert all(not is_closed(w) for w in held) and old.picture.value
    cells.run("knob")
    new = VolumeKnobExplorer()
    new_box = new.widget
    assert old.closed and not new.closed
    assert all(is_closed(w) for w in held), [type(w).__name__ for w in held if not is_closed(w)]
    assert not old.fig.axes, "the closed explorer's figure still holds its axes"
    assert not isinstance(old.fig.canvas, FigureCanvasAgg), "its canvas still holds pixels"
    assert old.picture.value == b"" and old._background is None
    assert box.children == () and box.explorer is None  # what an ``Out`` entry would hold
    assert old not in live_explorers() and new in live_explorers()
    # the new one works as before; the old one ignores a value set on its closed controls
    before = new.picture.value
    new.volume.value = 10.0
    assert new.picture.value != before and new_box.children
    old.volume.value = 10.0
    assert old.picture.value == b""


def test_a_closed_explorer_is_freed_once_nothing_else_holds_it(cells):
    cells.run("knob")
    old = VolumeKnobExplorer()
    out = old.widget  # the cell's Out entry: it outlives the explorer
    gone = weakref.ref(old)
    del old
    cells.run("knob")
    new = VolumeKnobExplorer()
    gc.collect()
    assert gone() is None, "a closed explorer is still held (by its widgets' registry?)"
    assert out.comm is None and new.widget.comm is not None


# the loop closes with the timers' tasks never run, as the test means it to
@pytest.mark.filterwarnings("ignore:coroutine 'TimerAsyncio._timer_task' was never awaited")
@pytest.mark.parametrize("build", [VolumeKnobExplorer, WhereItLooksExplorer])  # + its prefetch
def test_a_closed_explorer_is_freed_beside_an_event_loop_that_never_runs(
    cells, build, kernel_process
):
    """A timer's task, even cancelled, waits on its loop until the loop runs again. On a
    kernel's loop that is soon; taken for one here, a loop that never runs (as playwright's
    sync API leaves its loop set): the tasks must not keep a closed explorer."""
    loop, before = asyncio.new_event_loop(), asyncio._get_running_loop()  # playwright's?
    asyncio._set_running_loop(loop)  # what playwright's sync API leaves set
    try:
        cells.run("knob")
        old = build()
        old.blit = True
        old.fig.canvas.draw()  # a full draw: the background (and any prefetch) on a timer
        assert isinstance(old.fig.canvas.new_timer(), TimerAsyncio) and old._timers
        gone = weakref.ref(old)
        del old
        cells.run("knob")
        build()
        gc.collect()
        assert gone() is None, "a timer's task on the loop keeps the closed explorer"
    finally:
        asyncio._set_running_loop(before)  # a browser test's, in the same worker, kept
        loop.close()


def test_what_one_run_made_stays_together_and_other_cells_keep_theirs(cells):
    cells.run("two")
    first, second = VolumeKnobExplorer(), VolumeKnobExplorer()
    cells.run("other")
    other = VolumeKnobExplorer()
    assert not (first.closed or second.closed or other.closed)  # one run, or another cell
    cells.run("two")
    third = VolumeKnobExplorer()
    assert first.closed and second.closed and not (third.closed or other.closed)


def test_without_a_cell_nothing_is_replaced(cells):
    cells.outside()
    made = [VolumeKnobExplorer() for _ in range(2)]
    assert not any(e.closed for e in made)


@pytest.mark.parametrize(
    "test_id",
    [
        pytest.param(test_id, marks=[pytest.mark.slow] if e.loads_model else [])
        for test_id, (e, _) in builds(loads_model=None).items()
    ],
)
def test_every_explorer_made_again_in_its_cell_leaves_no_widget_open(cells, test_id):
    """Some explorers lay out their own rows of controls (`widget`): the row they replace
    is closed with the rest."""
    _, build = builds(loads_model=None)[test_id]
    already = open_widgets()
    cells.run("cell")
    first = build()
    first.widget  # noqa: B018 (displayed, as the cell displays it)
    opened = open_widgets() - already
    cells.run("cell")
    second = build()
    second.widget  # noqa: B018
    assert first.closed and opened
    lingering = opened & open_widgets()
    assert not lingering, [type(_instances[m]).__name__ for m in lingering]


# -- predictions and gates ------------------------------------------------------------------


def test_running_a_cell_again_closes_its_prediction_and_what_it_reveals(cells):
    cells.run("guess")
    old = share_prediction("dog")
    held = tree(old.widget, old.guess)
    assert old.reveal in held
    cells.run("guess")
    new = share_prediction("dog")
    assert old.closed and all(is_closed(w) for w in held)
    new.guess.value = 50
    new.button.click()
    assert new.locked and new.result.layout.display is None


def test_a_replaced_explorer_waiting_on_a_guess_is_not_called_nor_kept(cells):
    cells.run("guess")
    guess = share_prediction("dog")
    cells.run("steps")
    old = ThreeStepsExplorer(after=guess)
    old.widget  # noqa: B018
    gone = weakref.ref(old)
    del old
    cells.run("steps")
    new = ThreeStepsExplorer(after=guess)
    new.widget  # noqa: B018
    gc.collect()
    assert gone() is None, "the guess keeps the replaced explorer alive"
    assert new.withheld
    guess.guess.value = 60
    guess.lock()
    assert not new.withheld


def test_a_callback_that_is_not_a_method_is_kept(cells):
    cells.outside()
    called = []
    prediction = predict_choice("which?", ["a", "b"], lambda: "a")
    prediction.when_locked(lambda: called.append(1))
    gc.collect()
    prediction.guess.value = "b"
    prediction.lock()
    assert called == [1]


def test_running_a_cell_again_closes_its_exercise_gate(cells):
    cells.run("gate")
    old = ExerciseGate(check_scale_rule)
    held = tree(old.widget)
    cells.run("attempt")
    old.attempt(lambda d: d**-0.5)  # another cell uses it: it stays open
    assert not old.closed
    cells.run("gate")
    new = ExerciseGate(check_scale_rule)
    assert old.closed and all(is_closed(w) for w in held)
    assert not new.closed and new.hint() == new.solution.hints[0]


def test_an_unknown_exercise_closes_nothing(cells):
    cells.run("gate")
    old = ExerciseGate(check_scale_rule)
    cells.run("gate")
    with pytest.raises(KeyError):
        ExerciseGate("no such exercise")
    assert not old.closed


def test_closing_a_tree_closes_every_widget_under_it_once():
    inner = widgets.HBox([widgets.IntSlider(), widgets.Button()])
    outer = widgets.VBox([inner, widgets.HTML("x"), inner.children[0]])
    held = tree(outer)
    close_widgets([outer, "not a widget"])
    assert all(is_closed(w) for w in held) and outer.children == () and inner.children == ()


def test_the_scaling_explorer_box_in_out_holds_nothing_once_closed(cells):
    """02 shows ``explorer.widget`` as a cell's value: ``Out`` keeps the box."""
    cells.run("scaling")
    old = ScalingExplorer(trials=300)
    out = old.widget
    cells.run("scaling")
    ScalingExplorer(trials=300)
    assert out.children == () and out.explorer is None and out._repr_mimebundle_ is None


@pytest.fixture
def shell():
    """A real IPython shell (no history file): its display hook records each cell's value's
    whole bundle in ``history_manager.outputs``, as the kernel's does."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    hooks = sys.displayhook, sys.excepthook  # the shell takes them over
    made = InteractiveShell.instance(config=config)
    yield made
    InteractiveShell.clear_instance()
    sys.displayhook, sys.excepthook = hooks


def _recorded(shell) -> list[dict]:
    outputs = shell.history_manager.outputs.values()
    return [output.bundle for recorded in outputs for output in recorded]


def test_a_closed_box_leaves_ipythons_record_of_outputs_without_its_still(cells, shell):
    """IPython 9 keeps each output's bundle for the kernel's life: a cell whose value is an
    explorer's box, run again, would keep one still PNG per run."""
    cells.run("knob")
    shell.user_ns["knob"] = VolumeKnobExplorer()
    shell.run_cell("knob.widget", store_history=True)
    (bundle,) = [b for b in _recorded(shell) if "al-still" in b.get("text/html", "")]
    cells.run("knob")
    VolumeKnobExplorer()  # the cell's next run closes the first and its box
    assert shell.user_ns["knob"].closed
    assert not any("al-still" in b.get("text/html", "") for b in _recorded(shell))
    assert "text/html" not in bundle and bundle["text/plain"].startswith("Share of your attention")


def test_an_open_box_keeps_its_still_in_the_record(cells, shell):
    cells.run("knob")
    shell.user_ns["knob"] = VolumeKnobExplorer()
    shell.run_cell("knob.widget", store_history=True)
    cells.run("other")
    VolumeKnobExplorer()
    assert [b for b in _recorded(shell) if "al-still" in b.get("text/html", "")]
