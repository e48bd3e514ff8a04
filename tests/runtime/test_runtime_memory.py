"""Device memory calls: the CANN malloc padding and alignment rules, free, every memcpy kind (sync
and async) with its checks, memset on device and pinned host memory, get_mem_info."""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

from cannrt import CannError, ErrorCode, OutOfMemoryError
from cannrt.abi import CopyKind
from cannrt.config import GIB, ChipSpec
from cannrt.runtime import memory_ops
from cannrt.runtime.core import Runtime
from cannrt.runtime.memory_ops import MallocPolicy, MemAttr

if TYPE_CHECKING:
    from cannrt.runtime.context import Context
    from cannrt.runtime.stream import Stream
    from conftest import Npu

MIB = 1 << 20
SIZES = [1, 31, 32, 33, 63, 64, 100, 4064, 4065, 4096, MIB - 32, MIB + 1, 3 * MIB + 7]


def _allocated_bytes(npu: Npu, va: int) -> int:
    extent = npu.driver.mem_extent(va)
    assert extent is not None and extent[2] == va
    return int(extent[3])


def _copy_fits(ctx: Context, va: int, count: int) -> bool:
    """Whether a D2D copy of count bytes starting at va is accepted (the allocation's real size)."""
    try:
        memory_ops.memcpy(ctx, va, count, va, count, CopyKind.DEVICE_TO_DEVICE)
    except CannError as exc:
        assert exc.code == ErrorCode.RT_PARAM_INVALID
        return False
    return True


