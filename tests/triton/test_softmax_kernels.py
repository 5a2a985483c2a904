"""Notebook 07's Triton warm-up: the row softmax kernel and its online version, in the interpreter.

Every kernel below is a solution with one typical mistake, as text, the way the checkers
receive a learner's function once `inspect.getsource` has read it. Each kind is checked in one
child process (Triton's interpreter, TRITON_INTERPRET=1): the solutions pass on several seeds,
each mistake fails with the cause and the words meant for it, and a check of one kernel stays
well under a minute. The gate and the graded edition give one verdict; the starter and
unreadable sources are answered without the interpreter; and both solutions go through the GPU
compiler's front end for sm_80 and sm_90, with no GPU here.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_course.explorers.gate import ExerciseGate
from attention_course.lessons.exercises import FLASH_SOLUTIONS, grading
from attention_course.lessons.exercises.base import SEEDS
from attention_course.lessons.exercises.feedback import feedback
from attention_course.lessons.exercises.softmax_kernels import (
    check_online_softmax,
    check_row_softmax,
    check_softmax_kernels,
    softmax_cases,
)

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="triton is not installed (pip install -e '.[triton]', Linux only)",
)

ROW = FLASH_SOLUTIONS["row_softmax"].code
ONLINE = FLASH_SOLUTIONS["online_softmax"].code


def wrong(source: str, old: str, new: str) -> str:
    assert old in source, old
    return source.replace(old, new)


# (cause, words in the hint, the kernel)
ROW_MISTAKES = {
    "no max": (
        "no max subtraction",
        "float32's exp overflows past 88.7",
        wrong(ROW, "tl.exp(x - tl.max(x, 0))", "tl.exp(x)"),
    ),
    "tail as 0": (
        "tail not masked",
        "the tail of the row is not masked with -inf",
        wrong(ROW, 'other=float("-inf")', "other=0.0"),
    ),
    "store unmasked": (
        "store not masked",
        "your kernel wrote past the end of",
        wrong(ROW, ", mask=inside)\n", ")\n"),
    ),
    "exp2": ("exp2", "tl.math.exp2 computes 2^x", wrong(ROW, "tl.exp(", "tl.math.exp2(")),
    "not divided": (
        "not divided",
        "not divided by the row's sum",
        wrong(ROW, "e / tl.sum(e, 0)", "e"),
    ),
}
ONLINE_MISTAKES = {
    "m from 0": (
        "m starts at 0",
        "start m at -inf",
        wrong(ONLINE, 'tl.full((), float("-inf"), tl.float32)', "tl.full((), 0.0, tl.float32)"),
    ),
    "not rescaled": (
        "sum not rescaled",
        "the running sum was not rescaled when the maximum grew",
        wrong(ONLINE, "total * tl.exp(m - m_new) +", "total +"),
    ),
    "tail as 0": (
        "tail not masked",
        "the tail of the row is not masked with -inf",
        wrong(ONLINE, 'other=float("-inf"))\n        m_new', "other=0.0)\n        m_new"),
    ),
    "no max": (
        "no max subtraction",
        "float32's exp overflows past 88.7",
        wrong(ONLINE, "tl.exp(x - m_new)", "tl.exp(x)")
        .replace("tl.exp(x - m) / total", "tl.exp(x) / total")
        .replace("total * tl.exp(m - m_new) +", "total +"),
    ),
    "raises": (
        "raised",
        "(line 2 of your online_softmax)",
        wrong(ONLINE, "row = tl.program_id(0)", "row = tl.no_such_thing(0)"),
    ),
}


def test_the_cases_cover_what_the_warm_up_promises() -> None:
    for seed in range(6):
        row = softmax_cases(False, seed)
        assert all(c.block > c.length and c.block & (c.block - 1) == 0 for c in row)
        online = softmax_cases(True, seed)
        assert all(c.length % c.block and c.length > 2 * c.block for c in online)
        for cases in (row, online):
            kinds = {c.kind: c for c in cases}
            assert kinds["large"].scores.max() > 300 and kinds["far below"].scores.max() < -800
            assert kinds["tail"].scores.max() < 0  # a tail loaded as 0 would take the maximum
        rising = {c.kind: c for c in online}["rising"].scores
        assert rising[1, -1] > rising[1, 0] + 20  # the maximum grows along the row


@needs_triton
@pytest.mark.slow
@pytest.mark.parametrize(
    ("online", "mistakes"), [(False, ROW_MISTAKES), (True, ONLINE_MISTAKES)], ids=["row", "online"]
)
def test_the_solution_passes_and_each_mistake_is_named(online, mistakes) -> None:
    solution = ONLINE if online else ROW
    bodies = [solution] + [body for _, _, body in mistakes.values()]
    for seed in (3, 1234):
        ours, *wrongs = check_softmax_kernels(bodies, online=online, seed=seed)
        assert ours.passed, str(ours)
        assert f"cases drawn with seed {seed}" in str(ours)
        for (name, (cause, words, _)), report in zip(mistakes.items(), wrongs, strict=True):
            assert not report.passed and report.cause == cause, (name, str(report))
            assert words in report.hint, (name, report.hint)
            assert "\n" not in report.hint and "Traceback" not in str(report)


@needs_triton
@pytest.mark.slow
def test_the_solutions_pass_on_several_seeds() -> None:
    @settings(
        max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(seed=st.integers(0, SEEDS - 1))
    def passes(seed: int) -> None:
        # both kernels on one seed, one child process each
        assert check_row_softmax(ROW, verbose=False, seed=seed).passed
        assert check_online_softmax(ONLINE, verbose=False, seed=seed).passed

    passes()


@needs_triton
@pytest.mark.slow
@pytest.mark.parametrize("name", ["row_softmax", "online_softmax"])
def test_one_check_takes_well_under_a_minute_and_the_gate_agrees_with_the_grader(
    name, capsys
) -> None:
    body = (
        ROW_MISTAKES["tail as 0"][2]
        if name == "row_softmax"
        else ONLINE_MISTAKES["not rescaled"][2]
    )
    gate = ExerciseGate(name)
    assert gate.seconds is None  # its child process has its own limit
    started = time.perf_counter()
    ours = gate.attempt(body, seed=7)
    assert time.perf_counter() - started < 60
    theirs = grading.check(name, body, 7)
    assert str(ours) == str(theirs) and not ours.passed
    with pytest.raises(AssertionError) as failed:
        grading.grade(name, body, 7)
    assert str(failed.value) == f"{name}: not yet.\n{feedback(theirs, hints=False)}"
    solution = FLASH_SOLUTIONS[name].code
    assert gate.attempt(solution, seed=7).passed and gate.revealed == "passed"
    grading.grade(name, solution, 7)  # passes: no AssertionError


def test_the_starter_and_unreadable_sources_are_answered_without_the_interpreter() -> None:
    starter = (
        "def row_softmax(X, Y, length, stride, BLOCK):\n"
        '    raise NotImplementedError("load the row")\n'
    )
    report = check_row_softmax(starter, verbose=False, seed=1)
    assert report.not_written
    said = feedback(report)
    assert said.startswith("Your function is not written yet") and "what do you subtract" in said
    cases = {
        "def row_softmax(X, Y):\n    pass\n": "row_softmax takes 5 arguments",
        "def row_softmax(X, Y\n": "it does not parse: line 1",
    }
    for source, words in cases.items():
        report = check_row_softmax(source, verbose=False, seed=1)
        assert not report.passed and report.cause == "source" and words in report.hint
    with pytest.raises(TypeError, match="a function or its source"):
        check_online_softmax(42)


def test_without_triton_the_warm_up_says_so_in_one_line(monkeypatch) -> None:
    import importlib.util as util

    real = util.find_spec
    monkeypatch.setattr(util, "find_spec", lambda n, *a: None if n == "triton" else real(n, *a))
    report = check_online_softmax(ONLINE, verbose=False, seed=1)
    assert report.cause == "no triton" and str(report).startswith("Triton is not installed")


# -- both solutions compiled for a GPU, in a child without the interpreter ---------------------


def _front_end_for_sm80_and_sm90() -> None:
    import math

    import triton
    import triton.language as tl
    from test_triton_compile import front_end
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from attention_course.lessons.exercises.softmax_kernels import _constexpr_block
    from attention_course.lessons.exercises.triton_runner import read_body

    for name, code in (("row_softmax", ROW), ("online_softmax", ONLINE)):
        body = _constexpr_block(read_body(code, ("X", "Y", "length", "stride", "BLOCK"), name))
        path = Path(tempfile.mkdtemp()) / f"{name}.py"
        path.write_text(body.source)  # triton reads the source back from a file
        scope = {"tl": tl, "triton": triton, "math": math, "__name__": path.stem}
        exec(compile(body.source, str(path), "exec"), scope)
        kernel = triton.jit(scope[name])
        signature = {"X": "*fp32", "Y": "*fp32", "length": "i32", "stride": "i32"}
        source = ASTSource(kernel, {**signature, "BLOCK": "constexpr"}, {"BLOCK": 32})
        for arch in (80, 90):
            module = front_end(
                source, GPUTarget("cuda", arch, 32), {"num_warps": 4, "num_stages": 2}
            )
            print(name, arch, module is not None)


@needs_triton
@pytest.mark.slow
def test_the_warm_up_kernels_pass_the_gpu_compilers_front_end() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_DEFAULT_FP_FUSION": "1"}
    paths = [str(root), str(Path(__file__).parent), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    done = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [
        *("row_softmax 80 True row_softmax 90 True".split()),
        *("online_softmax 80 True online_softmax 90 True".split()),
    ]


if __name__ == "__main__":  # the child of the last test
    # test_triton_compile's front end: the library's kernel tests, lib/tests/kernels
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib" / "tests" / "kernels"))
    _front_end_for_sm80_and_sm90()
