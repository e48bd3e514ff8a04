"""A task as the device holds it after fetching its SQE (both the real and the modelled view)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cannrt.abi import DumpRecord, ExceptionRecord

if TYPE_CHECKING:
    from cannrt.abi import ParamValue, Sqe
    from cannrt.device.queues import SubmissionQueue
    from cannrt.kernels.registry import Kernel


# the blocks of a one-block kernel traced: its block is on cores[0] from block_at to block_end
# (two slots set while placing it, no tuples made per task)
ONE_BLOCK: tuple[tuple[int, int, int], ...] = ((-1, -1, -1),)


class Task:
    """One fetched SQE with the state both executions keep about it."""

    block_at: int  # the block of a task whose blocks is ONE_BLOCK (unset otherwise)
    block_end: int

    __slots__ = (
        "args",
        "arrival_ns",
        "aux",
        "block_at",
        "block_end",
        "blocks",
        "cores",
        "discarded",
        "dump",
        "end_ns",
        "fault",
        "kernel",
        "position",
        "real_done",
        "released",
        "sq",
        "sqe",
        "sqe_bytes",
        "start_ns",
        "status",
        "task_id",
    )

    def __init__(
        self,
        sq: SubmissionQueue,
        position: int,
        sqe: Sqe,
        sqe_bytes: bytes,
        arrival_ns: int,
        task_id: int,
        kernel: Kernel | None = None,
        args: tuple[ParamValue, ...] = (),
    ) -> None:
        self.sq = sq
        self.position = position  # index in the SQ (monotonic); head becomes position + 1 on completion
        # the decoded SQE may be shared by the tasks of one repeated template: its own id is here
        self.sqe = sqe
        self.task_id = task_id
        self.sqe_bytes = sqe_bytes
        self.arrival_ns = arrival_ns
        self.kernel = kernel  # the code at a kernel SQE's PC
        self.args = args  # its decoded parameter block
        self.real_done = False
        self.released = False  # an event wait the timeline found satisfied (the worker may run it)
        self.status = 0  # ACL error code, 0 = success
        self.discarded = False
        self.fault: ExceptionRecord | None = None
        self.start_ns = 0
        self.end_ns = 0
        self.cores: tuple[int, ...] = ()
        self.blocks: tuple[tuple[int, int, int], ...] = ()  # (core, start, end) when tracing, or ONE_BLOCK
        self.dump: DumpRecord | None = None  # tensors captured for a data or exception dump
        self.aux: Any = None  # kernels: (pipe times, L2 hit rate, work) from their costing
