"""Notebook 01's "type your own sentence": where a chosen word looks, in the trained model.

`OwnSentenceExplorer`: a text box for a sentence in the small model's words and a menu
of its words; bars show where the chosen word looks in the pronoun-finding head, the
head notebook 01's other trained-model picture opens on, and under the words the
model's guess for the next word. A box the model cannot read (empty, an unknown word,
too long) shows the one sentence that says why, in the picture and as its text
alternative, never an error.

The numbers and the sentences are the lesson's (`attention_course.lessons.own_sentence`):
the committed weights' numpy forward pass, so building one does not import torch.
"""

from __future__ import annotations

import textwrap
from typing import Any

import ipywidgets as widgets
import numpy as np

from ..lessons.figures.style import BLUE, ORANGE, VERMILLION
from ..lessons.own_sentence import MODEL, OwnGaze, context_words, own_gaze, read_sentence
from ..model.views import START, pointer_head
from .base import DRAWING, Explorer, ExplorerBox
from .controls import fit_label
from .trained import volume_words

__all__ = ["FIRST_SENTENCE", "LATER_COLOUR", "NO_PICTURE", "OwnSentenceExplorer"]

#: What the box holds at first: "it" finds the one drum, not the cats; "they" would find the cats.
FIRST_SENTENCE = "the cats were next to the drum and then it"
#: The title while the box holds something the model cannot read (the reason is under it).
NO_PICTURE = "No picture: the model cannot read what is in the box"
#: The words after the chosen one, which it cannot look at: grey, 5.7:1 on white (AA).
LATER_COLOUR = "#666666"


def _percent(share: float) -> str:
    """A share as the bars are labelled: whole percent, "<1%" below one percent."""
    return f"{share:.0%}" if share >= 0.005 else "<1%"


