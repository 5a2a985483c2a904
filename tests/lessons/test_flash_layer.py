"""Notebook 07's exercise 4: FlashAttention as a torch.autograd.Function, and the model trained
with it.

The course's class passes on any seed (hypothesis); each class of mistake (too few gradients,
numpy where torch is asked, float64 for float32 inputs, a backward that ignores is_causal or
drops the forward's output, the forward recomputed in backward, an attention function called,
the inputs written into, no flash_forward at all, not a Function) fails with a message that
names it; the learner's unfinished flash_forward and flash_backward are replaced by the
course's for the check, with a note; the gate and the graded edition give one verdict; and
the training helper trains with the learner's class once it passes, the course's before.
"""

from __future__ import annotations

import linecache
import math
import time
import zlib

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_course.explorers.gate import ExerciseGate
from attention_course.lessons.exercises import FLASH_SOLUTIONS, check_flash_layer, grading
from attention_course.lessons.exercises.base import SEEDS, attempt_seed
from attention_course.lessons.exercises.feedback import feedback
from attention_course.lessons.exercises.registry import EXERCISES, run
from attention_course.lessons.exercises.solutions import solution_function, solution_scope

SOLUTION = FLASH_SOLUTIONS["FlashAttention"].code
SEED = 23


def layer(code: str = SOLUTION, **scope_changes):
    """The class ``code`` defines, in a namespace with the course's inner functions."""
    scope = {**solution_scope("FlashAttention"), **scope_changes}
    name = f"<layer {zlib.crc32(code.encode())}>"  # its source readable, as a notebook cell's
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    exec(compile(code, name, "exec"), scope)
    return scope["FlashAttention"]


def wrong(old: str, new: str):
    assert old in SOLUTION, old
    return layer(SOLUTION.replace(old, new))


_RECOMPUTE = (
    "rs = [flash_forward(a, b, c, 8, 8, ctx.is_causal) for a, b, c in zip(q_, k_, v_)]\n"
    "        grads = flash_backward(q_, k_, v_, np.stack([o for o, _ in rs]), "
    "np.stack([s for _, s in rs]), d_, ctx.is_causal)"
)
_CALLS = "import torch.nn.functional as F\n" + SOLUTION.replace(
    "        return out.reshape(*q.shape[:-1], v.shape[-1]).to(q.dtype)  # (..., L, Ev)",
    "        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)",
)
_NO_FLASH = SOLUTION.replace(
    "runs = [flash_forward(a, b, c, 8, 8, is_causal) for a, b, c in zip(*heads)]",
    "runs = [(np.asarray(_F.scaled_dot_product_attention(torch.from_numpy(a), torch.from_numpy(b), "
    "torch.from_numpy(c), is_causal=is_causal)), np.logaddexp.reduce(np.where(np.tri(len(a), "
    "len(b), dtype=bool) | (not is_causal), a @ b.T / math.sqrt(a.shape[-1]), -np.inf), "
    "axis=-1)) for a, b, c in zip(*heads)]",
)
_WRITES = SOLUTION.replace(
    "        ctx.is_causal = is_causal\n",
    "        ctx.is_causal = is_causal\n        heads[0][...] = 0  # a numpy view of q\n",
).replace(
    "x.detach().reshape(-1, *x.shape[-2:]).double().numpy() for x in (q, k, v)]",
    "x.detach().reshape(-1, *x.shape[-2:]).numpy() for x in (q, k, v)]",
)

