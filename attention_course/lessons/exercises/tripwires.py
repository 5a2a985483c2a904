"""The attention functions an exercise asks the learner to write, turned into tripwires.

"Your own attention" and the multi-head layer (notebook 02) are answered by
one call of an attention function: this library's
`scaled_dot_product_attention`, `attention_weights` or `flash_attention`,
PyTorch's ``torch.nn.functional.scaled_dot_product_attention`` or
``torch.nn.MultiheadAttention``. While `forbidden` is active each of them,
wherever it is bound (the library's modules, PyTorch's, the learner's own
namespace under any name), raises `ForbiddenCall`, which names the call. It
derives from BaseException, so a learner's ``except Exception`` does not
swallow it, and every call is also counted, so one caught anyway is still
seen. PyTorch is patched if it is imported, or as soon as the learner's code
imports it. Everything is put back when the block ends.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["HINT_CALLS", "ForbiddenCall", "forbidden"]

HINT_CALLS = (
    "your function calls {name}: this exercise asks you to write it; calling {name} is what "
    "notebook 03 does"
)

#: PyTorch's attention, by module and name (the modules a learner's call reaches it through)
_TORCH = {
    "torch.nn.functional": ("scaled_dot_product_attention", "multi_head_attention_forward"),
    "torch.nn": ("MultiheadAttention",),
    "torch.nn.modules": ("MultiheadAttention",),
    "torch.nn.modules.activation": ("MultiheadAttention",),
    "torch.nn.modules.transformer": ("MultiheadAttention",),
}


class ForbiddenCall(BaseException):
    """The learner's code called an attention function the exercise asks them to write."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name
        self.hint = HINT_CALLS.format(name=name)


def _library() -> dict[int, tuple[Any, str]]:
    """id -> (object, public name) of this library's attention functions."""
    from attention_lib.core import attention_weights, scaled_dot_product_attention
    from attention_lib.flash import flash_attention

    found = (scaled_dot_product_attention, attention_weights, flash_attention)
    return {id(f): (f, f"attention_lib.{f.__name__}") for f in found}


def _torch() -> dict[int, tuple[Any, str]]:
    """id -> (object, public name) of PyTorch's attention, for the modules imported so far."""
    found = {}
    for module, names in _TORCH.items():
        space = sys.modules.get(module)
        for name in names:
            obj = getattr(space, name, None) if space is not None else None
            if obj is not None:
                public = "torch.nn" if name == "MultiheadAttention" else "torch.nn.functional"
                found[id(obj)] = (obj, f"{public}.{name}")
    return found


class _Patches:
    """The replacements made, to be undone in reverse."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.undo: list[tuple[dict[str, Any], str, Any]] = []
        self.seen: set[int] = set()  # ids of the namespaces patched already

    def wire(self, name: str) -> Callable[..., Any]:
        calls = self.calls

        def tripwire(*_args: Any, **_kwargs: Any) -> Any:
            calls.append(name)
            raise ForbiddenCall(name)

        tripwire.__name__ = name.rsplit(".", 1)[-1]
        return tripwire

    def space(self, space: Any, targets: dict[int, tuple[Any, str]]) -> None:
        """Replace every value of the dict ``space`` that is one of ``targets``."""
        if not isinstance(space, dict):
            return
        for key, value in list(space.items()):
            if id(value) in targets and targets[id(value)][0] is value:
                self.undo.append((space, key, value))
                space[key] = self.wire(targets[id(value)][1])

    def modules(self, prefix: str, targets: dict[int, tuple[Any, str]]) -> None:
        for name, module in list(sys.modules.items()):
            if (name == prefix or name.startswith(prefix + ".")) and id(module) not in self.seen:
                self.seen.add(id(module))
                self.space(getattr(module, "__dict__", None), targets)

    def restore(self) -> None:
        for space, key, value in reversed(self.undo):
            space[key] = value


@contextlib.contextmanager
def forbidden(fn: Any) -> Iterator[list[str]]:
    """Arm the tripwires for the learner's ``fn``; yields the list of forbidden calls made."""
    calls: list[str] = []
    patches = _Patches(calls)
    library = _library()
    learner = getattr(fn, "__globals__", None)  # the notebook's namespace, for a notebook's fn
    original_import = builtins.__import__
    torch_done = [False]
    depth = [0]  # imports in progress: torch is armed once the outermost one is complete

    def arm_torch() -> None:
        if torch_done[0] or "torch.nn.functional" not in sys.modules:
            return
        torch_done[0] = True
        targets = _torch()
        for module in _TORCH:
            space = getattr(sys.modules.get(module), "__dict__", None)
            patches.space(space, targets)
        patches.space(learner, targets)

    def watching_import(*args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        try:
            module = original_import(*args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            arm_torch()
        return module

    try:
        patches.modules("attention_lib", library)
        patches.space(learner, library)
        arm_torch()
        if not torch_done[0]:
            builtins.__import__ = watching_import
        yield calls
    finally:
        builtins.__import__ = original_import
        patches.restore()
