"""What the device leaves behind for the tools: task records, exception records, dump records."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import NamedTuple

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
