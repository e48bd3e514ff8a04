"""Virtual memory management: reserve a range, back it with physical handles, map and unmap."""

from __future__ import annotations

import numpy as np
import pytest

import cannrt
from cannrt.abi import CopyKind
from cannrt.runtime import memory_ops as mo

MIB = 1 << 20


def _two_handle_range(device: cannrt.Device) -> tuple[int, int, int]:
    ctx = device.context
    va = mo.reserve_address(ctx, 8 * MIB)
    first, second = mo.malloc_physical(ctx, 4 * MIB), mo.malloc_physical(ctx, 4 * MIB)
    mo.map_memory(ctx, va, 4 * MIB, 0, first)
    mo.map_memory(ctx, va + 4 * MIB, 4 * MIB, 0, second)
    return va, first, second


def test_a_range_mapped_from_two_handles_behaves_as_one_buffer(device: cannrt.Device) -> None:
    va, _, _ = _two_handle_range(device)
    data = np.arange(2 * MIB, dtype=np.float32)
    mo.memcpy(device.context, va, 8 * MIB, data.ctypes.data, data.nbytes, CopyKind.HOST_TO_DEVICE)
    back = np.empty_like(data)
    mo.memcpy(device.context, back.ctypes.data, back.nbytes, va, data.nbytes, CopyKind.DEVICE_TO_HOST)
    assert np.array_equal(back, data)


def test_a_kernel_reads_and_writes_across_the_mapping_boundary(device: cannrt.Device) -> None:
    va, _, _ = _two_handle_range(device)
    data = np.linspace(-1, 1, 2 * MIB, dtype=np.float32)
    view = cannrt.DeviceArray(device, va, data.shape, data.dtype, owned=False)
    view.copy_from(data)
    stream = device.stream()
    stream.launch("relu", view, view, block_dim=8)
    assert np.array_equal(view.to_numpy(stream), np.maximum(data, 0))


def test_physical_memory_counts_against_hbm_until_freed(device: cannrt.Device) -> None:
    free_before, total = device.mem_info()
    handle = mo.malloc_physical(device.context, 3 * MIB)
    assert device.mem_info() == (free_before - 4 * MIB, total)  # rounded up to 2 MiB pages
    mo.free_physical(device.context, handle)
    assert device.mem_info() == (free_before, total)


def test_an_unmapped_part_of_a_reservation_is_refused(device: cannrt.Device) -> None:
    va, _, _ = _two_handle_range(device)
    mo.unmap_memory(device.context, va + 4 * MIB)
    host = np.empty(8 * MIB, np.uint8)
    with pytest.raises(cannrt.CannError) as info:
        mo.memcpy(device.context, host.ctypes.data, host.nbytes, va, 8 * MIB, CopyKind.DEVICE_TO_HOST)
    assert info.value.code == cannrt.ErrorCode.RT_PARAM_INVALID
    assert "runs 4194304 bytes past" in str(info.value)


def test_mapping_twice_at_one_address_and_unknown_handles_are_errors(device: cannrt.Device) -> None:
    ctx = device.context
    va, first, _ = _two_handle_range(device)
    with pytest.raises(cannrt.CannError):
        mo.map_memory(ctx, va, 4 * MIB, 0, first)
    with pytest.raises(cannrt.CannError):
        mo.free_physical(ctx, 999_999)
    with pytest.raises(cannrt.CannError):
        mo.unmap_memory(ctx, va + 123)
    with pytest.raises(cannrt.CannError):
        mo.reserve_address(ctx, 0)


def test_a_released_range_can_be_reserved_again_at_the_same_place(device: cannrt.Device) -> None:
    ctx = device.context
    va = mo.reserve_address(ctx, 4 * MIB)
    mo.release_address(ctx, va)
    assert mo.reserve_address(ctx, 4 * MIB, expect=va) == va
    with pytest.raises(cannrt.CannError):
        mo.release_address(ctx, va + 4096)


def test_peer_access_is_possible_between_distinct_devices_only() -> None:
    assert mo.can_access_peer(2, 0, 1) is True
    assert mo.can_access_peer(2, 1, 1) is False
    with pytest.raises(cannrt.CannError) as info:
        mo.can_access_peer(2, 0, 5)
    assert info.value.code == cannrt.ErrorCode.RT_INVALID_DEVICEID
