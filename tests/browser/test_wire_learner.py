"""`labdriver.wire`: a learner on the wire, the class-load benchmark's learners beyond its browsers.

The parsing and the slider arithmetic are pinned against jupyter_server's own
serialiser and ipywidgets' sliders; then a learner runs 01 on a real
JupyterLab (the tests' scratch lab, with its token) and moves a slider: the
kernel holds the value sent, and the frame that answers it is a new PNG.
"""

from __future__ import annotations

import json
import time

import pytest
from jupyter_server.services.kernels.connection.base import serialize_binary_message

import labdriver
from labdriver.wire import WireLearner, next_value, parse_frame

NOTEBOOK = "01_beginner_crowded_room.ipynb"


def test_a_binary_frame_gives_the_message_and_its_buffers():
    msg = {"header": {"msg_type": "comm_msg"}, "content": {"data": {"buffer_paths": [["value"]]}}}
    frame = serialize_binary_message(msg | {"buffers": [b"\x89PNG one", b"two"]})
    parsed = parse_frame(frame)
    assert parsed["buffers"] == [b"\x89PNG one", b"two"]
    assert parsed["content"] == msg["content"]
    assert parse_frame(json.dumps(msg)) == msg  # a text frame is plain JSON


@pytest.mark.parametrize(
    ("model", "state", "direction", "expected"),
    [
        ("IntSliderModel", {"value": 4, "min": 1, "max": 5, "step": 1}, 1, 5),
        ("IntSliderModel", {"value": 5, "min": 1, "max": 5, "step": 1}, 1, 5),  # held at max
        ("FloatSliderModel", {"value": 0.3, "min": 0.0, "max": 1.0, "step": 0.1}, -1, 0.2),
        ("FloatSliderModel", {"value": 0.05, "min": 0.0, "max": 1.0, "step": 0.1}, -1, 0.0),
        # a log slider steps its exponent: 10 ** (1 + 0.5)
        ("FloatLogSliderModel", {"value": 10.0, "min": -1, "max": 2, "step": 0.5, "base": 10}, 1,
         10**1.5),
    ],
)  # fmt: skip
def test_an_arrow_key_moves_a_slider_one_step_within_its_range(model, state, direction, expected):
    assert next_value(state, model, direction) == pytest.approx(expected)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with labdriver.scratch_lab(tmp_path_factory.mktemp("wire")) as server:
        yield server


def test_a_learner_on_the_wire_runs_01_and_moves_its_sliders(lab):
    learner = WireLearner.with_token(lab.url, lab.token)
    try:
        learner.open(NOTEBOOK)
        seconds, errors = learner.run_all()
        assert errors == [] and seconds > 0
        sliders = learner.sliders()
        described = {s.state["description"] for s in sliders}
        assert "room volume" in described, described  # 01's first explorer's slider
        frames = set()
        for slider in sliders:
            before = slider.state["value"]
            direction = -1 if before >= slider.state["max"] else 1
            times = learner.press(slider, direction)
            assert times is not None, f"no frame after moving {slider.state['description']!r}"
            assert times["input"] < times["frame"] == times["draw"]
            assert learner.last_frame.startswith(b"\x89PNG")
            frames.add(learner.last_frame)
            # the kernel holds the value the learner sent
            printed, _ = learner.execute(
                f"import ipywidgets\nprint(ipywidgets.Widget.widgets[{slider.comm_id!r}].value)"
            )
            assert float(printed) == pytest.approx(slider.state["value"])
            assert slider.state["value"] != before
        assert len(frames) == len(sliders), "each move sent a picture of its own"
    finally:
        learner.close()


def test_execute_gives_what_a_cell_printed_and_the_error_it_raised(lab):
    learner = WireLearner.with_token(lab.url, lab.token)
    try:
        learner.open("00_start_here.ipynb")
        printed, errors = learner.execute("print(6 * 7)")
        assert printed == "42\n" and errors == []
        _, errors = learner.execute("1 / 0")
        assert errors == ["ZeroDivisionError: division by zero"]
    finally:
        learner.close()


def test_a_learner_who_reads_for_a_while_keeps_its_kernels_socket(tmp_path):
    """The server closes a websocket whose pings go unanswered (here after 1.5 s; 90 s by
    default, less than a class waits for its last learner): the learner answers them while
    it reads, and its next cell runs."""
    root = labdriver.copy_notebooks(tmp_path / "notebooks")
    pings = "--ServerApp.tornado_settings={'ws_ping_interval': 300, 'ws_ping_timeout': 1500}"
    with labdriver.running_lab(
        tmp_path, token=labdriver.random_token(), root_dir=root, extra_args=[pings]
    ) as server:
        learner = WireLearner.with_token(server.url, server.token)
        try:
            learner.open("00_start_here.ipynb")
            time.sleep(4.0)  # reading, sending nothing
            assert learner.execute("print(6 * 7)") == ("42\n", [])
        finally:
            learner.close()
