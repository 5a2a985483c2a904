"""The checkers' guards, one by one: read-only arguments and the writes they name, the tripwires
on attention functions, the arrays that record which keys are read, the attempt's seed."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attention_lib
from attention_course.lessons.exercises.base import SEEDS, as_array, attempt_seed, rows_close
from attention_course.lessons.exercises.guards import call, writes_hint
from attention_course.lessons.exercises.tripwires import ForbiddenCall, forbidden
from attention_course.lessons.exercises.watch import Reads, WriteError, watched
from attention_lib import attention_weights, flash_attention, scaled_dot_product_attention

# -- read-only arguments ----------------------------------------------------------------------


def test_the_learner_gets_read_only_copies_and_the_checkers_arrays_stay_as_they_were() -> None:
    x = np.arange(6.0).reshape(2, 3)
    seen = []

    def looks(a, b):
        seen.append((a.flags.writeable, a is x, np.shares_memory(a, x)))
        return a + b

    result, failed = call(looks, (x, 1), "case", "", ("a", "b"))
    assert failed is None and seen == [(False, False, False)]
    np.testing.assert_array_equal(result, x + 1)


@pytest.mark.parametrize(
    "write",
    [
        lambda q, k_cache: q.__setitem__(0, 9.0),
        lambda q, k_cache: q.__imul__(2.0),
        lambda q, k_cache: np.copyto(q, 0.0),
        lambda q, k_cache: q.sort(axis=0),
        lambda q, k_cache: (setattr(q.flags, "writeable", True), q.fill(0.0)),
        lambda q, k_cache: q.resize((7,), refcheck=False),
        lambda q, k_cache: k_cache.__iadd__(1.0),
    ],
    ids=["setitem", "in place", "copyto", "sort", "made writeable", "resized", "the second"],
)
def test_a_write_into_an_argument_is_named_in_one_sentence(write) -> None:
    x, y = np.array([[3.0, 1.0], [2.0, 4.0]]), np.ones((2, 2))
    before = x.copy(), y.copy()
    _, failed = call(write, (x, y), "case", "", ("q", "k_cache"))
    assert failed is not None and failed.cause == "writes input"
    name = "k_cache" if "iadd" in repr(write.__code__.co_names) else "q"
    assert failed.hint == writes_hint([name]) and f"its argument {name}," in failed.hint
    np.testing.assert_array_equal(x, before[0])  # the checker's own arrays, untouched
    np.testing.assert_array_equal(y, before[1])


def test_a_write_of_the_same_values_is_named_from_the_line_that_wrote() -> None:
    def rewrites(acc, s):
        acc[...] = acc  # the same values: no difference to find afterwards
        return acc

    _, failed = call(rewrites, (np.zeros(3), np.ones(3)), "case", "", ("acc", "s"))
    assert failed is not None and "its argument acc," in failed.hint

    def renamed(state, scores):  # the learner's own names are the ones named
        state[...] = state
        return state

    _, failed = call(renamed, (np.zeros(3), np.ones(3)), "case", "", ("acc", "s"))
    assert failed is not None and "its argument state," in failed.hint


def test_what_a_function_raises_or_exits_with_is_one_sentence() -> None:
    def raises(q):
        raise KeyError("nope")

    _, failed = call(raises, (np.zeros((2, 3)),), "case", "", ("q",))
    assert failed.cause == "raised" and failed.hint == "raised KeyError: 'nope' (inputs: q (2, 3))"

    def exits(q):
        sys.exit(1)

    _, failed = call(exits, (np.zeros(2),), "case", "", ("q",))
    assert failed.hint == "your function called exit(): return a result instead"


@pytest.mark.parametrize(
    ("got", "cause", "words"),
    [
        ([1.0, 2.0], "not an array", "the output is a Python list, not a numpy array"),
        ((1.0,), "not an array", "the output is a Python tuple, not a numpy array"),
        (None, "not an array", "does your function end with a return?"),
        ({"a": 1}, "not an array", "the output is a dict, not a numpy array"),
        (np.zeros(2, np.float32), "float32", "the output is float32: compute in float64"),
        (np.zeros(2, np.float16), "float32", "float16 keeps about 3 digits"),
        (np.zeros(2, complex), "not an array", "holds complex128 values, not real numbers"),
    ],
)
def test_an_answer_that_is_not_a_float64_array_is_named(got, cause, words) -> None:
    array, found, said = as_array(got, "the output")
    assert found == cause and words in said and array.size == 0


def test_an_answer_of_ints_or_bools_is_read_as_floats() -> None:
    array, cause, said = as_array(np.arange(3), "the output")
    assert cause == said == "" and array.dtype == np.float64


def test_rows_are_compared_by_the_verdicts_tolerance() -> None:
    want = np.ones((3, 2))
    got = want + np.array([[0.0], [2e-7], [1e-3]])  # rounding, float32's size, a real miss
    assert rows_close(got, want).tolist() == [True, False, False]
    # numpy's default tolerance would call row 1 equal; the verdict does not
    assert np.all(np.isclose(got, want), axis=-1).tolist() == [True, True, False]


# -- tripwires --------------------------------------------------------------------------------

sdpa = scaled_dot_product_attention  # a learner's own name for it, in this namespace


def _calls_by_alias(q):
    return sdpa(q, q, q)


def test_the_library_attention_functions_are_tripwires_under_any_name() -> None:
    q = np.eye(2)
    for fn, name in [
        (
            lambda q: attention_lib.scaled_dot_product_attention(q, q, q),
            "scaled_dot_product_attention",
        ),
        (lambda q: attention_weights(q, q), "attention_weights"),
        (lambda q: flash_attention(q, q, q), "flash_attention"),
        (_calls_by_alias, "scaled_dot_product_attention"),
    ]:
        with forbidden(fn) as calls, pytest.raises(ForbiddenCall) as caught:
            fn(q)
        assert calls == [f"attention_lib.{name}"]
        assert caught.value.hint.startswith(f"your function calls attention_lib.{name}: this")
    # all put back
    assert attention_lib.scaled_dot_product_attention is scaled_dot_product_attention
    assert globals()["sdpa"] is scaled_dot_product_attention
    assert sdpa(q, q, q).shape == (2, 2)


def test_a_call_caught_by_the_learners_own_except_still_fails() -> None:
    def hides_it(q, k, v, mask=None):
        try:
            return scaled_dot_product_attention(q, k, v, mask)
        except Exception:  # a learner's catch-all: the tripwire is not an Exception
            return q

    x = np.eye(3)
    _, failed = call(hides_it, (x, x, x), "case", "", ("q", "k", "v"), forbid=True)
    assert failed is not None and failed.cause == "calls attention"

    def swallows_everything(q, k, v, mask=None):
        try:
            return scaled_dot_product_attention(q, k, v, mask)
        except BaseException:  # even this: the call was counted
            return q

    _, failed = call(swallows_everything, (x, x, x), "case", "", ("q", "k", "v"), forbid=True)
    assert failed is not None and failed.cause == "calls attention"
    assert "calls attention_lib.scaled_dot_product_attention" in failed.hint


def test_pytorch_is_armed_also_when_the_learner_imports_it_inside_the_function() -> None:
    def imports_torch(q):
        import torch.nn.functional as F

        t = F.__dict__["scaled_dot_product_attention"]
        return t.__name__

    with forbidden(imports_torch):
        name = imports_torch(np.eye(2))
    assert name == "scaled_dot_product_attention"  # the tripwire stands in, under its name
    import torch.nn.functional as F

    assert F.scaled_dot_product_attention.__module__ != __name__  # put back afterwards


def test_pytorchs_module_is_a_tripwire_too() -> None:
    import torch

    def builds_one(x):
        return torch.nn.MultiheadAttention(4, 2)

    with forbidden(builds_one) as calls, pytest.raises(ForbiddenCall):
        builds_one(None)
    assert calls == ["torch.nn.MultiheadAttention"]
    assert torch.nn.MultiheadAttention(4, 2).num_heads == 2


# -- arrays that record which keys are read ---------------------------------------------------


def _keys(log: Reads) -> list[tuple[str, list[int]]]:
    return [(name, rows.tolist()) for kind, name, rows in log.events if kind == "read"]


def test_slicing_reads_nothing_and_a_computation_reads_the_rows_it_uses() -> None:
    log = Reads()
    k = watched(np.arange(12.0).reshape(6, 2), "k", log)
    tile = k[2:4].T  # a view: nothing read yet
    assert log.events == [] and tile.shape == (2, 2) and len(k) == 6 and k.shape == (6, 2)
    out = np.ones((3, 2)) @ tile  # (3, 2) @ (2, 2): keys 2 and 3 read
    assert isinstance(out, np.ndarray) and _keys(log) == [("k", [2, 3])]
    np.testing.assert_array_equal(out, np.ones((3, 2)) @ np.arange(12.0).reshape(6, 2)[2:4].T)


@pytest.mark.parametrize(
    ("use", "rows"),
    [
        (lambda k: np.asarray(k), [0, 1, 2, 3]),
        (lambda k: k.sum(), [0, 1, 2, 3]),
        (lambda k: k[1:3].max(axis=-1), [1, 2]),
        (lambda k: np.exp(k[3]), [3]),
        (lambda k: float(k[2, 1]), [2]),
        (lambda k: np.concatenate([k[:1], k[1:2]]), [0, 1]),
        (lambda k: 2.0 * k[::2], [0, 2]),
        (lambda k: np.split(k, 2)[1] @ np.ones(2), [2, 3]),
        (lambda k: np.zeros_like(k), []),
        (lambda k: str(k), []),
    ],
    ids=[
        "asarray",
        "sum",
        "max",
        "exp",
        "one number",
        "concatenate",
        "times",
        "split",
        "like",
        "str",
    ],
)
def test_every_way_of_using_the_values_is_a_read(use, rows) -> None:
    log = Reads()
    use(watched(np.arange(8.0).reshape(4, 2), "v", log))
    found = sorted({r for _, read in _keys(log) for r in read})
    assert found == rows


@pytest.mark.parametrize(
    "write",
    [
        lambda k: k.__setitem__(0, 1.0),
        lambda k: k.__iadd__(1.0),
        lambda k: np.add(k, 1.0, out=k),
        lambda k: np.copyto(k, 0.0),
    ],
    ids=["setitem", "in place", "out", "copyto"],
)
def test_a_write_into_a_watched_array_names_it(write) -> None:
    k = watched(np.zeros((3, 2)), "k", Reads())
    with pytest.raises(WriteError) as caught:
        write(k)
    assert caught.value.name == "k"


@given(st.integers(1, 6), st.integers(0, 5), st.integers(1, 4))
def test_a_slice_reads_exactly_its_rows(length, start, step) -> None:
    log = Reads()
    data = np.arange(8 * 3, dtype=float).reshape(8, 3)
    k = watched(data, "k", log)
    part = k[start : start + length : step]
    got = np.asarray(part @ np.ones(3))
    np.testing.assert_array_equal(got, data[start : start + length : step] @ np.ones(3))
    want = list(range(8))[start : start + length : step]
    assert sorted({r for _, rows in _keys(log) for r in rows}) == want


# -- the attempt's seed -----------------------------------------------------------------------


def _one(q):
    return q


def _another(q):
    return q + 0


def test_the_same_function_draws_the_same_seed_and_a_changed_one_another() -> None:
    assert attempt_seed(_one) == attempt_seed(_one)
    assert attempt_seed(_one) != attempt_seed(_another)
    assert attempt_seed("def f(q):\n    return q\n") == attempt_seed("def f(q):\n    return q\n")
    scope: dict = {}
    exec("def f(q):\n    return q\n", scope)  # no source to read: a fresh draw
    assert 0 <= attempt_seed(scope["f"]) < SEEDS
    assert 0 <= attempt_seed(math.sqrt) < SEEDS
