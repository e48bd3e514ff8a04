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


def test_a_task_spool_writes_nothing_for_an_empty_chunk_and_removes_its_runs(tmp_path: Path) -> None:
    cannrt.reset_runtime()
    cannrt.Device(0)
    with profile(chunk=4) as prof:
        stream = cannrt.Device(0).stream()
        for _ in range(10):
            stream.launch("nop")
        stream.synchronize()
    (spool,) = prof._tasks.values()
    assert isinstance(spool, TaskSpool) and spool.collected == 10 and len(spool.runs) == 3
    assert [r.task_id for r in spool.sorted_records()] == sorted(r.task_id for r in prof.records)
    spool.close()
    assert spool.collected == 0 and not any(spool.directory.iterdir())
    cannrt.reset_runtime()


def test_a_log_whose_buffer_grows_keeps_every_row_in_order() -> None:
    cannrt.reset_runtime()
    stream = cannrt.Device(0).stream()
    tasks = 5000  # more rows than the log's first buffer holds, fewer than its chunk
    with profile(chunk=tasks + 1000) as prof:
        for _ in range(tasks):
            stream.launch("nop")
        stream.synchronize()
    (spool,) = prof._tasks.values()
    records = prof.records
    cannrt.reset_runtime()
    assert len(spool.runs) == 1 and spool.collected == tasks  # the rows still kept went to disk at the stop
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
