"""Notebook 07's Triton exercise: the checker runs the learner's key loop in the interpreter.

Every body below is the solution with one typical mistake, as text, the way
`check_key_block` receives a learner's function once `inspect.getsource` has
read it. They are checked together in one child process (Triton's
interpreter, TRITON_INTERPRET=1, about ten seconds on two cores): the
solution must pass FlashAttention's rule, each mistake must fail with the
cause and the words meant for it. The starter and unreadable sources are
answered without starting the interpreter. Last, the skeleton with the
solution goes through the GPU compiler's front end for sm_80 and sm_90,
with no GPU here: the interpreter accepts code the compiler refuses (a
plain global, for one), so the exercise's kernel is held to both.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from attention_course.lessons.exercises import FLASH_SOLUTIONS, skeleton_source
from attention_course.lessons.exercises.feedback import feedback
from attention_course.lessons.exercises.key_block import (
    check_key_block,
    check_key_blocks,
    kernel_cases,
)
from attention_course.lessons.exercises.triton_runner import ARGUMENTS, CHILD_TIMEOUT_S

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="triton is not installed (pip install -e '.[triton]', Linux only)",
)

SOLUTION = FLASH_SOLUTIONS["key_block"].code


def wrong(old: str, new: str) -> str:
    assert old in SOLUTION, old
    return SOLUTION.replace(old, new)


# (cause, words in the hint, the body)
MISTAKES = {
    "end not masked": (
        "the last key block is not masked",
        wrong("keep = cols[None, :] < length_k", "keep = cols[None, :] >= 0"),
    ),
    "causal ignored": (
        "the causal mask was not applied inside the blocks that cross the diagonal",
        wrong("if IS_CAUSAL:", "if False:"),
    ),
    "diagonal masked": (
        "query i must see keys j <= i, key i included",
        wrong("cols[None, :] <= rows[:, None]", "cols[None, :] < rows[:, None]"),
    ),
    "exp not exp2": ("take tl.math.exp2, not tl.exp", wrong("tl.math.exp2", "tl.exp")),
    "acc not rescaled": (
        "lse is right but the output is not",
        wrong("acc = acc * rescale[:, None] +", "acc = acc +"),
    ),
    "raised": (
        "cast it first, tl.dot(p.to(v.dtype), v)",
        wrong("tl.dot(p.to(v.dtype), v)", "tl.dot(p, v)"),
    ),
}
# natural-log scores and tl.exp: the same weights, so the output is right, but m is in
# natural units where the skeleton expects log2 units, and the stored lse is off
MISTAKES["lse units"] = (
    "the output is right, but the stored lse is off",
    SOLUTION.replace("* qk_scale", "* (qk_scale * 0.6931471805599453)").replace(
        "tl.math.exp2", "tl.exp"
    ),
)
DECORATED = "@triton.jit\n" + SOLUTION
UNDEFINED = wrong("rescale = tl.math.exp2(m - m_new)", "rescale = my_helper(m, m_new)")


def starter(q, k, v, m, total, acc, rows, cols, length_k, qk_scale, IS_CAUSAL):
    """The body of the key loop: the notebook's starter."""
    raise NotImplementedError("write the body of the key loop")


@pytest.fixture(scope="module")
def reports():
    """Every body's report, from one run of the interpreter's child process."""
    bodies = [SOLUTION, DECORATED, UNDEFINED, *(body for _, body in MISTAKES.values())]
    found = check_key_blocks(bodies)
    return dict(zip(["solution", "decorated", "undefined", *MISTAKES], found, strict=True))


@needs_triton
@pytest.mark.slow
def test_the_solution_passes_flashattentions_rule_in_the_interpreter(reports):
    report = reports["solution"]
    assert report.passed, str(report)
    assert len(report.cases) == len(kernel_cases()) == 5
    assert str(report).startswith("All 5 cases agree with the float64 answer")
    assert reports["decorated"].passed, "a @triton.jit line of the learner's is dropped"


@needs_triton
@pytest.mark.slow
@pytest.mark.parametrize("cause", list(MISTAKES))
def test_each_kernel_mistake_gets_its_own_message(reports, cause):
    words, _ = MISTAKES[cause]
    report = reports[cause]
    assert not report.passed
    assert report.cause == cause, str(report)
    assert words in report.hint, report.hint


@needs_triton
@pytest.mark.slow
def test_an_error_names_the_line_and_what_a_body_may_use(reports):
    mistake = reports["raised"]
    assert "(line 11 of your key_block)" in mistake.hint  # the second tl.dot
    undefined = reports["undefined"]
    assert "NameError" in undefined.hint and "nothing defined in other cells" in undefined.hint


