"""Explorers: the slider apps the notebooks display. They choose inputs and draw.

Each explorer builds its figure once and, when a control moves, updates the
artists it drew (``set_data``, ``set_height``...) and asks for a redraw. Its
numbers are a call into the lessons (`attention_course.lessons`) or the
library; nothing is computed here that a lesson or a test would need. The
tests drive the same objects in-process by setting ``control.value``.

    crowded_room   notebook 01: the volume knob, the three steps, slots, a nudge
    trained        notebooks 01, 02: where "it" looks, every head's map (the trained model)
    own_sentence   notebook 01: type your own sentence, see where a chosen word looks
    scaling        notebook 02: head width and scale against the weights
    mistakes       notebook 03: the four common mistakes, toggled
    gradients      notebook 04: the softmax Jacobian against the width; QK-norm
    tiling         notebooks 05, 07: the online softmax stepped through; the tiles
    alternatives   notebook 06: eight ways to weight the same keys

    registry       every explorer, where it is shown and how tests build it
    base · canvas · controls · frames · reveal
                   the pattern they share, the Agg canvas, its Image and still picture,
                   sized controls, fast frames, and predictions and solution gates

Every explorer class is importable from here. Importing this package does
not import torch: the explorers on the trained model load it when built.
"""

from .alternatives import AlternativesExplorer
from .base import Explorer
from .crowded_room import NudgeExplorer, SlotsExplorer, ThreeStepsExplorer, VolumeKnobExplorer
from .gradients import GradientExplorer, QKNormExplorer
from .mistakes import MistakeExplorer
from .own_sentence import OwnSentenceExplorer
from .scaling import ScalingExplorer
from .tiling import OnlineSoftmaxExplorer, TilingExplorer
from .trained import HeadMapsExplorer, WhereItLooksExplorer

__all__ = [
    "AlternativesExplorer",
    "Explorer",
    "GradientExplorer",
    "HeadMapsExplorer",
    "MistakeExplorer",
    "NudgeExplorer",
    "OnlineSoftmaxExplorer",
    "OwnSentenceExplorer",
    "QKNormExplorer",
    "ScalingExplorer",
    "SlotsExplorer",
    "ThreeStepsExplorer",
    "TilingExplorer",
    "VolumeKnobExplorer",
    "WhereItLooksExplorer",
]
