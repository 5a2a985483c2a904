"""The torch paths on a device without float64 (Apple's MPS), played by the CPU.

`support.without_float64` makes the CPU count as lacking float64
(`attention_lib.backend.has_float64` is False there) and fails any float64
tensor the library makes on it (`support.float64_guard`). The torch cases
of the files imported below run again here under it; numpy cases are left
out (`tests/conftest.py`). The files are the torch path's every place that
widened a sum to float64, each with its accuracy check: the reference
path's broadcast gradients (`core._broadcast_sum`) and its exact route for
non-finite inputs (`nonfinite.sum_to`), the torch tiled path's gradients of
broadcast inputs and of a shared float mask (`torch_tiled._Gradient`,
`_MaskGradient`), and both paths under FlashAttention's 2x rule in float32
and 16-bit dtypes (the property test; float64 inputs there are the
library's own, not made by it).
"""

from __future__ import annotations

import numpy as np
import pytest
from arrays import without_float64
from test_batch_broadcast import *  # noqa: F403
from test_broadcast_gradients import *  # noqa: F403
from test_nonfinite import *  # noqa: F403
from test_property_2x import *  # noqa: F403

from attention_lib.nonfinite import sum_to

torch = pytest.importorskip("torch", reason="a device without float64 is a torch device")


@pytest.fixture(autouse=True)
def _no_float64():
    with without_float64():
        yield


def test_the_guard_fails_a_float64_sum_made_by_the_library(monkeypatch):
    """The mode catches the float64 sums the library makes where a device has float64."""
    from attention_lib import nonfinite

    monkeypatch.setattr(nonfinite, "has_float64", lambda x: True)
    with pytest.raises(AssertionError, match="float64"):
        sum_to(torch.ones(4, 3, 2), (3, 2))


def test_a_compensated_sum_is_rounded_once():
    """Without float64, a float32 gradient summed over a broadcast dimension equals the
    float64 sum rounded once, where a plain float32 sum rounds at every step."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 3)) * np.exp(rng.uniform(-8, 8, (4096, 3)))
    grad = torch.from_numpy(x).float()
    exact = grad.double().sum(0).float()
    summed = sum_to(grad, (3,))
    assert summed.dtype == torch.float32
    torch.testing.assert_close(summed, exact, rtol=0, atol=0)
