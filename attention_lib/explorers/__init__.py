"""Explorers: the slider apps the notebooks display.

Each explorer builds its figure once and, when a control moves, updates the
artists it drew (``set_data``, ``set_height``...) and asks for a redraw. The
tests drive the same objects in-process by setting ``control.value``.
"""

from .base import Explorer
from .crowded_room import NudgeExplorer, SlotsExplorer, ThreeStepsExplorer, VolumeKnobExplorer
from .gradients import GradientExplorer
from .mistakes import MistakeExplorer
from .scaling import ScalingExplorer
from .tiling import OnlineSoftmaxExplorer, TilingExplorer
from .trained import HeadMapsExplorer, WhereItLooksExplorer

__all__ = ["Explorer"]
__all__ += ["ScalingExplorer"]
__all__ += ["NudgeExplorer", "SlotsExplorer", "ThreeStepsExplorer", "VolumeKnobExplorer"]
__all__ += ["GradientExplorer", "MistakeExplorer"]
__all__ += ["OnlineSoftmaxExplorer", "TilingExplorer"]
__all__ += ["HeadMapsExplorer", "WhereItLooksExplorer"]
