"""SubmitLock: mutual exclusion between threads, waiters woken when the holder gives it back."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import cannrt
from cannrt.runtime.core import Runtime
from cannrt.runtime.submit_lock import SubmitLock


def test_it_excludes_other_threads_and_every_increment_survives() -> None:
    lock = SubmitLock()
    counter = [0]
    inside = [0]
    overlaps = []

    def work() -> None:
        for _ in range(2000):
            with lock:
                inside[0] += 1
                if inside[0] != 1:
                    overlaps.append(inside[0])
                value = counter[0]
                if value % 97 == 0:
                    time.sleep(0)  # hand the GIL over while holding the lock
                counter[0] = value + 1
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert counter[0] == 6 * 2000
    assert overlaps == []
    assert not lock.locked()


def test_a_waiter_gets_the_lock_as_soon_as_it_is_given_back() -> None:
    lock = SubmitLock()
    lock.acquire()
    got = threading.Event()

    def wait() -> None:
        lock.acquire()
        got.set()

    thread = threading.Thread(target=wait)
    thread.start()
    while not lock.waiters[0]:
        time.sleep(0.001)
    assert not got.is_set()
    lock.release()
    assert got.wait(5)
    thread.join(timeout=5)
    assert lock.locked()  # the waiter holds it now


def test_an_exception_inside_gives_the_lock_back() -> None:
    lock = SubmitLock()
    with pytest.raises(RuntimeError), lock:
        raise RuntimeError("inside")
    assert not lock.locked()


def test_threads_sharing_a_stream_each_get_their_own_tasks(rt: Runtime) -> None:
    device = cannrt.Device(0)
    stream = device.stream()
    x, y = device.array(np.ones(16, np.float32)), device.array(np.full(16, 2, np.float32))
    outs = [device.empty(16, np.float32) for _ in range(4)]
    for out in outs:  # kept: the threads launch through the shapes' senders
        stream.launch("add", x, y, out)
    stream.synchronize()
    before = stream._rt.tail

    def work(index: int) -> None:
        for _ in range(300):
            stream.launch("add", x, y, outs[index])
            stream.launch("nop")

    with cannrt.profile() as prof:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        stream.synchronize()
    assert stream._rt.tail - before == 4 * 300 * 2
    ids = [r.task_id for r in prof.records if r.stream_id == stream._rt.stream_id]
    assert sorted(ids) == list(range(before, before + 4 * 300 * 2))  # each position once, none lost
    assert all((out.to_numpy() == 3).all() for out in outs)
