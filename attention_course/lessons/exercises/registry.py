"""Every exercise, once: its checker with its cases, so that the notebook and the graded edition
give one verdict.

Notebook 02's and 07's gates (`attention_course.explorers.gate`) and the
graded edition (`attention_course.lessons.exercises.grading`) both run an
exercise as `run` does: the same checker, with the same arguments, on the
cases drawn from the same seed. An attempt passes in the notebook exactly
when it passes in the graded class on the same seed (the tests try every
wrong attempt they hold both ways).

`EXERCISES` maps each exercise's name (the name of the learner's function)
to its `Exercise`; `exercise` finds one by that name or by its checker (a
notebook's gate is built from the checker it imports:
``ExerciseGate(check_attention)``). Importing this module imports neither
torch nor triton.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .attention import check_attention
from .base import seeded
from .combined_mask import check_combined_mask
from .decode import check_decode_step
from .feedback import checked
from .flash_backward import check_flash_backward
from .flash_forward import check_flash_forward
from .flash_layer import FLASH_LAYER_SECONDS, check_flash_layer
from .flash_steps import check_diagonal_mask, check_key_loop, check_key_stop
from .guards import SECONDS
from .key_block import check_key_block
from .multi_head import check_multi_head
from .online_update import check_online_update
from .scale_rule import check_scale_rule, scale_rule_logits
from .softmax_kernels import check_online_softmax, check_row_softmax

__all__ = ["EXERCISES", "Exercise", "exercise", "run"]


def _scale_rule_arguments() -> dict[str, Any]:
    """Notebook 02's exercise 1: a rule that sharpens, dividing by something that grows with
    d, on its fixed cases (the second table's trials)."""
    return {"expect": "sharpen", "divides": True, "logits": scale_rule_logits()}


@dataclass(frozen=True)
class Exercise:
    """One exercise: the learner's function's name, its notebook, and its checker.

    ``checker(fn, verbose=..., seed=..., **arguments())`` returns the report;
    ``arguments`` gives the exercise's own keyword arguments (None: none);
    ``seeded`` says whether its cases are drawn from a seed (the scale rule's
    are fixed, and its checker takes none); ``seconds`` limits each check of
    the learner's code (None: the checker limits its own child process, as the
    Triton one does).
    """

    name: str
    notebook: str
    checker: Callable[..., Any]
    arguments: Callable[[], dict[str, Any]] | None = None
    seeded: bool = True
    seconds: float | None = SECONDS

    def check(self, fn: Any, seed: int | None = None) -> Any:
        """The report on ``fn`` (printed nowhere), on the cases of ``seed`` (None: the
        attempt's own, from its source)."""
        kwargs = self.arguments() if self.arguments else {}
        if self.seeded:
            if seed is None and (callable(fn) or isinstance(fn, str)):
                seed = seeded(None, fn)
            kwargs["seed"] = seed
        return self.checker(fn, verbose=False, **kwargs)


EXERCISES: dict[str, Exercise] = {
    e.name: e
    for e in (
        # notebook 02
        Exercise("under_divided", "02", check_scale_rule, _scale_rule_arguments, seeded=False),
        Exercise("my_attention", "02", check_attention),
        Exercise("combined_mask", "02", check_combined_mask),
        Exercise("decode_step", "02", check_decode_step),
        Exercise("multi_head", "02", check_multi_head),
        # notebook 07
        Exercise("online_update", "07", check_online_update),
        Exercise("key_loop", "07", check_key_loop),
        Exercise("key_stop", "07", check_key_stop),
        Exercise("diagonal_mask", "07", check_diagonal_mask),
        Exercise("flash_forward", "07", check_flash_forward),
        Exercise("flash_backward", "07", check_flash_backward),
        Exercise("FlashAttention", "07", check_flash_layer, seconds=FLASH_LAYER_SECONDS),
        Exercise("row_softmax", "07", check_row_softmax, seconds=None),
        Exercise("online_softmax", "07", check_online_softmax, seconds=None),
        Exercise("key_block", "07", check_key_block, seconds=None),
    )
}


def exercise(key: Any) -> Exercise:
    """The exercise named ``key``, or whose checker ``key`` is; KeyError naming the exercises
    for anything else."""
    found = EXERCISES.get(key) if isinstance(key, str) else None
    found = found or next((e for e in EXERCISES.values() if e.checker is key), None)
    if found is None:
        raise KeyError(f"no exercise {key!r}; there are {sorted(EXERCISES)}")
    return found


def run(name: str, fn: Any, seed: int | None = None, *, hints: bool = True) -> tuple[Any, str]:
    """Exercise ``name``'s check of ``fn`` on the cases of ``seed``, under its time limit:
    (the report, the feedback the learner reads), or (None, one sentence on why it could not
    run). ``hints``: whether the feedback may point at hints (the graded edition has none)."""
    found = exercise(name)
    return checked(lambda f: found.check(f, seed), fn, found.seconds, hints=hints)
