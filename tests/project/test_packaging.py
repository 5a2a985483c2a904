"""The project around the library: two packages, pins in one place, import hygiene, typing,
README."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import pytest

import attention_lib

ROOT = Path(__file__).resolve().parents[2]
# conda-forge names that differ from PyPI's
CONDA_NAMES = {"torch": "pytorch", "isal": "python-isal"}


def pinned(requirement: str) -> tuple[str, str]:
    name, version = re.match(r"^([A-Za-z0-9_.-]+)==([^;\s]+)", requirement).groups()
    return CONDA_NAMES.get(name.lower(), name.lower()), version


def constraint_lines() -> list[str]:
    text = (ROOT / "constraints.txt").read_text()
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def requirement_names(project: dict) -> set[str]:
    """Every requirement's name in a pyproject's project table (dependencies and extras)."""
    listed = project["dependencies"] + [
        r for x in project["optional-dependencies"].values() for r in x
    ]
    return {re.match(r"^[A-Za-z0-9_.-]+", r).group(0).lower() for r in listed}


def test_constraints_pin_every_requirement_of_both_packages_exactly():
    course = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    library = tomllib.loads((ROOT / "lib" / "pyproject.toml").read_text())["project"]
    lines = constraint_lines()
    assert all(re.match(r"^[A-Za-z0-9_.-]+==[0-9][^;\s]*(;.*)?$", line) for line in lines), lines
    pins = {line.split("==")[0].lower() for line in lines}
    names = (requirement_names(course) | requirement_names(library)) - {"attention-lib"}
    assert names == pins, (sorted(names - pins), sorted(pins - names))
    assert "torch==2.13.0" in lines


def test_the_library_needs_only_numpy_and_array_api_compat():
    library = tomllib.loads((ROOT / "lib" / "pyproject.toml").read_text())["project"]
    assert library["name"] == "attention-lib"
    assert {re.match(r"^[A-Za-z0-9_.-]+", r).group(0) for r in library["dependencies"]} == {
        "numpy",
        "array-api-compat",
    }
    course = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"attention-lib[torch]=={library['version']}" in course["dependencies"]


def test_environment_yml_lists_the_same_pins_as_the_constraints():
    # all but the hub's teaching tools, which only `python -m course hub install` installs,
    # in the hub's own environment, never in a learner's (conda's included)
    course = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    teach = {
        re.match(r"^[A-Za-z0-9_.-]+", r).group(0).lower()
        for r in course["optional-dependencies"]["teach"]
    }
    expected = dict(
        pinned(line) for line in constraint_lines() if line.split("==")[0].lower() not in teach
    )
    listed = dict(
        pinned(line.strip()[2:])
        for line in (ROOT / "environment.yml").read_text().splitlines()
        if re.match(r"^\s+- [A-Za-z0-9_.-]+==", line)
    )
    assert listed == expected


def test_environment_yml_installs_the_library_and_the_course():
    """conda installs the pins; pip then installs the library and the course from the file's
    folder (conda runs pip there), finding every requirement already installed."""
    import yaml  # jupyter-events' requirement, so JupyterLab's

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert pip_sections == [["-e lib", "-e ."]]
    assert "pip" in env["dependencies"]


def test_import_does_not_load_torch_or_triton():
    code = (
        "import sys, attention_lib, attention_course.lessons.exercises, "
        "attention_course.explorers, attention_course.explorers.registry, attention_lib.variants, "
        "attention_lib.scales, "
        "attention_course.lessons.saturation, attention_course.lessons.scaling, "
        "attention_course.lessons.figures, attention_course.lessons.alternatives, "
        "attention_course.model.catalogue, attention_course.model.report; "
        "loaded = [m for m in ('torch', 'triton') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_package_is_typed_and_exports_the_contract():
    assert (Path(attention_lib.__file__).parent / "py.typed").is_file()
    for name in [
        "softmax",
        "attention_weights",
        "scaled_dot_product_attention",
        "flash_attention",
        "sparsemax",
        "entmax15",
        "softmax1",
        "best_device",
    ]:
        assert callable(getattr(attention_lib, name)), name
        assert getattr(attention_lib, name).__doc__, name


def test_best_device_names_a_torch_device():
    import torch

    device = attention_lib.best_device()
    assert isinstance(device, torch.device)
    expected = "cuda" if torch.cuda.is_available() else device.type
    assert device.type == expected and device.type in ("cuda", "mps", "cpu")
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert device.type == "cpu"


def test_readme_quick_start_is_make_lab_test_and_check():
    """The quick start gives three commands, in this order, and their make-free forms."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^    (make \w+)", quick, flags=re.M)
    assert commands == ["make lab", "make test", "make check"]
    without_make = re.findall(r"^    (python -m course \w+)", quick, flags=re.M)
    assert without_make == [f"python -m course {c}" for c in ("lab", "test", "check")]


