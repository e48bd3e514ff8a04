"""The device-memory defects of issue 10, (a) to (i), each reproduced as the issue tells it."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import cannrt
from cannrt.config import GIB, ChipSpec, Settings
from cannrt.runtime import memory_ops
from cannrt.runtime.memory_ops import MallocPolicy, MemAttr

MIB = 1 << 20
H2D, D2H = 1, 2
HUGE = {"location": {"id": 0}, "memAttr": 4}  # ACL_HBM_MEM_HUGE


def _reserve_map(acl: ModuleType, size: int = 4 * MIB) -> tuple[int, int]:
    va, ret = acl.rt.reserve_mem_address(size, 0, 0, 0)
    assert ret == 0
    handle, ret = acl.rt.malloc_physical(size, HUGE, 0)
    assert ret == 0
    assert acl.rt.map_mem(va, size, 0, handle, 0) == 0
    return va, handle


def test_a_map_outside_any_reservation_is_refused_and_a_later_reserve_and_map_works(acl: ModuleType) -> None:
    va, handle = _reserve_map(acl)
    assert acl.rt.unmap_mem(va) == 0
    assert acl.rt.release_mem_address(va) == 0
    stray = va + 64 * MIB  # no reservation covers it
    assert acl.rt.map_mem(stray, 4 * MIB, 0, handle, 0) == 107000
    data = np.ones(1024, np.uint8)
    assert acl.rt.memcpy(stray, 1024, data.ctypes.data, 1024, H2D) != 0
    again, ret = acl.rt.reserve_mem_address(4 * MIB, 0, stray, 0)
    assert ret == 0
    assert acl.rt.map_mem(again, 4 * MIB, 0, handle, 0) == 0


def test_b_freeing_a_mapped_physical_handle_is_refused_and_the_data_stays(acl: ModuleType) -> None:
    va, handle = _reserve_map(acl)
    data = np.arange(1024, dtype=np.float32)
    assert acl.rt.memcpy(va, data.nbytes, data.ctypes.data, data.nbytes, H2D) == 0
    free_before, _, _ = acl.rt.get_mem_info(1)
    assert acl.rt.free_physical(handle) == 107000
    assert acl.rt.get_mem_info(1)[0] == free_before  # HBM does not count it free
    back = np.zeros_like(data)
    assert acl.rt.memcpy(back.ctypes.data, back.nbytes, va, back.nbytes, D2H) == 0
    np.testing.assert_array_equal(back, data)
    assert acl.rt.unmap_mem(va) == 0
    assert acl.rt.free_physical(handle) == 0
    assert acl.rt.get_mem_info(1)[0] == free_before + 4 * MIB


def test_c_releasing_a_mapped_range_is_refused_and_its_va_is_not_handed_out_again(acl: ModuleType) -> None:
    va, handle = _reserve_map(acl)
    assert acl.rt.release_mem_address(va) == 107000
    other, ret = acl.rt.reserve_mem_address(4 * MIB, 0, va, 0)  # asking for the same VA
    assert ret == 0 and other != va
    data = np.full(16, 7, np.uint8)
    assert acl.rt.memcpy(va, 16, data.ctypes.data, 16, H2D) == 0  # the mapping survived
    assert acl.rt.unmap_mem(va) == 0
    assert acl.rt.release_mem_address(va) == 0
    assert acl.rt.free_physical(handle) == 0


def test_d_unmap_waits_for_a_queued_copy_and_the_next_sync_succeeds(acl: ModuleType) -> None:
    size = 64 * MIB
    va, handle = _reserve_map(acl, size)
    pattern = np.arange(size // 4, dtype=np.uint32)
    assert acl.rt.memcpy(va, size, pattern.ctypes.data, size, H2D) == 0
    stream, _ = acl.rt.create_stream()
    host = np.zeros(size // 4, np.uint32)
    assert acl.rt.memcpy_async(host.ctypes.data, size, va, size, D2H, stream) == 0  # still queued
    assert acl.rt.unmap_mem(va) == 0
    assert acl.rt.free_physical(handle) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    np.testing.assert_array_equal(host, pattern)  # the copy ran before the unmap took effect
    assert acl.rt.release_mem_address(va) == 0


def test_e_pool_segments_take_from_hbm_exactly_what_the_stats_say(device: cannrt.Device) -> None:
    free_before = device.mem_info()[0]
    small = device.empty(512, np.uint8)
    assert device.memory_stats()["reserved_bytes.all.current"] == 2 * MIB
    assert free_before - device.mem_info()[0] == 2 * MIB
    large = device.empty(8 * MIB, np.uint8)  # a 20 MiB segment
    assert device.memory_stats()["reserved_bytes.all.current"] == 22 * MIB
    assert free_before - device.mem_info()[0] == 22 * MIB
    small.free()
    large.free()


def _fault(device: cannrt.Device) -> None:
    stream = device.stream()
    good = device.empty(16, np.float32)
    wild = cannrt.DeviceArray(device, good.address + (64 << 20), (16,), np.dtype(np.float32), owned=False)
    stream.launch("relu", wild, good)
    with pytest.raises(cannrt.CannError):
        stream.synchronize()


def test_f_after_a_device_fault_the_pool_returns_the_sticky_error_for_every_size(device: cannrt.Device) -> None:
    cached = device.empty(4096, np.uint8)
    cached.free()
    _fault(device)
    sticky = device.context.sticky_code
    assert sticky != 0
    for nbytes in (4096, 64 * MIB):  # a cached size and a new one
        with pytest.raises(cannrt.CannError) as info:
            device.empty(nbytes, np.uint8)
        assert info.value.code == sticky and not isinstance(info.value, cannrt.OutOfMemoryError)
    assert device.memory_stats()["num_ooms"] == 0


def test_g_out_of_memory_names_the_segment_that_failed_and_the_pool_numbers() -> None:
    runtime = cannrt.reset_runtime(Settings(chip=ChipSpec(hbm_bytes=30 * MIB), watchdog_s=10.0))
    try:
        device = cannrt.Device(0)
        keep = device.empty(12 * MIB, np.uint8)  # a 12 MiB segment (over 10 MiB: its own size)
        with pytest.raises(cannrt.OutOfMemoryError) as info:
            device.empty(8 * MIB, np.uint8)  # needs a 20 MiB segment
        error = info.value
        assert (error.requested, error.segment) == (8 * MIB, 20 * MIB)  # type: ignore[attr-defined]
        assert error.allocated == 12 * MIB and error.reserved == 12 * MIB  # type: ignore[attr-defined]
        assert error.total == 30 * MIB and error.largest_free == 0  # type: ignore[attr-defined]
        assert "new segment of 20971520 bytes" in str(error)
        keep.free()
    finally:
        runtime.close()


def test_h_a_freed_address_is_not_handed_out_at_once_and_a_use_after_free_faults_precisely(
    device: cannrt.Device,
) -> None:
    ctx = device.context
    first = memory_ops.malloc(ctx, 4096, pad=False)
    memory_ops.free(ctx, first)
    second = memory_ops.malloc(ctx, 4096, pad=False)
    assert second != first
    host = np.zeros(1024, np.float32)
    with pytest.raises(cannrt.CannError) as info:
        memory_ops.memcpy(ctx, host.ctypes.data, 4096, first, 4096, D2H)
    assert f"inside a freed 4096-byte allocation at 0x{first:x}" in str(info.value)
    stale = cannrt.DeviceArray(device, first, (1024,), np.dtype(np.float32), owned=False)
    out = cannrt.DeviceArray(device, second, (1024,), np.dtype(np.float32), owned=False)
    stream = device.stream()
    stream.launch("relu", stale, out)
    with pytest.raises(cannrt.CannError) as fault:
        stream.synchronize()
    assert f"0 bytes inside a freed 4096-byte allocation at 0x{first:x}" in str(fault.value)


def test_i_huge1g_policies_take_1_gib_pages_and_huge_and_normal_free_differ(device: cannrt.Device) -> None:
    ctx = device.context
    free0, total = memory_ops.mem_info(ctx, MemAttr.HBM_MEM)
    va = memory_ops.malloc(ctx, 100 * MIB, MallocPolicy.HUGE1G_ONLY)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM)[0] == free0 - GIB  # a whole 1 GiB page
    memory_ops.free(ctx, va)
    normal = memory_ops.malloc(ctx, 4096, MallocPolicy.NORMAL_ONLY)
    free_normal = memory_ops.mem_info(ctx, MemAttr.HBM_MEM_NORMAL)[0]
    free_huge = memory_ops.mem_info(ctx, MemAttr.HBM_MEM_HUGE)[0]
    assert free_huge % (2 * MIB) == 0 and free_huge < free_normal  # the 4 KiB pages hold a whole frame
    assert free_normal - free_huge < 2 * MIB
    memory_ops.free(ctx, normal)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == (free0, total)
