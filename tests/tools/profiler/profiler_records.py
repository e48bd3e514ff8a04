"""Hand-built task records with known pipe times, for the formula tests."""

from __future__ import annotations

from cannrt.abi import CoreKind, PipeTimes, SqeType, TaskRecord, TensorArg, Work

FP16, FP32 = 1, 0


def kernel_record(
    *,
    stream: int = 1,
    task: int = 0,
    start: int = 0,
    end: int = 1300,
    pipes: PipeTimes | None = None,
    work: Work | None = None,
    blocks: tuple[tuple[int, int, int], ...] = ((0, 300, 1300), (1, 300, 1300)),
    core_kind: int = CoreKind.AICORE,
    l2_hit: float = 0.0,
    name: str = "matmul",
    args: tuple[object, ...] = (),
    outputs: tuple[int, ...] = (),
) -> TaskRecord:
    """A finished kernel task: by default 2 blocks of 1000 ns on AI cores 0 and 1."""
    pipes = pipes or PipeTimes(2000.0, 0.0, 100.0, 1000.0, 500.0, 2000.0)
    work = work or Work(cube_flops=1e6, bytes_read=185 * 512, bytes_written=209 * 400)
    return TaskRecord(
        0,
        stream,
        task,
        stream,
        SqeType.KERNEL,
        name,
        len(blocks),
        start,
        end,
        tuple(b[0] for b in blocks),
        pipes,
        l2_hit,
        work.bytes_read,
        work.bytes_written,
        0,
        arrival_ns=start,
        args=args,
        outputs=outputs,
        work=work,
        core_kind=core_kind,
        blocks=blocks,
    )


def other_record(sqe_type: int, *, stream: int = 1, task: int = 0, start: int = 0, end: int = 100) -> TaskRecord:
    """A non-kernel task (event, copy, callback)."""
    return TaskRecord(
        0,
        stream,
        task,
        stream,
        sqe_type,
        SqeType(sqe_type).name,
        0,
        start,
        end,
        (),
        None,
        0.0,
        0,
        0,
        0,
        arrival_ns=start,
    )


def tensor(address: int, shape: tuple[int, ...], dtype: int = FP16) -> TensorArg:
    """A tensor argument."""
    return TensorArg(address, dtype, shape)


def task_slices(trace: dict) -> list[dict]:
    """The task slices of a Chrome trace: X events on a device's stream tracks."""
    from cannrt.tools.profiler.trace import AI_CORE_TID, DEVICE_PID

    return [
        e
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["pid"] >= DEVICE_PID and e.get("tid", e["pid"]) < AI_CORE_TID
    ]
