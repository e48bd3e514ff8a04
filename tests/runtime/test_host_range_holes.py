"""A host range with an unmapped hole anywhere in it is refused before a copy touches it (issue 13,
item 4): every page is checked, not a sample of them."""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Iterator

import pytest

import cannrt
from cannrt.abi import CopyKind
from cannrt.runtime import host_check
from cannrt.runtime import memory_ops as mo
from cannrt.runtime.context import Context

PAGE = mmap.PAGESIZE
PAGES = 200

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)


@pytest.fixture
def holed() -> Iterator[int]:
    """200 anonymous read-write pages with pages 100..109 unmapped; yields the base address."""
    prot, flags = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    base = _libc.mmap(None, PAGES * PAGE, prot, flags, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value)
    assert _libc.munmap(base + 100 * PAGE, 10 * PAGE) == 0
    yield base
    _libc.munmap(base, 100 * PAGE)
    _libc.munmap(base + 110 * PAGE, (PAGES - 110) * PAGE)


@pytest.fixture
def ctx() -> Iterator[Context]:
    runtime = cannrt.reset_runtime()
    yield runtime.set_device(0)
    runtime.close()


@pytest.mark.parametrize("offset_pages", [0, 50, 99])
def test_a_range_over_the_hole_is_neither_readable_nor_writable(holed: int, offset_pages: int) -> None:
    start = holed + offset_pages * PAGE
    count = (PAGES - offset_pages) * PAGE
    assert not host_check.readable(start, count)
    assert not host_check.writable(start, count)
    assert host_check.readable(holed, 100 * PAGE) and host_check.writable(holed, 100 * PAGE)
    assert host_check.readable(holed + 110 * PAGE, 90 * PAGE)


def test_copies_over_the_hole_are_refused_in_both_directions_sync_and_async(ctx: Context, holed: int) -> None:
    nbytes = PAGES * PAGE
    device = mo.malloc(ctx, nbytes)
    stream = ctx.create_stream()
    calls = [
        lambda: mo.memcpy(ctx, device, nbytes, holed, nbytes, CopyKind.HOST_TO_DEVICE),
        lambda: mo.memcpy_async(ctx, device, nbytes, holed, nbytes, CopyKind.HOST_TO_DEVICE, stream),
        lambda: mo.memcpy(ctx, holed, nbytes, device, nbytes, CopyKind.DEVICE_TO_HOST),
        lambda: mo.memcpy_async(ctx, holed, nbytes, device, nbytes, CopyKind.DEVICE_TO_HOST, stream),
    ]
    for call in calls:
        with pytest.raises(cannrt.CannError) as info:
            call()
        assert info.value.code == cannrt.ErrorCode.RT_PARAM_INVALID
    stream.synchronize()
    mo.memcpy(ctx, device, 100 * PAGE, holed, 100 * PAGE, CopyKind.HOST_TO_DEVICE)  # the mapped part copies
