"""Notebook 00's environment check: its lines, its refusals, and torch kept out of the kernel."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from attention_course.lessons import environment
from labdriver import REPO


def test_the_report_names_the_versions_and_passes_numpy_against_torch():
    import numpy as np
    import torch

    import attention_lib

    lines = environment.report_lines()
    assert lines[:4] == [
        f"python        {sys.version.split()[0]}",
        f"numpy         {np.__version__}",
        f"torch         {torch.__version__}",
        f"attention_lib {attention_lib.__version__}",
    ]
    assert lines[4] == "torch device  cpu (no GPU found, the CPU will do)"
    assert lines[5] == (
        "a tiny attention step in numpy and in torch on cpu: the same shares, "
        "and every row adds up to one"
    )
    assert lines[-1] == environment.ALL_GOOD == "environment OK"


@pytest.mark.slow  # make check's, not make test's (seconds)
def test_the_check_prints_the_childs_report_and_the_caller_never_imports_torch():
    # a fresh interpreter, as a kernel: after the check, torch is still not loaded there
    code = textwrap.dedent(
        """
        import io, json, sys, contextlib
        from attention_course.lessons import environment
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            environment.check()
        print(json.dumps({"torch": "torch" in sys.modules, "printed": out.getvalue()}))
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    held = json.loads(ran.stdout.splitlines()[-1])
    assert held["torch"] is False
    printed = held["printed"].splitlines()
    assert printed[0].startswith("python        3.")
    assert printed[-1] == "environment OK"
    assert len(printed) == 7


def test_a_missing_torch_stops_the_check_with_the_childs_own_error(tmp_path, monkeypatch, capsys):
    # a torch that cannot be imported, ahead of the real one on the child's path
    (tmp_path / "torch.py").write_text("raise ImportError('no torch in this environment (test)')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(RuntimeError) as refused:
        environment.check()
    message = str(refused.value)
    assert message.startswith(f"the environment check failed in {sys.executable} (exit status 1)")
    assert "ImportError: no torch in this environment (test)" in message
    assert "environment OK" not in capsys.readouterr().out


def test_a_check_past_its_time_is_refused_with_the_time():
    finish = r"attention_course\.lessons\.environment\) did not finish in 0\.01 s"
    with pytest.raises(RuntimeError, match=finish):
        environment.check(timeout=0.01)
