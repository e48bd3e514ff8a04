"""The cube kernels leave the host BLAS on one thread, and share their items with one helper thread
that is backed off only when it stalls or the host is crowded (kernels/nn/blas.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from onnx_reference import on_device, reference
from threadpoolctl import threadpool_info

from cannrt.kernels.nn import blas
from cannrt.kernels.nn.blas import KERNEL_BLAS_THREADS
from cannrt.runtime.core import Runtime


def test_a_conv_sets_the_host_blas_to_the_kernel_thread_count(rt: Runtime) -> None:
    """numpy's BLAS, and SciPy's that the convolution's numba products call, each run one thread
    per item (the items are shared among threads already)."""
    inputs = {"x": np.ones((1, 2, 4, 4), np.float32), "w": np.ones((3, 2, 1, 1), np.float32)}
    expected = reference("Conv", inputs)
    np.testing.assert_allclose(on_device("Conv", inputs, expected)[0], expected[0])
    libraries = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    kernels = [lib for lib in libraries if "numpy" in lib["filepath"] or "scipy" in lib["filepath"]]
    assert len(kernels) >= 2 and all(lib["num_threads"] == KERNEL_BLAS_THREADS for lib in kernels)


def _on_helper() -> bool:
    return threading.current_thread().name.startswith("cannrt-kernel-blas")


def test_a_helper_that_starts_late_and_then_runs_is_no_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    # The helper's item is on its core throughout (its CPU clock advances with the wall clock),
    # so the test does not depend on this machine's load; it starts only after the caller took
    # item 0 (its thread is held by an earlier job), and the caller waits for its whole item.
    monkeypatch.setattr(blas, "thread_clock", time.perf_counter)
    gate, took = threading.Event(), threading.Event()
    blocker = blas._helper().submit(gate.wait, 10)
    ran: dict[int, bool] = {}

    def body(index: int) -> None:
        ran[index] = _on_helper()
        if _on_helper():
            took.set()
            time.sleep(0.05)
        else:
            gate.set()
            assert took.wait(10)

    stalls, splits = blas.STALLS[0], blas.SPLITS[0]
    blas.parallel_for(2, body)
    assert blocker.result() is True and ran == {0: False, 1: True}
    assert blas.STALLS[0] == stalls  # the old rule (a wait over 30 % of the kernel) called this a stall
    blas.parallel_for(2, lambda index: None)  # not backed off: still shared
    assert blas.SPLITS[0] == splits + 2


def test_the_stall_rule_needs_a_long_wait_mostly_off_core() -> None:
    assert blas.stalled(waited=0.05, total=0.1, off_core=0.04)
    assert not blas.stalled(waited=0.05, total=0.1, off_core=0.0)  # a late start: its item's own length
    assert not blas.stalled(waited=0.01, total=0.1, off_core=0.01)  # a small share of the kernel
    assert not blas.stalled(waited=1e-4, total=1.5e-4, off_core=1e-4)  # shorter than STALL_MIN_S


def test_the_crowded_rule_needs_the_caller_off_its_core_for_a_share_of_its_items() -> None:
    assert blas.crowded(own=0.01, off_core=0.005)
    assert not blas.crowded(own=0.01, off_core=0.001)  # on its core nearly throughout
    assert not blas.crowded(own=1e-4, off_core=1e-4)  # shorter than STALL_MIN_S


def test_a_caller_off_its_core_makes_the_next_kernels_run_on_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    # A CPU clock that never advances: every thread is off its core for all of its items (as
    # when other processes hold the cores), whatever this machine's load.
    monkeypatch.setattr(blas, "thread_clock", lambda: 0.0)
    crowded, splits = blas.CROWDED[0], blas.SPLITS[0]
    # the caller's items take 2 ms, the helper's none: the caller never waits for the helper (no stall)
    blas.parallel_for(4, lambda index: None if _on_helper() else time.sleep(0.002))
    assert blas.CROWDED[0] == crowded + 1 and blas.SPLITS[0] == splits + 1
    assert blas._backoff[1] == blas.BACKOFF_MIN_S  # retried soon: a crowded spell does not double it
    threads: list[str] = []
    blas.parallel_for(4, lambda index: threads.append(threading.current_thread().name))
    assert threads == [threading.current_thread().name] * 4 and blas.SPLITS[0] == splits + 1


def test_an_error_in_the_helper_thread_reaches_the_caller() -> None:
    seen: list[int] = []

    def body(index: int) -> None:
        seen.append(index)
        if index == 3:
            raise ValueError("item 3")

    with pytest.raises(ValueError, match="item 3"):
        blas.parallel_for(8, body)
    assert 3 in seen and len(seen) == len(set(seen))


def test_parallel_for_runs_every_item_once() -> None:
    seen: list[int] = []
    blas.parallel_for(100, seen.append)
    assert sorted(seen) == list(range(100))


def test_a_stalled_helper_makes_the_next_kernels_run_on_the_caller() -> None:
    started = threading.Event()

    def body(index: int) -> None:  # the helper's item outlasts the caller's: the caller waits
        if threading.current_thread().name.startswith("cannrt-kernel-blas"):
            started.set()
            time.sleep(0.02)
        else:
            assert started.wait(10)

    stalls, splits = blas.STALLS[0], blas.SPLITS[0]
    blas.parallel_for(2, body)
    assert blas.STALLS[0] == stalls + 1 and blas.SPLITS[0] == splits + 1
    threads: list[str] = []
    blas.parallel_for(4, lambda index: threads.append(threading.current_thread().name))
    assert threads == [threading.current_thread().name] * 4 and blas.SPLITS[0] == splits + 1
    blas.reset_backoff()
    blas.parallel_for(2, lambda index: None)
    assert blas.SPLITS[0] == splits + 2


def _stall() -> None:
    """A shared kernel whose helper item outlasts the caller's: the caller waits (a stall)."""
    started = threading.Event()

    def body(index: int) -> None:
        if threading.current_thread().name.startswith("cannrt-kernel-blas"):
            started.set()
            time.sleep(0.02)
        else:
            assert started.wait(10)

    blas.parallel_for(2, body)


def test_the_back_off_doubles_while_stalls_repeat_and_ends_after_a_clean_shared_kernel() -> None:
    stalls = blas.STALLS[0]
    _stall()
    assert blas.STALLS[0] == stalls + 1 and blas._backoff[1] == 2 * blas.BACKOFF_MIN_S
    blas._backoff[0] = 1e-9  # the back-off has run out: the helper is tried again, and stalls again
    _stall()
    assert blas.STALLS[0] == stalls + 2 and blas._backoff[1] == 4 * blas.BACKOFF_MIN_S
    for _ in range(8):  # doubling stops at the longest
        blas._backoff[0] = 1e-9
        _stall()
    assert blas._backoff[1] == blas.BACKOFF_MAX_S
    blas._backoff[0] = 1e-9
    blas.parallel_for(2, lambda index: None)  # shared without a stall: a quiet host again
    assert blas._backoff == [0.0, blas.BACKOFF_MIN_S]
