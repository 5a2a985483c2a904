"""The tiny model's corpus: deterministic, split cleanly, every scored answer determined."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from attention_course.model.corpus import (
    ACTIONS,
    BOS,
    FAMILIES,
    PAD,
    SHOWCASE,
    Sentence,
    build_corpus,
    parse,
)


@pytest.fixture(scope="module")
def corpus():
    return build_corpus()


def every_sentence(corpus):
    return [s for split in (corpus.train, corpus.heldout) for f in FAMILIES for s in split[f]]


def test_the_split_is_seeded_and_disjoint(corpus):
    again = build_corpus.__wrapped__()  # a fresh build, not the cached one
    assert again.vocab == corpus.vocab
    for family in FAMILIES:
        assert again.heldout[family] == corpus.heldout[family]
        train = {s.words for s in corpus.train[family]}
        held = {s.words for s in corpus.heldout[family]}
        assert not train & held
        share = len(held) / (len(train) + len(held))
        assert 0.09 < share < 0.13, (family, share)
    other = build_corpus.__wrapped__(seed=1)
    assert other.heldout["pronoun"] != corpus.heldout["pronoun"]


def test_the_showcase_sentences_are_held_out(corpus):
    held = {s.text for f in FAMILIES for s in corpus.heldout[f]}
    assert set(SHOWCASE) <= held


def test_every_scored_answer_is_determined_by_the_words_before_it(corpus):
    """No two sentences share the words up to the query and continue differently, so a
    model that reads the prefix right can always be right (accuracy 1 is reachable)."""
    continuations = defaultdict(set)
    for s in every_sentence(corpus):
        for i in range(1, len(s.words)):
            continuations[s.words[:i]].add(s.words[i])
    ambiguous = [
        s.text for s in every_sentence(corpus) if len(continuations[s.words[: s.query + 1]]) > 1
    ]
    assert ambiguous == []


@pytest.mark.parametrize(
    ("text", "family", "query", "answer", "antecedent"),
    [
        ("the dog was next to the bells and then it barked", "pronoun", "it", "barked", "dog"),
        ("the dogs were next to the bell and then it rang", "pronoun", "it", "rang", "bell"),
        (
            "the ball that Ben dropped hit the owls so they hooted",
            "pronoun",
            "they",
            "hooted",
            "owls",
        ),
        ("the keys that Ana lost were old", "agreement", "lost", "were", "keys"),
        ("Tom smiled because he was happy", "name", "because", "he", "Tom"),
    ],
)
def test_a_sentence_knows_its_query_answer_and_antecedent(text, family, query, answer, antecedent):
    s = parse(text)
    assert (s.family, s.words[s.query], s.answer, s.words[s.antecedent]) == (
        family,
        query,
        answer,
        antecedent,
    )
    assert s.words[0] == BOS and s.words[-1] == "." and s.text == text


def test_pronoun_answers_follow_the_singular_or_plural_antecedent(corpus):
    for s in corpus.train["pronoun"][:500]:
        noun = s.words[s.antecedent]
        singular = noun.removesuffix("s") if noun.endswith("s") and noun[:-1] in ACTIONS else noun
        assert s.answer == ACTIONS[singular]
        assert (noun == singular) == (s.words[s.query] == "it")


def test_encoding_pads_and_round_trips(corpus):
    sentences = [parse(SHOWCASE[0]), parse("Tom smiled because he was happy")]
    tokens = corpus.encode(sentences)
    assert tokens.shape == (2, corpus.length) and tokens.dtype == np.int64
    assert corpus.vocab[0] == PAD and corpus.vocab[1] == BOS
    n = len(sentences[1].words)
    assert np.all(tokens[1, n:] == 0) and np.all(tokens[1, :n] != 0)
    assert corpus.decode(tokens[0, : len(sentences[0].words)]) == list(sentences[0].words)


def test_bad_input_gets_a_clear_error(corpus):
    with pytest.raises(ValueError, match="not a sentence of the corpus"):
        parse("the dog ate my homework")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        corpus.encode([Sentence((BOS, "the", "unicorn", "."), "pronoun", 1, 1)])
    with pytest.raises(ValueError, match="longer than"):
        corpus.encode([Sentence((BOS,) + ("the",) * corpus.length, "pronoun", 1, 1)])
    with pytest.raises(ValueError, match="heldout_fraction"):
        build_corpus(heldout_fraction=1.5)
