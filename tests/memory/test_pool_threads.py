"""The caching pool under host threads (issue 13, item 2): 8 threads allocating, filling, reading
back and freeing arrays on the default stream never corrupt the pool or each other's data."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

import cannrt
from cannrt.api import pools
from cannrt.config import Settings
from cannrt.runtime import stream_pools

THREADS = 8
ROUNDS = 40


@pytest.fixture
def device() -> Iterator[cannrt.Device]:
    runtime = cannrt.reset_runtime(Settings(watchdog_s=20.0))
    yield cannrt.Device(0)
    runtime.close()


def test_eight_threads_allocating_and_freeing_keep_every_array_intact(device: cannrt.Device) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(index: int) -> None:
        try:
            device.use()
            start.wait()
            for round_ in range(ROUNDS):
                size = 256 + 256 * ((index + round_) % 8)
                expected = np.full(size, index * 1000 + round_, np.int32)
                first = device.array(expected)
                second = device.array(expected + 1)
                np.testing.assert_array_equal(first.to_numpy(), expected)
                np.testing.assert_array_equal(second.to_numpy(), expected + 1)
                first.free()
                second.free()
        except BaseException as exc:  # reported below with the thread's index
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    stats = device.memory_stats()
    assert stats["allocation.all.current"] == 0 and stats["allocated_bytes.all.current"] == 0
    assert stats["allocation.all.allocated"] == THREADS * ROUNDS * 2
    pool = pools.pool_of(device.context)
    recount = pool.recount()
    assert all(stats[key] == value for key, value in recount.items())


def test_two_threads_freeing_one_array_free_it_once(device: cannrt.Device) -> None:
    for _ in range(50):
        array = device.empty(1024, np.float32)
        threads = [threading.Thread(target=array.free) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert device.memory_stats()["allocation.all.current"] == 0


def test_threads_on_their_own_streams_share_the_default_stream_ordered_pool(device: cannrt.Device) -> None:
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            device.use()
            stream = device.stream()
            for round_ in range(30):
                expected = np.full(512 + 64 * index, index * 100 + round_, np.int32)
                array = stream.malloc_async(expected.shape, np.int32)
                array.copy_from(expected, stream)
                np.testing.assert_array_equal(array.to_numpy(stream), expected)
                stream.free_async(array)
            stream.synchronize()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads) and errors == []
    holder = stream_pools.pools_of(device.context)
    pool = holder.stream_ordered[holder.default_id]
    assert pool.used == 0 and not any(allocated for _, _, allocated in pool.blocks())
