"""Notebook 01's "type your own sentence": a sentence a learner types, read by the trained model.

The learner types a sentence in the small model's words (`attention_course.model.corpus`:
112 words, names capitalised, commas and full stops as words of their own) and picks
one of its words; `own_gaze` says where that word looks in the head notebook 01's
trained-model explorer shows, the pronoun-finding head
(`attention_course.model.views.pointer_head`), and what the model guesses comes next.

What the model cannot read gets one plain sentence instead of a picture, never an
exception (`read_sentence`):

- an empty box: a sentence asking for one;
- more words than the model reads at once: its limit and the sentence's length;
- a word the model does not know: each one named, with the words it knows that are
  spelled most like it (`nearest_words`, difflib's ratio over the vocabulary).

The forward pass is the committed weights' numpy one (`attention_course.model.views.numpy_model`),
the one notebook 01's other trained-model picture runs: no torch is imported.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from ..model.corpus import BOS, PAD, build_corpus
from ..model.views import START, numpy_model, pointer_head

__all__ = [
    "MODEL",
    "PRONOUNS",
    "OwnGaze",
    "Reading",
    "context_words",
    "default_query",
    "known_words",
    "nearest_words",
    "own_gaze",
    "read_sentence",
    "split_words",
]

#: the trained model notebook 01 reads (the one its other trained-model picture shows)
MODEL = "sqrt_d16"
#: the words whose gaze is shown first, when the sentence has one (the last of them)
PRONOUNS = ("it", "they", "he", "she")

# A word is a run of letters (an apostrophe inside it too); any other mark but a space is
# a word of its own, as the corpus writes "," and "." apart.
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*|\S")


def split_words(text: str) -> list[str]:
    """``text`` as the words a learner typed, in order: runs of letters, and each other
    mark ("," "." "!" a digit) as a word of its own; spaces separate. Raises ValueError
    for anything but a str."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return _WORD.findall(text)


@cache
def known_words() -> tuple[str, ...]:
    """The words the model knows, in its vocabulary's order, without its two markers
    (padding and the start of a sentence): what a learner may type."""
    return tuple(w for w in build_corpus().vocab if w not in (PAD, BOS))


@cache
def _by_lower_case() -> dict[str, str]:
    """Each known word by its lower case: "The" is "the", "ana" is "Ana" (no two known
    words differ only in case)."""
    words = known_words()
    folded = {w.lower(): w for w in words}
    assert len(folded) == len(words), "two known words differ only in case"
    return folded


def nearest_words(word: str, n: int = 3) -> list[str]:
    """Up to ``n`` known words spelled most like ``word`` (difflib's similarity ratio, at
    least 0.6, ignoring case), closest first; empty when none is that close."""
    folded = _by_lower_case()
    close = difflib.get_close_matches(word.lower(), list(folded), n=n, cutoff=0.6)
    return [folded[w] for w in close]


def context_words(name: str = MODEL) -> int:
    """How many words model ``name`` reads at once: its context, less the start marker."""
    return numpy_model(name).config.length - 1


def _quoted(words: list[str]) -> str:
    """'"a"', '"a" or "b"', '"a", "b" or "c"'."""
    said = [f'"{w}"' for w in words]
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} or {said[-1]}"


def _unknown_sentence(unknown: list[str]) -> str:
    """One sentence naming each unknown word and the known words nearest it."""
    parts = []
    for word in dict.fromkeys(unknown):  # each once, in the order typed
        near = nearest_words(word)
        if near:
            nearest = (
                "the nearest word it knows" if len(near) == 1 else "the nearest words it knows"
            )
            parts.append(f'"{word}" ({nearest}: {", ".join(near)})')
        else:
            parts.append(f'"{word}" (no word it knows is spelled like it)')
    listed = parts[0] if len(parts) == 1 else f"{'; '.join(parts[:-1])}; or {parts[-1]}"
    noun = "this word" if len(parts) == 1 else "these words"
    return f"The model does not know {noun}: {listed}."


