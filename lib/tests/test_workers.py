"""The torch tiled path's worker threads: each item once, errors raised, settings kept."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from arrays import FLOAT64, make

import attention_lib as al

torch = pytest.importorskip("torch", reason="the worker threads are the torch tiled path's")

from attention_lib.flash import torch_tiled, workers  # noqa: E402


def test_every_item_runs_once_with_a_scratch_per_thread():
    seen, lock = [], threading.Lock()

    def fn(item, scratch):
        scratch.setdefault("thread", threading.get_ident())
        with lock:
            seen.append((item, scratch["thread"], threading.get_ident()))

    workers.run(fn, range(50), threads=2)
    assert sorted(item for item, _, _ in seen) == list(range(50))
    assert all(owner == thread for _, owner, thread in seen)  # scratch is the thread's own
    assert threading.get_ident() not in {thread for _, _, thread in seen}


def test_each_worker_computes_single_threaded_in_the_callers_grad_mode():
    found = []

    def fn(item, scratch):
        found.append((torch.get_num_threads(), torch.is_grad_enabled()))

    with torch.no_grad():
        workers.run(fn, range(8), threads=2)
    assert set(found) == {(1, False)}
    workers.run(fn, range(8), threads=2)
    assert (1, True) in found


def test_the_first_error_is_raised_in_the_caller():
    def fn(item, scratch):
        if item == 3:
            raise ValueError("item 3 is bad")

    with pytest.raises(ValueError, match="item 3 is bad"):
        workers.run(fn, range(10), threads=2)
    workers.run(lambda item, scratch: None, range(10), threads=2)  # still serving


def test_the_callers_thread_count_and_the_default_for_new_threads_are_kept(monkeypatch):
    monkeypatch.setattr(workers, "_pools", {})  # the threads start in this test
    monkeypatch.setattr(workers, "thread_count", lambda: 2)
    monkeypatch.setattr(torch_tiled, "PARALLEL_MIN_SCORES", 0)
    before = torch.get_num_threads()
    q = make((8, 64, 32), "torch", "float32")
    al.flash_attention(q, q, q, tile_kernel="ops")  # on the workers
    assert torch.get_num_threads() == before
    later = []
    thread = threading.Thread(target=lambda: later.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert later == [before]


def test_calls_from_several_threads_at_once_give_the_serial_results(monkeypatch):
    monkeypatch.setattr(torch_tiled, "PARALLEL_MIN_SCORES", 0)
    monkeypatch.setattr(workers, "thread_count", lambda: 2)
    inputs = [tuple(make((4, 30, 8), "torch", seed=3 * i + j) for j in range(3)) for i in range(6)]
    expected = [al.scaled_dot_product_attention(*x, is_causal=True) for x in inputs]
    results = [None] * len(inputs)

    def call(i):
        results[i] = al.flash_attention(
            *inputs[i], is_causal=True, block_q=4, block_k=8, tile_kernel="ops"
        )

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got, want in zip(results, expected, strict=True):
        torch.testing.assert_close(got, want, **FLOAT64)


@pytest.mark.slow  # make check's, not make test's (seconds)
def test_a_forked_child_starts_threads_of_its_own():
    code = (
        "import os, torch, attention_lib as al\n"
        "from attention_lib.flash import torch_tiled, workers\n"
        "torch_tiled.PARALLEL_MIN_SCORES = 0\n"
        "workers.thread_count = lambda: 2\n"
        "x = torch.ones(4, 16, 8)\n"
        "al.flash_attention(x, x, x, tile_kernel='ops')\n"  # the parent's threads exist
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    al.flash_attention(x, x, x, tile_kernel='ops')\n"  # would wait on the parent's
        "    os._exit(0)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert status == 0, status\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()


def test_the_threads_are_stopped_and_joined_at_exit():
    """At exit (`_close_pools`, an atexit handler) every worker thread ends before the
    interpreter finalises: a daemon thread alive then aborted about one exit in eight
    (SIGABRT, "terminate called without an active exception"). A later call starts anew."""
    workers.run(lambda item, scratch: None, range(4), threads=2)
    threads = [t for pool in workers._pools.values() for t in pool.threads]
    assert threads and all(t.is_alive() for t in threads)
    workers._close_pools()
    assert not workers._pools
    assert not any(t.is_alive() for t in threads)
    done = []
    workers.run(lambda item, scratch: done.append(item), range(4), threads=2)
    assert sorted(done) == [0, 1, 2, 3]


@pytest.mark.slow  # make check's, not make test's (seconds)
def test_a_script_using_the_threads_exits_cleanly():
    code = (
        "import torch, attention_lib as al; q = torch.randn(1, 8, 1024, 64); "
        "al.flash_attention(q, q, q, block_q=128, tile_kernel='ops'); print('done')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr[-2000:]
    assert "terminate called" not in done.stderr
