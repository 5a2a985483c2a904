"""A long session holds steady: re-running a cell that makes an explorer, an exercise gate or
a prediction releases the one it made before (`attention_course.explorers.base.replaces_in_cell`).

Measured as a learner makes it: one kernel (jupyter_client, as nbval starts one; cwd
notebooks/) runs notebooks 01 and 02 top to bottom, each cell sent with its id in the
request's metadata as JupyterLab sends it (``cellId``), then re-runs every cell of theirs
that makes or shows an explorer, a gate or a prediction, found by its source, `RERUNS` times
each. The kernel's USS (its own pages, psutil) after the first re-run and after the last must
differ by at most `BOUND_MIB`: before the fix each re-run kept its figure, widgets and PNG
bytes, and the same run grew by hundreds of MiB.

    .venv/bin/python -m pytest -p no:cacheprovider -q -s tests/notebooks/test_rerun_memory.py
"""

from __future__ import annotations

import json
import queue
import re
import time
from pathlib import Path

import psutil
import pytest
from jupyter_client.manager import start_new_kernel

from attention_course.explorers.registry import REGISTRY

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = ("01_beginner_crowded_room.ipynb", "02_developer_scaling.ipynb")
RERUNS = 30
BOUND_MIB = 20.0
MiB = 2**20
TIMEOUT_S = 300

#: a cell that makes an explorer, a prediction or a gate, shows one, or attempts a gate
RERUN = re.compile(
    r"=\s*\w+Explorer\(|_prediction\(|ExerciseGate\(|^\s*\w+\.widget\s*$|display\(\w+\.widget\)"
    r"|\.attempt\(",
    re.MULTILINE,
)


def code_cells(notebook: str) -> list[dict]:
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    return [cell for cell in cells if cell["cell_type"] == "code"]


def rerun_cells() -> list[dict]:
    """The cells of 01 and 02 to re-run, in page order."""
    cells = [cell for name in SOURCES for cell in code_cells(name)]
    return [cell for cell in cells if RERUN.search("".join(cell["source"]))]


class Kernel:
    """A kernel (cwd notebooks/) that runs cells as JupyterLab sends them: with their id."""

    def __init__(self) -> None:
        self.manager, self.client = start_new_kernel(kernel_name="python3", cwd=str(NOTEBOOKS))
        self.process = psutil.Process(self.manager.provisioner.process.pid)

    def run(self, cell: dict, store_history: bool = True) -> None:
        """Run ``cell``; raise if it raised (unless it is tagged raises-exception)."""
        content = {"code": "".join(cell["source"]), "silent": False}
        content["store_history"] = store_history
        content |= {"user_expressions": {}, "allow_stdin": False, "stop_on_error": True}
        msg = self.client.session.msg("execute_request", content)
        msg["metadata"]["cellId"] = cell.get("id", "")
        self.client.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        while True:
            reply = self.client.get_shell_msg(timeout=TIMEOUT_S)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        self._drain(msg_id)
        if reply["content"]["status"] != "ok":
            if "raises-exception" not in cell["metadata"].get("tags", []):
                trace = "\n".join(reply["content"].get("traceback", []))
                raise RuntimeError(f"cell {cell.get('id')} raised:\n{trace}")

    def _drain(self, msg_id: str) -> None:
        """Read iopub up to this request's idle status."""
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=TIMEOUT_S)
            except queue.Empty:
                return
            if (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            ):
                return

    def uss_mib(self, idle_s: float = 1.0, settle: bool = True) -> float:
        """The kernel's USS at rest: idle ``idle_s`` (its timers have fired), then its garbage
        collected as an explorer has it collected once the kernel is idle after a draw
        (`settle_long_lived`), so that when a collection last ran does not count."""
        time.sleep(idle_s)
        if settle:
            code = (
                "from attention_course.explorers.base import settle_long_lived; settle_long_lived()"
            )
            self.run({"source": code, "metadata": {}}, store_history=False)
        return self.process.memory_full_info().uss / MiB

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def measure(reruns: int = RERUNS) -> dict:
    """Run 01 and 02, then their explorer, gate and prediction cells ``reruns`` times; the
    kernel's USS (MiB) after the imports, the Run All, the first re-run and the last."""
    kernel = Kernel()
    try:
        figures = {"start": kernel.uss_mib(0, settle=False)}  # ipykernel's imports only
        for name in SOURCES:
            for cell in code_cells(name):
                kernel.run(cell)
        figures["run_all"] = kernel.uss_mib()
        cells = rerun_cells()
        figures["cells"] = len(cells)
        for rerun in range(reruns):
            for cell in cells:
                kernel.run(cell)
            if rerun == 0:
                figures["first_rerun"] = kernel.uss_mib()
        figures["last_rerun"] = kernel.uss_mib()
    finally:
        kernel.close()
    figures["growth"] = figures["last_rerun"] - figures["first_rerun"]
    return figures


def test_the_cells_to_rerun_are_found():
    """Every explorer the registry says 01 and 02 show, their predictions and 02's gates."""
    found = "\n".join("".join(cell["source"]) for cell in rerun_cells())
    shown = {e.name for e in REGISTRY for name in e.shown_in if f"{name}.ipynb" in SOURCES}
    assert shown and all(f"{name}(" in found for name in shown), (shown, found)
    assert found.count("_prediction(") >= 2 and found.count("ExerciseGate(") >= 5, found


@pytest.mark.slow
def test_rerunning_cells_30_times_holds_memory_steady():
    figures = measure()
    print(
        f"\nkernel USS, MiB: start {figures['start']:.1f}, after Run All {figures['run_all']:.1f}, "
        f"after re-running {figures['cells']} cells once {figures['first_rerun']:.1f}, "
        f"{RERUNS} times {figures['last_rerun']:.1f} (growth {figures['growth']:+.1f})"
    )
    assert figures["growth"] <= BOUND_MIB, figures


if __name__ == "__main__":
    import sys

    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else RERUNS), indent=1))
