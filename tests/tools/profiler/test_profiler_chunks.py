"""Columnar collection: the records a profile reads back from its chunks are, field for field, the
records the device makes one task at a time (kernels of one and several blocks, copies, memsets,
event tasks, callbacks, a failed kernel and tasks discarded after it)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

import cannrt
from cannrt.abi import SqeType, TaskRecord
from cannrt.abi.records import TaskChunk
from cannrt.api.profile import TASK_ORDER, profile
from cannrt.runtime.core import get_runtime
from cannrt.tools.profiler.spool import TaskSpool


def workload() -> None:
    device = cannrt.Device(0)
    first, second = device.stream(), device.stream()
    x = device.array(np.ones((64, 64), np.float16))
    y = device.empty((64, 64), np.float32)
    for index in range(12):
        first.launch("matmul", x, x, y, block_dim=1 + index % 3)
        first.launch("nop")
        second.launch("relu", y, y, block_dim=40)  # more blocks than cores: rounds
        second.wait(first.record())
    y.to_numpy(second)
    y.copy_from(np.zeros((64, 64), np.float32), second)
    second.launch_host_func(lambda _: None)
    device.synchronize()
    failing = device.stream()
    failing.set_stop_on_error()
    small, out = device.empty(16), device.empty(1024)
    overrun = type(small)(device, small.address, (1024,), np.dtype(np.float32), owned=False)
    failing.launch("nop")
    failing.launch("relu", overrun, out)  # reads past its allocation: the kernel faults
    failing.launch("relu", out, out)  # discarded after the failure
    with pytest.raises(cannrt.CannError):
        failing.synchronize()


def one_by_one() -> list[TaskRecord]:
    """The device's own records (no sink: task_record per task)."""
    cannrt.reset_runtime()
    runtime = get_runtime()
    cannrt.Device(0)
    runtime.driver.trace_start(0)
    workload()
    return sorted(runtime.driver.trace_stop(0, runtime.host_time_ns), key=TASK_ORDER)


@pytest.mark.parametrize("chunk", [1, 5, 1 << 20])
def test_records_read_back_from_chunks_equal_the_devices_own(chunk: int) -> None:
    expected = one_by_one()
    cannrt.reset_runtime()
    cannrt.Device(0)
    with profile(chunk=chunk) as prof:
        workload()
    got = prof.records
    cannrt.reset_runtime()
    kinds = {r.sqe_type for r in expected}
    assert {SqeType.KERNEL, SqeType.SDMA, SqeType.EVENT_RECORD, SqeType.EVENT_WAIT, SqeType.PLACE_HOLDER} <= kinds
    assert any(r.status for r in expected) and any(r.discarded for r in expected)
    assert any(len(r.blocks) > 1 for r in expected) and len({r.cores for r in expected}) > 3
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine == theirs
        assert type(mine) is TaskRecord


def test_a_task_spool_keeps_its_newest_chunks_in_memory_writes_the_older_ones_and_removes_them(
    tmp_path: Path,
) -> None:
    cannrt.reset_runtime()
    cannrt.Device(0)
    with profile(chunk=4) as prof:
        stream = cannrt.Device(0).stream()
        for _ in range(10):
            stream.launch("nop")
        stream.synchronize()
    (kept,) = prof._tasks.values()
    assert kept.collected == 10 and len(kept.runs) == 3 and kept.written == 0  # a short profile: no disk
    expected = list(kept.sorted_records())
    cannrt.reset_runtime()
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    spool = TaskSpool(tmp_path / "spool", TASK_ORDER, chunk=4, memory_rows=4)
    runtime.driver.trace_start(0, spool)
    for _ in range(10):
        stream.launch("nop")
    stream.synchronize()
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    # chunks of 4, 4 and 2 rows: each one past 4 rows kept sends the oldest to disk
    assert spool.collected == 10 and len(spool.runs) == 3 and spool.written == 2
    assert len(list(spool.directory.iterdir())) == 4  # rows, marks and extras; layout and shapes
    assert list(spool.sorted_records()) == expected
    spool.close()
    assert spool.collected == 0 and not spool.runs and not any(spool.directory.iterdir())


def test_a_log_handing_over_its_last_rows_at_the_stop_keeps_every_row_in_order() -> None:
    cannrt.reset_runtime()
    stream = cannrt.Device(0).stream()
    tasks = 5000  # fewer than its chunk: the rows still kept go to the sink at the stop
    with profile(chunk=tasks + 1000) as prof:
        for _ in range(tasks):
            stream.launch("nop")
        stream.synchronize()
    (spool,) = prof._tasks.values()
    records = prof.records
    cannrt.reset_runtime()
    assert len(spool.runs) == 1 and spool.collected == tasks
    assert [r.task_id for r in records] == [i & 0xFFFF for i in range(tasks)]
    assert all(r.name == "nop" and len(r.blocks) == 1 and r.cores == (r.blocks[0][0],) for r in records)
    assert all(a.end_ns <= b.start_ns for a, b in pairwise(records))


class ListSink:
    """A TaskSink keeping the chunks it is handed."""

    def __init__(self) -> None:
        self.chunk = 1000
        self.chunks: list[TaskChunk] = []

    def add_chunk(self, chunk: TaskChunk) -> None:
        self.chunks.append(chunk)


def test_tracing_restarted_with_a_new_sink_hands_the_rows_kept_to_the_old_one_first() -> None:
    cannrt.reset_runtime()
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    first, second = ListSink(), ListSink()
    runtime.driver.trace_start(0, first)
    for _ in range(7):
        stream.launch("nop")
    stream.synchronize()
    runtime.driver.trace_start(0, second)
    for _ in range(3):
        stream.launch("nop")
    stream.synchronize()
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    assert sum(c.tasks for c in first.chunks) == 7
    assert sum(c.tasks for c in second.chunks) == 3
