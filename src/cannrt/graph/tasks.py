"""Task generation (GE's TaskGenerator): per lowered launch a KERNEL task, per pruned cross-stream edge
an EVENT_RECORD / EVENT_WAIT pair, and MEMCPY_ASYNC tasks for outputs no kernel writes.

With several streams the list opens with a fork (stream 0 records, every other stream waits: the
model's streams start where the caller's stream reached execute) and closes with a join (every other
stream records, stream 0 waits), so the model is done when stream 0 is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cannrt.dtypes import acl_code
from cannrt.graph.errors import GraphError
from cannrt.graph.ir import nbytes
from cannrt.graph.lowering import Lowered, Node, Value
from cannrt.graph.memory import FeatureMapPlan, WeightSection
from cannrt.graph.streams import Schedule
from cannrt.om import (
    EventRecordTask,
    EventWaitTask,
    KernelTask,
    MemcpyTask,
    PlannedTensor,
    Section,
    Task,
    TensorRef,
)


@dataclass(frozen=True)
class TaskList:
    tasks: tuple[Task, ...]
    plan: tuple[PlannedTensor, ...]
    num_events: int
    node_tasks: tuple[tuple[int, ...], ...]  # task node -> indices of its kernel tasks


def generate(
    nodes: Sequence[Node],
    lowered: Sequence[Lowered],
    sched: Schedule,
    fm: FeatureMapPlan,
    values: Mapping[str, Value],
    constants: Mapping[str, np.ndarray],
    weights: WeightSection,
    outputs: Sequence[str],
) -> TaskList:
    """The gear's task list in submission order, and its memory plan in task indices."""
    scratch = {v.name: v for low in lowered for v in low.scratch}

    def ref(name: str) -> TensorRef:
        value = values.get(name) or scratch.get(name)
        if value is None:
            raise GraphError(f"a kernel argument names {name!r}, which is no tensor of the graph")
        if name in constants:
            return TensorRef(Section.WEIGHT, weights.place(name, constants[name]), acl_code(value.dtype), value.shape)
        place = fm.places[name]
        return TensorRef(place.section, place.offset, acl_code(value.dtype), value.shape, place.index)

    tasks: list[Task] = []
    events = sched.num_events
    fork = join = -1
    if sched.num_streams > 1:
        fork, join = events, events + 1
        events += sched.num_streams
        tasks.append(EventRecordTask(0, fork))
        tasks.extend(EventWaitTask(s, fork) for s in range(1, sched.num_streams))
    step_task: list[int] = []
    node_tasks: list[tuple[int, ...]] = []
    for n, (node, low) in enumerate(zip(nodes, lowered, strict=True)):
        stream = sched.stream[n]
        tasks.extend(EventWaitTask(stream, e) for e in sched.waits[n])
        mine = []
        for step in low.steps:
            args = tuple(ref(a) if isinstance(a, str) else a for a in step.args)
            mine.append(len(tasks))
            step_task.append(len(tasks))
            tasks.append(KernelTask(stream, step.kernel, step.block_dim, args, node.name, node.op_type))
        node_tasks.append(tuple(mine))
        record = sched.record[n]
        if record is not None:
            tasks.append(EventRecordTask(stream, record))
    for s in range(1, sched.num_streams):
        tasks.append(EventRecordTask(s, join + s - 1))
        tasks.append(EventWaitTask(0, join + s - 1))
    tasks.extend(_output_copies(outputs, values, constants, fm, ref))
    plan = _plan(fm, node_tasks, len(tasks))
    return TaskList(tuple(tasks), plan, events, tuple(node_tasks))


def _output_copies(outputs, values, constants, fm, ref) -> list[MemcpyTask]:  # type: ignore[no-untyped-def]
    """Outputs no kernel writes into their buffer: a constant, a model input, a repeated output."""
    copies = []
    for j, name in enumerate(outputs):
        place = fm.places.get(name)
        if place is not None and place.section == Section.OUTPUT and place.index == j:
            continue
        value = values[name]
        size = nbytes(value)
        if size == 0:
            continue
        dst = TensorRef(Section.OUTPUT, 0, acl_code(value.dtype), value.shape, j)
        copies.append(MemcpyTask(0, ref(name), dst, size, node=f"output:{name}"))
    return copies


def _plan(fm: FeatureMapPlan, node_tasks: Sequence[tuple[int, ...]], count: int) -> tuple[PlannedTensor, ...]:
    """The feature-map buffers (first task writing, last task reading), then the I/O blocks."""
    planned = []
    for t in fm.lifetimes:
        first = node_tasks[t.writer][0] if node_tasks[t.writer] else 0
        last = node_tasks[t.last_reader][-1] if node_tasks[t.last_reader] else first
        planned.append(PlannedTensor(t.name, fm.offsets[t.name], t.size, first, last, t.stream))
    for name, offset, size in fm.io_blocks:
        planned.append(PlannedTensor(name, offset, size, 0, max(count - 1, 0), 0))
    return tuple(planned)
