"""Seeded inputs in numpy or torch, the float64 bound, and the PyTorch oracle, for the library's
tests (and the course's, which import them through their own support module); a device
without float64, played by the CPU. torch is imported only where a torch case asks for it,
and a test that asks for it without torch installed skips there."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

LIBS = ["numpy", "torch"]
HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "torch is not installed (pip install 'attention-lib[torch]')"
#: The libraries a property test draws from: numpy, and torch where it is installed.
INSTALLED = LIBS if HAS_TORCH else ["numpy"]
#: A test of torch's alone: skipped without torch. (On a Hypothesis test, a mark, not a
#: change to its body: the body seeds its derandomized examples.)
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)


@pytest.fixture(params=LIBS)
def lib(request):
    """Run a test once with numpy inputs and once with torch inputs (skipped without torch:
    `attention_lib` needs only numpy). The conftests import it."""
    if request.param == "torch" and not HAS_TORCH:
        pytest.skip(NO_TORCH)
    return request.param


#: The one bound for float64: two computations of the same float64 result that
#: differ only in rounding (another summation order, numpy against torch, tiled against
#: whole) agree to 1e-12, absolutely; our values are of order one. Pass as ``**FLOAT64`` to
#: np.testing.assert_allclose, np.allclose, torch.allclose or torch.testing.assert_close.
#: 16-bit and float32 results are held to FlashAttention's rule instead
#: (`attention_lib.flash.accuracy`: at most twice PyTorch's error, plus a floor). Tighter
#: literal bounds (1e-14, 1e-15) stay only where a value is known exactly by hand.
FLOAT64 = {"rtol": 0.0, "atol": 1e-12}


def make(shape, lib="numpy", dtype="float64", seed=0):
    """Seeded standard-normal array of ``shape`` as a numpy array or torch tensor."""
    x = np.random.default_rng(seed).standard_normal(shape)
    if lib == "numpy":
        return x.astype(dtype)
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    return torch.from_numpy(x).to(getattr(torch, dtype))


def as_lib(x, lib):
    """A numpy array as itself (numpy) or as a torch tensor sharing its data (torch)."""
    if lib == "numpy":
        return x
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    return torch.from_numpy(np.asarray(x))


def to_numpy(x):
    """numpy view of a numpy array or (detached, CPU, float64) torch tensor."""
    if isinstance(x, np.ndarray):
        return x
    return x.detach().cpu().double().numpy()


def qkv(lib, batch=(2, 3), length=5, keys=7, width=4, value_width=3, dtype="float64", seed=0):
    """query (*batch, L, E), key (*batch, S, E), value (*batch, S, Ev)."""
    return (
        make((*batch, length, width), lib, dtype, seed),
        make((*batch, keys, width), lib, dtype, seed + 1),
        make((*batch, keys, value_width), lib, dtype, seed + 2),
    )


def torch_sdpa(query, key, value, **kwargs):
    """PyTorch's own SDPA on numpy or torch inputs, returned as float64 numpy (the oracle);
    without torch, the test skips here."""
    torch = pytest.importorskip("torch", reason=NO_TORCH)
    import torch.nn.functional as F

    def t(x):
        return x if x is None or isinstance(x, torch.Tensor) else torch.from_numpy(np.array(x))

    mask = kwargs.pop("attn_mask", None)
    out = F.scaled_dot_product_attention(t(query), t(key), t(value), attn_mask=t(mask), **kwargs)
    return to_numpy(out)


# -- a device without float64 (Apple's MPS), played by the CPU --------------------------


def float64_guard():
    """A TorchDispatchMode that fails any float64 CPU tensor attention_lib makes.

    An operation fails when it returns a float64 tensor on the CPU from
    floating inputs none of which is float64 (a widening such as
    ``x.double()``) or from no tensor at all (a factory such as
    ``zeros(..., dtype=float64)``), and the call comes from
    attention_lib's code (a test's own float64 reference is not the
    library's; nor is `attention_lib.flash.accuracy`, the float64 reference
    of the GPU checks). PyTorch's own 0-dim tensors for Python numbers
    (``aten.scalar_tensor``, as in ``torch.where(c, 0.0, x)``) are made on
    the CPU for every device, MPS too, and pass. The mode lives in the thread that enters it (and
    autograd's): the torch tiled path's worker threads run unseen, and the
    library makes its float64 sums after them, in the caller's thread.
    """
    import sys
    from pathlib import Path

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    import attention_lib

    library = str(Path(attention_lib.__file__).resolve().parent)
    allowed = str(Path(library) / "flash" / "accuracy.py")

    def in_library():
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(library) and name != allowed:
                return True
            frame = frame.f_back
        return False

    class Float64Guard(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.scalar_tensor.default:  # a Python number, on the host
                return out
            made = [
                x
                for x in tree_leaves(out)
                if isinstance(x, torch.Tensor)
                and x.dtype == torch.float64
                and x.device.type == "cpu"
            ]
            if made:
                given = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
                floating = [x.dtype for x in given if x.dtype.is_floating_point]
                widened = torch.float64 not in floating and (floating or not given)
                if widened and in_library():  # (a boolean mask as float64 numbers is not)
                    raise AssertionError(
                        f"{func} made a float64 tensor of shape {tuple(made[0].shape)} on a "
                        "device without float64 (the CPU, playing MPS)"
                    )
            return out

    return Float64Guard()


def without_float64():
    """The CPU as a device without float64: `attention_lib.backend.has_float64` is False
    there, and `float64_guard` fails any float64 tensor the library makes on it."""
    import contextlib

    from attention_lib.backend import without_float64 as lacking

    stack = contextlib.ExitStack()
    stack.enter_context(lacking("cpu"))
    stack.enter_context(float64_guard())
    return stack