#: (cause, words in the hint, the class)
LAYER_MISTAKES = [
    (
        "raised",
        "backward returns one gradient per argument of forward",
        wrong("return dq, dk, dv, None", "return dq, dk, dv"),
    ),
    (
        "raised",
        "backward must return torch tensors",
        wrong("return dq, dk, dv, None", "return dq.numpy(), dk.numpy(), dv.numpy(), None"),
    ),
    (
        "raised",
        "ctx.save_for_backward keeps tensors only",
        wrong(
            "save_for_backward(q, k, v, out, lse)", "save_for_backward(q, k, v, out, lse.numpy())"
        ),
    ),
    (
        "dtype",
        "forward returned torch.float64 for torch.float32 inputs",
        wrong(".to(q.dtype)  # (..., L, Ev)", "  # (..., L, Ev)"),
    ),
    ("not a tensor", "not a torch tensor", wrong("to(q.dtype)  #", "to(q.dtype).numpy()  #")),
    (
        "backward not causal",
        "forward was causal, backward was not",
        wrong("ctx.is_causal)", "False)"),
    ),
    (
        "no out in backward",
        "δ = rowsum(d_out * out) needs the forward's own output",
        wrong("out.numpy(), lse", "0 * out.numpy(), lse"),
    ),
    (
        "forward recomputed",
        "backward called flash_forward again",
        wrong(
            "grads = flash_backward(q_, k_, v_, out.numpy(), lse.numpy(), d_, ctx.is_causal)",
            _RECOMPUTE,
        ),
    ),
    ("calls attention", "your class calls torch.nn.functional", layer(_CALLS)),
    ("writes input", "your class writes into q", layer(_WRITES)),
]


