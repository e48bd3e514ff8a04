"""What a tracing device keeps of its completed tasks, and the TaskRecords made from them.

The timeline appends each completed Task to a `TaskLog` (nothing is built per task then: a task is
not reused or changed once complete). A log with a sink hands its tasks over a chunk at a time as
a columnar `TaskChunk`: the ids and times read into arrays in one pass each, the rest made once per
task shape (tasks whose decoded SQE, costing and cores are the same objects or values). A log
without a sink keeps its tasks until they are read (`records()`).
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from cannrt.abi import RECORD_MEMSET, KernelSqe, SdmaOp, SdmaSqe, SqeType, TaskRecord
from cannrt.abi.records import TaskChunk, TaskSink

if TYPE_CHECKING:
    from cannrt.abi import Work
    from cannrt.device.task import Task

KEPT_CHUNK = 1 << 62  # a log without a sink keeps every task until read
_TIMES = attrgetter("task_id", "start_ns", "end_ns", "arrival_ns")
_SQE, _AUX, _CORES, _BLOCKS = attrgetter("sqe"), attrgetter("aux"), attrgetter("cores"), attrgetter("blocks")
_STATUS, _DISCARDED = attrgetter("status"), attrgetter("discarded")
_FIRST = itemgetter(0)


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


def _codes(values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct values (sorted) and, per value, the index of its own among them."""
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct, inverse.reshape(-1).astype(np.int64)


def shape_codes(tasks: list[Task]) -> tuple[npt.NDArray[np.int64], list[int], npt.NDArray[np.int64]]:
    """Per task, the number of its shape; a task of each shape; the tasks that are a shape of their
    own. A shape is what a task's record shares with others apart from ids, times and cores: its
    decoded SQE (stream, type, kernel, blockDim, copy) and costing (arguments, pipes, L2 hit rate,
    work), the same objects for every launch of one shape. A task that failed or was discarded is a
    shape of its own."""
    count = len(tasks)
    sqes, costs = list(map(_SQE, tasks)), list(map(_AUX, tasks))
    special = any(map(_STATUS, tasks)) or any(map(_DISCARDED, tasks))
    if not special and count and sqes.count(sqes[0]) == count and costs.count(costs[0]) == count:
        return np.zeros(count, np.int64), [0], np.zeros(0, np.int64)  # one shape (list.count: `is` first)
    _, sqe_code = _codes(np.fromiter(map(id, sqes), np.int64, count))
    _, cost_code = _codes(np.fromiter(map(id, costs), np.int64, count))
    combined = sqe_code * count + cost_code
    alone = np.zeros(0, np.int64)
    if special:
        alone = np.array([i for i, task in enumerate(tasks) if task.status or task.discarded], np.int64)
        combined[alone] = count * count + np.arange(len(alone))
    _, first, code = np.unique(combined, return_index=True, return_inverse=True)
    return code.reshape(-1), first.tolist(), alone


def _flat(column: list[tuple[Any, ...]], width: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Lengths of a column of tuples and their items (tuples of `width` numbers when width > 1)."""
    counts = np.fromiter(map(len, column), np.int64, len(column))
    if width == 1:
        items = chain.from_iterable(column)
    elif len(column) and counts.min() == counts.max() == 1:  # one block each (the common case)
        items = chain.from_iterable(map(_FIRST, column))
    else:
        items = chain.from_iterable(chain.from_iterable(column))
    return counts, np.fromiter(items, np.int64).reshape(-1, width)


def task_chunk(device_id: int, tasks: list[Task]) -> TaskChunk:
    """The columnar records of completed tasks (in the order given). A task's cores are those of its
    blocks in order of first use (as the scheduler placed them); they are kept apart only for the
    tasks that keep no blocks (copies, event tasks) or are a shape of their own."""
    count = len(tasks)
    code, first, alone = shape_codes(tasks)
    block_counts, blocks = _flat(list(map(_BLOCKS, tasks)), 3)
    explicit = np.union1d(np.flatnonzero(block_counts == 0), alone)
    core_index = np.full(count, -1, np.int64)
    core_index[explicit] = np.arange(len(explicit))
    core_counts, cores = _flat([tasks[i].cores for i in explicit.tolist()], 1)
    return TaskChunk(
        device_id,
        np.fromiter(chain.from_iterable(map(_TIMES, tasks)), np.int64, 4 * count).reshape(count, 4),
        code,
        [task_record(device_id, tasks[index]) for index in first],
        block_counts,
        blocks,
        core_index,
        core_counts,
        cores.reshape(-1),
    )


class TaskLog:
    """The completed tasks of a tracing device: handed to `sink` a chunk at a time, or kept."""

    __slots__ = ("chunk", "device_id", "sink", "tasks")

    def __init__(self, device_id: int, sink: TaskSink | None = None) -> None:
        self.device_id = device_id
        self.sink = sink
        self.chunk = max(1, sink.chunk) if sink is not None else KEPT_CHUNK
        self.tasks: list[Task] = []

    def append(self, task: Task) -> None:
        """A task completed (device lock held)."""
        tasks = self.tasks
        tasks.append(task)
        if len(tasks) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        """Hand the tasks kept to the sink (if any)."""
        if self.sink is not None and self.tasks:
            tasks, self.tasks = self.tasks, []
            self.sink.add_chunk(task_chunk(self.device_id, tasks))

    def records(self) -> list[TaskRecord]:
        """The records of the tasks kept, which are then forgotten (a log with a sink flushes and
        returns none)."""
        self.flush()
        tasks, self.tasks = self.tasks, []
        return [task_record(self.device_id, task) for task in tasks]
