"""Bad host pointers give RT_PARAM_INVALID and leave the runtime usable: never a crash."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np
import pytest

import cannrt
from cannrt.abi import CopyKind
from cannrt.runtime import host_check
from cannrt.runtime import memory_ops as mo

UNMAPPED = (0x12345678, 0x7FFF_0000_0000, (1 << 47) - 4096)


@pytest.fixture
def ctx() -> Iterator[object]:
    runtime = cannrt.reset_runtime()
    yield runtime.set_device(0)
    runtime.close()


@pytest.mark.parametrize("address", UNMAPPED, ids=hex)
def test_copies_from_or_to_unmapped_host_memory_are_refused(ctx, address: int) -> None:  # type: ignore[no-untyped-def]
    device = mo.malloc(ctx, 4096)
    stream = ctx.create_stream()
    calls = [
        lambda: mo.memcpy(ctx, device, 4096, address, 4096, CopyKind.HOST_TO_DEVICE),
        lambda: mo.memcpy(ctx, address, 4096, device, 4096, CopyKind.DEVICE_TO_HOST),
        lambda: mo.memcpy_async(ctx, address, 4096, device, 4096, CopyKind.DEVICE_TO_HOST, stream),
        lambda: mo.memset(ctx, address, 4096, 0, 4096),
    ]
    for call in calls:
        with pytest.raises(cannrt.CannError) as info:
            call()
        assert info.value.code == cannrt.ErrorCode.RT_PARAM_INVALID
    host = np.arange(1024, dtype=np.float32)
    mo.memcpy(ctx, device, 4096, host.ctypes.data, 4096, CopyKind.HOST_TO_DEVICE)  # still usable
    back = np.empty_like(host)
    mo.memcpy(ctx, back.ctypes.data, 4096, device, 4096, CopyKind.DEVICE_TO_HOST)
    assert np.array_equal(back, host)


def test_read_only_host_memory_is_no_copy_destination(ctx) -> None:  # type: ignore[no-untyped-def]
    code = ctypes.cast(ctypes.pythonapi.Py_Initialize, ctypes.c_void_p).value
    assert code is not None and host_check.readable(code, 64) and not host_check.writable(code, 64)
    device = mo.malloc(ctx, 64)
    with pytest.raises(cannrt.CannError) as info:
        mo.memcpy(ctx, code, 64, device, 64, CopyKind.DEVICE_TO_HOST)
    assert "is not writable memory" in str(info.value)


def test_a_range_running_into_an_unmapped_page_is_refused() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = 4096
    prot_rw, private_anonymous = 0x3, 0x22
    base = libc.mmap(None, 3 * page, prot_rw, private_anonymous, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value)
    try:
        assert libc.munmap(base + 2 * page, page) == 0  # a hole after two good pages
        assert host_check.writable(base, 2 * page)
        assert not host_check.readable(base, 3 * page)
        assert not host_check.writable(base + page, 2 * page)
    finally:
        libc.munmap(base, 2 * page)


def test_bytes_objects_from_bytes_to_ptr_style_addresses_stay_valid_destinations() -> None:
    data = bytearray(256)
    address = ctypes.addressof((ctypes.c_char * 256).from_buffer(data))
    assert host_check.readable(address, 256) and host_check.writable(address, 256)
