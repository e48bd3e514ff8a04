"""Stream-ordered pools: reuse on the freeing stream at once, on another stream only once ordered;
release threshold, TrimTo, attributes, limits and the pyACL calls."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import cannrt
from cannrt.config import ChipSpec, Settings
from cannrt.memory.stream_ordered import PoolAttr

MIB = 1 << 20


def test_memory_freed_on_a_stream_is_reused_by_that_stream_at_once(device: cannrt.Device) -> None:
    stream = device.stream()
    first = stream.malloc_async(1024, np.float32)
    stream.launch("spin", 5_000_000)  # the free below is still far ahead of the device
    address = first.address
    stream.free_async(first)
    second = stream.malloc_async(1024, np.float32)
    assert second.address == address
    second.copy_from(np.arange(1024, dtype=np.float32), stream)
    stream.launch("relu", second, second)
    np.testing.assert_array_equal(second.to_numpy(stream), np.arange(1024, dtype=np.float32))


def test_another_stream_reuses_it_only_once_the_free_is_ordered_before_it(device: cannrt.Device) -> None:
    pool = device.mem_pool()
    pool.set_reuse(opportunistic=False, internal_dependencies=False)
    freeing, other = device.stream(), device.stream()
    block = freeing.malloc_async(2 * MIB, np.uint8, pool)  # a whole segment: no remainder to pick
    address = block.address
    freeing.launch("spin", 5_000_000)
    block.free()
    unordered = other.malloc_async(2 * MIB, np.uint8, pool)
    assert unordered.address != address  # nothing orders the free before the other stream's work
    freeing.synchronize()
    pool.set_reuse(opportunistic=True)
    after_sync = other.malloc_async(2 * MIB, np.uint8, pool)
    assert after_sync.address == address  # the free completed: safe for any stream
    assert pool.used == 4 * MIB and pool.reserved == 4 * MIB


def test_with_internal_dependencies_the_other_stream_waits_for_the_free(device: cannrt.Device) -> None:
    pool = device.mem_pool()
    pool.set_reuse(opportunistic=False, internal_dependencies=True)
    freeing, other = device.stream(), device.stream()
    block = freeing.malloc_async(2 * MIB, np.uint8, pool)
    freeing.launch("spin", 2_000_000)
    block.free()
    freed = freeing.record()
    reused = other.malloc_async(2 * MIB, np.uint8, pool)
    assert reused.address == block.address
    used = other.record()  # after the inserted wait
    other.synchronize()
    freeing.synchronize()
    assert used._rt.timestamp_ns() >= freed._rt.timestamp_ns()


def test_trim_to_and_the_release_threshold_give_memory_back(device: cannrt.Device) -> None:
    pool = device.mem_pool(release_threshold=4 * MIB)
    stream = device.stream()
    free_before = device.mem_info()[0]
    arrays = [stream.malloc_async(2 * MIB, np.uint8, pool) for _ in range(4)]
    for array in arrays:
        array.free()
    stream.synchronize()
    assert pool.reserved == 8 * MIB  # cached: nothing asked for a new segment yet
    big = stream.malloc_async(6 * MIB, np.uint8, pool)  # a new segment: frees above 4 MiB go first
    assert pool.reserved == 4 * MIB + 6 * MIB
    big.free()
    stream.synchronize()
    pool.trim_to(2 * MIB)
    assert pool.reserved <= 2 * MIB
    pool.trim_to(0)
    assert pool.reserved == 0
    assert device.mem_info()[0] == free_before


def test_a_pool_limit_and_a_full_device_raise_out_of_memory_with_the_numbers() -> None:
    runtime = cannrt.reset_runtime(Settings(chip=ChipSpec(hbm_bytes=16 * MIB), watchdog_s=10.0))
    try:
        device = cannrt.Device(0)
        stream = device.stream()
        pool = device.mem_pool(max_size=4 * MIB)
        keep = stream.malloc_async(4 * MIB, np.uint8, pool)
        with pytest.raises(cannrt.OutOfMemoryError) as info:
            stream.malloc_async(MIB, np.uint8, pool)
        assert info.value.reserved == 4 * MIB and info.value.segment == 2 * MIB  # type: ignore[attr-defined]
        with pytest.raises(cannrt.OutOfMemoryError) as full:
            stream.malloc_async(64 * MIB, np.uint8)  # the default pool: the device is too small
        assert full.value.code == 207001 and full.value.total == 16 * MIB
        keep.free()
    finally:
        runtime.close()


def test_the_pyacl_calls_and_their_codes(acl: ModuleType) -> None:
    stream, _ = acl.rt.create_stream()
    pool, ret = acl.rt.mem_pool_create({"location": {"id": 0}, "maxSize": 0})
    assert ret == 0
    assert acl.rt.mem_pool_set_attr(pool, PoolAttr.RELEASE_THRESHOLD, 8 * MIB) == 0
    assert acl.rt.mem_pool_get_attr(pool, PoolAttr.RELEASE_THRESHOLD) == (8 * MIB, 0)
    ptr, ret = acl.rt.mem_pool_malloc_async(1000, pool, stream)
    assert ret == 0
    assert acl.rt.mem_pool_get_attr(pool, PoolAttr.USED_MEM_CURRENT) == (1024, 0)
    assert acl.rt.mem_pool_get_attr(pool, PoolAttr.RESERVED_MEM_CURRENT) == (2 * MIB, 0)
    host = np.arange(250, dtype=np.float32)
    assert acl.rt.memcpy_async(ptr, 1000, host.ctypes.data, 1000, 1, stream) == 0
    assert acl.rt.mem_pool_free_async(ptr, stream) == 0
    assert acl.rt.mem_pool_free_async(ptr, stream) == 107000  # already freed
    assert acl.rt.mem_pool_get_attr(pool, PoolAttr.USED_MEM_HIGH) == (1024, 0)
    assert acl.rt.mem_pool_set_attr(pool, PoolAttr.USED_MEM_HIGH, 0) == 0
    assert acl.rt.mem_pool_get_attr(pool, PoolAttr.USED_MEM_HIGH) == (0, 0)
    assert acl.rt.mem_pool_set_attr(pool, PoolAttr.USED_MEM_HIGH, 5) == 107000
    assert acl.rt.mem_pool_set_attr(pool, 99, 0) == 107000
    assert acl.rt.mem_pool_get_attr(pool, 99) == (0, 107000)
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.mem_pool_trim_to(pool, 0) == 0
    assert acl.rt.mem_pool_get_attr(pool, PoolAttr.RESERVED_MEM_CURRENT) == (0, 0)
    assert acl.rt.mem_pool_destroy(pool) == 0
    assert acl.rt.mem_pool_get_attr(pool, PoolAttr.RESERVED_MEM_CURRENT) == (0, 107017)
    ptr, ret = acl.rt.malloc_async(4096, stream)  # the device's default pool
    assert ret == 0 and acl.rt.free_async(ptr, stream) == 0
    assert acl.rt.malloc_async(0, stream) == (0, 107000)
    assert acl.rt.free_async(12345, stream) == 107000
    with pytest.raises(TypeError):
        acl.rt.malloc_async(1.5, stream)


def test_a_pool_destroyed_with_allocations_outstanding_is_released_after_the_last_free(acl: ModuleType) -> None:
    stream, _ = acl.rt.create_stream()
    free_before = acl.rt.get_mem_info(1)[0]
    pool, _ = acl.rt.mem_pool_create(None)
    ptr, _ = acl.rt.mem_pool_malloc_async(3 * MIB, pool, stream)
    assert acl.rt.mem_pool_destroy(pool) == 0
    assert acl.rt.mem_pool_malloc_async(16, pool, stream) == (0, 107017)
    assert acl.rt.get_mem_info(1)[0] == free_before - 4 * MIB  # still held by the outstanding block
    assert acl.rt.mem_pool_free_async(ptr, stream) == 0
    assert acl.rt.get_mem_info(1)[0] == free_before
