"""64-byte SQEs: the task descriptors the runtime writes into an SQ ring and the device decodes.

Header (CANN task scheduler): byte0 = type:6, l1Lock:1, l1Unlock:1; byte1 = ie:2, preP:2, postP:2,
wrCqe:1, reserved:1; u16 blockDim; u16 streamId; u16 taskId. Bodies per type below; pack_sqe and
decode_sqe go by field name through the NamedTuples.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

SQE_BYTES = 64
TASK_ID_AT = 6  # byte offset of the 16-bit task id in every SQE header
TASK_ID_BYTES = tuple(i.to_bytes(2, "little") for i in range(1 << 16))  # little-endian task ids
ADDRESS_MASK = (1 << 48) - 1  # PC and param addresses are 48-bit


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


WR_CQE = 0x40  # byte1 bit 6: write a completion report even on success
DUMP = 0x80  # byte1 bit 7 (reserved in the CANN header): dump this kernel's tensors

SQE_HEADER = struct.Struct("<BBHHH")
KERNEL_SQE = struct.Struct("<BBHHH BBBB I Q Q 32x")  # qos, credit, prefetch, core kind, param size, pc, param
EVENT_SQE = struct.Struct("<BBHHH I B 3x Q 40x")  # event id, mode, value
SDMA_SQE = struct.Struct("<BBHHH B B 2x I Q Q Q 24x")  # op, kind, memset value, src, dst, length
CALLBACK_SQE = struct.Struct("<BBHHH I B 51x")  # callback id, block
SQE_WORDS = struct.Struct("<16I")  # an SQE as the 16 words an exception report prints
for _layout in (KERNEL_SQE, EVENT_SQE, SDMA_SQE, CALLBACK_SQE, SQE_WORDS):
    assert _layout.size == SQE_BYTES


class DescriptorError(ValueError):
    """Bytes that are not a valid SQE or parameter block."""


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
    """A copy or memset on an SDMA engine; kind is a CopyKind."""

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


class RawSqe(NamedTuple):
    """The header of an SQE whose type the device cannot execute."""

    sqe_type: int
    flags: int
    block_dim: int
    stream_id: int
    task_id: int


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


def pack_sqe(sqe: Sqe) -> bytes:
    """Pack a descriptor into its 64 bytes."""
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


def decode_header(data: bytes | memoryview, offset: int = 0) -> RawSqe:
    """Only the common 8-byte header of an SQE."""
    byte0, flags, block_dim, stream_id, task_id = SQE_HEADER.unpack_from(data, offset)
    return RawSqe(byte0 & 0x3F, flags, block_dim, stream_id, task_id)
