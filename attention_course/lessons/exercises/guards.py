"""Running a learner's function: read-only arguments, a time limit, one sentence for what it does.

- `call`: the learner's function on read-only copies of the array arguments,
  numpy's warnings silenced (the checker says what went wrong in its own
  words). Whatever the function does comes back as one failed `CaseResult`
  with one sentence: it raised (``raised``), wrote into an argument (``writes
  input``, naming it, also where it set the array writeable again or resized it
  in place), called an attention function the exercise forbids (``calls
  attention``, `attention_course.lessons.exercises.tripwires`), or exited.
- `time_limit`: the learner's code stopped after a few seconds (`TimeLimit`), so
  a loop without end cannot hang the kernel.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import signal
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .base import CaseResult
from .tripwires import ForbiddenCall, forbidden
from .watch import WriteError

__all__ = ["HINT_WRITES", "SECONDS", "TimeLimit", "call", "time_limit", "writes_hint"]

#: how long a whole check may run the learner's code (every case together)
SECONDS = 20

HINT_WRITES = (
    "your function writes into its {argument} {names}, which belong{s} to the caller: compute "
    "a new array instead (x = x * s, not x *= s, x[...] = ... or x.resize)"
)


class TimeLimit(BaseException):  # not an Exception: the checkers' `except` lets it by
    """The learner's code ran past `time_limit`'s seconds."""


@contextlib.contextmanager
def time_limit(seconds: float = SECONDS) -> Iterator[None]:
    """Raise `TimeLimit` in the block after ``seconds`` (an interval timer, SIGALRM).

    A kernel runs a cell, and a button's callback, in its main thread, where
    the signal can stop a loop that never ends. Elsewhere (another thread,
    Windows) there is no such timer and the block runs unlimited.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def stop(_signum: int, _frame: Any) -> None:
        raise TimeLimit(f"did not return within {seconds:g} s")

    before = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def writes_hint(names: Sequence[str]) -> str:
    """`HINT_WRITES` naming the arguments ``names`` ("one of its arguments" if none is known)."""
    if not names:
        return HINT_WRITES.format(argument="arguments", names="(one of them)", s="")
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    plural = len(names) > 1
    return HINT_WRITES.format(
        argument="arguments" if plural else "argument", names=listed, s="" if plural else "s"
    )


def _read_only(x: Any) -> Any:
    """A read-only copy of an array argument (anything else as it is)."""
    if not isinstance(x, np.ndarray):
        return x
    copy = x.copy()
    copy.flags.writeable = False
    return copy


def _changed(before: Any, after: Any) -> bool:
    """Whether the argument the learner got (``after``) differs from the checker's ``before``."""
    if not isinstance(before, np.ndarray):
        return False
    if not isinstance(after, np.ndarray) or after.shape != before.shape:
        return True
    nan = before.dtype.kind in "fc"
    return not np.array_equal(before, after, equal_nan=nan)


def _quietly(fn: Callable[..., Any], args: Sequence[Any], forbid: bool) -> Any:
    """``fn(*args)`` with numpy's floating-point warnings off, forbidden calls armed if asked
    (a forbidden call the function caught itself is raised again once it returns)."""
    guard = forbidden(fn) if forbid else contextlib.nullcontext([])
    with np.errstate(all="ignore"), warnings.catch_warnings(), guard as calls:
        warnings.simplefilter("ignore")
        result = fn(*args)
    if calls:
        raise ForbiddenCall(calls[0])
    return result


def _is_read_only_error(err: BaseException) -> bool:
    text = str(err)
    return isinstance(err, ValueError) and ("read-only" in text or "not writeable" in text)


def _written(
    fn: Callable[..., Any], args: Sequence[Any], names: Sequence[str], err: BaseException
) -> list[str]:
    """The arguments a function that failed on a read-only array writes into.

    Run again on writable copies, the arguments that changed; failing that,
    the arguments named in the line of the learner's code that raised.
    """
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with contextlib.suppress(Exception):
        _quietly(fn, copies, forbid=False)
    found = [n for n, a, c in zip(names, args, copies, strict=False) if _changed(a, c)]
    if found:
        return found
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "numpy" not in f.filename]
    line = (frames[-1].line or "").split("#")[0] if frames else ""  # the code, not its comment
    return [n for n in names if re.search(rf"(?<![\w'\"]){re.escape(n)}(?![\w'\"])", line)]


def _names(fn: Callable[..., Any], names: Sequence[str], count: int) -> list[str]:
    """The names of ``count`` positional arguments: the learner's own where the function
    names them, else the exercise's (``names``), else "argument n"."""
    try:
        params = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):  # no signature to read
        params = []
    given = [*names, *(f"argument {i + 1}" for i in range(len(names), count))]
    return [params[i] if i < len(params) else given[i] for i in range(count)]


def _failed(name: str, shape: str, hint: str, cause: str) -> tuple[None, CaseResult]:
    return None, CaseResult(name, shape, False, None, hint, cause)


def call(
    fn: Callable[..., Any],
    args: Sequence[Any],
    name: str,
    shape: str,
    names: Sequence[str] = (),
    *,
    forbid: bool = False,
) -> tuple[Any, CaseResult | None]:
    """``fn(*args)`` on read-only copies of the array arguments: (result, None), or (None,
    the failed case, in one sentence).

    ``names`` are the arguments' names in the exercise, for a function that writes into
    one (the learner's own names where its signature gives them);
    ``forbid``: the attention functions the exercise asks the learner to
    write are tripwires while ``fn`` runs (`tripwires.forbidden`). Numpy's
    warnings are silenced while the learner's code runs: a NaN or an overflow
    is reported by the checker, in its words.
    """
    names = _names(fn, names, len(args))
    given = [_read_only(a) for a in args]
    shapes = ", ".join(
        f"{n} {a.shape}" for n, a in zip(names, args, strict=True) if isinstance(a, np.ndarray)
    )
    try:
        result = _quietly(fn, given, forbid)
    except ForbiddenCall as err:
        return _failed(name, shape, err.hint, "calls attention")
    except WriteError as err:
        return _failed(name, shape, writes_hint([err.name]), "writes input")
    except SystemExit:
        return _failed(
            name, shape, "your function called exit(): return a result instead", "raised"
        )
    except Exception as err:  # the learner's code: report whatever it raised
        if _is_read_only_error(err):
            return _failed(name, shape, writes_hint(_written(fn, args, names, err)), "writes input")
        text = f"{type(err).__name__}: {err}".rstrip(": ")
        hint = f"raised {text}" + (f" (inputs: {shapes})" if shapes else "")
        return _failed(name, shape, hint, "raised")
    written = [n for n, a, g in zip(names, args, given, strict=True) if _changed(a, g)]
    if written:
        return _failed(name, shape, writes_hint(written), "writes input")
    return result, None