def test_the_starter_is_a_question_and_starts_no_interpreter():
    report = check_key_block(starter, verbose=False)
    said = feedback(report)
    assert said.startswith("Your function is not written yet")
    assert "within FlashAttention's rule (at most twice PyTorch's float16 error) on 5 cases" in said
    assert "what does one pass of the key loop do" in said


def test_sources_that_cannot_run_are_explained_without_the_interpreter():
    cases = {
        "def key_block(q, k, v):\n    return q\n": "key_block takes 11 arguments",
        "def key_block(q, k\n": "it does not parse: line 1",
        "x = 1\n": "expected one function definition, found 0",
    }
    for source, words in cases.items():
        report = check_key_block(source, verbose=False)
        assert not report.passed and report.cause == "source" and words in report.hint
    scope: dict = {}
    exec(SOLUTION, scope)  # a function with no source file
    report = check_key_block(scope["key_block"], verbose=False)
    assert "its source cannot be read" in report.hint
    with pytest.raises(TypeError, match="a function or its source"):
        check_key_block(42)


def test_a_machine_without_triton_or_a_kernel_without_end_is_told_in_one_line(monkeypatch):
    import importlib.util as util

    from attention_course.lessons.exercises import key_block

    real = util.find_spec

    def no_triton(name, *args):
        return None if name == "triton" else real(name, *args)

    monkeypatch.setattr(util, "find_spec", no_triton)
    missing = check_key_block(SOLUTION, verbose=False)
    assert missing.cause == "no triton" and str(missing).startswith("Triton is not installed")
    monkeypatch.setattr(util, "find_spec", real)

    def never_ends(bodies, launches):
        raise subprocess.TimeoutExpired("python", CHILD_TIMEOUT_S)

    monkeypatch.setattr(key_block, "run_bodies", never_ends)
    stuck = check_key_block(SOLUTION, verbose=False)
    assert stuck.cause == "timeout" and "did not finish in 180 s" in str(stuck)


def test_the_skeleton_shown_to_the_learner_leaves_the_body_out():
    text = skeleton_source()
    assert text.startswith("@triton.jit\ndef attention_skeleton(")
    assert "key_block(\n            q, k, v, m, total, acc, rows, cols, length_k" in text
    assert "exp2" not in text and "tl.dot" not in text  # the learner's part
    assert "# fmt: skip" not in text
    assert ARGUMENTS == tuple(SOLUTION.split("(", 1)[1].split(")", 1)[0].split(", "))


# -- the skeleton and the solution compiled for a GPU, in a child without the interpreter


def _front_end_for_sm80_and_sm90() -> None:
    import math

    import triton
    import triton.language as tl
    from test_triton_compile import front_end
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from attention_course.lessons.exercises import triton_skeleton

    path = Path(tempfile.mkdtemp()) / "key_block_solution.py"
    path.write_text(SOLUTION)  # triton reads the source back from a file
    scope = {"tl": tl, "triton": triton, "math": math, "__name__": path.stem}
    exec(compile(SOLUTION, str(path), "exec"), scope)
    triton_skeleton.key_block = triton.jit(scope["key_block"])
    pointers = {name: "*fp16" for name in ("Q", "K", "V", "Out")}
    scalars = {"Lse": "*fp32", "length_q": "i32", "length_k": "i32", "qk_scale": "fp32"}
    constexprs = {"E": 64, "EV": 64, "BLOCK_M": 64, "BLOCK_N": 64, "IS_CAUSAL": True}
    signature = {**pointers, **scalars, **dict.fromkeys(constexprs, "constexpr")}
    source = ASTSource(triton_skeleton.attention_skeleton, signature, constexprs)
    # the compiler's first stage, where a kernel's Python is checked (globals, constexprs,
    # types, shapes): the same as lib/tests/kernels/test_triton_compile.py's for the library's
    # kernels
    for arch in (80, 90):
        module = front_end(source, GPUTarget("cuda", arch, 32), {"num_warps": 4, "num_stages": 2})
        print(arch, "tt.dot" in str(module))


@needs_triton
@pytest.mark.slow
def test_the_exercise_kernel_passes_the_gpu_compilers_front_end():
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_DEFAULT_FP_FUSION": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["80", "True", "90", "True"]  # IR with the learner's products


if __name__ == "__main__":  # the child of the last test
    # test_triton_compile's front end: the library's kernel tests, lib/tests/kernels
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib" / "tests" / "kernels"))
    _front_end_for_sm80_and_sm90()
