"""What a tracing device keeps of its completed tasks, and the TaskRecords made from them.

The timeline puts each completed task in the log's `pending` list (a list append) and has the log
`settle()` them at the end of each advance (one loop over the batch, no call per task); every
read settles first. So a Task outlives its completion only until its advance ends (at most the
tasks fetched, an SQ's depth each). A `TaskLog` with a sink writes each task as one fixed-size row
of int64 (`TASK_ROW`: ids, times and its one block; msprof's raw task data are fixed-size binary
records) into a buffer of a chunk's rows (an anonymous mapping, zeroed by the kernel); no row is
copied or moved before the sink has it. The rest of a record
is made once per task shape (tasks whose decoded SQE and costing are the same objects) from the
first task of that shape; a task of the last task's shape is one `pack_into`, and only a task of
another shape leaves a mark saying which shape the rows from there on are. A full buffer goes to
the sink as a `TaskChunk`, and the next chunk gets a new one. A log without a sink keeps its tasks
until they are read (`records()`: a TaskRecord per task, the reference the chunks are tested
against).
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

import numpy as np

from cannrt.abi import RECORD_MEMSET, KernelSqe, SdmaOp, SdmaSqe, SqeType, TaskRecord
from cannrt.abi.records import MARK_FIELDS, NO_EXTRA, ROW_FIELDS, TASK_ROW, TaskChunk, TaskSink
from cannrt.device.task import ONE_BLOCK

if TYPE_CHECKING:
    from cannrt.abi import Work
    from cannrt.device.task import Task

KEPT_CHUNK = 1 << 62  # a log without a sink keeps every task until read
ROW_BYTES = TASK_ROW.size
MAX_ROWS = 1 << 20  # rows of one buffer at most (56 MiB of address space)
POPULATED_ROWS = 1 << 14  # buffers up to this many rows are mapped in at once, larger ones page by page
_PACK = TASK_ROW.pack_into
_ANONYMOUS = getattr(mmap, "MAP_ANONYMOUS", None)  # POSIX; elsewhere a bytearray holds the rows
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux
_UNKNOWN = object()  # no task's SQE or costing


def _row_buffer(size: int, populate: bool) -> mmap.mmap | bytearray:
    """A zeroed buffer for size bytes of rows: an anonymous private mapping, mapped in by the
    kernel in one call when `populate` (not a page fault per page as rows are written; an
    allocator's calloc may clear a recycled block instead), unmapped once the chunk's last array
    goes; a bytearray where the platform has no anonymous mappings."""
    if _ANONYMOUS is None:
        return bytearray(size)
    return mmap.mmap(-1, size, mmap.MAP_PRIVATE | _ANONYMOUS | (_POPULATE if populate else 0))


def task_name(sqe_type: int) -> str:
    """The SQE type's name, for tasks that are not kernels."""
    try:
        return SqeType(sqe_type).name
    except ValueError:
        return f"SQE_TYPE_{sqe_type}"


def spans(task: Task) -> tuple[tuple[int, int, int], ...]:
    """The (core, start, end) of each block of a task traced (a one-block kernel keeps its block
    in two slots: its blocks is ONE_BLOCK)."""
    if task.blocks is ONE_BLOCK:
        return ((task.cores[0], task.block_at, task.block_end),)
    return task.blocks


def task_record(device_id: int, task: Task) -> TaskRecord:
    """The record of a completed task."""
    sqe = task.sqe
    pipes, hit, costed = task.aux if task.aux else (None, 0.0, None)
    read = written = 0
    name = task.kernel.name if task.kernel is not None else task_name(sqe.sqe_type)
    work: Work | None = None
    blocks = spans(task)
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
        "_marks",
        "_offset",
        "_shapes",
        "_sqe",
        "chunk",
        "device_id",
        "pending",
        "sink",
        "tasks",
    )

    def __init__(self, device_id: int, sink: TaskSink | None = None) -> None:
        self.device_id = device_id
        self.sink = sink
        self.chunk = max(1, sink.chunk) if sink is not None else KEPT_CHUNK
        self.tasks: list[Task] = []  # kept (no sink)
        self.pending: list[Task] = []  # completed, not settled yet
        self._new_chunk()

    def _new_chunk(self) -> None:
        self._buffer: mmap.mmap | bytearray = bytearray()  # mapped by the chunk's first task (_add_other)
        self._limit = 0  # bytes of rows the buffer holds
        self._offset = 0  # bytes of rows written
        self._shapes: list[TaskRecord] = []  # the chunk's task shapes (prototype records)
        self._known: dict[tuple[int, int], int] = {}  # (id(sqe), id(aux)) -> shape number
        self._held: list[object] = []  # the SQEs and costings of the shapes (their ids stay theirs)
        self._extras: list[int] = []  # blocks and cores of the tasks that are not one plain block
        self._marks: list[int] = []  # TaskChunk.marks, flat
        self._sqe: object = _UNKNOWN  # the shape the next rows are written at once for: its SQE
        self._aux: object = _UNKNOWN  # and costing (those of the last task, if one plain block)

    def append(self, task: Task) -> None:
        """A task completed (device lock held): its row now (the timeline adds to `pending` and
        settles once per advance)."""
        self.pending.append(task)
        self.settle()

    def settle(self) -> None:
        """Write the rows of the pending tasks (device lock held), or (no sink) keep them. A task
        of the last task's shape (and one block, as that one was) is one `pack_into`."""
        if not self.pending:  # (every advance settles, most complete nothing)
            return
        pending, self.pending = self.pending, []
        if self.sink is None:
            self.tasks += pending
            return
        sqe, aux, buffer, offset, limit = self._sqe, self._aux, self._buffer, self._offset, self._limit
        for task in pending:
            if task.sqe is sqe and task.aux is aux and task.blocks is ONE_BLOCK and not (task.status or task.discarded):
                _PACK(
                    buffer,
                    offset,
                    task.task_id,
                    task.start_ns,
                    task.end_ns,
                    task.arrival_ns,
                    task.cores[0],
                    task.block_at,
                    task.block_end,
                )
                offset += ROW_BYTES
                if offset < limit:
                    continue
                self._offset = offset
                self._hand_over()
            else:  # another shape, or not the one block its shape's first task had (a shape fixes
                # its blocks; one placed before tracing started has none)
                self._offset = offset
                self._add_other(task)
            sqe, aux, buffer, offset, limit = self._sqe, self._aux, self._buffer, self._offset, self._limit
        self._offset = offset

    def _add_other(self, task: Task) -> None:
        """The row and mark of a task of another shape than the last, or that is not one plain
        block: the rows after it are written at once while of its shape, if it is one plain block."""
        if self.sink is None:
            self.tasks.append(task)
            return
        if not self._limit:  # the chunk's first task (no shape is known before it)
            rows = min(self.chunk, MAX_ROWS)
            self._limit = rows * ROW_BYTES
            self._buffer = _row_buffer(self._limit, rows <= POPULATED_ROWS)
        sqe, aux, blocks = task.sqe, task.aux, spans(task)
        alone = bool(task.status or task.discarded)  # a failed or discarded task is a shape of its own
        key = (id(sqe), id(aux))
        number = -1 if alone else self._known.get(key, -1)
        if number < 0:
            number = len(self._shapes)
            self._shapes.append(task_record(self.device_id, task))
            if not alone:
                self._known[key] = number
                self._held.append((sqe, aux))
        plain = len(blocks) == 1 and not alone
        self._sqe, self._aux = (sqe, aux) if plain else (_UNKNOWN, _UNKNOWN)
        row, times = self._offset // ROW_BYTES, (task.task_id, task.start_ns, task.end_ns, task.arrival_ns)
        if plain:
            _PACK(self._buffer, self._offset, *times, *blocks[0])
            self._marks += (row, number, NO_EXTRA, 1)
        else:
            extras = self._extras
            _PACK(self._buffer, self._offset, *times, 0, 0, 0)
            self._marks += (row, number, len(extras), 0)
            extras += (len(blocks), len(task.cores))
            for block in blocks:
                extras += block
            extras += task.cores
        self._offset += ROW_BYTES
        if self._offset >= self._limit:
            self._hand_over()

    def flush(self) -> None:
        """Settle, and hand the rows kept to the sink (if any)."""
        self.settle()
        self._hand_over()

    def _hand_over(self) -> None:
        """The rows kept to the sink (if any): the buffer itself, or a copy of its rows when they
        fill less than half of it (so a chunk holds no more memory than twice its rows)."""
        count = self._offset // ROW_BYTES
        if self.sink is None or not count:
            return
        rows = np.frombuffer(self._buffer, np.int64, count * ROW_FIELDS).reshape(count, ROW_FIELDS)
        if 2 * count * ROW_BYTES < self._limit:  # mostly unused (a short run, a stop): keep only the rows
            rows = rows.copy()
        marks = np.array(self._marks, np.int64).reshape(-1, MARK_FIELDS)
        chunk = TaskChunk(self.device_id, rows, marks, self._shapes, np.array(self._extras, np.int64))
        self._new_chunk()
        self.sink.add_chunk(chunk)

    def records(self) -> list[TaskRecord]:
        """The records of the tasks kept, which are then forgotten (a log with a sink flushes and
        returns none)."""
        self.flush()
        tasks, self.tasks = self.tasks, []
        return [task_record(self.device_id, task) for task in tasks]