def test_readme_example_runs():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_the_checkout_packages_import_from_the_checkout(tmp_path):
    """course and labdriver are never installed (no wheel holds them: below): the course's
    environment finds them in the checkout, through the .pth its install writes, from any
    folder, as the benchmarks and scripts run as files need."""
    from course.environment import CHECKOUT_PTH

    assert (Path(sysconfig.get_paths()["purelib"]) / CHECKOUT_PTH).read_text().strip() == str(ROOT)
    code = "import course, labdriver; print(labdriver.__file__); print(labdriver.REPO)"
    # -I: no PYTHONPATH, no current folder, no user site: the environment's own path
    found = subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.split("\n")
    assert Path(found[0]) == ROOT / "labdriver" / "__init__.py" and Path(found[1]) == ROOT


def _wheel(folder: Path, out: Path) -> set[str]:
    """The names in the wheel pip builds from ``folder`` (a copy of what git tracks there)."""
    src = out / "src"
    listed = subprocess.run(
        ["git", "ls-files", "-z", str(folder)], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    for name in filter(None, listed.split("\0")):
        target = src / Path(name).relative_to(folder.relative_to(ROOT))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
    ]
    subprocess.run([*build, "-q", "-w", str(out), str(src)], check=True, capture_output=True)
    (wheel,) = out.glob("*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


def test_the_two_wheels_hold_one_package_each(tmp_path):
    library = _wheel(ROOT / "lib", tmp_path / "lib")
    packages = {n.split("/")[0] for n in library if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"attention_lib"}
    assert (
        "attention_lib/py.typed" in library and "attention_lib/flash/triton/forward.py" in library
    )
    course = _wheel(ROOT, tmp_path / "course")
    packages = {
        n.split("/")[0] for n in course if not n.split("/")[0].endswith((".dist-info", ".data"))
    }
    assert packages == {"attention_course"}
    # the JupyterLab extension, where an install puts prebuilt extensions (the wheel's data)
    extension = "share/jupyter/labextensions/attention-course-a11y/package.json"
    assert [n for n in course if n.endswith(".data/data/" + extension)], sorted(course)[:20]
    trained = {p.name for p in (ROOT / "attention_course" / "model" / "trained").iterdir()}
    assert {f"attention_course/model/trained/{name}" for name in trained} <= course


def test_notebook_05s_results_come_with_the_installed_course(tmp_path):
    """The committed benchmark results are package data: the course as its wheel installs it,
    away from any checkout, finds them where notebook 05 reads them."""
    course = _wheel(ROOT, tmp_path / "wheel")
    assert "attention_course/bench/measured/cpu-2core-x86_64/results.json" in course
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    read = (
        "from attention_course.bench.results import MEASURED, load_benchmarks\n"
        "print(MEASURED)\n"
        "print(*[run.label for run in load_benchmarks()], sep='\\n')"
    )
    library = Path(attention_lib.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(library)])}
    done = subprocess.run(
        [sys.executable, "-c", read], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    where, *labels = done.stdout.splitlines()
    assert Path(where).is_relative_to(site)
    assert labels == ["cpu-2core-x86_64 (2 CPU cores, 2 torch threads, float32)"]


@pytest.mark.slow
@pytest.mark.install
def test_the_library_alone_in_a_fresh_environment(tmp_path):
    """attention_lib's wheel, installed into a fresh venv with its own requirements (numpy and
    array-api-compat) and the test tools, brings nothing of torch, Jupyter or matplotlib, and
    passes its own tests there (the torch cases skip)."""
    library = _wheel(ROOT / "lib", tmp_path / "wheel")
    assert library
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = str(env / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt")]
    done = subprocess.run([*pip, str(wheel)], capture_output=True, text=True, timeout=600)
    if done.returncode and "No matching distribution" in done.stderr:
        pytest.skip(f"pip cannot reach an index here: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split("==")[0].lower() for line in listed.split()} - {"pip", "setuptools"}
    assert names == {"attention-lib", "numpy", "array-api-compat"}, names
    loaded = subprocess.run(
        [
            python,
            "-I",
            "-c",
            "import sys, attention_lib; print(sorted({m.split('.')[0] for m in sys.modules}))",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for heavy in ("torch", "matplotlib", "ipywidgets", "IPython", "triton"):
        assert f"'{heavy}'" not in loaded, loaded

    subprocess.run([*pip, "pytest", "hypothesis"], check=True, capture_output=True, timeout=600)
    tests = tmp_path / "run"
    shutil.copytree(
        ROOT / "lib" / "tests", tests / "tests", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy2(ROOT / "lib" / "pyproject.toml", tests / "pyproject.toml")
    ran = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"],
        cwd=tests,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert ran.returncode == 0, ran.stdout[-5000:] + ran.stderr[-2000:]
    assert "passed" in ran.stdout and "skipped" in ran.stdout
