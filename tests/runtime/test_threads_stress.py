"""Many host threads on one device: cross-thread event waits, host round trips, every byte checked.

What must hold whatever the interleaving (issue 13, item 1): no wait times out falsely, no
scheduler error escapes, and every buffer holds exactly what its stream's order says. The
threads meet at barriers so each round's records exist before the waits that capture them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

from cannrt import Device, Event, Stream
from cannrt.runtime.core import Runtime

JOIN_S = 60.0  # bound on a whole test's threads (each wait has the runtime's watchdog too)


def run_threads(count: int, body: Callable[[int], None]) -> list[BaseException]:
    """Run body(index) on count threads; returns what they raised."""
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            body(index)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(index,), daemon=True) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_S)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return errors


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_a_ring_of_threads_each_waiting_on_the_next_ones_event(
    make_runtime: Callable[..., Runtime], threads: int
) -> None:
    """Thread t: add, wait for thread t+1's event, record its own, synchronize; six rounds."""
    make_runtime(watchdog_s=10.0)
    dev = Device(0)
    streams = [dev.stream() for _ in range(threads)]
    events = [stream.record() for stream in streams]
    data = [dev.array(np.zeros(1 << 16, np.float32)) for _ in range(threads)]
    one = dev.array(np.ones(1 << 16, np.float32))
    barrier = threading.Barrier(threads, timeout=JOIN_S)
    rounds = 6

    def body(t: int) -> None:
        dev.use()
        stream = streams[t]
        for _ in range(rounds):
            barrier.wait()
            stream.launch("add", data[t], one, data[t])
            stream.wait(events[(t + 1) % threads])
            stream.record(events[t])
            stream.synchronize()

    assert run_threads(threads, body) == []
    for t in range(threads):
        assert (data[t].to_numpy(streams[t]) == rounds).all()


def test_eight_threads_on_eight_streams_with_cross_thread_waits_and_round_trips(
    make_runtime: Callable[..., Runtime],
) -> None:
    """Each thread owns 8 streams; every round each stream adds one, waits for the same stream
    of the next thread, records; then the thread reads one stream's buffer back and checks it,
    and writes a fresh buffer and reads it back."""
    make_runtime(watchdog_s=10.0)
    threads, per_thread, rounds, size = 8, 8, 4, 4096
    dev = Device(0)
    streams = [[dev.stream() for _ in range(per_thread)] for _ in range(threads)]
    events: list[list[Event]] = [[stream.record() for stream in row] for row in streams]
    data = [[dev.array(np.zeros(size, np.float32)) for _ in range(per_thread)] for _ in range(threads)]
    one = dev.array(np.ones(size, np.float32))
    barrier = threading.Barrier(threads, timeout=JOIN_S)

    def body(t: int) -> None:
        dev.use()
        row: list[Stream] = streams[t]
        rng = np.random.default_rng(t)
        for step in range(rounds):
            barrier.wait()
            for k, stream in enumerate(row):
                stream.launch("add", data[t][k], one, data[t][k])
                stream.wait(events[(t + 1) % threads][k])
                stream.record(events[t][k])
            k = step % per_thread
            got = data[t][k].to_numpy(row[k])
            assert (got == step + 1).all(), f"thread {t} stream {k} round {step}: {np.unique(got)}"
            sent = rng.integers(0, 1 << 30, size, dtype=np.int32)
            echo = dev.array(sent, stream=row[(k + 1) % per_thread])
            assert np.array_equal(echo.to_numpy(row[(k + 1) % per_thread]), sent)
            echo.free()
        for stream in row:
            stream.synchronize()

    assert run_threads(threads, body) == []
    for t in range(threads):
        for k in range(per_thread):
            assert (data[t][k].to_numpy(streams[t][k]) == rounds).all()


def test_eight_threads_allocating_and_freeing_from_the_pool_on_the_default_stream(
    make_runtime: Callable[..., Runtime],
) -> None:
    """Device.array / to_numpy / free from 8 threads at once: every array reads back its own
    bytes (issue 13 item 2's race; the pool's lock is the memory part's)."""
    make_runtime(watchdog_s=10.0)
    dev = Device(0)
    rounds = 60

    def body(t: int) -> None:
        dev.use()
        rng = np.random.default_rng(t)
        for step in range(rounds):
            values = rng.integers(0, 1 << 30, 256 + (step % 7) * 64, dtype=np.int32)
            first, second = dev.array(values), dev.array(values[::-1].copy())
            assert np.array_equal(first.to_numpy(), values), f"thread {t} step {step}"
            assert np.array_equal(second.to_numpy(), values[::-1]), f"thread {t} step {step}"
            first.free()
            second.free()

    assert run_threads(8, body) == []
