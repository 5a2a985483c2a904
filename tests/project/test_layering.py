"""The floors of the house: every import in the packages, read from the source (those inside
functions included), goes to its own floor or one below, never up; the library imports
nothing of the course; and no private ``_name`` crosses from one package to another."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Each package's floors, lowest first; a module's floor is that of the longest name here
#: that starts its own (``attention_lib.flash.loop`` is on ``attention_lib.flash``'s). The
#: packages themselves are ordered too: course (the commands: standard library only) below
#: the library, the library below the courseware, labdriver (the browser driver of the
#: tests and benchmarks) on top.
FLOORS: list[list[str]] = [
    ["course"],
    ["attention_lib.backend", "attention_lib.fits"],
    [
        "attention_lib.inputs",
        "attention_lib.masks",
        "attention_lib.normalisers",
        "attention_lib.memory",
        "attention_lib.dropout",
    ],
    ["attention_lib.scales", "attention_lib.nonfinite"],
    ["attention_lib.core", "attention_lib.flash"],
    ["attention_lib.variants"],
    ["attention_lib"],  # the package's face: its public names
    ["attention_course.bench", "attention_course.model"],
    ["attention_course.lessons"],
    ["attention_course.explorers"],
    ["attention_course.graded"],
    ["attention_course"],
    ["labdriver"],
]
PACKAGES = ("course", "attention_lib", "attention_course", "labdriver")
SOURCES = {
    "course": ROOT / "course",
    "attention_lib": ROOT / "lib" / "attention_lib",
    "attention_course": ROOT / "attention_course",
    "labdriver": ROOT / "labdriver",
}
#: what each package may import from outside the house (besides the standard library)
OUTSIDE = {
    # standard library only: it runs before any environment exists (tomli is Python 3.10's
    # tomllib)
    "course": {"tomli"},
    "attention_lib": {"numpy", "array_api_compat", "torch", "triton"},
    "attention_course": None,  # the course's requirements, any of them
    "labdriver": None,
}
#: course's modules that run only inside the course's environment (python -m course enters
#: .venv first), with what they may import there
IN_THE_ENVIRONMENT = {"course.site": {"jinja2", "latex2mathml", "nbconvert", "nbformat"}}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    path: Path
    line: int
    target: str  # the imported module, dotted and absolute
    name: str | None  # the name taken from it (from-imports)


def module_name(path: Path, top: str) -> str:
    parts = [top, *path.relative_to(SOURCES[top]).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_in(path: Path, top: str) -> list[Import]:
    """Every import statement in ``path``, wherever it stands, its target made absolute."""
    source = module_name(path, top)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [Import(source, path, node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                found.append(Import(source, path, node.lineno, target, alias.name))
    return found


def floor(module: str) -> int | None:
    best, level = -1, None
    for i, names in enumerate(FLOORS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, level = len(name), i
    return level


def every_import(packages=PACKAGES) -> list[Import]:
    return [
        found
        for top in packages
        for path in sorted(SOURCES[top].rglob("*.py"))
        for found in imports_in(path, top)
    ]


def _resolved(i: Import) -> str:
    """The module an import reaches: ``from attention_lib import flash`` reaches
    attention_lib.flash, ``from attention_lib import softmax`` the package itself."""
    if i.name and _in_house(f"{i.target}.{i.name}"):
        return f"{i.target}.{i.name}"
    return i.target


def upward(found: list[Import]) -> list[str]:
    """Imports of a higher floor, or of a module in the house that no floor holds."""
    wrong = []
    for i in found:
        target = _resolved(i)
        if target.split(".")[0] not in PACKAGES:
            continue
        own, theirs = floor(i.source), floor(target)
        if theirs is None or own is None or theirs > own:
            where = f"{i.path.name}:{i.line}"
            wrong.append(f"{where}: {i.source} (floor {own}) imports {target} (floor {theirs})")
    return wrong


def private_crossings(found: list[Import]) -> list[str]:
    """Private names (``_x``, or a module ``_x``) taken from another package's modules."""
    wrong = []
    for i in found:
        if i.target.split(".")[0] not in PACKAGES:
            continue
        source_package = i.source if i.path.name == "__init__.py" else i.source.rpartition(".")[0]
        target_package = i.target.rpartition(".")[0] if _is_module(i.target) else i.target
        if source_package == target_package:
            continue
        private = [p for p in i.target.split(".") if p.startswith("_") and not p.startswith("__")]
        if i.name and i.name.startswith("_") and not i.name.startswith("__"):
            private.append(i.name)
        if private:
            where = f"{i.path.name}:{i.line}"
            wrong.append(f"{where}: {i.source} takes {private} from {i.target}")
    return wrong


def _is_module(dotted: str) -> bool:
    top, *rest = dotted.split(".")
    return top in SOURCES and SOURCES[top].joinpath(*rest).with_suffix(".py").is_file()


def _in_house(dotted: str) -> bool:
    top, *rest = dotted.split(".")
    if top not in SOURCES:
        return False
    path = SOURCES[top].joinpath(*rest)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def outside(found: list[Import]) -> list[str]:
    """The library importing anything of the course (or of Jupyter, matplotlib...), and
    course importing anything but the standard library and itself."""
    wrong = []
    for i in found:
        top, own = i.target.split(".")[0], i.source.split(".")[0]
        if not top or top == "__future__" or top in sys.stdlib_module_names:
            continue
        if top in PACKAGES:
            if own in ("course", "attention_lib") and top != own:
                wrong.append(f"{i.path.name}:{i.line}: {i.source} imports {i.target}")
            continue
        allowed = OUTSIDE[own]
        if allowed is not None and i.source in IN_THE_ENVIRONMENT:
            allowed = allowed | IN_THE_ENVIRONMENT[i.source]
        if allowed is not None and top not in allowed:
            wrong.append(f"{i.path.name}:{i.line}: {i.source} imports {i.target}")
    return wrong


def test_every_module_is_on_a_floor():
    modules = {module_name(path, top) for top in PACKAGES for path in SOURCES[top].rglob("*.py")}
    assert [m for m in sorted(modules) if floor(m) is None] == []


def test_no_import_runs_up_a_floor():
    assert upward(every_import()) == []


def test_no_private_name_crosses_packages():
    assert private_crossings(every_import()) == []


def test_the_library_imports_nothing_of_the_course_and_course_nothing_at_all():
    assert outside(every_import()) == []


@pytest.mark.parametrize(
    ("line", "fails"),
    [
        ("from ..lessons.scaling import sweep_widths\n", "upward"),  # explorers is above
        ("def f():\n    from attention_course.explorers import registry\n", "upward"),
        ("from attention_lib.flash.loop import _plan\n", "private"),
        ("import matplotlib\n", None),  # the courseware may import its requirements
    ],
)
def test_a_planted_import_is_caught(line, fails):
    """A module planted on the model's floor: an import upward, in a function too, and a
    private name from the library, each fail; a requirement of the course does not."""
    found = _parse(line, "attention_course.model.planted")
    assert bool(upward(found)) == (fails == "upward")
    assert bool(private_crossings(found)) == (fails == "private")
    assert not outside(found)


def _parse(text: str, source: str) -> list[Import]:
    """The imports of ``text``, as if it were module ``source``."""
    package = source.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [Import(source, Path("planted.py"), 1, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found += [Import(source, Path("planted.py"), 1, target, a.name) for a in node.names]
    return found
