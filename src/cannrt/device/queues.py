"""Submission queues (SQE rings the host writes) and completion queues (reports the device writes)."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from cannrt.abi import CQE

if TYPE_CHECKING:
    from cannrt.device.task import Task


class SubmissionQueue:
    """A ring of 64-byte SQEs bound to one stream; head is the device's fetch position."""

    __slots__ = (
        "arrival_ns", "asid", "closed", "cq_id", "depth", "failed_code", "fetched",
        "model_busy", "model_head", "model_queue", "priority", "real_queue", "ring", "rung", "sq_id",
        "stop_on_error", "stream_id", "tail",
    )  # fmt: skip

    def __init__(self, sq_id: int, depth: int, stream_id: int, asid: int, priority: int, cq_id: int) -> None:
        self.sq_id = sq_id
        self.depth = depth
        self.stream_id = stream_id
        self.asid = asid  # address space whose memory the tasks may touch
        self.priority = priority  # smaller is more urgent
        self.cq_id = cq_id
        self.stop_on_error = False
        self.ring: list[bytes] = [b""] * depth  # one 64-byte SQE per slot
        self.arrival_ns = [0] * depth  # doorbell time of each entry
        self.tail = 0  # host: entries written (monotonic)
        self.fetched = 0  # device: entries decoded (monotonic)
        self.rung = False  # in the device's doorbell list, not fetched yet
        # device-side state (guarded by the device lock)
        self.real_queue: deque[Task] = deque()  # fetched, not yet executed for real
        self.model_queue: deque[Task] = deque()  # fetched, not yet dispatched on the timeline
        self.model_busy = False
        self.model_head = 0  # tasks completed on the modelled timeline (the SQ head register)
        self.failed_code = 0  # stop-on-error: first error, later tasks are discarded
        self.closed = False


class CompletionQueue:
    """Completion reports in order of modelled completion."""

    def __init__(self, cq_id: int) -> None:
        self.cq_id = cq_id
        self.reports: deque[bytes] = deque()

    def post(self, *fields: int) -> None:
        """Write one report (device side)."""
        self.reports.append(CQE.pack(*fields))

    def take(self, count: int) -> bytes:
        """Remove up to count reports (host side)."""
        out: list[bytes] = []
        while self.reports and len(out) < count:
            out.append(self.reports.popleft())
        return b"".join(out)
