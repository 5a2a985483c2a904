"""Running a learner's key-loop body in Triton's interpreter, in a child process (notebook 07).

- `read_body`: the learner's function (its source read back with
  `inspect.getsource`) or its source text, checked before anything runs:
  one function of the eleven `ARGUMENTS`, decorators dropped, and whether
  it is still the starter (it raises NotImplementedError).
- `run_bodies`: the skeleton kernel (`attention_course.lessons.exercises.triton_skeleton`)
  launched with each body on each input, in one child process,
  ``python -m attention_course.lessons.exercises.triton_child FOLDER``
  (`CHILD`): TRITON_INTERPRET=1 must be set before triton is first
  imported, so it is set there only.
  The parent writes the inputs and sources to FOLDER; the child writes back
  every output and log-sum-exp, or the error the learner's code raised,
  named by the line of their source it came from.
- `skeleton_source`: the kernel's text as the learner reads it.

Importing this module imports neither torch nor triton.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import NOT_WRITTEN

__all__ = [
    "ARGUMENTS",
    "CHILD",
    "CHILD_TIMEOUT_S",
    "SKELETON",
    "Body",
    "read_body",
    "run_bodies",
    "skeleton_source",
]

ARGUMENTS = (
    "q",
    "k",
    "v",
    "m",
    "total",
    "acc",
    "rows",
    "cols",
    "length_k",
    "qk_scale",
    "IS_CAUSAL",
)
#: a learner's kernel that never ends is stopped after this long (the solution takes ~10 s,
#: most of it starting torch and triton; the tests' dozen bodies in one child ~15 s)
CHILD_TIMEOUT_S = 180
#: the kernel the learner's body goes into, and the child process that runs it
SKELETON = "attention_course.lessons.exercises.triton_skeleton"
CHILD = "attention_course.lessons.exercises.triton_child"


def skeleton_source() -> str:
    """The text of the skeleton kernel, as the learner reads it (triton is not imported)."""
    spec = importlib.util.find_spec(SKELETON)
    text = Path(spec.origin).read_text()  # type: ignore[union-attr, arg-type]
    node = next(
        n
        for n in ast.parse(text).body
        if isinstance(n, ast.FunctionDef) and n.name == "attention_skeleton"
    )
    lines = text.splitlines()[node.decorator_list[0].lineno - 1 : node.end_lineno]
    return "\n".join(line.replace("  # fmt: skip", "") for line in lines)


# -- the learner's source ------------------------------------------------------------------


@dataclass(frozen=True)
class Body:
    """The learner's body as read: what the child runs, or why it cannot."""

    name: str  # the function's name
    source: str  # its source, decorators blanked
    problem: str = ""  # why it cannot run ("" when it can)
    starter: bool = False  # it still raises NotImplementedError


def _raises_not_written(node: ast.FunctionDef) -> bool:
    for statement in node.body:
        if isinstance(statement, ast.Raise) and statement.exc is not None:
            exc = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
            if isinstance(exc, ast.Name) and exc.id == NOT_WRITTEN:
                return True
    return False


def read_body(
    attempt: Any, arguments: tuple[str, ...] = ARGUMENTS, what: str = "key_block"
) -> Body:
    """The learner's function (or source text) as a `Body`: one function of ``arguments``
    (their names are the learner's own; only their number is checked), ``what`` naming it in
    the messages."""
    if callable(attempt):
        try:
            text = inspect.getsource(attempt)
        except (OSError, TypeError):
            return Body("", "", f"its source cannot be read: define {what} with def in a cell")
    elif isinstance(attempt, str):
        text = attempt
    else:
        raise TypeError(f"check_{what} needs a function or its source, got {type(attempt)}")
    text = textwrap.dedent(text)
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        return Body("", text, f"it does not parse: line {err.lineno}: {err.msg}")
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(defs) != 1:
        return Body("", text, f"expected one function definition, found {len(defs)}")
    node = defs[0]
    names = [a.arg for a in node.args.posonlyargs + node.args.args]
    if len(names) != len(arguments) or node.args.vararg or node.args.kwonlyargs:
        return Body(
            node.name,
            text,
            f"{what} takes {len(arguments)} arguments ({', '.join(arguments)}), "
            f"yours takes {len(names)} ({', '.join(names)})",
        )
    lines = text.splitlines()
    for decorator in node.decorator_list:  # the child adds its own @triton.jit
        for i in range(decorator.lineno - 1, decorator.end_lineno or decorator.lineno):
            lines[i] = ""
    return Body(node.name, "\n".join(lines) + "\n", starter=_raises_not_written(node))


# -- the child process ---------------------------------------------------------------------


def run_bodies(
    bodies: list[Body], launches: list[dict[str, Any]], child: str = CHILD
) -> list[dict[str, Any]]:
    """Every body on every launch, in one child process with TRITON_INTERPRET=1.

    A launch is {"name", "inputs": (q, k, v) float64 arrays (H, length, width) holding
    float16 values, "is_causal", "block_m", "block_n"}. Returns per body either
    {"error": text} (it did not compile) or {"runs": {launch name: (out, lse) float64
    arrays, or the error text}}. Raises RuntimeError if the child itself fails, and
    subprocess.TimeoutExpired after `CHILD_TIMEOUT_S`. ``child``: the module run as the child
    (`CHILD`, or `attention_course.lessons.exercises.softmax_child` for the softmax kernels, whose
    launches and results are its own).
    """
    import torch

    with tempfile.TemporaryDirectory(prefix="key-block-") as tmp:
        folder = Path(tmp)
        cases = [{**c, "inputs": [torch.from_numpy(x) for x in c["inputs"]]} for c in launches]
        job = {"bodies": [(b.name, b.source) for b in bodies], "cases": cases}
        torch.save(job, folder / "job.pt")
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        done = subprocess.run(
            [sys.executable, "-m", child, str(folder)],
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the interpreter's process failed:\n{done.stderr[-3000:]}")
        return torch.load(folder / "results.pt", weights_only=False)
