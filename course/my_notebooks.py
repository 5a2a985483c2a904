"""The learner's own copies of the course notebooks, in ``my-notebooks/`` (git-ignored).

    python -m course lab          # `sync` first (make lab), then JupyterLab on the copies
    python -m course reset NAME   # `make reset NB=NAME`: the course's version again

`make lab` serves ``my-notebooks/``, never ``notebooks/``: what the learner
types, runs and saves lands in their copy, so the committed notebooks stay as
the course wrote them (``make test`` tests those, and ``git pull`` never meets
a local change). ``my-notebooks/`` sits beside ``notebooks/``, one level below
the repository like it, so a notebook that reads ``../benchmarks/results`` or
links to a sibling by name works the same in either place.

`sync`, at every start:

- a notebook the learner has no copy of (first start, a notebook new in the
  course, a copy they deleted) is copied;
- a copy whose course notebook has changed since it was copied is never
  overwritten if the learner changed it: the course's new version is written
  beside it, as ``NAME.course-<version>.ipynb``, and sync says so (and
  reminds at each start while that file is there). A copy the learner never
  saved (byte for byte the version it was copied from) is simply updated.

`reset` moves the learner's copy into ``my-notebooks/old-copies/`` (with the
time in its name) and copies the course's current version in its place:
nothing is deleted.

Which course version each copy came from is kept in
``my-notebooks/.course-versions.json`` (SHA-256 of the course's file; of the
version git last committed when the learner's working file differs from it,
so work done in ``notebooks/`` before this existed is kept as theirs).
Standard library (and git, where there is one) only, as the rest of ``course``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .paths import REPO

__all__ = ["Copies", "reset", "sync"]

COURSE = REPO / "notebooks"
MINE = REPO / "my-notebooks"
VERSIONS = ".course-versions.json"
OLD_COPIES = "old-copies"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def offered_name(name: str, version: str) -> str:
    """The file a course update is offered in, beside the learner's copy ``name``."""
    return f"{Path(name).stem}.course-{version[:8]}.ipynb"


@dataclass
class Copies:
    """The learner's folder ``mine`` of copies of the notebooks in ``course``."""

    course: Path = COURSE
    mine: Path = MINE

    def course_notebooks(self) -> list[Path]:
        return sorted(self.course.glob("*.ipynb"))

    def _load(self) -> dict[str, dict]:
        path = self.mine / VERSIONS
        return json.loads(path.read_text())["notebooks"] if path.exists() else {}

    def _save(self, versions: dict[str, dict]) -> None:
        text = json.dumps({"notebooks": versions}, indent=1, sort_keys=True) + "\n"
        (self.mine / VERSIONS).write_text(text)

    def sync(self) -> list[str]:
        """Make the missing copies and offer every course update; what happened, one line each."""
        first = not self.mine.exists()
        self.mine.mkdir(parents=True, exist_ok=True)
        versions = self._load()
        said: list[str] = []
        copied: list[str] = []
        for source in self.course_notebooks():
            name = source.name
            version = digest(source)
            mine = self.mine / name
            entry = versions.setdefault(name, {"base": version, "offered": []})
            if not mine.exists():
                shutil.copyfile(source, mine)
                entry.update(base=self.committed_digest(source) or version, offered=[])
                copied.append(name)
            elif entry["base"] == version:
                continue
            elif digest(mine) == entry["base"]:  # never saved by the learner: nothing to lose
                shutil.copyfile(source, mine)
                entry.update(base=version, offered=[])
                said.append(f"{name}: updated to the course's new version (you had not changed it)")
            else:
                offer = self.mine / offered_name(name, version)
                if version not in entry["offered"]:
                    shutil.copyfile(source, offer)
                    entry["offered"].append(version)
                    said.append(
                        f"{name}: the course has a new version of this notebook; yours is "
                        f"unchanged, and the new one is beside it as {offer.name}"
                    )
                elif offer.exists():
                    said.append(f"{name}: the course's newer version is beside yours, {offer.name}")
        self._save(versions)
        if copied:
            lead = "your own copies of the notebooks are" if first else "copied"
            said.insert(0, f"{lead} in {self.mine.name}/: {', '.join(copied)}")
        return said

    def committed_digest(self, source: Path) -> str | None:
        """SHA-256 of ``source`` as git last committed it (None outside a git checkout).

        A learner who worked in ``notebooks/`` before ``my-notebooks/`` existed
        has their work copied over; recorded against the committed version, that
        copy counts as changed by them, so a course update is offered beside it
        and never written over it.
        """
        with contextlib.suppress(OSError):
            shown = subprocess.run(
                ["git", "-C", str(source.parent), "show", f"HEAD:./{source.name}"],
                capture_output=True,
                timeout=30,
            )
            if shown.returncode == 0:
                return hashlib.sha256(shown.stdout).hexdigest()
        return None

    def resolve(self, name: str) -> Path:
        """The course notebook ``name`` names: its file name, its stem, or its number ("01")."""
        notebooks = self.course_notebooks()
        found = [
            p
            for p in notebooks
            if name in (p.name, p.stem) or (name.isdigit() and p.name.startswith(f"{name}_"))
        ]
        if len(found) != 1:
            names = ", ".join(p.name for p in notebooks)
            raise SystemExit(
                f"no single course notebook is called {name!r}; choose one of: {names}"
            )
        return found[0]

    def reset(self, name: str) -> str:
        """The course's current version of ``name`` in the learner's folder; theirs kept aside."""
        source = self.resolve(name)
        self.mine.mkdir(parents=True, exist_ok=True)
        versions = self._load()
        mine = self.mine / source.name
        kept = ""
        if mine.exists():
            old = self.mine / OLD_COPIES
            old.mkdir(exist_ok=True)
            stamp = time.strftime("%Y-%m-%d_%H%M%S")
            aside = old / f"{source.stem}.{stamp}.ipynb"
            mine.replace(aside)
            kept = f"; yours is kept as {aside.relative_to(self.mine)}"
        shutil.copyfile(source, mine)
        versions[source.name] = {"base": digest(source), "offered": []}
        self._save(versions)
        return f"{source.name}: the course's version is back in {self.mine.name}/{kept}"


def _say(lines: list[str]) -> None:
    for line in lines:
        print(f"my-notebooks: {line}", file=sys.stderr)


def sync(copies: Copies | None = None) -> None:
    """Make the missing copies and offer the course's updates (`make lab`, at every start)."""
    _say((copies or Copies()).sync())


def reset(name: str, copies: Copies | None = None) -> None:
    """The course's version of notebook ``name`` ("01", its stem or its file name) again."""
    _say([(copies or Copies()).reset(name)])
