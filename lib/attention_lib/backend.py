"""Ground floor: one array namespace for numpy and torch, chosen once per call.

Every function above this layer asks `namespace(...)` for an ``xp`` module and
writes ``xp.exp``, ``xp.matmul`` and so on, so each idea is written once and
runs on numpy arrays and on torch tensors (on whatever device they live). The
namespace comes from `array_api_compat`, which never imports torch itself:
torch is loaded only when a tensor arrives or a torch path is asked for.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

import array_api_compat
from array_api_compat import is_torch_array as is_torch_array

_F = TypeVar("_F", bound=Callable[..., Any])

#: the device an array lives on: "cpu" for numpy, its ``torch.device`` for a tensor
device_of = array_api_compat.device

__all__ = [
    "accumulation_dtype",
    "best_device",
    "describe",
    "device_of",
    "has_float64",
    "is_torch_array",
    "itemsize",
    "namespace",
    "nan_is_expected",
    "prod",
    "reference_dtype",
    "require_floating",
    "subnormals_flushed",
    "torch_loaded",
    "torch_threads",
    "uniform",
    "without_float64",
]

#: The kinds of torch device whose tensors cannot be float64 (Apple's MPS has no float64
#: arithmetic): the one place that says so, read by `has_float64`. `without_float64` adds
#: a kind for a block, as the tests do for the CPU.
_NO_FLOAT64 = {"mps"}


def nan_is_expected(fn: _F) -> _F:
    """Silence numpy's "invalid value" warning inside ``fn``.

    NaN or inf in an input row is documented to make that row NaN (as in
    PyTorch); numpy would also warn about it, which torch does not. Other
    floating-point warnings (overflow, divide by zero) still show.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import numpy as np

        with np.errstate(invalid="ignore"):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def describe(x: Any) -> str:
    """A short description of an array for error messages: type, shape, dtype."""
    shape = tuple(getattr(x, "shape", ()))
    kind = "torch.Tensor" if is_torch_array(x) else type(x).__name__
    return f"{kind} of shape {shape} and dtype {getattr(x, 'dtype', '?')}"


def namespace(*arrays: Any) -> ModuleType:
    """The array namespace shared by ``arrays`` (``None`` entries are skipped).

    Raises TypeError, naming the inputs, for anything that is not a numpy array
    or torch tensor, and for a mix of the two.
    """
    present = [a for a in arrays if a is not None]
    for a in present:
        if not array_api_compat.is_array_api_obj(a) or isinstance(a, (int, float, complex)):
            raise TypeError(
                f"expected numpy arrays or torch tensors, got {type(a).__name__}; "
                "wrap Python lists with numpy.asarray or torch.tensor first"
            )
    try:
        return array_api_compat.array_namespace(*present)
    except TypeError as err:
        kinds = ", ".join(describe(a) for a in present)
        raise TypeError(f"inputs mix array libraries ({kinds}); use one library for all") from err


def accumulation_dtype(xp: ModuleType, dtype: Any) -> Any:
    """The dtype arithmetic is done in: float32 for 16-bit floats, else ``dtype``.

    Half-precision sums of many products lose digits quickly; like PyTorch's
    fused kernels we accumulate in float32 and round once at the end.
    """
    if dtype == xp.float16 or (hasattr(xp, "bfloat16") and dtype == xp.bfloat16):
        return xp.float32
    return dtype


def reference_dtype(xp: ModuleType, dtype: Any, like: Any) -> Any:
    """The dtype the reference path computes in: float64 for float32 where ``like``'s device
    has float64 (`has_float64`), else `accumulation_dtype`.

    A float32 score q.k carries a rounding error of about eps * |q||k| * scale, and
    the weights inherit it as a relative error: at a scale of 50 one order of summation
    can be thirteen times as far from the exact output as another (PyTorch's, whose
    errors sometimes cancel by chance), past FlashAttention's 2x rule in about one
    random case in twelve. Computed in float64 and rounded once, the output
    is within a fraction of an ulp whatever the order. The reference path is the
    course's oracle, not its fast path, so it pays the wider arithmetic; 16-bit inputs
    keep float32, as PyTorch's kernels do.
    """
    if dtype == xp.float32 and has_float64(like):
        return xp.float64
    return accumulation_dtype(xp, dtype)


def require_floating(xp: ModuleType, x: Any, name: str) -> None:
    """Raise TypeError unless ``x`` holds real floating-point numbers."""
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"{name} must be a floating-point array, got {describe(x)}")


