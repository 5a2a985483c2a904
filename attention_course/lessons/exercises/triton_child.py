"""The child process that runs a learner's key-loop bodies in Triton's interpreter.

    python -m attention_course.lessons.exercises.triton_child FOLDER

Started by `attention_course.lessons.exercises.triton_runner.run_bodies` with
TRITON_INTERPRET=1 in its environment, so triton is imported here for the
first time already in interpreter mode. It reads ``FOLDER/job.pt`` (the
bodies' sources and the launches), runs every body in the skeleton kernel
(`attention_course.lessons.exercises.triton_skeleton`) on every launch, and
writes ``FOLDER/results.pt``: each output and log-sum-exp, or the error the
learner's code raised, named by the line of their source it came from.
Nothing imports this module; it is only run.
"""

from __future__ import annotations

import importlib
import math
import sys
import traceback
from pathlib import Path
from typing import Any

from .triton_runner import SKELETON

__all__ = ["run_child"]

_HINTS = {
    "same dtype": "tl.dot takes two operands of one dtype: p is float32 and v float16, so "
    "cast it first, tl.dot(p.to(v.dtype), v)",
    "NameError": "key_block may use its arguments, tl, triton and math, nothing defined in "
    "other cells",
}


def _error_text(err: BaseException, path: Path, what: str = "key_block") -> str:
    """The exception in one line, with the line of the learner's source it came from.

    The interpreter wraps what the learner's code raised in an InterpreterError;
    the first exception of the chain is the one named.
    """
    chain = [err]
    while chain[-1].__cause__ is not None or chain[-1].__context__ is not None:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)  # type: ignore[arg-type]
    lines = [
        f.lineno
        for e in chain
        for f in traceback.extract_tb(e.__traceback__)
        if f.filename == str(path)
    ]
    where = f" (line {lines[-1]} of your {what})" if lines else ""
    first = chain[-1]
    text = f"{type(first).__name__}: {first}"
    hint = next((h for key, h in _HINTS.items() if key in text), "")
    return f"raised {text[:400]}{where}" + (f" -> {hint}" if hint else "")


def run_child(folder: Path) -> None:
    """Run every body on every case; write {body: {case: (out, lse) or error}} to results.pt."""
    import torch
    import triton
    import triton.language as tl

    skeleton = importlib.import_module(SKELETON)
    job = torch.load(folder / "job.pt", weights_only=True)
    results = []
    for i, (name, source) in enumerate(job["bodies"]):
        path = folder / f"key_block_{i}.py"
        path.write_text(source)  # triton.jit reads the source back from this file
        scope: dict[str, Any] = {"tl": tl, "triton": triton, "math": math, "__name__": path.stem}
        runs: dict[str, Any] = {}
        try:
            exec(compile(source, str(path), "exec"), scope)
            body = triton.jit(scope[name])
        except Exception as err:  # the learner's code
            results.append({"error": _error_text(err, path)})
            continue
        for case in job["cases"]:
            q, k, v = (x.to(torch.float16) for x in case["inputs"])
            try:
                out, lse = skeleton.launch(
                    body, q, k, v, case["is_causal"], case["block_m"], case["block_n"]
                )
                runs[case["name"]] = (out.double().numpy(), lse.double().numpy())
            except Exception as err:  # the learner's code, run by the interpreter
                runs[case["name"]] = _error_text(err, path)
        results.append({"runs": runs})
    torch.save(results, folder / "results.pt")


if __name__ == "__main__":
    run_child(Path(sys.argv[1]))
