"""What the device leaves behind for the tools: task records, exception records, dump records."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from cannrt.abi.sqe import SqeType
from cannrt.abi.work import PipeTimes, Work

OVERFLOW_STATUS_BYTES = 64  # what aclrtGetOverflowStatus copies out: the status word, zero-padded
RECORD_MEMSET = -2  # TaskRecord.copy_kind of an SDMA memset (a copy carries its CopyKind)


class ErrorType(IntEnum):
    """aclrtErrorType of a device fault."""

    NO_ERROR = 0
    MEMORY = 1
    L2 = 2
    AICORE = 3
    LINK = 4
    OTHERS = 0xFFFF


class DumpMode(IntFlag):
    """Which tensors the device captures for a kernel whose SQE carries the DUMP flag."""

    NONE = 0
    INPUTS = 1
    OUTPUTS = 2


@dataclass(eq=False)
class ExceptionRecord:
    """The first scene of a device fault: what a CANN AI Core error report prints."""

    serial: int
    device_id: int
    stream_id: int
    task_id: int
    sq_id: int
    core_id: int
    error_code: int  # ACL runtime error code
    error_type: int  # ErrorType
    error_bits: tuple[str, ...]  # e.g. MTE_READ_OVERFLOW
    pc_start: int
    pc_current: int
    para_base: int
    message: str
    kernel_name: str
    registers: dict[str, int] = field(default_factory=dict)
    sqe_words: tuple[int, ...] = ()
    timestamp_ns: int = 0
    block_index: int = 0  # the logical block that faulted (of block_dim)
    block_dim: int = 1
    source: str = ""  # "file:line in function": where in the kernel's Python code it happened
    arg_index: int = -1  # the tensor argument involved (-1: none)
    arg_name: str = ""  # its parameter name in the kernel's implementation
    tensor: str = ""  # its dtype and shape, e.g. float32[1025]
    access_kind: str = ""  # "read" or "write"
    access_address: int = 0  # start and size of the refused access
    access_size: int = 0
    fault_address: int = 0  # the first byte refused


class TaskRecord(NamedTuple):
    """What every task leaves behind on the modelled timeline (profiling reads these)."""

    device_id: int
    stream_id: int
    task_id: int
    sq_id: int
    sqe_type: int
    name: str
    block_dim: int
    start_ns: int
    end_ns: int
    cores: tuple[int, ...]
    pipes: PipeTimes | None
    l2_hit: float
    bytes_read: int
    bytes_written: int
    status: int
    arrival_ns: int = 0  # doorbell time (host clock) of the SQE
    args: tuple[object, ...] = ()  # kernel arguments (TensorArg, scalars)
    outputs: tuple[int, ...] = ()  # argument indices the kernel writes
    work: Work | None = None
    core_kind: int = -1  # CoreKind of a kernel, -1 otherwise
    blocks: tuple[tuple[int, int, int], ...] = ()  # (physical core or SDMA engine, start, end) per block
    copy_kind: int = -1  # CopyKind of an SDMA copy, RECORD_MEMSET for a memset, -1 otherwise
    discarded: bool = False


Ints = npt.NDArray[np.int64]
SDMA = int(SqeType.SDMA)
ROW_FIELDS = 7  # int64 per task in TaskChunk.rows
TASK_ROW = struct.Struct(f"={ROW_FIELDS}q")  # one row of TaskChunk.rows, as the device packs it
MARK_FIELDS = 4  # int64 per row of TaskChunk.marks
NO_EXTRA = -1  # the extras index of a task that is one plain block


class TaskChunk(NamedTuple):
    """Task records in columns, as the device hands them over a chunk at a time (msprof's raw task
    data are fixed-size binary records): one row of numbers per task, everything else once per
    task shape. Tasks of one shape (the launches of one kernel with the same arguments and costing,
    or one repeated copy or event) share a prototype TaskRecord, whose ids, times, cores and blocks
    are not theirs. A row does not hold its task's shape: a run of tasks of one shape is written
    one row each, after a mark that names the shape (`columns()`)."""

    device_id: int
    rows: Ints  # (n, ROW_FIELDS): task id, start ns, end ns, doorbell ns, then the task's one block
    # (physical core, start ns, end ns; its cores are that one core), or 0, 0, 0 (see its extras)
    marks: Ints  # (m, MARK_FIELDS), rows ascending: row, shape (index into shapes), where its blocks
    # and cores start in `extras` (NO_EXTRA: its one block), and 1 if the rows after it up to the
    # next mark of 1 are of its shape and one plain block each (0: that row alone)
    shapes: list[TaskRecord]
    extras: Ints  # per task that is not one plain block: its number of blocks b and of cores c,
    # then b (physical core or SDMA engine, start ns, end ns), then its c cores

    @property
    def tasks(self) -> int:
        """Tasks in the chunk."""
        return int(self.rows.shape[0])

    def columns(self) -> tuple[Ints, Ints]:
        """Each task's shape (index into shapes) and extras index (NO_EXTRA: one plain block)."""
        count, marks = self.tasks, self.marks
        numbers = np.zeros(count, np.int64)
        runs = marks[marks[:, 3] != 0]
        if len(runs):  # the rows before the first run are all marks of their own
            numbers[runs[0, 0] :] = np.repeat(runs[:, 1], np.diff(runs[:, 0], append=count))
        extra = np.full(count, NO_EXTRA, np.int64)
        numbers[marks[:, 0]] = marks[:, 1]
        extra[marks[:, 0]] = marks[:, 2]
        return numbers, extra

    def order(self, numbers: Ints) -> Ints:
        """Task indices in (start, stream, task id) order (one device per chunk; numbers: the
        shape column of `columns()`)."""
        streams = np.fromiter((p.stream_id for p in self.shapes), np.int64, len(self.shapes))
        rows = self.rows
        return np.lexsort((rows[:, 0], streams[numbers], rows[:, 1]))

    def in_order(self, batch: int) -> Iterator[TaskRecord]:
        """Every TaskRecord of the chunk in (start, stream, task id) order, made `batch` at a time."""
        numbers, extra = self.columns()
        order, extras = self.order(numbers), self.extras.tolist()
        for at in range(0, len(order), batch):
            indices = order[at : at + batch]
            yield from self.records(indices, numbers[indices].tolist(), extra[indices].tolist(), extras)

    def records(self, indices: Ints, numbers: list[int], extra: list[int], extras: list[int]) -> Iterator[TaskRecord]:
        """The TaskRecords of the tasks at `indices`, with their shapes and extras indices (of
        `columns()`; extras: `self.extras.tolist()`). An SDMA task's blocks are its engines over its
        whole time, as on the device."""
        shapes, make = self.shapes, tuple.__new__
        for (task_id, start, end, arrival, core, begin, finish), number, at_extra in zip(
            self.rows[indices].tolist(), numbers, extra, strict=True
        ):
            # the shape's fields (its own ids, times, cores and blocks are not the task's: _)
            (device, stream, _, sq, kind, name, dim, _, _, _, pipes, hit, read, written, status, _,
             args, outs, work, core_kind, _, copy, gone) = shapes[number]  # fmt: skip
            if at_extra < 0:  # one block, and the cores its one core (the common case)
                used: tuple[int, ...] = (core,)
                spans: tuple[tuple[int, int, int], ...] = ((core, begin, finish),)
            else:
                count, at = extras[at_extra], at_extra + 2
                used = tuple(extras[at + 3 * count : at + 3 * count + extras[at_extra + 1]])
                if kind == SDMA:
                    spans = tuple((engine, start, end) for engine in used)
                else:
                    spans = tuple(tuple(extras[i : i + 3]) for i in range(at, at + 3 * count, 3))  # type: ignore[misc]
            yield make(  # a TaskRecord without _make's overhead
                TaskRecord,
                (
                    device, stream, task_id, sq, kind, name, dim, start, end, used, pipes, hit, read, written,
                    status, arrival, args, outs, work, core_kind, spans, copy, gone,
                ),
            )  # fmt: skip


class TaskSink(Protocol):
    """Where a tracing device hands its task records, a chunk at a time (a profiler's spool)."""

    @property
    def chunk(self) -> int:
        """Tasks per chunk."""
        ...

    def add_chunk(self, chunk: TaskChunk) -> None:
        """Take one chunk (called with the device's lock held)."""
        ...


@dataclass(eq=False)
class DumpTensor:
    """One tensor of a dumped kernel: role 'input' or 'output', ACL dtype, shape, address, bytes."""

    index: int
    role: str
    dtype: int
    shape: tuple[int, ...]
    address: int
    data: bytes | None  # None when the tensor could not be read (a faulting address)


@dataclass(eq=False)
class DumpRecord:
    """A kernel's tensors as the device dumped them (data dump, or exception dump on a fault)."""

    device_id: int
    stream_id: int
    task_id: int
    sq_id: int
    kernel_name: str
    tensors: list[DumpTensor] = field(default_factory=list)
    scalars: tuple[tuple[int, int | float], ...] = ()  # (argument index, value) of non-tensor arguments
    end_ns: int = 0
    status: int = 0
    exception: bool = False
