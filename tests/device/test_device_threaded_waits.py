"""Host waits from several threads: one thread at a time drives the scheduler, and a waiter learns
of completions another thread's scheduling made (docs/design.md, "Concurrency").

A gate kernel holds its real execution until the test opens it, so each test puts the threads in
exactly the interleaving it names: a scheduler waiting for a task's real results (device lock
released) while a second host thread enters a wait. The bugs these pin down (issue 13, item 1):
the second thread dispatched the same SQ head again (IndexError "pop from an empty deque"), and a
waiter whose condition another thread's scheduling satisfied slept until the watchdog (507046).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from cannrt import CannTimeout, Device, Kernel, Stream, Work, register_kernel
from cannrt.runtime.core import Runtime

GATE_S = 5.0  # bound on how long the gate stays shut (the test opens it long before)


class Gate:
    """A kernel `test_gate` whose real execution waits until opened."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def compute(self, out: np.ndarray) -> None:
        self.entered.set()
        assert self.opened.wait(GATE_S), "the gate was never opened"
        out[...] = 7


@pytest.fixture
def gate() -> Iterator[Gate]:
    """A fresh gate registered as the kernel `test_gate` (one fp32 output)."""
    made = Gate()
    register_kernel(Kernel("test_gate", made.compute, lambda s: Work(), lambda s: None, outputs=(0,)), replace=True)
    yield made
    made.opened.set()


def in_thread(fn: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    """Run fn on a new thread, collecting what it raises."""

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def wait_for_waiters(runtime: Runtime, count: int) -> None:
    """Block until count host threads are inside a device wait, then until each has reached the
    point where it sleeps on the device lock (it holds the lock until then)."""
    sync = runtime.driver._npu(0).sync
    limit = time.monotonic() + GATE_S
    while sync.host_waiters < count:
        assert time.monotonic() < limit, f"only {sync.host_waiters} of {count} threads reached a wait"
        time.sleep(0.001)
    with sync.lock:
        pass


def both_return_once_the_gate_opens(
    runtime: Runtime, gate: Gate, first_wait: Callable[[], None], second_wait: Callable[[], None]
) -> None:
    """first_wait blocks inside the gated kernel, second_wait behind it; opening the gate
    releases both, and neither raised."""
    errors: list[BaseException] = []
    first = in_thread(first_wait, errors)
    assert gate.entered.wait(GATE_S)
    second = in_thread(second_wait, errors)
    wait_for_waiters(runtime, 2)
    gate.opened.set()
    first.join(GATE_S)
    second.join(GATE_S)
    assert not first.is_alive() and not second.is_alive()
    assert errors == []


@pytest.mark.parametrize("repeat", range(3))
def test_two_threads_synchronizing_one_stream_while_its_head_runs(
    make_runtime: Callable[..., Runtime], gate: Gate, repeat: int
) -> None:
    """The second thread waits its turn instead of dispatching the head the first one holds."""
    runtime = make_runtime(watchdog_s=3.0)
    dev = Device(0)
    stream = dev.stream()
    out = dev.empty(16)
    stream.launch("test_gate", out)
    stream.launch("add", out, out, out)
    both_return_once_the_gate_opens(runtime, gate, stream.synchronize, stream.synchronize)
    assert (out.to_numpy(stream) == 14).all()


@pytest.mark.parametrize("repeat", range(3))
def test_a_waiter_learns_of_a_completion_another_threads_scheduling_made(
    make_runtime: Callable[..., Runtime], gate: Gate, repeat: int
) -> None:
    """The waiter on the second stream wakes when the first thread's wait completes what it
    waits for, though no doorbell rings afterwards."""
    runtime = make_runtime(watchdog_s=3.0)
    dev = Device(0)
    first_stream, second_stream = dev.stream(), dev.stream()
    out = dev.empty(16)
    first_stream.launch("test_gate", out)
    ready = first_stream.record()
    second_stream.wait(ready)
    second_stream.launch("add", out, out, out)
    both_return_once_the_gate_opens(runtime, gate, first_stream.synchronize, second_stream.synchronize)
    assert (out.to_numpy(second_stream) == 14).all()


@pytest.mark.parametrize("repeat", range(3))
def test_an_event_waiter_wakes_when_another_threads_wait_records_the_event(
    make_runtime: Callable[..., Runtime], gate: Gate, repeat: int
) -> None:
    """No doorbell and no task the scheduler waits for follows the record: the scheduler's
    owner wakes the sleeping event waiter when it hands the scheduler back."""
    runtime = make_runtime(watchdog_s=3.0)
    dev = Device(0)
    stream = dev.stream()
    out = dev.empty(16)
    stream.launch("test_gate", out)
    done = stream.record()
    both_return_once_the_gate_opens(runtime, gate, stream.synchronize, done.synchronize)
    assert (out.to_numpy(stream) == 7).all()


def test_destroying_a_stream_while_another_thread_schedules_its_head(
    make_runtime: Callable[..., Runtime], gate: Gate
) -> None:
    """destroy(force) waits for the scheduler's owner; the owner's wait then ends cleanly."""
    runtime = make_runtime(watchdog_s=3.0)
    dev = Device(0)
    doomed, other = dev.stream(), dev.stream()
    out, other_out = dev.empty(16), dev.array(np.ones(16, np.float32))
    doomed.launch("test_gate", out)
    doomed.launch("add", out, out, out)
    errors: list[BaseException] = []
    waiter = in_thread(dev.synchronize, errors)
    assert gate.entered.wait(GATE_S)
    destroyer = in_thread(lambda: doomed.destroy(force=True), errors)
    sync = runtime.driver._npu(0).sync
    limit = time.monotonic() + GATE_S
    while destroyer.is_alive() and getattr(sync, "sleepers", 0) < 1:  # it waits for the owner
        assert time.monotonic() < limit
        time.sleep(0.001)
    gate.opened.set()
    waiter.join(GATE_S)
    destroyer.join(GATE_S)
    assert not waiter.is_alive() and not destroyer.is_alive()
    assert errors == []
    assert (out.to_numpy(other)[0]) in (7, 14)  # the add may have run for real before the destroy
    other.launch("add", other_out, other_out, other_out)
    assert (other_out.to_numpy(other) == 2).all()


def test_bounded_waits_with_nothing_pending_time_out_though_they_wake_each_other(
    make_runtime: Callable[..., Runtime],
) -> None:
    """Three threads each wait 1 ms on a stream held by a never-recorded legacy event: each
    waiter's look at the scheduler wakes the others, yet every grace runs out (it runs from
    when it started), so all three end with 507046 instead of livelocking."""
    make_runtime(watchdog_s=10.0)
    dev = Device(0)
    never = dev.legacy_event()
    streams = [dev.stream() for _ in range(3)]
    for stream in streams:
        stream.wait(never)
    codes: list[int] = []
    barrier = threading.Barrier(len(streams), timeout=GATE_S)

    def wait_briefly(stream: Stream) -> None:
        barrier.wait()
        try:
            stream.synchronize(1)
        except CannTimeout as exc:
            codes.append(exc.code)

    errors: list[BaseException] = []
    threads = [in_thread(lambda s=s: wait_briefly(s), errors) for s in streams]
    for thread in threads:
        thread.join(4 * GATE_S)
    assert not any(thread.is_alive() for thread in threads), "bounded waits kept each other awake"
    assert errors == []
    assert codes == [507046] * 3
