"""The caching pool: rounding, best fit with split and merge, stream-ordered reuse, stats, OOM."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cannrt
from cannrt.memory.caching import SMALL_SEGMENT, CachingAllocator, PoolOutOfMemory


class FakeDevice:
    """Segments at increasing addresses; events complete when told to."""

    def __init__(self, capacity: int = 1 << 30) -> None:
        self.capacity = capacity
        self.live: dict[int, int] = {}
        self.next = 1 << 20
        self.done: set[int] = set()
        self.events = 0

    def malloc(self, nbytes: int) -> int:
        if sum(self.live.values()) + nbytes > self.capacity:
            raise MemoryError(f"{nbytes} does not fit")
        address, self.next = self.next, self.next + nbytes
        self.live[address] = nbytes
        return address

    def free(self, address: int) -> None:
        del self.live[address]

    def record(self, stream: Hashable) -> int:
        self.events += 1
        return self.events

    def pool(self) -> CachingAllocator:
        return CachingAllocator(self.malloc, self.free, self.record, lambda event: event in self.done)


def test_requests_round_to_512_bytes_and_share_a_small_segment() -> None:
    dev = FakeDevice()
    pool = dev.pool()
    a, b = pool.allocate(1, "s"), pool.allocate(700, "s")
    assert (a.size, b.size) == (512, 1024)
    assert b.address == a.address + 512
    assert list(dev.live.values()) == [SMALL_SEGMENT]


def test_a_freed_block_is_reused_by_its_stream_at_once_and_merges_with_free_neighbours() -> None:
    pool = FakeDevice().pool()
    a, b = pool.allocate(4096, "s"), pool.allocate(4096, "s")
    pool.free(a)
    pool.free(b)
    c = pool.allocate(8192, "s")  # a and b merged back into one block
    assert c.address == a.address


def test_another_stream_never_takes_a_block_cached_for_a_different_stream() -> None:
    dev = FakeDevice()
    pool = dev.pool()
    a = pool.allocate(4096, "s")
    pool.free(a)
    other = pool.allocate(4096, "t")
    assert other.address != a.address
    assert len(dev.live) == 2


def test_a_block_used_on_another_stream_waits_for_that_streams_event() -> None:
    dev = FakeDevice()
    pool = dev.pool()
    a = pool.allocate(4096, "s")
    pool.record_stream(a, "t")
    pool.free(a)
    assert pool.memory_stats()["active_bytes.all.current"] == 4096  # still in use by stream t
    assert pool.allocate(4096, "s").address != a.address
    dev.done.add(1)
    pool_block = pool.allocate(512, "s")
    assert pool_block.address == a.address


def test_stats_follow_pytorchs_schema() -> None:
    pool = FakeDevice().pool()
    a = pool.allocate(3 << 20, "s")  # large pool: a 20 MiB segment
    stats = pool.memory_stats()
    assert stats["allocated_bytes.large_pool.current"] == 3 << 20
    assert stats["reserved_bytes.all.current"] == 20 << 20
    assert stats["inactive_split_bytes.all.current"] == 17 << 20
    assert stats["segment.all.current"] == 1
    pool.free(a)
    stats = pool.memory_stats()
    assert stats["allocated_bytes.all.current"] == 0
    assert stats["allocated_bytes.all.peak"] == 3 << 20
    assert stats["allocated_bytes.all.freed"] == 3 << 20
    assert stats["inactive_split_bytes.all.current"] == 0


def test_out_of_memory_releases_the_cache_retries_and_then_reports_the_numbers() -> None:
    dev = FakeDevice(capacity=40 << 20)
    pool = dev.pool()
    cached = pool.allocate(15 << 20, "s")
    pool.free(cached)  # a cached 20 MiB segment
    big = pool.allocate(30 << 20, "t")  # needs the cache released first
    assert pool.memory_stats()["num_alloc_retries"] == 1
    with pytest.raises(PoolOutOfMemory) as info:
        pool.allocate(30 << 20, "t")
    assert info.value.requested == 30 << 20 and info.value.reserved == 30 << 20
    assert pool.memory_stats()["num_ooms"] == 1
    pool.free(big)


def test_freeing_a_foreign_or_freed_block_is_an_error() -> None:
    pool = FakeDevice().pool()
    a = pool.allocate(10, "s")
    pool.free(a)
    with pytest.raises(ValueError):
        pool.free(a)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 3 << 20), st.sampled_from("st")), max_size=60))
def test_live_blocks_never_overlap_and_stats_add_up(ops: list[tuple[bool, int, str]]) -> None:
    pool = FakeDevice().pool()
    live = []
    for allocate, size, stream in ops:
        if allocate or not live:
            live.append(pool.allocate(size, stream))
        else:
            pool.free(live.pop(size % len(live)))
        spans = sorted((b.address, b.address + b.size) for b in live)
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))
        assert pool.memory_stats()["allocated_bytes.all.current"] == sum(b.size for b in live)
    for block in live:
        pool.free(block)
    pool.empty_cache()
    assert pool.memory_stats()["reserved_bytes.all.current"] == 0


def test_device_arrays_come_from_the_pool_and_return_to_it(device: cannrt.Device) -> None:
    a = device.empty((256, 256), np.float32)
    address = a.address
    a.free()
    b = device.empty((256, 256), np.float32)
    assert b.address == address
    assert device.memory_stats()["allocation.all.allocated"] == 2


def test_an_array_used_on_a_second_stream_is_not_reused_before_that_stream_is_done(device: cannrt.Device) -> None:
    producer, consumer = device.stream(), device.stream()
    with producer:
        a = device.empty(1024, np.float32)
    out = device.empty(1024, np.float32)
    consumer.launch("spin", 5_000_000)  # the consumer is busy for 5 ms of modelled time
    consumer.launch("relu", a, out)
    a.record_stream(consumer)
    a.free()
    with producer:
        b = device.empty(1024, np.float32)
    assert b.address != a.address  # the relu on the consumer stream may still read a
    consumer.synchronize()
    b.free()
    with producer:
        c = device.empty(1024, np.float32)
    assert c.address in (a.address, b.address)


def test_pool_exhaustion_raises_out_of_memory_with_the_numbers() -> None:
    settings_ = cannrt.Settings(chip=cannrt.ChipSpec(hbm_bytes=64 << 20))
    runtime = cannrt.reset_runtime(settings_)
    try:
        device = cannrt.Device(0)
        keep = device.empty(40 << 20, np.uint8)
        with pytest.raises(cannrt.OutOfMemoryError) as info:
            device.empty(40 << 20, np.uint8)
        assert info.value.code == cannrt.ErrorCode.RT_MEMORY_ALLOCATION
        assert info.value.total == 64 << 20 and info.value.reserved == 40 << 20
        keep.free()
    finally:
        runtime.close()


def test_an_overrun_of_a_pooled_array_is_caught_with_the_allocation_named(device: cannrt.Device) -> None:
    small = device.array(np.ones(8, np.float32))  # 32 bytes inside a 2 MiB pool segment
    out = device.empty(16, np.float32)
    stream = device.stream()
    overrun = cannrt.DeviceArray(device, small.address, (16,), np.dtype(np.float32), owned=False)
    stream.launch("relu", overrun, out)
    with pytest.raises(cannrt.CannError) as info:
        stream.synchronize()
    assert f"read of 64 bytes at 0x{small.address:x} ends 32 bytes after the 32-byte allocation at " in str(info.value)


def test_work_queued_before_a_free_still_runs_after_the_block_is_reused(device: cannrt.Device) -> None:
    stream = device.stream()
    with stream:
        a = device.array(np.arange(1024, dtype=np.float32))
        out = device.empty(1024, np.float32)
        stream.launch("spin", 1_000_000)
        stream.launch("relu", a, out)
        a.free()
        b = device.empty(256, np.float32)  # reuses a's block while the relu is still queued
        assert b.address == a.address
        np.testing.assert_array_equal(out.to_numpy(), np.arange(1024, dtype=np.float32))
