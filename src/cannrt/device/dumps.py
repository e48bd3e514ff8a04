"""Dump records the worker fills: a kernel's tensors before and after it runs, and what can be read
of a failing kernel's tensors (the exception dump)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from cannrt.abi import DumpRecord, DumpTensor, TensorArg, tensor_nbytes
from cannrt.device.memory import AddressSpace, DeviceFault

if TYPE_CHECKING:
    from cannrt.device.task import Task


def new_dump(device_id: int, task: Task, kernel_name: str, exception: bool = False) -> DumpRecord:
    """An empty dump record of a kernel task (its scalar arguments kept)."""
    sqe = task.sqe
    scalars = tuple((i, a) for i, a in enumerate(task.args) if not isinstance(a, TensorArg))
    return DumpRecord(
        device_id, sqe.stream_id, task.task_id, task.sq.sq_id, kernel_name, scalars=scalars, exception=exception
    )


def input_dump(device_id: int, task: Task, kernel_name: str, values: list[object]) -> DumpRecord:
    """A dump record of a kernel task holding its inputs as they are now."""
    record = new_dump(device_id, task, kernel_name)
    assert task.kernel is not None
    capture(record, task.args, values, task.kernel.outputs, "input")
    return record


def capture(
    record: DumpRecord, args: tuple[object, ...], values: list[object], outputs: tuple[int, ...], role: str
) -> None:
    """Copy the inputs (before the kernel) or the outputs (after it) into the dump record."""
    for index, (arg, value) in enumerate(zip(args, values, strict=True)):
        if isinstance(arg, TensorArg) and (index in outputs) == (role == "output"):
            data = value.tobytes() if isinstance(value, np.ndarray) else None
            record.tensors.append(DumpTensor(index, role, arg.dtype, arg.shape, arg.address, data))


@functools.lru_cache(maxsize=1024)  # per launch shape: the fetcher hands out one tuple per parameter block
def writes_an_input(args: tuple[object, ...], outputs: tuple[int, ...]) -> bool:
    """True if an output tensor's bytes overlap an input tensor's (an in-place kernel): only then
    do its inputs have to be copied before it runs to be dumped as they were."""
    ranges = [
        (index in outputs, arg.address, arg.address + tensor_nbytes(arg))
        for index, arg in enumerate(args)
        if isinstance(arg, TensorArg)
    ]
    return any(
        start < other_end and other_start < end
        for written, start, end in ranges
        if written
        for read, other_start, other_end in ranges
        if not read
    )


def exception_dump(device_id: int, task: Task, space: AddressSpace) -> DumpRecord:
    """Every tensor argument of a failed kernel that can still be read (the faulting one: None)."""
    assert task.kernel is not None
    record = new_dump(device_id, task, task.kernel.name, exception=True)
    for index, arg in enumerate(task.args):
        if not isinstance(arg, TensorArg):
            continue
        role = "output" if index in task.kernel.outputs else "input"
        try:
            parts = space.segments(arg.address, tensor_nbytes(arg), "read")
            data: bytes | None = b"".join(p.tobytes() for p in parts)
        except DeviceFault:
            data = None
        record.tensors.append(DumpTensor(index, role, arg.dtype, arg.shape, arg.address, data))
    return record
