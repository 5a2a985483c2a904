"""A few long-lived threads that run the torch tiled path's work items, each single-threaded.

Why not torch's own threads: the tiled path is many small operations per tile
(a matrix product, a row maximum, an exponential, ...). Run one after another
with torch's intra-op threads, each operation splits its tile across the
threads and waits for all of them at its end, so one thread descheduled by
another busy process stalls every operation. Here each thread
takes a whole work item instead (one head's block of query rows, say) and
runs its operations single-threaded; torch releases the GIL inside each
operation, so the threads compute at once, and they take the next item when
they finish theirs, so a slow thread delays nothing but its own item.

`run(fn, items, threads)` is the one entry point. The threads are started
once per process and size and kept (they sleep on a queue between calls).
Each sets torch's thread count to 1 for itself; ``torch.set_num_threads``
also writes the process-wide default that threads starting later read, so
the starting thread writes the caller's own count back straight after (a
thread that makes its first parallel torch call in that instant of start-up
would start with one thread). The caller's thread count is not changed.
Safe to call from several threads at once (their items share the threads)
and after ``fork`` (a child process starts its own threads). At exit the
threads are stopped and joined before the interpreter finalises: a daemon
thread still alive then is killed mid-way through torch's C++ code, and
about one exit in eight aborted the process ("terminate called without an
active exception", SIGABRT) after its work was done.

Importing this module imports torch.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = ["run", "thread_count"]


class _Pool:
    """``size`` daemon threads serving one queue of jobs, each thread torch-single-threaded."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        caller_threads = torch.get_num_threads()  # also initialises the caller's own count
        started = threading.Barrier(size + 1)
        self.threads = [
            threading.Thread(target=self._serve, args=(started,), daemon=True) for _ in range(size)
        ]
        for thread in self.threads:
            thread.start()
        started.wait()  # every thread has set its own count to 1 ...
        torch.set_num_threads(caller_threads)  # ... so the default for new threads goes back

    def _serve(self, started: threading.Barrier) -> None:
        torch.get_num_threads()  # this thread's first call sets its count from the default,
        torch.set_num_threads(1)  # then it is set to 1, for this thread's operations only
        started.wait()
        while (job := self.jobs.get()) is not None:
            job()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the threads once they finish what they hold, and wait up to ``timeout`` s."""
        for _ in range(self.size):
            self.jobs.put(None)
        for thread in self.threads:
            thread.join(timeout)


_pools: dict[int, _Pool] = {}
_pools_lock = threading.Lock()


def _forget_pools() -> None:  # in a forked child: the parent's threads do not exist there
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools)


@atexit.register
def _close_pools() -> None:  # no worker thread may outlive the interpreter (see above)
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


def _pool(size: int) -> _Pool:
    with _pools_lock:
        if size not in _pools:
            _pools[size] = _Pool(size)
        return _pools[size]


def thread_count() -> int:
    """How many threads `run` uses for a call from this thread: torch's count here."""
    return torch.get_num_threads()


def run(fn: Callable[[Any, dict[str, Any]], None], items: Iterable[Any], threads: int) -> None:
    """Call ``fn(item, scratch)`` for every item, on ``threads`` threads; return when all are done.

    Items are handed out in order, one at a time, to whichever thread is
    free (put the longest first). ``scratch`` is a dict private to one
    thread for the length of this call, for the buffers its items reuse.
    With ``threads`` = 1 the items run here, in order, with torch's own
    threads. The items run in the caller's grad mode. The first exception an
    item raises is raised here, after the items already started have
    finished; the rest are not started.
    """
    todo = list(items)
    if threads <= 1 or len(todo) <= 1:
        scratch: dict[str, Any] = {}
        for item in todo:
            fn(item, scratch)
        return
    pending = iter(todo)
    lock = threading.Lock()
    finished = threading.Event()
    errors: list[BaseException] = []
    active = [min(threads, len(todo))]
    grad_mode = torch.is_grad_enabled()  # thread-local: the workers take the caller's

    def drain() -> None:
        scratch: dict[str, Any] = {}
        try:
            with torch.set_grad_enabled(grad_mode):
                _drain(scratch)
        except BaseException as err:  # handed to the caller, which raises it
            errors.append(err)
        finally:
            with lock:
                active[0] -= 1
                if active[0] == 0:
                    finished.set()

    def _drain(scratch: dict[str, Any]) -> None:
        while not errors:
            with lock:
                item = next(pending, _DONE)
            if item is _DONE:
                return
            fn(item, scratch)

    pool = _pool(threads)
    for _ in range(active[0]):
        pool.jobs.put(drain)
    try:
        finished.wait()
    except BaseException as err:  # interrupted: the threads start no further item
        errors.append(err)
        raise
    if errors:
        raise errors[0]


_DONE = object()
