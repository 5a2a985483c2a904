"""The routes into the course without Linux's tools: Colab's set-up cell and links, and the
make-free commands (``python -m course lab``, ``python -m course test``) for Windows.

- The set-up cell that opens every notebook, both ways: outside Colab it runs
  nothing and prints nothing (so nbval sees no output); under a stand-in
  ``google.colab`` module it runs exactly the pip command that installs this
  course at the notebook's version without touching torch. The cells and the
  addresses in README.md and docs/teachers.md are generated from pyproject.toml and
  must be current.
- ``python -m course lab`` and ``python -m course test`` run with ``make``
  absent from ``PATH``, started by the system's own Python as a Windows learner
  starts them; nothing on a learner's path is a shell script.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path
from urllib.parse import quote

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest

import labdriver
from course import colab

REPO = labdriver.REPO
NEW_ADDRESS = "https://github.com/someone-else/attention-notes"
NOTEBOOKS = labdriver.numbered_notebooks()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
#: where the course is published and its version, read here on their own (not by course.project)
ADDRESS = PYPROJECT["project"]["urls"]["Repository"].removesuffix("/")
VERSION = PYPROJECT["project"]["version"]
#: the command that a learner's Colab runs for this version of the course: the library from its
#: folder, the course beside it, their requirements resolved by pip against what Colab has
EXPECTED_INSTALL = [
    "-m",
    "pip",
    "install",
    "--quiet",
    f"attention-lib @ git+{ADDRESS}@v{VERSION}#subdirectory=lib",
    f"attention-course @ git+{ADDRESS}@v{VERSION}",
]
#: what a Colab runtime brings that the course needs (Colab's runtime of 2025-26, the oldest of
#: each the course is checked with: ipywidgets 7.7.1 by the browser test of ipywidgets 7)
COLAB_HAS = {
    "torch": "2.6.0",
    "numpy": "2.0.2",
    "matplotlib": "3.10.0",
    "ipywidgets": "7.7.1",
    "psutil": "5.9.5",
    "tqdm": "4.67.1",
}


def run_setup_cell(monkeypatch, under_colab: bool) -> tuple[list[list[str]], str]:
    """Run the set-up cell's code as a kernel would; (commands it ran, what it printed)."""
    ran: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda args, **_: ran.append(list(args)))
    if under_colab:
        google = types.ModuleType("google")
        google.colab = types.ModuleType("google.colab")
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", google.colab)
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        exec(compile(colab.setup_cell_source(), "<setup cell>", "exec"), {})
    return ran, printed.getvalue()


def test_outside_colab_the_setup_cell_runs_and_prints_nothing(monkeypatch):
    ran, printed = run_setup_cell(monkeypatch, under_colab=False)
    assert ran == [] and printed == ""


def test_under_colab_the_setup_cell_installs_this_version_without_torch(monkeypatch):
    ran, _ = run_setup_cell(monkeypatch, under_colab=True)
    assert ran == [[sys.executable, *EXPECTED_INSTALL]]
    assert not any("torch" in arg for arg in ran[0]), "Colab's own torch stays"