def test_the_solution_passes_on_any_seed() -> None:
    cls = solution_function("FlashAttention")

    @settings(
        max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(seed=st.integers(0, SEEDS - 1))
    def passes(seed: int) -> None:
        report = check_flash_layer(cls, verbose=False, seed=seed)
        assert report.passed and not report.notes, str(report)

    passes()


def test_the_cases_cover_what_the_exercise_promises() -> None:
    from attention_course.lessons.exercises.flash_layer import layer_cases

    for seed in range(5):
        cases = layer_cases(seed)
        assert [c.name for c in cases][-1] == "gradcheck" and cases[-1].gradcheck
        assert any(c.is_causal for c in cases) and any(not c.is_causal for c in cases)
        assert any(c.key.shape[2] != c.query.shape[2] for c in cases)  # L != S
        assert any(c.float32 for c in cases)
        scores = [
            c.query @ np.swapaxes(c.key, -1, -2) / math.sqrt(c.query.shape[-1]) for c in cases
        ]
        assert max(float(np.max(s)) for s in scores) > 500  # scores near 1000


@pytest.mark.parametrize(
    ("cause", "words", "cls"), LAYER_MISTAKES, ids=[m[0] + ":" + m[1][:20] for m in LAYER_MISTAKES]
)
def test_each_layer_mistake_gets_its_own_message(cause, words, cls) -> None:
    report = check_flash_layer(cls, verbose=False, seed=SEED)
    assert not report.passed and report.cause == cause, str(report)
    assert words in report.hint, report.hint
    assert "\n" not in report.hint and "Traceback" not in str(report)


def test_a_layer_that_never_calls_flash_forward_is_told_so() -> None:
    import torch.nn.functional as F

    cls = layer(_NO_FLASH, _F=F)
    report = check_flash_layer(cls, verbose=False, seed=SEED)
    assert report.cause in ("no flash_forward", "calls attention"), str(report)


def test_anything_but_a_function_class_gets_one_sentence(capsys) -> None:
    def plain(q, k, v, is_causal=False):
        return q

    gate = ExerciseGate("FlashAttention")
    report = gate.attempt(plain, seed=SEED)
    assert report.cause == "not a Function" and "torch.autograd.Function" in report.hint
    assert gate.attempt(42) is None
    said = capsys.readouterr().out
    assert "The check could not run: check_flash_layer needs a class, got int." in said
    assert "Traceback" not in said


def test_a_layer_that_raises_hangs_or_returns_nan_gets_one_sentence(capsys) -> None:
    breaks = wrong("ctx.is_causal = is_causal", "raise RuntimeError('something broke')")
    report = check_flash_layer(breaks, verbose=False, seed=SEED)
    assert report.cause == "raised" and "raised RuntimeError: something broke" in report.hint
    nan = wrong("return dq, dk, dv, None", "return dq * np.nan, dk, dv, None")
    assert check_flash_layer(nan, verbose=False, seed=SEED).cause == "not finite"
    forever = wrong("ctx.is_causal = is_causal", "while True:\n            pass")
    gate = ExerciseGate("FlashAttention", seconds=0.5)
    assert gate.attempt(forever, seed=SEED) is None
    assert capsys.readouterr().out.startswith("Your function did not return within 0.5 s")


def test_the_starter_asks_its_question_and_unwritten_inner_functions_are_stood_in_for() -> None:
    def not_written(*args):
        raise NotImplementedError("not yet")

    class FlashAttention(torch.autograd.Function):  # the notebook's starter, as a learner has it
        @staticmethod
        def forward(ctx, q, k, v, is_causal=False):
            raise NotImplementedError("flash_forward on every head")

        @staticmethod
        def backward(ctx, d_out):
            raise NotImplementedError("flash_backward")

    report = check_flash_layer(FlashAttention, verbose=False, seed=SEED)
    assert report.not_written and feedback(report).startswith("Your function is not written yet")
    assert "What must forward keep for backward" in feedback(report)
    # the course's class with the learner's exercise 2 and 3 still starters: it passes, and
    # the report says which of the course's functions stood in
    cls = layer(flash_forward=not_written, flash_backward=not_written)
    report = check_flash_layer(cls, verbose=False, seed=SEED)
    assert report.passed, str(report)
    assert "your flash_forward is not written yet, so your class ran with the course's" in str(
        report
    )
    assert "your flash_backward is not written yet" in str(report)
    scope = cls.forward.__globals__
    assert scope["flash_forward"] is not_written  # put back after the check
    broken = layer(flash_backward=lambda *a: tuple(np.zeros_like(x) for x in a[:3]))
    report = check_flash_layer(broken, verbose=False, seed=SEED)
    assert report.passed and "does not pass exercise 3's check yet" in str(report)


def test_the_seed_of_a_class_comes_from_its_methods() -> None:
    cls = layer()
    other = wrong("return dq, dk, dv, None", "return dq, dk, dv, None  # the same")
    assert attempt_seed(cls) == attempt_seed(cls) != attempt_seed(other)


@pytest.mark.parametrize("cls", [solution_function("FlashAttention"), LAYER_MISTAKES[0][2]])
def test_the_gate_and_the_graded_edition_give_one_verdict(cls, capsys) -> None:
    gate = ExerciseGate("FlashAttention")
    ours = gate.attempt(cls, seed=SEED)
    theirs = grading.check("FlashAttention", cls, SEED)
    assert str(ours) == str(theirs)
    try:
        grading.grade("FlashAttention", cls, SEED)
        graded = True
    except AssertionError as failed:
        graded = False
        assert str(failed) == f"FlashAttention: not yet.\n{feedback(theirs, hints=False)}"
    assert ours.passed == theirs.passed == graded
    assert gate.report is ours


def test_a_check_takes_under_two_seconds() -> None:
    cls = solution_function("FlashAttention")
    started = time.perf_counter()
    report, _ = run("FlashAttention", cls, SEED)
    assert report.passed and time.perf_counter() - started < 5  # ~1 s here; slack for load
    assert EXERCISES["FlashAttention"].notebook == "07"


# -- the model, trained with it ---------------------------------------------------------------


@pytest.mark.slow
def test_the_model_trains_with_the_learners_class_once_it_passes(monkeypatch, capsys) -> None:
    from attention_course.lessons.exercises import flash_training

    monkeypatch.setattr(flash_training, "TRAINING", {**flash_training.TRAINING, "steps": 30})
    config = flash_training._config

    def short():
        from dataclasses import replace

        return replace(config(), steps=30, warmup=5)

    monkeypatch.setattr(flash_training, "_config", short)
    monkeypatch.setattr(flash_training, "SCORED", 40)
    gate = ExerciseGate("FlashAttention")
    starter = LAYER_MISTAKES[0][2]
    gate.attempt(starter, seed=SEED)
    before = flash_training.train_with_layer(starter, gate)
    assert before.who == "the course's FlashAttention" and "has not passed" in before.summary()
    mine = solution_function("FlashAttention")
    assert gate.attempt(mine, seed=SEED).passed
    after = flash_training.train_with_layer(mine, gate)
    assert after.who == "your FlashAttention" and not after.notes
    assert after.gap < 1e-3  # the same training, to rounding, for 30 steps
    assert len(after.losses[after.flash]) == 30
    picture = after.figure()
    assert "dashed vermillion, squares" in picture.alt and picture.png()[:4] == b"\x89PNG"
