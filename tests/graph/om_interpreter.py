"""A reference executor of an OfflineModel in numpy (tests only): the task list run in list order on
byte arrays standing for the work, weight and I/O sections, each kernel's own numpy compute called
on views at the planned offsets. A memory plan that lets two live tensors share bytes, a wrong
offset or a missing copy shows up as wrong numbers here, before any device runs the model.

`happens_before(tasks)` recomputes, from the task list alone, which kernel tasks are ordered before
which (stream order plus event record / wait), for the cross-stream plan checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from cannrt.dtypes import numpy_dtype
from cannrt.kernels import get_kernel
from cannrt.om import (
    EventRecordTask,
    EventWaitTask,
    Gear,
    KernelTask,
    MemcpyTask,
    OfflineModel,
    Section,
    Task,
    TensorRef,
)


def run(model: OfflineModel, inputs: Sequence[np.ndarray], gear: int = 0) -> list[np.ndarray]:
    """The model's outputs for `inputs` (arrays in the model's input order and dtypes)."""
    g: Gear = model.gears[gear]
    work = np.full(g.work_size, 0xCD, np.uint8)  # garbage, not zeros: reads of unwritten bytes show
    weights = np.frombuffer(model.weights, np.uint8).copy()
    ins = [np.ascontiguousarray(x).reshape(-1).view(np.uint8).copy() for x in inputs]
    outs = [
        np.zeros(math.prod(shape) * numpy_dtype(io.dtype).itemsize, np.uint8)
        for shape, io in zip(g.output_shapes, model.outputs, strict=True)
    ]

    def view(ref: TensorRef) -> np.ndarray:
        base = {Section.WORK: work, Section.WEIGHT: weights}.get(ref.section)
        if base is None:
            base = (ins if ref.section == Section.INPUT else outs)[ref.index]
        dtype = numpy_dtype(ref.dtype)
        count = math.prod(ref.shape)
        end = ref.offset + count * dtype.itemsize
        assert end <= base.size, f"{ref} beyond its section of {base.size} bytes"
        return base[ref.offset : end].view(dtype).reshape(ref.shape)

    for task in g.tasks:
        if isinstance(task, KernelTask):
            kernel = get_kernel(task.kernel)
            args = [view(a) if isinstance(a, TensorRef) else a for a in task.args]
            kernel.compute(*args)
        elif isinstance(task, MemcpyTask):
            src = view(task.src).reshape(-1).view(np.uint8)
            dst = view(task.dst).reshape(-1).view(np.uint8)
            dst[: task.nbytes] = src[: task.nbytes]
    return [
        buf.view(numpy_dtype(io.dtype)).reshape(shape).copy()
        for buf, io, shape in zip(outs, model.outputs, g.output_shapes, strict=True)
    ]


def happens_before(tasks: Sequence[Task], num_streams: int) -> list[list[int]]:
    """Per task, a vector clock: clock[t][s] = the highest index of a stream-s task complete before
    task t starts (-1 for none), from stream order and event record / wait in list order."""
    last_on: list[int] = [-1] * num_streams
    stream_clock = [[-1] * num_streams for _ in range(num_streams)]
    recorded: dict[int, list[int]] = {}
    clocks: list[list[int]] = []
    for t, task in enumerate(tasks):
        s = task.stream
        clock = stream_clock[s]
        if isinstance(task, EventWaitTask):
            seen = recorded.get(task.event)
            if seen is not None:
                stream_clock[s] = clock = [max(a, b) for a, b in zip(clock, seen, strict=True)]
        clocks.append(list(clock))
        after = list(clock)
        after[s] = t
        if isinstance(task, EventRecordTask):
            recorded[task.event] = list(after)
        stream_clock[s] = after
        last_on[s] = t
    return clocks


def ordered(clocks: Sequence[Sequence[int]], tasks: Sequence[Task], before: int, after: int) -> bool:
    """Whether task `before` completes before task `after` starts."""
    return clocks[after][tasks[before].stream] >= before
