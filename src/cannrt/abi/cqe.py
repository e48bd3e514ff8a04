"""Completion reports (logic CQEs) the device writes into a CQ and the runtime reads."""

from __future__ import annotations

import struct
from typing import NamedTuple

# streamId, taskId, errorCode, errorType, sqeType, sqId, sqHead, flags, start and end timestamps
# (device clock, ns)
CQE = struct.Struct("<HHIBBHIH2xQQ4x")
CQE_BYTES = CQE.size
CQE_DISCARDED = 0x1  # flags: the task was discarded (stop-on-error, destroy_force), not run


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
