"""Every exercise's solution, read from `answers` where it is installed.

Kept off the notebooks' pages, so that a page shows no answer before the
learner tries: each notebook hands them to a solution gate
(`attention_course.explorers.gate.ExerciseGate`), which shows one after a
passing attempt or on request. The tests run every solution through its
checker.

The solutions themselves live in one data module, `answers`. A graded class
installs the course without it (``python -m course graded strip``, see
teachers/graded/README.md): then `SOLUTIONS` and `FLASH_SOLUTIONS` are empty,
`INSTALLED` is False, the checkers and the graded edition work as before, and
the gates offer feedback without hints or solutions.

`solution_scope(name)` is the namespace one of notebook 07's solutions runs
in: numpy, math (torch for the layer), and the earlier solutions it builds on;
`solution_function(name)` the function it defines.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import Solution

__all__ = [
    "BUILDS_ON",
    "FLASH_SOLUTIONS",
    "INSTALLED",
    "SOLUTIONS",
    "TRITON",
    "USES_TORCH",
    "solution_function",
    "solution_scope",
]

try:
    from .answers import FLASH_SOLUTIONS, SOLUTIONS
except ModuleNotFoundError as err:  # a graded class's install: no answers to import
    if err.name != f"{__package__}.answers":
        raise
    SOLUTIONS: dict[str, Solution] = {}  # type: ignore[no-redef]
    FLASH_SOLUTIONS: dict[str, Solution] = {}  # type: ignore[no-redef]

#: whether this installation holds the solutions (False in a graded class)
INSTALLED = bool(SOLUTIONS)

#: notebook 07's exercises whose code calls an earlier exercise's function
BUILDS_ON = {
    "flash_forward": ("online_update",),
    "key_loop": ("online_update",),
    "FlashAttention": ("online_update", "flash_forward", "flash_backward"),
}
#: notebook 07's solutions that use torch (the layer): their scope imports it
USES_TORCH = ("FlashAttention",)
#: notebook 07's solutions in Triton: run only by the interpreter, in a child process
TRITON = ("row_softmax", "online_softmax", "key_block")


def solution_scope(name: str) -> dict[str, Any]:
    """The namespace solution ``name`` runs in: np, math and the solutions it builds on.

    Raises KeyError for a name that is not in `FLASH_SOLUTIONS` (every name, where
    the solutions are not installed).
    """
    if name not in FLASH_SOLUTIONS:
        where = "" if INSTALLED else " (this installation holds no solutions: a graded class)"
        raise KeyError(f"no solution {name!r}; there are {sorted(FLASH_SOLUTIONS)}{where}")
    scope: dict[str, Any] = {"np": np, "math": math}
    if name in USES_TORCH:
        import torch

        scope["torch"] = torch
    for before in BUILDS_ON.get(name, ()):
        exec(compile(FLASH_SOLUTIONS[before].code, f"<solution {before}>", "exec"), scope)
    return scope


def solution_function(name: str) -> Any:
    """The function (or class) solution ``name`` defines (numpy and torch solutions; the Triton
    ones, ``key_block``, ``row_softmax`` and ``online_softmax``, are Triton code)."""
    scope = solution_scope(name)
    exec(compile(FLASH_SOLUTIONS[name].code, f"<solution {name}>", "exec"), scope)
    return scope[name]
