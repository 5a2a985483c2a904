"""``python -m attention_course.graded``: make (or check) the graded edition, or grade it.

python -m attention_course.graded --root DIR --notebooks NB [--check]  # DIR/source, DIR/release
python -m attention_course.graded grade ASSIGNMENT --root DIR   # DIR/submitted/*/ASSIGNMENT

DIR is nbgrader's course directory (its nbgrader_config.py there); NB holds the course
notebooks. ``--check`` regenerates into a scratch folder and names every file that differs
from DIR's; exit status 1 when one does.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .autograde import grade
from .edition import CONFIG, GENERATED, differences, generate

__all__ = ["check", "main"]


def check(root: Path, notebooks: Path) -> int:
    """0 when ``root``'s generated files are what the generator makes now; else 1, naming them."""
    with tempfile.TemporaryDirectory() as scratch:
        generate(Path(scratch), notebooks, root / CONFIG)
        differ = differences(Path(scratch), root)
    if differ:
        print(
            "the graded edition is out of date (run python -m course graded):",
            *differ,
            sep="\n  ",
            file=sys.stderr,
        )
        return 1
    print("the graded edition is up to date")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["grade"]:
        parser = argparse.ArgumentParser(prog="python -m attention_course.graded grade")
        parser.add_argument("assignment")
        parser.add_argument("--root", type=Path, required=True, help="nbgrader's course directory")
        args = parser.parse_args(argv[1:])
        return grade(args.root.resolve(), args.assignment)
    parser = argparse.ArgumentParser(prog="python -m attention_course.graded", description=__doc__)
    parser.add_argument("--root", type=Path, required=True, help="nbgrader's course directory")
    parser.add_argument("--notebooks", type=Path, required=True, help="the course notebooks")
    parser.add_argument("--check", action="store_true", help="write nothing; fail on a difference")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.check:
        return check(root, args.notebooks)
    generate(root, args.notebooks, root / CONFIG)
    print(f"graded edition written: {', '.join(str(root / kind) for kind in GENERATED)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
