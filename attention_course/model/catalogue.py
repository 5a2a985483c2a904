"""The trained models: their names, what sets each apart, how the course labels them, where
their weights lie.

Read by the model (`attention_course.model.tiny_model.load_model`), its report
(`attention_course.model.report`) and every notebook and explorer that names a
model. Imports nothing heavy: no torch, no matplotlib.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["MODEL_LABELS", "TRAINED", "trained_dir"]

#: The trained models: name -> what differs from the defaults of
#: `attention_course.model.tiny_model.ModelConfig`.
TRAINED: dict[str, dict[str, Any]] = {
    "sqrt_d16": {"scale_rule": "1/sqrt(d)", "head_width": 16},
    "none_d16": {"scale_rule": "none", "head_width": 16},
    "inv_d64": {"scale_rule": "1/d", "head_width": 64},
    "sqrt_d64": {"scale_rule": "1/sqrt(d)", "head_width": 64},
}

#: How the course names each trained model: its scale rule and head width.
MODEL_LABELS = {
    "sqrt_d16": "1/√d, d = 16",
    "none_d16": "none (×1), d = 16",
    "inv_d64": "1/d, d = 64",
    "sqrt_d64": "1/√d, d = 64",
}


def trained_dir() -> Path:
    """Where the committed weights and report live: the package's model/trained/."""
    return Path(str(resources.files(__package__) / "trained"))
