"""Notebook 01's "type your own sentence": the typed words read as the model reads them,
the chosen word's attention (the same as the model's own view of a corpus sentence), and
one plain sentence, never an exception, for an empty box, an unknown word or a sentence
longer than the model's context."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import FLOAT64

from attention_course.lessons.own_sentence import (
    MODEL,
    OwnGaze,
    context_words,
    default_query,
    known_words,
    nearest_words,
    own_gaze,
    read_sentence,
    split_words,
)
from attention_course.model.corpus import BOS, PAD, build_corpus, parse
from attention_course.model.views import pointer_head, showcase, where_it_looks

REPO = Path(__file__).resolve().parents[2]

EMPTY = (
    "The box is empty: type a sentence in the model's words, such as "
    '"the cat was next to the drums and then it".'
)


@pytest.mark.parametrize("sentence", showcase())
def test_the_weights_are_the_models_own_view_of_a_corpus_sentence(sentence):
    """Typed up to its query word (or whole: later words change nothing), a showcase
    sentence gets the weights `where_it_looks` gives it, in the same head."""
    parsed = parse(sentence)
    expected = where_it_looks(sentence)  # the model's view, in the head 01's explorer opens on
    query = parsed.query - 1  # without the start marker
    for typed in (" ".join(parsed.words[1 : parsed.query + 1]), sentence):
        gaze = own_gaze(typed, query)
        assert isinstance(gaze, OwnGaze)
        assert gaze.words == expected.words
        assert gaze.head == pointer_head(MODEL, "pronoun")
        layer, head = gaze.head
        np.testing.assert_allclose(gaze.weights, expected.weights[layer, head], **FLOAT64)
        if parsed.family == "pronoun":
            np.testing.assert_allclose(gaze.weights, expected.shares("pointer"), **FLOAT64)
            assert gaze.guess == expected.guess == expected.answer


def test_the_first_sentence_of_01_finds_the_dog():
    gaze = own_gaze("the dog was next to the bells and then it")
    assert isinstance(gaze, OwnGaze)
    assert gaze.query_word == "it" and gaze.query == 9
    assert gaze.words[0] == "(start)" and len(gaze.words) == gaze.weights.shape[0] == 11
    assert gaze.top()[0] == "dog" and gaze.top()[1] > 0.9
    assert gaze.guess == "barked"
    np.testing.assert_allclose(gaze.weights.sum(), 1.0, **FLOAT64)


def test_the_words_are_split_and_spelled_as_the_model_knows_them():
    assert split_words("the dog , it.") == ["the", "dog", ",", "it", "."]
    assert split_words("  after the kettle passed the frogs,they  ") == [
        *["after", "the", "kettle", "passed", "the", "frogs", ",", "they"]
    ]
    assert split_words("it's 12!") == ["it's", "1", "2", "!"]
    assert read_sentence("The dog SAW ana").words == ("the", "dog", "saw", "Ana")
    same = own_gaze("THE DOG was next to the bells and then It")
    plain = own_gaze("the dog was next to the bells and then it")
    assert isinstance(same, OwnGaze) and isinstance(plain, OwnGaze)
    np.testing.assert_array_equal(same.weights, plain.weights)
    assert set(known_words()) == set(build_corpus().vocab) - {PAD, BOS}


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_an_empty_box_gets_one_sentence(text):
    assert own_gaze(text) == EMPTY
    assert read_sentence(text).problem == EMPTY and not read_sentence(text).ok


def test_an_unknown_word_is_named_with_the_nearest_words_the_model_knows():
    assert own_gaze("the dgo was next to the bells and then it") == (
        'The model does not know this word: "dgo" (the nearest word it knows: dog).'
    )
    assert own_gaze("the dog sat on the mat and then it") == (
        'The model does not know these words: "sat" (the nearest words it knows: saw, Sam, '
        'sad); "on" (the nearest word it knows: lion); or "mat" (the nearest word it knows: '
        "cat)."
    )


def test_a_word_spelled_like_no_known_word_is_named_alone():
    assert own_gaze("the dog barked !") == (
        'The model does not know this word: "!" (no word it knows is spelled like it).'
    )
    # each unknown word once, in the order typed
    assert own_gaze("zzz the zzz") == (
        'The model does not know this word: "zzz" (no word it knows is spelled like it).'
    )


def test_the_nearest_words_ignore_case_and_keep_the_models_spelling():
    assert nearest_words("dgo") == ["dog"]
    assert nearest_words("ANNA")[0] == "Ana"
    assert nearest_words("kettels")[0] == "kettles"
    assert nearest_words("xyzzy") == []
    assert len(nearest_words("the", n=2)) <= 2


def test_a_sentence_longer_than_the_context_says_the_limit_and_its_length():
    limit = context_words()
    assert limit == build_corpus().length - 1 == 12
    at_limit = "the dog was next to the bells and then it barked ."
    assert len(split_words(at_limit)) == limit
    assert isinstance(own_gaze(at_limit), OwnGaze)
    assert own_gaze(at_limit + " it") == (
        "That sentence is 13 words long, and the model reads at most 12 at a time "
        "(commas and full stops count as words): make it shorter."
    )
    assert own_gaze("the dog " * 20).startswith("That sentence is 40 words long, ")
    # the length first: a pasted paragraph is not answered with a list of its unknown words
    assert own_gaze("a quick brown fox " * 4).startswith("That sentence is 16 words long, ")


def test_the_first_word_shown_is_the_last_pronoun_else_the_last_word():
    assert default_query(("the", "dog", "and", "it", "barked")) == 3
    assert default_query(("they", "saw", "it", "and", "they")) == 4
    assert default_query(("the", "dog", ".")) == 1
    assert default_query((",", ".")) == 1


def test_any_later_word_is_left_out_of_the_gaze():
    gaze = own_gaze("the dog was next to the bells and then it barked", query=1)
    assert isinstance(gaze, OwnGaze)
    assert gaze.words == ("(start)", "the", "dog") and gaze.weights.shape == (3,)
    assert gaze.sentence[-1] == "barked"


@pytest.mark.parametrize(
    ("text", "query", "match"),
    [
        (None, None, "must be a str"),
        (b"the dog", None, "must be a str"),
        ("the dog", 2, "one of the 2 typed words"),
        ("the dog", -1, "one of the 2 typed words"),
        ("the dog", True, "must be an int"),
        ("the dog", 1.0, "must be an int"),
    ],
)
def test_programming_errors_raise_value_error(text, query, match):
    with pytest.raises(ValueError, match=match):
        own_gaze(text, query)


def test_an_unknown_model_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown model"):
        own_gaze("the dog", name="nope")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60))
def test_whatever_is_typed_gets_a_gaze_or_one_sentence(text):
    said = own_gaze(text)
    if isinstance(said, str):
        assert said.endswith(".") and "\n" not in said
        assert said.count(". ") == 0 or said.startswith("The model does not know")
    else:
        assert isinstance(said, OwnGaze)
        np.testing.assert_allclose(said.weights.sum(), 1.0, **FLOAT64)


def test_the_lesson_and_its_explorer_do_not_import_torch():
    code = textwrap.dedent(
        """
        import sys
        from attention_course.explorers.own_sentence import OwnSentenceExplorer
        from attention_course.lessons.own_sentence import own_gaze
        own_gaze("the dog was next to the bells and then it"), own_gaze("the dgo")
        explorer = OwnSentenceExplorer()
        explorer.sentence.value = "Ana put the cups near the cat and it"
        explorer.word.value = 2
        assert "torch" not in sys.modules, "torch was imported"
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
