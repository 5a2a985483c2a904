"""Binder: the binder/ folder repo2docker builds the course's image from.

Two ways, as far as a machine without Docker reaches:

- ``jupyter-repo2docker --no-build`` writes the plan (the Dockerfile) it would build,
  offline: it must install binder/requirements.txt (the pins, torch as PyTorch's CPU
  build) and then run binder/postBuild (the course itself and its JupyterLab settings);
- the same steps, run in a fresh virtual environment, must give an environment in which
  nbval passes on 00_start_here (slow: a few minutes, most of it installing torch).

jupyter-repo2docker (2026.4.0) is not one of the course's dependencies: the plan's test
uses this Python's if it has one, else the one in ``R2D_PYTHON`` (a Python that has it;
``/tmp/r2d/bin/python`` by default, made with ``python -m venv /tmp/r2d &&
/tmp/r2d/bin/pip install jupyter-repo2docker==2026.4.0``), and is skipped, saying so,
where there is none.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
SETTINGS = ROOT / "jupyter" / "labconfig" / "default_setting_overrides.json"
# Binder's base image ships its own notebook (7.4 at repo2docker 2026.4.0), whose front end
# requires the JupyterLab of its day (< 4.5): moving jupyterlab to the course's pin means
# moving notebook to the one constraints.txt pins beside it, or `jupyter notebook` breaks.
MOVES_WITH_JUPYTERLAB = ("notebook",)
R2D_PYTHON = os.environ.get("R2D_PYTHON", "/tmp/r2d/bin/python")


def _project(folder: Path = ROOT) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _pins(requirements: list[str]) -> dict[str, str]:
    found = (re.match(r"^([A-Za-z0-9_.-]+)==([^;\s]+)", r.strip()) for r in requirements)
    return {m.group(1).lower(): m.group(2) for m in found if m}


def _names(requirements: list[str]) -> list[str]:
    return [re.match(r"^[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements]


def _binder_lines() -> list[str]:
    text = (BINDER / "requirements.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def expected_binder_pins() -> dict[str, str]:
    """The runtime of a course in JupyterLab (the library's requirements with torch, the
    course's, its lab extra) at constraints.txt's pins, torch as its CPU build, plus what moves
    with jupyterlab."""
    course, library = _project(), _project(ROOT / "lib")
    names = [*_names(library["dependencies"]), "torch"]
    names += [n for n in _names(course["dependencies"]) if n != "attention-lib"]
    names += _names(course["optional-dependencies"]["lab"]) + list(MOVES_WITH_JUPYTERLAB)
    every = _pins((ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines())
    pins = {name: every[name] for name in names}
    pins["torch"] += "+cpu"
    return pins


def test_binder_requirements_are_the_runtime_pins_with_torch_for_the_cpu():
    lines = _binder_lines()
    listed = _pins(lines)
    expected = expected_binder_pins()
    wanted = "\n".join(f"{name}=={version}" for name, version in expected.items())
    assert listed == expected, f"binder/requirements.txt should pin exactly:\n{wanted}"
    assert f"--extra-index-url {CPU_INDEX}" in lines
    assert "ipympl" not in listed


def test_binder_python_is_one_the_course_supports():
    runtime = (BINDER / "runtime.txt").read_text(encoding="utf-8").strip()
    version = re.fullmatch(r"python-(3\.\d+)", runtime).group(1)
    minimum = re.fullmatch(r">=(3\.\d+)", _project()["requires-python"]).group(1)
    assert tuple(map(int, version.split("."))) >= tuple(map(int, minimum.split(".")))


def test_postbuild_installs_the_course_and_its_lab_settings():
    post = (BINDER / "postBuild").read_text(encoding="utf-8")
    assert post.startswith("#!/bin/bash\n") and "set -euo pipefail" in post
    assert os.access(BINDER / "postBuild", os.X_OK)
    # the library and the course, without resolving their requirements again
    # (requirements.txt pinned them, torch as the CPU build, which a second resolution could
    # swap for the CUDA one)
    assert re.search(r"-m pip install --no-cache-dir --no-deps -e lib -e \.$", post, re.M)
    assert "jupyter/labconfig/default_setting_overrides.json" in post
    assert "${NB_PYTHON_PREFIX}/share/jupyter/lab/settings" in post
    assert json.loads(SETTINGS.read_text(encoding="utf-8"))  # the file it copies is JSON


def _repo2docker_plan() -> str:
    python = sys.executable if importlib.util.find_spec("repo2docker") else R2D_PYTHON
    if not Path(python).exists():
        pytest.skip(f"no jupyter-repo2docker here nor at R2D_PYTHON={R2D_PYTHON} (see the doc)")
    command = [python, "-m", "repo2docker", "--no-build", "--debug"]
    command += ["--user-id", "1000", "--user-name", "jovyan", str(ROOT)]
    # a proxy that refuses every connection: the plan must need no network
    env = {**os.environ, "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_repo2docker_plans_the_cpu_requirements_then_the_course():
    plan = _repo2docker_plan()
    runtime = (BINDER / "runtime.txt").read_text(encoding="utf-8").strip()
    assert f"Building conda environment for python={runtime.removeprefix('python-')}" in plan
    # binder/ is read, not the conda-user's environment.yml at the top (it would install
    # the default, CUDA, torch): repo2docker reads only binder/ when the folder exists
    assert "environment.yml" not in plan
    steps = [
        # requirements.txt before the repository is copied, so a content change keeps the
        # image's cached torch layer; as the notebook user, into the kernel's Python
        "COPY --chown=1000:1000 src/binder/requirements.txt ${REPO_DIR}/binder/requirements.txt",
        "USER ${NB_USER}",
        '${KERNEL_PYTHON_PREFIX}/bin/pip install --no-cache-dir -r "binder/requirements.txt"',
        "COPY --chown=1000:1000 src/ ${REPO_DIR}/",
        "USER ${NB_USER}",
        "RUN ./binder/postBuild",
    ]
    at = 0
    for step in steps:
        found = plan.find(step, at)
        assert found >= 0, f"{step!r} missing after position {at} of the plan:\n{plan}"
        at = found + len(step)
    # what those two steps do: the CPU index and the course install (tested above)
    assert f"--extra-index-url {CPU_INDEX}" in _binder_lines()
    assert "torch==" + expected_binder_pins()["torch"] in _binder_lines()
    assert "ENV NB_PYTHON_PREFIX=" in plan and "ENV KERNEL_PYTHON_PREFIX=" in plan


# --- the same steps in a fresh virtual environment -------------------------------------------


def _run(command, timeout, **kwargs) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(map(str, command))} took more than {timeout} s:\n{e.stdout}")


def _copy_repository(dest: Path) -> None:
    """What repo2docker copies into the image: the repository's files, not what git ignores."""
    listed = _run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], 60, cwd=ROOT
    )
    if listed.returncode:
        pytest.skip(f"git cannot list the repository's files: {listed.stderr.strip()}")
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _reachable(pip: Path, requirement: str) -> str | None:
    """None if pip can find ``requirement`` (no install), else why not."""
    probe = [str(pip), "install", "--dry-run", "--no-deps", "--timeout", "15", "--retries", "0"]
    try:
        done = subprocess.run([*probe, requirement], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return f"pip took more than 120 s to look for {requirement}"
    if done.returncode:
        return f"pip cannot find {requirement}: {done.stderr.strip().splitlines()[-1:]}"
    return None


@pytest.mark.slow
@pytest.mark.install
def test_binder_steps_in_a_fresh_environment_pass_nbval_on_00(tmp_path):
    runtime = (BINDER / "runtime.txt").read_text(encoding="utf-8").strip()
    if runtime != f"python-{sys.version_info.major}.{sys.version_info.minor}":
        pytest.skip(f"binder/runtime.txt asks for {runtime}; this is Python {sys.version}")
    repo, env = tmp_path / "repo", tmp_path / "env"
    _copy_repository(repo)
    made = _run([sys.executable, "-m", "venv", str(env)], 180)
    assert made.returncode == 0, made.stderr
    pip, python = env / "bin" / "pip", env / "bin" / "python"

    # binder's requirements, with one substitution: PyTorch's own index (the CPU build's
    # home) is out of reach here, so its --extra-index-url line goes, and torch==X+cpu
    # must come from where this machine's pip finds it (its configuration points at a CPU
    # wheel on disk). Every other line is binder's own.
    lines = (repo / "binder" / "requirements.txt").read_text(encoding="utf-8").splitlines()
    local = [line for line in lines if not line.startswith(f"--extra-index-url {CPU_INDEX}")]
    assert len(local) == len(lines) - 1
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("\n".join(local) + "\n", encoding="utf-8")
    pinned = _pins((ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines())
    tools = [f"pytest=={pinned['pytest']}", f"nbval=={pinned['nbval']}"]  # the check's
    for requirement in ("torch==" + expected_binder_pins()["torch"], tools[1]):
        why = _reachable(pip, requirement)
        if why:
            pytest.skip(f"{why} (no network, or no PyPI?)")

    # repo2docker's steps: pip install -r binder/requirements.txt, then ./binder/postBuild
    # in the repository, with its environment's prefixes. (Binder adds --no-cache-dir to
    # keep its image small; here pip's cache makes a second run faster, and --no-compile
    # leaves torch's thousands of modules to be compiled on import, not all at install.)
    install = [str(pip), "install", "--no-compile", "-r", str(requirements)]
    installed = _run(install, 600, cwd=repo)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    path = f"{env / 'bin'}{os.pathsep}{os.environ['PATH']}"
    prefixes = {"NB_PYTHON_PREFIX": str(env), "KERNEL_PYTHON_PREFIX": str(env), "PATH": path}
    post_env = {**os.environ, **prefixes}
    post_env.pop("PYTHONPATH", None)
    post = _run(["./binder/postBuild"], 300, cwd=repo, env=post_env)
    assert post.returncode == 0, post.stdout[-3000:] + post.stderr[-3000:]

    # the settings landed where this JupyterLab reads its overrides
    where = _run([str(env / "bin" / "jupyter"), "lab", "path"], 120, env=post_env)
    app_dir = re.search(r"Application directory:\s*(\S+)", where.stdout).group(1)
    overrides = Path(app_dir) / "settings" / "overrides.json"
    assert json.loads(overrides.read_text()) == json.loads(SETTINGS.read_text())
    # the course came from the copy, and torch is the CPU build
    probe = "import attention_lib, torch; print(attention_lib.__file__); print(torch.__version__)"
    seen = _run([str(python), "-c", probe], 300, cwd=tmp_path, env=post_env)
    assert seen.returncode == 0, seen.stderr
    where_lib, torch_version = seen.stdout.split()
    assert Path(where_lib).is_relative_to(repo) and torch_version.endswith("+cpu")

    checker = _run([str(pip), "install", *tools], 300, env=post_env)
    assert checker.returncode == 0, checker.stdout[-3000:] + checker.stderr[-3000:]
    # pyproject.toml's pytest options (--nbval, the sanitizer) apply, as in make test
    nbval = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    ran = _run([*nbval, "notebooks/00_start_here.ipynb"], 600, cwd=repo, env=post_env)
    assert ran.returncode == 0, ran.stdout[-5000:] + ran.stderr[-2000:]
    assert re.search(r"\d+ passed", ran.stdout) and "failed" not in ran.stdout


def test_readme_links_to_binder_at_the_repository_and_version():
    from course.site import binder_link

    assert binder_link() in (ROOT / "README.md").read_text(encoding="utf-8")