class OwnSentenceExplorer(Explorer):
    """Type a sentence, pick a word: where that word looks in the trained model.

    Controls: ``sentence`` (a text box; the picture follows on Enter or when the box
    loses focus) and ``word`` (a menu of the typed words, by their 0-based index; it
    opens on the last pronoun, `attention_course.lessons.own_sentence.default_query`).
    After each update ``gaze`` holds the `OwnGaze` drawn, or None when the sentence
    cannot be read, and ``problem`` the sentence that says why (None otherwise);
    ``shares`` are the bars' heights (slots,).
    """

    def __init__(self, sentence: str = FIRST_SENTENCE, model: str = MODEL) -> None:
        self.model_name = model
        self.slots = context_words(model) + 1  # the start marker, then the typed words
        layer, head = pointer_head(model, "pronoun")
        fig = self._make_figure(figsize=(8, 4.3), layout="constrained")
        self.ax, self.ax_words = fig.subplots(2, 1, height_ratios=(2.5, 1), sharex=True)
        ax = self.ax
        x = np.arange(self.slots)  # (slots,)
        self.bars = ax.bar(x, np.zeros(self.slots), color=BLUE, width=0.7)
        self.labels = [ax.text(i, 0, "", ha="center", va="bottom", fontsize=8) for i in x]
        self.message = ax.text(
            0.5, 0.55, "", transform=ax.transAxes, ha="center", va="center", fontsize=11
        )
        ax.set_xlim(-0.6, self.slots - 0.4)
        ax.set_ylim(0, 1.15)
        ax.set_yticks(np.linspace(0, 1, 5))
        ax.set_ylabel("share of attention")
        ax.set_xlabel("the words of your sentence (below), each with its share")
        ax.tick_params(axis="x", bottom=False, labelbottom=False)
        ax.spines[["top", "right"]].set_visible(False)

        words_ax = self.ax_words
        words_ax.set_ylim(0, 1)
        words_ax.axis("off")
        for spine in words_ax.spines.values():  # a blitted frame draws visible spines itself
            spine.set_visible(False)
        self.words = [
            words_ax.text(
                i + 0.2, 0.95, "", ha="right", va="top", rotation=30, rotation_mode="anchor"
            )
            for i in x
        ]
        self.guess_text = words_ax.text(
            0.0, 0.02, "", transform=words_ax.transAxes, ha="left", va="bottom", fontsize=10
        )
        for text in (*self.labels, self.message, *self.words, self.guess_text):
            text.set_in_layout(False)  # the layout is the same for every sentence
        fig.suptitle(
            "Your own sentence: where does one word look? "
            f"(the pronoun-finding head, layer {layer + 1}, head {head + 1})",
            fontsize=11,
        )

        self.sentence = fit_label(
            widgets.Text(
                value=sentence,
                description="your sentence",
                placeholder="type a sentence in the model's words, then press Enter",
                continuous_update=False,
                layout={"width": "520px"},
            )
        )
        self.word = fit_label(
            widgets.Dropdown(description="the word that looks", layout={"width": "300px"})
        )
        self._choosing = False
        self._offer_words()
        self._watch(self.sentence, self.word)
        self.live = [*self.bars, *self.labels, self.message, ax.title, *self.words, self.guess_text]
        self.update()

    @property
    def widget(self) -> ExplorerBox:
        """The explorer's box (`ExplorerBox`: a still picture when the kernel is gone), with
        its two controls one to a row (each fits the 577 px cell of a 1024 px screen)."""
        if self._box is None:
            box = super().widget
            rows = widgets.VBox([widgets.HBox([control]) for control in self.controls])
            rows.add_class("al-controls")  # hidden, as one row is, when the kernel is gone
            box.children = (rows, *box.children[1:])
        return self._box

    def _offer_words(self) -> None:
        """The menu of the typed words (a repeated word numbered by its place), opened on
        the default word; empty and disabled when the sentence cannot be read."""
        reading = read_sentence(self.sentence.value, self.model_name)
        self._choosing = True  # the menu's own change events draw nothing
        try:
            if reading.ok:
                words = reading.words
                options = [
                    (w if words.count(w) == 1 else f"{w} (word {i + 1})", i)
                    for i, w in enumerate(words)
                ]
                gaze = own_gaze(self.sentence.value, None, self.model_name)
                assert isinstance(gaze, OwnGaze)
                self.word.options = options
                self.word.value = gaze.query
                self.word.disabled = False
            else:
                self.word.options = []
                self.word.disabled = True
        finally:
            self._choosing = False

    def _on_change(self, change: dict[str, Any]) -> None:
        if self._choosing:
            return
        with DRAWING:
            if change["owner"] is self.sentence:
                self._offer_words()
            self.update()
            self.refresh()

    def update(self) -> None:
        reading = read_sentence(self.sentence.value, self.model_name)
        if reading.ok and self.word.value is not None:
            gaze = own_gaze(self.sentence.value, self.word.value, self.model_name)
            assert isinstance(gaze, OwnGaze)
            self.gaze, self.problem = gaze, None
            self._draw_gaze(gaze, reading.words)
        else:
            self.gaze, self.problem = None, reading.problem
            self._draw_problem(reading.problem or "")

    def _draw_gaze(self, gaze: OwnGaze, typed: tuple[str, ...]) -> None:
        n = len(gaze.words)
        shares = np.zeros(self.slots)  # (slots,); the words after the chosen one get none
        shares[:n] = gaze.weights
        self.shares = shares
        top = int(np.argmax(gaze.weights))
        for i, (bar, label) in enumerate(zip(self.bars, self.labels, strict=True)):
            bar.set_height(float(shares[i]))
            bar.set_color(ORANGE if i == top else BLUE)
            label.set_position((i, shares[i] + 0.01))
            label.set_text(_percent(shares[i]) if i < n else "")
        everything = (START, *typed)
        for i, text in enumerate(self.words):
            text.set_text(everything[i] if i < len(everything) else "")
            chosen = i == n - 1
            text.set_color(VERMILLION if chosen else "black" if i < n else LATER_COLOUR)
            text.set_fontweight("bold" if chosen else "normal")
            text.set_fontstyle("italic" if i >= n else "normal")
        self.message.set_text("")
        word, share = gaze.top()
        self.ax.set_title(
            f'"{gaze.query_word}" looks most at "{word}" ({_percent(share)}): '
            f"{volume_words(share, n)}",
            fontsize=10,
        )
        self.guess_text.set_text(
            f'The model\'s guess for the word after "{gaze.query_word}": "{gaze.guess}"'
            + (" (words in grey come later: it cannot look at them)" if n < len(everything) else "")
        )

    def _draw_problem(self, problem: str) -> None:
        self.shares = np.zeros(self.slots)
        for bar, label in zip(self.bars, self.labels, strict=True):
            bar.set_height(0.0)
            label.set_text("")
        for text in self.words:
            text.set_text("")
        self.guess_text.set_text("")
        self.message.set_text(textwrap.fill(problem, width=70))
        self.ax.set_title(NO_PICTURE, fontsize=10)

    def describe(self) -> str:
        """The reason, when the sentence cannot be read; otherwise the title, every share
        the bars are labelled with (largest first; the words under 1% together) and the
        model's guess for the next word."""
        if self.gaze is None:
            return " ".join(self.message.get_text().split())
        gaze = self.gaze
        order = np.argsort(-gaze.weights, kind="stable")  # (n,), largest first
        said = [f"{gaze.words[i]} {_percent(gaze.weights[i])}" for i in order]
        shown = [s for s in said if not s.endswith("<1%")]
        small = len(said) - len(shown)
        if small:
            shown.append("every other word <1%" if shown else "every word <1%")
        return f"{self.ax.get_title()}; shares: {', '.join(shown)}; {self.guess_text.get_text()}"