@dataclass(frozen=True)
class Reading:
    """A typed sentence as the model would read it.

    ``words``: the typed words in the model's spelling ("The" becomes "the"), as
    typed where it has none; ``problem``: one plain sentence saying why the model
    cannot read it (an empty box, unknown words, too many words), or None when it can.
    """

    text: str
    words: tuple[str, ...]
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def read_sentence(text: str, name: str = MODEL) -> Reading:
    """``text`` split into words and spelled as model ``name`` knows them, or the one
    sentence that says why it cannot be read: empty, longer than the model's context
    (`context_words`), or unknown words (each named with the known words nearest it).
    Never raises for what a learner types; ValueError for a non-str ``text`` or an
    unknown model."""
    typed = split_words(text)
    folded = _by_lower_case()
    words = tuple(folded.get(w.lower(), w) for w in typed)
    limit = context_words(name)
    if not words:
        problem = (
            "The box is empty: type a sentence in the model's words, such as "
            '"the cat was next to the drums and then it".'
        )
    elif len(words) > limit:
        problem = (
            f"That sentence is {len(words)} words long, and the model reads at most {limit} "
            "at a time (commas and full stops count as words): make it shorter."
        )
    elif unknown := [typed[i] for i, w in enumerate(words) if w.lower() not in folded]:
        problem = _unknown_sentence(unknown)
    else:
        problem = None
    return Reading(text, words, problem)


def default_query(words: tuple[str, ...]) -> int:
    """The word whose gaze to show first: the last pronoun (`PRONOUNS`), else the last
    word that is not a mark, else the last word."""
    for i in range(len(words) - 1, -1, -1):
        if words[i] in PRONOUNS:
            return i
    for i in range(len(words) - 1, -1, -1):
        if words[i][:1].isalpha():
            return i
    return len(words) - 1


@dataclass(frozen=True)
class OwnGaze:
    """Where one word of a typed sentence looks, in one head of the trained model.

    ``words`` (n,) are the sentence up to and including the chosen word, the start
    marker first (shown as "(start)"); ``weights`` (n,) are that word's attention over
    them, summing to 1 (later words get none: the model reads left to right);
    ``head`` is (layer, head), 0-based; ``guess`` the model's likeliest next word.
    ``sentence`` is every typed word, in the model's spelling; ``query`` the chosen
    word's index in it.
    """

    sentence: tuple[str, ...]
    query: int
    words: tuple[str, ...]
    weights: np.ndarray
    head: tuple[int, int]
    guess: str

    @property
    def query_word(self) -> str:
        return self.words[-1]

    def top(self) -> tuple[str, float]:
        """The word with the largest share, and its share."""
        i = int(np.argmax(self.weights))
        return self.words[i], float(self.weights[i])


@lru_cache(maxsize=64)
def _forward(words: tuple[str, ...], name: str) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Next-word logits (T, V) and each layer's weights (H, T, T) for the start marker and
    ``words`` (all known, at most the context)."""
    ids = build_corpus().ids
    tokens = np.array([[ids[BOS], *(ids[w] for w in words)]])  # (1, T)
    logits, trace = numpy_model(name).forward(tokens)  # (1, T, V), per layer
    return logits[0], tuple(t.weights[0] for t in trace)  # (T, V), (H, T, T) each


def own_gaze(text: str, query: int | None = None, name: str = MODEL) -> OwnGaze | str:
    """Where word ``query`` (0-based, of the typed words; default `default_query`) of
    ``text`` looks in model ``name``'s pronoun-finding head (the head notebook 01's
    trained-model explorer opens on), or the one sentence of `read_sentence` when the
    model cannot read ``text``.

    Raises ValueError only for a programming error: a non-str ``text``, a ``query``
    outside the typed words of a readable sentence, an unknown model.
    """
    reading = read_sentence(text, name)
    if reading.problem is not None:
        return reading.problem
    words = reading.words
    if query is None:
        query = default_query(words)
    if isinstance(query, bool) or not isinstance(query, (int, np.integer)):
        raise ValueError(f"query must be an int, got {type(query).__name__}")
    if not 0 <= query < len(words):
        raise ValueError(f"query must index one of the {len(words)} typed words, got {query}")
    query = int(query)
    logits, weights = _forward(words, name)
    layer, head = pointer_head(name, "pronoun")
    row = weights[layer][head, query + 1, : query + 2]  # (n,), the start marker first
    scores = logits[query + 1].copy()  # (V,): the guess for the word after the chosen one
    vocab = build_corpus().vocab
    scores[[vocab.index(PAD), vocab.index(BOS)]] = -np.inf  # markers are not words to guess
    return OwnGaze(
        sentence=words,
        query=query,
        words=(START, *words[: query + 1]),
        weights=row,
        head=(layer, head),
        guess=vocab[int(np.argmax(scores))],
    )
