"""The child process that runs a learner's softmax kernels in Triton's interpreter (notebook 07).

    python -m attention_course.lessons.exercises.softmax_child FOLDER

Started by `attention_course.lessons.exercises.triton_runner.run_bodies` (with
``child=`` this module) with TRITON_INTERPRET=1 in its environment, so
triton is imported here for the first time already in interpreter mode. It
reads ``FOLDER/job.pt``: the kernels' sources (each the learner's whole
kernel, ``fn(X, Y, length, stride, BLOCK)``, its last argument already
annotated ``tl.constexpr``) and the launches (``inputs``: one (rows,
stride) float32 tensor, ``length``, ``block``). Each kernel runs on a grid
of one program per row, into an output filled with `SENTINEL`, and
``FOLDER/results.pt`` receives each output (float64 numpy, sentinel
included, and whether the room after the last row was left alone), or the error the
learner's code raised, named by the line of
their source it came from. Nothing imports this module; it is only run.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .triton_child import _error_text

__all__ = ["SENTINEL", "SLACK", "run_child"]

#: what the output holds before the kernel runs: a softmax is never 7, so an entry that still
#: holds it was not written, and a padding entry that does not was written past the row's end
SENTINEL = 7.0
#: blocks of room after each matrix, so that an unmasked load or store stays in the buffer
SLACK = 4


def run_child(folder: Path) -> None:
    """Run every kernel on every launch; write [{"runs": {launch: output or error}}, ...]."""
    import torch
    import triton
    import triton.language as tl

    job = torch.load(folder / "job.pt", weights_only=True)
    results: list[dict[str, Any]] = []
    for i, (name, source) in enumerate(job["bodies"]):
        path = folder / f"{name}_{i}.py"
        path.write_text(source)  # triton.jit reads the source back from this file
        scope: dict[str, Any] = {"tl": tl, "triton": triton, "math": math, "__name__": path.stem}
        try:
            exec(compile(source, str(path), "exec"), scope)
            kernel = triton.jit(scope[name])
        except Exception as err:  # the learner's code
            said = _error_text(err, path, name).replace("key_block may use", f"{name} may use")
            results.append({"error": said})
            continue
        runs: dict[str, Any] = {}
        for case in job["cases"]:
            (x,) = case["inputs"]
            rows, stride = x.shape
            size = rows * stride  # each matrix is the start of a buffer with SLACK after it,
            # so that a load or store past the last row's end stays inside the buffer
            given = torch.full((size + SLACK * case["block"],), 50.0)
            given[:size] = x.to(torch.float32).reshape(-1)
            out = torch.full((size + SLACK * case["block"],), SENTINEL)
            try:
                kernel[(rows,)](given, out, case["length"], stride, case["block"])
                y = out.double().numpy()
                tail = y[size:]  # (SLACK * block,): past the last row
                runs[case["name"]] = (
                    y[:size].reshape(rows, stride),
                    bool(np.all(tail == SENTINEL)),
                )
            except Exception as err:  # the learner's code, run by the interpreter
                said = _error_text(err, path, name).replace("key_block may use", f"{name} may use")
                runs[case["name"]] = said
        results.append({"runs": runs})
    torch.save(results, folder / "results.pt")


if __name__ == "__main__":
    run_child(Path(sys.argv[1]))