# -- malloc rules ----------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES)
def test_malloc_pads_32_bytes_then_aligns_to_32_and_starts_64_byte_aligned(npu: Npu, size: int) -> None:
    ctx = npu.ctx()
    va = memory_ops.malloc(ctx, size)
    expected = -(-(size + 32) // 32) * 32
    assert va % 64 == 0
    assert _allocated_bytes(npu, va) == expected
    assert _copy_fits(ctx, va, expected) and not _copy_fits(ctx, va, expected + 1)


@pytest.mark.parametrize("size", SIZES)
def test_malloc_align32_rounds_to_32_without_padding(npu: Npu, size: int) -> None:
    ctx = npu.ctx()
    va = memory_ops.malloc(ctx, size, pad=False)
    assert va % 64 == 0
    assert _allocated_bytes(npu, va) == -(-size // 32) * 32


@pytest.mark.parametrize("policy", [MallocPolicy.HUGE1G_ONLY, MallocPolicy.HUGE1G_ONLY_P2P])
def test_one_gib_huge_page_allocations_are_not_padded(npu: Npu, policy: MallocPolicy) -> None:
    va = memory_ops.malloc(npu.ctx(), GIB, policy)
    assert _allocated_bytes(npu, va) == GIB


@pytest.mark.parametrize(
    ("policy", "size", "huge", "normal"),
    [
        (MallocPolicy.HUGE_FIRST, 100, 0, 4096),  # small sizes take normal pages
        (MallocPolicy.HUGE_FIRST, MIB - 32, 0, MIB),  # padded to exactly 1 MiB: still normal
        (MallocPolicy.HUGE_FIRST, 3 * MIB, 4 * MIB, 0),  # larger: 2 MiB huge pages
        (MallocPolicy.HUGE_ONLY, 100, 2 * MIB, 0),
        (MallocPolicy.NORMAL_ONLY, 3 * MIB, 0, 3 * MIB + 4096),
    ],
)
def test_malloc_policies_choose_the_page_size(
    npu: Npu, policy: MallocPolicy, size: int, huge: int, normal: int
) -> None:
    ctx = npu.ctx()
    free_before, total = memory_ops.mem_info(ctx, MemAttr.HBM_MEM)
    memory_ops.malloc(ctx, size, policy)
    _, _, used_huge, used_normal = npu.driver.mem_info(0)
    assert (used_huge, used_normal) == (huge, normal)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == (free_before - huge - normal, total)


def test_huge_first_falls_back_to_normal_pages(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime(chip=ChipSpec(hbm_bytes=5 * MIB))
    ctx = rt.set_device(0)
    memory_ops.malloc(ctx, MIB + 64 * 1024, MallocPolicy.NORMAL_ONLY)  # leaves < 4 MiB: no two huge pages fit
    memory_ops.malloc(ctx, 3 * MIB, MallocPolicy.HUGE_FIRST)
    assert rt.driver.mem_info(0)[2:] == (0, MIB + 64 * 1024 + 4096 + 3 * MIB + 4096)


@pytest.mark.parametrize(("size", "policy", "code"), [(0, 0, 107000), (-1, 0, 107000), (64, 8, 107018)])
def test_bad_malloc_arguments(npu: Npu, size: int, policy: int, code: int) -> None:
    with pytest.raises(CannError) as info:
        memory_ops.malloc(npu.ctx(), size, policy)
    assert info.value.code == code


def test_running_out_of_hbm_says_how_much_was_asked_and_is_free(npu: Npu) -> None:
    ctx = npu.ctx()
    memory_ops.malloc(ctx, 60 * GIB, MallocPolicy.HUGE1G_ONLY)
    with pytest.raises(OutOfMemoryError) as info:
        memory_ops.malloc(ctx, 5 * GIB)
    error = info.value
    assert error.code == 207001 == ErrorCode.RT_MEMORY_ALLOCATION
    assert (error.requested, error.free, error.total) == (5 * GIB + 32, 4 * GIB, 64 * GIB)
    assert f"requested {5 * GIB + 32} bytes, {4 * GIB} free of {64 * GIB}" in str(error)


def test_free_returns_the_memory(npu: Npu) -> None:
    ctx = npu.ctx()
    start = memory_ops.mem_info(ctx, MemAttr.HBM_MEM)
    blocks = [memory_ops.malloc(ctx, size) for size in SIZES]
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM)[0] < start[0]
    for va in blocks:
        memory_ops.free(ctx, va)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == start


def test_freeing_what_malloc_did_not_return_is_refused(npu: Npu) -> None:
    ctx = npu.ctx()
    va = memory_ops.malloc(ctx, 256)
    for bad in (0, 0x1234, va + 64):
        with pytest.raises(CannError) as info:
            memory_ops.free(ctx, bad)
        assert info.value.code == ErrorCode.RT_PARAM_INVALID
    memory_ops.free(ctx, va)
    with pytest.raises(CannError) as info:
        memory_ops.free(ctx, va)  # double free
    assert info.value.code == ErrorCode.RT_PARAM_INVALID


def test_mem_info_for_hbm_and_host_memory(npu: Npu) -> None:
    ctx = npu.ctx()
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == (64 * GIB, 64 * GIB)
    free, total = memory_ops.mem_info(ctx, MemAttr.DDR_MEM)
    assert 0 < free <= total
    with pytest.raises(CannError) as info:
        memory_ops.mem_info(ctx, 18)
    assert info.value.code == ErrorCode.RT_PARAM_INVALID


def test_malloc_host_returns_zeroed_page_aligned_memory(npu: Npu) -> None:
    address = npu.rt.host.allocate(10_000)
    assert address % mmap.PAGESIZE == 0
    assert ctypes.string_at(address, 10_000) == bytes(10_000)
    assert npu.rt.host.contains(address, 10_000) and not npu.rt.host.contains(address, 10_001)
    assert npu.rt.host.free(address) is True
    assert npu.rt.host.free(address) is False


# -- memcpy -------------------------------------------------------------------------------------
class Buffers:
    """A source pattern in host and device memory and zeroed destinations of both kinds."""

    def __init__(self, npu: Npu, nbytes: int = 4096) -> None:
        self.nbytes = nbytes
        self.pattern = (np.arange(nbytes) * 7 % 251).astype(np.uint8)
        self.host_src = self.pattern.copy()
        self.host_dst = np.zeros(nbytes, dtype=np.uint8)
        self.dev_src = npu.upload(self.pattern)
        self.dev_dst = npu.malloc(nbytes)

    def pointers(self, kind: CopyKind) -> tuple[int, int]:
        """(dst, src) for a copy kind."""
        host_src, host_dst = self.host_src.ctypes.data, self.host_dst.ctypes.data
        return {
            CopyKind.HOST_TO_HOST: (host_dst, host_src),
            CopyKind.HOST_TO_DEVICE: (self.dev_dst, host_src),
            CopyKind.DEVICE_TO_HOST: (host_dst, self.dev_src),
            CopyKind.DEVICE_TO_DEVICE: (self.dev_dst, self.dev_src),
        }[kind]

    def landed(self, npu: Npu, kind: CopyKind) -> bytes:
        if kind in (CopyKind.HOST_TO_DEVICE, CopyKind.DEVICE_TO_DEVICE):
            return npu.read(self.dev_dst, self.nbytes)
        return self.host_dst.tobytes()


KINDS = [CopyKind.HOST_TO_HOST, CopyKind.HOST_TO_DEVICE, CopyKind.DEVICE_TO_HOST, CopyKind.DEVICE_TO_DEVICE]


@pytest.mark.parametrize("declared_default", [False, True], ids=["explicit", "DEFAULT"])
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_memcpy_of_every_kind(npu: Npu, kind: CopyKind, declared_default: bool) -> None:
    bufs = Buffers(npu)
    dst, src = bufs.pointers(kind)
    memory_ops.memcpy(npu.ctx(), dst, bufs.nbytes, src, bufs.nbytes, CopyKind.DEFAULT if declared_default else kind)
    assert bufs.landed(npu, kind) == bufs.pattern.tobytes()


@pytest.mark.parametrize("declared_default", [False, True], ids=["explicit", "DEFAULT"])
@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_memcpy_async_of_every_kind(npu: Npu, kind: CopyKind, declared_default: bool) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    bufs = Buffers(npu)
    dst, src = bufs.pointers(kind)
    declared = CopyKind.DEFAULT if declared_default else kind
    memory_ops.memcpy_async(ctx, dst, bufs.nbytes, src, bufs.nbytes, declared, stream)
    assert stream.tail == 1
    stream.synchronize(timeout_ms=100)
    assert bufs.landed(npu, kind) == bufs.pattern.tobytes()


def test_a_partial_copy_into_a_larger_destination(npu: Npu) -> None:
    ctx = npu.ctx()
    bufs = Buffers(npu)
    memory_ops.memcpy(ctx, bufs.dev_dst + 100, bufs.nbytes - 100, bufs.dev_src, 1000, CopyKind.DEVICE_TO_DEVICE)
    landed = npu.read(bufs.dev_dst, bufs.nbytes)
    assert landed[100:1100] == bufs.pattern[:1000].tobytes()
    assert landed[:100] == bytes(100) and landed[1100:] == bytes(bufs.nbytes - 1100)


def _copy_calls(ctx: Context, stream: Stream) -> list[tuple[str, object]]:
    def sync(dst: int, dst_max: int, src: int, count: int, kind: int) -> None:
        memory_ops.memcpy(ctx, dst, dst_max, src, count, kind)

    def async_(dst: int, dst_max: int, src: int, count: int, kind: int) -> None:
        memory_ops.memcpy_async(ctx, dst, dst_max, src, count, kind, stream)

    return [("sync", sync), ("async", async_)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bad_copies_raise_107000_and_enqueue_nothing(npu: Npu, mode: str) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    copy = dict(_copy_calls(ctx, stream))[mode]
    bufs = Buffers(npu)
    host, dev = bufs.host_src.ctypes.data, bufs.dev_src
    n = bufs.nbytes
    h2d, d2d = CopyKind.HOST_TO_DEVICE, CopyKind.DEVICE_TO_DEVICE
    cases = {
        "count over dst_max": (bufs.dev_dst, 100, host, 101, h2d),
        "null dst": (0, n, host, n, h2d),
        "null src": (bufs.dev_dst, n, 0, n, h2d),
        "unknown kind": (bufs.dev_dst, n, dev, n, 7),
        "past the end of the source allocation": (bufs.dev_dst, 2 * n, dev, n + 64, d2d),
        "negative count": (bufs.dev_dst, n, dev, -1, d2d),
    }
    for name, args in cases.items():
        with pytest.raises(CannError) as info:
            copy(*args)
        assert info.value.code == ErrorCode.RT_PARAM_INVALID, name
    assert stream.tail == 0
    assert npu.read(bufs.dev_dst, n) == bytes(n)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", list(CopyKind), ids=[k.name for k in CopyKind])
def test_the_addresses_decide_a_copys_direction_whatever_its_kind(npu: Npu, mode: str, kind: CopyKind) -> None:
    """aclrtMemcpy on Atlas A2: `kind` is reserved, its value ignored (REFERENCE.md section 5)."""
    ctx = npu.ctx()
    stream = ctx.create_stream()
    copy = dict(_copy_calls(ctx, stream))[mode]
    bufs = Buffers(npu)
    n = bufs.nbytes
    copy(bufs.dev_src, n, bufs.host_src.ctypes.data, n, kind)  # host -> device
    copy(bufs.dev_dst, n, bufs.dev_src, n, kind)  # device -> device
    copy(bufs.host_dst.ctypes.data, n, bufs.dev_dst, n, kind)  # device -> host
    stream.synchronize()
    assert bufs.host_dst.tobytes() == bufs.host_src.tobytes()


def test_count_over_dst_max_names_both_numbers(npu: Npu) -> None:
    bufs = Buffers(npu)
    with pytest.raises(CannError) as info:
        memory_ops.memcpy(npu.ctx(), bufs.dev_dst, 100, bufs.host_src.ctypes.data, 101, CopyKind.HOST_TO_DEVICE)
    assert (info.value.count, info.value.dst_max) == (101, 100)
    assert "count 101 exceeds dst_max 100" in str(info.value)


def test_a_copy_of_zero_bytes_is_accepted(npu: Npu) -> None:
    bufs = Buffers(npu)
    memory_ops.memcpy(npu.ctx(), bufs.dev_dst, 0, bufs.host_src.ctypes.data, 0, CopyKind.HOST_TO_DEVICE)
    assert npu.read(bufs.dev_dst, 16) == bytes(16)


# -- memset -------------------------------------------------------------------------------------
def test_memset_of_device_memory_sync_and_async(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    va = npu.malloc(4096)
    memory_ops.memset(ctx, va, 4096, 0xAB, 4096)
    assert npu.read(va, 4096) == b"\xab" * 4096
    memory_ops.memset(ctx, va + 1000, 3096, 0x11, 24, stream)
    stream.synchronize(timeout_ms=100)
    assert npu.read(va, 4096) == b"\xab" * 1000 + b"\x11" * 24 + b"\xab" * 3072


def test_memset_of_pinned_host_memory_sync_and_async(npu: Npu) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream()
    host = npu.rt.host.allocate(8192)
    memory_ops.memset(ctx, host, 8192, 0x5A, 8192)
    assert ctypes.string_at(host, 8192) == b"\x5a" * 8192
    memory_ops.memset(ctx, host, 8192, 0x01, 100, stream)
    stream.synchronize(timeout_ms=100)
    assert ctypes.string_at(host, 8192) == b"\x01" * 100 + b"\x5a" * 8092


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bad_memsets_raise_107000(npu: Npu, mode: str) -> None:
    ctx = npu.ctx()
    stream = ctx.create_stream() if mode == "async" else None
    va = npu.malloc(64)  # 96 bytes with padding
    for dst, dst_max, count in ((va, 10, 11), (0, 64, 64), (va, 200, 200)):
        with pytest.raises(CannError) as info:
            memory_ops.memset(ctx, dst, dst_max, 1, count, stream)
        assert info.value.code == ErrorCode.RT_PARAM_INVALID
    assert stream is None or stream.tail == 0
    assert npu.read(va, 64) == bytes(64)


def test_a_launch_that_finds_no_memory_for_its_arguments_is_207001_and_enqueues_nothing(
    make_runtime: Callable[..., Runtime],
) -> None:
    rt = make_runtime(chip=ChipSpec(hbm_bytes=8 * MIB))
    ctx = rt.set_device(0)
    everything = memory_ops.malloc(ctx, 8 * MIB - 64, MallocPolicy.NORMAL_ONLY)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == (0, 8 * MIB)
    stream = ctx.create_stream()
    with pytest.raises(CannError) as info:
        rt.launch(stream, "spin", 1, [10])  # the stream's argument area does not fit
    assert info.value.code == ErrorCode.RT_MEMORY_ALLOCATION
    assert stream.tail == 0
    memory_ops.free(ctx, everything)
    rt.launch(stream, "spin", 1, [10])
    stream.synchronize(timeout_ms=10)
