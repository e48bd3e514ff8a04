"""TaskRecord: what every task leaves behind on the modelled timeline (profiling reads these)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cannrt.abi import RECORD_MEMSET, KernelSqe, SdmaOp, SdmaSqe, SqeType, TaskRecord

if TYPE_CHECKING:
    from cannrt.abi import Work
    from cannrt.device.task import Task


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
