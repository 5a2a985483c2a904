"""Every explorer of the course, in one list: where it is shown, and how a test builds one.

`REGISTRY` holds one `Entry` per explorer class: the notebooks that display
it (and how many of it each displays), and the small instances the tests
build, each under a test id ("Scaling", "Mistake wrong axis"). The unit,
caption, still-picture and blit tests parametrise over `builds`, and the
browser tests check their per-class checks and each notebook's explorers
against it, so a new explorer is added here, once, and every test that
must know of it does (or fails, naming what it lacks).

Entries whose build loads the trained model (torch, a few seconds) say so
(``loads_model``): the fast tests leave them to
``tests/explorers/test_explorers_trained.py`` and ``tests/explorers/test_explorers_gradients.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from .alternatives import AlternativesExplorer
from .base import Explorer
from .crowded_room import NudgeExplorer, SlotsExplorer, ThreeStepsExplorer, VolumeKnobExplorer
from .gradients import GradientExplorer, QKNormExplorer
from .mistakes import MISTAKES, MistakeExplorer
from .own_sentence import OwnSentenceExplorer
from .scaling import ScalingExplorer
from .tiling import OnlineSoftmaxExplorer, TilingExplorer
from .trained import HeadMapsExplorer, WhereItLooksExplorer

__all__ = ["REGISTRY", "Entry", "builds", "entry", "shown_in"]


@dataclass(frozen=True)
class Entry:
    """One explorer class: the notebooks that show it and the instances tests build.

    ``shown_in`` maps a notebook's name (``"01_beginner_crowded_room"``,
    without ``.ipynb``) to how many instances of the class it displays.
    ``builds`` maps a test id to a function that builds a small instance,
    with no argument; ``loads_model`` is True when building loads the
    trained model (torch).
    """

    cls: type[Explorer]
    shown_in: Mapping[str, int]
    builds: Mapping[str, Callable[[], Explorer]]
    loads_model: bool = False

    @property
    def name(self) -> str:
        """The class's name, as the browser tests see it in the kernel."""
        return self.cls.__name__


REGISTRY: tuple[Entry, ...] = (
    Entry(VolumeKnobExplorer, {"01_beginner_crowded_room": 1}, {"VolumeKnob": VolumeKnobExplorer}),
    Entry(ThreeStepsExplorer, {"01_beginner_crowded_room": 1}, {"ThreeSteps": ThreeStepsExplorer}),
    Entry(SlotsExplorer, {"01_beginner_crowded_room": 1}, {"Slots": SlotsExplorer}),
    Entry(NudgeExplorer, {"01_beginner_crowded_room": 1}, {"Nudge": NudgeExplorer}),
    Entry(
        WhereItLooksExplorer,
        {"01_beginner_crowded_room": 1},
        {"WhereItLooks": WhereItLooksExplorer},
        loads_model=True,
    ),
    Entry(
        OwnSentenceExplorer,
        {"01_beginner_crowded_room": 1},
        {
            "OwnSentence": OwnSentenceExplorer,
            "OwnSentence unknown word": partial(OwnSentenceExplorer, "the dgo saw it"),
        },
        loads_model=True,
    ),
    Entry(
        ScalingExplorer,
        {"02_developer_scaling": 1},
        {"Scaling": partial(ScalingExplorer, trials=300)},
    ),
    Entry(
        HeadMapsExplorer,
        {"02_developer_scaling": 1},
        {"HeadMaps": HeadMapsExplorer},
        loads_model=True,
    ),
    Entry(
        MistakeExplorer,
        {"03_developer_pytorch_and_mistakes": len(MISTAKES)},
        {f"Mistake {name}": partial(MistakeExplorer, name) for name in MISTAKES},
    ),
    Entry(
        GradientExplorer,
        {"04_researcher_variance_and_gradients": 1},
        {"Gradient": partial(GradientExplorer, trials=200)},
    ),
    Entry(
        QKNormExplorer,
        {"04_researcher_variance_and_gradients": 1},
        {"QKNorm": QKNormExplorer},
        loads_model=True,
    ),
    Entry(
        OnlineSoftmaxExplorer,
        {"05_researcher_cost_and_tiling": 1},
        {"OnlineSoftmax": OnlineSoftmaxExplorer},
    ),
    Entry(
        TilingExplorer,
        {"05_researcher_cost_and_tiling": 1, "07_researcher_build_flash_attention": 1},
        {"Tiling": TilingExplorer},
    ),
    Entry(
        AlternativesExplorer,
        {"06_researcher_alternatives": 1},
        {"Alternatives": AlternativesExplorer},
    ),
)


def entry(name: str) -> Entry:
    """The entry of the explorer class called ``name``; KeyError naming the known ones."""
    for e in REGISTRY:
        if e.name == name:
            return e
    raise KeyError(f"no explorer {name!r} in the registry; it has {[e.name for e in REGISTRY]}")


def builds(*, loads_model: bool | None = False) -> dict[str, tuple[Entry, Callable[[], Explorer]]]:
    """Every test build, ``{test id: (entry, build)}``, in the registry's order.

    ``loads_model``: False (the default) keeps the builds that do not load
    the trained model, True only those that do, None every one.
    """
    return {
        test_id: (e, build)
        for e in REGISTRY
        if loads_model is None or e.loads_model == loads_model
        for test_id, build in e.builds.items()
    }


def shown_in(notebook: str) -> dict[str, int]:
    """``{class name: instances}`` of the explorers ``notebook`` (a name without ``.ipynb``)
    displays; empty for a notebook that shows none."""
    return {e.name: e.shown_in[notebook] for e in REGISTRY if notebook in e.shown_in}
