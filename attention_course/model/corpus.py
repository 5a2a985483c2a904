"""The tiny model's corpus: short sentences, generated here, where a word must find another.

No downloads: every sentence comes from a handful of frames filled from
small word lists, all of them enumerated, then split (seeded) into training
and held-out sentences. Three families, each with one position whose next
word can only be guessed by looking back at one earlier word, the
*antecedent*:

- ``pronoun``: two things, one singular and one plural, then "it" or "they"
  and what that thing does: "the dog was next to the bells and then it
  [barked]". "it" must find the singular one, "they" the plural one; the
  word after the pronoun is that thing's own sound or action.
- ``agreement``: "the keys that Ana lost [were] old": the verb agrees with
  the noun before the relative clause, not with the name inside it; or "the
  key near the cups [was] red", not with the nearer noun.
- ``name``: "Ana smiled because [she] was happy": the pronoun follows the
  name.

Each `Sentence` records its tokens, the *query* position (the word whose
prediction needs the antecedent), the answer (the next word) and the
antecedent's position, so a trained model can be scored on the answer and
its attention checked against the antecedent.

The sentences a notebook shows (`SHOWCASE`) are always held out: the model
never trains on them.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

__all__ = [
    "ACTIONS",
    "ADJECTIVES",
    "ANIMALS",
    "BOS",
    "END",
    "FAMILIES",
    "MOODS",
    "NAMES",
    "NOUNS",
    "PAD",
    "PLURAL",
    "RELATIVE_VERBS",
    "SHOWCASE",
    "THINGS",
    "Corpus",
    "Sentence",
    "build_corpus",
    "parse",
]

BOS, PAD, END = "<s>", "<pad>", "."

# Each noun's own sound or action: the word that follows a pronoun that points at it.
ANIMALS = {
    "dog": "barked",
    "cat": "purred",
    "bird": "sang",
    "cow": "mooed",
    "horse": "neighed",
    "duck": "quacked",
    "lion": "roared",
    "owl": "hooted",
    "frog": "croaked",
    "goat": "bleated",
}
THINGS = {
    "bell": "rang",
    "ball": "bounced",
    "clock": "ticked",
    "door": "creaked",
    "kettle": "whistled",
    "lamp": "flickered",
    "cup": "cracked",
    "drum": "boomed",
    "phone": "buzzed",
    "key": "jingled",
}
ACTIONS = {**ANIMALS, **THINGS}  # singular noun -> its action
NOUNS = tuple(ACTIONS)
PLURAL = {noun: noun + "s" for noun in NOUNS}
NAMES = {
    "Ana": "she",
    "Maria": "she",
    "Lena": "she",
    "Sara": "she",
    "Emma": "she",
    "Ben": "he",
    "Tom": "he",
    "Omar": "he",
    "Leo": "he",
    "Sam": "he",
}
ADJECTIVES = ("old", "new", "red", "small", "big", "loud")
MOODS = ("happy", "sad", "tired", "late", "early", "kind")
RELATIVE_VERBS = ("lost", "found", "saw")

FAMILIES = ("pronoun", "agreement", "name")

# Pronoun frames: {a}, {b} are the two nouns (one singular, one plural), {p} the
# pronoun, {x} its action, {be} "was"/"were" agreeing with {a}, {n} a name.
_PRONOUN_FRAMES = (
    "the {a} {be} next to the {b} and then {p} {x}",
    "{n} put the {a} near the {b} and {p} {x}",
    "the {a} that {n} dropped hit the {b} so {p} {x}",
    "after the {a} passed the {b} , {p} {x}",
)
_AGREEMENT_FRAMES = (
    "the {a} that {n} {v} {be} {adj}",
    "the {a} near the {b} {be} {adj}",
)
_NAME_FRAMES = (
    ("{n} smiled because {p} was {adj}", "because"),
    ("{n} said that {p} was {adj}", "that"),
    ("{n} waved so {p} was {adj}", "so"),
)

#: Sentences the notebooks show, up to the answer word; all held out from training.
SHOWCASE = (
    "the dog was next to the bells and then it barked",
    "the dogs were next to the bell and then it rang",
    "Ana put the cup near the cats and it cracked",
    "Ana put the cups near the cat and it purred",
    "the ball that Ben dropped hit the owls so they hooted",
    "after the kettle passed the frogs , they croaked",
    "the keys that Ana lost were old",
    "Tom smiled because he was happy",
)


@dataclass(frozen=True, slots=True)  # slots: 50,000 of them live in each kernel that reads one
class Sentence:
    """One sentence, as words (with BOS first and "." last) and where its answer is.

    ``query`` is the index (into ``words``) of the word whose next-word
    prediction needs the antecedent; ``answer`` is that next word
    (``words[query + 1]``); ``antecedent`` is the index of the word it must
    find. ``family`` is one of `FAMILIES`.
    """

    words: tuple[str, ...]
    family: str
    query: int
    antecedent: int

    @property
    def answer(self) -> str:
        return self.words[self.query + 1]

    @property
    def text(self) -> str:
        """The sentence without BOS and the final full stop."""
        return " ".join(self.words[1:-1])


def _sentence(text: str, family: str, query_word: str, antecedent_word: str) -> Sentence:
    """A Sentence from its text: the query is the last ``query_word``, the antecedent
    the first ``antecedent_word`` before it."""
    # Interned: the corpus's 50,000 sentences share one string per word, not ten of their own
    # (about 30 MiB less in every kernel that builds it).
    words = tuple(sys.intern(w) for w in (BOS, *text.split(), END))
    query = len(words) - 1 - words[::-1].index(query_word)
    antecedent = words.index(antecedent_word)
    return Sentence(words, family, query, antecedent)


def _pronoun_sentences() -> Iterator[Sentence]:
    names = tuple(NAMES)
    for frame, (a, b), a_plural, pronoun in itertools.product(
        _PRONOUN_FRAMES, itertools.permutations(NOUNS, 2), (False, True), ("it", "they")
    ):
        # exactly one of the two is plural; "it" points at the singular one, "they" the other
        word_a, word_b = (PLURAL[a], b) if a_plural else (a, PLURAL[b])
        target_is_a = (pronoun == "they") == a_plural
        target = a if target_is_a else b
        for n in names if "{n}" in frame else names[:1]:
            text = frame.format(
                a=word_a,
                b=word_b,
                p=pronoun,
                x=ACTIONS[target],
                be="were" if a_plural else "was",
                n=n,
            )
            yield _sentence(text, "pronoun", pronoun, word_a if target_is_a else word_b)


def _agreement_sentences() -> Iterator[Sentence]:
    for a, a_plural, n, v, adj in itertools.product(
        NOUNS, (False, True), NAMES, RELATIVE_VERBS, ADJECTIVES
    ):
        word_a = PLURAL[a] if a_plural else a
        be = "were" if a_plural else "was"
        text = _AGREEMENT_FRAMES[0].format(a=word_a, n=n, v=v, be=be, adj=adj)
        yield _sentence(text, "agreement", v, word_a)
    for (a, b), a_plural, b_plural, adj in itertools.product(
        itertools.permutations(NOUNS, 2), (False, True), (False, True), ADJECTIVES
    ):
        word_a = PLURAL[a] if a_plural else a
        word_b = PLURAL[b] if b_plural else b
        be = "were" if a_plural else "was"
        text = _AGREEMENT_FRAMES[1].format(a=word_a, b=word_b, be=be, adj=adj)
        yield _sentence(text, "agreement", word_b, word_a)


def _name_sentences() -> Iterator[Sentence]:
    for (frame, query), (n, pronoun), adj in itertools.product(_NAME_FRAMES, NAMES.items(), MOODS):
        yield _sentence(frame.format(n=n, p=pronoun, adj=adj), "name", query, n)


@dataclass(frozen=True)
class Corpus:
    """Every sentence, split into training and held-out ones, with the vocabulary.

    ``vocab`` lists every word once (index = token id; PAD is 0, BOS 1);
    ``train`` and ``heldout`` map each family to its sentences. ``length`` is
    the token length every encoded sentence is padded to.
    """

    vocab: tuple[str, ...]
    train: dict[str, tuple[Sentence, ...]]
    heldout: dict[str, tuple[Sentence, ...]]
    length: int
    seed: int

    @property
    def ids(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.vocab)}

    def encode(self, sentences: Sequence[Sentence]) -> np.ndarray:
        """Token ids (N, length), int64, padded with PAD's id (0) after the full stop.

        Raises ValueError for a word outside the vocabulary or a sentence
        longer than ``length``.
        """
        ids = self.ids
        out = np.zeros((len(sentences), self.length), dtype=np.int64)  # (N, T)
        for row, sentence in enumerate(sentences):
            if len(sentence.words) > self.length:
                raise ValueError(
                    f"sentence of {len(sentence.words)} tokens is longer than {self.length}: "
                    f"{sentence.text!r}"
                )
            unknown = [w for w in sentence.words if w not in ids]
            if unknown:
                raise ValueError(f"words outside the vocabulary: {unknown} in {sentence.text!r}")
            out[row, : len(sentence.words)] = [ids[w] for w in sentence.words]
        return out

    def decode(self, tokens: Sequence[int]) -> list[str]:
        return [self.vocab[int(t)] for t in tokens]

    def counts(self) -> dict[str, dict[str, int]]:
        """Sentences per family in each split."""
        return {
            split: {family: len(items) for family, items in getattr(self, split).items()}
            for split in ("train", "heldout")
        }


def _all_sentences() -> dict[str, list[Sentence]]:
    return {
        "pronoun": list(_pronoun_sentences()),
        "agreement": list(_agreement_sentences()),
        "name": list(_name_sentences()),
    }


def _vocabulary(sentences: dict[str, list[Sentence]]) -> tuple[str, ...]:
    words = sorted({w for items in sentences.values() for s in items for w in s.words})
    words = [w for w in words if w not in (BOS, PAD)]
    return (PAD, BOS, *words)


@cache
def build_corpus(heldout_fraction: float = 0.1, seed: int = 0) -> Corpus:
    """Every sentence of every family, split: a seeded ``heldout_fraction`` of each family
    is held out, and so is every `SHOWCASE` sentence.

    Deterministic for a given seed (the enumeration order is fixed, the split
    a numpy permutation). Raises ValueError for a fraction outside (0, 1).
    """
    if not 0 < heldout_fraction < 1:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
    everything = _all_sentences()
    showcase = set(SHOWCASE)
    rng = np.random.default_rng(seed)
    train, heldout = {}, {}
    for family in FAMILIES:
        items = everything[family]
        order = rng.permutation(len(items))  # (n,)
        cut = max(1, round(heldout_fraction * len(items)))
        held = set(order[:cut].tolist()) | {i for i, s in enumerate(items) if s.text in showcase}
        train[family] = tuple(s for i, s in enumerate(items) if i not in held)
        heldout[family] = tuple(s for i, s in enumerate(items) if i in held)
    length = max(len(s.words) for items in everything.values() for s in items)
    return Corpus(_vocabulary(everything), train, heldout, length, seed)


def parse(text: str, corpus: Corpus | None = None) -> Sentence:
    """The corpus's `Sentence` for ``text`` (one of its sentences, without BOS or ".").

    Raises ValueError naming the text if the corpus has no such sentence.
    """
    index = _index() if corpus is None else _index_of(corpus)
    if text not in index:
        raise ValueError(
            f"{text!r} is not a sentence of the corpus; pick one of SHOWCASE or of "
            "build_corpus().heldout"
        )
    return index[text]


def _index_of(corpus: Corpus) -> dict[str, Sentence]:
    return {
        s.text: s
        for split in (corpus.train, corpus.heldout)
        for items in split.values()
        for s in items
    }


@cache
def _index() -> dict[str, Sentence]:
    """Every sentence of the default corpus by its text (built once)."""
    return _index_of(build_corpus())
