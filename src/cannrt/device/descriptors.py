"""Hardware formats: 64-byte SQEs, completion reports and kernel parameter blocks.

The device owns these layouts (it decodes bytes); the driver and runtime import them to pack.
Header (CANN task scheduler): byte0 = type:6, l1Lock:1, l1Unlock:1; byte1 = ie:2, preP:2, postP:2,
wrCqe:1, reserved:1; u16 blockDim; u16 streamId; u16 taskId.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from cannrt.kernels.cost import PipeTimes
    from cannrt.kernels.registry import Work

SQE_BYTES = 64


class SqeType(IntEnum):
    """SQE type field (byte 0, low 6 bits)."""

    KERNEL = 0
    AICPU = 1
    PLACE_HOLDER = 3  # host callback
    EVENT_RECORD = 4
    EVENT_WAIT = 5
    NOTIFY_RECORD = 6
    NOTIFY_WAIT = 7
    WRITE_VALUE = 8  # event reset
    SDMA = 11
    COND = 20
    INVALID = 63


class CoreKind(IntEnum):
    """Which engine a kernel SQE targets."""

    AICORE = 0  # cube cores
    AIVEC = 1  # vector cores


class EventMode(IntEnum):
    """How an event record/wait SQE treats the event slot."""

    TIMELINE = 0  # record: slot = max(slot, value); wait: slot >= value
    BINARY = 1  # record: slot = value; wait: slot != 0 (legacy events)


class SdmaOp(IntEnum):
    """SDMA operation."""

    COPY = 0
    MEMSET = 1


WR_CQE = 0x40  # byte1 bit 6
DUMP = 0x80  # byte1 bit 7 (reserved in the CANN header): dump this kernel's tensors

KERNEL_SQE = struct.Struct("<BBHHH BBBB I Q Q 32x")  # qos, credit, prefetch, core kind, param size, pc, param
EVENT_SQE = struct.Struct("<BBHHH I B 3x Q 40x")  # event id, mode, value
SDMA_SQE = struct.Struct("<BBHHH B B 2x I Q Q Q 24x")  # op, kind, memset value, src, dst, length
CALLBACK_SQE = struct.Struct("<BBHHH I B 51x")  # callback id, block
for _layout in (KERNEL_SQE, EVENT_SQE, SDMA_SQE, CALLBACK_SQE):
    assert _layout.size == SQE_BYTES


class KernelSqe(NamedTuple):
    """A kernel launch (AI core, vector core or AI CPU)."""

    sqe_type: int
    flags: int
    block_dim: int
    stream_id: int
    task_id: int
    qos: int
    kernel_credit: int
    prefetch: int
    core_kind: int
    param_size: int
    pc: int
    param: int


class EventSqe(NamedTuple):
    """An event record, event wait or write-value (event reset)."""

    sqe_type: int
    flags: int
    block_dim: int
    stream_id: int
    task_id: int
    event_id: int
    mode: int
    value: int


class SdmaSqe(NamedTuple):
    """A copy or memset on an SDMA engine."""

    sqe_type: int
    flags: int
    block_dim: int
    stream_id: int
    task_id: int
    op: int
    kind: int
    memset_value: int
    src: int
    dst: int
    length: int


class CallbackSqe(NamedTuple):
    """A host callback placeholder: the device reports, the host runs the function."""

    sqe_type: int
    flags: int
    block_dim: int
    stream_id: int
    task_id: int
    callback_id: int
    block: int


Sqe = KernelSqe | EventSqe | SdmaSqe | CallbackSqe

_LAYOUTS: dict[int, tuple[struct.Struct, type[Sqe]]] = {
    SqeType.KERNEL: (KERNEL_SQE, KernelSqe),
    SqeType.AICPU: (KERNEL_SQE, KernelSqe),
    SqeType.PLACE_HOLDER: (CALLBACK_SQE, CallbackSqe),
    SqeType.EVENT_RECORD: (EVENT_SQE, EventSqe),
    SqeType.EVENT_WAIT: (EVENT_SQE, EventSqe),
    SqeType.NOTIFY_RECORD: (EVENT_SQE, EventSqe),
    SqeType.NOTIFY_WAIT: (EVENT_SQE, EventSqe),
    SqeType.WRITE_VALUE: (EVENT_SQE, EventSqe),
    SqeType.SDMA: (SDMA_SQE, SdmaSqe),
}
ADDRESS_MASK = (1 << 48) - 1
# copy kinds in an SDMA SQE (aclrtMemcpyKind)
MEMCPY_HOST_TO_HOST = 0
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEVICE_TO_DEVICE = 3


class DescriptorError(ValueError):
    """An SQE the device cannot decode."""


def pack_sqe(sqe: Sqe) -> bytes:
    """Pack a descriptor into its 64 bytes (the runtime's hot path packs directly instead)."""
    layout, _ = _LAYOUTS[sqe.sqe_type]
    return layout.pack(*sqe)


def decode_sqe(data: bytes | memoryview, offset: int = 0) -> Sqe:
    """Decode the 64-byte SQE at offset; DescriptorError for unknown types."""
    sqe_type = data[offset] & 0x3F
    try:
        layout, cls = _LAYOUTS[sqe_type]
    except KeyError:
        raise DescriptorError(f"SQE type {sqe_type} is not supported by this task scheduler") from None
    fields = layout.unpack_from(data, offset)
    result: Sqe = tuple.__new__(cls, fields)  # a NamedTuple built without _make's overhead
    return result


# Completion report (logic CQE): streamId, taskId, errorCode, errorType, sqeType, sqId, sqHead,
# flags, start and end timestamps (device clock, ns).
CQE = struct.Struct("<HHIBBHIH2xQQ4x")
CQE_BYTES = CQE.size


class Cqe(NamedTuple):
    """One completion report."""

    stream_id: int
    task_id: int
    error_code: int
    error_type: int
    sqe_type: int
    sq_id: int
    sq_head: int
    flags: int
    start_ns: int
    end_ns: int


def decode_cqes(data: bytes) -> list[Cqe]:
    """Decode a buffer of packed completion reports."""
    return [Cqe._make(fields) for fields in CQE.iter_unpack(data)]


# Kernel parameter block: u16 argc, then per argument a tag byte and its payload.
ARG_TENSOR = 0  # u8 dtype, u8 ndim, u64 address, ndim x u64 dims
ARG_INT = 1  # i64
ARG_FLOAT = 2  # f64
PARAM_HEAD = struct.Struct("<H")
TENSOR_HEAD = struct.Struct("<BBBQ")
SCALAR_INT = struct.Struct("<Bq")
SCALAR_FLOAT = struct.Struct("<Bd")
MAX_PARAM_BYTES = 512


class TensorArg(NamedTuple):
    """A tensor argument as the kernel sees it: device address, ACL dtype code, shape."""

    address: int
    dtype: int
    shape: tuple[int, ...]


ParamValue = TensorArg | int | float


def pack_params(args: list[ParamValue] | tuple[ParamValue, ...]) -> bytes:
    """Pack kernel arguments into a parameter block."""
    parts = [PARAM_HEAD.pack(len(args))]
    for arg in args:
        if isinstance(arg, TensorArg):
            parts.append(TENSOR_HEAD.pack(ARG_TENSOR, arg.dtype, len(arg.shape), arg.address))
            parts.append(struct.pack(f"<{len(arg.shape)}Q", *arg.shape))
        elif isinstance(arg, bool | int):
            parts.append(SCALAR_INT.pack(ARG_INT, int(arg)))
        else:
            parts.append(SCALAR_FLOAT.pack(ARG_FLOAT, float(arg)))
    block = b"".join(parts)
    if len(block) > MAX_PARAM_BYTES:
        raise DescriptorError(f"parameter block of {len(block)} bytes exceeds {MAX_PARAM_BYTES}")
    return block


def unpack_params(block: bytes) -> list[ParamValue]:
    """Decode a parameter block; DescriptorError on malformed bytes."""
    try:
        (argc,) = PARAM_HEAD.unpack_from(block, 0)
        offset = PARAM_HEAD.size
        args: list[ParamValue] = []
        for _ in range(argc):
            tag = block[offset]
            if tag == ARG_TENSOR:
                _, dtype, ndim, address = TENSOR_HEAD.unpack_from(block, offset)
                offset += TENSOR_HEAD.size
                shape = struct.unpack_from(f"<{ndim}Q", block, offset)
                offset += 8 * ndim
                args.append(TensorArg(address, dtype, shape))
            elif tag == ARG_INT:
                args.append(SCALAR_INT.unpack_from(block, offset)[1])
                offset += SCALAR_INT.size
            elif tag == ARG_FLOAT:
                args.append(SCALAR_FLOAT.unpack_from(block, offset)[1])
                offset += SCALAR_FLOAT.size
            else:
                raise DescriptorError(f"unknown argument tag {tag} at byte {offset}")
        return args
    except (struct.error, IndexError) as exc:
        raise DescriptorError(f"malformed parameter block: {exc}") from None


class RawSqe(NamedTuple):
    """The header of an SQE whose type the device cannot execute."""

    sqe_type: int
    flags: int
    block_dim: int
    stream_id: int
    task_id: int


SQE_HEADER = struct.Struct("<BBHHH")


def decode_header(data: bytes | memoryview, offset: int = 0) -> RawSqe:
    """Only the common 8-byte header of an SQE."""
    byte0, flags, block_dim, stream_id, task_id = SQE_HEADER.unpack_from(data, offset)
    return RawSqe(byte0 & 0x3F, flags, block_dim, stream_id, task_id)


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
    error_type: int  # aclrtErrorType
    error_bits: tuple[str, ...]  # e.g. MTE_READ_OVERFLOW
    pc_start: int
    pc_current: int
    para_base: int
    message: str
    kernel_name: str
    registers: dict[str, int] = field(default_factory=dict)
    sqe_words: tuple[int, ...] = ()
    timestamp_ns: int = 0


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
    copy_kind: int = -1  # memcpy kind of an SDMA copy, -2 for a memset, -1 otherwise
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