def test_colabs_own_packages_meet_every_requirement_so_pip_replaces_none():
    """The Colab cell resolves the two packages' requirements: each is a range that Colab's
    own version meets, so pip adds what is missing (array-api-compat, isal) and keeps
    Colab's torch and ipywidgets."""
    from packaging.requirements import Requirement

    library = tomllib.loads((REPO / "lib" / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    wanted += [Requirement(r) for r in library["project"]["dependencies"]]
    wanted += [Requirement(r) for r in library["project"]["optional-dependencies"]["torch"]]
    checked = set()
    for requirement in wanted:
        if requirement.name in COLAB_HAS:
            version = COLAB_HAS[requirement.name]
            assert requirement.specifier.contains(version), (str(requirement), version)
            checked.add(requirement.name)
    assert checked == set(COLAB_HAS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_opens_with_the_current_setup_cell(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    first = next(c for c in cells if c["cell_type"] == "code")
    assert colab.SETUP_TAG in first["metadata"]["tags"]
    assert "".join(first["source"]) == colab.setup_cell_source().rstrip("\n")
    assert first["outputs"] == [], "elsewhere than Colab the cell prints nothing"


def test_the_cells_and_links_are_generated_from_pyproject():
    assert colab.main(["--check"]) == 0, "run python -m course colab"
    assert set(colab.REGIONS.values()) == {"README.md", "docs/teachers.md"}
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    teachers = (REPO / "docs" / "teachers.md").read_text(encoding="utf-8")
    github = ADDRESS.removeprefix("https://github.com/")
    for path in NOTEBOOKS:
        link = (
            f"https://colab.research.google.com/github/{github}/blob/v{VERSION}"
            f"/notebooks/{path.name}"
        )
        assert f"[{path.stem}]({link})" in readme, f"no Open in Colab link for {path.name}"
    assert f"https://mybinder.org/v2/gh/{github}/v{VERSION}?urlpath=" in readme
    assert f"git clone {ADDRESS} && cd {github.split('/')[1]}" in teachers


def test_publishing_elsewhere_is_one_edit_and_one_command(tmp_path):
    """A copy of the course whose pyproject.toml names another address: after
    ``python -m course colab`` no address in README.md or docs/teachers.md, and no
    notebook, names the old one."""
    for part in ("course", "notebooks", "README.md", "docs/teachers.md", "pyproject.toml"):
        source = REPO / part
        copy = shutil.copytree if source.is_dir() else shutil.copy2
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        copy(source, tmp_path / part)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8").replace(ADDRESS, NEW_ADDRESS))
    done = subprocess.run(
        [sys.executable, "-m", "course", "colab"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    old, new = ADDRESS.removeprefix("https://github.com/"), "someone-else/attention-notes"
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    teachers = (tmp_path / "docs" / "teachers.md").read_text(encoding="utf-8")
    notebooks = [p.read_text(encoding="utf-8") for p in tmp_path.glob("notebooks/*")]
    for text in [readme, teachers, *notebooks]:
        assert old not in text and quote(old, safe="") not in text
    assert readme.count(new) >= len(NOTEBOOKS) + 1  # the Colab links, the Binder badge
    assert f"git clone {NEW_ADDRESS} && cd attention-notes" in teachers  # the clone command
    assert quote(NEW_ADDRESS, safe="") in teachers  # the hub's nbgitpuller link


def test_no_shell_script_on_a_learners_path():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    scripts = [
        name
        for name in tracked
        if (REPO / name).is_file()
        and (REPO / name).read_bytes()[:32].startswith((b"#!/bin/bash", b"#!/usr/bin/env bash"))
    ]
    # CI's entry point and Binder's build step run on Linux build machines, never a learner's
    on_build_machines = (".ci/", "binder/")
    assert [s for s in scripts if not s.startswith(on_build_machines)] == [], "bash for learners"


# -- without make -------------------------------------------------------------------------


def without_make(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has no ``make`` (nor anything else but git)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "JUPYTER_TOKEN")}
    env["PATH"] = str(bin_dir)
    env["HOME"] = str(tmp_path / "home")
    assert shutil.which("make", path=env["PATH"]) is None
    return env


def base_python() -> str:
    """The Python a learner starts it with: the one the course's environment was made from."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("", None), ("-q tests/x.py", ["-q", "tests/x.py"])],
)
def test_pytest_args_replace_the_default_only_when_given(monkeypatch, value, expected):
    from course.__main__ import CHECK_ARGS, TEST_ARGS, pytest_arguments

    if value is None:
        monkeypatch.delenv("PYTEST_ARGS", raising=False)
    else:
        monkeypatch.setenv("PYTEST_ARGS", value)
    assert pytest_arguments() == (expected or TEST_ARGS)
    assert pytest_arguments(CHECK_ARGS) == (expected or CHECK_ARGS)
    assert "not soak and not install and not grading and not hub" in CHECK_ARGS, (
        "the soak, the fresh installs, nbgrader's autograde and the hub run apart"
    )


def test_make_test_is_the_learners_part_and_make_check_everything():
    """make test: the library, the lessons, the explorers and each notebook once, without
    the slow tests; make check: every test, then every other step CI runs."""
    from course.__main__ import CHECK_ARGS, TEST_ARGS

    assert "not slow" in TEST_ARGS
    paths = [a for a in TEST_ARGS if (not a.startswith("-") and "/" in a) or a == "notebooks"]
    assert paths == ["lib/tests", "tests/lessons", "tests/explorers", "notebooks"]
    assert not [a for a in CHECK_ARGS if not a.startswith("-") and "/" in a], "every test"
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    check = makefile.split("\ncheck:", 1)[1].split("\n\n", 1)[0]
    steps = "test-accuracy-settings test-graded test-install test-compile test-soak test-hub"
    assert "-m course check" in check and steps in check
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().endswith("make test\nmake check")


def test_python_m_course_test_runs_without_make(tmp_path):
    env = without_make(tmp_path)
    env["PYTEST_ARGS"] = "-q -p no:cacheprovider tests/project/test_packaging.py -k readme"
    result = subprocess.run(
        [base_python(), "-m", "course", "test"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"\d+ passed", result.stdout), result.stdout[-2000:]


def test_python_m_course_lab_serves_without_make(tmp_path):
    env = without_make(tmp_path)
    env["LAB_ROOT_DIR"] = str(labdriver.copy_notebooks(tmp_path / "notebooks"))
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["JUPYTER_TOKEN"] = token = labdriver.random_token()
    port = labdriver.free_port()
    args = [base_python(), "-m", "course", "lab", f"--ServerApp.port={port}", "--no-browser"]
    proc = labdriver.spawn_logged(args, REPO, env, tmp_path / "lab.log")
    server = labdriver.LabServer(proc, port, token, tmp_path / "lab.log")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError):
                if server.get("/api/status", token)[0] == 200:
                    break
            time.sleep(0.25)
        else:
            pytest.fail(f"python -m course lab did not serve:\n{server.log_tail()}")
        assert server.get("/api/status", None)[0] == 403, "the token is still required"
    finally:
        server.stop()
