"""A 64 GiB device on a small host: HBM is backed by host RAM only where it is touched."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from cannrt import OutOfMemoryError
from cannrt.abi import CopyKind
from cannrt.config import GIB, chip_preset
from cannrt.runtime import memory_ops
from cannrt.runtime.core import Runtime
from cannrt.runtime.memory_ops import MallocPolicy, MemAttr


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def test_sixty_gib_of_one_gib_huge_page_mallocs_fit_a_64_gib_device_without_host_ram(rt: Runtime) -> None:
    ctx = rt.set_device(0)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == (64 * GIB, 64 * GIB)
    rss_before = _rss_bytes()

    blocks = [memory_ops.malloc(ctx, GIB, MallocPolicy.HUGE1G_ONLY) for _ in range(60)]

    # 1 GiB huge-page allocations are not padded: exactly 60 GiB of huge pages are in use
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == (4 * GIB, 64 * GIB)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM_HUGE) == (4 * GIB, 64 * GIB)
    assert len(set(blocks)) == 60 and all(va % 64 == 0 for va in blocks)

    # touch a few bytes at both ends of some blocks and read them back
    for index in (0, 17, 59):
        for offset in (0, GIB - 8):
            data = np.full(8, index + 1, dtype=np.uint8)
            memory_ops.memcpy(ctx, blocks[index] + offset, 8, data.ctypes.data, 8, CopyKind.HOST_TO_DEVICE)
    for index in (0, 17, 59):
        out = np.zeros(8, dtype=np.uint8)
        memory_ops.memcpy(ctx, out.ctypes.data, 8, blocks[index] + GIB - 8, 8, CopyKind.DEVICE_TO_HOST)
        assert out.tolist() == [index + 1] * 8
    untouched = np.ones(8, dtype=np.uint8)
    memory_ops.memcpy(ctx, untouched.ctypes.data, 8, blocks[30] + GIB // 2, 8, CopyKind.DEVICE_TO_HOST)
    assert untouched.tolist() == [0] * 8  # fresh device memory reads as zero

    assert _rss_bytes() - rss_before < 256 << 20  # a few touched pages, not gigabytes

    with pytest.raises(OutOfMemoryError) as info:
        memory_ops.malloc(ctx, 8 * GIB, MallocPolicy.HUGE1G_ONLY)
    assert info.value.code == 207001
    assert (info.value.requested, info.value.free, info.value.total) == (8 * GIB, 4 * GIB, 64 * GIB)

    for va in blocks:
        memory_ops.free(ctx, va)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == (64 * GIB, 64 * GIB)


def test_the_910b4_preset_has_32_gib(make_runtime: Callable[..., Runtime]) -> None:
    rt = make_runtime(chip=chip_preset("Ascend910B4"))
    ctx = rt.set_device(1)
    assert memory_ops.mem_info(ctx, MemAttr.HBM_MEM) == (32 * GIB, 32 * GIB)
