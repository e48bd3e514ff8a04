"""Columnar collection: the records a profile reads back from its chunks are, field for field, the
records the device makes one task at a time (kernels of one and several blocks, copies, memsets,
event tasks, callbacks, a failed kernel and tasks discarded after it)."""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

import cannrt
from cannrt.abi import SqeType, TaskRecord
from cannrt.abi.records import TaskChunk
from cannrt.api.profile import TASK_ORDER, profile
from cannrt.device.records import ROW_BYTES, TaskLog, spans, task_record
from cannrt.runtime.core import get_runtime
from cannrt.tools.profiler.spool import ScratchDir, TaskSpool


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


def nops(stream: cannrt.Stream, count: int) -> None:
    """count empty kernels on stream, synchronised."""
    for _ in range(count):
        stream.launch("nop")
    stream.synchronize()


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
        nops(stream, 10)
    (kept,) = prof._tasks.values()
    assert kept.collected == 10 and len(kept.runs) == 3 and kept.written == 0  # a short profile: no disk
    expected = list(kept.sorted_records())
    cannrt.reset_runtime()
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    spool = TaskSpool(tmp_path / "spool", TASK_ORDER, chunk=4, memory_rows=4)
    runtime.driver.trace_start(0, spool)
    nops(stream, 10)
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
        nops(stream, tasks)
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
    nops(stream, 7)
    runtime.driver.trace_start(0, second)
    nops(stream, 3)
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    assert sum(c.tasks for c in first.chunks) == 7
    assert sum(c.tasks for c in second.chunks) == 3


def test_a_scratch_folder_is_made_only_once_a_spool_writes_and_its_cleanup_removes_it() -> None:
    scratch = ScratchDir()
    root = scratch.path.parent
    assert root.is_dir() and root.stat().st_mode & 0o777 == 0o700 and not scratch.path.exists()
    cannrt.reset_runtime()
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    spool = TaskSpool(scratch.sub("device_0"), TASK_ORDER, chunk=4, memory_rows=0)  # every chunk to disk
    runtime.driver.trace_start(0, spool)
    nops(stream, 5)
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    assert spool.written == len(spool.runs) == 2 and spool.directory.parent == scratch.path
    assert [r.task_id for r in spool.sorted_records()] == list(range(5))
    scratch.cleanup()
    assert not scratch.path.exists() and root.is_dir()  # the process's root stays for later profiles


def test_a_task_of_the_last_shape_with_other_blocks_gets_a_row_and_mark_of_its_own() -> None:
    cannrt.reset_runtime()
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    runtime.driver.trace_start(0)
    nops(stream, 4)
    log = runtime.driver._npu(0).timeline.records
    assert log is not None
    tasks = list(log.tasks)
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    assert len({id(t.sqe) for t in tasks}) == 1 and len({id(t.aux) for t in tasks}) == 1  # one shape
    core, begin, finish = spans(tasks[2])[0]  # a one-block kernel's block, kept in two slots
    tasks[2].blocks = ((core, begin, finish), (core + 1, begin, finish))  # not as its shape's first task
    tasks[2].cores = (core, core + 1)
    sink = ListSink()
    other = TaskLog(0, sink)
    for task in tasks:
        other.append(task)
    other.flush()
    (chunk,) = sink.chunks
    assert chunk.marks[:, 0].tolist() == [0, 2, 3]  # the first, the odd one, and the next one
    assert list(chunk.in_order(2)) == [task_record(0, task) for task in tasks]


def _held_bytes(rows: np.ndarray) -> int:
    """Bytes of memory a chunk's rows keep alive: their own, or the whole buffer they view."""
    base: object = rows
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base.nbytes if isinstance(base, np.ndarray) else memoryview(base).nbytes  # type: ignore[arg-type]


def test_a_chunk_cut_short_holds_its_rows_not_the_whole_buffer() -> None:
    cannrt.reset_runtime()
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    sink = ListSink()
    sink.chunk = 1 << 20  # a buffer of 56 MiB of rows for each chunk
    for _ in range(3):  # tracing restarted: each chunk handed over after a few rows
        runtime.driver.trace_start(0, sink)
        nops(stream, 7)
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    assert [c.tasks for c in sink.chunks] == [7, 7, 7]
    assert all(_held_bytes(c.rows) <= 2 * c.rows.nbytes for c in sink.chunks)
    full = ListSink()
    full.chunk = 4
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    runtime.driver.trace_start(0, full)
    nops(stream, 8)
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    assert [c.tasks for c in full.chunks] == [4, 4] and all(_held_bytes(c.rows) == c.rows.nbytes for c in full.chunks)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_cleaning_up_its_copy_leaves_the_parents_scratch_folder() -> None:
    scratch = ScratchDir()
    scratch.path.mkdir(parents=True)
    (scratch.path / "run_000000.bin").write_bytes(b"rows")
    child = os.fork()
    if child == 0:  # the child: its copy of the profile is collected
        scratch.cleanup()
        os._exit(0)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (scratch.path / "run_000000.bin").read_bytes() == b"rows"
    scratch.cleanup()
    assert not scratch.path.exists()


def test_tasks_completed_in_one_advance_are_settled_when_it_ends() -> None:
    cannrt.reset_runtime()
    runtime = get_runtime()
    stream = cannrt.Device(0).stream()
    sink = ListSink()
    runtime.driver.trace_start(0, sink)
    nops(stream, 3000)  # more than an SQ's depth: the SQ fills, the device catches up in advances
    log = runtime.driver._npu(0).timeline.records
    assert log is not None and not log.pending  # the synchronize's advance settled its tasks
    rows_before_stop = sum(c.tasks for c in sink.chunks) + log._offset // ROW_BYTES
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    assert rows_before_stop == sum(c.tasks for c in sink.chunks) == 3000


def test_a_batch_settled_at_once_gives_the_rows_and_marks_of_one_task_at_a_time() -> None:
    cannrt.reset_runtime()
    runtime = get_runtime()
    cannrt.Device(0)
    runtime.driver.trace_start(0)
    nops(cannrt.Device(0).stream(), 2500)
    workload()  # shapes of one and many blocks, copies, events, a failure and discarded tasks
    log = runtime.driver._npu(0).timeline.records
    assert log is not None
    tasks = list(log.tasks)
    runtime.driver.trace_stop(0, runtime.host_time_ns)
    cannrt.reset_runtime()
    at_once, one_by_one_sink = ListSink(), ListSink()
    batch, single = TaskLog(0, at_once), TaskLog(0, one_by_one_sink)
    batch.pending += tasks
    batch.flush()
    for task in tasks:
        single.append(task)
    single.flush()
    assert len(at_once.chunks) == len(one_by_one_sink.chunks) == -(-len(tasks) // 1000)
    for a, b in zip(at_once.chunks, one_by_one_sink.chunks, strict=True):
        assert (a.rows == b.rows).all() and (a.marks == b.marks).all() and (a.extras == b.extras).all()
        assert a.shapes == b.shapes
    read_back = sorted((r for c in at_once.chunks for r in c.in_order(64)), key=TASK_ORDER)
    assert read_back == sorted((task_record(0, t) for t in tasks), key=TASK_ORDER)
