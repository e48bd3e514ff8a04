"""What a tracing device keeps of its completed tasks, and the TaskRecords made from them.

A `TaskLog` with a sink writes each completed task at once as one fixed-size row of int64 (`TASK_ROW`:
ids, times, its shape's number and its one block; msprof's raw task data are fixed-size binary
records) into a preallocated buffer, so no Task outlives its completion; the rest of a record is
made once per task shape (tasks whose decoded SQE and costing are the same objects) from the first
task of that shape. A full buffer goes to the sink as a `TaskChunk`. A log without a sink keeps its
tasks until they are read (`records()`: a TaskRecord per task, the reference the chunks are tested
against).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cannrt.abi import RECORD_MEMSET, KernelSqe, SdmaOp, SdmaSqe, SqeType, TaskRecord
from cannrt.abi.records import NO_EXTRA, ROW_FIELDS, TASK_ROW, TaskChunk, TaskSink

if TYPE_CHECKING:
    from cannrt.abi import Work
    from cannrt.device.task import Task

KEPT_CHUNK = 1 << 62  # a log without a sink keeps every task until read
ROW_BYTES = TASK_ROW.size
FIRST_ROWS = 4096  # rows the buffer holds at first (it doubles up to the chunk as it fills)
_UNKNOWN = object()  # no task's SQE or costing


def task_name(sqe_type: int) -> str:
    """The SQE type's name, for tasks that are not kernels."""
    try:
        return SqeType(sqe_type).name
    except ValueError:
        return f"SQE_TYPE_{sqe_type}"


def task_record(device_id: int, task: Task) -> TaskRecord:
    """The record of a completed task."""
    sqe = task.sqe
    pipes, hit, costed = task.aux if task.aux else (None, 0.0, None)
    read = written = 0
    name = task.kernel.name if task.kernel is not None else task_name(sqe.sqe_type)
    work: Work | None = None
    blocks = task.blocks
    copy_kind = -1
    if task.kernel is not None and not task.status:
        work = costed if costed is not None else task.kernel.work(task.args)
        read, written = work.bytes_read, work.bytes_written
    elif isinstance(sqe, SdmaSqe):
        read = written = sqe.length
        copy_kind = RECORD_MEMSET if sqe.op == SdmaOp.MEMSET else sqe.kind
        blocks = tuple((engine, task.start_ns, task.end_ns) for engine in task.cores)
    return TaskRecord(
        device_id,
        sqe.stream_id,
        task.task_id,
        task.sq.sq_id,
        sqe.sqe_type,
        name,
        sqe.block_dim,
        task.start_ns,
        task.end_ns,
        task.cores,
        pipes,
        hit,
        read,
        written,
        task.status,
        task.arrival_ns,
        task.args,
        task.kernel.outputs if task.kernel is not None else (),
        work,
        sqe.core_kind if isinstance(sqe, KernelSqe) else -1,
        blocks,
        copy_kind,
        task.discarded,
    )


class TaskLog:
    """The completed tasks of a tracing device: rows handed to `sink` a chunk at a time, or (no
    sink) the tasks kept."""

    __slots__ = (
        "_aux",
        "_buffer",
        "_extras",
        "_held",
        "_known",
        "_limit",
        "_offset",
        "_pack",
        "_shape",
        "_shapes",
        "_sqe",
        "chunk",
        "device_id",
        "sink",
        "tasks",
    )

    def __init__(self, device_id: int, sink: TaskSink | None = None) -> None:
        self.device_id = device_id
        self.sink = sink
        self.chunk = max(1, sink.chunk) if sink is not None else KEPT_CHUNK
        self.tasks: list[Task] = []  # kept (no sink)
        self._buffer = bytearray(ROW_BYTES * min(self.chunk, FIRST_ROWS) if sink is not None else 0)
        self._limit = len(self._buffer)  # bytes of rows the buffer holds
        self._offset = 0  # bytes of rows written
        self._pack = TASK_ROW.pack_into
        self._new_chunk()

    def _new_chunk(self) -> None:
        self._shapes: list[TaskRecord] = []  # the chunk's task shapes (prototype records)
        self._known: dict[tuple[int, int], int] = {}  # (id(sqe), id(aux)) -> shape number
        self._held: list[object] = []  # the SQEs and costings of the shapes (their ids stay theirs)
        self._extras: list[int] = []  # blocks and cores of the tasks that are not one plain block
        self._sqe: object = _UNKNOWN  # the shape of the last task: its SQE, costing and number
        self._aux: object = _UNKNOWN
        self._shape = -1

    def append(self, task: Task) -> None:
        """A task completed (device lock held): its row now, or (no sink) the task kept."""
        blocks = task.blocks
        if task.sqe is not self._sqe or task.aux is not self._aux or len(blocks) != 1 or task.status or task.discarded:
            self._add_other(task)  # (a log without a sink never knows a shape: always here)
            return
        core, begin, finish = blocks[0]
        offset = self._offset
        self._pack(
            self._buffer, offset, task.task_id, task.start_ns, task.end_ns, task.arrival_ns, self._shape,
            core, begin, finish, NO_EXTRA,
        )  # fmt: skip
        self._offset = offset = offset + ROW_BYTES
        if offset >= self._limit:
            self._full()

    def _add_other(self, task: Task) -> None:
        """The row of a task of another shape than the last, or that is not one plain block."""
        if self.sink is None:
            self.tasks.append(task)
            return
        sqe, aux, blocks = task.sqe, task.aux, task.blocks
        alone = bool(task.status or task.discarded)  # a failed or discarded task is a shape of its own
        key = (id(sqe), id(aux))
        number = -1 if alone else self._known.get(key, -1)
        if number < 0:
            number = len(self._shapes)
            self._shapes.append(task_record(self.device_id, task))
            if not alone:
                self._known[key] = number
                self._held.append((sqe, aux))
        if not alone:
            self._sqe, self._aux, self._shape = sqe, aux, number
        row = (task.task_id, task.start_ns, task.end_ns, task.arrival_ns, number)
        if len(blocks) == 1 and not alone:
            self._pack(self._buffer, self._offset, *row, *blocks[0], NO_EXTRA)
        else:
            extras = self._extras
            self._pack(self._buffer, self._offset, *row, 0, 0, 0, len(extras))
            extras += (len(blocks), len(task.cores))
            for block in blocks:
                extras += block
            extras += task.cores
        self._offset += ROW_BYTES
        if self._offset >= self._limit:
            self._full()

    def _full(self) -> None:
        """The buffer is full: grow it up to the chunk, or hand the chunk to the sink."""
        rows = self._limit // ROW_BYTES
        if rows < self.chunk:
            grown = min(2 * rows, self.chunk) * ROW_BYTES
            self._buffer += bytes(grown - self._limit)
            self._limit = grown
        else:
            self.flush()

    def flush(self) -> None:
        """Hand the rows kept to the sink (if any)."""
        count = self._offset // ROW_BYTES
        if self.sink is None or not count:
            return
        rows = np.frombuffer(self._buffer, np.int64, count * ROW_FIELDS).reshape(count, ROW_FIELDS).copy()
        chunk = TaskChunk(self.device_id, rows, self._shapes, np.array(self._extras, np.int64))
        self._offset = 0
        self._new_chunk()
        self.sink.add_chunk(chunk)

    def records(self) -> list[TaskRecord]:
        """The records of the tasks kept, which are then forgotten (a log with a sink flushes and
        returns none)."""
        self.flush()
        tasks, self.tasks = self.tasks, []
        return [task_record(self.device_id, task) for task in tasks]