def uniform(xp: ModuleType, shape: tuple[int, ...], like: Any, generator: Any = None) -> Any:
    """Uniform [0, 1) draws of ``shape`` with ``like``'s dtype and device.

    ``generator`` makes the draw reproducible: an int seed, a
    ``numpy.random.Generator`` (numpy inputs) or a ``torch.Generator`` (torch
    inputs, on the tensors' device). ``None`` draws from fresh entropy (numpy)
    or torch's global generator.
    """
    if is_torch_array(like):
        import torch

        if isinstance(generator, int):
            generator = torch.Generator(device=like.device).manual_seed(generator)
        elif generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"torch inputs need an int seed or torch.Generator, got {type(generator).__name__}"
            )
        return torch.rand(shape, generator=generator, device=like.device, dtype=like.dtype)

    import numpy as np

    if generator is None or isinstance(generator, int):
        generator = np.random.default_rng(generator)
    elif not isinstance(generator, np.random.Generator):
        raise TypeError(
            "numpy inputs need an int seed or numpy.random.Generator, "
            f"got {type(generator).__name__}"
        )
    return generator.random(shape).astype(like.dtype, copy=False)


def best_device() -> Any:
    """The best torch device present: CUDA, then Apple's MPS, then the CPU.

    Imports torch (the notebooks call this once at the top).
    """
    import torch

    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def has_float64(x: Any) -> bool:
    """Whether float64 tensors can live where ``x`` does: a torch tensor, a
    ``torch.device`` or a device name. False on Apple's MPS, True elsewhere (numpy too).

    The torch paths ask this before they widen a sum to float64 (the
    gradients of broadcast inputs, `attention_lib.nonfinite.sum_to`); where
    it is False they keep to float32 with compensated sums. Imports nothing.
    """
    device = getattr(x, "device", x)
    kind = getattr(device, "type", None) or str(device).split(":")[0]
    return kind not in _NO_FLOAT64


@contextlib.contextmanager
def without_float64(kind: str = "cpu") -> Iterator[None]:
    """Inside the block, devices of ``kind`` ("cpu", "cuda", ...) count as having no
    float64 (`has_float64` is False there), as MPS always does: the tests run the torch
    paths on the CPU this way. Not thread-safe: for tests, not for concurrent callers."""
    added = kind not in _NO_FLOAT64
    _NO_FLOAT64.add(kind)
    try:
        yield
    finally:
        if added:
            _NO_FLOAT64.discard(kind)


@contextlib.contextmanager
def torch_threads(count: int = 1) -> Iterator[None]:
    """Run torch on ``count`` CPU threads inside the block, then restore the thread count.

    The course's models and toy heads are tiny: extra threads only add
    contention on a busy machine, and a fixed count fixes the order of every
    float sum, so the same seed gives the same numbers on every run. Imports
    torch.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Inside the block, torch's CPU arithmetic in this thread treats subnormal floats as 0.

    A saturated softmax's weights and gradients fall below float32's
    smallest normal number (1.2e-38), and the CPU takes each such operand in
    microcode, far slower than a normal one (an unscaled retrieval head, which
    makes many, trains markedly faster without them), with the same losses bit
    for bit: terms that small vanish beside the others in every sum. torch sets the flag
    for the calling thread only and cannot read it back, so it is turned
    off after the block (its default). Imports torch.
    """
    import torch

    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def torch_loaded() -> bool:
    """Whether torch has been imported in this process (no import is done)."""
    return "torch" in sys.modules


def itemsize(dtype: Any) -> int:
    """Bytes per element of a numpy or torch dtype, or of a dtype named as numpy or torch
    names it ("float32", "float16", "bfloat16", ...).

    Raises ValueError for a name neither library knows.
    """
    if dtype == "bfloat16":  # numpy has no bfloat16
        return 2
    size = getattr(dtype, "itemsize", None)
    if size is None:  # a name, or a numpy dtype class such as numpy.float32
        import numpy as np

        try:
            size = np.dtype(dtype).itemsize
        except TypeError:
            raise ValueError(f"unknown dtype {dtype!r}; use e.g. 'float32', 'float16'") from None
    return int(size)


def prod(shape: tuple[int, ...]) -> int:
    """Product of a shape's sizes (1 for the empty shape)."""
    return math.prod(int(s) for s in shape)
