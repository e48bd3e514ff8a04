"""VMM with CANN's rules: access permissions per mapping, and the misuses each refused."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import cannrt
from cannrt.abi import CopyKind
from cannrt.config import Settings
from cannrt.runtime import memory_ops as mo

MIB = 1 << 20


@pytest.fixture
def device() -> Iterator[cannrt.Device]:
    runtime = cannrt.reset_runtime(Settings(watchdog_s=10.0))
    yield cannrt.Device(0)
    runtime.close()


def _mapped(device: cannrt.Device, size: int = 2 * MIB) -> tuple[int, int]:
    ctx = device.context
    va = mo.reserve_address(ctx, size)
    handle = mo.malloc_physical(ctx, size)
    mo.map_memory(ctx, va, size, 0, handle)
    return va, handle


def test_a_read_only_mapping_reads_and_faults_on_every_write(device: cannrt.Device) -> None:
    ctx = device.context
    va, _ = _mapped(device)
    data = np.arange(1024, dtype=np.float32)
    mo.memcpy(ctx, va, data.nbytes, data.ctypes.data, data.nbytes, CopyKind.HOST_TO_DEVICE)
    mo.set_access(ctx, va, writable=False)
    with pytest.raises(cannrt.CannError) as copy:
        mo.memcpy(ctx, va, data.nbytes, data.ctypes.data, data.nbytes, CopyKind.HOST_TO_DEVICE)
    assert copy.value.code == 107000 and "is read-only" in str(copy.value)
    view = cannrt.DeviceArray(device, va, data.shape, data.dtype, owned=False)
    out = device.empty(1024, np.float32)
    stream = device.stream()
    stream.launch("relu", view, out)  # reading is allowed
    np.testing.assert_array_equal(out.to_numpy(stream), data)
    stream.launch("relu", out, view)  # writing is not
    with pytest.raises(cannrt.CannError) as fault:
        stream.synchronize()
    assert f"invalid write of 4096 bytes at 0x{va:x}: the mapping at 0x{va:x} of {2 * MIB} bytes is read-only" in str(
        fault.value
    )


def test_a_mapping_made_writable_again_takes_writes(device: cannrt.Device) -> None:
    ctx = device.context
    va, _ = _mapped(device)
    mo.set_access(ctx, va, writable=False)
    mo.set_access(ctx, va, writable=True)
    data = np.ones(16, np.uint8)
    mo.memcpy(ctx, va, 16, data.ctypes.data, 16, CopyKind.HOST_TO_DEVICE)
    with pytest.raises(cannrt.CannError):
        mo.set_access(ctx, mo.malloc(ctx, 64), writable=False)  # only map_mem mappings have access rights


def test_allocations_of_malloc_are_not_vmm_objects(device: cannrt.Device) -> None:
    ctx = device.context
    va = mo.malloc(ctx, 4096)
    for call in (lambda: mo.unmap_memory(ctx, va), lambda: mo.release_address(ctx, va)):
        with pytest.raises(cannrt.CannError):
            call()
    data = np.ones(16, np.uint8)
    mo.memcpy(ctx, va, 16, data.ctypes.data, 16, CopyKind.HOST_TO_DEVICE)  # still allocated
    mo.free(ctx, va)


def test_maps_must_be_page_aligned_inside_the_reservation_and_the_handle(device: cannrt.Device) -> None:
    ctx = device.context
    va = mo.reserve_address(ctx, 4 * MIB)
    handle = mo.malloc_physical(ctx, 2 * MIB)
    for args in (
        (va + 4096, 2 * MIB, 0),
        (va, MIB, 0),
        (va, 2 * MIB, 4096),
        (va + 2 * MIB, 4 * MIB, 0),
        (va, 4 * MIB, 0),
    ):
        with pytest.raises(cannrt.CannError) as info:
            mo.map_memory(ctx, args[0], args[1], args[2], handle)
        assert info.value.code == 107000
    mo.map_memory(ctx, va + 2 * MIB, 2 * MIB, 0, handle)
    with pytest.raises(cannrt.CannError):
        mo.map_memory(ctx, va + 2 * MIB, 2 * MIB, 0, handle)  # already mapped there
    with pytest.raises(cannrt.CannError) as unknown:
        mo.map_memory(ctx, va, 2 * MIB, 0, 987654)
    assert unknown.value.code == 107017
    mo.unmap_memory(ctx, va + 2 * MIB)
    mo.free_physical(ctx, handle)
    mo.release_address(ctx, va)


def test_huge1g_physical_memory_takes_1_gib_pages_mapped_at_1_gib_boundaries() -> None:
    import cannrt.acl as acl
    from cannrt.acl._state import STATE

    if STATE.initialized:
        acl.finalize()
    cannrt.reset_runtime(Settings(watchdog_s=10.0))
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    try:
        prop = {"location": {"id": 0}, "memAttr": 10}  # ACL_HBM_MEM_HUGE1G
        assert acl.rt.mem_get_allocation_granularity(prop, 0) == (1 << 30, 0)
        assert acl.rt.malloc_physical(2 * MIB, prop, 0) == (0, 107000)  # not a multiple of 1 GiB
        free_1g = acl.rt.get_mem_info(10)[0]
        handle, ret = acl.rt.malloc_physical(1 << 30, prop, 0)
        assert ret == 0 and acl.rt.get_mem_info(10)[0] == free_1g - (1 << 30)
        va, ret = acl.rt.reserve_mem_address(2 << 30, 1 << 30, 0, 0)
        assert ret == 0
        assert acl.rt.map_mem(va + 2 * MIB, 1 << 30, 0, handle, 0) == 107000  # not 1 GiB aligned
        assert acl.rt.map_mem(va, 1 << 30, 0, handle, 0) == 0
        data = np.arange(256, dtype=np.float32)
        end = va + (1 << 30) - data.nbytes
        assert acl.rt.memcpy(end, data.nbytes, data.ctypes.data, data.nbytes, 1) == 0
        assert acl.rt.unmap_mem(va) == 0 and acl.rt.free_physical(handle) == 0
        assert acl.rt.release_mem_address(va) == 0
        assert acl.rt.get_mem_info(10)[0] == free_1g
    finally:
        acl.finalize()
