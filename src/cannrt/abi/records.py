"""What the device leaves behind for the tools: task records, exception records, dump records."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any, NamedTuple, Protocol

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


class TaskChunk(NamedTuple):
    """Task records in columns, as the device hands them over a chunk at a time (msprof's raw task
    data are fixed-size binary records): the per-task numbers as arrays, everything else once per
    task shape. Tasks of one shape (the launches of one kernel with the same arguments and costing,
    or one repeated copy or event) share a prototype TaskRecord, whose ids and times are not theirs."""

    device_id: int
    times: Ints  # (n, 4): task id, start ns, end ns, doorbell ns
    shape: Ints  # (n,): index into shapes
    shapes: list[TaskRecord]
    block_counts: Ints  # (n,): blocks of each task (0 for a task that keeps none)
    blocks: Ints  # (sum of block_counts, 3): (physical core, start ns, end ns), task after task
    core_index: Ints  # (n,): -1: the task's cores are its blocks' (in order of first use), else
    # its entry in core_counts: the cores (or SDMA engines) of a task that keeps no blocks
    core_counts: Ints  # (k,): cores of each such task
    cores: Ints  # (sum of core_counts,): their physical ids, task after task

    @property
    def tasks(self) -> int:
        """Tasks in the chunk."""
        return int(self.times.shape[0])

    def order(self) -> Ints:
        """Task indices in (start, stream, task id) order (one device per chunk)."""
        streams = np.fromiter((p.stream_id for p in self.shapes), np.int64, len(self.shapes))
        return np.lexsort((self.times[:, 0], streams[self.shape], self.times[:, 1]))

    def offsets(self) -> tuple[Ints, Ints]:
        """Where each task's blocks start in `blocks`, and each core_counts entry's cores in `cores`."""
        return _starts(self.block_counts), _starts(self.core_counts)

    def records(self, indices: Ints, offsets: tuple[Ints, Ints]) -> Iterator[TaskRecord]:
        """The TaskRecords of the tasks at `indices` (offsets: `offsets()`). An SDMA task's blocks
        are its engines over its whole time, as on the device."""
        times, shape = self.times[indices].tolist(), self.shape[indices].tolist()
        block_counts, core_index = self.block_counts[indices], self.core_index[indices]
        blocks = list(map(tuple, _rows(self.blocks, offsets[0][indices], block_counts)))
        kept = core_index[core_index >= 0]
        own = iter(_runs(_rows(self.cores, offsets[1][kept], self.core_counts[kept]), self.core_counts[kept].tolist()))
        shapes, at, make = self.shapes, 0, tuple.__new__
        for (task_id, start, end, arrival), number, count, index in zip(
            times, shape, block_counts.tolist(), core_index.tolist(), strict=True
        ):
            # the shape's fields (its own ids, times, cores and blocks are not the task's: _)
            (device, stream, _, sq, kind, name, dim, _, _, _, pipes, hit, read, written, status, _,
             args, outs, work, core, _, copy, gone) = shapes[number]  # fmt: skip
            if count == 1 and index < 0:  # one block, and the cores its one core (the common case)
                block = blocks[at]
                spans: tuple[tuple[int, int, int], ...] = (block,)
                used: tuple[int, ...] = (block[0],)
                at += 1
            else:
                spans = tuple(blocks[at : at + count])
                at += count
                if index >= 0:
                    used = next(own)
                    if kind == SDMA:
                        spans = tuple((engine, start, end) for engine in used)
                else:
                    used = tuple(dict.fromkeys(block[0] for block in spans))
            yield make(  # a TaskRecord without _make's overhead
                TaskRecord,
                (
                    device, stream, task_id, sq, kind, name, dim, start, end, used, pipes, hit, read, written,
                    status, arrival, args, outs, work, core, spans, copy, gone,
                ),
            )  # fmt: skip


def _starts(counts: Ints) -> Ints:
    """Where each run of `counts` items starts when the runs lie one after another."""
    starts = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return starts


def _rows(items: Ints, starts: Ints, counts: Ints) -> list[Any]:
    """The items of the runs at starts (counts long), one run after another, as Python values."""
    if not counts.any():
        return []
    first = np.repeat(starts - np.cumsum(counts) + counts, counts)
    return items[first + np.arange(int(counts.sum()))].tolist()  # type: ignore[no-any-return]


def _runs(items: list[Any], counts: list[int]) -> list[tuple[Any, ...]]:
    """items cut into tuples of counts items."""
    result, at = [], 0
    for count in counts:
        result.append(tuple(items[at : at + count]))
        at += count
    return result


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
