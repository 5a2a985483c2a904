"""Arrays that record which of their rows the learner's code reads (notebook 07, exercise 2).

A tiled forward pass must read each block of keys only where the exercise
allows it: FlashAttention never holds more than one tile of keys, and with
``is_causal`` a block of queries never reads the keys past its last row. The
checker hands the learner's function its keys and values as `Watched`
arrays. A `Watched` array behaves as a read-only numpy array: slicing,
transposing and reshaping give `Watched` views (nothing is read yet), and the
first computation that uses one (``@``, ``np.exp``, ``.sum()``, ``np.asarray``,
any numpy function) reads its rows: which of the original rows take part is
recorded in the `Reads` timeline, in order, beside the tiles the checker
watches reach ``online_update``. The result of a computation is an ordinary
array.

Writing into one (``k[0] = 0``, ``k += 1``, ``np.copyto(k, ...)``) raises
`WriteError`, which names the argument. Printing one does not count as
reading it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["Reads", "Watched", "WriteError", "rows_of", "watched"]


class WriteError(Exception):
    """The learner's code wrote into a `Watched` argument."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is read-only: compute a new array instead")
        self.name = name


@dataclass
class Reads:
    """The timeline of one run: ("read", argument name, sorted rows) and ("tile", index)."""

    events: list[tuple[str, Any, Any]] = field(default_factory=list)

    def read(self, name: str, rows: np.ndarray) -> None:
        self.events.append(("read", name, np.unique(rows)))

    def tile(self, index: int) -> None:
        self.events.append(("tile", index, None))


# numpy functions that make views or copies of their first argument (no values used)
_VIEWS = {
    np.transpose,
    np.swapaxes,
    np.moveaxis,
    np.reshape,
    np.squeeze,
    np.expand_dims,
    np.atleast_1d,
    np.atleast_2d,
    np.atleast_3d,
    np.split,
    np.array_split,
    np.copy,
    np.ascontiguousarray,
    np.broadcast_to,
    np.flip,
    np.ravel,
}
# numpy functions that read only an argument's shape or dtype
_SHAPES = {np.shape, np.ndim, np.size, np.zeros_like, np.ones_like, np.empty_like, np.full_like}
# numpy functions that write into their first argument
_WRITES = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal}


def watched(array: np.ndarray, name: str, log: Reads) -> Watched:
    """A read-only `Watched` copy of ``array`` whose first axis is the rows recorded."""
    data = np.array(array, dtype=float)  # a copy: the checker's own stays untouched
    data.flags.writeable = False
    index = np.arange(data.shape[0]).reshape((-1,) + (1,) * (data.ndim - 1))
    return Watched(data, np.broadcast_to(index, data.shape), name, log)


class Watched(NDArrayOperatorsMixin):
    """A read-only array that records the rows each computation reads (see the module)."""

    __slots__ = ("_data", "_log", "_name", "_rows")

    def __init__(self, data: np.ndarray, rows: np.ndarray, name: str, log: Reads) -> None:
        self._data, self._rows, self._name, self._log = data, rows, name, log

    # -- what is not a read ------------------------------------------------------------

    shape = property(lambda self: self._data.shape)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    dtype = property(lambda self: self._data.dtype)
    itemsize = property(lambda self: self._data.itemsize)
    nbytes = property(lambda self: self._data.nbytes)
    T = property(lambda self: self._view(np.transpose))

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)

    def __str__(self) -> str:
        return str(self._data)

    def _view(self, op: Any, *args: Any, **kwargs: Any) -> Any:
        """``op`` applied to the values and to their row numbers alike."""
        data, rows = op(self._data, *args, **kwargs), op(self._rows, *args, **kwargs)
        if isinstance(data, list | tuple):
            return [Watched(d, r, self._name, self._log) for d, r in zip(data, rows, strict=True)]
        return Watched(data, rows, self._name, self._log)

    def transpose(self, *axes: Any) -> Watched:
        if not axes:
            return self._view(np.transpose)
        return self._view(np.transpose, axes[0] if len(axes) == 1 else axes)

    def swapaxes(self, a: int, b: int) -> Watched:
        return self._view(np.swapaxes, a, b)

    def reshape(self, *shape: Any, **kwargs: Any) -> Watched:
        return self._view(np.reshape, shape[0] if len(shape) == 1 else shape, **kwargs)

    def squeeze(self, *args: Any, **kwargs: Any) -> Watched:
        return self._view(np.squeeze, *args, **kwargs)

    def ravel(self, *args: Any) -> Watched:
        return self._view(np.ravel, *args)

    def copy(self, *args: Any) -> Watched:
        return self._view(np.copy)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Watched:
        return Watched(self._data.astype(dtype), self._rows, self._name, self._log)

    def __copy__(self) -> Watched:
        return self.copy()

    def __deepcopy__(self, _memo: Any) -> Watched:
        return self.copy()

    def __getitem__(self, key: Any) -> Any:
        key = _plain(key, self._log)
        data, rows = self._data[key], self._rows[key]
        if np.ndim(data) == 0:  # one number taken out: read
            self._log.read(self._name, np.asarray(rows).reshape(-1))
            return data
        return Watched(data, rows, self._name, self._log)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __setitem__(self, key: Any, value: Any) -> None:
        raise WriteError(self._name)

    # -- what reads ----------------------------------------------------------------------

    def _read(self) -> np.ndarray:
        self._log.read(self._name, self._rows.reshape(-1))
        return self._data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = self._read()
        return data if dtype is None else data.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if any(isinstance(x, Watched) for x in kwargs.get("out", ())):
            raise WriteError(next(x._name for x in kwargs["out"] if isinstance(x, Watched)))
        inputs = tuple(_plain(x, self._log) for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        first = args[0] if args else None
        if func in _WRITES and isinstance(first, Watched):
            raise WriteError(first._name)
        if func in _VIEWS and isinstance(first, Watched):
            return first._view(func, *_plain(args[1:], self._log), **_plain(kwargs, self._log))
        if func in _SHAPES:
            return func(*_plain(args, None), **_plain(kwargs, None))
        return func(*_plain(args, self._log), **_plain(kwargs, self._log))

    def __getattr__(self, name: str) -> Any:
        """Any other ndarray attribute (.sum, .max, .dot, .tolist, ...): a read of every row."""
        if name.startswith("_"):  # not an ndarray's public attribute (or a copy half made)
            raise AttributeError(name)
        return getattr(self._read(), name)

    def __bool__(self) -> bool:
        return bool(self._read())

    def __float__(self) -> float:
        return float(self._read())

    def __int__(self) -> int:
        return int(self._read())

    def __index__(self) -> int:
        return self._read().__index__()

    def __contains__(self, item: Any) -> bool:
        return item in self._read()


def rows_of(x: Any) -> np.ndarray | None:
    """The original rows a `Watched` view covers (sorted, without reading them); None for
    anything else."""
    return np.unique(x._rows) if isinstance(x, Watched) else None


def _plain(x: Any, log: Reads | None) -> Any:
    """``x`` with every `Watched` inside it (lists, tuples, dicts) as its plain values, read
    (``log`` None: not read, for what uses only shapes)."""
    if isinstance(x, Watched):
        return x._read() if log is not None else x._data
    if isinstance(x, list | tuple):
        return type(x)(_plain(y, log) for y in x)
    if isinstance(x, dict):
        return {k: _plain(v, log) for k, v in x.items()}
    return x
