"""What a user sees of device memory: PyTorch's 122 memory_stats keys, the pool limit, the memory
timeline (and its counter track in the profiler's trace) and cannrt.memory.summary()."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import cannrt
from cannrt.api import pools
from cannrt.memory.caching import CachingAllocator

MIB = 1 << 20
# torch.cuda.memory_stats() keys (PyTorch 2.x), spelled out rather than generated
TORCH_KINDS = (
    "active",
    "active_bytes",
    "allocated_bytes",
    "allocation",
    "inactive_split",
    "inactive_split_bytes",
    "requested_bytes",
    "reserved_bytes",
    "segment",
)
STATS = ("current", "peak", "allocated", "freed")
TORCH_KEYS = {
    *(f"{k}.{p}.{s}" for k in TORCH_KINDS for p in ("all", "large_pool", "small_pool") for s in STATS),
    *(f"{k}.{s}" for k in ("oversize_allocations", "oversize_segments") for s in STATS),
    "num_alloc_retries",
    "num_ooms",
    "num_sync_all_streams",
    "num_device_alloc",
    "num_device_free",
    "max_split_size",
}  # fmt: skip


def test_memory_stats_has_exactly_pytorchs_122_keys(device: cannrt.Device) -> None:
    stats = device.memory_stats()
    assert len(TORCH_KEYS) == 122
    assert set(stats) == TORCH_KEYS
    assert stats["max_split_size"] == -1


def test_the_counts_mean_what_pytorch_means(device: cannrt.Device) -> None:
    a = device.empty(1000, np.uint8)  # 1024 bytes of a 2 MiB small segment
    b = device.empty(3000, np.uint8)
    a.free()
    stats = device.memory_stats()
    assert stats["requested_bytes.small_pool.current"] == 3000
    assert stats["allocated_bytes.small_pool.current"] == 3072
    assert stats["allocation.all.current"] == 1 and stats["allocation.all.allocated"] == 2
    assert stats["active.all.current"] == 1
    assert stats["inactive_split.small_pool.current"] == 2  # a's hole and the tail of the segment
    assert stats["inactive_split_bytes.small_pool.current"] == 2 * MIB - 3072
    assert stats["num_device_alloc"] == 1 and stats["num_device_free"] == 0
    b.free()
    device.empty_cache()
    stats = device.memory_stats()
    assert stats["num_device_free"] == 1 and stats["num_sync_all_streams"] == 1
    assert stats["reserved_bytes.all.current"] == 0 and stats["inactive_split.all.current"] == 0


def test_oversize_requests_follow_max_split_size(device: cannrt.Device) -> None:
    pool = pools.pool_of(device.context)
    pool.max_split_size = 8 * MIB
    big = device.empty(9 * MIB, np.uint8)  # oversize: its own 10 MiB segment, never split
    stats = device.memory_stats()
    assert stats["oversize_allocations.current"] == 1 and stats["oversize_segments.current"] == 1
    assert stats["max_split_size"] == 8 * MIB
    big.free()
    small = device.empty(2 * MIB, np.uint8)  # must not split the cached oversize block
    assert small.address != big.address
    assert device.memory_stats()["oversize_allocations.current"] == 0


def test_a_pool_limit_as_a_fraction_or_bytes_turns_growth_into_out_of_memory(device: cannrt.Device) -> None:
    total = device.mem_info()[1]
    assert device.set_memory_limit(0.5) == total // 2
    assert device.set_memory_limit(30 * MIB) == 30 * MIB
    keep = device.empty(12 * MIB, np.uint8)
    with pytest.raises(cannrt.OutOfMemoryError) as info:
        device.empty(20 * MIB, np.uint8)
    error = info.value
    assert error.limit == 30 * MIB and error.reserved == 12 * MIB  # type: ignore[attr-defined]
    assert "limit 31457280" in str(error)
    for bad in (0, -5, 1.5, 0.0, "x"):
        with pytest.raises(cannrt.CannError) as refused:
            device.set_memory_limit(bad)  # type: ignore[arg-type]
        assert refused.value.code == 107000
    keep.free()


def test_the_timeline_keeps_every_allocation_and_free_with_its_numbers(device: cannrt.Device) -> None:
    cannrt.memory.record_history(call_sites=True)
    stream = device.stream()
    with stream:
        a = device.empty(256, np.float32)
    a.free()
    b = stream.malloc_async(4096, np.uint8)
    b.free()
    events = cannrt.memory.history()
    actions = [(e.action, e.pool) for e in events]
    assert ("segment_alloc", "caching") in actions and ("block_alloc", "caching") in actions
    block = next(e for e in events if e.action == "block_alloc" and e.pool == "caching")
    assert (block.address, block.delta, block.stream) == (a.address, 1024, stream._rt.stream_id)
    assert block.site.startswith("test_memory_observability.py:")
    ordered = [e for e in events if e.pool.startswith("stream_ordered")]
    assert [e.action for e in ordered] == ["segment_alloc", "block_alloc", "block_free"]
    last = events[-1]
    assert last.allocated == 0 and last.reserved == 4 * MIB  # two 2 MiB segments still cached
    times = [e.time_ns for e in events]
    assert times == sorted(times)


def test_the_profiler_trace_draws_memory_as_a_counter_track(device: cannrt.Device, tmp_path: Path) -> None:
    stream = device.stream()
    with cannrt.profile() as prof:
        x = device.array(np.ones(1024, np.float32))
        stream.launch("relu", x, x)
        stream.synchronize()
        x.free()
    counters = [e for e in prof.trace()["traceEvents"] if e.get("name") == "HBM memory (bytes)"]
    assert counters and all(e["ph"] == "C" for e in counters)
    assert [e["args"]["allocated"] for e in counters][-2:] == [4096, 0]


def test_summary_prints_a_torch_style_table(device: cannrt.Device) -> None:
    keep = device.empty(3 * MIB, np.uint8)
    out = io.StringIO()
    text = cannrt.memory.summary(device, file=out)
    assert out.getvalue() == text
    assert "cannrt NPU memory summary, device ID 0" in text
    assert "| Allocated memory      |   3.00 MiB |" in text
    assert "| NPU reserved memory   |  20.00 MiB |" in text
    assert "from small pool" in text and "Oversize NPU segments" in text
    assert "from small pool" not in cannrt.memory.summary(0, abbreviated=True, file=None)
    with pytest.raises(cannrt.CannError):
        cannrt.memory.summary("gpu0", file=None)
    keep.free()


def test_stats_equal_a_recount_of_the_blocks() -> None:
    pool = CachingAllocator(lambda n: 1 << 30, lambda a: None, lambda s: 0, lambda e: True)
    block = pool.allocate(100, "s")
    counted = pool.recount()
    stats = pool.memory_stats()
    assert all(stats[key] == value for key, value in counted.items())
    pool.free(block)
    stats = pool.memory_stats()
    assert all(stats[key] == value for key, value in pool.recount().items())


def test_the_timeline_totals_restart_when_the_device_is_reset(device: cannrt.Device) -> None:
    device.empty(4096, np.uint8)  # never freed: the reset takes it
    assert cannrt.memory.history()[-1].reserved == 2 * MIB
    device.reset()
    again = cannrt.Device(0)
    array = again.empty(512, np.uint8)
    events = cannrt.memory.history(again)
    assert [e.action for e in events[-3:]] == ["reset", "segment_alloc", "block_alloc"]
    assert (events[-1].reserved, events[-1].allocated) == (2 * MIB, 512)
    array.free()


def test_the_timeline_reserves_what_the_driver_maps_the_runtimes_argument_areas_included(device: cannrt.Device) -> None:
    driver = cannrt.get_runtime().driver
    stream = device.stream()
    x, y = device.array(np.ones(16, np.float32)), device.empty(16, np.float32)
    stream.launch("relu", x, y)  # the stream's first launch with arguments takes its argument area
    stream.synchronize()
    free, total, *_ = driver.mem_info(0)
    events = cannrt.memory.history()
    assert ("internal_alloc", "malloc") in [(e.action, e.pool) for e in events]
    assert events[-1].reserved == total - free
    stream.destroy()
    free, total, *_ = driver.mem_info(0)
    events = cannrt.memory.history()
    assert events[-1].action == "internal_free" and events[-1].reserved == total - free
